"""One model-string syntax and one loader, used by every command.

=================================  ==================================================
``pytorchcv:resnet18``             a pytorchcv zoo model (``pretrained=False``)
``timm:mobilenetv3_large_100``     a timm model (``pretrained=False``)
``torchvision:mobilenet_v2``       a torchvision model (``weights=None``)
``path/to/model.onnx``             an ONNX file
``path/to/model.tflite``           a TensorFlow Lite file (captured, not run: inspect and predict)
``path/to/file.py:factory``        a function in a Python file that returns an ``nn.Module``
``space:carb-resnet?depth=18&…``   one configuration of a design space (``infercast.space``)
=================================  ==================================================

A ``torch.nn.Module``, ``onnx.ModelProto`` or ``infercast.graph.tflite_capture.TfliteModel`` object is
accepted as is. Nothing downloads weights:
costs depend on the architecture, not on trained values.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infercast.errors import InputShapeError, ModelLoadError

if TYPE_CHECKING:
    import onnx
    import torch

    from infercast.graph.tflite_capture import TfliteModel

ZOOS = ("pytorchcv", "timm", "torchvision")
USER_CODE = re.compile(r"^.+\.py:[A-Za-z_]\w*$")  # path/to/file.py:factory
DEFAULT_IMAGE_SHAPE = (1, 3, 224, 224)
_MODEL_FILES = (".onnx", ".tflite")


@dataclass
class LoadedModel:
    """A model ready to capture or run: exactly one of ``module`` / ``onnx`` / ``tflite`` is set."""

    name: str
    source: str  # "pytorchcv", "timm", "torchvision", "onnx", "tflite", "python", "space", "module"
    input_shape: tuple[int, ...]
    module: torch.nn.Module | None = None
    onnx: onnx.ModelProto | None = None
    path: str | None = None
    tflite: TfliteModel | None = None

    @property
    def target(self) -> torch.nn.Module | onnx.ModelProto | TfliteModel | None:
        """The object to capture or run: the module, else the ONNX model, else the TFLite model."""
        if self.module is not None:
            return self.module
        return self.onnx if self.onnx is not None else self.tflite


def parse_input_shape(text: str) -> tuple[int, ...]:
    """``"1x3x224x224"`` (also ``,`` or spaces as separators) → ``(1, 3, 224, 224)``."""
    parts = [p for p in re.split(r"[x×,\s]+", text.strip().lower()) if p]
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise InputShapeError(f"input shape {text!r} is not a list of integers such as 1x3x224x224") from None
    if not shape or any(d <= 0 for d in shape):
        raise InputShapeError(f"input shape {text!r} must have positive dimensions, e.g. 1x3x224x224")
    check_input_fits(shape)
    return shape


def check_input_fits(shape: tuple[int, ...]) -> None:
    """Refuse an input whose tensor alone (fp32) cannot fit in this machine's memory."""
    from infercast.resources import available_memory

    need, free = 4 * math.prod(shape), available_memory()
    if need > free:
        raise InputShapeError(
            f"input shape {'x'.join(map(str, shape))}: the fp32 input tensor alone needs "
            f"{need / 1e9:,.1f} GB; this machine has {free / 1e9:,.1f} GB available"
        )


def load_model(
    model: Any,
    input_shape: tuple[int, ...] | str | None = None,
    batch_size: int | None = None,
) -> LoadedModel:
    """Load a model string (or wrap a module) with its input shape.

    The input shape is ``input_shape`` if given, else the model's own default (zoo metadata, the
    ONNX file's declared input, or 1×3×224×224). ``batch_size`` overrides its first dimension.
    """
    if isinstance(input_shape, str):
        input_shape = parse_input_shape(input_shape)
    if batch_size is not None and batch_size <= 0:
        raise InputShapeError(f"batch size must be positive, got {batch_size}")

    loaded = _load(model, input_shape)
    shape = tuple(input_shape) if input_shape is not None else loaded.input_shape
    if batch_size is not None:
        shape = (batch_size, *shape[1:])
    check_input_fits(shape)
    loaded.input_shape = shape
    return loaded


def _load(model: Any, input_shape: tuple[int, ...] | None) -> LoadedModel:
    from infercast.graph.tflite_capture import TfliteModel

    if isinstance(model, str) and model.strip().lower().endswith(".tflite"):
        from infercast.models import files

        return files.load_tflite_file(model.strip(), input_shape)
    if isinstance(model, TfliteModel):
        from infercast.models import files

        return files.tflite_model(model, input_shape)
    import torch

    if isinstance(model, torch.nn.Module):
        if input_shape is None:
            raise InputShapeError(
                f"a {type(model).__name__} module does not say what input it takes: give input_shape "
                "(e.g. input_shape=(1, 3, 224, 224)) or example_input"
            )
        return LoadedModel(type(model).__name__, "module", input_shape, module=model.eval())
    import onnx

    if isinstance(model, onnx.ModelProto):
        from infercast.models.files import onnx_input_shape

        name = model.graph.name or "onnx-model"
        return LoadedModel(name, "onnx", input_shape or onnx_input_shape(model, name), onnx=model)
    if not isinstance(model, str) or not model.strip():
        raise ModelLoadError(
            "expected a model string, torch.nn.Module, onnx.ModelProto or TfliteModel, "
            f"got {type(model).__name__}"
        )
    spec = model.strip()
    prefix, _, rest = spec.partition(":")
    if prefix == "space":
        from infercast.space import parse_model_string

        space, config = parse_model_string(spec)
        canonical = space.canonical(config)
        # on the default device, as a zoo's builder: the meta device under ``torch.device("meta")``
        module = space.build(config, device=torch.get_default_device().type)
        return LoadedModel(canonical, "space", input_shape or space.input_shape(config), module=module)
    if prefix in ZOOS:
        from infercast.models import zoo

        return zoo.load(prefix, rest, input_shape)
    if spec.lower().endswith(".onnx"):
        from infercast.models import files

        return files.load_onnx_file(spec, input_shape)
    if USER_CODE.match(spec):
        from infercast.models import files

        path, _, factory = spec.rpartition(":")
        return files.load_python_factory(path, factory, input_shape)
    raise _unreadable(spec)


def _unreadable(spec: str) -> ModelLoadError:
    shown = spec if len(spec) <= 120 else spec[:120] + "…"
    return ModelLoadError(
        f"cannot read model string {shown!r}: use pytorchcv:NAME, timm:NAME, torchvision:NAME, "
        "path/to/model.onnx, path/to/model.tflite, path/to/file.py:factory or space:NAME?key=value&..."
    )


def check_model_string(model: Any) -> None:
    """Refuse a model string that cannot load — an unknown form, a name its zoo lacks, a file that
    is not there, a design-space string that does not parse — before PyTorch is imported: a typo
    fails at once. Objects (modules, ONNX models) are checked when they load."""
    if not isinstance(model, str):
        return
    spec = model.strip()
    prefix, _, rest = spec.partition(":")
    if prefix == "space":
        from infercast.space import parse_model_string

        parse_model_string(spec)
    elif prefix in ZOOS:
        from infercast.models import zoo

        zoo.check_name(prefix, rest)
    elif spec.lower().endswith(_MODEL_FILES) or USER_CODE.match(spec):
        from infercast.paths import check_name_length

        suffix = spec.lower().rpartition(".")[2]
        path = Path(spec if suffix in ("onnx", "tflite") else spec.rpartition(":")[0])
        check_name_length(path)
        if not path.is_file():
            kind = {"onnx": "ONNX", "tflite": "TFLite"}.get(suffix, "Python")
            raise ModelLoadError(f"{kind} file not found: {path}")
    elif spec:
        raise _unreadable(spec)
