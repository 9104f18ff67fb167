"""Non-dominated sorting and crowding distance (NSGA-II), for minimised objectives.

Only as many fronts as the shortlist needs are peeled off, each by a sort on the first objective
and one pass against the front so far: O(n · |front|) per front instead of O(n²) overall.
"""

from __future__ import annotations

import numpy as np


def first_front(values: np.ndarray) -> np.ndarray:
    """Row positions of the non-dominated rows of ``values`` (n × k, every column minimised)."""
    order = np.lexsort(values.T[::-1])  # by the first objective, ties by the next ones
    front: list[int] = []
    kept = np.empty((0, values.shape[1]))
    for index in order:
        row = values[index]
        # a row is dominated by a kept one that is <= everywhere and < somewhere
        if len(kept) and np.any(np.all(kept <= row, axis=1) & np.any(kept < row, axis=1)):
            continue
        if len(kept) and np.any(np.all(kept == row, axis=1)):
            front.append(int(index))  # an exact duplicate of a front member is on the front too
            continue
        front.append(int(index))
        kept = np.vstack([kept, row])
    return np.asarray(front, dtype=np.int64)


def crowding_distance(values: np.ndarray) -> np.ndarray:
    """NSGA-II crowding distance of each row within its front: boundary rows get infinity."""
    n, k = values.shape
    distance = np.zeros(n)
    if n <= 2:
        return np.full(n, np.inf)
    for column in range(k):
        order = np.argsort(values[:, column], kind="stable")
        spread = values[order[-1], column] - values[order[0], column]
        distance[order[0]] = distance[order[-1]] = np.inf
        if spread > 0:
            distance[order[1:-1]] += (values[order[2:], column] - values[order[:-2], column]) / spread
    return distance


def shortlist(values: np.ndarray, n: int, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pick ``n`` rows front by front; within the last front taken, by crowding distance (most
    isolated first) or, given ``weights``, by the weighted sum of min-max normalised objectives.
    Returns (row positions, front rank of each)."""
    remaining = np.arange(len(values))
    chosen: list[np.ndarray] = []
    ranks: list[np.ndarray] = []
    rank = 0
    low, high = values.min(axis=0), values.max(axis=0)
    scale = np.where(high > low, high - low, 1.0)
    while remaining.size and sum(len(c) for c in chosen) < n:
        rank += 1
        front = remaining[first_front(values[remaining])]
        need = n - sum(len(c) for c in chosen)
        if len(front) > need:
            if weights is not None:
                score = ((values[front] - low) / scale) @ weights
                front = front[np.argsort(score, kind="stable")[:need]]
            else:
                front = front[np.argsort(-crowding_distance(values[front]), kind="stable")[:need]]
        elif weights is not None:
            front = front[np.argsort(((values[front] - low) / scale) @ weights, kind="stable")]
        chosen.append(front)
        ranks.append(np.full(len(front), rank))
        remaining = np.setdiff1d(remaining, front, assume_unique=True)
    if not chosen:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(chosen), np.concatenate(ranks)
