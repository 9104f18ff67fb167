"""The PyTorch network of a ``carb-resnet`` config. ``space.carb_resnet`` decides every number
(blocks per stage, channels, expansion) and holds its closed-form features equal to this network's
(the parity test)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = _shortcut(cin, cout, stride)
        self.relu2 = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        shortcut = self.downsample(x) if self.downsample is not None else x
        return self.relu2(out + shortcut)


class Bottleneck(nn.Module):
    def __init__(self, cin: int, mid: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.relu2 = nn.ReLU()
        self.conv3 = nn.Conv2d(mid, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = _shortcut(cin, cout, stride)
        self.relu3 = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        shortcut = self.downsample(x) if self.downsample is not None else x
        return self.relu3(out + shortcut)


def _shortcut(cin: int, cout: int, stride: int) -> nn.Module | None:
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    """``widths``: the stem's and each stage's block width; ``expansion``: a bottleneck's output
    over its width (1: Basic blocks)."""

    def __init__(
        self,
        bottleneck: bool,
        layout: Sequence[int],
        widths: Sequence[int],
        expansion: int,
        early_downsample: bool,
        classes: int,
    ) -> None:
        super().__init__()
        stem = widths[0]
        if early_downsample:
            self.stem = nn.Sequential(
                nn.Conv2d(3, stem, 7, 2, 3, bias=False),
                nn.BatchNorm2d(stem),
                nn.ReLU(),
                nn.MaxPool2d(3, 2, 1),
            )
        else:
            self.stem = nn.Sequential(
                nn.Conv2d(3, stem, 3, 1, 1, bias=False), nn.BatchNorm2d(stem), nn.ReLU()
            )
        cin, stages = stem, []
        for index, (mid, count) in enumerate(zip(widths, layout, strict=True)):
            blocks: list[nn.Module] = []
            for position in range(count):
                stride = 2 if index > 0 and position == 0 else 1
                cout = mid * expansion
                blocks.append(
                    Bottleneck(cin, mid, cout, stride) if bottleneck else BasicBlock(cin, mid, stride)
                )
                cin = cout
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


def build(
    bottleneck: bool,
    layout: Sequence[int],
    widths: Sequence[int],
    expansion: int,
    early_downsample: bool,
    classes: int,
    precision: str,
    device: str,
) -> nn.Module:
    with torch.device(device):
        model = ResNet(bottleneck, layout, widths, expansion, early_downsample, classes)
    return model.to(DTYPES[precision]).eval()
