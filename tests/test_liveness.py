"""Peak live activation memory, checked by hand on a chain and on a residual block."""

from __future__ import annotations

import torch
from torch import nn

from infercast import capture, load_model

from .conftest import onnx_export

F32 = 4


class Chain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.relu(self.conv(x)) + x)


def test_chain_by_hand() -> None:
    graph = capture(Chain(), (1, 4, 8, 8))
    assert [n.kind for n in graph.nodes] == ["conv", "relu", "reshape", "linear"]
    x, act, logits = 4 * 64 * F32, 8 * 64 * F32, 10 * F32
    # conv: x + conv out | relu: conv out + relu out (x is dead) | flatten: a view, relu out only
    # linear: relu out (read through the view) + logits
    assert graph.live_bytes() == [x + act, act + act, act, act + logits]
    assert graph.peak_activation_bytes == 2 * act
    assert graph.activation_bytes == act + act + logits  # the view allocates nothing


def test_residual_block_by_hand() -> None:
    graph = capture(Residual(), (1, 8, 8, 8))
    assert [n.kind for n in graph.nodes] == ["conv", "relu", "add", "relu"]
    t = 8 * 64 * F32
    # the block input stays alive until the add reads it
    assert graph.live_bytes() == [2 * t, 3 * t, 3 * t, 2 * t]
    assert graph.peak_activation_bytes == 3 * t


def test_onnx_liveness_matches(tmp_path) -> None:
    for model, shape in ((Chain(), (1, 4, 8, 8)), (Residual(), (1, 8, 8, 8))):
        path = onnx_export(model.eval(), shape, str(tmp_path / f"{type(model).__name__}.onnx"))
        assert capture(load_model(path)).live_bytes() == capture(model, shape).live_bytes()


def test_costs_of_a_convolution_by_hand() -> None:
    graph = capture(nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 8, 8))
    node = graph.nodes[0]
    assert node.kind == "gconv" and node.attrs["groups"] == 2
    assert node.output_shapes == [(2, 6, 4, 4)]
    macs = 2 * 6 * 4 * 4 * (4 // 2) * 3 * 3
    assert (node.macs, node.flops) == (macs, 2 * macs)
    assert node.params == 6 * 2 * 9 + 6
    assert node.bytes_read == (2 * 4 * 64 + node.params) * F32
    assert node.bytes_written == 2 * 6 * 16 * F32
