"""Which graph ops a backend runs as one kernel: the fusion rules of the op-wise predictor.

Rules are data, one entry per backend and optimisation level, and checkable against profiles:
``fusion_agreement`` compares the kernels the rules predict with the fused nodes the ONNX Runtime
profiler reported (``measurement.ops``), and a test holds them equal on real models.

ONNX Runtime (CPU provider), by optimisation level (onnxruntime/core/optimizer):
- every level: BatchNorm after a convolution is folded — already by the ONNX export in eval mode,
  and by ``ConvBNFusion`` at ``basic``;
- ``extended`` and ``all``: ``ConvActivationFusion`` runs a convolution and the activation right
  after it as one ``FusedConv`` (Relu, Clip/Relu6, Sigmoid, Tanh, LeakyRelu, HardSigmoid);
- ``all``: the NCHWc layout transformer also fuses a residual ``Add`` into the convolution that
  produces one of its inputs (when that convolution feeds nothing else), then the activation after
  the ``Add``; it runs a BatchNormalization that no convolution absorbed as a 1×1 convolution,
  with the activation after it; and ``x · sigmoid(x)`` runs as one kernel (QuickGelu fusion).
  On a CPU with a vector block (the platform fingerprint's ``nchwc_block``: 16 with AVX-512, 8
  with AVX2) it runs convolutions in the blocked NCHWc layout, except those ``ort_blocks`` rejects,
  which run in plain NCHW (``algorithm`` ``nchw``; on this project's AVX-512 VM 5× slower per
  FLOP for grouped convolutions, 8× for depthwise ones, profiled in real networks).
PyTorch eager (``torch-cpu``, ``torch-cuda``) fuses nothing: one kernel per op.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from infercast.graph import Graph, op_group
from infercast.graph.ops import (
    CONV_KINDS,
    MATMUL_KINDS,
    PLAIN_LAYOUT,
    WINDOW_POOL_KINDS,
    as_pointwise_conv,
    is_alias,
    kind_of,
)
from infercast.predictors.optable import ALGORITHM, REQUIRED_OP_COLUMNS, SHAPE_COLUMNS

_CONV_ACTIVATIONS = frozenset({"relu", "relu6", "clip", "sigmoid", "tanh", "leaky_relu", "hardsigmoid"})


@dataclass(frozen=True)
class FusionRules:
    fold_bn: bool = False
    conv_activation: frozenset[str] = frozenset()
    conv_add: bool = False
    bn_activation: bool = False
    # ONNX Runtime's NCHWc channel block on the machine; 0: no blocked layout, one algorithm
    nchwc_block: int = 0
    # the ops a swish node (x · sigmoid(x), one node of a captured graph) counts as in a kernel's
    # ``n_ops``: the ONNX export writes Sigmoid and Mul, and ONNX Runtime's profiler reports both
    # (at ``all`` in one QuickGelu kernel); counted as one, the kernel regressors priced swish
    # like a ReLU, several times below what a swish network's activation kernels measure
    swish_ops: int = 1
    # a split or slice copies its parts out (ONNX Runtime's Split and Slice kernels), and tensors
    # move between the blocked and plain layouts where an op needs the other one
    # (``predictors.movement``); in PyTorch a split is a view
    moves_data: bool = False


# what every optimisation level of ONNX Runtime does; the levels add fusions to it
_ORT_ANY = FusionRules(fold_bn=True, swish_ops=2, moves_data=True)
_ORT = {
    "disabled": _ORT_ANY,
    "basic": _ORT_ANY,
    "extended": replace(_ORT_ANY, conv_activation=_CONV_ACTIVATIONS),
    "all": replace(_ORT_ANY, conv_activation=_CONV_ACTIVATIONS, conv_add=True, bn_activation=True),
}


TFLITE = FusionRules(fold_bn=True, conv_activation=_CONV_ACTIVATIONS, conv_add=True)


def _ort_rules(settings: dict[str, Any], machine: dict[str, Any]) -> FusionRules:
    level = settings.get("opt_level", "all")
    if level not in _ORT:
        raise ValueError(f"opt_level={level!r}: ONNX Runtime levels are {', '.join(_ORT)}")
    if level == "all" and settings.get("device", "cpu") == "cpu":
        return replace(_ORT[level], nchwc_block=int(machine.get("nchwc_block") or 0))
    return _ORT[level]


# backend-name prefix → its rules from the platform settings and the machine's fingerprint; a new
# backend family is one line here
RULES_BY_BACKEND: dict[str, Callable[[dict[str, Any], dict[str, Any]], FusionRules]] = {
    "ort-": _ort_rules,
    "torch-": lambda settings, machine: FusionRules(),  # eager PyTorch runs every op as its own kernel
    # the TFLite converter folds BatchNorm and activations into convolutions; its GPU delegate
    # links a residual add into the kernel before it (usc-mobile's kernel names: `_linked_:_add`)
    "tflite-": lambda settings, machine: TFLITE,
}


def rules_for(
    backend: str, settings: dict[str, Any] | None = None, machine: dict[str, Any] | None = None
) -> FusionRules:
    """The kernels ``backend`` (with its ``settings``, on the ``machine`` of a platform
    fingerprint) makes of a graph's ops."""
    for prefix, rules in RULES_BY_BACKEND.items():
        if backend.startswith(prefix):
            return rules(settings or {}, machine or {})
    known = ", ".join(f"{p}*" for p in RULES_BY_BACKEND)
    raise ValueError(f"no fusion rules for backend {backend!r} (known: {known})")


# the op table's columns (docs/formats.md), as a captured graph's kernels fill them
KERNEL_TABLE_COLUMNS = (*REQUIRED_OP_COLUMNS, "kernel", *SHAPE_COLUMNS, "bytes", "n_ops", ALGORITHM)


def ort_blocks(c_in: int, c_out: int, groups: int, block: int) -> bool:
    """Whether ONNX Runtime runs a convolution in its blocked NCHWc layout on a CPU of channel
    ``block`` (its optimiser, onnxruntime/core/optimizer/nchwc_transformer.cc, as ORT 1.32 runs
    it; a test asks the optimiser): channel counts a multiple of 4 are padded to whole blocks (an
    ungrouped convolution with fewer input channels than a block reads plain input), but a grouped
    one needs every group's input and output channels to fill whole blocks."""
    if groups == 1:
        return c_in < block or c_in % 4 == 0
    if c_in == groups and c_out == groups:  # depthwise
        return c_out % 4 == 0
    return c_out % 4 == 0 and (c_in // groups) % block == 0 and (c_out // groups) % block == 0


def kernel_table(graph: Graph, rules: FusionRules, model: str = "") -> pd.DataFrame:
    """One row per graph op the backend still executes (aliases and folded BatchNorms dropped)
    with the ``kernel`` it runs in, in the op-table columns (docs/formats.md): op_type, shapes,
    kernel_size, stride, groups, flops, bytes, and the ops of the backend's graph it stands for
    (``n_ops``)."""
    nodes = [n for n in graph.nodes if not n.is_alias]
    kernel_of, folded = _kernels(graph, nodes, rules)
    rows = [
        _kernel_row(node, rules, model or graph.name, kernel_of[node.index])
        for node in nodes
        if node.index not in folded
    ]
    # a graph of data movement alone (a split, a reshape) runs no kernel: still the same columns
    return pd.DataFrame(rows, columns=KERNEL_TABLE_COLUMNS)


def kernels_of(graph: Graph, rules: FusionRules) -> dict[int, int]:
    """Each executed op's kernel: the index of the op heading it (aliases left out)."""
    return _kernels(graph, [n for n in graph.nodes if not n.is_alias], rules)[0]


def _kernels(graph: Graph, nodes: list[Any], rules: FusionRules) -> tuple[dict[int, int], set[int]]:
    """Each op's kernel (the index of the op that heads it) and the BatchNorms folded into the
    weights, which keep no work of their own."""
    producer = {graph.root(t): n for n in nodes for t in n.outputs}
    consumers: dict[str, list[Any]] = defaultdict(list)
    for node in nodes:
        for tensor in node.inputs:
            consumers[graph.root(tensor)].append(node)
    kernel_of: dict[int, int] = {}
    folded: set[int] = set()

    def sole_consumer(node: Any) -> Any:
        users = consumers.get(graph.root(node.outputs[0]), [])
        return users[0] if len(users) == 1 else None

    def joins(follower: Any, kinds: Any) -> bool:
        return follower is not None and follower.kind in kinds and follower.index not in kernel_of

    for node in nodes:
        if node.index in kernel_of:
            continue
        kernel_of[node.index] = node.index
        if node.kind == "bn" and rules.bn_activation:
            follower = sole_consumer(node)
            if joins(follower, rules.conv_activation):
                kernel_of[follower.index] = node.index
            continue
        if node.kind not in CONV_KINDS:
            continue
        tail = node
        follower = sole_consumer(tail)
        if rules.fold_bn and follower is not None and follower.kind == "bn":
            kernel_of[follower.index] = node.index
            folded.add(follower.index)
            tail, follower = follower, sole_consumer(follower)
        if rules.conv_add and joins(follower, ("add",)):
            other = [
                producer.get(graph.root(t))
                for t in follower.inputs
                if graph.root(t) != graph.root(tail.outputs[0])
            ]
            # a residual Sum: two computed tensors (x + 3 is not one), joined to the later producer
            if len(other) == 1 and other[0] is not None and other[0].index < node.index:
                kernel_of[follower.index] = node.index
                tail, follower = follower, sole_consumer(follower)
        if joins(follower, rules.conv_activation):
            kernel_of[follower.index] = node.index
    return kernel_of, folded


def _kernel_row(node: Any, rules: FusionRules, model: str, kernel_index: int) -> dict[str, Any]:
    """An op's row of the op table, in the kernel it runs in."""
    inp = node.input_shapes[0] if node.input_shapes else ()
    out = node.output_shapes[0] if node.output_shapes else ()
    kernel = node.attrs.get("kernel")
    stride = node.attrs.get("stride")
    groups = node.attrs.get("groups", 1 if node.kind in CONV_KINDS else None)
    # a transposed convolution has no blocked kernel; a windowed pool one only on whole blocks
    plain = rules.nchwc_block > 0 and (
        (
            node.kind in CONV_KINDS
            and (
                node.kind == "deconv"
                or not ort_blocks(int(inp[1]), int(out[1]), int(groups or 1), rules.nchwc_block)
            )
        )
        or (node.kind in WINDOW_POOL_KINDS and len(inp) == 4 and int(inp[1]) % rules.nchwc_block != 0)
    )
    pointwise = as_pointwise_conv(node.kind, inp, out)
    if pointwise is not None:  # a GEMM, not a blocked convolution
        plain = rules.nchwc_block > 0
    return {
        "model": model,
        "op_type": op_group(node.kind),
        "kernel": kernel_index,
        "h_in": _dim(inp, 2),
        "w_in": _dim(inp, 3),
        "c_in": inp[-1] if node.kind in MATMUL_KINDS and inp else _dim(inp, 1),
        "h_out": _dim(out, 2),
        "w_out": _dim(out, 3),
        "c_out": out[-1] if node.kind in MATMUL_KINDS and out else _dim(out, 1),
        "kernel_size": kernel[0] if kernel else None,
        "stride": stride[0] if stride else None,
        "groups": groups,
        "flops": node.flops,
        "bytes": node.bytes_read + node.bytes_written,
        "n_ops": rules.swish_ops if node.kind == "swish" else 1,
        ALGORITHM: PLAIN_LAYOUT if plain else "",
        **(pointwise or {}),
    }


def _dim(shape: tuple[int, ...], axis: int) -> float | None:
    return shape[axis] if len(shape) > axis else None


def _signature(op_types: list[str]) -> tuple[str, ...]:
    """The op mix of a kernel; convolutions of any grouping read alike, since ONNX calls all Conv."""
    return tuple(sorted("conv" if t in ("dwconv", "gconv") else t for t in op_types if t != "bn"))


def shape_arithmetic(fused_ops: list[str]) -> bool:
    """A kernel computing a tensor's shape (an exported ``x.view(n, c, …)`` reads ``Shape``): it
    moves no activations, and PyTorch's graph has no node for it; its time is overhead."""
    return "Shape" in fused_ops


def fusion_agreement(predicted: pd.DataFrame, profiled: list[dict[str, Any]]) -> dict[str, Any]:
    """Compare predicted kernels (``kernel_table`` rows) with the profiler's kernel rows (each with
    ``fused_ops``, the ONNX op types it ran, and ``op_type``): the share of profiled kernels whose
    op mix the rules reproduce. A single-op kernel reads as its ``op_type`` (ONNX's ReduceMean
    over H, W is a global pool); layout and reshape nodes compute nothing and are left out."""

    def kinds(row: dict[str, Any]) -> list[str]:
        ops = [op for op in row["fused_ops"] if not is_alias(kind_of(op))]
        if len(ops) == 1 or sorted(ops) == ["Mul", "Sigmoid"]:  # x·sigmoid(x) is one swish in the graph
            return [row["op_type"]]
        return [op_group(kind_of(op)) for op in ops]

    want = Counter(
        _signature(kinds(row))
        for row in profiled
        if row["fused_ops"] and not shape_arithmetic(row["fused_ops"])
    )
    want.pop((), None)
    have = Counter(_signature(list(group["op_type"])) for _, group in predicted.groupby("kernel", sort=False))
    have.pop((), None)
    matched = sum((want & have).values())
    return {
        "profiled_kernels": sum(want.values()),
        "predicted_kernels": sum(have.values()),
        "matched": matched,
        "agreement": matched / max(sum(want.values()), 1),
        "missing": sorted(map(list, (want - have).elements())),
        "extra": sorted(map(list, (have - want).elements())),
    }
