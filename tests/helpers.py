"""What several test files share: the CLI run in the test process, fast protocol options, a small
design space for end-to-end runs, a known cost law, reference FLOP counts, the README's blocks.
Test files import from here, never from each other."""

from __future__ import annotations

import faulthandler
import os
import re
import signal
import sqlite3
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode
from typer.testing import CliRunner

from infercast import space
from infercast.cli import app
from infercast.graph import ops
from infercast.store import Measurement, Platform, Store

# measurement options that keep a campaign short where the figures' precision proves nothing
FAST = [
    "--warmup-s",
    "0.1",
    "--round-s",
    "0.05",
    "--min-rounds",
    "3",
    "--cap-s",
    "0.5",
    "--group",
    "2",
    "--no-energy",
    "--no-sentinels",  # tests/test_drift.py takes sentinel passes
]

# learner sizes that train in seconds
SMALL = {"n_estimators": 120, "forest_estimators": 60, "n_folds": 4}

E2E_SPACE = """
name: e2e-resnets
family: carb-resnet
params:
  block: [basic]
  depth: [8, 10, 12, 14]
  width: [0.1, 0.25, 0.4]
  early_downsample: [true]
  input_size: [32]
  batch: [1, 2]
  precision: [fp32]
"""


# a CLI call in the tests that has not returned by then has hung (the slowest takes ~75 s)
CLI_TIMEOUT_S = 300


def infercast(*args: str, isolated: bool = False) -> subprocess.CompletedProcess[str]:
    """``infercast ARGS``: the same command line (typer app, arguments, stdout, stderr, exit code)
    run in this test process, where PyTorch, scikit-learn and the boosters are imported already: a
    new process paid 3–5 s of CPU importing them again on every call. A call that has not returned
    after ``CLI_TIMEOUT_S`` has hung: every thread's stack is printed and the test process ends.
    An exception that escapes the command is in ``stderr`` as a traceback, exit code 1, as a
    subprocess would show it. ``isolated=True`` runs a real subprocess instead, for what only a
    process of its own shows (a connection to a Ray cluster)."""
    if isolated:
        return _infercast_process(*args)
    faulthandler.dump_traceback_later(CLI_TIMEOUT_S, exit=True)
    try:
        result = CliRunner().invoke(app, list(args), catch_exceptions=True)
    finally:
        faulthandler.cancel_dump_traceback_later()
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["infercast", *args], result.exit_code, result.stdout, stderr)


def _infercast_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``infercast ARGS`` as a user runs it: a real subprocess, output captured. One that hangs
    is aborted with every thread's Python stack in the failure (faulthandler on SIGABRT), so a
    rare hang seen only under CI can be read, not just timed."""
    command = [sys.executable, "-m", "infercast", *args]
    env = {**os.environ, "COLUMNS": "200", "PYTHONFAULTHANDLER": "1"}
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as process:
        try:
            out, err = process.communicate(timeout=CLI_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            out, err = process.communicate(timeout=30)
            hung = f"infercast {' '.join(args)} still running after {CLI_TIMEOUT_S} s"
            raise AssertionError(f"{hung}; its threads:\n{err[-12000:]}") from None
    return subprocess.CompletedProcess(command, process.returncode, out, err)


README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def readme_sections() -> dict[str, list[tuple[str, str]]]:
    """The README's fenced blocks, ``(kind, body)``, under each of its ``## `` headings, in order."""
    sections = {}
    for part in re.split(r"^## ", README.read_text(), flags=re.M)[1:]:
        heading, _, text = part.partition("\n")
        sections[heading.strip()] = FENCE.findall(text)
    return sections


def run_readme_blocks(blocks: list[tuple[str, str]], folder: Path) -> int:
    """Run README blocks as written, in order, in ``folder``: ``yaml`` blocks are written to the
    file their first comment names, ``bash`` lines and the ``$`` commands of ``console``
    transcripts run in a shell, ``python`` blocks in a fresh interpreter; ``text`` blocks (what
    cannot run here as written) are skipped. Each must exit 0. Returns how many ran."""
    env = {
        **os.environ,
        "COLUMNS": "200",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        # an empty cache of predictors trained on first use, as a new user has
        "INFERCAST_CACHE": str(folder / "cache"),
    }
    ran = 0
    for kind, body in blocks:
        if kind == "yaml":
            name = body.splitlines()[0].lstrip("# ").split(":")[0].split()[0]
            (folder / name).write_text(body)
            continue
        if kind == "python":
            commands = [[sys.executable, "-c", body]]
        elif kind == "bash":
            commands = [
                line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")
            ]
        elif kind == "console":
            commands = [line[2:] for line in body.splitlines() if line.startswith("$ ")]
        else:
            continue
        for command in commands:
            result = subprocess.run(
                command, shell=isinstance(command, str), cwd=folder, env=env,
                capture_output=True, text=True, timeout=420, check=False,
            )  # fmt: skip
            assert result.returncode == 0, f"{command}\n{result.stderr[-3000:]}"
            ran += 1
    return ran


def stored_rows(db: str | Path) -> int:
    """Measurements + failures in the store ``db`` so far, read without a write lock (0 before the
    writer created it): kill -9 tests kill a writer once it stored something new."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as con:
            return sum(
                con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("measurements", "failures")
            )
    except sqlite3.OperationalError:
        return 0


def cost_law(x: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Latency: FLOPs at 40 GFLOP/s plus 25 µs per op; memory: weights + twice the activation
    peak; each with 2 % log-normal noise, as re-measurement noise would add."""
    latency = x["flops"] / 40e6 + 0.025 * x["n_ops"]
    memory = (x["weight_bytes"] + 2 * x["peak_activation_bytes"]) / 1e6
    return pd.DataFrame(
        {
            "latency_ms": latency * np.exp(rng.normal(0, 0.02, len(x))),
            "peak_memory_mb": memory * np.exp(rng.normal(0, 0.02, len(x))),
        }
    )


def matmul_flops(graph) -> int:
    return sum(n.flops for n in graph.nodes if n.kind in ops.CONV_KINDS | ops.MATMUL_KINDS)


def reference_flops(module: torch.nn.Module, shape: tuple[int, ...]) -> int:
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        module(torch.randn(shape))
    return counter.get_total_flops()


SYNTHETIC_PLATFORM = Platform(
    "ort-cpu", {"threads": 1, "opt_level": "all"}, {"cpu": "synthetic-test-cpu", "cores": 2}
)
NO_SENSOR = "no energy sensor on this host: no RAPL package zone"


def synthetic_measurement(config_id: str, latency_ms: float, memory_mb: float, width: float) -> Measurement:
    """A measurement as the engine stores it, with ``low_ms`` = ``latency_ms`` and a 95 % CI
    half-width of ``width`` (relative)."""
    return Measurement(
        config_id=config_id,
        n=4,
        median_ms=latency_ms * 1.005,
        mean_ms=latency_ms * 1.005,
        low_ms=latency_ms,
        p10_ms=latency_ms * 0.99,
        p90_ms=latency_ms * 1.02,
        p99_ms=latency_ms * 1.02,
        ci_low_ms=latency_ms * (1.005 - width),
        ci_high_ms=latency_ms * (1.005 + width),
        cv=0.01,
        cap_hit=False,
        samples=[latency_ms * f for f in (1.0, 1.02, 0.99, 1.01)],
        peak_memory_bytes=int(memory_mb * 1e6),
        peak_memory_definition="test",
        energy_reason=NO_SENSOR,
    )


def synthetic_store(db: Path, n: int = 40, seed: int = 3, repeats: int = 5) -> dict:
    """A real store of ``n`` sampled carb-resnet configs (their real analytic features) whose
    measurements follow ``cost_law``: campaign ``first``, and the first ``repeats`` configs again
    3 % slower in campaign ``second``. Builds in a second, so tests that need a store to read,
    train on or damage need not profile one."""
    carb = space.get("carb-resnet")
    configs = carb.sample(n, seed=seed, stratified=True).drop_duplicates("id", ignore_index=True)
    rows = carb.config_rows(configs)
    targets = cost_law(carb.features(configs), np.random.default_rng(0))
    with Store(db) as store:
        platform_id = store.add_platform(SYNTHETIC_PLATFORM)
        store.add_configs(rows)
        for i, (row, (_, t)) in enumerate(zip(rows, targets.iterrows(), strict=True)):
            first = synthetic_measurement(row["id"], t["latency_ms"], t["peak_memory_mb"], 0.005 + 0.001 * i)
            store.add_measurement(platform_id, "first", first)
            if i < repeats:
                again = synthetic_measurement(row["id"], t["latency_ms"] * 1.03, t["peak_memory_mb"], 0.01)
                store.add_measurement(platform_id, "second", again)
    latencies = targets["latency_ms"].tolist() + (targets["latency_ms"][:repeats] * 1.03).tolist()
    return {"db": db, "platform_id": platform_id, "n_configs": len(rows), "latencies": latencies}


def conv_kernel_row(model: str, kernel: str, rng: np.random.Generator) -> dict:
    """The op-table row of a random same-padding convolution kernel (shapes and FLOPs, no
    latency), for synthetic op profiles."""
    c_in, c_out = int(rng.choice([16, 32, 64, 128])), int(rng.choice([16, 32, 64, 128]))
    h = int(rng.choice([8, 16, 32, 56]))
    size = int(rng.choice([1, 3]))
    return {
        "model": model,
        "op_type": "conv",
        "kernel": kernel,
        "h_in": h,
        "w_in": h,
        "c_in": c_in,
        "h_out": h,
        "w_out": h,
        "c_out": c_out,
        "kernel_size": size,
        "stride": 1,
        "groups": 1,
        "flops": 2 * c_in * c_out * h * h * size * size,
    }


def blocked_profile(module: torch.nn.Module, input_shape: tuple[int, ...]) -> tuple[list[dict], Any, dict]:
    """ONNX Runtime's kernel rows of ``module`` (profiled at level ``all``), its captured graph
    and the fusion rules of this CPU; the test is skipped where ONNX Runtime blocks nothing."""
    import pytest

    from infercast.graph import capture
    from infercast.measurement.backends.ort_cpu import OrtCpuBackend, onnx_bytes
    from infercast.measurement.ops import profile_ort
    from infercast.models import load_model
    from infercast.predictors.fusion import rules_for

    backend = OrtCpuBackend(opt_level="all")
    machine = backend.machine_facts()
    if not machine.get("nchwc_block"):
        pytest.skip("ONNX Runtime runs no blocked convolutions on this CPU")
    loaded = load_model(module.eval(), input_shape)
    feed = {"input": np.zeros(loaded.input_shape, dtype=np.float32)}
    options = backend.session_options()
    rows = profile_ort(onnx_bytes(loaded), options, backend.providers, feed, 2, blocked=True)
    graph = capture(loaded.module, loaded.input_shape)
    return rows, graph, rules_for("ort-cpu", backend.settings, machine)


class StandardisedConv(nn.Conv2d):
    """Weight standardisation (BiT, NFNet): the kernel is computed each step from the weight."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = nn.functional.batch_norm(
            self.weight.reshape(1, self.out_channels, -1), None, None, training=True
        ).reshape_as(self.weight)
        return nn.functional.conv2d(x, weight, self.bias, self.stride, self.padding, 1, self.groups)
