"""Capture a ``torch.nn.Module`` into an operator graph.

First ``torch.fx.symbolic_trace`` + ``ShapeProp`` (module-level nodes, cheap); where symbolic tracing
fails (data-dependent Python control flow, unsupported builtins) ``torch.export`` (ATen-level nodes,
handles any Python the model runs). Shapes are propagated with fake tensors (meta tensors for a
module built on the meta device), so capturing a batch-256 network allocates no activations.
``Graph.capture`` says which path was used.
"""

from __future__ import annotations

import contextlib
import io
import operator
from collections.abc import Iterable
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

from infercast.errors import CaptureError
from infercast.graph import ops
from infercast.graph.meta_shapes import MetaShapeProp, callable_name
from infercast.graph.types import Graph, GraphBuilder, TensorInfo, Weight

# argument positions of kernel-like settings, identical in F.* and aten.* signatures
_CONV_ARGS = {"stride": 3, "padding": 4, "dilation": 5}
# F.conv_transpose2d / aten.conv_transpose2d: output_padding and groups come before the dilation
_DECONV_ARGS = {"stride": 3, "padding": 4, "dilation": 7}
_POOL_ARGS = {"kernel": 1, "stride": 2, "padding": 3}
_KEYWORDS = {"kernel": "kernel_size"}


def capture_module(module: torch.nn.Module, input_shape: tuple[int, ...], name: str = "") -> Graph:
    module = module.eval()
    first = next(iter(module.parameters()), None)
    # a module built on the meta device (no weight memory) is captured on meta tensors too
    on_meta = first is not None and first.device.type == "meta"
    example = torch.empty(input_shape, dtype=_input_dtype(module), device="meta" if on_meta else "cpu")
    try:
        traced = torch.fx.symbolic_trace(module)
    except Exception as fx_error:
        return _capture_export(module, example, name, fx_error)
    # Meta tensors already allocate nothing; fake tensors (for real weights) are several times
    # slower and import TorchDynamo on first use: used only for a module that has real weights.
    propagation = (
        MetaShapeProp(traced)
        if on_meta
        else ShapeProp(traced, fake_mode=FakeTensorMode(allow_non_fake_inputs=True))
    )
    try:
        # ShapeProp prints the traceback of a failing node itself; the CLI shows one line instead
        with contextlib.redirect_stderr(io.StringIO()):
            propagation.propagate(example)
    except Exception as error:
        raise _shape_error(input_shape, error) from error
    return _translate_fx(traced, name, input_shape)


def _input_dtype(module: torch.nn.Module) -> torch.dtype:
    first = next(iter(module.parameters()), None)
    return first.dtype if first is not None and first.is_floating_point() else torch.float32


def _first_line(error: BaseException) -> str:
    while error.__cause__ is not None:  # ShapeProp wraps the model's own error
        error = error.__cause__
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _shape_error(input_shape: tuple[int, ...], error: Exception) -> CaptureError:
    shape = "x".join(map(str, input_shape))
    return CaptureError(
        f"the model cannot run on input shape {shape} (rank {len(input_shape)}): {_first_line(error)}"
    )


def _tensor_info(name: str, meta: Any) -> TensorInfo:
    dtype: torch.dtype = meta.dtype
    return TensorInfo(
        name, tuple(int(d) for d in meta.shape), str(dtype).removeprefix("torch."), dtype.itemsize
    )


def _flat_metas(meta: Any) -> list[Any] | None:
    """The tensor metadata a node produced: one, several (tuple outputs), or None (not a tensor)."""
    if isinstance(meta, TensorMetadata | torch.Tensor):
        return [meta]
    if (
        isinstance(meta, list | tuple)
        and meta
        and all(isinstance(m, TensorMetadata | torch.Tensor) for m in meta)
    ):
        return list(meta)
    return None


def _weight(key: str, tensor: torch.Tensor, is_param: bool) -> Weight:
    return Weight(key, tuple(tensor.shape), tensor.dtype.itemsize, is_param)


def _counts_as_weight(kind: str, tensor: torch.Tensor) -> bool:
    # A scalar constant (``x * 0.5`` stored as a tensor) is an operand, not a weight, in every path.
    return tensor.is_floating_point() and (kind in ops.WEIGHTED_KINDS or tensor.numel() > 1)


class _Translator:
    """Walks fx nodes of either path, resolving tensor inputs, weights and tuple outputs."""

    def __init__(self, builder: GraphBuilder) -> None:
        self.builder = builder
        self.tensor_of: dict[str, str] = {}  # fx node name -> activation tensor name
        self.tuple_of: dict[str, list[str]] = {}  # fx node name -> tensors of a tuple output
        self.weight_of: dict[str, tuple[str, torch.Tensor, bool]] = {}  # fx node -> (key, value, param)

    def activation_inputs(self, args: Iterable[Any]) -> list[str]:
        names: list[str] = []
        for arg in _walk(args):
            if isinstance(arg, torch.fx.Node) and arg.name in self.tensor_of:
                names.append(self.tensor_of[arg.name])
        return names

    def weights(self, kind: str, args: Iterable[Any]) -> list[Weight]:
        found = []
        for arg in _walk(args):
            if isinstance(arg, torch.fx.Node) and arg.name in self.weight_of:
                key, value, is_param = self.weight_of[arg.name]
                if _counts_as_weight(kind, value):
                    found.append(_weight(key, value, is_param))
        return found

    def emit(
        self,
        node: torch.fx.Node,
        op: str,
        kind: str,
        metas: list[Any],
        args: tuple[Any, ...],
        weights: list[Weight],
        attrs: dict[str, Any],
    ) -> None:
        inputs = self.activation_inputs(args)
        if not inputs and not weights:
            return  # built from constants only: folded away, as an exporter would
        outputs = [
            _tensor_info(node.name if len(metas) == 1 else f"{node.name}.{i}", m) for i, m in enumerate(metas)
        ]
        in_shapes = [self.builder.tensors[t].shape for t in inputs]
        kind = _refine(kind, in_shapes, outputs[0].shape, args, weights, attrs)
        self.builder.add_node(node.name, op, kind, inputs, outputs, weights, attrs)
        if isinstance(_meta(node), TensorMetadata | torch.Tensor):
            self.tensor_of[node.name] = outputs[0].name
        else:
            self.tuple_of[node.name] = [t.name for t in outputs]

    def getitem(self, node: torch.fx.Node) -> bool:
        """Indexing a tuple output is wiring, not an operator."""
        source, index = node.args[0], node.args[1]
        if isinstance(source, torch.fx.Node) and source.name in self.tuple_of and isinstance(index, int):
            self.tensor_of[node.name] = self.tuple_of[source.name][index]
            return True
        return False

    def outputs(self, graph: torch.fx.Graph) -> list[str]:
        out = next(n for n in graph.nodes if n.op == "output")
        names = []
        for arg in _walk(out.args):
            if isinstance(arg, torch.fx.Node):
                if arg.name in self.tensor_of:
                    names.append(self.tensor_of[arg.name])
                names.extend(self.tuple_of.get(arg.name, []))
        return names


def _walk(args: Any) -> Iterable[Any]:
    if isinstance(args, list | tuple):
        for a in args:
            yield from _walk(a)
    elif isinstance(args, dict):
        for a in args.values():
            yield from _walk(a)
    else:
        yield args


def _meta(node: torch.fx.Node) -> Any:
    return node.meta.get("tensor_meta", node.meta.get("val"))


def _refine(
    kind: str,
    in_shapes: list[tuple[int, ...]],
    out_shape: tuple[int, ...],
    args: tuple[Any, ...],
    weights: list[Weight],
    attrs: dict[str, Any],
) -> str:
    in_shape = in_shapes[0] if in_shapes else ()
    if kind == "conv":  # groups from shapes: the same rule for modules, F.conv2d, ATen and ONNX
        conv_weight = ops.kernel_shape([w.shape for w in weights], in_shapes)
        if conv_weight is not None and in_shape:
            groups = in_shape[1] // conv_weight[1]
            attrs["groups"] = groups
            return ops.refine_conv(groups, in_shape[1])
    if kind in ("adaptive_avg_pool", "adaptive_max_pool", "mean"):
        return ops.refine_spatial_reduce(kind, in_shape, out_shape)
    if kind == "clip":
        low, high = attrs.pop("clip", (None, None))
        return ops.refine_clip(low, high)
    if kind == "matmul" and weights:
        return "linear"
    if kind == "linear" and not weights:
        return "matmul"
    return kind


def _call_attrs(kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Kernel, stride, padding… of a functional / ATen call, by argument position or keyword."""
    positions = {
        "conv": _CONV_ARGS,
        "deconv": _DECONV_ARGS,
        "max_pool": _POOL_ARGS,
        "avg_pool": _POOL_ARGS,
    }.get(kind, {})
    attrs: dict[str, Any] = {}
    for key, position in positions.items():
        value = args[position] if len(args) > position else kwargs.get(_KEYWORDS.get(key, key))
        if isinstance(value, int):
            attrs[key] = value
        elif isinstance(value, list | tuple) and value:  # aten.max_pool2d's default stride is []
            attrs[key] = tuple(value)
    if kind == "clip":
        low = args[1] if len(args) > 1 else kwargs.get("min", kwargs.get("min_val"))
        high = args[2] if len(args) > 2 else kwargs.get("max", kwargs.get("max_val"))
        attrs["clip"] = tuple(v if isinstance(v, int | float) else None for v in (low, high))
    return attrs


def _module_attrs(module: torch.nn.Module) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for key, attr in (
        ("kernel", "kernel_size"),
        ("stride", "stride"),
        ("padding", "padding"),
        ("dilation", "dilation"),
    ):
        value = getattr(module, attr, None)
        if isinstance(value, int | tuple | list):
            attrs[key] = tuple(value) if isinstance(value, list | tuple) else value
    if isinstance(module, torch.nn.Hardtanh):
        attrs["clip"] = (module.min_val, module.max_val)
    return attrs


def _translate_fx(traced: torch.fx.GraphModule, name: str, input_shape: tuple[int, ...]) -> Graph:
    builder = GraphBuilder(name, "torch.fx")
    tr = _Translator(builder)
    params = {id(p) for p in traced.parameters()}
    for node in traced.graph.nodes:
        metas = _flat_metas(_meta(node))
        if node.op == "placeholder":
            if metas:
                builder.add_input(node.name, metas[0].shape, *_dtype_pair(metas[0]))
                tr.tensor_of[node.name] = node.name
            continue
        if node.op == "get_attr":
            value = _fetch_attr(traced, node.target)
            if isinstance(value, torch.Tensor):
                tr.weight_of[node.name] = (node.target, value, id(value) in params)
            continue
        if node.op == "output" or metas is None:
            continue  # shape arithmetic (size(), int math) is not an operator
        if node.op == "call_function" and node.target is operator.getitem and tr.getitem(node):
            continue
        if node.op == "call_module":
            module = traced.get_submodule(node.target)
            op = type(module).__name__
            kind = ops.kind_of(op)
            weights = [_weight(f"{node.target}.{k}", v, True) for k, v in module.named_parameters()]
            weights += [
                _weight(f"{node.target}.{k}", v, False)
                for k, v in module.named_buffers()
                if v.is_floating_point()
            ]
            tr.emit(node, op, kind, metas, node.args, weights, _module_attrs(module))
        else:
            op = callable_name(node.target)
            kind = ops.kind_of(op)
            args = (*node.args, *node.kwargs.values())
            attrs = _call_attrs(kind, node.args, node.kwargs)
            tr.emit(node, op, kind, metas, args, tr.weights(kind, args), attrs)
    return builder.build(tr.outputs(traced.graph), input_shape)


def _dtype_pair(meta: Any) -> tuple[str, int]:
    return str(meta.dtype).removeprefix("torch."), meta.dtype.itemsize


def _fetch_attr(module: torch.nn.Module, target: str) -> Any:
    value: Any = module
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _capture_export(module: torch.nn.Module, example: torch.Tensor, name: str, fx_error: Exception) -> Graph:
    try:
        exported = torch.export.export(module, (example,), strict=False)
    except Exception as error:
        shape = "x".join(map(str, example.shape))
        raise CaptureError(
            f"could not capture the model on input shape {shape}: torch.fx failed "
            f"({type(fx_error).__name__}: {_first_line(fx_error)}) and torch.export failed "
            f"({type(error).__name__}: {_first_line(error)})"
        ) from error
    signature = exported.graph_signature
    state = {**exported.state_dict, **exported.constants}
    placeholders: dict[str, tuple[str, bool]] = {}
    for placeholder, fqn in signature.inputs_to_parameters.items():
        placeholders[placeholder] = (fqn, True)
    for placeholder, fqn in signature.inputs_to_buffers.items():
        placeholders[placeholder] = (fqn, False)
    for placeholder, fqn in signature.inputs_to_lifted_tensor_constants.items():
        placeholders[placeholder] = (fqn, False)

    builder = GraphBuilder(name, "torch.export")
    tr = _Translator(builder)
    for node in exported.graph_module.graph.nodes:
        metas = _flat_metas(_meta(node))
        if node.op == "placeholder":
            if node.name in placeholders:
                fqn, is_param = placeholders[node.name]
                tr.weight_of[node.name] = (fqn, state[fqn], is_param)
            elif metas:
                builder.add_input(node.name, metas[0].shape, *_dtype_pair(metas[0]))
                tr.tensor_of[node.name] = node.name
            continue
        if node.op != "call_function" or metas is None:
            continue
        if node.target is operator.getitem and tr.getitem(node):
            continue
        op = callable_name(node.target)
        kind = ops.kind_of(op)
        args = (*node.args, *node.kwargs.values())
        attrs = _call_attrs(kind, node.args, node.kwargs)
        if op == "aten.convolution" and len(node.args) > 6 and node.args[6]:
            kind = "deconv"
        tr.emit(node, op, kind, metas, args, tr.weights(kind, args), attrs)
    outputs = tr.outputs(exported.graph_module.graph)
    return builder.build(outputs, tuple(example.shape))
