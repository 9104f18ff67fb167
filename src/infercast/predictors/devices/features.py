"""The graph features a shipped device predictor learns from: work per kind of kernel, as the
TFLite converter and its GPU delegate lay a network out (BatchNorm and activations folded into
convolutions, a residual add linked into the kernel before it).

Each feature is an amount a device spends time on — FLOPs of dense, depthwise and grouped
convolutions, bytes moved, kernels launched — so latency ≈ Σ cost_i · feature_i with non-negative
costs, a form that carries to architecture families a predictor never saw, where a FLOPs count
does not (benchmarks/device_cards.py). Finer bins (convolutions by window, stems, channel slices
of 4) fitted no better with architecture families held out: 102 networks cannot pin them. The
GFLOPs of small convolution kernels did (fp32 phone CPUs: median error 8.7 → 7.6 %).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from infercast.graph import Graph
from infercast.predictors.fusion import TFLITE, kernel_table

DEVICE_FEATURE_DOCS: dict[str, str] = {
    "gflops_conv": "GFLOPs of dense convolutions (groups = 1) and of fully connected layers applied at "
    "every position of a map (1×1 convolutions in effect)",
    "gflops_dwconv": "GFLOPs of depthwise convolutions",
    "gflops_gconv": "GFLOPs of grouped (not depthwise) convolutions",
    "gflops_linear": "GFLOPs of fully connected layers and matrix products on one row (classifiers)",
    "mops_pool": "million output elements × window of max / average pooling",
    "melements_concat": "million output elements of concatenations",
    "melements_elementwise": "million output elements of element-wise ops, activations and other ops "
    "that run as kernels of their own (not fused into a convolution)",
    "mb_activations": "MB of activations read and written by the kernels (first op of each)",
    "mb_weights": "MB of weights read",
    "kernels": "number of kernels launched",
    "constant": "1: a per-inference cost",
}
BASE_FEATURES: tuple[str, ...] = tuple(DEVICE_FEATURE_DOCS)
# Small convolution kernels run below the device's peak rate (too little work to fill its cores
# or hide a launch); where "small" ends differs per device, so each threshold is a candidate
# column and the predictor keeps the one grouped cross-validation prefers (or none).
SMALL_KERNEL_MFLOPS = (5, 10, 20, 50)
SMALL_KERNEL_FEATURES: tuple[str, ...] = tuple(f"gflops_conv_kernels_under_{m}m" for m in SMALL_KERNEL_MFLOPS)
DEVICE_FEATURE_DOCS.update(
    {
        column: f"GFLOPs of convolution kernels (dense, depthwise, grouped) of fewer than {m} MFLOPs each"
        for column, m in zip(SMALL_KERNEL_FEATURES, SMALL_KERNEL_MFLOPS, strict=True)
    }
)
DEVICE_FEATURES: tuple[str, ...] = tuple(DEVICE_FEATURE_DOCS)

_STANDALONE = ("add", "mul", "act", "bn", "other")
_POOLS = ("pool_max", "pool_avg")


def device_features(graph: Graph) -> dict[str, float]:
    """The device features of one captured graph, keyed by ``DEVICE_FEATURES`` in that order,
    counted on its kernels as TFLite runs them (``fusion.kernel_table`` with ``fusion.TFLITE``)."""
    table = kernel_table(graph, TFLITE, model=graph.name)
    op = table["op_type"].to_numpy()
    flops = table["flops"].to_numpy(dtype=np.float64)
    out_elements = (table["h_out"].fillna(1) * table["w_out"].fillna(1) * table["c_out"].fillna(1)).to_numpy(
        dtype=np.float64
    )
    # rows come in graph order, so an op heads its kernel (runs as one of its own) when it is the
    # first row of that kernel: a fused activation or add follows its convolution
    own_kernel = ~table["kernel"].duplicated().to_numpy()
    standalone = np.isin(op, _STANDALONE) & own_kernel
    weights_mb = graph.weight_bytes / 1e6
    moved_mb = table["bytes"].to_numpy(dtype=np.float64)[own_kernel].sum() / 1e6
    values = {
        "gflops_conv": flops[op == "conv"].sum() / 1e9,
        "gflops_dwconv": flops[op == "dwconv"].sum() / 1e9,
        "gflops_gconv": flops[op == "gconv"].sum() / 1e9,
        "gflops_linear": flops[op == "linear"].sum() / 1e9,
        "mops_pool": flops[np.isin(op, _POOLS)].sum() / 1e6,
        "melements_concat": out_elements[op == "concat"].sum() / 1e6,
        "melements_elementwise": out_elements[standalone].sum() / 1e6,
        # fused ops' traffic stays in registers: the bytes of the kernels' first ops
        "mb_activations": max(moved_mb - weights_mb, 0.0),
        "mb_weights": weights_mb,
        "kernels": float(own_kernel.sum()),
        "constant": 1.0,
    }
    convs = np.isin(op, ("conv", "dwconv", "gconv"))
    for column, mflops in zip(SMALL_KERNEL_FEATURES, SMALL_KERNEL_MFLOPS, strict=True):
        values[column] = flops[convs & (flops < mflops * 1e6)].sum() / 1e9
    return {name: float(values[name]) for name in DEVICE_FEATURES}


def device_feature_frame(graphs: list[Graph]) -> pd.DataFrame:
    """``device_features`` of several graphs, one row each (the predictors' input)."""
    return pd.DataFrame([device_features(g) for g in graphs], columns=list(DEVICE_FEATURES))
