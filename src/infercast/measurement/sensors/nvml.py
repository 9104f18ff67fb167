"""NVIDIA GPUs through NVML (``nvidia-ml-py``).

Preferred: the cumulative energy counter ``nvmlDeviceGetTotalEnergyConsumption`` (millijoules,
Volta and newer). It updates only every ~100 ms on many boards, so windows under one second give
no figure. Where the counter is unsupported, a sampler thread integrates
``nvmlDeviceGetPowerUsage`` (milliwatts) with the trapezoid rule every 10 ms instead, and says so
in the sensor name (``nvml-power``).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from types import ModuleType
from typing import Any

from infercast.measurement.sensors.base import EnergySensor, SensorUnavailable
from infercast.units import millijoules_to_joules, milliwatts_to_watts


class NvmlUnavailable(SensorUnavailable):
    """NVML or the device cannot be used; the message says why."""


def _load_nvml() -> ModuleType:
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable("nvidia-ml-py is not installed") from None
    return pynvml


class NvmlSensor(EnergySensor):
    """``nvml`` is the pynvml module; tests pass a replay of a recorded trace with the same API."""

    min_window_s = 1.0

    @classmethod
    def serves(cls, device: str) -> bool:
        return device.startswith("cuda")

    @classmethod
    def for_device(cls, device: str, **options: Any) -> NvmlSensor:
        return cls(int(device.partition(":")[2] or 0))

    def __init__(self, device_index: int = 0, nvml: Any = None, sample_period_s: float = 0.01) -> None:
        self.nvml = nvml if nvml is not None else _load_nvml()
        try:
            self.nvml.nvmlInit()
            self.handle = self.nvml.nvmlDeviceGetHandleByIndex(device_index)
        except Exception as error:  # NVMLError subclasses: no driver, no such device…
            raise NvmlUnavailable(f"NVML could not open GPU {device_index}: {error}") from None
        self.sample_period_s = sample_period_s
        self.counter = self._counter_supported()
        self.name = "nvml" if self.counter else "nvml-power"
        self._samples: list[tuple[float, float]] = []  # (time, watts)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if not self.counter:
            self._thread = threading.Thread(target=self._sample, name="nvml-power-sampler", daemon=True)
            self._thread.start()

    def _counter_supported(self) -> bool:
        try:
            self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
            return True
        except self.nvml.NVMLError_NotSupported:
            return False

    def _sample(self) -> None:
        while not self._stop.is_set():
            watts = milliwatts_to_watts(self.nvml.nvmlDeviceGetPowerUsage(self.handle))
            with self._lock:
                self._samples.append((time.monotonic(), watts))
            self._stop.wait(self.sample_period_s)

    def snapshot(self) -> Any:
        if self.counter:
            return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        return time.monotonic()

    def joules_between(self, start: Any, end: Any) -> float:
        if self.counter:
            return millijoules_to_joules(end - start)  # a 64-bit counter: no wrap in practice
        with self._lock:
            window = [(t, w) for t, w in self._samples if start <= t <= end]
        return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in itertools.pairwise(window))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
        with contextlib.suppress(Exception):  # a device that went away needs no shutdown
            self.nvml.nvmlShutdown()
