"""Data-movement kernels (layout reorders, a split's copies): what ONNX Runtime's profiler reports
of them, what ``predictors.movement`` works out from a captured graph, and how the op-wise route
prices them (or, trained without them, leaves them to its overhead model as before)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from infercast.graph.ops import MOVEMENT_TYPES, movement_row
from infercast.predictors.fusion import rules_for
from infercast.predictors.movement import executed_kernels, movement_table
from infercast.predictors.opwise import OpWise

from .helpers import blocked_profile, conv_kernel_row


class _SplitBlocks(torch.nn.Module):
    """ShuffleNetV2's pattern without its shuffle: split the channels, convolve one half, concat
    (ONNX Runtime splits and concatenates in the plain layout between blocked convolutions), a
    max pool on channels that fill no whole block, and a swish at the end."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 44, 3, padding=1)
        self.branches = torch.nn.ModuleList(torch.nn.Conv2d(22, 22, 1) for _ in range(2))
        self.head = torch.nn.Conv2d(44, 32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.max_pool2d(torch.relu(self.stem(x)), 2)
        for branch in self.branches:
            a, b = x.chunk(2, dim=1)
            x = torch.cat([a, torch.relu(branch(b))], dim=1)
        # a swish ONNX Runtime runs blocked renames its output: the reorder out writes the original
        y = self.head(x)
        return y * torch.sigmoid(y)


def _moved(table: pd.DataFrame) -> list[tuple]:
    table = table[table["op_type"].isin(list(MOVEMENT_TYPES))]
    return sorted(zip(table["op_type"], table["c_in"].astype(int), table["bytes"].astype(int), strict=True))


def test_the_reorders_and_splits_worked_out_are_those_onnx_runtime_ran() -> None:
    rows, graph, rules = blocked_profile(_SplitBlocks(), (1, 3, 32, 32))
    profiled = pd.DataFrame(rows)
    predicted = movement_table(graph, rules, model="m")
    assert set(predicted["op_type"]) == {"reorder", "split"}
    assert _moved(profiled) == _moved(predicted)
    assert (profiled.loc[profiled["op_type"].isin(list(MOVEMENT_TYPES)), "latency_ms"] > 0).all()
    # PyTorch takes views: no movement kernels for its backends
    assert movement_table(graph, rules_for("torch-cpu")).empty
    # the movement kernels come after the graph's own, numbered apart from them
    whole = executed_kernels(graph, rules, model="m")
    own = whole[~whole["op_type"].isin(list(MOVEMENT_TYPES))]
    assert len(whole) == len(own) + len(predicted)
    assert not set(own["kernel"]) & set(predicted["kernel"])
    # the max pool on 44 channels (no whole block of 8 or 16) ran in the plain layout, and both say so

    def pools(table: pd.DataFrame) -> list[str]:
        return list(table.loc[table["op_type"] == "pool_max", "algorithm"].fillna(""))

    assert pools(profiled) == pools(whole) == ["nchw"]


class _ShuffleBlocks(torch.nn.Module):
    """ShuffleNet's and IGCV3's channel shuffle between blocked convolutions: a view into groups,
    a transpose and a view back, which ONNX Runtime runs in the plain layout — a reorder out of
    the blocked layout before it and one back into it after."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Conv2d(3, 32, 3, padding=1)
        self.second = torch.nn.Conv2d(32, 32, 3, padding=1, groups=32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.first(x))
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        return self.second(y)


def test_a_channel_shuffle_between_blocked_convolutions_is_reordered_out_and_back() -> None:
    rows, graph, rules = blocked_profile(_ShuffleBlocks(), (1, 3, 16, 16))
    profiled = pd.DataFrame(rows)
    predicted = movement_table(graph, rules, model="m")
    assert _moved(profiled) == _moved(predicted)
    # out of the blocked layout before the shuffle, back into it for the depthwise convolution
    reorders = predicted[predicted["op_type"] == "reorder"]
    assert len(reorders) == 3 and set(reorders["c_in"]) == {32} and set(reorders["h_in"]) == {16}


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


def test_a_store_profiled_before_movement_rows_were_named_gets_them_named(tmp_path, monkeypatch) -> None:
    """tools/movement_rows.py: rows an earlier infercast stored as ``other`` without shapes, and
    pools it did not say ran in the plain layout, take the type, shapes, bytes and algorithm a
    profile now gives them, their measured latency kept."""
    import json
    import sqlite3

    from tools import movement_rows

    from infercast.measurement import measure_model_strings
    from infercast.measurement.backends.ort_cpu import nchwc_block
    from infercast.measurement.protocol import Protocol

    if not nchwc_block():
        pytest.skip("ONNX Runtime runs no blocked convolutions on this CPU: no reorders to name")
    db = tmp_path / "runs.db"
    models = [  # a split's copies; a blocked convolution between layout reorders; a plain pool
        "space:kernels?act=none&batch=1&cin=40&cout=40&groups=2&kernel=1&op=split&side=14&stride=1",
        "space:kernels?act=relu&batch=1&cin=32&cout=48&groups=1&kernel=3&op=conv&side=14&stride=1",
        "space:kernels?act=none&batch=1&cin=44&cout=44&groups=1&kernel=3&op=pool_max&side=14&stride=2",
    ]
    fast = Protocol(warmup_s=0.1, round_s=0.05, min_rounds=3, max_rounds=6, cap_s=1.0, timeout_s=120, group=3)
    for result in measure_model_strings(models, "ort-cpu", fast, db=db, op_runs=2, energy=False):
        assert "failure" not in result, result
    with sqlite3.connect(db) as connection:
        stored = {i: json.loads(r) for i, r in connection.execute("SELECT id, row FROM op_measurements")}
        named = {i: r for i, r in stored.items() if r["op_type"] in MOVEMENT_TYPES}
        assert {r["op_type"] for r in named.values()} == {"reorder", "split"}
        for i, row in named.items():  # as an earlier infercast stored them
            old = {
                k: v for k, v in row.items() if k not in ("h_in", "w_in", "c_in", "h_out", "w_out", "c_out")
            }
            old.update(op_type="other", bytes=0)
            connection.execute("UPDATE op_measurements SET row = ? WHERE id = ?", (json.dumps(old), i))
        [(i, pool)] = [(i, r) for i, r in stored.items() if r["op_type"] == "pool_max"]
        assert pool.get("algorithm") == "nchw"
        old = {k: v for k, v in pool.items() if k != "algorithm"}
        connection.execute("UPDATE op_measurements SET row = ? WHERE id = ?", (json.dumps(old), i))
    monkeypatch.setattr("sys.argv", ["movement_rows.py", "--db", str(db)])
    movement_rows.main()
    with sqlite3.connect(db) as connection:
        again = {i: json.loads(r) for i, r in connection.execute("SELECT id, row FROM op_measurements")}
    assert again == stored
