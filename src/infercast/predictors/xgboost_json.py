"""What XGBoost's own loader lets through: a JSON model whose node links loop or point past the
tree loads, then crashes the process (a segmentation fault) on the first prediction. Every tree
is walked here first, so a damaged file is one ``PredictorError``; arrays of the wrong length,
split features out of range and values that are not finite are refused too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from infercast.files import FileError, read_json
from infercast.predictors.errors import PredictorError

NODE_ARRAYS = ("left_children", "right_children", "split_indices", "split_conditions", "base_weights")


def check_model_json(path: Path) -> None:
    """Refuse an XGBoost JSON model whose trees cannot be walked safely."""
    try:
        data = read_json(path, "XGBoost model")
        learner = data["learner"]
        features = int(learner["learner_model_param"]["num_feature"])
        trees = learner["gradient_booster"]["model"]["trees"]
    except FileError as error:
        raise PredictorError(str(error)) from None
    except (KeyError, TypeError, ValueError):
        raise PredictorError(f"{path}: not an XGBoost tree model (no learner / trees)") from None
    for index, tree in enumerate(trees):
        problem = _tree_problem(tree, features)
        if problem:
            raise PredictorError(f"{path}: tree {index}: {problem}")


def _tree_problem(tree: Any, features: int) -> str | None:
    """Why one tree cannot be predicted with, or None."""
    try:
        nodes = int(tree["tree_param"]["num_nodes"])
        arrays = {name: np.asarray(tree[name], dtype=np.float64) for name in NODE_ARRAYS}
    except (KeyError, TypeError, ValueError) as error:
        return f"a missing or unreadable array ({error})"
    if nodes < 1 or any(array.shape != (nodes,) for array in arrays.values()):
        return f"node arrays of another length than num_nodes = {nodes}"
    if not (np.isfinite(arrays["split_conditions"]).all() and np.isfinite(arrays["base_weights"]).all()):
        return "a split condition or weight that is not a finite number"
    left, right = arrays["left_children"], arrays["right_children"]
    leaf = (left == -1) & (right == -1)
    split = arrays["split_indices"][~leaf]
    if not ((split >= 0) & (split < features) & (split == np.round(split))).all():
        return f"a split on a feature outside 0..{features - 1}"
    children = np.concatenate([left[~leaf], right[~leaf]])
    # no link to the root, out of the tree or to a node another link reaches: then the nodes the
    # root reaches form a tree, and no walk from it can loop
    inside = (children >= 1) & (children < nodes) & (children == np.round(children))
    if not inside.all() or len(np.unique(children)) != len(children):
        return "a node links to the root, outside the tree or to a node another links to: not a new node"
    return None
