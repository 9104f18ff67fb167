"""Capture paths: torch.fx, the torch.export fallback, and ONNX agree on the same network."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from infercast import capture, load_model
from infercast.errors import CaptureError, InputShapeError

from .conftest import onnx_export, requires_pytorchcv
from .helpers import StandardisedConv, matmul_flops, reference_flops


class ShapeBranching(nn.Module):
    """Python control flow on a shape: torch.fx cannot trace it, torch.export can."""

    def __init__(self) -> None:
        super().__init__()
        self.small = nn.Conv2d(3, 8, 3, padding=1)
        self.large = nn.Conv2d(3, 8, 5, stride=2, padding=2)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.large(x) if x.shape[-1] > 16 else self.small(x)
        y = torch.relu(self.bn(y))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def test_fx_failure_falls_back_to_export() -> None:
    model = ShapeBranching().eval()
    with pytest.raises(torch.fx.proxy.TraceError):
        torch.fx.symbolic_trace(model)
    graph = capture(model, (2, 3, 32, 32))
    assert graph.capture == "torch.export"
    assert [n.kind for n in graph.nodes] == ["conv", "bn", "relu", "global_pool", "reshape", "linear"]
    # only the branch taken is in the graph: the 5x5 conv ran, the 3x3 one did not
    assert graph.nodes[0].attrs["kernel"] == (5, 5) and graph.nodes[0].attrs["stride"] == (2, 2)
    used = sum(p.numel() for name, p in model.named_parameters() if not name.startswith("small"))
    assert graph.params == used
    assert matmul_flops(graph) == reference_flops(model, (2, 3, 32, 32))


class DefaultArguments(nn.Module):
    """Convolutions and a pool at their default stride / padding; with ``branching``, Python on a
    shape, so that only torch.export traces it (which records ``aten.conv2d`` without them)."""

    def __init__(self, branching: bool) -> None:
        super().__init__()
        self.branching = branching
        self.conv = nn.Conv2d(3, 8, 1)
        self.weight = nn.Parameter(torch.randn(8, 8, 3, 3))
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2, dilation=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x) if not self.branching or x.shape[-1] > 8 else x
        y = nn.functional.conv2d(y, self.weight)
        return self.up(nn.functional.max_pool2d(y, 2))


@pytest.mark.parametrize("path", ["torch.fx", "torch.export"])
def test_arguments_left_at_their_defaults_are_recorded(path: str) -> None:
    graph = capture(DefaultArguments(branching=path == "torch.export").eval(), (1, 3, 16, 16))
    assert graph.capture == path
    conv, functional_conv, pool, up = [n for n in graph.nodes if n.kind in ("conv", "max_pool", "deconv")]
    for node in (conv, functional_conv):
        assert (node.attrs["stride"], node.attrs["padding"], node.attrs["dilation"]) == (
            (1, 1),
            (0, 0),
            (1, 1),
        )
    assert functional_conv.attrs["kernel"] == (3, 3)
    assert pool.attrs["kernel"] == pool.attrs["stride"] == (2, 2)
    # a transposed convolution's arguments sit elsewhere in the call: read, not defaulted
    assert (up.attrs["stride"], up.attrs["dilation"]) == ((2, 2), (2, 2))


def test_fx_and_export_paths_agree() -> None:
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),
        nn.BatchNorm2d(16),
        nn.Hardswish(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16),
        nn.ReLU6(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 1, groups=4),
        nn.SiLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 5),
    ).eval()
    fx = capture(model, (1, 3, 32, 32))
    from infercast.graph.torch_capture import _capture_export

    exported = _capture_export(model, torch.empty(1, 3, 32, 32), "m", RuntimeError("forced"))
    assert fx.capture == "torch.fx" and exported.capture == "torch.export"
    assert fx.totals() == exported.totals()
    assert (
        [n.kind for n in fx.nodes]
        == [n.kind for n in exported.nodes]
        == [
            "conv",
            "bn",
            "hardswish",
            "dwconv",
            "relu6",
            "max_pool",
            "gconv",
            "swish",
            "global_pool",
            "reshape",
            "linear",
        ]
    )


def test_sigmoid_times_input_is_one_swish() -> None:
    class Gate(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * torch.sigmoid(x)

    graph = capture(Gate(), (1, 4, 8, 8))
    assert [n.kind for n in graph.nodes] == ["swish"]
    assert graph.flops == 4 * 8 * 8


@pytest.mark.parametrize("groups", [1, 4, 16])
def test_a_kernel_computed_each_step_counts_as_the_convolution_it_is(groups: int) -> None:
    plain = capture(nn.Conv2d(16, 32, 3, padding=1, groups=groups), (2, 16, 8, 8))
    standardised = capture(StandardisedConv(16, 32, 3, padding=1, groups=groups), (2, 16, 8, 8))
    (conv,) = [n for n in standardised.nodes if n.kind in ("conv", "gconv", "dwconv")]
    kind = {1: "conv", 4: "gconv", 16: "dwconv"}[groups]
    assert conv.kind == plain.nodes[0].kind == kind
    assert conv.macs == plain.nodes[0].macs == 2 * 32 * 8 * 8 * (16 // groups) * 9
    assert conv.attrs["kernel"] == (3, 3)


@pytest.mark.parametrize(
    "name",
    ["resnet18", "mobilenetv3_large_w1", "efficientnet_b0", "shufflenetv2_w1", "densenet121", "ghostnet"],
)
@requires_pytorchcv
def test_pytorch_and_onnx_export_give_identical_totals(name: str, tmp_path) -> None:
    loaded = load_model(f"pytorchcv:{name}")
    path = onnx_export(loaded.module, loaded.input_shape, str(tmp_path / f"{name}.onnx"))
    from_torch, from_onnx = capture(loaded), capture(load_model(path))
    assert from_onnx.capture == "onnx"
    assert from_torch.totals() == from_onnx.totals()


@requires_pytorchcv
def test_dynamo_exporter_gives_identical_totals(tmp_path) -> None:
    loaded = load_model("pytorchcv:mobilenetv3_small_w1")
    path = onnx_export(loaded.module, loaded.input_shape, str(tmp_path / "m.onnx"), dynamo=True)
    assert capture(loaded).totals() == capture(load_model(path)).totals()


def test_folded_onnx_export_counts_what_the_file_holds(tmp_path) -> None:
    """Exporters fold BatchNorm into Conv by default: the ONNX file then really has fewer weights."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
    path = str(tmp_path / "folded.onnx")
    torch.onnx.export(model, (torch.randn(1, 3, 16, 16),), path, dynamo=False)
    graph = capture(load_model(path))
    assert [n.kind for n in graph.nodes] == ["conv", "relu"]
    assert graph.params == 8 * 3 * 9 + 8


def test_wrong_rank_is_a_clear_error() -> None:
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))
    with pytest.raises(CaptureError, match=r"input shape 3x32x32 \(rank 3\)"):
        capture(model, (3, 32, 32))


def test_onnx_rank_and_fixed_axes_are_checked(tmp_path) -> None:
    path = str(tmp_path / "fixed.onnx")
    torch.onnx.export(nn.Conv2d(3, 4, 3).eval(), (torch.randn(1, 3, 8, 8),), path, dynamo=False)
    with pytest.raises(InputShapeError, match="rank 3"):
        capture(load_model(path, "3x8x8"))
    with pytest.raises(InputShapeError, match="axis 1 is fixed to 3"):
        capture(load_model(path, "1x5x8x8"))


@requires_pytorchcv
@pytest.mark.parametrize(
    "model",
    [
        "pytorchcv:resnet18",
        "pytorchcv:mixnet_s",  # torch.export's path: torch.fx cannot trace it
        "torchvision:mobilenet_v3_small",
        "space:mobile-nas?width=0.75&resolution=160",
    ],
)
def test_model_strings_are_captured_on_meta_as_with_weights(model: str, monkeypatch) -> None:
    from infercast.features import featurize
    from infercast.models import guarded

    devices: list[str] = []

    def recording(loaded, *args, **kwargs):
        devices.append(next(loaded.module.parameters()).device.type)
        return capture(loaded, *args, **kwargs)

    monkeypatch.setattr(guarded, "capture", recording)
    graph, source = guarded.capture_model(model)
    assert devices == ["meta"]  # built once, without weights: no fallback to a weighted build
    weighted = load_model(model)
    assert next(weighted.module.parameters()).device.type == "cpu"
    reference = capture(weighted)
    assert source == weighted.source and graph.capture == reference.capture
    assert [(n.kind, n.input_shapes, n.output_shapes, n.flops) for n in graph.nodes] == [
        (n.kind, n.input_shapes, n.output_shapes, n.flops) for n in reference.nodes
    ]
    assert featurize(graph) == featurize(reference) and graph.weight_bytes == reference.weight_bytes


class _Activations(nn.Module):
    """Activations and normalisations as modules, functions and tensor methods, and a clamp to
    tensor bounds that broadcast beyond its input."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2)
        self.layers = nn.Sequential(
            nn.BatchNorm2d(8), nn.ReLU(), nn.PReLU(8), nn.Hardswish(), nn.GroupNorm(2, 8), nn.GELU()
        )
        self.low = nn.Parameter(torch.zeros(1, 8, 8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.conv(x))
        x = torch.nn.functional.relu6(x) + x.sigmoid()
        x = x.clamp(0.0, 6.0)
        return torch.clamp(x[:1, :, :1], min=self.low)


def test_activations_and_norms_are_not_run_on_meta(monkeypatch) -> None:
    """On meta an activation's or normalisation's output is its input's shape, taken without
    running PyTorch's Python decomposition of it; with weights they run as ever."""

    def must_not_run(self, x):
        raise AssertionError(f"a {type(self).__name__} layer ran")

    reference = capture(_Activations(), (2, 3, 17, 17))
    with torch.device("meta"):
        on_meta = _Activations()
    for layer in (nn.BatchNorm2d, nn.ReLU, nn.PReLU, nn.Hardswish, nn.GroupNorm, nn.GELU):
        monkeypatch.setattr(layer, "forward", must_not_run)
    graph = capture(on_meta, (2, 3, 17, 17))
    kinds = [n.kind for n in graph.nodes]
    assert {"bn", "relu", "prelu", "hardswish", "groupnorm", "gelu", "relu6", "sigmoid", "clip"} <= set(kinds)
    assert graph.nodes[-1].kind == "clip" and graph.nodes[-1].output_shapes == [(1, 8, 8, 8)]
    assert [(n.kind, n.output_shapes, n.flops) for n in graph.nodes] == [
        (n.kind, n.output_shapes, n.flops) for n in reference.nodes
    ]
    with pytest.raises(CaptureError, match="a BatchNorm2d layer ran"):
        capture(_Activations(), (2, 3, 17, 17))


class _ShapeRules(nn.Module):
    """Ops whose output a capture on meta shapes itself: arithmetic that broadcasts (with scalars,
    in place), concatenation, linear layers and adaptive average pools; weights initialised the
    ways zoo models do."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2)
        self.scale = nn.Parameter(torch.ones(1, 8, 1, 1))
        self.rows = nn.AdaptiveAvgPool2d((None, 1))
        self.squeeze = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)
        nn.init.kaiming_normal_(self.conv.weight, mode="fan_out")
        nn.init.normal_(self.scale, mean=1.0, std=0.01)
        nn.init.trunc_normal_(self.fc.weight, std=0.02)
        self.fc.weight.data.uniform_(-0.1, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        y = x * self.scale + 1.0
        y -= x
        z = torch.cat([x, y / 2], dim=1)
        z = torch.cat((z, 2 - x), -3)
        squeezed = self.squeeze(x).flatten(1)
        return torch.cat(
            [
                self.fc(squeezed) + nn.functional.linear(squeezed, self.fc.weight),
                self.rows(z).flatten(1),
                nn.functional.adaptive_avg_pool2d(z, (2, 3)).flatten(1),
            ],
            dim=1,
        )


def test_shape_rules_on_meta_give_the_graph_with_weights() -> None:
    reference = capture(_ShapeRules(), (2, 3, 17, 17))
    with torch.device("meta"):
        on_meta = _ShapeRules()
    graph = capture(on_meta, (2, 3, 17, 17))
    kinds = {n.kind for n in graph.nodes}
    assert {"add", "mul", "sub", "div", "concat", "linear", "global_pool"} <= kinds
    assert [(n.kind, n.input_shapes, n.output_shapes, n.flops) for n in graph.nodes] == [
        (n.kind, n.input_shapes, n.output_shapes, n.flops) for n in reference.nodes
    ]
    # shapes that do not broadcast: PyTorch's own error (its meta and CPU kernels word it apart)
    with torch.device("meta"):
        mismatched = _Mismatched()
    for module in (mismatched, _Mismatched()):
        with pytest.raises(CaptureError, match=r"input shape 1x3x9x9 \(rank 4\): .*(broadcast|must match)"):
            capture(module, (1, 3, 9, 9))


class _Mismatched(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return y + y[:, :2]


@requires_pytorchcv
def test_zoo_models_build_and_capture_on_meta_without_torchdynamo_or_torchvision() -> None:
    """Importing TorchDynamo costs 1.2 s and torchvision (with it) 1.5–1.9 s here: the
    meta build skips random fills, the capture shapes the ops PyTorch would decompose in Python,
    and a pytorchcv model imports its own module, not the whole zoo."""
    code = textwrap.dedent(
        """
        import sys
        import torch
        sys.modules["torch._dynamo"] = None  # importing it fails from here on
        from infercast import capture
        from infercast.models import guarded
        from tests.test_capture_paths import _ShapeRules
        with torch.device("meta"), guarded._RandomFillsSkipped():
            module = _ShapeRules()
        capture(module, (2, 3, 17, 17))
        for model in ("pytorchcv:resnet18", "pytorchcv:mobilenet_w1", "pytorchcv:squeezenet_v1_1",
                      "pytorchcv:seresnet18", "pytorchcv:shufflenet_g1_w1"):
            graph, _ = guarded.capture_model(model)
            assert graph.capture == "torch.fx", (model, graph.capture)
        assert "torchvision" not in sys.modules
        """
    )
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=root
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_a_model_that_cannot_run_on_meta_is_built_with_weights(monkeypatch) -> None:
    from infercast.models import guarded

    devices: list[str] = []

    def cpu_only(loaded, *args, **kwargs):
        device = next(loaded.module.parameters()).device.type
        devices.append(device)
        if device == "meta":
            raise NotImplementedError("a kernel with no meta implementation")
        return capture(loaded, *args, **kwargs)

    monkeypatch.setattr(guarded, "capture", cpu_only)
    graph, _ = guarded.capture_model("space:carb-resnet?depth=8&width=0.25&input_size=32")
    assert devices == ["meta", "cpu"] and graph.flops > 0
    # an error of the model itself is the weighted build's, as without the meta attempt
    with pytest.raises(CaptureError, match=r"input shape 1x3x32 \(rank 3\)"):
        guarded.capture_model("space:carb-resnet?depth=8&width=0.25&input_size=32", (1, 3, 32))


def test_user_code_is_captured_in_the_callers_folder_and_environment(tmp_path, monkeypatch) -> None:
    """The guarded capture's child forks from a server that started in another folder with
    another environment: it reads a factory by a path relative to the caller's folder now, with
    the caller's variables now."""
    from infercast.models import guarded

    for folder, scale in (("first", 1), ("second", 2)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "nets.py").write_text(
            "import os\n\nimport torch\n\n\ndef net():\n"
            f"    return torch.nn.Conv2d(3, int(os.environ['NET_CHANNELS']) * {scale}, 3)\n\n\n"
            "net.input_shape = (1, 3, 8, 8)\n"
        )
    params = []
    for folder, channels in (("first", "4"), ("second", "5")):
        monkeypatch.chdir(tmp_path / folder)
        monkeypatch.setenv("NET_CHANNELS", channels)
        graph, _ = guarded.capture_model("nets.py:net", timeout_s=120)
        params.append(graph.params)
    # a 3×3 convolution of 3 channels into C with a bias holds 28·C parameters
    assert params == [28 * 4, 28 * 10]
