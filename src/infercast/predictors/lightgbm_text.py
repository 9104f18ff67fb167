"""What LightGBM's own loader cannot be trusted with: a model text file whose trees do not sit
where its header says, or whose arrays disagree, makes its parallel parser abort the whole
process (``terminate called``) instead of raising. Every tree is checked here first, so a
damaged file is one ``PredictorError``; a tree whose child links do not point forward (which
could loop), whose leaf values are not finite or whose thresholds are NaN is refused too.
The checked trees also predict a few rows without importing LightGBM (``tree_walk``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from infercast.files import FileError, regular_file
from infercast.predictors.errors import PredictorError
from infercast.predictors.tree_walk import TreeWalk, packed

NODE_ARRAYS = ("split_feature", "threshold", "decision_type", "left_child", "right_child")
# a model is walked here only where a prediction is the sum of one leaf of each tree
WALKED_OBJECTIVES = ("regression",)


def read_model_text(path: Path) -> tuple[TreeWalk | None, bytes]:
    """The numpy walk of a LightGBM text model (``lightgbm_walk``) and the file's bytes (what
    LightGBM may load); a ``PredictorError`` where its header, tree layout or arrays disagree."""
    try:
        data = regular_file(path, "a LightGBM model").read_bytes()
    except (FileError, OSError) as error:
        raise PredictorError(str(error)) from None
    first = data.find(b"\nTree=")
    start = len(data) if first < 0 else first + 1
    header = _fields(data[:start].decode("utf-8", "replace"))
    try:
        sizes = [int(s) for s in header.get("tree_sizes", "").split()]
        features = int(header["max_feature_idx"]) + 1
    except (KeyError, ValueError):
        raise PredictorError(
            f"{path}: not a LightGBM model (no tree_sizes / max_feature_idx header)"
        ) from None
    trees = []
    for index, size in enumerate(sizes):
        block = data[start : start + size]
        if not block.startswith(f"Tree={index}\n".encode()):
            raise PredictorError(f"{path}: tree {index} is not where the header's tree_sizes puts it")
        trees.append(_fields(block.decode("utf-8", "replace")))
        problem = _tree_problem(trees[-1], features)
        if problem:
            raise PredictorError(f"{path}: tree {index}: {problem}")
        start += size
    if not data[start:].lstrip(b"\n").startswith(b"end of trees"):
        raise PredictorError(f"{path}: the trees do not end where the header's tree_sizes says")
    return lightgbm_walk(header, trees), data


def lightgbm_walk(header: dict[str, str], trees: list[dict[str, str]]) -> TreeWalk | None:
    """The numpy walk of checked trees, or None where a prediction is more than the sum of a leaf
    of each tree (another objective, averaged or linear trees, several outputs)."""
    simple = (
        header.get("objective") in WALKED_OBJECTIVES
        and header.get("num_tree_per_iteration", "1") == "1"
        and "average_output" not in header
        and all(tree.get("is_linear", "0") == "0" for tree in trees)
    )
    if not simple or not trees:
        return None
    features = int(header["max_feature_idx"]) + 1
    arrays = [_tree_arrays(tree) for tree in trees]
    return packed(arrays, n_features=features, dtype=np.float64, left_at_threshold=True)


def _tree_arrays(tree: dict[str, str]) -> dict[str, np.ndarray]:
    """One checked tree as ``tree_walk.packed`` takes it: its leaves - 1 split nodes, then its
    leaves (LightGBM links to a leaf as ~its index)."""
    leaves = int(tree["num_leaves"])
    splits = {
        name: np.array(tree[name].split() if leaves > 1 else [], dtype=np.float64) for name in NODE_ARRAYS
    }
    decision = splits["decision_type"].astype(np.int64)
    missing = (decision >> 2) & 3  # LightGBM's missing type: 0 none, 1 zero, 2 NaN
    left, right = (splits[side].astype(np.int64) for side in ("left_child", "right_child"))

    def nodes(values: np.ndarray, at_leaves: float | np.ndarray = 0) -> np.ndarray:
        return np.concatenate([values, np.broadcast_to(at_leaves, leaves)])

    leaf_values = np.array(tree["leaf_value"].split(), dtype=np.float64)
    return {
        "left": nodes(np.where(left < 0, ~left + leaves - 1, left), -1),
        "right": nodes(np.where(right < 0, ~right + leaves - 1, right), -1),
        "feature": nodes(splits["split_feature"].astype(np.int64)),
        "threshold": nodes(splits["threshold"]),
        "default_left": nodes((decision & 2) > 0, False),
        "nan_missing": nodes(missing == 2, False),
        "zero_missing": nodes(missing == 1, False),
        "leaf_value": nodes(np.zeros(leaves - 1), leaf_values),
    }


def _fields(text: str) -> dict[str, str]:
    """``key=value`` lines, and a flag line (``average_output``) as a key with no value."""
    return dict(line.partition("=")[::2] for line in text.splitlines() if line)


def _tree_problem(tree: dict[str, str], features: int) -> str | None:
    """Why one tree cannot be predicted with, or None."""
    try:
        leaves, categorical = int(tree["num_leaves"]), int(tree.get("num_cat", "0"))
        values = [float(v) for v in tree["leaf_value"].split()]
        nodes = {name: [float(v) for v in tree[name].split()] for name in NODE_ARRAYS} if leaves > 1 else {}
    except (KeyError, ValueError) as error:
        return f"a missing or unreadable array ({error})"
    if categorical:
        return "categorical splits, which infercast never trains"
    if leaves < 1 or len(values) != leaves:
        return f"{len(values)} leaf values for num_leaves={leaves}"
    if any(len(array) != leaves - 1 for array in nodes.values()):
        return f"node arrays of another length than num_leaves - 1 = {leaves - 1}"
    if not all(math.isfinite(v) for v in values):
        return "a leaf value that is not a finite number"
    # LightGBM writes an infinite threshold for a split on an infinite value: only NaN is damage
    if any(math.isnan(v) for v in nodes.get("threshold", [])):
        return "a threshold that is not a number"
    if any(not 0 <= f < features for f in nodes.get("split_feature", [])):
        return f"a split on a feature outside 0..{features - 1}"
    for parent, children in enumerate(
        zip(nodes.get("left_child", []), nodes.get("right_child", []), strict=True)
    ):
        # a leaf is ~index (negative); an inner child always comes after its parent
        if any(not (-leaves <= c < 0 or parent < c < leaves - 1) for c in children):
            return f"node {parent} links to a node that is not after it"
    return None
