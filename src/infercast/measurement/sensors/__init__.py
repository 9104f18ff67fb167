"""Energy sensors: one file each, registered in ``SENSORS``. ``detect(device)`` picks the one this
host really has for the device; a new sensor is one file and one entry there."""

from __future__ import annotations

from pathlib import Path

from infercast.measurement.sensors.base import EnergyReading, EnergySensor, NoSensor, SensorUnavailable
from infercast.measurement.sensors.nvml import NvmlSensor
from infercast.measurement.sensors.rapl import POWERCAP, RaplSensor

# asked in order: the first that serves the device is opened
SENSORS: tuple[type[EnergySensor], ...] = (NvmlSensor, RaplSensor)

__all__ = [
    "SENSORS",
    "EnergyReading",
    "EnergySensor",
    "NoSensor",
    "NvmlSensor",
    "RaplSensor",
    "SensorUnavailable",
    "detect",
]


def detect(device: str = "cpu", powercap: Path | str = POWERCAP) -> EnergySensor:
    """The registered sensor that serves ``device`` (NVML for ``cuda[:N]``, RAPL for the host);
    otherwise :class:`NoSensor` saying why."""
    for sensor in SENSORS:
        if sensor.serves(device):
            try:
                return sensor.for_device(device, powercap=powercap)
            except SensorUnavailable as error:
                return NoSensor(f"no energy sensor on this host: {error}")
    return NoSensor(f"no energy sensor on this host: none of {[s.__name__ for s in SENSORS]} serves {device}")
