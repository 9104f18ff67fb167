"""The CLI as a user runs it: a real subprocess, stable JSON, one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from .conftest import requires_pytorchcv
from .helpers import infercast


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("cli") / "tiny.onnx")
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2)
    )
    torch.onnx.export(
        model.eval(),
        (torch.randn(1, 3, 16, 16),),
        path,
        dynamo=False,
        input_names=["image"],
        dynamic_axes={"image": {0: "batch"}},
    )
    return path


def test_inspect_json_is_stable(tiny_onnx: str) -> None:
    result = infercast("inspect", tiny_onnx, "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    for key in (
        "schema",
        "model",
        "capture",
        "input_shape",
        "dtype",
        "flops",
        "macs",
        "params",
        "weight_bytes",
        "activation_bytes",
        "peak_activation_bytes",
        "input_bytes",
        "n_ops",
        "features",
        "nodes",
    ):
        assert key in doc
    assert doc["capture"] == "onnx" and doc["input_shape"] == [1, 3, 16, 16]
    assert doc["params"] == 8 * 27 + 8 + 8 * 2 + 2
    assert [n["kind"] for n in doc["nodes"]] == ["conv", "relu", "global_pool", "reshape", "linear"]
    node = doc["nodes"][0]
    for key in (
        "index",
        "name",
        "kind",
        "op",
        "inputs",
        "outputs",
        "input_shapes",
        "output_shapes",
        "attrs",
        "params",
        "macs",
        "flops",
        "bytes_read",
        "bytes_written",
    ):
        assert key in node


def test_inspect_table_with_ops(tiny_onnx: str) -> None:
    result = infercast("inspect", tiny_onnx, "--ops", "--batch-size", "4")
    assert result.returncode == 0, result.stderr
    assert "operators in execution order" in result.stdout
    assert "4x8x14x14" in result.stdout and "global_pool" in result.stdout


@requires_pytorchcv
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect", "pytorchcv:resnet81"], "did you mean"),
        (["inspect", "pytorchcv:resnet18", "--input-shape", "3x224x224"], "rank 3"),
        (["inspect", "nothing/here.onnx"], "ONNX file not found"),
        (["inspect", "pytorchcv:resnet18", "--input-shape", "1xtwo"], "not a list of integers"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    result = infercast(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_debug_shows_the_traceback(tmp_path) -> None:
    factory = tmp_path / "f.py"
    factory.write_text("def make():\n    raise RuntimeError('boom')\n")
    result = infercast("--debug", "inspect", f"{factory}:make")
    assert result.returncode != 0 and "Traceback" in result.stderr and "boom" in result.stderr


def test_progress_goes_to_stderr_and_results_to_stdout(tmp_path, monkeypatch) -> None:
    # both streams taken for terminals, where the bars draw: a pipe of stdout gets results alone
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("TTY_INTERACTIVE", "1")
    table = tmp_path / "two.csv"
    table.write_text("model,latency_ms\nspace:carb-resnet?depth=8,1.5\nspace:carb-resnet?depth=10,2\n")
    result = infercast("db", "import", str(table), "--device", "d", "--db", str(tmp_path / "runs.db"))
    assert result.returncode == 0, result.stderr
    # the bar's live display (it hides the cursor while it draws) ran on stderr, none of it on stdout
    assert "\x1b[?25l" in result.stderr and "\x1b[?25l" not in result.stdout
    assert "capturing" not in result.stdout and "2 stored" in result.stdout
