"""What several test files share: the CLI as a subprocess, fast protocol options, a small design
space for end-to-end runs, a known cost law, reference FLOP counts. Test files import from here,
never from each other."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import torch
from torch.utils.flop_counter import FlopCounterMode

from infercast.graph import ops

# measurement options that keep a campaign short where the figures' precision proves nothing
FAST = ["--round-s", "0.05", "--min-rounds", "3", "--cap-s", "0.5", "--group", "2", "--no-energy"]

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


def infercast(*args: str) -> subprocess.CompletedProcess[str]:
    """``infercast ARGS`` as a user runs it: a real subprocess, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "infercast", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


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
