"""Peak memory of ONNX Runtime CPU sessions from the graph: the BFC arena's arithmetic, the
arena worked out for real models against what a real session's log says it reserved, and the
fitted rest (``HostMemory``)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import infercast
from infercast.measurement.backends.ort_cpu import nchwc_block
from infercast.predictors.errors import PredictorError
from infercast.predictors.host_memory import HostMemory, memory_features, ort_rules
from infercast.predictors.ort_memory import MIB, Arena, arena_bytes, pattern_bytes
from infercast.units import BYTES_PER_MB as MB

# a child process: the session's verbose log names every region the arena reserves
REGIONS = r"""
import io, os, re, sys, tempfile
import numpy as np, onnxruntime as ort
log = tempfile.TemporaryFile()
os.dup2(log.fileno(), 2)
ort.set_default_logger_severity(0)
options = ort.SessionOptions()
options.intra_op_num_threads = 1
options.log_severity_level = 0
session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
feed = np.zeros([int(s) for s in sys.argv[2].split("x")], np.float32)
for _ in range(3):
    session.run(None, {session.get_inputs()[0].name: feed})
log.seek(0)
print(sum(int(n) for n in re.findall(rb"Extended allocation by (\d+) bytes", log.read())))
"""


class _Residual(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.ReLU())
        self.body = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU())
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        return self.head(y + self.body(y))


MODELS = {
    "plain": (nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3)), 160),
    "residual": (_Residual(48), 112),
    "depthwise": (
        nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.ReLU6()),
        128,
    ),
}


def test_the_arena_grows_by_doubling_regions_and_splits_only_large_free_chunks() -> None:
    arena = Arena()
    arena.alloc("a", 100)  # the first region: 1 MiB
    arena.alloc("b", 3 * MIB + 1)  # 2 MiB would not hold it: a 4 MiB region
    assert arena.regions == [MIB, 4 * MIB]
    arena.release("b")
    arena.alloc("c", 3 * MIB)  # the freed 4 MiB is less than twice 3 MiB: taken whole, not split
    assert arena.used["c"][2] == 4 * MIB
    arena.alloc("d", 300_000)  # fits in the first region's rest
    arena.alloc("e", 5 * MIB)  # nothing free that large: the next region, 8 MiB
    assert arena.regions == [MIB, 4 * MIB, 8 * MIB]
    arena.release("d"), arena.release("a")  # neighbours merge into one free chunk again
    assert (0, 0, MIB) in arena.free


def test_the_memory_pattern_puts_a_buffer_in_the_gap_that_wastes_least() -> None:
    events = [("alloc", 0, 100), ("alloc", 1, 300), ("alloc", 2, 50), ("free", 0, 100), ("free", 2, 50)]
    # buffer 3 (80) fits the first gap (100) before the end of the block: the peak stays 450
    assert pattern_bytes([*events, ("alloc", 3, 80)]) == 450
    assert pattern_bytes([*events, ("alloc", 3, 200)]) == 600  # fits no gap: after buffer 1
    assert pattern_bytes([*events, ("output", 3, 10**6)]) == 450  # outputs live apart


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_arena_worked_out_from_the_graph_is_what_a_real_session_reserves(name, tmp_path) -> None:
    module, side = MODELS[name]
    shape = (1, 3, side, side)
    path = tmp_path / f"{name}.onnx"
    torch.onnx.export(module.eval(), torch.zeros(shape), str(path), dynamo=False)
    graph = infercast.capture(module, input_shape=shape)
    shown = subprocess.run(
        [sys.executable, "-c", REGIONS, str(path), "x".join(map(str, shape))],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert int(shown.stdout) == arena_bytes(graph, ort_rules(nchwc_block()))


def _features(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "weights": rng.uniform(1, 100, n) * MB,
            "arena": rng.uniform(1, 32, n) * MB,
            "input": np.full(n, 602_112),
            "kernels": rng.integers(1, 200, n),
        }
    )


def test_the_fitted_rest_is_a_line_in_the_kernels_with_an_interval_around_it() -> None:
    features = _features(200)
    noise = np.random.default_rng(1).normal(0, 0.1, len(features))
    rest = 1.5 + 0.01 * features["kernels"] + noise  # MB
    peak = features[["weights", "arena", "input"]].sum(axis=1) + rest * MB
    model = HostMemory().fit(features, peak)
    intercept, slope = model.lines_["median"]
    assert intercept == pytest.approx(1.5, abs=0.05) and slope == pytest.approx(0.01, abs=0.001)
    predicted = model.predict(_features(50, seed=2))
    assert (predicted["peak_memory_mb_low"] < predicted["peak_memory_mb"]).all()
    assert (predicted["peak_memory_mb"] < predicted["peak_memory_mb_high"]).all()
    assert model.score(features, peak) > 0.99
    loaded = HostMemory.from_json(model.to_json({"source": "a test"}))
    assert loaded.provenance_ == {"source": "a test"}
    pd.testing.assert_frame_equal(loaded.predict(features), model.predict(features))


def test_bad_input_is_named() -> None:
    features = _features(5)
    with pytest.raises(PredictorError, match="not fitted"):
        HostMemory().predict(features)
    with pytest.raises(PredictorError, match="alpha=-1"):
        HostMemory(alpha=-1).fit(features, np.ones(5))
    with pytest.raises(PredictorError, match="5 networks and 4 peaks"):
        HostMemory().fit(features, np.ones(4))
    with pytest.raises(PredictorError, match="lack kernels"):
        HostMemory().fit(features.drop(columns="kernels"), np.ones(5))
    with pytest.raises(PredictorError, match="not a positive number"):
        HostMemory().fit(features, [1, 2, 3, 4, -1])
    with pytest.raises(PredictorError, match="format"):
        HostMemory.from_json(json.dumps({"format": "other"}))


def test_a_graphs_features_hold_its_input_and_its_blocked_weights() -> None:
    module = nn.Sequential(nn.Conv2d(20, 20, 1, bias=False))
    graph = infercast.capture(module, input_shape=(2, 20, 8, 8))
    plain, blocked = memory_features([graph, graph], 0).iloc[0], memory_features([graph], 16).iloc[0]
    assert plain["input"] == 2 * 20 * 8 * 8 * 4 and plain["kernels"] == 1
    # 20 channels padded to two blocks of 16 each way, and the bias ONNX Runtime adds
    assert plain["weights"] == (20 * 20 + 20) * 4 and blocked["weights"] == (32 * 32 + 32) * 4
