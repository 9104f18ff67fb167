"""Extremely-randomized trees stored as plain arrays, so a predictor file never holds code.

scikit-learn has no portable format for its forests (only pickle). A fitted
``ExtraTreesRegressor`` is exported here as the arrays of each tree (children, split feature,
threshold, leaf value) into JSON, and predicted back with vectorised numpy descent — the same
numbers scikit-learn gives (a test holds them equal), with no scikit-learn objects at load time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from infercast.files import read_json

if TYPE_CHECKING:
    from sklearn.ensemble import ExtraTreesRegressor

FOREST_FORMAT = "infercast-forest/1"


@dataclass
class ArrayForest:
    """Trees packed into flat arrays: node ``i`` of the forest is a leaf when ``left[i] < 0``."""

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray
    roots: np.ndarray
    n_features: int

    @classmethod
    def from_sklearn(cls, forest: ExtraTreesRegressor) -> ArrayForest:
        left, right, feature, threshold, value, roots = [], [], [], [], [], []
        offset = 0
        for estimator in forest.estimators_:
            tree = estimator.tree_
            leaf = tree.children_left < 0
            roots.append(offset)
            left.append(np.where(leaf, -1, tree.children_left + offset))
            right.append(np.where(leaf, -1, tree.children_right + offset))
            feature.append(np.where(leaf, 0, tree.feature))
            threshold.append(tree.threshold)
            value.append(tree.value[:, 0, 0])
            offset += tree.node_count
        return cls(
            left=np.concatenate(left).astype(np.int64),
            right=np.concatenate(right).astype(np.int64),
            feature=np.concatenate(feature).astype(np.int64),
            threshold=np.concatenate(threshold).astype(np.float64),
            value=np.concatenate(value).astype(np.float64),
            roots=np.asarray(roots, dtype=np.int64),
            n_features=int(forest.n_features_in_),
        )

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Mean over trees of the leaf each row falls into (scikit-learn sends ``x <= t`` left)."""
        x = np.asarray(x, dtype=np.float32).astype(np.float64)  # sklearn splits on float32 inputs
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"forest expects {self.n_features} features, got an array of shape {x.shape}")
        rows = np.arange(x.shape[0])
        total = np.zeros(x.shape[0])
        for root in self.roots:
            node = np.full(x.shape[0], root)
            active = rows
            while active.size:
                current = node[active]
                go_left = x[active, self.feature[current]] <= self.threshold[current]
                node[active] = np.where(go_left, self.left[current], self.right[current])
                active = active[self.left[node[active]] >= 0]
            total += self.value[node]
        return total / len(self.roots)

    def save(self, path: Path) -> None:
        payload = {
            "format": FOREST_FORMAT,
            "n_features": self.n_features,
            "roots": self.roots.tolist(),
            "left": self.left.tolist(),
            "right": self.right.tolist(),
            "feature": self.feature.tolist(),
            "threshold": self.threshold.tolist(),
            "value": self.value.tolist(),
        }
        path.write_text(json.dumps(payload, separators=(",", ":")))

    @classmethod
    def load(cls, path: Path) -> ArrayForest:
        """A forest ``save`` wrote, every index, length and value checked (``check``)."""
        payload = read_json(path, "forest file")
        if not isinstance(payload, dict) or payload.get("format") != FOREST_FORMAT:
            form = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
            raise ValueError(f"{path}: not an {FOREST_FORMAT} file (format={form!r})")
        try:
            forest = cls(
                left=np.asarray(payload["left"], dtype=np.int64),
                right=np.asarray(payload["right"], dtype=np.int64),
                feature=np.asarray(payload["feature"], dtype=np.int64),
                threshold=np.asarray(payload["threshold"], dtype=np.float64),
                value=np.asarray(payload["value"], dtype=np.float64),
                roots=np.asarray(payload["roots"], dtype=np.int64),
                n_features=int(payload["n_features"]),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as error:
            raise ValueError(f"{path}: damaged forest ({type(error).__name__}: {str(error)[:120]})") from None
        problem = forest.problem()
        if problem:
            raise ValueError(f"{path}: damaged forest: {problem}")
        return forest

    def problem(self) -> str | None:
        """What makes these arrays unusable, or None. A child's index is always above its
        parent's (``from_sklearn`` numbers nodes depth-first), so a descent that passes this check
        ends within as many steps as there are nodes: no link can point back into a cycle."""
        n = len(self.left)
        arrays = (self.left, self.right, self.feature, self.threshold, self.value)
        if any(a.ndim != 1 or len(a) != n for a in arrays) or self.roots.ndim != 1:
            return "its node arrays differ in length"
        if n == 0 or len(self.roots) == 0 or self.n_features < 1:
            return "it has no trees"
        if ((self.roots < 0) | (self.roots >= n)).any():
            return "a tree's root is outside the node arrays"
        nodes = np.arange(n)
        inner = self.left >= 0
        if ((self.right >= 0) != inner).any():
            return "a node has one child"
        for child in (self.left, self.right):
            if ((child[inner] <= nodes[inner]) | (child[inner] >= n)).any():
                return "a node links to a child outside the arrays or before itself"
        if ((self.feature[inner] < 0) | (self.feature[inner] >= self.n_features)).any():
            return f"a split names a feature outside 0..{self.n_features - 1}"
        if not np.isfinite(self.threshold[inner]).all() or not np.isfinite(self.value).all():
            return "a threshold or a leaf value is not a finite number"
        return None
