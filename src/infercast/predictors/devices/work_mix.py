"""``WorkMix``: in doubt about a network whose mix of work is unlike every network a setting
learned from, though each amount of work lies inside the training range.

The mix is each kind of work's share of the network's FLOPs and of its bytes moved (the
``gflops_*`` and ``mb_*`` device features). A network is as far from the training networks as
its nearest one, counted in the usual distance between a training network and its nearest
neighbour. The limit is what a family the setting never saw would meet: the 90th percentile,
over the training networks, of the distance to the nearest network of another family. So about
one network in ten of families never seen is flagged, those whose errors are largest
(``benchmarks/ood_separation.py``: about twice the median error of the rest on timm's tables).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from infercast.predictors.ood_rules import describe_distance

QUANTILE = 0.9


def mix_columns(columns: Any) -> tuple[list[str], list[str]]:
    """The FLOPs and the bytes columns of the kinds of work (not their size bins or weights)."""
    flops = [c for c in columns if c.startswith("gflops_") and "_under_" not in c]
    moved = [c for c in columns if c.startswith("mb_") and not c.endswith("_per_sample")]
    return flops, moved


def mix(x: pd.DataFrame) -> np.ndarray:
    """Each kind's share of the FLOPs, then of the bytes moved, one row per network."""
    flops, moved = mix_columns(x.columns)
    parts = []
    for columns in (flops, moved):
        values = x[columns].to_numpy(dtype=np.float64)
        parts.append(values / np.maximum(values.sum(axis=1, keepdims=True), 1e-12))
    return np.hstack(parts)


def _distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    squared = (a * a).sum(axis=1)[:, None] + (b * b).sum(axis=1)[None, :] - 2 * a @ b.T
    return np.sqrt(np.clip(squared, 0, None))


class WorkMix:
    """``fit`` on the training networks' features and families; ``flag`` new ones."""

    def __init__(self, quantile: float = QUANTILE) -> None:
        self.quantile = quantile

    def fit(self, x: pd.DataFrame, families: Any) -> WorkMix:
        families = np.asarray(families)
        self.train_ = mix(x)
        between = _distances(self.train_, self.train_)
        np.fill_diagonal(between, np.inf)
        self.spacing_ = max(float(np.median(between.min(axis=1))), 1e-9)
        between[families[:, None] == families[None, :]] = np.inf
        other_family = between.min(axis=1)
        self.limit_ = (
            float(np.quantile(other_family[np.isfinite(other_family)], self.quantile)) / self.spacing_
        )
        return self

    def distance(self, x: pd.DataFrame) -> np.ndarray:
        """Each network's distance to its nearest training network, in typical spacings."""
        return _distances(mix(x), self.train_).min(axis=1) / self.spacing_

    def flag(self, x: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
        """Whether each network is beyond the limit, and the reason ("" where it is not)."""
        distance = self.distance(x)
        flagged = distance > self.limit_
        reasons = [describe_distance(d, 1.0) if f else "" for d, f in zip(distance, flagged, strict=True)]
        return flagged, reasons
