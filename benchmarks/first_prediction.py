"""A first prediction on a fresh install: `infercast predict --device NAME MODEL` with an empty
user cache, as a new user's first command, for one device of each kind of shipped predictor.

    .venv/bin/python benchmarks/first_prediction.py [--repeats 3]

Each run is a new process with a new empty ``INFERCAST_CACHE``; devices are interleaved round by
round, so a slow phase of the machine falls on all of them; one more run per device on the warm
cache it left. Wall time and peak RSS of each process (``os.wait4``). Records its result in
RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from results import machine, record, stamp

CLI = str(Path(sys.executable).with_name("infercast"))
CASES = (
    ("pixel4/gpu", "pytorchcv:resnet18"),  # op-wise route, shipped trained
    ("s10/1large", "pytorchcv:resnet18"),  # Σ cost × work, fitted on first use into the cache
    ("epyc-2core/ort-cpu", "pytorchcv:resnet18"),  # three routes, two shipped trained
    ("nb201/pixel3", "space:nb201"),  # cascade blend, trained on first use
)


def cpu_model() -> str:
    """The CPU's name: machines of one kind differ by 2× in how fast a process starts."""
    cpuinfo = Path("/proc/cpuinfo")
    names = (
        [
            line.split(":", 1)[1].strip()
            for line in cpuinfo.read_text().splitlines()
            if line.startswith("model name")
        ]
        if cpuinfo.is_file()
        else []
    )
    return names[0] if names else platform.processor() or platform.machine()


def run(device: str, model: str, cache: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one ``infercast predict`` process."""
    # stderr to a file, not a pipe: nothing reads a pipe before wait4, so a full one would hang
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen(
            [CLI, "predict", "--device", device, model, "--json"],
            env={**os.environ, "INFERCAST_CACHE": cache},
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        if status != 0:
            errors.seek(0)
            raise SystemExit(f"{device} {model} failed: {errors.read().decode()}")
    return elapsed, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="cold runs per device")
    args = parser.parse_args()
    cold: dict[str, list[tuple[float, float]]] = {device: [] for device, _ in CASES}
    warm: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as root:
        for repeat in range(args.repeats):
            for device, model in CASES:
                cache = str(Path(root) / f"{device.replace('/', '-')}-{repeat}")
                cold[device].append(run(device, model, cache))
                print(f"{device}: {cold[device][-1][0]:.1f} s", flush=True)
        for device, model in CASES:
            warm[device] = run(device, model, str(Path(root) / f"{device.replace('/', '-')}-0"))
    lines = [
        f"## First prediction on a fresh install ({stamp()})",
        "",
        f"`.venv/bin/python benchmarks/first_prediction.py --repeats {args.repeats}` ({machine()}, "
        f"{cpu_model()}): `infercast predict --device NAME MODEL --json`, "
        "a new process with an empty `INFERCAST_CACHE` each time, devices interleaved; then once more "
        "on the cache the first run left.",
        "",
        "| device | model | empty cache: wall s (min / median / max) | peak RSS MB | warm cache: wall s |",
        "|---|---|---|---|---|",
    ]
    for device, model in CASES:
        walls = np.array([w for w, _ in cold[device]])
        rss = max(r for _, r in cold[device])
        lines.append(
            f"| {device} | {model} | {walls.min():.1f} / {np.median(walls):.1f} / {walls.max():.1f} "
            f"| {rss:.0f} | {warm[device][0]:.1f} |"
        )
    lines.append("")
    record(lines)


if __name__ == "__main__":
    main()
