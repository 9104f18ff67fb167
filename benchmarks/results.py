"""Shared by the benchmark scripts: append a section to benchmarks/RESULTS.md and echo it."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import numpy as np


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def family_table(families: np.ndarray, truth: np.ndarray, predictions: dict[str, np.ndarray]) -> list[str]:
    """A Markdown table of the median |error| of each prediction per family."""
    lines = ["| family | n | " + " | ".join(predictions) + " |", "|---|---|" + "---|" * len(predictions)]
    for family in sorted(set(families)):
        rows = families == family
        cells = [
            f"{np.median(np.abs(v[rows] - truth[rows]) / truth[rows]):.1%}" for v in predictions.values()
        ]
        lines.append(f"| {family} | {int(rows.sum())} | " + " | ".join(cells) + " |")
    return lines


def append(lines: list[str]) -> None:
    with Path(__file__).with_name("RESULTS.md").open("a") as handle:
        handle.write("\n".join(lines) + "\n")
    print("\n".join(lines))
