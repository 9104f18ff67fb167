"""Data-movement kernels (layout reorders, a split's copies): what ONNX Runtime's profiler reports
of them, what ``predictors.movement`` works out from a captured graph, and how the op-wise route
prices them (or, trained without them, leaves them to its overhead model as before)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from infercast.graph import capture
from infercast.graph.ops import MOVEMENT_TYPES, movement_row
from infercast.predictors.fusion import rules_for
from infercast.predictors.movement import executed_kernels, movement_table
from infercast.predictors.opwise import OpWise

from .helpers import conv_kernel_row


class _SplitBlocks(torch.nn.Module):
    """ShuffleNetV2's pattern without its shuffle: split the channels, convolve one half, concat
    (ONNX Runtime splits and concatenates in the plain layout between blocked convolutions), and
    a max pool on channels that fill no whole block."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 40, 3, padding=1)
        self.branches = torch.nn.ModuleList(torch.nn.Conv2d(20, 20, 1) for _ in range(2))
        self.head = torch.nn.Conv2d(40, 32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.max_pool2d(torch.relu(self.stem(x)), 2)
        for branch in self.branches:
            a, b = x.chunk(2, dim=1)
            x = torch.cat([a, torch.relu(branch(b))], dim=1)
        return self.head(x)


def _moved(table: pd.DataFrame) -> list[tuple]:
    table = table[table["op_type"].isin(list(MOVEMENT_TYPES))]
    return sorted(zip(table["op_type"], table["c_in"].astype(int), table["bytes"].astype(int), strict=True))


def test_the_reorders_and_splits_worked_out_are_those_onnx_runtime_ran() -> None:
    from infercast.measurement.backends.ort_cpu import OrtCpuBackend, onnx_bytes
    from infercast.measurement.ops import profile_ort
    from infercast.models import load_model

    backend = OrtCpuBackend(opt_level="all")
    machine = backend.machine_facts()
    if not machine.get("nchwc_block"):
        pytest.skip("ONNX Runtime runs no blocked convolutions on this CPU")
    loaded = load_model(_SplitBlocks().eval(), (1, 3, 32, 32))
    feed = {"input": np.zeros(loaded.input_shape, dtype=np.float32)}
    profiled = pd.DataFrame(
        profile_ort(onnx_bytes(loaded), backend.session_options(), backend.providers, feed, 2, blocked=True)
    )
    graph = capture(loaded.module, loaded.input_shape)
    predicted = movement_table(graph, rules_for("ort-cpu", backend.settings, machine), model="m")
    assert set(predicted["op_type"]) == {"reorder", "split"}
    assert _moved(profiled) == _moved(predicted)
    assert (profiled.loc[profiled["op_type"].isin(list(MOVEMENT_TYPES)), "latency_ms"] > 0).all()
    # PyTorch takes views: no movement kernels for its backends
    assert movement_table(graph, rules_for("torch-cpu")).empty
    # the movement kernels come after the graph's own, numbered apart from them
    whole = executed_kernels(graph, rules_for("ort-cpu", backend.settings, machine), model="m")
    own = whole[~whole["op_type"].isin(list(MOVEMENT_TYPES))]
    assert len(whole) == len(own) + len(predicted)
    assert not set(own["kernel"]) & set(predicted["kernel"])


def _tables(n_models: int, with_movement: bool, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Models of convolutions and (optionally) a reorder of each one's output, whose time is 3 µs
    + the bytes moved at 10 GB/s."""
    rng = np.random.default_rng(seed)
    rows, e2e = [], []
    for m in range(n_models):
        for k in range(int(rng.integers(3, 8))):
            conv = conv_kernel_row(f"m{m}", str(k), rng)
            conv.update(n_ops=1, bytes=conv["h_out"] ** 2 * (conv["c_in"] + conv["c_out"]) * 4)
            conv["latency_ms"] = conv["flops"] / 2e10 * 1e3 + 0.002
            rows.append(conv)
            if with_movement:
                output = (1, conv["c_out"], conv["h_out"], conv["w_out"])
                reorder = {**movement_row("reorder", output, [output], 4), "model": f"m{m}", "n_ops": 1}
                reorder.update(kernel=f"r{k}", latency_ms=0.003 + reorder["bytes"] / 1e10 * 1e3)
                rows.append(reorder)
        total = sum(row["latency_ms"] for row in rows if row["model"] == f"m{m}")
        e2e.append({"model": f"m{m}", "latency_ms": total * 1.05 + 0.01})
    return pd.DataFrame(rows), pd.DataFrame(e2e)


def test_a_route_trained_with_reorders_prices_them_and_one_trained_without_leaves_them_out() -> None:
    ops, e2e = _tables(40, with_movement=True)
    priced = OpWise(n_estimators=30, kernel_learner="xgboost", overhead="ratio", n_jobs=1).fit(ops, e2e)
    assert "reorder" in priced.models_
    kernels = priced.predict_kernels(ops.drop(columns="latency_ms"))
    assert (kernels["op_type"] == "reorder").sum() == (ops["op_type"] == "reorder").sum()
    with_reorders = priced.predict(ops.drop(columns="latency_ms"))["latency_ms"]
    convolutions_only = priced.predict(ops[ops["op_type"] == "conv"].drop(columns="latency_ms"))["latency_ms"]
    assert (with_reorders > convolutions_only).all()

    plain_ops, plain_e2e = _tables(40, with_movement=False)
    unpriced = OpWise(n_estimators=30, kernel_learner="xgboost", overhead="ratio", n_jobs=1).fit(
        plain_ops, plain_e2e
    )
    assert "reorder" not in unpriced.models_
    pd.testing.assert_frame_equal(
        unpriced.predict(ops.drop(columns="latency_ms")),
        unpriced.predict(ops[ops["op_type"] == "conv"].drop(columns="latency_ms")),
    )
    # too few reorder rows to learn from (under min_rows): fitted as if there were none
    few = ops[(ops["op_type"] == "conv") | (ops.index < 60)]
    sparse = OpWise(n_estimators=30, kernel_learner="xgboost", overhead="ratio", n_jobs=1, min_rows=1000)
    assert "reorder" not in sparse.fit(few, e2e).models_
