"""PyTorch eager mode on a CUDA GPU: CUDA events time each inference, the caching allocator's
statistics give the peak memory (``max_memory_allocated``, with ``max_memory_reserved``)."""

from __future__ import annotations

from typing import ClassVar

import torch

from infercast.measurement.backends.base import Backend, Session, carb_resnet_model
from infercast.measurement.backends.torch_cpu import TorchSession, raise_for_onnx
from infercast.models import LoadedModel


class TorchCudaSession(TorchSession):
    def run(self) -> None:
        super().run()
        torch.cuda.synchronize()

    def time_iterations(self, seconds: float) -> list[float]:
        import time

        times: list[float] = []
        deadline = time.perf_counter() + seconds
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.inference_mode():
            while True:
                start.record()
                self.module(self.example)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
                if time.perf_counter() >= deadline:
                    return times

    def reset_peak_memory(self) -> None:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()

    def session_peak_memory(self) -> tuple[int, str] | None:
        torch.cuda.synchronize()
        allocated = torch.cuda.max_memory_allocated()
        reserved = torch.cuda.max_memory_reserved()
        return allocated, f"torch.cuda.max_memory_allocated (max_memory_reserved {reserved} B)"

    def close(self) -> None:
        super().close()
        torch.cuda.empty_cache()


class TorchCudaBackend(Backend):
    name: ClassVar[str] = "torch-cuda"
    device: ClassVar[str] = "cuda"
    # a GPU needs batches to be busy: sentinels from a launch-bound to a compute-bound one
    sentinels: ClassVar[dict[str, str]] = {
        "small": carb_resnet_model(depth=10, width=0.5, input_size=64, batch=8),
        "medium": carb_resnet_model(depth=18, width=1.0, input_size=224, batch=16),
        "large": carb_resnet_model(depth=34, width=1.0, input_size=224, batch=64),
    }

    def available(self) -> str | None:
        return None if torch.cuda.is_available() else "no CUDA GPU is visible to PyTorch on this host"

    def prepare(self, model: LoadedModel) -> torch.nn.Module:
        if model.module is None:
            raise_for_onnx(model)
        return model.module.eval()

    def open(self, prepared: torch.nn.Module, input_shape: tuple[int, ...]) -> Session:
        torch.backends.cudnn.benchmark = False  # one algorithm choice, not a timing-dependent one
        module = prepared.to("cuda")
        dtype = next((p.dtype for p in module.parameters()), torch.float32)
        return TorchCudaSession(module, torch.randn(input_shape, dtype=dtype, device="cuda"))
