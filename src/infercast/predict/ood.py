"""Out-of-distribution flags: is an input like anything the predictor was trained on?

Two checks, each with a reason a user can read:

- **ranges**: a feature outside ``[min, max]`` of the training rows (widened by ``slack`` of the
  range), e.g. ``count_dwconv=13 outside the training range [0, 0]`` for a MobileNet asked of a
  predictor trained on ResNets only;
- **distance**: the nearest training row, in standardised log-feature space, is farther than the
  ``quantile`` of the training rows' own nearest-neighbour distances times ``factor``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial import cKDTree


def _transform(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log1p(np.abs(x))


class OODDetector:
    def __init__(self, slack: float = 0.02, quantile: float = 0.99, factor: float = 1.5) -> None:
        self.slack = slack
        self.quantile = quantile
        self.factor = factor
        self.names: list[str] = []
        self.low: np.ndarray | None = None
        self.high: np.ndarray | None = None
        self.center: np.ndarray | None = None
        self.scale: np.ndarray | None = None
        self.points: np.ndarray | None = None
        self.threshold = float("inf")
        self._tree: cKDTree | None = None

    def fit(self, x: np.ndarray, names: list[str]) -> OODDetector:
        x = np.asarray(x, dtype=np.float64)
        self.names = list(names)
        self.low, self.high = x.min(axis=0), x.max(axis=0)
        t = _transform(x)
        self.center = t.mean(axis=0)
        self.scale = np.where(t.std(axis=0) > 0, t.std(axis=0), 1.0)
        self.points = np.unique(np.round((t - self.center) / self.scale, 6), axis=0)
        self._tree = cKDTree(self.points)
        if len(self.points) > 1:
            distances, _ = self._tree.query(self.points, k=2)
            self.threshold = float(np.quantile(distances[:, 1], self.quantile) * self.factor)
        return self

    def check(self, x: np.ndarray, ranges_only: bool = False) -> tuple[np.ndarray, list[str]]:
        """``(flag per row, reason per row)``; ``ranges_only`` skips the distance (for screening)."""
        if self.low is None or self.high is None:
            raise ValueError("OODDetector is not fitted")
        x = np.asarray(x, dtype=np.float64)
        margin = (self.high - self.low) * self.slack
        outside = (x < self.low - margin) | (x > self.high + margin)
        far = np.zeros(len(x), dtype=bool)
        distance = np.zeros(len(x))
        if not ranges_only and self._tree is not None and np.isfinite(self.threshold):
            distance, _ = self._tree.query((_transform(x) - self.center) / self.scale, k=1)
            far = distance > self.threshold
        width = np.maximum(self.high - self.low, 1e-12)
        excess = np.maximum(self.low - x, x - self.high) / width  # the worst offenders come first
        reasons = []
        for row in range(len(x)):
            parts = []
            columns = np.flatnonzero(outside[row])
            columns = columns[np.argsort(-excess[row, columns], kind="stable")]
            for column in columns[:3]:
                parts.append(
                    f"{self.names[column]}={x[row, column]:.6g} outside the training range "
                    f"[{self.low[column]:.6g}, {self.high[column]:.6g}]"
                )
            if len(columns) > 3:
                parts.append(f"and {len(columns) - 3} more features out of range")
            if far[row]:
                parts.append(
                    f"nearest training config at distance {distance[row]:.2f} > {self.threshold:.2f}"
                )
            reasons.append("; ".join(parts))
        return outside.any(axis=1) | far, reasons

    def to_dict(self) -> dict[str, Any]:
        return {
            "slack": self.slack,
            "quantile": self.quantile,
            "factor": self.factor,
            "names": self.names,
            "low": _list(self.low),
            "high": _list(self.high),
            "center": _list(self.center),
            "scale": _list(self.scale),
            "points": None if self.points is None else self.points.tolist(),
            "threshold": self.threshold if np.isfinite(self.threshold) else None,
        }

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> OODDetector:
        detector = cls(saved["slack"], saved["quantile"], saved["factor"])
        detector.names = list(saved["names"])
        detector.low = np.asarray(saved["low"], dtype=np.float64)
        detector.high = np.asarray(saved["high"], dtype=np.float64)
        detector.center = np.asarray(saved["center"], dtype=np.float64)
        detector.scale = np.asarray(saved["scale"], dtype=np.float64)
        if saved.get("points"):
            detector.points = np.asarray(saved["points"], dtype=np.float64)
            detector._tree = cKDTree(detector.points)
        threshold = saved.get("threshold")
        detector.threshold = float("inf") if threshold is None else float(threshold)
        return detector


def _list(values: np.ndarray | None) -> list[float] | None:
    return None if values is None else [float(v) for v in values]
