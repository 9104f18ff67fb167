"""XGBoost JSON models read without XGBoost, for two reasons.

Safety: a JSON model whose node links loop or point past the tree loads in XGBoost, then crashes
the process (a segmentation fault) on the first prediction. Every tree is walked here first, so a
damaged file is one ``PredictorError``; arrays of the wrong length, split features out of range
and values that are not finite are refused too.

Speed: the same arrays predict a few rows without importing XGBoost (``tree_walk``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from infercast.files import FileError, read_json_text
from infercast.predictors.errors import PredictorError
from infercast.predictors.tree_walk import TreeWalk, packed

NODE_ARRAYS = ("left_children", "right_children", "split_indices", "split_conditions", "base_weights")
# a model is walked here only where a prediction is the base score plus one leaf of each tree
WALKED_OBJECTIVES = ("reg:squarederror",)


def read_model_json(path: Path) -> tuple[Any, bytes]:
    """The parsed JSON of an XGBoost model whose trees can be walked safely, and the bytes it was
    parsed from (what XGBoost may load); else a ``PredictorError``."""
    try:
        data, text = read_json_text(path, "XGBoost model")
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
    return data, text


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


def xgboost_walk(data: Any) -> TreeWalk | None:
    """The numpy walk of a model ``read_model_json`` parsed, or None where its prediction is more
    than the base score plus a leaf of each tree (another objective or booster, categorical
    splits, a forest per round)."""
    learner = data["learner"]
    booster, params = learner["gradient_booster"], learner["learner_model_param"]
    trees = booster.get("model", {}).get("trees", [])
    simple = (
        learner.get("objective", {}).get("name") in WALKED_OBJECTIVES
        and booster.get("name") == "gbtree"
        and str(booster["model"].get("gbtree_model_param", {}).get("num_parallel_tree", "1")) == "1"
        and str(params.get("num_target", "1")) == "1"
        and all(not any(tree.get("split_type", [])) for tree in trees)
        and all(len(tree.get("default_left", [])) == len(tree["left_children"]) for tree in trees)
    )
    if not simple or not trees:
        return None
    arrays = []
    for tree in trees:
        left = np.asarray(tree["left_children"], dtype=np.int64)
        arrays.append(
            {
                "left": left,
                "right": np.asarray(tree["right_children"], dtype=np.int64),
                "feature": np.asarray(tree["split_indices"], dtype=np.int64),
                # a split's condition, or a leaf's value: XGBoost keeps both in one array
                "threshold": np.asarray(tree["split_conditions"], dtype=np.float32),
                "leaf_value": np.asarray(tree["split_conditions"], dtype=np.float64),
                "default_left": np.asarray(tree["default_left"], dtype=bool),
                "nan_missing": np.ones(len(left), dtype=bool),
                "zero_missing": np.zeros(len(left), dtype=bool),
            }
        )
    return packed(
        arrays,
        n_features=int(params["num_feature"]),
        dtype=np.float32,
        left_at_threshold=False,
        base_score=float(str(params["base_score"]).strip("[]")),
    )
