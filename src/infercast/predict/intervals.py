"""Prediction intervals, one mechanism for every predictor: a split-conformal half-width on the
log scale from held-out (out-of-fold or leave-one-out) residuals, applied symmetrically in log
space, so ``[p·e^-q, p·e^q]`` covers a new point with probability ≥ ``coverage`` when it is
exchangeable with the held-out ones."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def conformal_quantile(residuals: np.ndarray, coverage: float) -> float:
    """The ⌈(n + 1)·coverage⌉-th smallest absolute residual (the largest when that rank exceeds n):
    the finite-sample split-conformal half-width."""
    ordered = np.sort(np.abs(np.asarray(residuals, dtype=np.float64)))
    if not len(ordered):
        raise ValueError("a conformal interval needs at least one held-out residual")
    rank = min(len(ordered), math.ceil((len(ordered) + 1) * coverage))
    return float(ordered[rank - 1])


def put_interval(out: pd.DataFrame, column: str, log_pred: np.ndarray, half_width: float | None) -> None:
    """``column`` and its ``_low`` / ``_high`` bounds from a log prediction; all NaN when the
    target is not predicted (``log_pred`` None)."""
    if half_width is None:
        for suffix in ("", "_low", "_high"):
            out[column + suffix] = np.nan
        return
    out[column] = np.exp(log_pred)
    out[column + "_low"] = np.exp(log_pred - half_width)
    out[column + "_high"] = np.exp(log_pred + half_width)
