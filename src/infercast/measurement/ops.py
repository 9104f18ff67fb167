"""Per-op profiling on ONNX Runtime: one row per *executed* kernel, after graph fusion.

ONNX Runtime's profiler times every node it runs; with optimisations on, those are fused nodes
(a ``FusedConv`` doing Conv + Relu, a Conv with its BatchNorm folded in). For each executed node,
the original graph ops it absorbed are found by walking the original graph back from the node's
outputs to its inputs, and the row carries the shape features of its main op (the weighted one,
else the first) and the FLOPs of everything it absorbed — the table the op-wise predictor learns.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from infercast.graph import Graph, op_group
from infercast.graph.onnx_capture import capture_onnx
from infercast.graph.ops import (
    CONV_KINDS,
    MATMUL_KINDS,
    NORM_KINDS,
    PLAIN_LAYOUT,
    REORDER,
    SPLIT,
    WINDOW_POOL_KINDS,
    as_pointwise_conv,
    movement_row,
)

_LAYOUT_OPS = ("ReorderInput", "ReorderOutput")
# executed ops that copy slices of their input out (views in PyTorch, copies in ONNX Runtime)
_SPLIT_OPS = ("Split", "Slice")
# the ops ONNX Runtime runs either in its blocked layout or, where it cannot, in the plain one
_LAID_OUT_KINDS = CONV_KINDS | WINDOW_POOL_KINDS
# the domain of the nodes ONNX Runtime's optimiser moved into its blocked channel layout
NCHWC_DOMAIN = "com.microsoft.nchwc"


def profile_ort(
    model_bytes: bytes,
    options: Any,
    providers: list[str],
    feed: dict[str, Any],
    runs: int,
    blocked: bool = False,
) -> list[dict]:
    """Kernel rows of one profiled model; ``blocked``: ONNX Runtime runs convolutions in its
    blocked NCHWc layout here, so those it does not are named ``PLAIN_LAYOUT``."""
    import onnxruntime as ort

    original = onnx.ModelProto.FromString(model_bytes)
    with tempfile.TemporaryDirectory() as folder:
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(folder) / "profile")
        options.optimized_model_filepath = str(Path(folder) / "optimized.onnx")
        session = ort.InferenceSession(model_bytes, options, providers=providers)
        for _ in range(runs + 1):
            session.run(None, feed)
        trace = json.loads(Path(session.end_profiling()).read_text())
        optimized = onnx.load(str(Path(folder) / "optimized.onnx"), load_external_data=False)
    durations: dict[str, list[float]] = defaultdict(list)
    for event in trace:
        if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
            durations[event["name"].removesuffix("_kernel_time")].append(event["dur"] / 1000)
    shape = tuple(int(d) for d in next(iter(feed.values())).shape)
    return kernel_rows(original, optimized, durations, shape, blocked)


def kernel_rows(
    original: onnx.ModelProto,
    optimized: onnx.ModelProto,
    durations: dict[str, list[float]],
    input_shape: tuple[int, ...],
    blocked: bool = False,
) -> list[dict[str, Any]]:
    captured = capture_onnx(original, input_shape)
    by_output = {t: node for node in captured.nodes for t in node.outputs}
    graph = _OriginalGraph(original)
    # optimised tensor -> original tensor, filled in execution order (NCHWc nodes rename theirs)
    alias: dict[str, str] = {}
    original_tensors = set(graph.producer) | {i.name for i in original.graph.input}
    for node in optimized.graph.node:
        if node.op_type == "ReorderInput":
            alias[node.output[0]] = alias.get(node.input[0], node.input[0])
        elif node.op_type == "Reshape" and node.name not in graph.by_name:
            # views ORT inserted: MatMulAddFusion runs an N-d MatMul + Add as a 2-d Gemm between
            # two Reshapes, the first flattening an original tensor, the second restoring the
            # original output from the Gemm's
            if node.output[0] not in original_tensors:
                alias[node.output[0]] = alias.get(node.input[0], node.input[0])
            elif node.input[0] not in original_tensors:
                alias[node.input[0]] = node.output[0]
    rows = []
    for index, node in enumerate(optimized.graph.node):
        absorbed = _absorbed(node, graph, alias)
        if node.name not in durations:
            continue
        covered = [by_output[t] for n in absorbed for t in n.output if t in by_output]
        main = next((c for c in covered if c.kind in CONV_KINDS | MATMUL_KINDS), None)
        main = main or next((c for c in covered if c.kind not in NORM_KINDS), covered[0] if covered else None)
        times = durations[node.name][1:] or durations[node.name]  # the first run pays one-off costs
        row: dict[str, Any] = {
            "node_index": index,
            "kernel": node.name,
            "executed_op": node.op_type,
            "fused_ops": [n.op_type for n in absorbed],
            "op_type": op_group(main.kind) if main is not None else "other",
            "flops": sum(c.flops for c in covered),
            "bytes": sum(c.bytes_read + c.bytes_written for c in covered),
            "latency_ms": float(np.median(times)),
        }
        moved = _movement(node, alias, captured)
        if moved is not None:
            row.update(moved)
        elif main is not None:
            row.update(_shape_features(main))
            pointwise = as_pointwise_conv(
                main.kind, _first_shape(main.input_shapes), _first_shape(main.output_shapes)
            )
            row.update(pointwise or {})
            # a GEMM (a pointwise product) runs unblocked as much as a plain-layout convolution
            if blocked and (pointwise or (main.kind in _LAID_OUT_KINDS and node.domain != NCHWC_DOMAIN)):
                row["algorithm"] = PLAIN_LAYOUT
        rows.append(row)
    return rows


def _movement(node: onnx.NodeProto, alias: dict[str, str], captured: Graph) -> dict[str, Any] | None:
    """The row of an executed node that only moves data — a layout reorder, a split's copies —
    with the shapes of the original tensors it reads and writes; None for any other node (or
    one whose tensors the captured graph does not know)."""

    def original(tensor: str) -> Any:
        return captured.tensors.get(alias.get(tensor, tensor))

    if node.op_type in _LAYOUT_OPS:
        # the tensor it writes again in the other layout: named by its input (a blocked node's
        # output, aliased to the original tensor) or, where that node renamed it, by its output
        source = original(node.input[0]) or original(node.output[0])
        return (
            None if source is None else movement_row(REORDER, source.shape, [source.shape], source.itemsize)
        )
    if node.op_type not in _SPLIT_OPS:
        return None
    source, *written = [original(t) for t in (node.input[0], *node.output)]
    if source is None or None in written:
        return None
    return movement_row(SPLIT, source.shape, [t.shape for t in written], source.itemsize)


class _OriginalGraph:
    """Producers, consumers and constant tensors of the graph as exported, before ORT touched it."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.nodes = list(model.graph.node)
        self.producer = {out: node for node in self.nodes for out in node.output}
        self.consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        for node in self.nodes:
            for tensor in node.input:
                self.consumers[tensor].append(node)
        self.constant = {i.name for i in model.graph.initializer}
        for node in self.nodes:  # exporters wrap weights in Identity / Constant nodes
            if all(t in self.constant for t in node.input if t):
                self.constant.update(node.output)
        self.order = {id(node): i for i, node in enumerate(self.nodes)}
        self.by_name = {node.name: node for node in self.nodes if node.name}

    def sort(self, nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
        return sorted(nodes, key=lambda n: self.order[id(n)])


def _nchwc_absorbed(node: onnx.NodeProto, graph: _OriginalGraph) -> tuple[list[onnx.NodeProto], str]:
    """At level ``all`` ONNX Runtime runs convolutions in its blocked NCHWc layout: the node is
    named after an original tensor (``<tensor>_nchwc``: a conv's output, or the activation right
    after it), a 4th input means a fused residual Add, an ``activation`` attribute a fused
    activation. Returns the absorbed original nodes and the original tensor the node computes."""
    batchnorm = node.name.endswith("_bn_nchwc")  # a BatchNormalization run as a 1x1 NCHWc conv
    tensor = node.name.removesuffix("_bn_nchwc" if batchnorm else "_nchwc")
    first = graph.producer.get(tensor)
    if first is None:
        return [], tensor
    absorbed = [first]
    if not batchnorm and first.op_type != node.op_type and first.input and first.input[0] in graph.producer:
        absorbed.insert(0, graph.producer[first.input[0]])  # named after the activation it fused
    activation = next((a.s.decode() for a in node.attribute if a.name == "activation"), None)
    wanted = (["Add"] if node.op_type == "Conv" and len(node.input) >= 4 else []) + (
        [activation] if activation else []
    )
    for op_type in wanted:
        if any(n.op_type == op_type for n in absorbed[1:]):
            continue
        follower = next((c for c in graph.consumers.get(tensor, []) if c.op_type == op_type), None)
        if follower is None:
            break
        absorbed.append(follower)
        tensor = follower.output[0]
    return absorbed, tensor


def _absorbed(node: onnx.NodeProto, graph: _OriginalGraph, alias: dict[str, str]) -> list[onnx.NodeProto]:
    """Original nodes between the executed node's inputs and outputs, in original order."""
    if node.op_type in _LAYOUT_OPS:
        return []  # converts between layouts: computes nothing of the original graph
    if node.op_type == "Reshape" and alias.get(node.output[0], node.output[0]) == alias.get(
        node.input[0], node.input[0]
    ):
        return []  # one of the views above: the same tensor in and out
    if node.name.endswith("_nchwc"):
        absorbed, tensor = _nchwc_absorbed(node, graph)
        alias[node.output[0]] = tensor
        return absorbed
    stop = {alias.get(t, t) for t in node.input}
    frontier = [graph.producer[t] for t in (alias.get(o, o) for o in node.output) if t in graph.producer]
    seen = _walk(frontier, stop, graph)
    if not seen:
        # a fusion ORT names after the node it replaced ("<Mul>/QuickGeluFusion/" for x·sigmoid(x))
        base = re.sub(r"/\w+Fusion/?$", "", node.name)
        if base != node.name and base in graph.by_name:
            seen = _walk([graph.by_name[base]], stop, graph)
    if not seen and node.name in graph.by_name:
        # a node ORT kept but whose output it renamed (a Concat writing NCHWc): the same node
        return [graph.by_name[node.name]]
    return graph.sort(list(seen.values()))


def _walk(frontier: list[onnx.NodeProto], stop: set[str], graph: _OriginalGraph) -> dict[int, onnx.NodeProto]:
    """Original nodes reached walking back from ``frontier`` until the tensors in ``stop``."""
    seen: dict[int, onnx.NodeProto] = {}
    while frontier:
        current = frontier.pop()
        if id(current) in seen or current.op_type == "Constant":
            continue
        seen[id(current)] = current
        frontier += [
            graph.producer[t]
            for t in current.input
            if t and t not in stop and t not in graph.constant and t in graph.producer
        ]
    return seen


def _first_shape(shapes: Any) -> tuple[int, ...]:
    return tuple(shapes[0]) if shapes else ()


def _shape_features(node: Any) -> dict[str, Any]:
    inp = _first_shape(node.input_shapes)
    out = _first_shape(node.output_shapes)

    def spatial(shape: tuple[int, ...], axis: int) -> int | None:
        return shape[axis] if len(shape) > axis else None

    kernel = node.attrs.get("kernel")
    stride = node.attrs.get("stride")
    return {
        "h_in": spatial(inp, 2),
        "w_in": spatial(inp, 3),
        "c_in": spatial(inp, 1),
        "h_out": spatial(out, 2),
        "w_out": spatial(out, 3),
        "c_out": spatial(out, 1),
        "kernel_size": kernel[0] if kernel else None,
        "stride": stride[0] if stride else None,
        "groups": node.attrs.get("groups", 1 if node.kind in CONV_KINDS else None),
    }


def torch_rows(events: list[Any], per_run: int) -> list[dict[str, Any]]:
    """PyTorch eager fuses nothing: one row per ATen op, the k-th op of every run grouped."""
    from infercast.graph.ops import kind_of, refine_conv

    rows = []
    for position in range(per_run):
        same = events[position::per_run]
        first = same[0]
        shapes = [list(s) for s in first.input_shapes]
        args = list(getattr(first, "concrete_inputs", None) or [None] * len(shapes))
        kind = kind_of(first.name)
        x = shapes[0] if shapes else []
        row: dict[str, Any] = {
            "node_index": position,
            "kernel": f"{position}:{first.name}",
            "executed_op": first.name,
            "fused_ops": [first.name],
            "c_in": x[1] if len(x) > 1 else None,
            "h_in": x[2] if len(x) > 2 else None,
            "w_in": x[3] if len(x) > 3 else None,
            "flops": int(first.flops or 0),
            "latency_ms": float(np.median([e.cpu_time_total for e in same])) / 1000,
        }
        if kind == "conv" and len(shapes) > 1 and len(shapes[1]) == 4 and len(x) == 4:
            weight = shapes[1]
            stride, padding, dilation = _first(args, 3, 1), _first(args, 4, 0), _first(args, 5, 1)
            groups = x[1] // weight[1]
            kind = refine_conv(groups, x[1])
            size = [(d + 2 * padding - dilation * (weight[2] - 1) - 1) // stride + 1 for d in x[2:]]
            row.update(
                c_out=weight[0],
                h_out=size[0],
                w_out=size[1],
                kernel_size=weight[2],
                stride=stride,
                groups=groups,
            )
        elif kind == "linear" and len(shapes) > 1:
            row.update(c_in=x[-1], c_out=shapes[1][0], h_in=None, w_in=None)
            pointwise = as_pointwise_conv(kind, tuple(x), (*x[:-1], shapes[1][0]))
            if pointwise is not None:
                row.update(pointwise)
                kind = "conv"
        elif kind == "adaptive_avg_pool" and args and isinstance(args[1], list) and args[1] == [1, 1]:
            kind = "global_pool"
        row["op_type"] = op_group(kind)
        rows.append(row)
    return rows


def _first(args: list[Any], index: int, default: int) -> int:
    value = args[index] if len(args) > index else None
    if isinstance(value, list | tuple):
        value = value[0] if value else None
    return int(value) if isinstance(value, int | float) else default
