"""PyTorch eager mode on the CPU (no graph fusion: every module runs as its own kernels)."""

from __future__ import annotations

from typing import ClassVar, NoReturn

import torch

from infercast.measure.backends.base import Backend, Session
from infercast.models import LoadedModel


class TorchSession(Session):
    def __init__(self, module: torch.nn.Module, example: torch.Tensor) -> None:
        self.module = module
        self.example = example

    @torch.inference_mode()
    def run(self) -> None:
        self.module(self.example)

    def close(self) -> None:
        del self.module, self.example


class TorchCpuBackend(Backend):
    name: ClassVar[str] = "torch-cpu"
    device: ClassVar[str] = "cpu"

    def prepare(self, model: LoadedModel) -> torch.nn.Module:
        if model.module is None:
            raise_for_onnx(model)
        return model.module.eval()

    def open(self, prepared: torch.nn.Module, input_shape: tuple[int, ...]) -> Session:
        torch.set_num_threads(self.threads)
        dtype = next((p.dtype for p in prepared.parameters()), torch.float32)
        return TorchSession(prepared, torch.randn(input_shape, dtype=dtype))


def raise_for_onnx(model: LoadedModel) -> NoReturn:
    from infercast.measure.backends.base import MeasureError

    raise MeasureError(
        f"{model.name} is an ONNX file; the PyTorch backends need a PyTorch model (use ort-cpu)"
    )
