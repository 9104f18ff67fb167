"""Whole networks beside kernels in a calibration (``infercast calibrate``): a few design-space
configs measured here correct the kind factors where one-kernel networks mislead.

One-kernel networks say how a kind of kernel runs alone. Inside a network it may gain more or
less: on a 2-core Xeon (Emerald Rapids), measured in one campaign with the Zen 4 host's kernel
networks, dense convolutions ran 0.78× the Zen 4's times alone, while the real networks ran
0.77× the Zen 4 host's predictions, and the per-kind factors that fit them best gave dense
convolutions ×0.70 against the kernel networks' ×0.86 (benchmarks/kernel_gap.py). So a
calibration on a machine unlike its host's also measures configs of the built-in design spaces at
224², batch 1 (``carb-resnet`` and ``mobile-nas``, chosen in ``api.calibrating``; never a zoo
network, whose measurements are the test), and refits the kind factors on them: each config's
prediction split by the kinds of its kernels (the host's op-wise kernel predictions, as a
prediction's mix is), the factors those parts are scaled by minimise Σ ((parts · f − y) / y)² +
``pull`` ‖f − f_kernels‖² — the kernel networks' factors the prior a few configs move, and keep
where the configs do not tell (a kind they hardly hold).

How far the configs may move the factors is chosen by the configs themselves: refitted on one
design space's configs, which weight predicts the other space's best (``PULLS``; an infinite one
keeps the kernel networks' factors). A real network is of neither space, so factors that carry
from one space to the other are the ones to trust. On the Zen 4 calibrated from the AVX2 EPYC
host for five minutes, three times, a fixed weight of 0.1 fitted the configs of one space so
closely that it predicted the other's worse than the kernel networks' factors alone, each time.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from infercast.graph import Graph
    from infercast.predictors.devices.local import Calibration

# the prior's weights to choose among, in relative-error units; infinite: the kernels' factors kept
PULLS = (0.1, 1.0, 10.0, math.inf)
# with fewer configs of a space than this, one space cannot tell how well the other's carry
MIN_PER_SPACE = 3
# the weight where they cannot: on the Xeon, from the Zen 4 host with 10 configs, 0.1 left the real
# networks 7.9 % off at the median of 40 draws, 1.0 9.8 %, kernels alone 16.4 %
PULL = 0.1
# what the factor of the kernels of no measured kind is called among the fitted ones
OVERALL = ""


def kind_parts(calibration: Calibration, graphs: list[Graph]) -> pd.DataFrame:
    """Each graph's prediction from the calibration's host split by the kinds the calibration
    measured (a column each; ``OVERALL`` for kernels of a kind it did not measure): its kernels'
    predicted times of each kind, scaled to sum to the host's prediction."""
    from infercast.predictors.devices.local import LocalDevice

    device = LocalDevice(calibration)
    times = device.kind_times(graphs)
    # each kernel's kind as the calibration measured it (a layout class it did not: its kind's)
    names = [(calibration.measured_kind(kind or None) or OVERALL) for kind in times.columns]
    times = times.T.groupby(names).sum().T
    base = device.host.predict_graphs(graphs)["latency_ms"].to_numpy()
    total = np.clip(times.to_numpy().sum(axis=1, keepdims=True), 1e-12, None)
    return pd.DataFrame(base[:, None] * times.to_numpy() / total, columns=times.columns)


def refit(
    calibration: Calibration, graphs: list[Graph], here_ms: np.ndarray, spaces: list[str] | None = None
) -> Calibration:
    """``calibration`` with its kind factors (and its overall factor, for kinds it did not
    measure) refitted on configs measured here: their captured ``graphs``, latencies ``here_ms``
    and design ``spaces`` (which choose how far they move the factors: ``choose_pull``);
    ``networks`` says how many, ``pull`` how far (None: the kernel networks' factors kept)."""
    if not graphs:
        return calibration
    frame = kind_parts(calibration, graphs)
    parts = frame.to_numpy()
    prior = np.array([calibration.kind_factor(kind or None) for kind in frame.columns])
    y = np.asarray(here_ms, dtype=np.float64)
    pull = choose_pull(parts, y, prior, spaces)
    if math.isinf(pull):
        return replace(calibration, networks=len(graphs), pull=None)
    fitted = dict(zip(frame.columns, fitted_factors(parts, y, prior, pull).tolist(), strict=True))
    kinds = {
        kind: {**figures, "factor": fitted.get(kind, figures["factor"])}
        for kind, figures in calibration.kinds.items()
    }
    return replace(
        calibration,
        kinds=kinds,
        factor=fitted.get(OVERALL, calibration.factor),
        networks=len(graphs),
        pull=pull,
    )


def fitted_factors(parts: np.ndarray, y: np.ndarray, prior: np.ndarray, pull: float) -> np.ndarray:
    """The non-negative factors minimising Σ ((parts · f − y) / y)² + pull ‖f − prior‖²."""
    from scipy.optimize import nnls

    if math.isinf(pull):
        return prior
    design = np.vstack([parts / y[:, None], np.sqrt(pull) * np.eye(len(prior))])
    target = np.concatenate([np.ones(len(y)), np.sqrt(pull) * prior])
    return nnls(design, target)[0]


def choose_pull(parts: np.ndarray, y: np.ndarray, prior: np.ndarray, spaces: list[str] | None) -> float:
    """The weight of ``PULLS`` whose factors, fitted on one design space's configs, predict the
    other spaces' with the least mean squared log error; ``PULL`` where some space has fewer than
    ``MIN_PER_SPACE`` configs (or none are named)."""
    names = np.asarray(spaces if spaces is not None else [""] * len(y))
    held_out = np.unique(names)
    if len(held_out) < 2 or min((names == name).sum() for name in held_out) < MIN_PER_SPACE:
        return PULL

    def error(pull: float) -> float:
        log_errors = []
        for name in held_out:
            factors = fitted_factors(parts[names != name], y[names != name], prior, pull)
            predicted = np.clip(parts[names == name] @ factors, 1e-12, None)
            log_errors.append(np.log(predicted / y[names == name]))
        return float(np.mean(np.concatenate(log_errors) ** 2))

    return min(PULLS, key=error)
