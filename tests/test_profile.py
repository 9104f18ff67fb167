"""Profiling campaigns into a store: resume, and kill -9 at random moments."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time

import pytest

from infercast.measurement import CampaignSpec
from infercast.store import Store

from .helpers import FAST, infercast, stored_rows

TINY_SPACE = """
name: tiny-resnets
family: carb-resnet
params:
  block: [basic]
  depth: [8, 10, 12]
  width: [0.1, 0.25]
  early_downsample: [true]
  input_size: [32]
  batch: [1, 2]
  precision: [fp32]
"""


TINY_KERNELS = """
name: tiny-kernels
family: kernels
params:
  op: [conv, dwconv, add, pool_max, concat]
  side: {min: 4, max: 16}
  cin: {min: 8, max: 32}
  cout: {min: 8, max: 32}
"""


@pytest.fixture
def space_file(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_SPACE)
    return str(path)


@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "tiny-kernels.yaml"
    path.write_text(TINY_KERNELS)
    return str(path)


def profile_args(space: str, db: str, n: int, *extra: str) -> list[str]:
    return ["profile", "--space", space, "--n", str(n), "--db", db, *FAST, *extra]


def test_profile_then_resume(space_file, tmp_path) -> None:
    db = str(tmp_path / "runs.db")
    first = infercast(*profile_args(space_file, db, 6), "--json")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["done"] + summary["failed"] == summary["todo"] > 0 and summary["skipped"] == 0
    second = infercast(*profile_args(space_file, db, 6), "--json")
    again = json.loads(second.stdout)
    assert again["todo"] == 0 and again["skipped"] == summary["todo"]
    with Store(db) as store:
        frame = store.measurements()
        assert len(frame) == summary["done"] and frame["config_id"].is_unique
        assert frame["features"].map(json.loads).map(lambda f: f["flops"] > 0).all()
        assert store.platforms().loc[0, "settings"] == {"threads": 1, "device": "cpu", "opt_level": "all"}


def test_adaptive_kernel_campaign_draws_its_second_half_around_the_worst_kernels(
    kernel_file, tmp_path
) -> None:
    db = str(tmp_path / "adaptive.db")
    args = profile_args(kernel_file, db, 8, "--kernels", "--adaptive", "--op-runs", "2", "--no-sentinels")
    done = infercast(*args, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    adaptive = summary["adaptive"]
    # half drawn from real shapes, the other half around the quarter of them predicted worst
    assert adaptive["first_half"] == 4 and 1 <= adaptive["second_half"] <= 4
    assert len(adaptive["drawn_around"]) == 1
    assert adaptive["hard_kernels_min_abs_log_error"] >= adaptive["first_half_median_abs_log_error"]
    with Store(db) as store:
        measured = store.measurements()
    assert summary["done"] + summary["failed"] == adaptive["first_half"] + adaptive["second_half"]
    assert measured["config_id"].is_unique and len(measured) == summary["done"]
    origin = adaptive["drawn_around"][0]
    first_rows, _ = CampaignSpec(kernel_file, n=4, stratified=False).rows()
    second = measured[~measured["config_id"].isin({r["id"] for r in first_rows})]
    assert len(second) >= 1 and second["model"].str.contains(f"op={origin['op']}&").all()
    # the second half is planned again from the same measurements: a rerun has nothing left to do
    again = infercast(*args, "--json")
    assert again.returncode == 0, again.stderr[-3000:]
    rerun = json.loads(again.stdout)
    assert rerun["done"] == 0 and rerun["skipped"] == summary["done"]
    text = infercast(*args)
    assert "around the 1 the kernel regressors predicted worst" in " ".join(text.stdout.split()), text.stderr
    wrong = infercast(*profile_args(kernel_file, db, 8, "--adaptive"))
    assert wrong.returncode == 2 and "--adaptive" in wrong.stderr


@pytest.mark.parametrize("kind", ["design space", "kernel campaign"])
def test_kill_9_campaign_resumes_without_loss_or_duplicates(kind, space_file, kernel_file, tmp_path) -> None:
    db = str(tmp_path / "killed.db")
    # the kernel campaign profiles each network's ops too: fewer, without sentinel passes
    space, n, kills, extra = (
        (space_file, 10, 5, ())
        if kind == "design space"
        else (kernel_file, 8, 4, ("--kernels", "--op-runs", "2", "--no-sentinels"))
    )
    rng = random.Random(1)
    counts = []
    for _ in range(kills):
        before = counts[-1] if counts else 0
        process = subprocess.Popen(
            [sys.executable, "-m", "infercast", *profile_args(space, db, n, *extra)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # kill once this run has stored something new, at a random moment of the configs after it:
        # a fixed delay either missed the campaign on a fast machine or came before any result
        deadline = time.monotonic() + 120
        while process.poll() is None and stored_rows(db) <= before and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 0.8))
        finished = process.poll() is not None
        process.send_signal(signal.SIGKILL)
        process.wait()
        with Store(db) as store:
            frame = store.measurements()
            assert frame["config_id"].is_unique  # never stored twice
            counts.append(len(frame) + len(store.failures()))
        if finished:
            break
    assert counts == sorted(counts)  # what was committed stays
    final = infercast(*profile_args(space, db, n, *extra), "--json")
    assert final.returncode == 0, final.stderr
    summary = json.loads(final.stdout)
    with Store(db) as store:
        total = len(store.measurements()) + len(store.failures())
        assert store.measurements()["config_id"].is_unique
    assert total == summary["skipped"] + summary["todo"]  # every sampled config measured or failed
    assert len(set(counts)) > 2 and counts[0] < total, counts  # kills landed mid-campaign, at several points
    if kind == "kernel campaign":
        with Store(db) as store:
            measured = store.measurements()
            assert (measured["space"] == "kernels").all()
            # every measured kernel network has its op rows, and none twice
            ops = store.op_measurements()
            assert set(measured["config_id"]) <= set(ops["config_id"])
