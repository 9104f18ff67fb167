"""How a target platform relates to source predictors: its log latency as a ridge-pulled,
non-negative combination of the sources' log predictions (``fit_log_weights``, scored by
``loo_log_residuals``), and which k configs to measure so that the fit sees the whole range
(``select_configs``). ``predictors.adapted`` combines trained blends this way, and
``predictors.devices.recalibrated`` a shipped device's Σ cost × work predictor.

A source is any fitted model-level predictor with ``predict(X, ood="none")`` giving the target
columns of ``cascade.TARGETS``, ``feature_names_`` and the platform in ``info``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from infercast.predictors.data import TARGETS, settings_columns
from infercast.predictors.errors import PredictorError

SELECTIONS = ("spread", "random")
ALPHAS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


def source_inputs(source: Any, x: pd.DataFrame) -> pd.DataFrame:
    """``x`` with the platform-setting columns the source was trained with (a 1-thread source
    predicts what its own platform would do, whatever the target's thread count)."""
    own = settings_columns(source.info.platform.settings)
    return x.assign(**{k: v for k, v in own.items() if k in source.feature_names_})


def source_logs(sources: Sequence[Any], x: pd.DataFrame, targets: Sequence[str]) -> dict[str, np.ndarray]:
    """Per target, an (n, n_sources) matrix of each source's log prediction; each source's
    cascade runs once for all the targets."""
    out = {target: np.empty((len(x), len(sources))) for target in targets}
    for i, source in enumerate(sources):
        predicted = source.predict(source_inputs(source, x), ood="none")
        for target in targets:
            values = predicted[TARGETS[target]].to_numpy(dtype=np.float64)
            out[target][:, i] = np.log(np.clip(values, 1e-12, None))
    return out


def source_log_predictions(sources: Sequence[Any], x: pd.DataFrame, target: str) -> np.ndarray:
    """An (n, n_sources) matrix of each source's log prediction of ``target``."""
    return source_logs(sources, x, [target])[target]


def select_configs(
    sources: Sequence[Any],
    x: pd.DataFrame,
    k: int,
    method: str = "spread",
    seed: int = 0,
    target: str = "latency",
    source_log: np.ndarray | None = None,
) -> np.ndarray:
    """Row positions of the ``k`` configs of ``x`` to measure on the target device.

    ``spread``: greedy k-centre in the sources' standardised log predictions, started at the row
    nearest the median — the chosen configs cover the predicted range evenly, extremes included.
    ``random``: a uniform draw (what the comparison in the benchmark uses as the baseline).
    ``source_log``: the sources' log predictions of ``x``, when the caller has them."""
    if method not in SELECTIONS:
        raise PredictorError(f"selection={method!r}: choose among {', '.join(SELECTIONS)}")
    if not 1 <= k <= len(x):
        raise PredictorError(f"k={k!r}: need 1 ≤ k ≤ {len(x)} (the configs to choose from)")
    if method == "random":
        return np.sort(np.random.default_rng(seed).choice(len(x), k, replace=False))
    points = source_log_predictions(sources, x, target) if source_log is None else np.array(source_log)
    spread = points.std(axis=0)
    points = (points - points.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    chosen = [int(np.argmin(np.linalg.norm(points - np.median(points, axis=0), axis=1)))]
    distance = np.linalg.norm(points - points[chosen[0]], axis=1)
    while len(chosen) < k:
        nxt = int(np.argmax(distance))
        chosen.append(nxt)
        distance = np.minimum(distance, np.linalg.norm(points - points[nxt], axis=1))
    return np.sort(np.asarray(chosen))


def fit_log_weights(p: np.ndarray, z: np.ndarray, alpha: float) -> tuple[float, np.ndarray]:
    """Intercept and non-negative weights of ``z ≈ a + p w`` with ``alpha ‖w − 1/S‖²``."""
    n_sources = p.shape[1]
    prior = np.full(n_sources, 1.0 / n_sources)
    p_mean, z_mean = p.mean(axis=0), z.mean()
    design = np.vstack([p - p_mean, np.sqrt(alpha) * np.eye(n_sources)])
    target = np.concatenate([z - z_mean, np.sqrt(alpha) * prior])
    weights, _ = nnls(design, target)
    return float(z_mean - p_mean @ weights), weights


def loo_log_residuals(p: np.ndarray, z: np.ndarray, alpha: float) -> np.ndarray:
    out = np.empty(len(z))
    for i in range(len(z)):
        keep = np.arange(len(z)) != i
        intercept, weights = fit_log_weights(p[keep], z[keep], alpha)
        out[i] = z[i] - intercept - p[i] @ weights
    return out
