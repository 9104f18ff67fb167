"""How rows are split: CARB stratifies by batch tier × depth tier, so every fold and every held-out
set sees small and large batches, shallow and deep networks alike."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from infercast.predictors.errors import PredictorError

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
    from sklearn.model_selection import KFold, StratifiedKFold  # a heavy import, for training only

    labels = _mergeable(labels, n_folds)
    if len(np.unique(labels)) > 1:
        splitter: Any = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
        return list(splitter.split(np.zeros(len(labels)), labels))
    return list(KFold(n_splits=n_folds, shuffle=True, random_state=seed).split(labels))


def extrapolation_folds(
    x: pd.DataFrame, edges: np.ndarray, min_train: int = 20
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Folds that each hold out a whole region of the training data, so the model must extrapolate
    into it: the smallest and the largest input size, the deepest tier, the largest batch tier,
    and the two commonest op-type mixes (which of ``count_*`` are non-zero) — six fits at most,
    since each costs one. A fold whose training part would keep fewer than ``min_train`` rows, or
    that holds out nothing, is left out. Used to calibrate how prediction intervals widen away from
    the training rows (``predictors.intervals``)."""
    held_sets = []
    if {"in_h", "in_w"} <= set(x.columns):
        pixels = (x["in_h"] * x["in_w"]).to_numpy()
        held_sets += [pixels == pixels.min(), pixels == pixels.max()]
    depth = np.searchsorted(edges, x["depth"].to_numpy(), side="right")
    batch = np.searchsorted(np.asarray(BATCH_TIERS), x["batch"].to_numpy(), side="left")
    held_sets += [depth == depth.max(), batch == batch.max()]
    counts = [c for c in x.columns if c.startswith("count_")]
    if counts:
        signature = np.array(["".join("1" if v > 0 else "0" for v in row) for row in x[counts].to_numpy()])
        mixes, sizes = np.unique(signature, return_counts=True)
        held_sets += [signature == mix for mix in mixes[np.argsort(-sizes, kind="stable")][:2]]
    folds = []
    for held in held_sets:
        if held.any() and (~held).sum() >= min_train:
            folds.append((np.flatnonzero(~held), np.flatnonzero(held)))
    return folds
