"""Out-of-distribution flags: is an input like anything the predictor was trained on?

Two checks, each with a reason a user can read (``ood_rules`` says which departures matter and
words them):

- **ranges**: a feature outside ``[min, max]`` of the training rows by a margin that matters for
  cost, e.g. "9 % of its FLOPs are depthwise convolutions, more than the 0 % of any network it
  learned from" for a MobileNet asked of a predictor trained on ResNets only; counts of
  operations (a folded BatchNorm's zero) never flag on their own;
- **distance**: the nearest training row, in standardised log-feature space over the features
  that place a network, is farther than the ``quantile`` of the training rows' own
  nearest-neighbour distances times ``factor``.

``difficulty(x)`` is that distance in units of the training rows' median nearest-neighbour
spacing: ≈ 1 among the training rows, growing as an input extrapolates; the prediction intervals
widen with it (``predictors.intervals``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from infercast.predictors.ood_rules import counts_for_distance, describe, describe_distance, material

# training rows up to which their nearest-neighbour distances are worked out by brute force (a
# shipped predictor's hundreds take milliseconds; importing SciPy's k-d tree takes longer)
BRUTE_POINTS = 2048


def _transform(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.log1p(np.abs(x))


class OODDetector:
    def __init__(self, quantile: float = 0.99, factor: float = 1.5) -> None:
        self.quantile = quantile
        self.factor = factor
        self.names: list[str] = []
        self.low: np.ndarray | None = None
        self.high: np.ndarray | None = None
        self.center: np.ndarray | None = None
        self.scale: np.ndarray | None = None
        self.points: np.ndarray | None = None
        self.threshold = float("inf")
        self.spacing = 1.0
        self._material: tuple[np.ndarray, float] | None = None

    def fit(self, x: np.ndarray, names: list[str]) -> OODDetector:
        x = np.asarray(x, dtype=np.float64)
        self.names = list(names)
        self.low, self.high = x.min(axis=0), x.max(axis=0)
        t = _transform(x)
        self.center = t.mean(axis=0)
        spread = t.std(axis=0)
        # a feature constant up to rounding (a share summed in floating point) has no scale: a
        # spread of 1e-16 would make any other value of it look infinitely far
        self.scale = np.where(spread > 1e-6, spread, 1.0)
        self.points = np.unique(np.round((t - self.center) / self.scale, 6), axis=0)
        self._set_spacing()
        return self

    def _set_spacing(self) -> None:
        if self.points is None or len(self.points) < 2:
            return
        distances = _neighbour_distances(self.points)
        self.threshold = float(np.quantile(distances, self.quantile) * self.factor)
        spacing = float(np.median(distances))
        self.spacing = spacing if spacing > 0 else 1.0

    def _material_columns(self) -> tuple[np.ndarray, float]:
        """The columns that place a network for the distance flag (``ood_rules``), and the
        distance flag's threshold over them: as ``threshold``, from the training rows' own
        nearest-neighbour distances in those columns."""
        if self._material is None:
            assert self.points is not None
            mask = np.array([counts_for_distance(name) for name in self.names])
            points = np.unique(self.points[:, mask], axis=0)
            threshold = float("inf")
            if mask.any() and len(points) >= 2:
                distances = _neighbour_distances(points)
                threshold = float(np.quantile(distances, self.quantile) * self.factor)
            self._material = (mask, threshold)
        return self._material

    def nearest_distance(self, x: np.ndarray, columns: np.ndarray | None = None) -> np.ndarray:
        """Distance of each row to its nearest training row (standardised log features), by
        matrix products in chunks: a k-d tree degrades to brute force in ~40 dimensions, and BLAS
        does brute force fastest (100,000 rows × 1,500 training rows: about a second here)."""
        if self.points is None or self.center is None or self.scale is None:
            raise ValueError("OODDetector is not fitted")
        z = (_transform(np.asarray(x, dtype=np.float64)) - self.center) / self.scale
        points = self.points
        if columns is not None:
            z, points = z[:, columns], points[:, columns]
        squared_points = np.einsum("ij,ij->i", points, points)
        out = np.empty(len(z))
        for start in range(0, len(z), 20_000):
            part = z[start : start + 20_000]
            squared = np.einsum("ij,ij->i", part, part)[:, None] + squared_points[None, :]
            squared -= 2 * part @ points.T
            out[start : start + len(part)] = np.sqrt(np.clip(squared.min(axis=1), 0, None))
        return out

    def box_difficulty(self, x: np.ndarray) -> np.ndarray:
        """A cheap stand-in for ``difficulty`` where a nearest-row search costs too much (screening
        millions): 1 (a typical training row's) inside the training rows' bounding box, growing with
        the distance outside it, in the same units."""
        if self.low is None or self.high is None or self.center is None or self.scale is None:
            raise ValueError("OODDetector is not fitted")
        x = np.asarray(x)
        out = np.ones(len(x))
        # the transform is monotonic: only rows outside the raw ranges need it (few, in screening)
        outside = np.flatnonzero(((x < self.low) | (x > self.high)).any(axis=1))
        if len(outside):
            z = (_transform(x[outside].astype(np.float64)) - self.center) / self.scale
            low = (_transform(self.low) - self.center) / self.scale
            high = (_transform(self.high) - self.center) / self.scale
            excess = np.maximum(np.maximum(low - z, z - high), 0.0)
            out[outside] += np.sqrt(np.einsum("ij,ij->i", excess, excess)) / self.spacing
        return out

    def difficulty(self, x: np.ndarray) -> np.ndarray:
        """Nearest-training-row distance in units of the training rows' median spacing."""
        return self.nearest_distance(x) / self.spacing

    def check(self, x: np.ndarray, ranges_only: bool = False) -> tuple[np.ndarray, list[str]]:
        """``(flag per row, reason per row)``: a row is flagged by a material departure in the
        work it prices (``ood_rules``), or when its nearest training row, over the columns that
        place a network, is farther than the training rows are from theirs; ``ranges_only`` skips
        the distance (for screening)."""
        if self.low is None or self.high is None:
            raise ValueError("OODDetector is not fitted")
        x = np.asarray(x, dtype=np.float64)
        outside = (x < self.low) | (x > self.high)
        far = np.zeros(len(x), dtype=bool)
        nearest = np.zeros(len(x))
        if not ranges_only and self.points is not None:
            columns, threshold = self._material_columns()
            if np.isfinite(threshold):
                nearest = self.nearest_distance(x, columns)
                far = nearest > threshold
        width = np.maximum(self.high - self.low, 1e-12)
        excess = np.maximum(self.low - x, x - self.high) / width  # the worst offenders come first
        flags, reasons = np.zeros(len(x), dtype=bool), []
        for row in range(len(x)):
            columns = [
                c
                for c in np.flatnonzero(outside[row])
                if material(self.names[c], x[row, c], self.low[c], self.high[c])
            ]
            columns.sort(key=lambda c: -excess[row, c])
            parts = [describe(self.names[c], x[row, c], self.low[c], self.high[c]) for c in columns[:3]]
            if far[row]:
                parts.append(describe_distance(nearest[row], self.spacing))
            flags[row] = bool(parts)
            reasons.append("; ".join(parts))
        return flags, reasons

    def to_dict(self) -> dict[str, Any]:
        return {
            "quantile": self.quantile,
            "factor": self.factor,
            "names": self.names,
            "low": _list(self.low),
            "high": _list(self.high),
            "center": _list(self.center),
            "scale": _list(self.scale),
            "points": None if self.points is None else self.points.tolist(),
            "threshold": self.threshold if np.isfinite(self.threshold) else None,
            "spacing": self.spacing,
        }

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> OODDetector:
        # a "slack" saved before issue 49's rules widened the ranges; the rules replace it
        detector = cls(saved["quantile"], saved["factor"])
        detector.names = list(saved["names"])
        detector.low = np.asarray(saved["low"], dtype=np.float64)
        detector.high = np.asarray(saved["high"], dtype=np.float64)
        detector.center = np.asarray(saved["center"], dtype=np.float64)
        detector.scale = np.asarray(saved["scale"], dtype=np.float64)
        if saved.get("points"):
            detector.points = np.asarray(saved["points"], dtype=np.float64)
        threshold = saved.get("threshold")
        detector.threshold = float("inf") if threshold is None else float(threshold)
        if "spacing" in saved:
            detector.spacing = float(saved["spacing"])
        else:  # saved before difficulties existed
            detector._set_spacing()
        return detector


def _neighbour_distances(points: np.ndarray) -> np.ndarray:
    """Each point's distance to its nearest other point: by brute force up to ``BRUTE_POINTS``
    points (the training rows of a shipped predictor, in milliseconds, importing nothing), by
    SciPy's k-d tree above."""
    if len(points) > BRUTE_POINTS:
        from scipy.spatial import cKDTree

        distances, _ = cKDTree(points).query(points, k=2)
        return distances[:, 1]
    nearest = np.empty(len(points))
    rows = max(1, (1 << 21) // max(1, points.size))  # about 16 MB of differences at a time
    for start in range(0, len(points), rows):
        part = points[start : start + rows]
        difference = part[:, None, :] - points[None, :, :]
        squared = np.einsum("ijk,ijk->ij", difference, difference)
        squared[np.arange(len(part)), np.arange(start, start + len(part))] = np.inf  # not itself
        nearest[start : start + len(part)] = np.sqrt(squared.min(axis=1))
    return nearest


def _list(values: np.ndarray | None) -> list[float] | None:
    return None if values is None else [float(v) for v in values]


def either_ood(*predictions: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Row by row, the ``ood`` flags and reasons of several predictions of the same models joined:
    a prediction that combines routes inherits the doubts of each."""
    reasons = zip(*(p["ood_reason"] for p in predictions), strict=True)
    flags = np.logical_or.reduce([p["ood"].to_numpy(dtype=bool) for p in predictions])
    return flags, ["; ".join(filter(None, row)) for row in reasons]
