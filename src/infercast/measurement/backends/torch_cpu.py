"""PyTorch eager mode on the CPU (no graph fusion: every module runs as its own kernels)."""

from __future__ import annotations

from typing import Any, ClassVar, NoReturn

import torch

from infercast.measurement.backends.base import Backend, Session, tflite_refused
from infercast.models import LoadedModel

PROFILER_MEMORY = "torch.profiler running sum of CPU allocation events over one inference (weights excluded)"


class TorchSession(Session):
    def __init__(self, module: torch.nn.Module, example: torch.Tensor) -> None:
        self.module = module
        self.example = example

    def run(self) -> None:
        self.module(self.example)

    def time_iterations(self, seconds: float) -> list[float]:
        # entered once, not per iteration: its cost would be timed with every small model
        with torch.inference_mode():
            return super().time_iterations(seconds)

    def _profile(self, runs: int, memory: bool) -> list[Any]:
        """Top-level ATen ops (and allocator events) of ``runs`` inferences, in time order."""
        from torch.profiler import ProfilerActivity, profile

        with (
            torch.inference_mode(),
            profile(
                activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True, profile_memory=memory
            ) as profiler,
        ):
            for _ in range(runs):
                self.module(self.example)
        events = [e for e in profiler.events() if e.cpu_parent is None]
        return sorted(events, key=lambda e: e.time_range.start)

    def session_peak_memory(self) -> tuple[int, str] | None:
        if self.example.device.type != "cpu":
            return None
        running = peak = 0
        for event in self._profile(1, memory=True):
            running += event.cpu_memory_usage
            peak = max(peak, running)
        return peak, PROFILER_MEMORY

    def profile_ops(self, runs: int) -> list[dict[str, Any]]:
        from infercast.measurement.ops import torch_rows

        ops = [e for e in self._profile(runs + 1, memory=False) if e.name.startswith("aten::")]
        per_run = len(ops) // (runs + 1)
        return torch_rows(ops[per_run:], per_run)

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
    from infercast.measurement.backends.base import MeasureError

    if model.tflite is not None:
        raise tflite_refused(model.name)
    raise MeasureError(
        f"{model.name} is an ONNX file; the PyTorch backends need a PyTorch model (use ort-cpu)"
    )
