"""Tiny models for the measurement tests, loaded as ``tests/measure_models.py:NAME``."""

from __future__ import annotations

import os
import time

import torch
from torch import nn


def tiny():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())


tiny.input_shape = (1, 3, 16, 16)


class _Misbehaving(nn.Module):
    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.how == "raise":
            raise ValueError("this layer is broken")
        if self.how == "hang":
            time.sleep(3600)
        if self.how == "crash":
            os._exit(3)
        if self.how == "oom":
            raise MemoryError()
        return self.conv(x)


def raises():
    return _Misbehaving("raise")


def hangs():
    return _Misbehaving("hang")


def crashes():
    return _Misbehaving("crash")


def exhausts_memory():
    return _Misbehaving("oom")


for factory in (raises, hangs, crashes, exhausts_memory):
    factory.input_shape = (1, 3, 8, 8)


class _PointwiseHead(nn.Module):
    """ConvNeXt's way: a fully connected layer at every position of a channels-last map, then a
    classifier on the pooled vector."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.pointwise = nn.Linear(16, 32)
        self.classifier = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mixed = self.pointwise(self.stem(x).permute(0, 2, 3, 1))
        return self.classifier(mixed.mean((1, 2)))


def pointwise_head():
    return _PointwiseHead()


pointwise_head.input_shape = (1, 3, 12, 12)
