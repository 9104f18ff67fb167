"""Measurements of the models users hold: model strings as they are, ``nn.Module`` and
``onnx.ModelProto`` objects exported to ONNX files the worker process loads. ``measure`` is what
``infercast.measure(…)`` calls."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from infercast.api.inputs import as_list, input_shape_of, model_name


def measure(
    models: Any,
    backend: str = "ort-cpu",
    input_shape: tuple[int, ...] | str | None = None,
    example_input: Any = None,
    db: str | Path | None = None,
    **options: Any,
) -> dict[str, Any] | list[dict[str, Any]]:
    """Measure one model or a list on this machine (``measurement.measure_model_strings`` takes
    the options: protocol, energy, campaign, op_runs, threads, opt_level…). Model objects run on ONNX
    Runtime: an ``nn.Module`` is exported to ONNX (``input_shape`` or ``example_input`` gives its
    input), an ``onnx.ModelProto`` saved, each to a temporary file the worker process loads."""
    from infercast.measurement import measure_model_strings
    from infercast.models import parse_input_shape

    items, many = as_list(models)
    shape = input_shape_of(input_shape, example_input)
    if isinstance(shape, str):
        shape = parse_input_shape(shape)
    with tempfile.TemporaryDirectory(prefix="infercast-measure-") as folder:
        specs = [_as_spec(m, shape, backend, Path(folder) / f"model{i}.onnx") for i, m in enumerate(items)]
        results = measure_model_strings(specs, backend, db=db, input_shape=shape, **options)
    for model, result in zip(items, results, strict=True):
        if not isinstance(model, str | Path):
            result["model"] = model_name(model)
    return results if many else results[0]


def _as_spec(model: Any, shape: tuple[int, ...] | None, backend: str, path: Path) -> str:
    """A model string the measurement worker can load: strings as they are, objects as ONNX files."""
    if isinstance(model, str | Path):
        return str(model)
    import onnx
    import torch

    if not backend.startswith("ort-"):
        raise ValueError(
            f"measuring a {type(model).__name__} object on {backend} needs a model string the worker "
            "can build (file.py:factory); on ort-* backends it is exported to ONNX"
        )
    if isinstance(model, onnx.ModelProto):
        onnx.save(model, str(path))
        return str(path)
    if isinstance(model, torch.nn.Module):
        if shape is None:
            raise ValueError(f"measuring a {type(model).__name__}: give input_shape or example_input")
        from infercast.measurement.backends.ort_cpu import onnx_bytes
        from infercast.models import load_model

        path.write_bytes(onnx_bytes(load_model(model, shape)))
        return str(path)
    raise ValueError(
        f"cannot measure a {type(model).__name__}: give a model string, nn.Module or onnx.ModelProto"
    )
