"""TFLite files in: a flatbuffer written here (tests/tflite_files.py) is captured onto the same graph
as the PyTorch network it was converted from, and inspected and predicted like it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from typer.testing import CliRunner

import infercast
from infercast.cli import app
from infercast.errors import CaptureError, InputShapeError, ModelLoadError
from infercast.graph import capture
from infercast.graph.tflite_capture import TfliteModel, capture_tflite
from tests.tflite_files import Writer

pytestmark = pytest.mark.usefixtures("fresh_cache")
SAME, VALID = 0, 1
RELU, RELU6 = 1, 3


class Converted(nn.Module):
    """What ``converted_file`` holds, written as PyTorch: strided, depthwise, pointwise and grouped
    convolutions, a residual add, a max pool, a concatenation, a global mean, a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pointwise = nn.Conv2d(8, 8, 1)
        self.grouped = nn.Conv2d(8, 16, 3, padding=1, groups=2)
        self.classifier = nn.Linear(24, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stem = nn.functional.relu6(self.stem(x))
        x = self.pointwise(torch.relu(self.depthwise(stem))) + stem
        x = nn.functional.max_pool2d(x, 2)
        x = torch.cat([x, torch.relu(self.grouped(x))], dim=1)
        return torch.softmax(self.classifier(x.mean((2, 3))), dim=1)


def converted_file(weights: str = "float32") -> bytes:
    """``Converted`` as the TFLite converter writes it (channels-last, activations fused); with
    ``weights="float16"`` the kernels are stored in fp16 and dequantised, as fp16 conversion does."""
    w = Writer()
    rng = np.random.default_rng(0)

    def stored(*shape: int) -> int:
        value = rng.standard_normal(shape).astype(np.float32)
        if weights == "float32" or len(shape) == 1:
            return w.constant(value)
        half = w.constant(value.astype(np.float16))
        full = w.tensor(shape)
        w.op("DEQUANTIZE", [half], [full])
        return full

    x = w.tensor((1, 32, 32, 3), name="input")
    stem, dw, pw, added, pooled, grouped, joined, mean, logits, probs = (
        w.tensor(s)
        for s in [(1, 16, 16, 8)] * 4
        + [(1, 8, 8, 8), (1, 8, 8, 16), (1, 8, 8, 24), (1, 24), (1, 10), (1, 10)]
    )
    conv = "Conv2DOptions"
    # PyTorch's padding 1 at stride 2 is not TFLite's SAME (which pads the end only): a PAD op
    padded = w.tensor((1, 34, 34, 3))
    w.op("PAD", [x, w.constant(np.array([[0, 0], [1, 1], [1, 1], [0, 0]], dtype=np.int32))], [padded])
    w.op(
        "CONV_2D",
        [padded, stored(8, 3, 3, 3), stored(8)],
        [stem],
        conv,
        Padding=VALID,
        StrideH=2,
        StrideW=2,
        FusedActivationFunction=RELU6,
    )
    w.op(
        "DEPTHWISE_CONV_2D",
        [stem, stored(1, 3, 3, 8), stored(8)],
        [dw],
        "DepthwiseConv2DOptions",
        Padding=SAME,
        StrideH=1,
        StrideW=1,
        DepthMultiplier=1,
        FusedActivationFunction=RELU,
    )
    w.op("CONV_2D", [dw, stored(8, 1, 1, 8), stored(8)], [pw], conv, Padding=VALID, StrideH=1, StrideW=1)
    w.op("ADD", [pw, stem], [added], "AddOptions")
    w.op(
        "MAX_POOL_2D",
        [added],
        [pooled],
        "Pool2DOptions",
        Padding=VALID,
        StrideH=2,
        StrideW=2,
        FilterHeight=2,
        FilterWidth=2,
    )
    w.op(
        "CONV_2D",
        [pooled, stored(16, 3, 3, 4), stored(16)],
        [grouped],
        conv,
        Padding=SAME,
        StrideH=1,
        StrideW=1,
        FusedActivationFunction=RELU,
    )
    w.op("CONCATENATION", [pooled, grouped], [joined], "ConcatenationOptions", Axis=3)
    w.op("MEAN", [joined, w.constant(np.array([1, 2], dtype=np.int32))], [mean], "ReducerOptions", KeepDims=0)
    w.op("FULLY_CONNECTED", [mean, stored(10, 24), stored(10)], [logits], "FullyConnectedOptions")
    w.op("SOFTMAX", [logits], [probs], "SoftmaxOptions")
    return w.finish([x], [probs])


@pytest.fixture(scope="module")
def tflite_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tflite") / "converted.tflite"
    path.write_bytes(converted_file())
    return path


def _kinds(graph: infercast.graph.Graph) -> list[str]:
    return [n.kind for n in graph.nodes]


@pytest.mark.parametrize("weights", ["float32", "float16"])
def test_a_converted_network_is_the_graph_of_its_pytorch_source(weights: str) -> None:
    from_file = capture_tflite(TfliteModel(converted_file(weights), "converted"))
    from_torch = capture(Converted(), (1, 3, 32, 32))
    assert from_file.capture == "tflite"
    assert from_file.input_shape == (1, 3, 32, 32)  # channels-first, as every infercast graph
    assert _kinds(from_file) == _kinds(from_torch) == [
        "conv", "relu6", "dwconv", "relu", "conv", "add", "max_pool", "gconv", "relu", "concat",
        "global_pool", "linear", "softmax",
    ]  # fmt: skip
    assert from_file.macs == from_torch.macs
    assert from_file.flops == from_torch.flops
    assert from_file.params == from_torch.params
    assert [n.output_shapes for n in from_file.nodes] == [n.output_shapes for n in from_torch.nodes]
    assert from_file.peak_activation_bytes == from_torch.peak_activation_bytes
    stem = from_file.nodes[0]
    assert stem.attrs["kernel"] == (3, 3) and stem.attrs["stride"] == (2, 2)
    assert stem.attrs["padding"] == (1, 1, 1, 1)  # the PAD before it, merged as the delegates do
    assert stem.input_shapes == [(1, 3, 32, 32)]
    grouped = next(n for n in from_file.nodes if n.kind == "gconv")
    assert grouped.attrs["padding"] == (1, 1, 1, 1) and grouped.attrs["groups"] == 2  # SAME at stride 1


def test_a_classifier_on_an_image_tensor_reads_it_as_rows() -> None:
    w = Writer()
    x, out = w.tensor((1, 2, 2, 6)), w.tensor((1, 4))
    w.op("FULLY_CONNECTED", [x, w.constant(np.ones((4, 24), np.float32))], [out], "FullyConnectedOptions")
    graph = capture_tflite(TfliteModel(w.finish([x], [out])))
    assert _kinds(graph) == ["reshape", "linear"]
    assert graph.macs == 4 * 24


def test_a_wrong_file_or_shape_is_a_user_error(tmp_path: Path, tflite_path: Path) -> None:
    junk = tmp_path / "junk.tflite"
    junk.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelLoadError, match="not a TFLite model"):
        infercast.load_model(str(junk))
    with pytest.raises(ModelLoadError, match="TFLite file not found"):
        infercast.load_model(str(tmp_path / "missing.tflite"))
    with pytest.raises(InputShapeError, match="converted for input 1x3x32x32"):
        infercast.load_model(str(tflite_path), input_shape=(1, 3, 64, 64))
    with pytest.raises(InputShapeError, match="converted for input 1x3x32x32"):
        capture_tflite(TfliteModel(tflite_path.read_bytes()), (2, 3, 32, 32))
    loaded = infercast.load_model(str(tflite_path))
    assert loaded.source == "tflite" and loaded.input_shape == (1, 3, 32, 32)
    assert infercast.capture(loaded).macs == capture(Converted(), (1, 3, 32, 32)).macs


def test_predicted_on_a_phone_as_its_pytorch_source(tflite_path: Path) -> None:
    """Same graph, same prediction: the op-wise route of the GPU delegate (BatchNorm folded
    either way) and the model-level route of a CPU setting."""
    for device in ("pixel4/gpu", "s10/1large"):
        from_file = infercast.predict(str(tflite_path), device=device)
        from_torch = infercast.predict(Converted(), device=device, input_shape=(1, 3, 32, 32))
        assert from_file["route"] == from_torch["route"]
        assert from_file["latency_ms"] == pytest.approx(from_torch["latency_ms"], rel=1e-6)


def test_cli_inspects_predicts_and_refuses_to_measure(tflite_path: Path) -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["inspect", str(tflite_path), "--json"])
    assert shown.exit_code == 0, shown.output
    facts = json.loads(shown.stdout)
    assert facts["capture"] == "tflite" and facts["macs"] == capture(Converted(), (1, 3, 32, 32)).macs
    predicted = runner.invoke(app, ["predict", "--device", "pixel4/gpu", str(tflite_path), "--json"])
    assert predicted.exit_code == 0, predicted.output
    assert json.loads(predicted.stdout)[0]["latency_ms"] > 0
    measured = runner.invoke(app, ["measure", str(tflite_path), "--json"])
    assert measured.exit_code == 2
    assert "TFLite file" in measured.output and "ONNX Runtime and PyTorch" in measured.output


def test_a_pad_read_by_other_ops_stays_and_an_int8_model_is_sized_in_bytes() -> None:
    w = Writer()
    x, padded, out = (
        w.tensor((1, 4, 4, 2), "int8"),
        w.tensor((1, 6, 6, 2), "int8"),
        w.tensor((1, 6, 6, 2), "int8"),
    )
    w.op("PAD", [x, w.constant(np.array([[0, 0], [1, 1], [1, 1], [0, 0]], dtype=np.int32))], [padded])
    w.op("ADD", [padded, padded], [out], "AddOptions")
    graph = capture_tflite(TfliteModel(w.finish([x], [out])))
    assert _kinds(graph) == ["pad", "add"]
    assert graph.dtype == "int8" and graph.nodes[1].bytes_written == 6 * 6 * 2

    w = Writer()
    x, y = w.tensor((1, 8, 8, 4), "int8"), w.tensor((1, 8, 8, 6), "int8")
    kernel, bias = w.constant(np.ones((6, 1, 1, 4), np.int8)), w.constant(np.zeros(6, np.int32))
    w.op("CONV_2D", [x, kernel, bias], [y], "Conv2DOptions", Padding=VALID, StrideH=1, StrideW=1)
    graph = capture_tflite(TfliteModel(w.finish([x], [y])))
    assert graph.params == 6 * 4 + 6 and graph.weight_bytes == 6 * 4 + 6 * 4
    assert graph.macs == 8 * 8 * 6 * 4


def test_a_tensor_no_operator_writes_is_named() -> None:
    w = Writer()
    x, stray, out = w.tensor((1, 4, 4, 2)), w.tensor((1, 4, 4, 2), name="state"), w.tensor((1, 4, 4, 2))
    w.op("ADD", [x, stray], [out], "AddOptions")
    with pytest.raises(CaptureError, match="reads 'state', which no operator before it writes"):
        capture_tflite(TfliteModel(w.finish([x], [out])))


@pytest.mark.parametrize("path", sorted((Path(__file__).parent / "converted_tflite").glob("*.tflite")))
def test_real_converter_output_is_the_graph_of_its_pytorch_source(path: Path) -> None:
    from_file = capture_tflite(TfliteModel(path.read_bytes(), path.name))
    from_torch = capture(Converted(), (1, 3, 32, 32))
    assert _kinds(from_file) == _kinds(from_torch)
    assert (from_file.macs, from_file.flops, from_file.params) == (
        from_torch.macs,
        from_torch.flops,
        from_torch.params,
    )
    assert from_file.peak_activation_bytes == from_torch.peak_activation_bytes
    assert [n.attrs.get("padding") for n in from_file.nodes if n.kind in ("conv", "dwconv", "gconv")] == [
        (1, 1, 1, 1), (1, 1, 1, 1), (0, 0, 0, 0), (1, 1, 1, 1)
    ]  # fmt: skip
