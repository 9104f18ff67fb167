"""The work of a network as PyTorch runs it on a GPU without a compiler: one kernel per operator
(a view allocates and launches nothing), counted per sample.

``eager_work(graph)`` sums, for each group of operators, the FLOPs and the bytes read (weights
included) and written per sample and the kernels launched per step, plus the FLOPs of
matrix-product kernels (convolutions, linear layers, attention) too small to fill a large GPU.
Per sample: a GPU benchmark's batch is a column of its own, and what a step does once whatever
its batch (read the weights, add a position table broadcast over the batch) is shared by its
samples.
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd

from infercast.graph import Graph, ops

_GROUP_OF: dict[str, str] = {
    **dict.fromkeys(("conv", "deconv"), "conv"),
    "dwconv": "dwconv",
    "gconv": "gconv",
    **dict.fromkeys(ops.MATMUL_KINDS, "linear"),
    "attention": "attention",
    **dict.fromkeys(ops.NORM_KINDS, "norm"),
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


def eager_work_frame(graphs: list[Graph]) -> pd.DataFrame:
    """``eager_work`` of several graphs, one row each."""
    return pd.DataFrame([eager_work(g) for g in graphs], columns=list(WORK_COLUMNS))


__all__ = ["GROUPS", "WORK_COLUMNS", "eager_work", "eager_work_frame", "group_of"]
