"""Capture a TensorFlow Lite flatbuffer into the same operator graph as a PyTorch or ONNX capture.

The file is read with ``tflite``, the flatbuffer schema package; nothing runs it. What the
converter did to the graph is undone only as far as the other captures see it: a fused activation
(``fused_activation_function`` of a convolution, a fully connected layer, an add, a pool) becomes
the activation node a PyTorch capture has after that op, so each runtime's fusion rules decide
what runs as one kernel, as they do for a captured PyTorch network; a BatchNorm the converter
folded into its convolution stays folded, as in an exported ONNX file.

TFLite keeps image tensors channels-last (N, H, W, C); infercast's graphs and input shapes are
channels-first (N, C, H, W), so every 4-D tensor is read in that order and every kernel in
PyTorch's layout (O, I/groups, kH, kW). A TFLite file's shapes are fixed when it is converted:
the graph is captured at the input the file declares.

Converters write a convolution's or pool's padding as a PAD op before it where TFLite's ``SAME``
cannot say it (PyTorch's symmetric padding at stride 2); both TFLite delegates merge such a pad
back into the op (the GPU delegate's ``merge_padding_with``, XNNPACK's constant-pad fusion), and
it is the op's padding here too, as in the PyTorch graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from infercast.errors import CaptureError, InputShapeError
from infercast.graph import ops
from infercast.graph.types import Graph, GraphBuilder, TensorInfo, Weight

_ACTIVATIONS = {1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
# TFLite op names whose normalised form ``kind_of`` does not already know
_KINDS = {
    "DEPTHWISE_CONV_2D": "conv",
    "FULLY_CONNECTED": "linear",
    "CONCATENATION": "concat",
    "LOGISTIC": "sigmoid",
    "RESIZE_BILINEAR": "upsample",
    "RESIZE_NEAREST_NEIGHBOR": "upsample",
    "STRIDED_SLICE": "slice",
    "BATCH_MATMUL": "matmul",
    "SPLIT_V": "split",
    "TRANSPOSE_CONV": "deconv",
    "EXPAND_DIMS": "reshape",
    "PADV2": "pad",
    "MIRROR_PAD": "pad",
    "RELU_N1_TO_1": "clip",
    "RELU_0_TO_1": "clip",
}
# ops whose output is computed from shapes only: constants to the graph, as in ONNX capture
_SHAPE_OPS = frozenset({"SHAPE"})
_CHANNELS_LAST_FILTERS = ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV")
_WINDOWED = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D"})


@dataclass(frozen=True)
class TfliteModel:
    """The bytes of a ``.tflite`` flatbuffer, with the name it is shown by."""

    data: bytes
    name: str = "tflite-model"


def read_model(data: bytes) -> Any:
    """The flatbuffer's root ``Model``; a file that is not one is a ``CaptureError``."""
    import tflite

    if len(data) < 8 or data[4:8] != b"TFL3":
        raise CaptureError("not a TensorFlow Lite flatbuffer (its identifier is not 'TFL3')")
    model = tflite.Model.GetRootAs(data, 0)
    if model.SubgraphsLength() < 1:
        raise CaptureError("the TFLite model has no subgraph")
    return model


def declared_input_shape(data: bytes) -> tuple[int, ...]:
    """The single input's shape in infercast's channels-first order (1×224×224×3 → 1×3×224×224)."""
    model = read_model(data)
    graph = model.Subgraphs(0)
    if graph.InputsLength() != 1:
        raise CaptureError(
            f"infercast captures single-input models; this TFLite model has {graph.InputsLength()} inputs"
        )
    return _channels_first(tuple(int(d) for d in graph.Tensors(graph.Inputs(0)).ShapeAsNumpy()))


def fixed_input_shape(source: TfliteModel, input_shape: tuple[int, ...] | None) -> tuple[int, ...]:
    """The input the file declares; a given ``input_shape`` must be it, as TFLite fixes every
    shape when it converts a model."""
    declared = declared_input_shape(source.data)
    if input_shape is not None and tuple(input_shape) != declared:
        given, fixed = "x".join(map(str, input_shape)), "x".join(map(str, declared))
        raise InputShapeError(
            f"{source.name} was converted for input {fixed} (N×C×H×W; TFLite shapes are fixed at "
            f"conversion): it cannot be read at {given}; convert it again at that size"
        )
    return declared


def capture_tflite(source: TfliteModel, input_shape: tuple[int, ...] | None = None) -> Graph:
    """The operator graph of the model's first subgraph (the one the interpreter runs)."""
    declared = fixed_input_shape(source, input_shape)
    model = read_model(source.data)
    graph = model.Subgraphs(0)
    reader = _Reader(model, graph)
    builder = GraphBuilder(source.name, "tflite")
    first = graph.Inputs(0)
    builder.add_input(reader.name(first), declared, *reader.dtype(first))
    for index in range(graph.OperatorsLength()):
        reader.add(builder, graph.Operators(index), index)
    outputs = [reader.name(int(t)) for t in graph.OutputsAsNumpy()]
    return builder.build(outputs, declared)


def _channels_first(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (shape[0], shape[3], shape[1], shape[2]) if len(shape) == 4 else shape


@cache
def _op_names() -> dict[int, str]:
    import tflite

    return {v: k for k, v in vars(tflite.BuiltinOperator).items() if k.isupper()}


@cache
def _option_classes() -> dict[int, type]:
    import tflite

    names = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}
    return {v: getattr(tflite, k) for v, k in names.items() if isinstance(getattr(tflite, k, None), type)}


@cache
def _dtypes() -> dict[int, tuple[str, int]]:
    import tflite

    found = {}
    for name, code in vars(tflite.TensorType).items():
        try:
            dtype = np.dtype(name.lower())
        except TypeError:
            continue
        found[code] = (dtype.name, dtype.itemsize)
    return found


class _Reader:
    """Reads one subgraph's tensors and operators into a ``GraphBuilder``."""

    def __init__(self, model: Any, graph: Any) -> None:
        self.model, self.graph = model, graph
        self.codes = [
            max(model.OperatorCodes(i).BuiltinCode(), model.OperatorCodes(i).DeprecatedBuiltinCode())
            for i in range(model.OperatorCodesLength())
        ]
        # constant tensor -> the key of the stored data it holds (a dequantised weight keeps its key)
        self.constants: dict[int, str] = {}
        for t in range(graph.TensorsLength()):
            tensor = graph.Tensors(t)
            buffer = model.Buffers(tensor.Buffer()) if tensor.Buffer() < model.BuffersLength() else None
            if buffer is not None and (buffer.DataLength() > 0 or buffer.Offset() > 1):
                self.constants[t] = f"buffer{tensor.Buffer()}"
        # tensor -> the ops reading it, and a pad merged into its readers -> (its input, its padding)
        self.readers: dict[int, list[str]] = {int(t): ["OUTPUT"] for t in graph.OutputsAsNumpy()}
        for i in range(graph.OperatorsLength()):
            operator = graph.Operators(i)
            name = _op_names().get(self.codes[operator.OpcodeIndex()], "CUSTOM")
            for t in operator.InputsAsNumpy() if operator.InputsLength() else []:
                self.readers.setdefault(int(t), []).append(name)
        self.merged_pads: dict[int, tuple[int, tuple[int, ...]]] = {}
        names = [tensor_name(graph.Tensors(t)) or f"t{t}" for t in range(graph.TensorsLength())]
        repeated = {n for n in names if names.count(n) > 1}
        self.names = [f"{n}#{t}" if n in repeated else n for t, n in enumerate(names)]

    def name(self, tensor: int) -> str:
        return self.names[tensor]

    def shape(self, tensor: int) -> tuple[int, ...]:
        shape = tuple(int(d) for d in self.graph.Tensors(tensor).ShapeAsNumpy())
        if any(d < 0 for d in shape):
            raise CaptureError(f"the TFLite tensor {self.name(tensor)!r} has a dynamic shape {shape}")
        return _channels_first(shape)

    def dtype(self, tensor: int) -> tuple[str, int]:
        code = self.graph.Tensors(tensor).Type()
        if code not in _dtypes():
            raise CaptureError(f"the TFLite tensor {self.name(tensor)!r} has a type infercast cannot size")
        return _dtypes()[code]

    def add(self, builder: GraphBuilder, operator: Any, index: int) -> None:
        op = _op_names().get(self.codes[operator.OpcodeIndex()], "CUSTOM")
        inputs = [int(t) for t in operator.InputsAsNumpy()] if operator.InputsLength() else []
        inputs = [t for t in inputs if t >= 0]  # -1 marks an omitted optional input (a bias)
        outputs = [int(t) for t in operator.OutputsAsNumpy()]
        if op in _SHAPE_OPS or all(t in self.constants for t in inputs):
            for t in outputs:  # folded, as the interpreter's constant tensors are
                self.constants[t] = next((self.constants[i] for i in inputs), f"folded{t}")
            return
        if op in ("PAD", "PADV2") and self._merge_pad(inputs, outputs[0]):
            return
        options = self._options(operator)
        kind = _KINDS.get(op) or ops.kind_of(op)
        written_in = self.shape(next((t for t in inputs if t not in self.constants), inputs[0]))
        merged = next((self.merged_pads[t] for t in inputs if t in self.merged_pads), None)
        inputs = [self.merged_pads[t][0] if t in self.merged_pads else t for t in inputs]
        activations = [self.name(t) for t in inputs if t not in self.constants]
        unknown = [t for t in activations if t not in builder.tensors]
        if unknown:  # a variable tensor of a stateful op, or a second graph input
            raise CaptureError(
                f"{op} (operator {index}) reads {unknown[0]!r}, which no operator before it writes"
            )
        weights = self._weights(inputs, op, kind)
        in_shape = builder.tensors[activations[0]].shape if activations else ()
        if kind == "linear" and len(in_shape) > 2:
            depth = weights[0].shape[-1] if weights else in_shape[-1]
            activations = [self._flatten(builder, activations[0], depth, index)]
            in_shape = builder.tensors[activations[0]].shape
        out_infos = [TensorInfo(self.name(t), self.shape(t), *self.dtype(t)) for t in outputs]
        activation = _ACTIVATIONS.get(getattr(options, "FusedActivationFunction", lambda: 0)())
        final = out_infos
        if activation is not None:  # the op writes a tensor the fused activation then reads
            out_infos = [TensorInfo(f"{i.name}:{op.lower()}", i.shape, i.dtype, i.itemsize) for i in final]
        attrs = _attrs(op, options, written_in, out_infos[0].shape, weights)
        if merged is not None and "padding" in attrs:
            attrs["padding"] = tuple(a + b for a, b in zip(attrs["padding"], merged[1], strict=True))
        if kind == "conv" or kind == "deconv":
            groups = _groups(op, in_shape, weights)
            attrs["groups"] = groups
            kind = ops.refine_conv(groups, in_shape[1], transposed=kind == "deconv")
        elif kind in ("mean", "adaptive_avg_pool"):
            kind = ops.refine_spatial_reduce(kind, in_shape, out_infos[0].shape)
        elif kind in ("linear", "matmul"):
            kind = "linear" if weights else "matmul"
        node_name = f"{op}_{index}"
        builder.add_node(node_name, op, kind, activations, out_infos, weights, attrs)
        if activation is not None:
            act_kind = _KINDS.get(activation) or ops.kind_of(activation)
            builder.add_node(
                f"{node_name}:{activation}", activation, act_kind, [i.name for i in out_infos], final, []
            )

    def _merge_pad(self, inputs: list[int], output: int) -> bool:
        """Whether a pad of height and width only, read only by convolutions and pools (zeros
        before a convolution or an average pool, any value before a max pool), is merged into them."""
        readers = self.readers.get(output, [])
        amounts = self._data(inputs[1]) if len(inputs) > 1 else None
        if not readers or not set(readers) <= _WINDOWED or amounts is None or amounts.size != 8:
            return False
        amounts = amounts.reshape(4, 2)
        value = self._data(inputs[2]) if len(inputs) > 2 else np.zeros(1)
        zero = value is not None and value.size == 1 and float(value.reshape(-1)[0]) == 0.0
        if amounts[0].any() or amounts[3].any() or not (zero or set(readers) == {"MAX_POOL_2D"}):
            return False
        (top, bottom), (left, right) = amounts[1], amounts[2]
        self.merged_pads[output] = (inputs[0], (int(top), int(left), int(bottom), int(right)))
        return True

    def _data(self, tensor: int) -> np.ndarray | None:
        """A constant tensor's stored values (None where they are not in the flatbuffer itself)."""
        if tensor not in self.constants:
            return None
        buffer = self.model.Buffers(self.graph.Tensors(tensor).Buffer())
        if buffer.DataLength() == 0:
            return None
        code = self.graph.Tensors(tensor).Type()
        return np.frombuffer(buffer.DataAsNumpy().tobytes(), dtype=_dtypes()[code][0])

    def _options(self, operator: Any) -> Any:
        table = operator.BuiltinOptions()
        cls = _option_classes().get(operator.BuiltinOptionsType())
        if table is None or cls is None:
            return None
        options = cls()
        options.Init(table.Bytes, table.Pos)
        return options

    def _weights(self, inputs: list[int], op: str, kind: str) -> list[Weight]:
        """The op's stored operands: every one of a weighted kind (int8 kernels and int32 biases of
        a quantised model included) but an output shape; elsewhere float tensors of more than one
        value (a per-channel scale), not the integer axes, sizes and paddings of data movement."""
        found = []
        for position, tensor in enumerate(inputs):
            if tensor not in self.constants or (op == "TRANSPOSE_CONV" and position == 0):
                continue
            weight = self._weight(tensor, op)
            floating = self.dtype(tensor)[0].startswith(("float", "bfloat"))
            if kind in ops.WEIGHTED_KINDS or (floating and ops.numel(weight.shape) > 1):
                found.append(weight)
        return found

    def _weight(self, tensor: int, op: str) -> Weight:
        shape = tuple(int(d) for d in self.graph.Tensors(tensor).ShapeAsNumpy())
        if op in _CHANNELS_LAST_FILTERS and len(shape) == 4:
            out, kh, kw, inner = shape
            # CONV_2D (O, kH, kW, I/g); DEPTHWISE (1, kH, kW, C·m); TRANSPOSE_CONV (O, kH, kW, I)
            shape = {
                "CONV_2D": (out, inner, kh, kw),
                "DEPTHWISE_CONV_2D": (inner, out, kh, kw),
                "TRANSPOSE_CONV": (inner, out, kh, kw),
            }[op]
        return Weight(self.constants[tensor], shape, self.dtype(tensor)[1], True)

    def _flatten(self, builder: GraphBuilder, tensor: str, depth: int, index: int) -> str:
        """A fully connected layer reads its input as rows of its weights' depth: a reshape to
        those rows, as the flatten before a PyTorch classifier."""
        info = builder.tensors[tensor]
        rows = (ops.numel(info.shape) // depth, depth)
        flat = TensorInfo(f"{tensor}:rows", rows, info.dtype, info.itemsize)
        builder.add_node(f"RESHAPE_{index}:rows", "RESHAPE", "reshape", [tensor], [flat], [])
        return flat.name


def tensor_name(tensor: Any) -> str:
    raw = tensor.Name()
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")


def _groups(op: str, in_shape: tuple[int, ...], weights: list[Weight]) -> int:
    if op == "DEPTHWISE_CONV_2D":
        return in_shape[1]
    filters = next((w.shape for w in weights if len(w.shape) == 4), None)
    if op == "CONV_2D" and filters is not None and filters[1] and in_shape[1] % filters[1] == 0:
        return in_shape[1] // filters[1]
    return 1


def _attrs(
    op: str, options: Any, in_shape: tuple[int, ...], out_shape: tuple[int, ...], weights: list[Weight]
) -> dict[str, Any]:
    """Kernel, stride, dilation and padding in infercast's terms; TFLite's ``SAME`` padding is the
    total the output size needs, its odd pixel at the end (top, left, bottom, right)."""
    if options is None or not hasattr(options, "StrideH") or len(in_shape) != 4:
        return {}
    stride = (options.StrideH() or 1, options.StrideW() or 1)
    dilation = tuple(getattr(options, f"Dilation{axis}Factor", lambda: 1)() or 1 for axis in "HW")
    if hasattr(options, "FilterHeight"):
        kernel = (options.FilterHeight(), options.FilterWidth())
    else:
        filters = next((w.shape for w in weights if len(w.shape) == 4), None)
        if filters is None:
            return {"stride": stride, "dilation": dilation}
        kernel = (filters[2], filters[3])
    padding = (0, 0, 0, 0)
    if getattr(options, "Padding", lambda: 1)() == 0 and op != "TRANSPOSE_CONV":  # Padding.SAME
        total = [
            max((o - 1) * s + (k - 1) * d + 1 - i, 0)
            for o, s, k, d, i in zip(out_shape[2:], stride, kernel, dilation, in_shape[2:], strict=True)
        ]
        padding = (total[0] // 2, total[1] // 2, total[0] - total[0] // 2, total[1] - total[1] // 2)
    attrs: dict[str, Any] = {"kernel": kernel, "stride": stride, "padding": padding}
    if op not in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
        attrs["dilation"] = dilation
    return attrs
