"""ONNX Runtime with the CUDA execution provider (needs the ``onnxruntime-gpu`` package)."""

from __future__ import annotations

from typing import ClassVar

from infercast.measure.backends.ort_cpu import OrtCpuBackend


class OrtCudaBackend(OrtCpuBackend):
    name: ClassVar[str] = "ort-cuda"
    device: ClassVar[str] = "cuda"
    # outputs come back to the host, so ``run`` returns only once the GPU work is done
    providers: ClassVar[list[str]] = ["CUDAExecutionProvider"]
    precisions: ClassVar[tuple[str, ...] | None] = None  # the CUDA provider runs fp16 too
    host_heap_memory: ClassVar[bool] = False

    def available(self) -> str | None:
        import onnxruntime as ort

        if "CUDAExecutionProvider" not in ort.get_available_providers():
            return (
                "ONNX Runtime has no CUDA execution provider here (pip install onnxruntime-gpu on a GPU host)"
            )
        return None
