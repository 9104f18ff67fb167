"""The Σ cost × work estimator every shipped phone setting and host is (``predictors.physical``
on the device features), and its fit on a machine's design-space configs and kernel networks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from infercast.predictors.devices.features import BASE_FEATURES, SMALL_KERNEL_FEATURES
from infercast.predictors.physical import PhysicalLatency


def fit_configs_and_kernels(
    configs: pd.DataFrame,
    latency_ms: np.ndarray,
    spaces: np.ndarray,
    kernel_networks: pd.DataFrame,
    kernel_latency_ms: np.ndarray,
) -> PhysicalLatency:
    """``estimator()`` fitted on a machine's design-space configs (device features, latencies, their
    design space) and the one-kernel networks of its kernel campaigns, which teach the costs of
    kernels the spaces lack. The configs are held out a design space at a time when there are
    several (else one by one), the kernel networks spread over every fold; the configs alone
    score the choice of column and the interval: a network of many kernels is what is predicted.
    No kernel networks (empty) leaves the configs alone."""
    spaces = np.asarray(spaces, dtype=object)
    config_groups = spaces if len(set(spaces)) > 1 else np.array([f"config {i}" for i in range(len(spaces))])
    groups = np.concatenate(
        [config_groups, np.array([f"kernel network {i}" for i in range(len(kernel_networks))], dtype=object)]
    )
    x = pd.concat([configs, kernel_networks], ignore_index=True)
    y = np.concatenate([np.asarray(latency_ms), np.asarray(kernel_latency_ms)]).astype(np.float64)
    return estimator().fit(x, y, groups=groups, scored=np.arange(len(y)) < len(configs))


def estimator(n_folds: int = 5) -> PhysicalLatency:
    """The Σ cost × work estimator every shipped phone setting and host is (unfitted): the base
    device features, and one small-kernel column if grouped cross-validation keeps it."""
    return PhysicalLatency(BASE_FEATURES, candidates=SMALL_KERNEL_FEATURES, n_folds=n_folds)
