"""The work of a network as PyTorch runs it on a GPU without a compiler: one kernel per operator
(a view allocates and launches nothing), counted per sample.

``eager_work(graph)`` sums, for each group of operators, the FLOPs and the bytes read (weights
included) and written per sample and the kernels launched per step, plus the FLOPs of
matrix-product kernels (convolutions, linear layers, attention) too small to fill a large GPU.
Per sample: a GPU benchmark's batch is a column of its own, and what a step does once whatever
its batch (read the weights, standardise them, add a position table broadcast over the batch)
is shared by its samples: a table measured at one batch keeps each column's part per sample and
its part per step (``split_per_step``, ``at_batch``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pandas as pd

from infercast.graph import Graph, ops

_GROUP_OF: dict[str, str] = {
    **dict.fromkeys(("conv", "deconv"), "conv"),
    "dwconv": "dwconv",
    "gconv": "gconv",
    **dict.fromkeys(ops.MATMUL_KINDS, "linear"),
    "attention": "attention",
    # batch norm runs in the half precision of its input under autocast, the other norms in float32
    **dict.fromkeys(ops.NORM_KINDS - {"bn"}, "norm"),
    "bn": "bn",
    **dict.fromkeys(ops.ACTIVATION_KINDS, "act"),
    **dict.fromkeys(ops.ELEMENTWISE_KINDS, "elementwise"),
    **dict.fromkeys(
        ("max_pool", "avg_pool", "global_pool", "adaptive_avg_pool", "adaptive_max_pool"), "pool"
    ),
    "softmax": "softmax",
    **dict.fromkeys(("concat", "pad", "transpose", "upsample"), "memory"),
}
GROUPS: tuple[str, ...] = (*dict.fromkeys(_GROUP_OF.values()), "other")
PRODUCT_GROUPS = ("conv", "dwconv", "gconv", "linear", "attention")
# Per-sample MFLOPs under which a matrix-product kernel is "small": where a GPU's efficiency
# falls off differs per device and batch, so each threshold is a column and the learner weighs them
SMALL_MFLOPS = (1, 10, 100)

WORK_COLUMNS: tuple[str, ...] = (
    *(f"gflops_{g}" for g in GROUPS),
    *(f"mb_{g}" for g in GROUPS),
    *(f"kernels_{g}" for g in GROUPS),
    *(f"gflops_products_under_{m}m" for m in SMALL_MFLOPS),
    "mb_weights",
)
# a column counted once a step: the rest are per sample, and a table captured at one batch
# holds each of those as its part per sample and its part per step (``PER_STEP``)
STEP_COLUMNS = (*(c for c in WORK_COLUMNS if c.startswith("kernels_")), "mb_weights")
PER_STEP = "@step"


def group_of(kind: str) -> str:
    """The group an operator kind's work is counted in (``other`` for unknown kinds)."""
    return _GROUP_OF.get(kind, "other")


def eager_work(graph: Graph) -> dict[str, float]:
    """The graph's ``WORK_COLUMNS``, per sample of its batch."""
    batch = max(int(graph.input_shape[0]), 1) if graph.input_shape else 1
    values: dict[str, float] = defaultdict(float)
    for node in graph.nodes:
        if node.is_alias:
            continue
        group = group_of(node.kind)
        flops = node.flops / batch
        values[f"gflops_{group}"] += flops / 1e9
        values[f"mb_{group}"] += (node.bytes_read + node.bytes_written) / batch / 1e6
        values[f"kernels_{group}"] += 1.0
        if group in PRODUCT_GROUPS:
            for m in SMALL_MFLOPS:
                if flops < m * 1e6:
                    values[f"gflops_products_under_{m}m"] += flops / 1e9
    values["mb_weights"] = graph.weight_bytes / 1e6
    return {column: float(values[column]) for column in WORK_COLUMNS}


def split_per_step(one: dict[str, float], two: dict[str, float]) -> dict[str, float]:
    """``eager_work`` of a network at batch 1 (``one``) and 2 (``two``) as each column's part
    per sample and, under ``column + PER_STEP``, its part per step: at batch b a column is
    ``part + part_per_step / b`` (``at_batch``)."""
    out = {}
    for column in WORK_COLUMNS:
        if column in STEP_COLUMNS:
            out[column] = one[column]
        else:  # the totals of a step: one[c] at batch 1, 2 · two[c] at batch 2
            out[column] = 2 * two[column] - one[column]
            out[column + PER_STEP] = 2 * one[column] - 2 * two[column]
    return out


def at_batch(rows: pd.DataFrame, batch: Any) -> pd.DataFrame:
    """``WORK_COLUMNS`` per sample at ``batch`` of rows that hold ``split_per_step``'s parts."""
    batch = np.asarray(batch, dtype=np.float64)
    out = rows[list(WORK_COLUMNS)].astype(np.float64).copy()
    for column in WORK_COLUMNS:
        if column not in STEP_COLUMNS:
            out[column] = out[column].to_numpy() + rows[column + PER_STEP].to_numpy(dtype=np.float64) / batch
    return out


def eager_work_frame(graphs: list[Graph]) -> pd.DataFrame:
    """``eager_work`` of several graphs, one row each."""
    return pd.DataFrame([eager_work(g) for g in graphs], columns=list(WORK_COLUMNS))


__all__ = [
    "GROUPS",
    "PER_STEP",
    "STEP_COLUMNS",
    "WORK_COLUMNS",
    "at_batch",
    "eager_work",
    "eager_work_frame",
    "group_of",
    "split_per_step",
]
