"""Shared by the benchmark scripts: where their figures go.

``benchmarks/RESULTS.md`` holds the current figures: one section per benchmark, the last run of its
script, marked with the script's name. ``record`` replaces that section when the script runs again
and appends the run, dated, to ``benchmarks/history/<script>.md``, which keeps every run.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
HISTORY = HERE / "history"
HEADER = """# Benchmark results

The current figure of each benchmark: one section per benchmark script, its last run, with the
command that produced it and the machine. Running a benchmark again replaces its section
(`benchmarks/results.py`); every run, dated, stays in `benchmarks/history/<script>.md`.
"""
_MARK = re.compile(r"^<!-- benchmark: (?P<name>[\w.-]+) -->$", re.MULTILINE)


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


def sections(text: str) -> dict[str, str]:
    """RESULTS.md's sections by benchmark name, in the file's order."""
    marks = list(_MARK.finditer(text))
    return {
        mark.group("name"): text[
            mark.end() : marks[i + 1].start() if i + 1 < len(marks) else len(text)
        ].strip()
        for i, mark in enumerate(marks)
    }


def render(current: dict[str, str]) -> str:
    body = "\n\n".join(f"<!-- benchmark: {name} -->\n{section}" for name, section in current.items())
    return f"{HEADER}\n{body}\n"


def record(lines: list[str], name: str | None = None) -> None:
    """Make ``lines`` (a section: its ``## title (date)`` heading first) the current figures of the
    benchmark ``name`` (by default the running script's) and add them to its history; echo them."""
    name = name or Path(sys.argv[0]).stem
    section = "\n".join(lines).strip()
    current = sections(RESULTS.read_text()) if RESULTS.is_file() else {}
    current[name] = section
    RESULTS.write_text(render(current))
    HISTORY.mkdir(exist_ok=True)
    history = HISTORY / f"{name}.md"
    before = history.read_text() if history.is_file() else f"# {name}: every run\n"
    history.write_text(f"{before.rstrip()}\n\n{section}\n")
    print(section)
