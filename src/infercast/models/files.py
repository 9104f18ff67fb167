"""Models from files: an ONNX file, a TFLite file, or a factory function in a Python file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from infercast.errors import InputShapeError, ModelLoadError
from infercast.graph.tflite_capture import TfliteModel
from infercast.models import LoadedModel
from infercast.paths import check_name_length


def load_onnx_file(path: str, input_shape: tuple[int, ...] | None) -> LoadedModel:
    import onnx

    file = Path(path)
    check_name_length(file)
    if not file.is_file():
        raise ModelLoadError(f"ONNX file not found: {path}")
    try:
        model = onnx.load(str(file))
        onnx.checker.check_model(model)
    except Exception as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise ModelLoadError(f"{path} is not a valid ONNX model ({type(error).__name__}: {first})") from error
    if input_shape is not None:
        from infercast.graph.onnx_capture import check_input_shape

        check_input_shape(model, input_shape)
    shape = input_shape or onnx_input_shape(model, path)
    return LoadedModel(file.name, "onnx", shape, onnx=model, path=str(file))


def load_tflite_file(path: str, input_shape: tuple[int, ...] | None) -> LoadedModel:
    """A ``.tflite`` flatbuffer, checked to be one and to declare one input; its shapes are fixed,
    so a given ``input_shape`` must be the one it declares (N×C×H×W)."""
    file = Path(path)
    check_name_length(file)
    if not file.is_file():
        raise ModelLoadError(f"TFLite file not found: {path}")
    loaded = tflite_model(TfliteModel(file.read_bytes(), file.name), input_shape)
    loaded.path = str(file)
    return loaded


def tflite_model(model: TfliteModel, input_shape: tuple[int, ...] | None) -> LoadedModel:
    """A TFLite model checked to be one the capture reads, at the input it declares."""
    from infercast.errors import CaptureError
    from infercast.graph.tflite_capture import fixed_input_shape

    try:
        declared = fixed_input_shape(model, input_shape)
    except CaptureError as error:
        raise ModelLoadError(f"{model.name} is not a TFLite model infercast can read: {error}") from error
    except InputShapeError:
        raise
    except Exception as error:  # a truncated or corrupt flatbuffer fails inside the schema reader
        raise ModelLoadError(
            f"{model.name} is not a valid TFLite flatbuffer ({type(error).__name__})"
        ) from error
    return LoadedModel(model.name, "tflite", declared, tflite=model)


def onnx_input_shape(model: Any, name: str) -> tuple[int, ...]:
    """The input shape an ONNX model declares: a symbolic leading dimension is the batch (1); any
    other symbolic dimension must be given."""
    from infercast.graph.onnx_capture import default_input_shape

    declared = default_input_shape(model)
    filled = tuple(1 if (d is None and i == 0) else d for i, d in enumerate(declared))
    if any(d is None for d in filled):
        raise ModelLoadError(
            f"{name} declares a symbolic input dimension ({declared}); pass --input-shape, e.g. 1x3x224x224"
        )
    return tuple(int(d) for d in filled if d is not None)


def load_python_factory(path: str, factory: str, input_shape: tuple[int, ...] | None) -> LoadedModel:
    import torch

    file = Path(path)
    check_name_length(file)
    if not file.is_file():
        raise ModelLoadError(f"Python file not found: {path}")
    module_name = f"infercast_user_{file.stem}_{abs(hash(file.resolve()))}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ModelLoadError(f"cannot import {path} as Python")
    user = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = user
    try:
        spec.loader.exec_module(user)
    except (Exception, KeyboardInterrupt) as error:
        raise ModelLoadError(f"importing {path} raised {type(error).__name__}: {error}") from error
    function = getattr(user, factory, None)
    if not callable(function):
        raise ModelLoadError(f"{path} has no function {factory!r}")
    try:
        module = function()
    except (Exception, KeyboardInterrupt) as error:
        raise ModelLoadError(f"{path}:{factory}() raised {type(error).__name__}: {error}") from error
    if not isinstance(module, torch.nn.Module):
        raise ModelLoadError(f"{path}:{factory}() returned {type(module).__name__}, not a torch.nn.Module")
    declared = getattr(function, "input_shape", getattr(module, "input_shape", None))
    if input_shape is None and declared is None:
        raise InputShapeError(
            f"{path}:{factory}: the model does not say what input it takes: give --input-shape "
            f"(e.g. 1x3x224x224), or declare it in {file.name} ({factory}.input_shape = (1, 3, 224, 224))"
        )
    shape = input_shape or _declared_shape(declared, f"{path}:{factory}")
    return LoadedModel(f"{file.name}:{factory}", "python", shape, module=module.eval(), path=str(file))


def _declared_shape(value: Any, where: str) -> tuple[int, ...]:
    """A factory's ``input_shape`` attribute: a sequence of positive integers."""
    try:
        shape = tuple(value)
    except TypeError:
        shape = ()
    valid = bool(shape) and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape)
    if not valid or isinstance(value, str | bytes):
        raise InputShapeError(
            f"{where}: its input_shape attribute {value!r} is not a sequence of positive integers such as "
            "(1, 3, 224, 224); fix it or pass --input-shape"
        )
    return shape
