"""Energy sensors: one file each. ``detect(device)`` picks the one this host really has."""

from __future__ import annotations

from pathlib import Path

from infercast.measure.sensors.base import EnergyReading, EnergySensor, NoSensor
from infercast.measure.sensors.nvml import NvmlSensor, NvmlUnavailable
from infercast.measure.sensors.rapl import POWERCAP, RaplSensor, RaplUnavailable

__all__ = ["EnergyReading", "EnergySensor", "NoSensor", "NvmlSensor", "RaplSensor", "detect"]


def detect(device: str = "cpu", powercap: Path | str = POWERCAP) -> EnergySensor:
    """NVML for ``cuda[:N]``, RAPL for ``cpu``; otherwise :class:`NoSensor` saying why."""
    if device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        try:
            return NvmlSensor(index)
        except NvmlUnavailable as error:
            return NoSensor(f"no energy sensor on this host: {error}")
    try:
        return RaplSensor(powercap)
    except RaplUnavailable as error:
        return NoSensor(f"no energy sensor on this host: {error}")
