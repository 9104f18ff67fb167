"""How much memory a request needs, checked before it is attempted: a request that cannot fit is
refused with what it would need and what fits, instead of a ``MemoryError`` minutes later."""

from __future__ import annotations

import os
from pathlib import Path

from infercast.errors import InfercastError


class TooLarge(InfercastError):
    """A request that needs more memory than this machine has."""


def available_memory() -> int:
    """Bytes of memory available to a new allocation (Linux ``MemAvailable``; elsewhere the
    physical memory)."""
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def _gb(value: float) -> str:
    return f"{value / 1e9:,.1f} GB"


def check_fits(what: str, count: int, bytes_each: float, unit: str = "") -> None:
    """Refuse ``count`` items of ``bytes_each`` when together they exceed the available memory."""
    need = count * bytes_each
    free = available_memory()
    if need > free:
        fit = int(free // bytes_each)
        raise TooLarge(
            f"{what}: {count:,}{unit} would need about {_gb(need)} of memory; this machine has "
            f"{_gb(free)} available, enough for about {fit:,}{unit}"
        )
