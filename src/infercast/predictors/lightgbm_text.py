"""What LightGBM's own loader cannot be trusted with: a model text file whose trees do not sit
where its header says, or whose arrays disagree, makes its parallel parser abort the whole
process (``terminate called``) instead of raising. Every tree is checked here first, so a
damaged file is one ``PredictorError``; a tree whose child links do not point forward (which
could loop), whose leaf values are not finite or whose thresholds are NaN is refused too."""

from __future__ import annotations

import math
from pathlib import Path

from infercast.files import FileError, regular_file
from infercast.predictors.errors import PredictorError

NODE_ARRAYS = ("split_feature", "threshold", "decision_type", "left_child", "right_child")


def check_model_text(path: Path) -> None:
    """Refuse a LightGBM text model whose header, tree layout or tree arrays are inconsistent."""
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
    for index, size in enumerate(sizes):
        block = data[start : start + size]
        if not block.startswith(f"Tree={index}\n".encode()):
            raise PredictorError(f"{path}: tree {index} is not where the header's tree_sizes puts it")
        problem = _tree_problem(_fields(block.decode("utf-8", "replace")), features)
        if problem:
            raise PredictorError(f"{path}: tree {index}: {problem}")
        start += size
    if not data[start:].lstrip(b"\n").startswith(b"end of trees"):
        raise PredictorError(f"{path}: the trees do not end where the header's tree_sizes says")


def _fields(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


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
