"""The PyTorch network of an ``nb201`` cell. ``space.nb201`` decides the cell's wiring and the
macro network's numbers and holds its closed-form features equal to this network's (the parity
test)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class ReLUConvBN(nn.Sequential):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int) -> None:
        super().__init__(
            nn.ReLU(), nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(cout)
        )


class Zero(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul(0.0)


def _edge_op(op: str, channels: int) -> nn.Module:
    if op == "none":
        return Zero()
    if op == "skip_connect":
        return nn.Identity()
    if op == "avg_pool_3x3":
        return nn.AvgPool2d(3, 1, 1, count_include_pad=False)
    return ReLUConvBN(channels, channels, 1 if op == "nor_conv_1x1" else 3, 1)


class Cell(nn.Module):
    """``edges``: (to node, from node, op) of each edge; node 0 is the input, the last the output."""

    def __init__(self, edges: Sequence[tuple[int, int, str]], channels: int) -> None:
        super().__init__()
        self.wiring = [(target, source) for target, source, _ in edges]
        self.edges = nn.ModuleList(_edge_op(op, channels) for _, _, op in edges)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes = [x]
        for target in range(1, max(t for t, _ in self.wiring) + 1):
            terms = [self.edges[e](nodes[s]) for e, (t, s) in enumerate(self.wiring) if t == target]
            total = terms[0]
            for term in terms[1:]:
                total = total + term
            nodes.append(total)
        return nodes[-1]


class ReductionBlock(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv_a = ReLUConvBN(cin, cout, 3, 2)
        self.conv_b = ReLUConvBN(cout, cout, 3, 1)
        self.downsample = nn.Sequential(nn.AvgPool2d(2, 2, 0), nn.Conv2d(cin, cout, 1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv_b(self.conv_a(x))
        return self.downsample(x) + out


class NB201Network(nn.Module):
    def __init__(
        self, edges: Sequence[tuple[int, int, str]], stages: Sequence[int], cells_per_stage: int, classes: int
    ) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, stages[0], 3, 1, 1, bias=False), nn.BatchNorm2d(stages[0]))
        layers: list[nn.Module] = []
        for index, channels in enumerate(stages):
            if index > 0:
                layers.append(ReductionBlock(stages[index - 1], channels))
            layers.extend(Cell(edges, channels) for _ in range(cells_per_stage))
        self.cells = nn.Sequential(*layers)
        self.lastact = nn.Sequential(nn.BatchNorm2d(stages[-1]), nn.ReLU())
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(stages[-1], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.pool(self.lastact(self.cells(self.stem(x))))
        return self.classifier(torch.flatten(out, 1))


def build(
    edges: Sequence[tuple[int, int, str]],
    stages: Sequence[int],
    cells_per_stage: int,
    classes: int,
    device: str,
) -> nn.Module:
    """The macro network: ``cells_per_stage`` cells wired as ``edges`` per stage of ``stages``
    channels, a reduction block between stages."""
    with torch.device(device):
        return NB201Network(edges, stages, cells_per_stage, classes).eval()
