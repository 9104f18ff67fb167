"""How long a user waits for the command line: a warm `predict --device` of one model, a typo in a
model string, and `screen --n 1000000` of every built-in space a shipped device screens.

    .venv/bin/python benchmarks/cli_speed.py [--repeats 5]

Every command is a new process, as a user runs it. The cache (``INFERCAST_CACHE``) is warmed once
first (the device predictors trained on first use, the captured graphs, the zoos' name lists);
then the commands run interleaved round by round, so a slow phase of the machine falls on all of
them. Wall time of each process; min / median / max over the rounds. Records its result in
RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from first_prediction import cpu_model
from results import machine, record, stamp

CLI = str(Path(sys.executable).with_name("infercast"))
TFLITE = "tests/converted_tflite/converted_fp32.tflite"  # a file a real converter wrote
SCREEN = "screen --n 1000000 --max-latency-ms 50 --space"
# (what, arguments, the exit code it must end with, the goal in seconds)
CASES = (
    ("predict, warm", "predict --device epyc-2core/ort-cpu pytorchcv:resnet18 --json", 0, 2.0),
    ("predict, warm", "predict --device pixel4/gpu timm:mobilenetv3_large_100 --json", 0, 2.0),
    ("predict, warm", "predict --device nb201/pixel3 space:nb201 --json", 0, 2.0),
    ("predict, warm", f"predict --device pixel4/gpu {TFLITE} --json", 0, 2.0),
    ("predict, warm", "predict --device rtx4090/torch-amp timm:resnet50 --batch-size 256 --json", 0, 2.0),
    ("typo", "predict --device epyc-2core/ort-cpu pytorchcv:resnt18", 2, 1.0),
    ("typo", "predict --device pixel4/gpu timm:mobilenetv3_larg_100", 2, 1.0),
    ("typo", "inspect torchvision:resnt50", 2, 1.0),
    ("screen 1M", f"{SCREEN} carb-resnet --device epyc-2core/ort-cpu", 0, 10.0),
    ("screen 1M", f"{SCREEN} carb-resnet --device pixel4/1large", 0, 10.0),
    ("screen 1M", f"{SCREEN} mobile-nas --device pixel4/1large", 0, 10.0),
    ("screen 1M", f"{SCREEN} nb201 --device nb201/pixel3", 0, 10.0),
)


def run(arguments: str, code: int, cache: str) -> float:
    """Wall seconds of one ``infercast`` process, which must exit with ``code``."""
    started = time.perf_counter()
    done = subprocess.run(
        [CLI, *arguments.split()],
        env={**os.environ, "INFERCAST_CACHE": cache},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != code:
        raise SystemExit(f"infercast {arguments}: exit {done.returncode}, expected {code}: {done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds")
    args = parser.parse_args()
    walls: dict[str, list[float]] = {arguments: [] for _, arguments, _, _ in CASES}
    with tempfile.TemporaryDirectory() as cache:
        first = {arguments: run(arguments, code, cache) for _, arguments, code, _ in CASES}
        for repeat in range(args.repeats):
            for _, arguments, code, _ in CASES:
                walls[arguments].append(run(arguments, code, cache))
            print(f"round {repeat + 1} of {args.repeats}", flush=True)
    lines = [
        f"## Command-line speed ({stamp()})",
        "",
        f"`.venv/bin/python benchmarks/cli_speed.py --repeats {args.repeats}` ({machine()}, {cpu_model()}): "
        "each command a new process; the cache warmed by one run of each first (its wall time in the "
        "first column: a new user's first command of that kind), then the commands interleaved.",
        "",
        "| what | command | first run s | warm: wall s (min / median / max) | goal | met |",
        "|---|---|---|---|---|---|",
    ]
    for what, arguments, _, goal in CASES:
        seconds = np.array(walls[arguments])
        met = "yes" if np.median(seconds) <= goal else "no"
        lines.append(
            f"| {what} | `infercast {arguments}` | {first[arguments]:.2f} | {seconds.min():.2f} / "
            f"{np.median(seconds):.2f} / {seconds.max():.2f} | ≤ {goal:g} s | {met} |"
        )
    lines.append("")
    record(lines)


if __name__ == "__main__":
    main()
