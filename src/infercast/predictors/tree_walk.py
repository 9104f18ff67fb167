"""Boosted trees predicted from their saved arrays with numpy, without their library.

``import xgboost`` and ``import lightgbm`` each import scikit-learn and SciPy's statistics: most of
the time a warm one-model prediction takes. The few rows a user's command asks for are walked here
from the arrays of the checked model files (``xgboost_json``, ``lightgbm_text``) with each library's
own rules — which way a value at the threshold and a missing value go, the precision and the order
in which leaves are added — so the numbers are the library's to the last bit (tests hold them
equal). The library itself is loaded only for many rows (a screen), where its C++ walk pays for
its import (``learners.WALK_STEPS``).

Every row takes the deepest tree's number of steps in every tree at once: cheap for a few rows of
shallow boosted trees. A forest of deep trees over many rows is walked tree by tree, rows leaving
as they reach a leaf (``forest.ArrayForest``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# LightGBM's kZeroThreshold: a value this close to zero is zero where zero means missing
ZERO_THRESHOLD = 1e-35


@dataclass
class TreeWalk:
    """Trees packed into flat arrays; a leaf links to itself, so every row takes ``depth`` steps.

    A row goes left where its value is below the threshold (``left_at_threshold``: or equal to it),
    compared in ``dtype``. A missing value (NaN) goes the node's ``default_left`` way where the node
    says so (``nan_missing``), else it counts as 0; where ``zero_missing``, 0 goes that way too."""

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    default_left: np.ndarray
    nan_missing: np.ndarray
    zero_missing: np.ndarray
    leaf_value: np.ndarray
    roots: np.ndarray
    n_features: int
    dtype: type
    left_at_threshold: bool
    base_score: float = 0.0
    depth: int = 0

    def __post_init__(self) -> None:
        self.depth = self._deepest()

    def _deepest(self) -> int:
        """Steps from a root to the deepest leaf (the readers refuse links that could loop)."""
        node, steps = self.roots, 0
        while True:
            inner = node[self.left[node] != node]
            if not inner.size:
                return steps
            node, steps = np.concatenate([self.left[inner], self.right[inner]]), steps + 1

    def visits(self, rows: int) -> int:
        """Nodes ``predict`` visits for ``rows`` rows: its cost."""
        return rows * len(self.roots) * self.depth

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The base score plus each row's leaf of every tree, added in ``dtype`` tree by tree after
        the base score, as both libraries add them."""
        x = np.asarray(x, dtype=self.dtype)
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"model expects {self.n_features} features, got an array of shape {x.shape}")
        node = np.broadcast_to(self.roots, (len(x), len(self.roots)))
        rows = np.arange(len(x))[:, None]
        for _ in range(self.depth):
            value = x[rows, self.feature[node]]
            nan = np.isnan(value)
            value = np.where(nan, 0, value)
            missing = (nan & self.nan_missing[node]) | (
                self.zero_missing[node] & (np.abs(value) <= ZERO_THRESHOLD)
            )
            threshold = self.threshold[node]
            below = value <= threshold if self.left_at_threshold else value < threshold
            go_left = np.where(missing, self.default_left[node], below)
            node = np.where(go_left, self.left[node], self.right[node])
        terms = np.column_stack([np.full(len(x), self.base_score), self.leaf_value[node]])
        return np.add.accumulate(terms, axis=1, dtype=self.dtype)[:, -1].astype(np.float64)


def packed(trees: list[dict[str, np.ndarray]], **walk: object) -> TreeWalk:
    """One ``TreeWalk`` of trees given as arrays per node, node 0 each tree's root: ``left`` /
    ``right`` (-1 at a leaf, else the child's index in its tree), ``feature``, ``threshold``,
    ``default_left``, ``nan_missing``, ``zero_missing``, ``leaf_value``; ``walk`` the rest."""
    sizes = np.array([len(tree["left"]) for tree in trees])
    roots = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)

    def flat(name: str) -> np.ndarray:
        return np.concatenate([tree[name] for tree in trees])

    own, index = np.repeat(roots, sizes), np.arange(int(sizes.sum()))
    left, right = flat("left").astype(np.int64), flat("right").astype(np.int64)
    leaf = left < 0
    return TreeWalk(
        left=np.where(leaf, index, left + own),
        right=np.where(leaf, index, right + own),
        feature=np.where(leaf, 0, flat("feature")).astype(np.int64),
        threshold=flat("threshold"),
        default_left=flat("default_left").astype(bool),
        nan_missing=flat("nan_missing").astype(bool),
        zero_missing=flat("zero_missing").astype(bool),
        leaf_value=np.where(leaf, flat("leaf_value"), 0.0),
        roots=roots,
        **walk,  # type: ignore[arg-type]
    )
