"""The PyTorch network of a ``kernels`` config: one executed kernel (``space.kernels``: its
parameters and what each op means)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

ACTIVATIONS: dict[str, type[nn.Module] | None] = {
    "none": None,
    "relu": nn.ReLU,
    "relu6": nn.ReLU6,
    "hswish": nn.Hardswish,
    "hsigmoid": nn.Hardsigmoid,
    "sigmoid": nn.Sigmoid,
    "swish": nn.SiLU,
}


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, squeezed: int, gate: str) -> None:
        super().__init__()
        activation = ACTIVATIONS[gate]
        assert activation is not None
        self.gate = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(channels, squeezed, 1),
            nn.ReLU(),
            nn.Conv2d(squeezed, channels, 1),
            activation(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(x)


class Add(nn.Module):
    """Two computed maps added (a residual join): the second is the input, scaled, so both are
    produced at run time and the add is not folded away."""

    def __init__(self, act: str) -> None:
        super().__init__()
        activation = ACTIVATIONS[act]
        self.act = activation() if activation is not None else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x + x * 0.5)


class Concat(nn.Module):
    def __init__(self, first: int) -> None:
        super().__init__()
        self.first = first

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x[:, self.first :], x[:, : self.first]], dim=1)


class Shuffle(nn.Module):
    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        return x.view(n, self.groups, c // self.groups, h, w).transpose(1, 2).reshape(n, c, h, w)


class Split(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        first, second = x.chunk(2, dim=1)
        return first.contiguous(), second.contiguous()


def build_kernel(config: dict[str, Any]) -> nn.Module:
    """The one-kernel network of a (validated) config, on the default device."""
    op, cin, cout, k, stride, groups = (
        config[key] for key in ("op", "cin", "cout", "kernel", "stride", "groups")
    )
    activation = ACTIVATIONS[config["act"]]
    tail = [activation()] if activation is not None and op not in ("se", "add") else []
    if op in ("conv", "dwconv", "gconv"):  # + BatchNorm + activation, one kernel
        return nn.Sequential(
            nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout), *tail
        )
    if op == "linear":
        return nn.Sequential(nn.Linear(cin, cout), *tail)
    if op == "pool_max":
        return nn.MaxPool2d(k, stride, k // 2)
    if op == "pool_avg":
        return nn.AvgPool2d(k, stride, k // 2)
    if op == "global_pool":
        return nn.AdaptiveAvgPool2d(1)
    if op == "se":
        return SqueezeExcite(cin, cout, config["act"])
    if op == "add":
        return Add(config["act"])
    if op == "concat":
        return Concat(cin)
    if op == "act":
        assert activation is not None
        return activation()
    if op == "shuffle":
        return Shuffle(groups)
    if op == "split":
        return Split()
    return nn.Upsample(scale_factor=stride, mode="nearest")


def build(config: dict[str, Any], device: str) -> nn.Module:
    with torch.device(device):
        return build_kernel(config).eval()
