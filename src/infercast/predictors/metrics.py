"""Accuracy figures reported for every predictor and baseline (docs/predict.md defines each)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def regression_metrics(
    truth: np.ndarray,
    predicted: np.ndarray,
    low: np.ndarray | None = None,
    high: np.ndarray | None = None,
) -> dict[str, Any]:
    """R² (on the raw scale and on logs), MAE, MAPE, RMSPE, share within ±5 % / ±10 %, Spearman,
    Kendall and, given interval bounds, their coverage and median relative width."""
    # SciPy's statistics load when something is scored: a prediction never scores
    from scipy import stats

    truth = np.asarray(truth, dtype=np.float64)
    predicted = np.asarray(predicted, dtype=np.float64)
    if truth.shape != predicted.shape or truth.size == 0:
        raise ValueError(f"need equal, non-empty arrays (truth {truth.shape}, predicted {predicted.shape})")
    relative = (predicted - truth) / truth
    out: dict[str, Any] = {
        "n": int(truth.size),
        "r2": _r2(truth, predicted),
        "r2_log": _r2(np.log(truth), np.log(np.clip(predicted, 1e-12, None))),
        "mae": float(np.mean(np.abs(predicted - truth))),
        "mape": float(np.mean(np.abs(relative)) * 100),
        "median_ape": float(np.median(np.abs(relative)) * 100),
        "rmspe": float(np.sqrt(np.mean(relative**2)) * 100),
        "within_5pct": float(np.mean(np.abs(relative) <= 0.05)),
        "within_10pct": float(np.mean(np.abs(relative) <= 0.10)),
        "spearman": _rank(stats.spearmanr, truth, predicted),
        "kendall": _rank(stats.kendalltau, truth, predicted),
    }
    if low is not None and high is not None:
        low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
        out["coverage"] = float(np.mean((truth >= low) & (truth <= high)))
        out["median_interval_width_pct"] = float(np.median((high - low) / predicted) * 100)
    return out


def _r2(truth: np.ndarray, predicted: np.ndarray) -> float:
    spread = np.sum((truth - truth.mean()) ** 2)
    return float(1 - np.sum((truth - predicted) ** 2) / spread) if spread > 0 else float("nan")


def _rank(function: Any, truth: np.ndarray, predicted: np.ndarray) -> float:
    if truth.size < 3 or np.ptp(truth) == 0 or np.ptp(predicted) == 0:
        return float("nan")
    return float(function(truth, predicted).statistic)


def score_target(
    y: pd.DataFrame, predicted: pd.DataFrame, column: str
) -> tuple[dict[str, Any], np.ndarray, np.ndarray] | None:
    """Metrics of ``predicted[column]`` (and its interval) against the measured rows of ``y``,
    with the truth and the mask of measured rows; None when ``y`` has none."""
    if column not in y.columns:
        return None
    truth = y[column].to_numpy(dtype=np.float64)
    keep = np.isfinite(truth) & (truth > 0)
    if keep.sum() == 0:
        return None
    metrics = regression_metrics(
        truth[keep],
        predicted[column].to_numpy()[keep],
        predicted[column + "_low"].to_numpy()[keep],
        predicted[column + "_high"].to_numpy()[keep],
    )
    return metrics, truth, keep


SCORE_ORDER = ("latency", "memory", "energy")


def log_r2_score(y: pd.DataFrame, predicted: pd.DataFrame, columns: list[str]) -> float:
    """R² of ``log(target)`` for the first of ``columns`` (target columns, in the order of
    ``SCORE_ORDER``) that ``y`` measures: the single figure ``score`` returns (logs, so a 10 % miss
    counts the same at 1 ms and at 1 s, as the learners are fitted)."""
    for column in columns:
        if column not in y.columns:
            continue
        truth = y[column].to_numpy(dtype=np.float64)
        keep = np.isfinite(truth) & (truth > 0)
        if keep.sum() >= 2:
            log_truth = np.log(truth[keep])
            log_pred = np.log(predicted[column].to_numpy(dtype=np.float64)[keep])
            total = np.sum((log_truth - log_truth.mean()) ** 2)
            return float(1 - np.sum((log_truth - log_pred) ** 2) / total) if total > 0 else float("nan")
    raise ValueError(f"y measures none of {columns}: nothing to score")
