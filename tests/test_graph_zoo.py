"""Zoo CNNs: parameters exact, conv/linear FLOPs equal to PyTorch's own FlopCounterMode."""

from __future__ import annotations

import pytest

from infercast import capture, load_model
from infercast.models import zoo

from .conftest import requires_pytorchcv
from .helpers import matmul_flops, reference_flops

PYTORCHCV_MODELS = [
    "resnet18",
    "resnet50",
    "preresnet18",
    "resnext26_32x4d",
    "seresnet18",
    "mobilenet_w1",
    "mobilenetv2_w1",
    "mobilenetv3_small_w1",
    "mobilenetv3_large_w1",
    "efficientnet_b0",
    "shufflenet_g1_w1",
    "shufflenetv2_w1",
    "squeezenet_v1_0",
    "squeezenet_v1_1",
    "densenet121",
    "regnetx002",
    "regnety002",
    "mnasnet_b1",
    "ghostnet",
    "proxylessnas_cpu",
    "fbnet_cb",
    "darknet_tiny",
    "vgg11",
]


def check_against_pytorch(spec: str) -> None:
    loaded = load_model(spec)
    graph = capture(loaded)
    assert graph.params == sum(p.numel() for p in loaded.module.parameters())
    reference = reference_flops(loaded.module, loaded.input_shape)
    assert matmul_flops(graph) == pytest.approx(reference, rel=0.01)
    assert graph.flops >= matmul_flops(graph)
    assert graph.macs * 2 == matmul_flops(graph)
    assert not [n.kind for n in graph.nodes if n.kind.startswith("other:")], "unrecognised operators"


@requires_pytorchcv
@pytest.mark.parametrize("name", PYTORCHCV_MODELS)
def test_pytorchcv_model_matches_pytorch(name: str) -> None:
    check_against_pytorch(f"pytorchcv:{name}")


@pytest.mark.parametrize(
    "spec", ["torchvision:mobilenet_v3_small", "torchvision:resnet18", "timm:efficientnet_b0"]
)
def test_other_zoos_match_pytorch(spec: str) -> None:
    zoo_name = spec.split(":")[0]
    # not importorskip: a plain `import torchvision` fails here (its compiled ops need CUDA
    # libraries); the zoo imports it through infercast.compat's shim
    if not zoo.available(zoo_name):
        pytest.skip(f"{zoo_name} is not installed")
    check_against_pytorch(spec)


@requires_pytorchcv
def test_kinds_are_refined_from_shapes() -> None:
    graph = capture(load_model("pytorchcv:mobilenetv3_large_w1"))
    kinds = {n.kind for n in graph.nodes}
    assert {"conv", "dwconv", "bn", "relu", "relu6", "add", "mul", "global_pool"} <= kinds
    dw = next(n for n in graph.nodes if n.kind == "dwconv")
    assert dw.attrs["groups"] == dw.input_shapes[0][1]
    assert dw.attrs["kernel"] == (3, 3) and dw.params == dw.input_shapes[0][1] * 9


@requires_pytorchcv
def test_batch_size_scales_activations_not_weights() -> None:
    one = capture(load_model("pytorchcv:resnet18"))
    eight = capture(load_model("pytorchcv:resnet18", batch_size=8))
    assert eight.input_shape == (8, 3, 224, 224)
    assert eight.flops == 8 * one.flops
    assert eight.activation_bytes == 8 * one.activation_bytes
    assert eight.params == one.params and eight.weight_bytes == one.weight_bytes
