"""Shared by the benchmark scripts: append a section to benchmarks/RESULTS.md and echo it."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def append(lines: list[str]) -> None:
    with Path(__file__).with_name("RESULTS.md").open("a") as handle:
        handle.write("\n".join(lines) + "\n")
    print("\n".join(lines))
