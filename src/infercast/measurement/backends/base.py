"""The backend interface: settings that change kernels, and a session that runs one model."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from infercast.errors import InfercastError
from infercast.models import LoadedModel


class MeasureError(InfercastError):
    """A backend or protocol setting that cannot work here, named with the allowed values."""


def tflite_refused(name: str) -> MeasureError:
    return MeasureError(
        f"{name} is a TFLite file: infercast reads it to inspect and predict it, but measures with "
        "ONNX Runtime and PyTorch only; measure the model it was converted from"
    )


class Session(ABC):
    """One prepared model on one backend, with its input already allocated."""

    @abstractmethod
    def run(self) -> None:
        """One synchronous inference (GPU work finished when it returns)."""

    def time_iterations(self, seconds: float) -> list[float]:
        """Back-to-back inferences for about ``seconds``; the latency of each in ms (at least one)."""
        times: list[float] = []
        deadline = time.perf_counter() + seconds
        while True:
            start = time.perf_counter()
            self.run()
            end = time.perf_counter()
            times.append((end - start) * 1000)
            if end >= deadline:
                return times

    def profile_ops(self, runs: int) -> list[dict[str, Any]]:
        """One row per executed kernel with its shape features and median latency."""
        raise MeasureError(f"per-op profiling is not available for {type(self).__name__}")

    def session_peak_memory(self) -> tuple[int, str] | None:
        """The backend's own peak-memory figure and its definition (the CUDA allocator's, the
        PyTorch profiler's); None: the worker reports the process peak RSS instead."""
        return None

    def reset_peak_memory(self) -> None:
        """Start a new peak window for ``session_peak_memory``."""
        return

    def close(self) -> None:
        """Release the session's memory."""
        return


def carb_resnet_model(depth: int, width: float, input_size: int, batch: int) -> str:
    """The model string of a basic-block carb-resnet config (sentinels are such configs)."""
    return (
        f"space:carb-resnet?batch={batch}&block=basic&depth={depth}&early_downsample=1"
        f"&input_size={input_size}&precision=fp32&width={width}"
    )


class Backend(ABC):
    """``name`` is what users type (``ort-cpu``); ``settings`` change the kernels chosen."""

    name: ClassVar[str]
    device: ClassVar[str]
    # the precisions the backend runs; None: whatever the model is built in (a config of another
    # precision would only fail, so a campaign samples only these)
    precisions: ClassVar[tuple[str, ...] | None] = None
    # Where a worker starts counting peak memory: before the model is loaded (the weights the
    # session runs from are the model's own) or only before ``open`` (the session holds its own
    # copy, and what ``prepare`` built to get there is released first).
    memory_from_load: ClassVar[bool] = True
    # fixed models every campaign re-measures to estimate the platform's drift
    # (measurement.sentinels): a small, a medium and a large one, an order of magnitude apart
    sentinels: ClassVar[dict[str, str]] = {
        "small": carb_resnet_model(depth=10, width=0.5, input_size=64, batch=1),
        "medium": carb_resnet_model(depth=18, width=0.75, input_size=96, batch=1),
        "large": carb_resnet_model(depth=18, width=1.0, input_size=160, batch=1),
    }

    def __init__(self, threads: int = 1) -> None:
        if not isinstance(threads, int) or threads < 1:
            raise MeasureError(f"threads must be a positive integer, got {threads!r}")
        self.threads = threads

    @property
    def settings(self) -> dict[str, Any]:
        return {"threads": self.threads, "device": self.device}

    def available(self) -> str | None:
        """None where the backend can run here, else why not."""
        return None

    def machine_facts(self) -> dict[str, Any]:
        """What this machine decides about the backend's kernels beyond its CPU model and library
        versions (kept in the platform's fingerprint, for the op-wise route's fusion rules)."""
        return {}

    def prepare(self, model: LoadedModel) -> Any:
        """What ``open`` needs (an ONNX file's bytes, a module); the default: the model itself."""
        return model

    @abstractmethod
    def open(self, prepared: Any, input_shape: tuple[int, ...]) -> Session:
        """A session over what ``prepare`` returned, with an input of ``input_shape``."""

    def spec(self) -> dict[str, Any]:
        """What a worker process needs to rebuild this backend."""
        return {"name": self.name, **{k: v for k, v in self.settings.items() if k != "device"}}
