"""Operator graphs: any model → nodes in execution order with shapes and analytic costs.

``capture(model, input_shape)`` takes a ``torch.nn.Module``, an ``onnx.ModelProto`` or a
:class:`infercast.models.LoadedModel` and returns a :class:`Graph`.
"""

from __future__ import annotations

from typing import Any

from infercast.graph.ops import OP_GROUPS, kind_of, op_group
from infercast.graph.types import Graph, Node, TensorInfo, Weight

__all__ = ["OP_GROUPS", "Graph", "Node", "TensorInfo", "Weight", "capture", "kind_of", "op_group"]


def capture(model: Any, input_shape: tuple[int, ...] | None = None, name: str = "") -> Graph:
    """Capture ``model`` into an operator graph.

    ``input_shape`` may be omitted for a :class:`~infercast.models.LoadedModel`, which carries its
    own. PyTorch models go through torch.fx (or torch.export where fx tracing fails), ONNX models
    through ONNX shape inference; ``Graph.capture`` names the path used.
    """
    import onnx
    import torch

    from infercast.models import LoadedModel

    if isinstance(model, LoadedModel):
        input_shape = input_shape or model.input_shape
        name = name or model.name
        model = model.module if model.module is not None else model.onnx
    if input_shape is None:
        raise ValueError("input_shape is required when capturing a bare module")
    input_shape = tuple(int(d) for d in input_shape)
    if isinstance(model, torch.nn.Module):
        from infercast.graph.torch_capture import capture_module

        return capture_module(model, input_shape, name or type(model).__name__)
    if isinstance(model, onnx.ModelProto):
        from infercast.graph.onnx_capture import capture_onnx

        return capture_onnx(model, input_shape, name or model.graph.name)
    raise TypeError(f"cannot capture a {type(model).__name__}: expected torch.nn.Module or onnx.ModelProto")
