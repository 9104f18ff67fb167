"""Shared by the benchmarks on ``../shared/data/usc-mobile`` (qed-usc/mobile-ml-benchmark, MIT
licence; Li, Paolieri, Golubchik, EdgeSys '24): its TFLite GPU op rows as infercast op tables,
its end-to-end latencies, and the architecture family of each pytorchcv network, for folds that
hold out whole families. Latencies there are microseconds; here milliseconds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pandas as pd

GPU_DEVICES = ("pixel4", "s10", "mi8se", "a03s", "iphone7", "iphonexs")

_OP_TYPES = {
    "CONV_2D": "conv",
    "DEPTHWISE_CONV_2D": "dwconv",
    "CONV_2D_GROUP": "gconv",
    "FULLY_CONNECTED": "linear",
    "MAX_POOL_2D": "pool_max",
    "AVERAGE_POOL_2D": "pool_avg",
    "MEAN": "global_pool",
    "CONCATENATION": "concat",
}

# Coarse on purpose: a held-out family leaves no close relative in training (every ResNet
# variant together, every MobileNet generation together, both RegNets together).
_FAMILIES = (
    ("resnet", r"^(pre|se|sepre)?resne(t|xt)"),
    ("squeezenet", r"^squeeze"),
    ("mobilenet", r"^(fd)?mobilenet"),
    ("regnet", r"^regnet"),
    ("nas-mobile", r"^(mnasnet|proxylessnas|spnasnet|fbnet)"),
    ("efficientnet", r"^efficientnet"),
    ("densenet", r"^densenet"),
    ("hardnet", r"^hardnet"),
    ("hrnet", r"^hrnet"),
)


def family(model: str) -> str:
    """The architecture family of a pytorchcv network name (its own name when no rule matches:
    DLA, BagNet, BN-Inception, GhostNet, PeleeNet, VoVNet, DiracNet stand alone)."""
    for name, pattern in _FAMILIES:
        if re.match(pattern, model):
            return name
    return re.sub(r"\d.*$", "", model)


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def _op_row(model: str, operation: str, feature: dict[str, object]) -> dict[str, object]:
    op_type = _OP_TYPES[operation]
    h_in, c_in = _number(feature["Input_shape"]), _number(feature["Input_channel"])
    h_out, filters = _number(feature["Output_shape"]), _number(feature["Filter"])
    kernel, stride, group = _number(feature["Kernel"]), _number(feature["Stride"]), _number(feature["Group"])
    groups, c_out = 1.0, c_in
    if op_type == "conv":
        c_out = filters
    elif op_type == "dwconv":  # Filter is the depth multiplier
        c_out, groups = c_in * filters, c_in
    elif op_type == "gconv":
        c_out, groups = filters, group
    elif op_type == "linear":  # shapes are vector lengths
        h_in, h_out, c_out, kernel, stride = 1.0, 1.0, filters, 1.0, 1.0
    elif op_type == "global_pool":  # Output_shape holds the channel count
        h_out, c_out, kernel, stride = 1.0, h_out, np.nan, np.nan
    elif op_type == "concat":  # Kernel is the number of inputs, Filter the output channels
        c_out, kernel, stride = filters, np.nan, np.nan
    weights = (
        kernel * kernel * c_in * c_out / groups if op_type in ("conv", "dwconv", "gconv", "linear") else 0.0
    )
    activations = h_in * h_in * c_in + h_out * h_out * c_out
    return {
        "model": model,
        "op_type": op_type,
        "h_in": h_in,
        "w_in": h_in,
        "c_in": c_in,
        "h_out": h_out,
        "w_out": h_out,
        "c_out": c_out,
        "kernel_size": kernel,
        "stride": stride,
        "groups": groups,
        "flops": _number(feature["FLOPS"]),
        # fp16 inside the GPU delegate
        "bytes": 2 * (activations + np.nan_to_num(weights)),
    }


def gpu_op_table(folder: str | Path) -> pd.DataFrame:
    """One infercast op-table row per TFLite GPU op (each its own kernel: batch norm and
    activations are folded, adds linked into the preceding kernel by the converter), with the
    shared shape columns and ``latency_ms@<device>`` for each phone."""
    raw = pd.read_csv(Path(folder) / "tflite_cnn_ops_gpu.csv")
    rows = [
        _op_row(str(r.model), str(r.operation), ast.literal_eval(str(r.feature)))
        for r in raw.itertuples(index=False)
    ]
    table = pd.DataFrame(rows)
    table["kernel"] = np.arange(len(table)).astype(str)
    for device in GPU_DEVICES:
        table[f"latency_ms@{device}"] = pd.to_numeric(raw[f"{device}|gpu|float"], errors="coerce") / 1e3
    return table


def e2e_table(folder: str | Path) -> pd.DataFrame:
    """End-to-end latencies (ms), one column per ``<device>|<setting>|<dtype>``, and the authors'
    ``FLOPS`` and ``size``; index the model."""
    raw = pd.read_csv(Path(folder) / "tflite_cnn_e2e.csv").set_index("model")
    means = [c for c in raw.columns if c.endswith("|mean")]
    table = raw[means] / 1e3
    table.columns = [c.removesuffix("|mean") for c in means]
    return table.join(raw[["FLOPS", "size"]])
