"""The models a workflow is handed, as users hand them: one or a list, named for the results."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def model_name(model: Any, graph: Any = None) -> str:
    """How a model is named in results: its string, else its graph's or class's name."""
    if isinstance(model, str | Path):
        return str(model)
    return getattr(graph, "name", "") or type(model).__name__


def as_list(models: Any) -> tuple[list[Any], bool]:
    """One model or a list of them (a string, a module or an ONNX model is one)."""
    if isinstance(models, list | tuple):
        return list(models), True
    return [models], False


def input_shape_of(input_shape: Any, example_input: Any) -> Any:
    """The input shape given, or ``example_input``'s (the two must agree when both are given)."""
    if example_input is None:
        return input_shape
    shape = tuple(int(d) for d in example_input.shape)
    if input_shape is not None and tuple(input_shape) != shape:
        raise ValueError(f"input_shape={input_shape} differs from example_input's shape {shape}")
    return shape
