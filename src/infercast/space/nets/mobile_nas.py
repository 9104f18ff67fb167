"""The PyTorch network of a ``mobile-nas`` config. ``space.mobile_nas`` decides every number
(each block's channels, kernel, expansion, stride; the squeezed channels) and holds its
closed-form features equal to this network's (the parity test)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "hswish": nn.Hardswish}


class Block(NamedTuple):
    """One inverted residual: channels in and out, depthwise kernel, expansion, stride, the SE
    gate's squeezed channels (0: no SE) and the activation."""

    cin: int
    cout: int
    kernel: int
    expansion: int
    stride: int
    squeezed: int
    act: str


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int) -> None:
        super().__init__()
        self.gate = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(channels, squeezed, 1),
            nn.ReLU(),
            nn.Conv2d(squeezed, channels, 1),
            nn.Hardsigmoid(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(x)


class InvertedResidual(nn.Module):
    def __init__(self, block: Block) -> None:
        super().__init__()
        cin, cout, kernel, expansion, stride, squeezed, act = block
        hidden = cin * expansion
        activation = ACTIVATIONS[act]
        self.expand = (
            nn.Sequential(nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), activation())
            if expansion != 1
            else None
        )
        self.depthwise = nn.Sequential(
            nn.Conv2d(hidden, hidden, kernel, stride, kernel // 2, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            activation(),
        )
        self.se = SqueezeExcite(hidden, squeezed) if squeezed else None
        self.project = nn.Sequential(nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.expand(x) if self.expand is not None else x
        out = self.depthwise(out)
        if self.se is not None:
            out = self.se(out)
        out = self.project(out)
        return out + x if self.residual else out


class MobileNet(nn.Module):
    def __init__(self, stem: int, blocks: Sequence[Block], head: int, classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, stem, 3, 2, 1, bias=False), nn.BatchNorm2d(stem), nn.ReLU())
        self.blocks = nn.Sequential(*(InvertedResidual(block) for block in blocks))
        cin = blocks[-1].cout if blocks else stem
        self.head = nn.Sequential(nn.Conv2d(cin, head, 1, bias=False), nn.BatchNorm2d(head), nn.ReLU())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(head, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.pool(self.head(self.blocks(self.stem(x))))
        return self.classifier(torch.flatten(out, 1))


def build(stem: int, blocks: Sequence[Block], head: int, classes: int, device: str) -> nn.Module:
    with torch.device(device):
        return MobileNet(stem, blocks, head, classes).eval()
