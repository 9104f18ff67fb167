"""Operator graphs: any model → nodes in execution order with shapes and analytic costs.

``capture(model, input_shape)`` takes a ``torch.nn.Module``, an ``onnx.ModelProto``, a
:class:`~infercast.graph.tflite_capture.TfliteModel` or anything
that carries its own (a :class:`Capturable`, such as ``infercast.models.LoadedModel``) and returns a
:class:`Graph`. The graph knows nothing of how models are loaded: it asks the object for its target.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from infercast.graph.ops import OP_GROUPS, kind_of, op_group
from infercast.graph.types import Graph, Node, TensorInfo, Weight

__all__ = [
    "OP_GROUPS",
    "Capturable",
    "Graph",
    "Node",
    "TensorInfo",
    "Weight",
    "capture",
    "kind_of",
    "op_group",
]


@runtime_checkable
class Capturable(Protocol):
    """A model that names what to capture (a module or an ONNX model), at which input shape."""

    name: str
    input_shape: tuple[int, ...]

    @property
    def target(self) -> Any: ...


def capture(model: Any, input_shape: tuple[int, ...] | None = None, name: str = "") -> Graph:
    """Capture ``model`` into an operator graph.

    ``input_shape`` may be omitted for a :class:`Capturable`, which carries its own. PyTorch
    models go through torch.fx (or torch.export where fx tracing fails), ONNX models
    through ONNX shape inference, TFLite flatbuffers through their schema; ``Graph.capture``
    names the path used.
    """
    from infercast.graph.tflite_capture import TfliteModel, capture_tflite

    if isinstance(model, Capturable):
        input_shape = input_shape or model.input_shape
        name = name or model.name
        model = model.target
    if isinstance(model, TfliteModel):  # read without PyTorch or ONNX
        shape = None if input_shape is None else tuple(int(d) for d in input_shape)
        return capture_tflite(TfliteModel(model.data, name) if name else model, shape)
    import onnx
    import torch

    if input_shape is None:
        raise ValueError("input_shape is required when capturing a bare module")
    input_shape = tuple(int(d) for d in input_shape)
    if isinstance(model, torch.nn.Module):
        from infercast.graph.torch_capture import capture_module

        with _torch_logs_quiet():
            return capture_module(model, input_shape, name or type(model).__name__)
    if isinstance(model, onnx.ModelProto):
        from infercast.graph.onnx_capture import capture_onnx

        return capture_onnx(model, input_shape, name or model.graph.name)
    raise TypeError(
        f"cannot capture a {type(model).__name__}: expected torch.nn.Module, onnx.ModelProto or TfliteModel"
    )


@contextlib.contextmanager
def _torch_logs_quiet() -> Iterator[None]:
    """PyTorch logs a failed shape propagation with its whole traceback on stderr before it
    raises; the capture error says it in one line. Its loggers are quiet while a module is
    captured and as they were after."""
    names = ["torch"] + [
        name
        for name, logger in logging.Logger.manager.loggerDict.items()
        if name.startswith("torch.") and isinstance(logger, logging.Logger) and logger.level
    ]
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
