"""TFLite flatbuffers written in tests with the schema package's builders, as the converter lays
them out: channels-last tensors, (O, kH, kW, I) kernels, activations fused into the op before them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np
import tflite

TYPES = {np.dtype("float32"): 0, np.dtype("float16"): 1, np.dtype("int32"): 2, np.dtype("int8"): 9}


@dataclass
class Writer:
    """Tensors, buffers and operators of one subgraph, serialised by ``finish``."""

    tensors: list[tuple[str, tuple[int, ...], int, int]] = field(default_factory=list)
    buffers: list[bytes] = field(default_factory=lambda: [b""])
    operators: list[tuple[int, list[int], list[int], str | None, dict[str, int]]] = field(
        default_factory=list
    )
    codes: list[int] = field(default_factory=list)

    def tensor(self, shape: tuple[int, ...], dtype: str = "float32", name: str = "") -> int:
        self.tensors.append((name or f"t{len(self.tensors)}", tuple(shape), TYPES[np.dtype(dtype)], 0))
        return len(self.tensors) - 1

    def constant(self, value: np.ndarray, name: str = "") -> int:
        self.buffers.append(np.ascontiguousarray(value).tobytes())
        index = self.tensor(value.shape, value.dtype.name, name)
        name, shape, kind, _ = self.tensors[index]
        self.tensors[index] = (name, shape, kind, len(self.buffers) - 1)
        return index

    def op(
        self, name: str, inputs: list[int], outputs: list[int], options: str | None = None, **fields: int
    ) -> None:
        code = getattr(tflite.BuiltinOperator, name)
        if code not in self.codes:
            self.codes.append(code)
        self.operators.append((self.codes.index(code), inputs, outputs, options, fields))

    def finish(self, inputs: list[int], outputs: list[int]) -> bytes:
        b = flatbuffers.Builder(1024)
        buffers = [_buffer(b, data) for data in self.buffers]
        tensors = [_tensor(b, *t) for t in self.tensors]
        operators = [_operator(b, *o) for o in self.operators]
        codes = []
        for code in self.codes:
            tflite.OperatorCodeStart(b)
            tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
            tflite.OperatorCodeAddBuiltinCode(b, code)
            tflite.OperatorCodeAddVersion(b, 1)
            codes.append(tflite.OperatorCodeEnd(b))
        name = b.CreateString("main")
        graph_inputs = b.CreateNumpyVector(np.array(inputs, dtype=np.int32))
        graph_outputs = b.CreateNumpyVector(np.array(outputs, dtype=np.int32))
        tensor_vector = _offsets(b, tflite.SubGraphStartTensorsVector, tensors)
        operator_vector = _offsets(b, tflite.SubGraphStartOperatorsVector, operators)
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tensor_vector)
        tflite.SubGraphAddInputs(b, graph_inputs)
        tflite.SubGraphAddOutputs(b, graph_outputs)
        tflite.SubGraphAddOperators(b, operator_vector)
        tflite.SubGraphAddName(b, name)
        subgraph = tflite.SubGraphEnd(b)
        subgraphs = _offsets(b, tflite.ModelStartSubgraphsVector, [subgraph])
        code_vector = _offsets(b, tflite.ModelStartOperatorCodesVector, codes)
        buffer_vector = _offsets(b, tflite.ModelStartBuffersVector, buffers)
        description = b.CreateString("written by infercast's tests")
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, 3)
        tflite.ModelAddOperatorCodes(b, code_vector)
        tflite.ModelAddSubgraphs(b, subgraphs)
        tflite.ModelAddDescription(b, description)
        tflite.ModelAddBuffers(b, buffer_vector)
        b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())


def _offsets(b: flatbuffers.Builder, start: Any, items: list[int]) -> int:
    start(b, len(items))
    for item in reversed(items):
        b.PrependUOffsetTRelative(item)
    return b.EndVector()


def _buffer(b: flatbuffers.Builder, data: bytes) -> int:
    vector = b.CreateNumpyVector(np.frombuffer(data, dtype=np.uint8)) if data else None
    tflite.BufferStart(b)
    if vector is not None:
        tflite.BufferAddData(b, vector)
    return tflite.BufferEnd(b)


def _tensor(b: flatbuffers.Builder, name: str, shape: tuple[int, ...], kind: int, buffer: int) -> int:
    text = b.CreateString(name)
    dims = b.CreateNumpyVector(np.array(shape, dtype=np.int32))
    tflite.TensorStart(b)
    tflite.TensorAddShape(b, dims)
    tflite.TensorAddType(b, kind)
    tflite.TensorAddBuffer(b, buffer)
    tflite.TensorAddName(b, text)
    return tflite.TensorEnd(b)


def _operator(
    b: flatbuffers.Builder,
    code: int,
    inputs: list[int],
    outputs: list[int],
    options: str | None,
    fields: dict,
) -> int:
    table = None
    if options is not None:
        getattr(tflite, f"{options}Start")(b)
        for key, value in fields.items():
            getattr(tflite, f"{options}Add{key}")(b, value)
        table = getattr(tflite, f"{options}End")(b)
    ins = b.CreateNumpyVector(np.array(inputs, dtype=np.int32))
    outs = b.CreateNumpyVector(np.array(outputs, dtype=np.int32))
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, code)
    tflite.OperatorAddInputs(b, ins)
    tflite.OperatorAddOutputs(b, outs)
    if table is not None:
        tflite.OperatorAddBuiltinOptionsType(b, getattr(tflite.BuiltinOptions, options))
        tflite.OperatorAddBuiltinOptions(b, table)
    return tflite.OperatorEnd(b)
