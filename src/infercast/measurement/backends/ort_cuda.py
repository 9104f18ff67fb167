"""ONNX Runtime with the CUDA execution provider (needs the ``onnxruntime-gpu`` package)."""

from __future__ import annotations

from typing import ClassVar

from infercast.measurement.backends.base import carb_resnet_model
from infercast.measurement.backends.ort_cpu import OrtCpuBackend


class OrtCudaBackend(OrtCpuBackend):
    name: ClassVar[str] = "ort-cuda"
    device: ClassVar[str] = "cuda"
    # a GPU needs batches to be busy: sentinels from a launch-bound to a compute-bound one
    sentinels: ClassVar[dict[str, str]] = {
        "small": carb_resnet_model(depth=10, width=0.5, input_size=64, batch=8),
        "medium": carb_resnet_model(depth=18, width=1.0, input_size=224, batch=16),
        "large": carb_resnet_model(depth=34, width=1.0, input_size=224, batch=64),
    }
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
