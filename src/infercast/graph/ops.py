"""Canonical operator kinds and their analytic costs.

Every capture path (torch.fx, torch.export, ONNX) names operators differently: ``nn.Conv2d``,
``F.conv2d``, ``aten::convolution`` and ONNX ``Conv`` are one operator. They are all reduced to
one *canonical kind* here, and costs are computed here alone from the kind and the shapes, so that
the same network gives the same totals whichever path captured it.

Cost conventions (documented in docs/graph.md):

* MACs are counted for conv / linear / matmul only; FLOPs = 2·MACs for them (bias not counted,
  as in ``torch.utils.flop_counter.FlopCounterMode``).
* Scaled dot-product attention is one operator (``attention``): MACs of its two matrix products,
  FLOPs twice those plus a softmax's three per score.
* Element-wise ops (activations, add, mul, …) cost one FLOP per output element; batchnorm two
  (scale and shift); softmax three (exp, sum, divide); pooling one per window element per output;
  global pooling one per input element. Data movement (concat, pad, transpose, upsample) is free
  in FLOPs but not in bytes.
* *Alias* kinds (reshape, identity, slice, split) produce a view of their input: they allocate
  nothing and extend the lifetime of the tensor they view.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

Shape = tuple[int, ...]

CONV_KINDS = frozenset({"conv", "dwconv", "gconv", "deconv"})
MATMUL_KINDS = frozenset({"linear", "matmul"})
# the algorithm an op table names for a convolution or windowed pool ONNX Runtime ran in its plain
# NCHW layout on a CPU where it runs the others in its blocked NCHWc one: several times slower per
# FLOP there
PLAIN_LAYOUT = "nchw"
# pools over a window, which ONNX Runtime runs blocked only when their channels fill whole blocks
WINDOW_POOL_KINDS = frozenset({"max_pool", "avg_pool"})
ACTIVATION_KINDS = frozenset(
    {
        "relu",
        "relu6",
        "leaky_relu",
        "prelu",
        "elu",
        "selu",
        "sigmoid",
        "hardsigmoid",
        "tanh",
        "hardswish",
        "swish",
        "gelu",
        "mish",
        "softplus",
        "clip",
    }
)
# the op-table types of kernels that only move data, which a runtime may add to a captured graph:
# ONNX Runtime's copies between its blocked and plain layouts, and the copies its Split and Slice
# make (views in PyTorch). Not ops of a graph, so not in OP_GROUPS
REORDER, SPLIT = "reorder", "split"
MOVEMENT_TYPES = frozenset({REORDER, SPLIT})
ELEMENTWISE_KINDS = frozenset({"add", "sub", "mul", "div"})
NORM_KINDS = frozenset({"bn", "layernorm", "groupnorm", "instancenorm"})
ALIAS_KINDS = frozenset({"reshape", "identity", "slice", "split"})
WEIGHTED_KINDS = CONV_KINDS | MATMUL_KINDS | NORM_KINDS | {"prelu"}

# Normalised source-op name -> canonical kind. Names from nn.Module classes, torch functions and
# Tensor methods (torch.fx), ATen overloads (torch.export) and ONNX op types all land here after
# ``normalise_op_name``. Kinds that depend on shapes or attributes ("conv", "adaptiveavgpool",
# "mean", "clip", …) are refined by the capture code with ``refine_*`` below.
_ALIASES: dict[str, str] = {
    # convolutions
    "conv": "conv",
    "convolution": "conv",
    "convtranspose": "deconv",
    # matrix products
    "linear": "linear",
    "gemm": "linear",
    "addmm": "linear",
    "mm": "matmul",
    "matmul": "matmul",
    "bmm": "matmul",
    # normalisation
    "batchnorm": "bn",
    "batchnormalization": "bn",
    "nativebatchnormlegitnotraining": "bn",
    "nativebatchnorm": "bn",
    "layernorm": "layernorm",
    "layernormalization": "layernorm",
    "groupnorm": "groupnorm",
    "groupnormalization": "groupnorm",
    "instancenorm": "instancenorm",
    "instancenormalization": "instancenorm",
    # activations
    "relu": "relu",
    "relu6": "relu6",
    "hardtanh": "clip",
    "clip": "clip",
    "clamp": "clip",
    "leakyrelu": "leaky_relu",
    "prelu": "prelu",
    "elu": "elu",
    "selu": "selu",
    "sigmoid": "sigmoid",
    "hardsigmoid": "hardsigmoid",
    "tanh": "tanh",
    "hardswish": "hardswish",
    "silu": "swish",
    "swish": "swish",
    "gelu": "gelu",
    "mish": "mish",
    "softplus": "softplus",
    # element-wise arithmetic
    "add": "add",
    "iadd": "add",
    "sub": "sub",
    "isub": "sub",
    "rsub": "sub",
    "mul": "mul",
    "imul": "mul",
    "div": "div",
    "truediv": "div",
    "itruediv": "div",
    # pooling
    "maxpool": "max_pool",
    "maxpoolwithindices": "max_pool",
    "avgpool": "avg_pool",
    "averagepool": "avg_pool",
    "adaptiveavgpool": "adaptive_avg_pool",
    "adaptivemaxpool": "adaptive_max_pool",
    "globalaveragepool": "global_pool",
    "globalmaxpool": "global_pool",
    "mean": "mean",
    "reducemean": "mean",
    # data movement
    "cat": "concat",
    "concat": "concat",
    "concatenate": "concat",
    "pad": "pad",
    "constantpadnd": "pad",
    "zeropad": "pad",
    "constantpad": "pad",
    "reflectionpad": "pad",
    "transpose": "transpose",
    "permute": "transpose",
    "channelshuffle": "transpose",
    "upsample": "upsample",
    "interpolate": "upsample",
    "resize": "upsample",
    "upsamplenearest": "upsample",
    "upsamplebilinear": "upsample",
    "softmax": "softmax",
    "logsoftmax": "softmax",
    # attention as one fused operator (F.scaled_dot_product_attention and its ATen kernels)
    "scaleddotproductattention": "attention",
    "scaleddotproductflashattentionforcpu": "attention",
    "scaleddotproductefficientattention": "attention",
    "scaleddotproductflashattention": "attention",
    # views and no-ops
    "flatten": "reshape",
    "view": "reshape",
    "reshape": "reshape",
    "unsafeview": "reshape",
    "squeeze": "reshape",
    "unsqueeze": "reshape",
    "expand": "reshape",
    "contiguous": "identity",
    "clone": "identity",
    "identity": "identity",
    "dropout": "identity",
    "alias": "identity",
    "detach": "identity",
    "to": "identity",
    "type": "identity",
    "float": "identity",
    "slice": "slice",
    "select": "slice",
    "narrow": "slice",
    "getitem": "slice",
    "split": "split",
    "splittosequence": "split",
    "sequenceat": "slice",
    "chunk": "split",
    "splitwithsizes": "split",
    "unbind": "split",
}


def normalise_op_name(name: str) -> str:
    """Reduce a module class, function, method, ATen or ONNX op name to a lookup key."""
    name = name.rsplit("::", 1)[-1].rsplit(".", 1)[-1]
    name = name.strip("_").lower()
    name = re.sub(r"[123]d$", "", name)
    return name.replace("_", "")


def kind_of(op_name: str) -> str:
    """Canonical kind for a source op name; unknown ops are kept as ``other:<name>``."""
    key = normalise_op_name(op_name)
    return _ALIASES.get(key, f"other:{key}")


def kernel_shape(weight_shapes: Sequence[Shape], input_shapes: Sequence[Shape]) -> Shape | None:
    """A convolution's kernel (O, I/groups, k…): its weight, or its second input where the network
    computes the kernel each step (weight standardisation, CondConv's mixture of experts)."""
    weight = next((shape for shape in weight_shapes if len(shape) >= 3), None)
    if weight is None and len(input_shapes) >= 2 and len(input_shapes[1]) >= 3:
        return tuple(input_shapes[1])
    return weight


def refine_conv(groups: int, in_channels: int, transposed: bool = False) -> str:
    if transposed:
        return "deconv"
    if groups == 1:
        return "conv"
    return "dwconv" if groups == in_channels else "gconv"


def refine_clip(low: float | None, high: float | None) -> str:
    if low == 0 and high == 6:
        return "relu6"
    if low == 0 and high is None:
        return "relu"
    return "clip"


def refine_spatial_reduce(kind: str, in_shape: Shape, out_shape: Shape) -> str:
    """Adaptive pools and means are global pools when they leave one value per (sample, channel).

    Decided from shapes alone, so an ``nn.AdaptiveAvgPool2d(1)``, ``x.mean((2, 3))``, ONNX
    ``GlobalAveragePool`` and an ONNX ``ReduceMean`` over the spatial axes all agree.
    """
    is_global = len(in_shape) >= 3 and numel(out_shape) == in_shape[0] * in_shape[1]
    if kind in ("adaptive_avg_pool", "adaptive_max_pool", "mean"):
        if is_global:
            return "global_pool"
        return {"adaptive_avg_pool": "avg_pool", "adaptive_max_pool": "max_pool"}.get(kind, "other:mean")
    return kind


def pool_window(kernel: Sequence[int] | None, in_shape: Shape, out_shape: Shape) -> int:
    """Elements each pooled output reads: the kernel, or for adaptive pools the input/output ratio."""
    if kernel:
        return math.prod(kernel)
    return math.prod(-(-i // max(o, 1)) for i, o in zip(in_shape[2:], out_shape[2:], strict=False))


def is_alias(kind: str) -> bool:
    return kind in ALIAS_KINDS


def op_group(kind: str) -> str:
    """Coarse op-type vocabulary shared with op-level tables (conv, dwconv, …, act, other)."""
    if kind in ("conv", "dwconv", "gconv", "linear", "add", "mul", "bn", "concat", "global_pool"):
        return kind
    if kind in ("deconv",):
        return "conv"
    if kind == "matmul":
        return "linear"
    if kind == "max_pool":
        return "pool_max"
    if kind == "avg_pool":
        return "pool_avg"
    if kind in ACTIVATION_KINDS:
        return "act"
    return "other"


def as_pointwise_conv(kind: str, in_shape: Shape | None, out_shape: Shape | None) -> dict[str, int] | None:
    """A matrix product applied at every position of a map or sequence — ConvNeXt's pointwise
    layers, fully connected on a channels-last (N, H, W, C) tensor — as the op-table row of the 1×1
    convolution it equals: ``op_type`` conv, the positions as h × w, the last axes as channels.
    Each weight is reused once per position, so it runs as compute-bound as that convolution (one
    GEMM), unlike a classifier's one-row product, which reads every weight once. None for a
    product on one row per sample and for every other kind."""
    if kind not in MATMUL_KINDS or not in_shape or not out_shape or len(in_shape) < 3:
        return None
    positions = in_shape[1:-1]
    if math.prod(positions) < 2:
        return None
    height, width = positions[0], math.prod(positions[1:])
    return {
        "op_type": "conv",
        "h_in": height,
        "w_in": width,
        "c_in": in_shape[-1],
        "h_out": height,
        "w_out": width,
        "c_out": out_shape[-1],
        "kernel_size": 1,
        "stride": 1,
        "groups": 1,
    }


OP_GROUPS: tuple[str, ...] = (
    "conv",
    "dwconv",
    "gconv",
    "linear",
    "pool_max",
    "pool_avg",
    "global_pool",
    "concat",
    "add",
    "mul",
    "act",
    "bn",
    "other",
)

_PER_ELEMENT_FLOPS: dict[str, int] = {
    **dict.fromkeys(ACTIVATION_KINDS, 1),
    **dict.fromkeys(ELEMENTWISE_KINDS, 1),
    "bn": 2,
    "layernorm": 5,
    "groupnorm": 5,
    "instancenorm": 5,
    "softmax": 3,
}


def macs_of(
    kind: str, in_shape: Shape | None, out_shape: Shape, weight_shape: Shape | None, reduce_dim: int | None
) -> int:
    """Multiply-accumulates of conv / linear / matmul; zero for everything else.

    ``weight_shape`` is the convolution kernel (O, I/groups, k…) and ``reduce_dim`` the inner
    dimension of a matrix product.
    """
    if kind in CONV_KINDS and weight_shape is not None:
        if kind == "deconv":
            # ConvTranspose weight is (Cin, Cout/groups, k…): every input element feeds Cout/g·k MACs.
            return numel(in_shape or ()) * numel(weight_shape[1:])
        return numel(out_shape) * numel(weight_shape[1:])
    if kind in MATMUL_KINDS and reduce_dim is not None:
        return numel(out_shape) * reduce_dim
    return 0


def attention_macs(in_shapes: Sequence[Shape], out_shape: Shape) -> int:
    """Multiply-accumulates of scaled dot-product attention on query (…, Lq, D), key (…, Lk, D)
    and value (…, Lk, Dv): the query-key product and the weighted sum of values (the softmax
    between them is counted as an element-wise op would be, in FLOPs)."""
    if len(in_shapes) < 2 or len(in_shapes[0]) < 2 or len(in_shapes[1]) < 2 or len(out_shape) < 2:
        return 0
    query, key = in_shapes[0], in_shapes[1]
    return numel(query[:-1]) * key[-2] * query[-1] + numel(out_shape[:-1]) * key[-2] * out_shape[-1]


def flops_of(kind: str, macs: int, in_shapes: Sequence[Shape], out_shape: Shape, window: int | None) -> int:
    if kind in CONV_KINDS or kind in MATMUL_KINDS:
        return 2 * macs
    if kind == "attention":
        scores = numel(in_shapes[0][:-1]) * in_shapes[1][-2] if len(in_shapes) >= 2 and in_shapes[1] else 0
        return 2 * macs + 3 * scores
    if kind in ("max_pool", "avg_pool"):
        return numel(out_shape) * (window or 1)
    if kind == "global_pool":
        return numel(in_shapes[0]) if in_shapes else 0
    return numel(out_shape) * _PER_ELEMENT_FLOPS.get(kind, 0)


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def movement_row(op_type: str, source: Shape, targets: Sequence[Shape], itemsize: int) -> dict[str, object]:
    """The op-table row of a data-movement kernel (``MOVEMENT_TYPES``) that reads ``source`` and
    writes ``targets``: the shapes of the tensor read and of the first written, and the bytes
    read and written (plain layout)."""

    def axis(shape: Shape, index: int) -> int | None:
        return shape[index] if len(shape) > index else None

    first = targets[0] if targets else source
    return {
        "op_type": op_type,
        "h_in": axis(source, 2),
        "w_in": axis(source, 3),
        "c_in": axis(source, 1),
        "h_out": axis(first, 2),
        "w_out": axis(first, 3),
        "c_out": axis(first, 1),
        "flops": 0,
        "bytes": (numel(source) + sum(numel(t) for t in targets)) * itemsize,
    }
