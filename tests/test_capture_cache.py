"""Captured graphs kept on disk: read back equal, keyed by what changes a graph, filled by what
measures a model as by what predicts it, and a warm prediction or a typo never imports PyTorch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infercast.graph.serial import graph_from_dict, graph_to_dict
from infercast.models import capturing
from infercast.models.capturing import capture_model
from tests.conftest import requires_pytorchcv


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("INFERCAST_CACHE", str(tmp_path))
    return tmp_path / "graphs"


@requires_pytorchcv
@pytest.mark.parametrize("model", ["pytorchcv:shufflenetv2_wd2", "space:carb-resnet?depth=10&width=0.25"])
def test_a_cached_graph_is_the_captured_one(cache: Path, model: str) -> None:
    fresh, source = capture_model(model)
    assert len(list(cache.glob("*.json"))) == 1
    again, source_again = capture_model(model)
    assert again == fresh and source_again == source
    assert graph_from_dict(json.loads(json.dumps(graph_to_dict(fresh)))) == fresh


def test_a_model_measured_or_imported_is_captured_once(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from infercast.measurement import model_configs

    model = "space:carb-resnet?depth=10&width=0.25"
    (row,), unusable = model_configs([model], (1, 3, 32, 32))
    assert not unusable and len(list(cache.glob("*.json"))) == 1
    captured = []
    monkeypatch.setattr("infercast.models.guarded.capture_model", lambda *args: captured.append(args))
    graph, _ = capture_model(model, (1, 3, 32, 32))  # what predict and adapt call: read back
    assert not captured and list(graph.input_shape) == row["params"]["input_shape"] == [1, 3, 32, 32]


def test_the_key_holds_shape_batch_and_versions(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    capture_model("timm:resnet10t", "1x3x32x32")
    capture_model("timm:resnet10t", "1x3x32x32", batch_size=2)
    capture_model("timm:resnet10t", "1x3x48x48")
    assert len(list(cache.glob("*.json"))) == 3
    monkeypatch.setattr(capturing, "_version", lambda package: "0.0.0-other")
    graph, _ = capture_model("timm:resnet10t", "1x3x32x32")  # another torch: captured again
    assert len(list(cache.glob("*.json"))) == 4 and graph.input_shape == (1, 3, 32, 32)


def test_a_damaged_entry_is_captured_again(cache: Path) -> None:
    first, _ = capture_model("timm:resnet10t", "1x3x32x32")
    (entry,) = cache.glob("*.json")
    entry.write_text('{"graph": {"format": 1, "nodes": [')
    assert capture_model("timm:resnet10t", "1x3x32x32")[0] == first
    assert json.loads(entry.read_text())["source"] == "timm"


def test_an_onnx_file_is_keyed_by_its_bytes(cache: Path, tmp_path: Path) -> None:
    import torch

    from tests.conftest import onnx_export

    path = tmp_path / "m.onnx"
    onnx_export(torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3)), (1, 3, 16, 16), str(path))
    first, _ = capture_model(str(path))
    onnx_export(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3)), (1, 3, 16, 16), str(path))
    second, _ = capture_model(str(path))
    assert first.nodes[0].output_shapes != second.nodes[0].output_shapes


def test_user_code_and_modules_are_never_cached(cache: Path, tmp_path: Path) -> None:
    import torch

    factory = tmp_path / "net.py"
    factory.write_text("import torch\ndef build():\n    return torch.nn.Conv2d(3, 4, 3)\n")
    capture_model(f"{factory}:build", "1x3x16x16")
    capture_model(torch.nn.Conv2d(3, 4, 3), (1, 3, 16, 16))
    assert not cache.exists()


def test_the_cache_can_be_turned_off(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERCAST_GRAPH_CACHE", "0")
    capture_model("space:carb-resnet?depth=10&width=0.25", "1x3x32x32")
    assert not cache.exists()


def _without_torch(code: str, cache: Path) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter that then prints whether PyTorch was imported."""
    script = f"{code}\nimport sys\nprint('torch' in sys.modules)"
    env = {**os.environ, "INFERCAST_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False
    )


@requires_pytorchcv
def test_a_warm_prediction_and_a_typo_never_import_torch(tmp_path: Path) -> None:
    predict = (
        "import infercast\n"
        "r = infercast.predict('pytorchcv:resnet10', device='pixel4/gpu')\n"
        "print(round(r['latency_ms'], 6))"
    )
    cold = _without_torch(predict, tmp_path)
    warm = _without_torch(predict, tmp_path)
    assert cold.returncode == warm.returncode == 0, cold.stderr + warm.stderr
    assert cold.stdout.split() == [cold.stdout.split()[0], "True"]
    assert warm.stdout.split() == [cold.stdout.split()[0], "False"]  # the same figure, no torch
    typo = _without_torch(
        "import infercast\ntry:\n    infercast.predict('pytorchcv:resnt10', device='pixel4/gpu')\n"
        "except infercast.errors.ModelLoadError as e:\n    print('refused', 'resnet10' in str(e))",
        tmp_path,
    )
    assert typo.stdout.split() == ["refused", "True", "False"], typo.stderr


def test_a_zoo_builds_in_a_new_process_once_its_names_are_kept(tmp_path: Path) -> None:
    """The zoo's name list read from the cache must not skip what listing it did (timm imports
    torchvision, which on a CPU-only PyTorch needs infercast's shim first)."""
    build = (
        "from infercast.models import zoo\n"
        "zoo.check_name('timm', 'resnet10t')\n"
        "from infercast.models.guarded import capture_model\n"
        "print(capture_model('timm:resnet10t', '1x3x32x32')[0].input_shape)"
    )
    first = _without_torch(build, tmp_path)
    again = _without_torch(build, tmp_path)  # the names now come from the cache
    assert first.returncode == again.returncode == 0, first.stderr[-2000:] + again.stderr[-2000:]
    assert again.stdout.split()[:4] == ["(1,", "3,", "32,", "32)"]
