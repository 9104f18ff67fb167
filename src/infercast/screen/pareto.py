"""Non-dominated sorting and crowding distance (NSGA-II), for minimised objectives.

Only as many fronts as the shortlist needs are peeled off, each by one pass over the rows in
lexicographic order (sorted once): O(n) per front for two objectives, O(n · |front|) for more,
instead of O(n²) overall.
"""

from __future__ import annotations

import numpy as np


def first_front(values: np.ndarray, order: np.ndarray | None = None, block: int = 4096) -> np.ndarray:
    """Row positions of the non-dominated rows of ``values`` (n × k, every column minimised), in
    lexicographic order; ``order``: that order of the rows, when the caller already sorted them.

    In that order a row can only be dominated by one visited before it, and then by one already
    on the front. Two objectives: a row is on the front when its second objective is below every
    earlier row's. More: each block of rows is checked against the front so far in one array
    operation, and the few that pass are settled one by one."""
    if order is None:
        order = np.lexsort(values.T[::-1])  # by the first objective, ties by the next ones
    if values.shape[1] == 2:
        return order[_first_front_of_two(values[order])]
    front: list[int] = []
    kept = np.empty((0, values.shape[1]))
    for start in range(0, len(order), block):
        indices = order[start : start + block]
        rows = values[indices]
        if len(kept):
            at_most = (kept[None, :, :] <= rows[:, None, :]).all(axis=2)
            below = (kept[None, :, :] < rows[:, None, :]).any(axis=2)
            passing = ~(at_most & below).any(axis=1)
            indices, rows = indices[passing], rows[passing]
        for index, row in zip(indices, rows, strict=True):
            # a row is dominated by a kept one that is <= everywhere and < somewhere
            if len(kept) and np.any(np.all(kept <= row, axis=1) & np.any(kept < row, axis=1)):
                continue
            front.append(int(index))
            if not (len(kept) and np.any(np.all(kept == row, axis=1))):
                kept = np.vstack([kept, row])  # an exact duplicate is on the front, not kept twice
    return np.asarray(front, dtype=np.int64)


def _first_front_of_two(ordered: np.ndarray) -> np.ndarray:
    """Positions of the front among rows in lexicographic order: rows whose second objective is
    below every earlier row's, and exact copies of such a row (they sit right after it)."""
    second = ordered[:, 1]
    earlier_best = np.concatenate([[np.inf], np.minimum.accumulate(second)[:-1]])
    new_run = np.concatenate([[True], (ordered[1:] != ordered[:-1]).any(axis=1)])
    run_start = np.flatnonzero(new_run)[np.cumsum(new_run) - 1]
    return np.flatnonzero((second < earlier_best)[run_start])


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
    order = np.lexsort(values.T[::-1])  # sorted once: each front keeps the order of what remains
    alive = np.ones(len(values), dtype=bool)
    chosen: list[np.ndarray] = []
    ranks: list[np.ndarray] = []
    rank = 0
    low, high = values.min(axis=0), values.max(axis=0)
    scale = np.where(high > low, high - low, 1.0)
    while alive.any() and sum(len(c) for c in chosen) < n:
        rank += 1
        front = first_front(values, order[alive[order]])
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
        alive[front] = False
    if not chosen:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(chosen), np.concatenate(ranks)
