"""How rows are split: CARB stratifies by batch tier × depth tier, so every fold and every held-out
set sees small and large batches, shallow and deep networks alike."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import KFold, StratifiedKFold

from infercast.predict.errors import PredictorError

BATCH_TIERS = (1, 8, 32)  # batch 1 | 2–8 | 9–32 | > 32


def strata(batch: np.ndarray, depth: np.ndarray, depth_edges: np.ndarray) -> np.ndarray:
    """Batch tier × depth tier, the split CARB stratifies on."""
    batch_tier = np.searchsorted(np.asarray(BATCH_TIERS), np.asarray(batch), side="left")
    depth_tier = np.searchsorted(depth_edges, np.asarray(depth), side="right")
    return batch_tier * 10 + depth_tier


def depth_edges(depth: np.ndarray) -> np.ndarray:
    return np.unique(np.quantile(np.asarray(depth, dtype=np.float64), [1 / 3, 2 / 3]))


def stratified_split(x: pd.DataFrame, test_size: float = 0.2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Train / test row positions, stratified by batch tier × depth tier."""
    if not 0 < test_size < 1:
        raise PredictorError(f"test_size={test_size!r} must lie strictly between 0 and 1")
    labels = _mergeable(strata(x["batch"], x["depth"], depth_edges(x["depth"])), math.ceil(1 / test_size))
    rng = np.random.default_rng(seed)
    test = []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        test.extend(members[: max(1, round(len(members) * test_size))])
    test_index = np.sort(np.asarray(test, dtype=np.int64))
    return np.setdiff1d(np.arange(len(x)), test_index), test_index


def _mergeable(labels: np.ndarray, minimum: int) -> np.ndarray:
    """Strata too small to spread over the folds join the largest one."""
    values, counts = np.unique(labels, return_counts=True)
    largest = values[np.argmax(counts)]
    small = values[counts < minimum]
    return np.where(np.isin(labels, small), largest, labels)


def stratified_folds(labels: np.ndarray, n_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    labels = _mergeable(labels, n_folds)
    if len(np.unique(labels)) > 1:
        splitter: Any = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
        return list(splitter.split(np.zeros(len(labels)), labels))
    return list(KFold(n_splits=n_folds, shuffle=True, random_state=seed).split(labels))
