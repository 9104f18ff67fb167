"""Model strings, input shapes, and the errors a user sees."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

from infercast import capture, load_model
from infercast.errors import InputShapeError, ModelLoadError
from infercast.models import parse_input_shape

from .conftest import requires_pytorchcv


@pytest.mark.parametrize(
    ("text", "shape"),
    [("1x3x224x224", (1, 3, 224, 224)), ("2,3,32,32", (2, 3, 32, 32)), (" 8 × 16 ", (8, 16))],
)
def test_parse_input_shape(text: str, shape: tuple[int, ...]) -> None:
    assert parse_input_shape(text) == shape


@pytest.mark.parametrize("text", ["", "1x3xax4", "1x0x4x4", "-1x3"])
def test_parse_input_shape_rejects(text: str) -> None:
    with pytest.raises(InputShapeError, match="input shape"):
        parse_input_shape(text)


def test_module_object_and_batch_override() -> None:
    loaded = load_model(nn.Conv2d(3, 4, 3), "1x3x16x16", batch_size=4)
    assert loaded.source == "module" and loaded.input_shape == (4, 3, 16, 16)


@requires_pytorchcv
def test_zoo_defaults_and_unknown_name_suggestions() -> None:
    assert load_model("pytorchcv:resnet18").input_shape == (1, 3, 224, 224)
    with pytest.raises(ModelLoadError, match=r"unknown pytorchcv model 'resnet81'; did you mean .*resnet18"):
        load_model("pytorchcv:resnet81")


@requires_pytorchcv
def test_pytorchcv_names_read_from_its_source_are_its_models(monkeypatch) -> None:
    """pytorchcv's model table is read from ``model_provider``'s source, not imported (it imports
    every model module and torchvision): the same names, each built by the same function."""
    import importlib

    from infercast.compat import import_torchvision
    from infercast.models import zoo

    builders = zoo._pytorchcv_builders()
    assert builders is not None
    import_torchvision()
    from pytorchcv.model_provider import _models

    assert set(builders) == set(_models)
    assert all(getattr(importlib.import_module(m), f) is _models[n] for n, (m, f) in builders.items())
    # laid out otherwise (another pytorchcv release): the zoo imports model_provider as before
    monkeypatch.setattr(zoo, "_pytorchcv_builders", lambda: None)
    assert zoo.names("pytorchcv") == sorted(_models)
    assert load_model("pytorchcv:resnet10").input_shape == (1, 3, 224, 224)


def test_unknown_string_lists_the_syntax() -> None:
    with pytest.raises(ModelLoadError, match=r"pytorchcv:NAME, timm:NAME"):
        load_model("resnet18")


def test_python_factory(tmp_path) -> None:
    file = tmp_path / "nets.py"
    file.write_text(
        textwrap.dedent(
            """
            import torch.nn as nn

            def tiny():
                return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU())
            tiny.input_shape = (1, 1, 28, 28)

            def broken():
                raise ValueError("no such width")

            def not_a_module():
                return 42
            """
        )
    )
    loaded = load_model(f"{file}:tiny")
    assert loaded.input_shape == (1, 1, 28, 28) and loaded.source == "python"
    assert capture(loaded).params == 4 * 9 + 4
    with pytest.raises(ModelLoadError, match=r"broken\(\) raised ValueError: no such width"):
        load_model(f"{file}:broken")
    with pytest.raises(ModelLoadError, match=r"returned int, not a torch\.nn\.Module"):
        load_model(f"{file}:not_a_module")
    with pytest.raises(ModelLoadError, match="has no function 'missing'"):
        load_model(f"{file}:missing")


def test_onnx_symbolic_batch_defaults_to_one(tmp_path) -> None:
    path = str(tmp_path / "dyn.onnx")
    torch.onnx.export(
        nn.Conv2d(3, 4, 3).eval(),
        (torch.randn(2, 3, 8, 8),),
        path,
        dynamo=False,
        input_names=["x"],
        dynamic_axes={"x": {0: "batch"}},
    )
    assert load_model(path).input_shape == (1, 3, 8, 8)
    assert capture(load_model(path, batch_size=5)).nodes[0].output_shapes == [(5, 4, 6, 6)]


def test_bad_onnx_files(tmp_path) -> None:
    garbled = tmp_path / "garbled.onnx"
    garbled.write_bytes(b"\x00\x01 definitely not protobuf")
    with pytest.raises(ModelLoadError, match="not a valid ONNX model"):
        load_model(str(garbled))
    with pytest.raises(ModelLoadError, match="ONNX file not found"):
        load_model(str(tmp_path / "missing.onnx"))


def test_torchvision_imports_through_the_shim() -> None:
    """torchvision's compiled ops need CUDA libraries here; the shim must make it importable."""
    code = "from infercast.compat import import_torchvision; print(import_torchvision().models.resnet18)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
