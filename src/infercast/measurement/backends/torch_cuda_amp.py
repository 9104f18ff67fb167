"""PyTorch eager mode on a CUDA GPU under automatic mixed precision (``torch.autocast``, fp16): how
timm's benchmark tables were measured (``--amp``), and so the backend whose measurements adapt the
shipped ``rtx4090/torch-amp``-like settings. Timing and memory as ``torch-cuda``."""

from __future__ import annotations

from typing import ClassVar

import torch

from infercast.measurement.backends.base import Session
from infercast.measurement.backends.torch_cuda import TorchCudaBackend


class Autocast(torch.nn.Module):
    """``module`` run under fp16 autocast: matrix products and convolutions in fp16, reductions and
    normalisations where autocast keeps them in fp32, the weights stored as they are."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cuda", dtype=torch.float16):
            return self.module(x)


class TorchCudaAmpBackend(TorchCudaBackend):
    name: ClassVar[str] = "torch-cuda-amp"
    # autocast chooses each op's precision from a model built in fp32
    precisions: ClassVar[tuple[str, ...] | None] = ("fp32",)

    def open(self, prepared: torch.nn.Module, input_shape: tuple[int, ...]) -> Session:
        return super().open(Autocast(prepared), input_shape)
