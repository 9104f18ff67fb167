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

from infercast.features.device import (
    BASE_FEATURES,
    DEVICE_FEATURE_DOCS,
    DEVICE_FEATURES,
    SMALL_KERNEL_FEATURES,
    SMALL_KERNEL_MFLOPS,
)
from infercast.graph import Graph
from infercast.predictors.fusion import TFLITE, kernel_table

__all__ = [
    "BASE_FEATURES",
    "DEVICE_FEATURES",
    "DEVICE_FEATURE_DOCS",
    "SMALL_KERNEL_FEATURES",
    "SMALL_KERNEL_MFLOPS",
    "device_feature_frame",
    "device_features",
]

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
