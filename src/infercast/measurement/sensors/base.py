"""What an energy sensor is: a cumulative counter read at window boundaries.

A measurement reads the sensor before and after a window of back-to-back inferences and divides
the energy by the number of inferences. Counters update at a finite rate (NVML's every ~100 ms on
many GPUs, RAPL's every ~1 ms), so a window shorter than ``min_window_s`` cannot be trusted and
gives no figure — never a guessed one. Where no sensor exists the energy is ``None`` with the
reason said plainly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EnergyReading:
    """Joules over a window, or ``None`` with the reason."""

    joules: float | None
    seconds: float
    sensor: str
    reason: str | None = None

    def per_inference(self, iterations: int) -> float | None:
        return None if self.joules is None or iterations <= 0 else self.joules / iterations


class SensorUnavailable(Exception):
    """The sensor cannot be read on this host; the message says why."""


class EnergySensor(ABC):
    """``snapshot()`` at the start and end of a window; ``energy(start, end)`` in joules.

    A sensor class says which devices it serves (``serves``) and opens itself for one
    (``for_device``, raising :class:`SensorUnavailable` with the reason); ``sensors.detect`` asks
    the registered classes in order."""

    name: str
    min_window_s: float  # shorter windows than this give no figure

    @classmethod
    def serves(cls, device: str) -> bool:
        """Whether this sensor measures energy for ``device`` ("cpu", "cuda:0", …)."""
        return False

    @classmethod
    def for_device(cls, device: str, **options: Any) -> EnergySensor:
        """The sensor for ``device``; ``options`` point it elsewhere (a replayed trace, say)."""
        raise SensorUnavailable(f"{cls.__name__} cannot be opened for {device}")

    @abstractmethod
    def snapshot(self) -> Any:
        """An opaque reading of the counter(s), taken now."""

    @abstractmethod
    def joules_between(self, start: Any, end: Any) -> float:
        """Energy between two snapshots (handles counter wrap-around)."""

    def close(self) -> None:
        """Release the device handle or stop a sampler."""
        return  # counters read from files hold nothing open

    def measure(self, start: Any, end: Any, seconds: float) -> EnergyReading:
        if seconds < self.min_window_s:
            return EnergyReading(
                None,
                seconds,
                self.name,
                f"window of {seconds:.3f} s is shorter than the {self.min_window_s:g} s the {self.name} "
                "counter needs between updates",
            )
        return EnergyReading(self.joules_between(start, end), seconds, self.name)


class NoSensor(EnergySensor):
    """No energy counter on this host: every reading is ``None`` with the reason."""

    name = "none"
    min_window_s = 0.0

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def snapshot(self) -> None:
        return None

    def joules_between(self, start: Any, end: Any) -> float:
        raise RuntimeError(self.reason)

    def measure(self, start: Any, end: Any, seconds: float) -> EnergyReading:
        return EnergyReading(None, seconds, self.name, self.reason)
