"""The cascade blend's fast screening models: per target one small XGBoost on the same detrended
target (fed by the earlier targets' *fast* predictions), and its margins — quantiles of its
held-out log residuals near the training rows and on folds that hold out a whole region, which
widen with a candidate's difficulty (``predictors.intervals``). A screening of millions predicts
with these and drops a candidate only beyond the margin."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from infercast.predictors.cascade import TargetModel, design, trend
from infercast.predictors.folds import stratified_folds
from infercast.predictors.intervals import calibrate
from infercast.predictors.learners import XGBoostLearner

MakeFast = Callable[[], XGBoostLearner]
Difficulty = Callable[[np.ndarray, np.ndarray], np.ndarray]


def fit_fast(
    model: TargetModel,
    full: np.ndarray,
    log_y: np.ndarray,
    rows: np.ndarray,
    labels: np.ndarray,
    make: MakeFast,
    n_folds: int,
    seed: int,
) -> np.ndarray:
    """Fit ``model.fast`` on the rows ``rows``; return its out-of-fold log predictions of them."""
    x, y = full[rows], log_y[rows]
    matrix = design(x, model.trend_index) if model.trend is not None else None
    oof = np.zeros(len(rows))
    for train, held in stratified_folds(labels[rows], n_folds, seed):
        coef = trend(matrix[train], y[train], True) if matrix is not None else None
        offset_train = matrix[train] @ coef if matrix is not None else 0.0
        offset_held = matrix[held] @ coef if matrix is not None else 0.0
        oof[held] = make().fit(x[train], y[train] - offset_train).predict(x[held]) + offset_held
    offset = matrix @ model.trend if matrix is not None else 0.0
    model.fast = make().fit(x, y - offset)
    return oof


def far_residuals(
    model: TargetModel,
    full: np.ndarray,
    log_y: np.ndarray,
    rows: np.ndarray,
    folds: list[Any],
    make: MakeFast,
    difficulty: Difficulty,
) -> tuple[np.ndarray, np.ndarray]:
    """The fast model's log residuals (and difficulties) on folds that hold out a whole region
    (``folds.extrapolation_folds``): how errors grow when the model extrapolates."""
    residuals, difficulties = [], []
    for train_all, held_all in folds:
        train = np.flatnonzero(np.isin(rows, train_all))
        held = np.flatnonzero(np.isin(rows, held_all))
        if len(train) < 20 or not len(held):
            continue
        x_train, x_held = full[rows[train]], full[rows[held]]
        offset_train, offset_held = 0.0, 0.0
        if model.trend is not None:
            design_train = design(x_train, model.trend_index)
            coef = trend(design_train, log_y[rows[train]], True)
            offset_train, offset_held = design_train @ coef, design(x_held, model.trend_index) @ coef
        fitted = make().fit(x_train, log_y[rows[train]] - offset_train)
        residuals.append(log_y[rows[held]] - fitted.predict(x_held) - offset_held)
        difficulties.append(difficulty(x_train, x_held))
    if not residuals:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(residuals), np.concatenate(difficulties)


def calibrate_fast(
    model: TargetModel,
    residual: np.ndarray,
    near: np.ndarray,
    far: np.ndarray,
    far_difficulty: np.ndarray,
    coverage: float,
) -> None:
    """The fast model's margins: ``β`` chosen as for the intervals (``predictors.intervals``),
    then per level the larger of the near and far quantiles of ``|r| / (1 + β·d)``."""
    beta = calibrate(residual, near, coverage, far, far_difficulty).beta
    levels = np.arange(1, 100) / 100
    model.fast_plain_q = [float(q) for q in np.quantile(np.abs(residual), levels)]
    quantiles = np.quantile(np.abs(residual) / (1 + beta * near), levels)
    if len(far):
        quantiles = np.maximum(quantiles, np.quantile(np.abs(far) / (1 + beta * far_difficulty), levels))
    model.fast_q, model.fast_beta = [float(q) for q in quantiles], float(beta)


def margin(model: TargetModel, risk: float, difficulty: np.ndarray | None) -> np.ndarray:
    """Log margins for the budget filter: a feasible candidate is discarded with probability
    about ``risk`` (one-sided), per row of ``difficulty`` (None: in-distribution)."""
    level = int(np.clip(round((1 - 2 * risk) * 100), 1, 99))
    d = np.ones(1) if difficulty is None else np.asarray(difficulty, dtype=np.float64)
    return model.fast_q[level - 1] * (1 + model.fast_beta * d)


def predict_fast(models: list[TargetModel], base: np.ndarray) -> dict[str, np.ndarray]:
    """Per target of ``models`` (in cascade order), the fast model's value (not log); each reads
    the earlier ones' log predictions after the ``base`` features."""
    out: dict[str, np.ndarray] = {}
    cascade: list[np.ndarray] = []
    for model in models:
        full = np.column_stack([base, *cascade]) if cascade else base
        log_pred = model.predict_fast_log(full)
        cascade.append(log_pred.astype(base.dtype))
        out[model.target] = np.exp(log_pred)
    return out
