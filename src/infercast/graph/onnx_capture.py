"""Capture an ONNX model into an operator graph with ``onnx`` shape inference.

Constant sub-graphs (initializers, ``Constant`` nodes, anything computed from them only) and shape
arithmetic (nodes producing integer tensors, such as ``Shape → Gather → Concat`` feeding a
``Reshape``) are folded away, as ONNX Runtime would fold them, so that the operator list matches
what the PyTorch capture sees. Where static shape inference cannot resolve a shape (a ``Slice``
whose bounds are computed from the input's shape), the model is run once in ONNX Runtime on a
random input to read the missing shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference

from infercast.errors import CaptureError, InputShapeError
from infercast.graph import ops
from infercast.graph.types import Graph, GraphBuilder, TensorInfo, Weight

_FLOAT_TYPES = {
    onnx.TensorProto.FLOAT,
    onnx.TensorProto.FLOAT16,
    onnx.TensorProto.BFLOAT16,
    onnx.TensorProto.DOUBLE,
}
# ops whose output is their first input's data (CastLike only borrows the second input's type)
_PASS_THROUGH = ("Identity", "CastLike")
# BatchNormalization inputs 3 and 4 are running statistics: buffers, not parameters
_BUFFER_INPUTS = {"BatchNormalization": {3, 4}}


def _dtype(elem_type: int) -> tuple[str, int]:
    np_dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    return np_dtype.name, np_dtype.itemsize


def runtime_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initializers = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def default_input_shape(model: onnx.ModelProto) -> tuple[int | None, ...]:
    """The declared shape of the first input; symbolic dimensions are None."""
    inputs = runtime_inputs(model)
    if not inputs:
        raise CaptureError("the ONNX model has no runtime input")
    dims = inputs[0].type.tensor_type.shape.dim
    return tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in dims)


def check_input_shape(model: onnx.ModelProto, input_shape: tuple[int, ...]) -> None:
    """Refuse an input shape the model's declared input cannot take: another rank, or another size
    where a dimension is fixed (a symbolic dimension takes any size). A model of several inputs is
    left to ``capture_onnx``, which refuses it."""
    if len(runtime_inputs(model)) != 1:
        return
    declared = default_input_shape(model)
    given = "x".join(map(str, input_shape))
    takes = f"the ONNX model's input {runtime_inputs(model)[0].name!r} takes "
    takes += "x".join("?" if d is None else str(d) for d in declared) + " (? is any size)"
    if len(declared) != len(input_shape):
        raise InputShapeError(f"input shape {given} has rank {len(input_shape)}; {takes}")
    for axis, (want, have) in enumerate(zip(declared, input_shape, strict=True)):
        if want is not None and want != have:
            raise InputShapeError(
                f"input shape {given} does not fit: {takes}, axis {axis} is fixed to {want}"
            )


def capture_onnx(model: onnx.ModelProto, input_shape: tuple[int, ...], name: str = "") -> Graph:
    inputs = runtime_inputs(model)
    if len(inputs) != 1:
        raise CaptureError(
            f"infercast captures single-input models; this ONNX model has {len(inputs)} inputs"
        )
    check_input_shape(model, input_shape)
    model = onnx.ModelProto.FromString(model.SerializeToString())
    dims = model.graph.input[
        [i.name for i in model.graph.input].index(inputs[0].name)
    ].type.tensor_type.shape.dim
    for dim, size in zip(dims, input_shape, strict=True):
        dim.Clear()
        dim.dim_value = size
    try:
        model = shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as error:
        raise CaptureError(f"ONNX shape inference failed: {str(error).strip().splitlines()[0]}") from error

    graph = model.graph
    types: dict[str, Any] = {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        types[value.name] = value.type.tensor_type
    unresolved = [o for n in graph.node for o in n.output if o and not _is_static(types.get(o))]
    if unresolved:
        types.update(_types_by_running(model, inputs[0].name, input_shape, unresolved))
    constants: dict[str, np.ndarray] = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    # Weights are data stored in the file. Constants an exporter computes (the zero bias the
    # dynamo exporter builds with Expand for a bias-free depthwise conv) are not parameters.
    stored = set(constants)

    builder = GraphBuilder(name, "onnx")
    name_in = inputs[0].name
    builder.add_input(name_in, tuple(input_shape), *_dtype(types[name_in].elem_type))
    for index, node in enumerate(graph.node):
        present = [i for i in node.input if i]
        # CastLike only borrows the element type of its second input: a constant stays constant
        if all(i in constants for i in present) or (node.op_type == "CastLike" and present[0] in constants):
            _fold(node, constants)
            if node.op_type == "Constant" or (node.op_type in _PASS_THROUGH and present[0] in stored):
                stored.update(node.output)
            continue
        outputs = [o for o in node.output if o]
        if not any(_is_float(types.get(o)) for o in outputs):
            continue  # shape arithmetic on integer tensors, not an operator
        activations = [i for i in present if i not in constants and i in builder.tensors]
        op = node.op_type
        kind = ops.kind_of(op)
        weights = _weights(node, kind, {k: v for k, v in constants.items() if k in stored})
        infos = [_tensor_info(o, types.get(o), node) for o in outputs if _is_float(types.get(o))]
        in_shape = builder.tensors[activations[0]].shape if activations else ()
        attrs = _attrs(node)
        kind = _refine(kind, node, in_shape, infos[0].shape, weights, constants, attrs)
        builder.add_node(node.name or f"{node.op_type}_{index}", op, kind, activations, infos, weights, attrs)
    return builder.build([o.name for o in graph.output], tuple(input_shape))


def _attr(node: Any, name: str) -> Any:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return None


def _fold(node: onnx.NodeProto, constants: dict[str, np.ndarray]) -> None:
    """Record outputs of constant-only nodes we can evaluate cheaply; the rest stay unknown."""
    if node.op_type in _PASS_THROUGH:
        constants[node.output[0]] = constants[node.input[0]]
        return
    try:
        from onnx.reference import ReferenceEvaluator

        sub = onnx.helper.make_graph(
            [node],
            "fold",
            [],
            [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o],
            [numpy_helper.from_array(np.asarray(constants[i]), i) for i in node.input if i],
        )
        results = ReferenceEvaluator(onnx.helper.make_model(sub)).run(None, {})
        for name, value in zip([o for o in node.output if o], results, strict=True):
            constants[name] = np.asarray(value)
    except Exception:
        for name in node.output:
            constants[name] = np.empty(0, dtype=np.float32)


def _is_static(tensor_type: Any) -> bool:
    return (
        tensor_type is not None
        and tensor_type.elem_type != onnx.TensorProto.UNDEFINED
        and tensor_type.HasField("shape")
        and all(d.HasField("dim_value") for d in tensor_type.shape.dim)
    )


def _types_by_running(
    model: onnx.ModelProto, input_name: str, input_shape: tuple[int, ...], names: list[str]
) -> dict[str, Any]:
    """Shapes and types of ``names`` read off one ONNX Runtime run (graph optimisations off)."""
    import onnxruntime as ort

    probe = onnx.ModelProto.FromString(model.SerializeToString())
    known_outputs = {o.name for o in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in known_outputs)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
        elem = probe.graph.input[
            [i.name for i in probe.graph.input].index(input_name)
        ].type.tensor_type.elem_type
        feed = (
            np.random.default_rng(0)
            .standard_normal(input_shape)
            .astype(onnx.helper.tensor_dtype_to_np_dtype(elem))
        )
        values = session.run(names, {input_name: feed})
    except Exception as error:
        raise CaptureError(
            f"ONNX shape inference left {len(names)} shapes unknown (e.g. {names[0]!r}) and running the "
            f"model to read them failed: {str(error).strip().splitlines()[0]}"
        ) from error
    found = {}
    for name, value in zip(names, values, strict=True):
        array = np.asarray(value)
        found[name] = onnx.helper.make_tensor_type_proto(
            onnx.helper.np_dtype_to_tensor_dtype(array.dtype), array.shape
        ).tensor_type
    return found


def _is_float(tensor_type: Any) -> bool:
    return tensor_type is not None and tensor_type.elem_type in _FLOAT_TYPES


def _tensor_info(name: str, tensor_type: Any, node: Any) -> TensorInfo:
    shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim)
    if not tensor_type.HasField("shape") or any(d < 0 for d in shape):
        raise CaptureError(f"ONNX shape inference left the shape of {name!r} ({node.op_type}) unknown")
    return TensorInfo(name, shape, *_dtype(tensor_type.elem_type))


def _weights(node: Any, kind: str, constants: dict[str, np.ndarray]) -> list[Weight]:
    buffers = _BUFFER_INPUTS.get(node.op_type, set())
    found = []
    for position, name in enumerate(node.input):
        value = constants.get(name)
        if value is None or value.dtype.kind != "f":
            continue
        if kind not in ops.WEIGHTED_KINDS and value.size <= 1:
            continue  # a scalar operand such as the 3 in x + 3
        found.append(Weight(name, tuple(value.shape), value.dtype.itemsize, position not in buffers))
    return found


def _attrs(node: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for key, onnx_key in (
        ("kernel", "kernel_shape"),
        ("stride", "strides"),
        ("padding", "pads"),
        ("dilation", "dilations"),
    ):
        value = _attr(node, onnx_key)
        if value is not None:
            attrs[key] = tuple(value)
    return attrs


def _refine(
    kind: str,
    node: Any,
    in_shape: tuple[int, ...],
    out_shape: tuple[int, ...],
    weights: list[Weight],
    constants: dict[str, np.ndarray],
    attrs: dict[str, Any],
) -> str:
    if kind == "conv":
        groups = int(_attr(node, "group") or 1)
        attrs["groups"] = groups
        return ops.refine_conv(groups, in_shape[1])
    if kind in ("adaptive_avg_pool", "adaptive_max_pool", "mean"):
        return ops.refine_spatial_reduce(kind, in_shape, out_shape)
    if kind == "clip":
        bounds = [_scalar(constants, name) for name in list(node.input[1:3])]
        low = bounds[0] if bounds else _attr(node, "min")
        high = bounds[1] if len(bounds) > 1 else _attr(node, "max")
        return ops.refine_clip(low, high)
    if kind in ("linear", "matmul"):
        return "linear" if weights else "matmul"
    return kind


def _scalar(constants: dict[str, np.ndarray], name: str) -> float | None:
    value = constants.get(name)
    return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None
