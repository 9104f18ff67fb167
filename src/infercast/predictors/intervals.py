"""Prediction intervals, one mechanism for every predictor: a split-conformal half-width on the
log scale, applied symmetrically in log space (``[p·e^-h, p·e^h]``), that grows with how far the
input lies from the training rows:

    h(x) = q · (1 + β · d(x))

``d`` is ``OODDetector.difficulty``: the distance to the nearest training row in units of the
training rows' own typical spacing (≈ 1 inside the training distribution). ``q`` and ``β`` are
calibrated on two sets of held-out residuals, each with the ``d`` of its rows measured against the
rows that predicted it:

- **near**: out-of-fold residuals of folds like the training data (what a config of the profiled
  space meets);
- **far**: residuals of folds that hold out a whole region — a depth tier, an input size, a batch
  tier, an op-type mix — so the model extrapolates into it, as it will for a network nobody
  profiled.

For each ``β`` of a grid, ``q`` is the larger of the two sets' conformal quantiles of
``|r| / (1 + β·d)`` — so the interval holds at the nominal level near *and* far — and the ``β``
giving the narrowest mean width (near and far weighted alike) is kept. With no far residuals,
``β = 0``: the plain split-conformal interval, exchangeable held-out rows only.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

BETAS = (0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0)


def conformal_quantile(residuals: np.ndarray, coverage: float, groups: np.ndarray | None = None) -> float:
    """The ⌈(n + 1)·coverage⌉-th smallest absolute residual (the largest when that rank exceeds n):
    the finite-sample split-conformal half-width.

    With ``groups`` (architecture families, say) the exchangeable draws are the groups, not the
    rows: 30 MobileNets are one draw, not 30. Each group then weighs as one row (its residuals
    1 / size each) and the level is ``coverage · (G + 1) / G`` for G groups — the pooled-CDF
    interval of two-layer hierarchical conformal prediction (Dunn, Wasserman & Ramdas, 2022),
    which covers a member of a group never seen. One row per group gives the plain rank. With
    fewer groups than that level needs (G < coverage / (1 − coverage): fewer than 9 for 90 %) it
    would be the largest residual whatever the data, so the rows stand as the draws then (two design spaces
    held out in turn are two draws, not a calibration)."""
    absolute = np.abs(np.asarray(residuals, dtype=np.float64))
    if not len(absolute):
        raise ValueError("a conformal interval needs at least one held-out residual")
    if groups is not None and len(groups) != len(absolute):
        raise ValueError(f"{len(absolute)} residuals but {len(groups)} group labels")
    if groups is None or coverage * (len(np.unique(groups)) + 1) > len(np.unique(groups)) + 1e-9:
        ordered = np.sort(absolute)
        rank = min(len(ordered), math.ceil((len(ordered) + 1) * coverage))
        return float(ordered[rank - 1])
    _, members, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    order = np.argsort(absolute, kind="stable")
    cumulative = np.cumsum(1.0 / sizes[members][order]) / len(sizes)
    level = coverage * (len(sizes) + 1) / len(sizes)
    # the rounding slack keeps one row per group at the plain rank (k / n ≥ 0.9·(n + 1) / n)
    index = int(np.searchsorted(cumulative, level - 1e-9))
    return float(absolute[order][min(index, len(absolute) - 1)])


@dataclass(frozen=True)
class Calibration:
    """``h(d) = q·(1 + β·d)`` and what it was calibrated on (held-out coverage near and far)."""

    q: float
    beta: float = 0.0
    n_near: int = 0
    n_far: int = 0
    near_coverage: float | None = None
    far_coverage: float | None = None
    plain_q: float | None = None  # the near rows' plain split-conformal width, for comparison

    def half_width(self, difficulty: np.ndarray | None, n: int) -> np.ndarray:
        """Per row; without difficulties (an old predictor, or none asked) the in-distribution
        width ``q·(1 + β)``."""
        if difficulty is None or self.beta == 0:
            return np.full(n, self.q * (1 + self.beta))
        return self.q * (1 + self.beta * np.asarray(difficulty, dtype=np.float64))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, saved: dict[str, Any] | None, q: float) -> Calibration:
        """A saved calibration; a predictor from before it has only ``q`` (``β = 0``)."""
        if not saved:
            return cls(q, plain_q=q)
        return cls(**{k: saved[k] for k in cls.__dataclass_fields__ if k in saved})


def calibrate(
    near: np.ndarray,
    near_difficulty: np.ndarray,
    coverage: float,
    far: np.ndarray | None = None,
    far_difficulty: np.ndarray | None = None,
) -> Calibration:
    """The ``(q, β)`` of the module docstring from held-out log residuals and their difficulties."""
    near = np.abs(np.asarray(near, dtype=np.float64))
    d_near = np.asarray(near_difficulty, dtype=np.float64)
    plain = conformal_quantile(near, coverage)
    if far is None or not len(far):
        return Calibration(plain, 0.0, len(near), 0, _covered(near, plain * np.ones(len(near))), None, plain)
    far = np.abs(np.asarray(far, dtype=np.float64))
    d_far = np.asarray(far_difficulty, dtype=np.float64)
    best: tuple[float, float, float] | None = None
    for beta in BETAS:
        q = max(
            conformal_quantile(near / (1 + beta * d_near), coverage),
            conformal_quantile(far / (1 + beta * d_far), coverage),
        )
        width = (np.mean(q * (1 + beta * d_near)) + np.mean(q * (1 + beta * d_far))) / 2
        if best is None or width < best[0] - 1e-12:
            best = (width, q, beta)
    assert best is not None
    _, q, beta = best
    return Calibration(
        q,
        beta,
        len(near),
        len(far),
        _covered(near, q * (1 + beta * d_near)),
        _covered(far, q * (1 + beta * d_far)),
        plain,
    )


def calibrate_by_difficulty(residuals: np.ndarray, difficulty: np.ndarray, coverage: float) -> Calibration:
    """``calibrate`` where the held-out rows have no separate far set (a predictor whose folds
    already hold out whole models): its rows of above-median difficulty play the far set. Fewer
    than 20 rows: the plain interval."""
    residuals, difficulty = np.asarray(residuals, dtype=np.float64), np.asarray(difficulty, dtype=np.float64)
    if len(residuals) < 20:
        return calibrate(residuals, difficulty, coverage)
    far = difficulty > np.median(difficulty)
    calibration = calibrate(residuals[~far], difficulty[~far], coverage, residuals[far], difficulty[far])
    return replace(calibration, plain_q=conformal_quantile(residuals, coverage))


def _covered(residuals: np.ndarray, half_widths: np.ndarray) -> float:
    return float(np.mean(residuals <= half_widths + 1e-12))


def interval_note(half_width: np.ndarray, calibration: Calibration, reasons: list[str] | None) -> list[str]:
    """Why an interval is wide, per row: empty for in-distribution widths (up to 1.1× those of the
    training rows), else how many times that width it is and the first out-of-distribution reason."""
    usual = calibration.q * (1 + calibration.beta)
    notes = []
    for row, width in enumerate(np.asarray(half_width)):
        if usual <= 0 or width <= 1.1 * usual:
            notes.append("")
            continue
        why = reasons[row].split(";")[0] if reasons and reasons[row] else "far from every training config"
        notes.append(f"{width / usual:.1f}× the in-distribution width: extrapolating ({why})")
    return notes


def put_interval(
    out: pd.DataFrame, column: str, log_pred: np.ndarray | None, half_width: np.ndarray | float | None
) -> None:
    """``column`` and its ``_low`` / ``_high`` bounds from a log prediction; all NaN when the
    target is not predicted (``log_pred`` None)."""
    if log_pred is None or half_width is None:
        for suffix in ("", "_low", "_high"):
            out[column + suffix] = np.nan
        return
    # a margin too wide for a float (a candidate far outside what was learned) is an unbounded
    # interval: an upper bound of infinity is the answer, not a numerical accident to warn about
    with np.errstate(over="ignore"):
        out[column] = np.exp(log_pred)
        out[column + "_low"] = np.exp(log_pred - half_width)
        out[column + "_high"] = np.exp(log_pred + half_width)
