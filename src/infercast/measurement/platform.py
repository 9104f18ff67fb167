"""The machine a measurement ran on, as a fingerprint stored with every platform."""

from __future__ import annotations

import os
import platform as host
from pathlib import Path
from typing import Any

from infercast.machine import LIBRARIES, cpu_fingerprint, library_version
from infercast.units import milliwatts_to_watts


def cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return host.processor() or host.machine()


def gpu_fingerprint(index: int = 0) -> dict[str, Any] | None:
    """Name, driver, memory and clocks of a CUDA GPU, or None where there is none."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        properties = torch.cuda.get_device_properties(index)
        info: dict[str, Any] = {
            "name": properties.name,
            "memory_bytes": properties.total_memory,
            "capability": f"{properties.major}.{properties.minor}",
            "cuda": torch.version.cuda,
        }
    except Exception:
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        info["driver"] = pynvml.nvmlSystemGetDriverVersion()
        info["sm_clock_mhz"] = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        info["max_sm_clock_mhz"] = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)
        info["power_limit_w"] = milliwatts_to_watts(pynvml.nvmlDeviceGetEnforcedPowerLimit(handle))
        pynvml.nvmlShutdown()
    except Exception:
        pass
    return info


def fingerprint(device: str = "cpu") -> dict[str, Any]:
    versions = {name: version for name in LIBRARIES if (version := library_version(name)) is not None}
    info: dict[str, Any] = {
        "cpu": cpu_model(),
        "processor": cpu_fingerprint(),
        "cores": os.cpu_count(),
        "machine": host.machine(),
        "os": host.platform(terse=True),
        "python": host.python_version(),
        "libraries": versions,
    }
    if device.startswith("cuda"):
        info["gpu"] = gpu_fingerprint(int(device.partition(":")[2] or 0))
    return info
