"""``infercast calibrate`` and the ``local`` device: the plan's order, the per-kind fit, a kernel
mix scaled by its kinds' factors, the refit on design-space configs (measured on a machine unlike
the host's), and a real calibration on a tiny budget — killed with SIGKILL mid-way, resumed, used
by ``predict --device local``, reused, and gone for another machine."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from torch import nn

from infercast import machine as cpu
from infercast.api import calibrating
from infercast.models.guarded import capture_model
from infercast.predictors.devices import device_info, hosts, local, local_networks
from tests.helpers import infercast as run_cli

HOST = "epyc-2core/ort-cpu"
CPUS = Path(__file__).parent / "cpus"


def test_the_plan_takes_every_kind_early_and_spreads_each_kinds_shapes() -> None:
    order = local.plan(HOST, 8)
    assert len(order) == len(hosts.kernel_networks(HOST)) and order["model"].is_unique
    # the first round: a few dense convolutions, then one network of every other kind
    first = [local.KIND_ORDER[0]] * local.SLOTS[local.KIND_ORDER[0]] + list(local.KIND_ORDER[1:])
    assert list(order["kind"][: len(first)]) == first
    # each kind's first network is its median latency, not its fastest
    convs = order[order["kind"] == "conv"]["there_ms"]
    assert convs.iloc[0] == pytest.approx(np.sort(convs)[len(convs) // 2])
    assert local._spread(7) == [3, 1, 5, 0, 2, 4, 6] and local._spread(0) == []


def test_each_kind_gets_its_own_factor_pulled_towards_the_overall_one() -> None:
    order = local.plan(HOST, 8).head(70)
    ratio = order["kind"].map({"conv": 2.0, "dwconv": 0.5}).fillna(1.0)
    measured = pd.DataFrame({"model": order["model"], "here_ms": order["there_ms"] * ratio})
    fitted = local.fit(measured, HOST, threads=1, seconds=1.0, nchwc_block=8)
    assert fitted.n == 70 and fitted.factor == pytest.approx(1.0)
    share = order[order["kind"] == "conv"]["there_ms"] / order[order["kind"] == "conv"]["there_ms"].sum()
    n_conv = 1 / (share**2).sum()  # the networks weighted by their time there: fewer in effect
    assert n_conv < fitted.kinds["conv"]["n"] == len(share)
    # the geometric mean of n networks at 2× and PRIOR networks' weight at the overall 1×
    assert fitted.kinds["conv"]["factor"] == pytest.approx(2 ** (n_conv / (n_conv + local.PRIOR)))
    assert fitted.kinds["dwconv"]["factor"] < 0.7 and fitted.kinds["pool"]["factor"] == pytest.approx(1.0)
    # identical ratios within a kind leave no spread to be unsure of
    assert fitted.kinds["gconv"]["se"] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(Exception, match="no kernel network was measured"):
        local.fit(measured.head(0), HOST, threads=1, seconds=0.0, nchwc_block=8)


def test_a_convolution_laid_out_otherwise_here_is_a_kind_of_its_own() -> None:
    import infercast

    # groups of 8 channels fill a block of 8 (the host's) but not one of 16: plain here
    assert local.layout_class("gconv", 64, 64, 8, 8, 16) == "gconv→plain"
    assert local.layout_class("gconv", 64, 64, 4, 8, 16) == "gconv"  # 16 per group: blocked on both
    assert (
        local.layout_class("conv", 64, 64, 1, 8, 8) == "conv"
        and local.layout_class("pool", 8, 8, 1, 8, 16) == "pool"
    )
    order = local.plan(HOST, 16)
    assert order.head(20)["kind"].str.contains("gconv→plain").any()
    ratio = order["kind"].map({"gconv→plain": 3.0}).fillna(1.0)
    measured = pd.DataFrame({"model": order["model"], "here_ms": order["there_ms"] * ratio})
    fitted = local.fit(measured, HOST, threads=1, seconds=1.0, nchwc_block=16)
    assert fitted.kinds["gconv→plain"]["factor"] > 2.5 and fitted.kinds["gconv"]["factor"] == pytest.approx(
        1.0
    )
    device = local.LocalDevice(fitted)
    grouped = [nn.Sequential(nn.Conv2d(64, 64, 3, padding=1, groups=g)) for g in (8, 4)]
    graphs = [infercast.capture(m, input_shape=(1, 64, 28, 28)) for m in grouped]
    (plain, blocked), _ = device.mix_factors(graphs)
    assert plain > 2 and blocked == pytest.approx(1.0, abs=0.05)


def test_a_graph_is_scaled_by_the_factors_of_its_kernel_mix() -> None:
    import infercast

    kinds = {kind: {"factor": 1.0, "n": 10, "se": 0.0} for kind in local.KIND_ORDER}
    kinds["conv"] = {"factor": 2.0, "n": 10, "se": 0.05}
    device = local.LocalDevice(
        local.Calibration(source=HOST, threads=1, factor=1.0, kinds=kinds, n=70, seconds=60.0, nchwc_block=8)
    )
    dense = nn.Sequential(*(nn.Conv2d(64, 64, 3, padding=1) for _ in range(4)))
    depthwise = nn.Sequential(*(nn.Conv2d(64, 64, 3, padding=1, groups=64) for _ in range(4)))
    graphs = [infercast.capture(m, input_shape=(1, 64, 56, 56)) for m in (dense, depthwise)]
    (dense_factor, depthwise_factor), se = device.mix_factors(graphs)
    assert 1.8 < dense_factor <= 2.0 and 1.0 <= depthwise_factor < 1.2 and se[0] > se[1]
    local_rows, host_rows = device.predict_graphs(graphs), hosts.load(HOST).predict_graphs(graphs)
    assert np.allclose(local_rows["latency_ms"], host_rows["latency_ms"] * [dense_factor, depthwise_factor])
    # the host's interval, never narrower
    widths = [rows["latency_ms_high"] / rows["latency_ms"] for rows in (local_rows, host_rows)]
    assert (widths[0] >= widths[1] - 1e-9).all()
    # peak memory beside: four 64-channel 3×3 convolutions' weights (147 KB each) and more
    memory = local_rows[["peak_memory_mb_low", "peak_memory_mb", "peak_memory_mb_high"]].to_numpy()
    assert (np.diff(memory, axis=1) >= 0).all() and (memory[:, 1] > 4 * 64 * 64 * 9 * 4 / 2**20).all()


def test_design_space_configs_measured_here_refit_the_kind_factors() -> None:
    # a few whole networks run 0.6× what the kernel networks' factors predict: the factor of dense
    # convolutions, nearly all of their time, follows them; a kind they hardly hold keeps its own
    kinds = {kind: {"factor": 1.0, "n": 10, "se": 0.05} for kind in local.KIND_ORDER}
    calibration = local.Calibration(
        source=HOST, threads=1, factor=1.0, kinds=kinds, n=70, seconds=60.0, nchwc_block=8
    )
    drawn = calibrating.design_configs(8)
    assert [m.split("?")[0] for m in drawn[:2]] == ["space:carb-resnet", "space:mobile-nas"]
    assert all(calibrating.is_design_config(m) and "224" in m for m in drawn)
    models = [m for m in drawn if m.startswith("space:carb-resnet")][:3]
    graphs = [capture_model(m)[0] for m in models]
    measured = 0.6 * local.LocalDevice(calibration).predict_graphs(graphs)["latency_ms"].to_numpy()
    refitted = local_networks.refit(calibration, graphs, measured)
    assert refitted.networks == 3 and refitted.kinds["conv"]["factor"] == pytest.approx(0.6, abs=0.05)
    assert refitted.kinds["linear"]["factor"] == pytest.approx(1.0, abs=0.05)
    assert local_networks.refit(calibration, [], measured[:0]) is calibration
    # named by design space, the configs choose how far they move the factors: two spaces that
    # agree refit them; two that contradict each other leave the kernel networks' factors
    spaces = ["space:carb-resnet"] * 3 + ["space:mobile-nas"] * 3
    agreeing = local_networks.refit(calibration, graphs * 2, np.tile(measured, 2), spaces)
    assert agreeing.pull == 0.1 and agreeing.kinds["conv"]["factor"] < 0.7
    contradicting = local_networks.refit(
        calibration, graphs * 2, np.concatenate([measured, 2.5 * measured]), spaces
    )
    assert contradicting.pull is None and contradicting.kinds == calibration.kinds
    assert (
        contradicting.networks == 6 and "left those factors as they were" in local.info(contradicting).source
    )
    assert "refitted those factors (pull" in local.info(agreeing).source
    # a calibration measures them between its blocks of kernel networks
    kernels = [f"space:kernels?k={i}" for i in range(2 * calibrating.PASS_BLOCK)]
    order = calibrating._interleaved(kernels)
    block = calibrating.PASS_BLOCK + calibrating.CONFIGS_PER_BLOCK
    assert order[: calibrating.PASS_BLOCK] == kernels[: calibrating.PASS_BLOCK]
    assert all(calibrating.is_design_config(m) for m in order[calibrating.PASS_BLOCK : block])
    assert order[block:][: calibrating.PASS_BLOCK] == kernels[calibrating.PASS_BLOCK :]


def test_a_machine_like_its_hosts_measures_kernel_networks_alone(monkeypatch, tmp_path) -> None:
    # the Zen 4 host's own kind of machine, replayed: its tables already hold how kernels run
    # inside networks there; any other host is calibrated with configs between the blocks
    monkeypatch.setattr(cpu, "CPUINFO", CPUS / "epyc-zen4-kvm.cpuinfo")
    monkeypatch.setattr(cpu, "CACHES", tmp_path / "no-caches")
    assert calibrating.configs_per_block("epyc-zen4-2core/ort-cpu") == 0
    for elsewhere in (HOST, "xeon-emr-2core/ort-cpu"):
        assert calibrating.configs_per_block(elsewhere) == calibrating.CONFIGS_PER_BLOCK
    kernels = [f"space:kernels?k={i}" for i in range(2 * calibrating.PASS_BLOCK)]
    assert calibrating._interleaved(kernels, per_block=0) == kernels


def _stored(db: Path) -> list[str]:
    """The config ids of the measurements in ``db``, one per measurement."""
    if not db.is_file():
        return []
    with sqlite3.connect(db) as connection:
        return [row[0] for row in connection.execute("select config_id from measurements")]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("INFERCAST_CACHE", str(tmp_path))
    return tmp_path


def test_a_calibration_killed_resumed_used_reused_and_gone_on_another_machine(cache, monkeypatch) -> None:
    import infercast

    folder = local.folder()
    db, saved = folder / local.STORE_FILE, folder / local.CALIBRATION_FILE
    command = [sys.executable, "-m", "infercast", "calibrate", "--budget-s", "120", "--json"]
    with subprocess.Popen(command, env=os.environ, start_new_session=True, stderr=subprocess.DEVNULL) as run:
        deadline = time.monotonic() + 120
        while len(_stored(db)) < 2 and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.2)
        os.killpg(run.pid, signal.SIGKILL)
    kept = set(_stored(db))
    assert len(kept) >= 2 and not saved.exists()  # measured rows kept, no half-written calibration
    store_files = {local.STORE_FILE, f"{local.STORE_FILE}-wal", f"{local.STORE_FILE}-shm"}
    assert {p.name for p in folder.iterdir()} <= store_files
    # a rerun resumes: what the killed run stored is not measured again
    summary = infercast.calibrate(budget_s=1)
    ids = _stored(db)
    assert kept <= set(ids) and len(ids) == len(set(ids))  # none measured twice over
    networks = {config.removesuffix("-again") for config in ids}
    assert summary["n"] + summary["networks"] == len(networks) >= len(local.KIND_ORDER)
    assert summary["measured"] >= 1
    written = json.loads(saved.read_text())
    source = local.nearest_host()  # the shipped host measured on the machine most like this one
    assert written["source"] == summary["source"] == source and written["n"] == summary["n"]
    model = "space:carb-resnet?depth=8"
    predicted = infercast.predict(model, device="local")
    assert predicted["device"] == "local" and predicted["machine_warning"] is None
    shipped = infercast.predict(model, device=source)
    assert predicted["latency_ms"] / shipped["latency_ms"] == pytest.approx(predicted["calibration_factor"])
    low, high = predicted["peak_memory_mb_interval"]
    assert low <= predicted["peak_memory_mb"] <= high and predicted["energy_j"] is None
    assert shipped["peak_memory_mb"] is None and "latency only" in shipped["peak_memory_mb_reason"]
    # reused: a second prediction measures nothing more
    before = saved.stat().st_mtime_ns
    shown = run_cli("predict", "--device", "local", model, "--json")
    assert shown.returncode == 0 and "calibrating it first" not in shown.stderr, shown.stderr
    assert saved.stat().st_mtime_ns == before and len(_stored(db)) == len(ids)
    described = run_cli("devices", "show", "local")
    assert f"recalibrated here per kind of kernel from {summary['n']} kernel networks" in described.stdout
    # another machine (a recorded Zen 4 replayed) has none of its own
    monkeypatch.setattr(cpu, "CPUINFO", CPUS / "epyc-9754-zen4.cpuinfo")
    assert local.folder() != folder and local.load_calibration() is None
    assert device_info("local").n_train == 0
    refused = run_cli("calibrate", "--budget-s", "0")
    assert refused.returncode == 2 and "budget_s=0.0" in refused.stderr
    refused = run_cli("calibrate", "--source", "pixel4/gpu")
    assert refused.returncode == 2 and f"source='pixel4/gpu': the shipped hosts are {HOST}" in refused.stderr
