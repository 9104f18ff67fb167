"""A GPU you own from a few measurements: timm's benchmark CSV imported as it is, and `adapt`
recalibrating the nearest of timm's settings of the same kind of processor."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import infercast
from infercast.api import adapt_device
from infercast.api.importing import TableImportError, import_measurements
from infercast.predictors.devices import timm_bench
from infercast.predictors.devices.recalibrated import DeviceAdapted, fit_kind_factors, kind_parts, work_kinds
from infercast.predictors.errors import PredictorError
from infercast.store import Store

from .helpers import infercast as run_cli

pytestmark = [
    pytest.mark.usefixtures("fresh_cache"),
    pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is not installed"),
]

SMALL = (
    "mobilenetv3_small_050",
    "lcnet_035",
    "mobilenetv2_035",
    "lcnet_050",
    "mnasnet_small",
    "mobilenetv3_small_075",
    "semnasnet_050",
    "tf_mobilenetv3_small_075",
    "lcnet_075",
)
# timm's benchmark.py writes its columns in this order (other versions add or reorder some)
HEADER = "model,infer_img_size,infer_batch_size,infer_samples_per_sec,infer_step_time,param_count\n"


def _timm_csv(path: Path, setting: str, batch: int, slower: float) -> dict[str, float]:
    """A timm benchmark CSV of ``SMALL`` on a device ``slower`` times ``setting``'s, from the
    shipped table's measurements; returns each model's step time (ms)."""
    rows = timm_bench.table().set_index("model")
    steps = {m: float(rows.at[m, timm_bench.MS_PREFIX + setting]) * batch * slower for m in SMALL}
    lines = [f"{m},224,{batch},{1000 * batch / t:.2f},{t:.3f},2.0\n" for m, t in steps.items()]
    path.write_text(HEADER + "".join(lines) + f"not_a_timm_model,224,{batch},1.0,1.0,1.0\n")
    return steps


def test_a_new_gpu_adapts_from_a_gpu_per_kind_where_it_fits(tmp_path: Path) -> None:
    steps = _timm_csv(tmp_path / "my-gpu.csv", "rtx3090/torch-amp", 256, 1.3)
    db = tmp_path / "runs.db"
    imported = import_measurements(db, tmp_path / "my-gpu.csv", "my-gpu", "torch-cuda")
    assert imported["stored"] == len(SMALL) and list(imported["not_captured"]) == ["timm:not_a_timm_model"]
    with Store(db, readonly=True) as store:
        platform = store.platforms().iloc[0]
        stored = store.measurements()
    assert platform["fingerprint"]["format"] == "timm benchmark" and platform["backend"] == "torch-cuda"
    # captured at batch 256 (without running it: the meta device), the step's time as latency
    assert all(json.loads(p)["input_shape"] == [256, 3, 224, 224] for p in stored["params"])
    by_model = dict(zip(stored["model"], stored["median_ms"], strict=True))
    assert by_model["timm:lcnet_035"] == pytest.approx(steps["lcnet_035"], rel=1e-3)

    summary = adapt_device(db, tmp_path / "adapted", k=7)
    source = summary["fit"]["source"]
    assert summary["sources"] == "timm's GPU settings (11)" and timm_bench.SETTINGS[source].processor == "gpu"
    assert summary["n_test"] == len(SMALL) - 7
    # a step of twice the batch: twice the samples, the kernels and weights shared
    one, two = (
        infercast.predict("timm:lcnet_050", predictor=tmp_path / "adapted", input_shape=(b, 3, 224, 224))
        for b in (256, 512)
    )
    assert 1.5 * one["latency_ms"] < two["latency_ms"] <= 2 * one["latency_ms"]
    assert one["latency_ms"] == pytest.approx(steps["lcnet_050"], rel=0.35)
    assert one["energy_j"] is None and one["routes"] == []


def test_a_cpu_table_adapts_from_the_cpu(tmp_path: Path) -> None:
    _timm_csv(tmp_path / "laptop.csv", "i7-12700h/torch-compile", 1, 0.8)
    db = tmp_path / "runs.db"
    import_measurements(db, tmp_path / "laptop.csv", "my-laptop", "torch-cpu")
    summary = adapt_device(db, tmp_path / "adapted", k=5)
    assert summary["fit"]["source"] == "i7-12700h/torch-compile"


def test_per_kind_factors_recover_a_device_faster_at_arithmetic_only() -> None:
    rng = np.random.default_rng(0)
    parts = rng.uniform(0.1, 1.0, (12, 3))  # compute, memory, launches of 12 networks
    truth = parts @ np.array([0.5, 1.0, 1.0]) * np.exp(rng.normal(0, 0.01, 12))
    assert fit_kind_factors(parts, truth, alpha=0.01) == pytest.approx([0.5, 1.0, 1.0], abs=0.05)
    # the ridge pulls towards one common factor
    pulled = fit_kind_factors(parts, truth, alpha=1e6)
    assert np.ptp(pulled) < 0.01


def test_per_kind_factors_follow_a_device_slower_at_everything_or_faster_at_arithmetic() -> None:
    name = "rtx3090/torch-amp"
    rows = timm_bench.measured(name).iloc[::25].reset_index(drop=True)
    source = timm_bench.physical(name)
    noise = np.exp(np.random.default_rng(0).normal(0, 0.01, len(rows)))
    # a device 1.3× slower at everything: every kind's factor says it
    slower = source.predict(rows)["latency_ms"].to_numpy() * 1.3 * noise
    model = DeviceAdapted({name: source}).fit(rows, slower)
    assert model.kind_factors_ == pytest.approx(dict.fromkeys(model.kind_factors_, 1.3), abs=0.05)
    assert DeviceAdapted({name: source}, per_kind=False).fit(rows, slower).weight_ == pytest.approx(
        1.0, abs=0.05
    )
    # a device twice as fast at arithmetic alone: one factor cannot say it, per kind of work can
    arithmetic = kind_parts(source, rows, ("compute",))[:, 0]
    faster = (source.predict(rows)["latency_ms"].to_numpy() - 0.5 * arithmetic) * noise
    model = DeviceAdapted({name: source}).fit(rows, faster)
    assert set(model.kind_factors_) == set(work_kinds(source))
    # the kinds that carry the time get their own factor (the rest stay near the common one)
    share = kind_parts(source, rows, tuple(model.kind_factors_)).sum(axis=0)
    main = {kind for kind, part in zip(model.kind_factors_, share, strict=True) if part > 0.2 * share.sum()}
    assert main and all(
        model.kind_factors_[kind]
        == pytest.approx(0.5 if timm_bench.KINDS[kind] == "compute" else 1.0, abs=0.1)
        for kind in main
    )
    assert model.predict(rows)["latency_ms"].to_numpy() == pytest.approx(faster, rel=0.05)
    assert DeviceAdapted({name: source}, per_kind=False).fit(rows, faster).kind_factors_ is None


def test_an_adapted_gpu_saved_with_coarse_kinds_loads_and_one_of_no_kind_is_refused(tmp_path: Path) -> None:
    name = "rtx3090/torch-amp"
    rows = timm_bench.measured(name).iloc[::25].reset_index(drop=True)
    source = timm_bench.physical(name)
    model = DeviceAdapted({name: source}).fit(rows, source.predict(rows)["latency_ms"].to_numpy())
    model.kind_factors_ = {"compute": 0.5, "memory": 1.0, "launches": 1.0}
    model.save(tmp_path / "coarse")
    coarse = DeviceAdapted.load(tmp_path / "coarse", {name: source}).predict(rows)["latency_ms"].to_numpy()
    parts = kind_parts(source, rows, ("compute", "memory", "launches"))
    assert coarse == pytest.approx(parts @ np.array([0.5, 1.0, 1.0]))
    model.kind_factors_ = {"gflops_nothing": 0.5}
    model.save(tmp_path / "unknown")
    with pytest.raises(PredictorError, match="rtx3090/torch-amp has no kind of work 'gflops_nothing'"):
        DeviceAdapted.load(tmp_path / "unknown", {name: source})


def test_a_timm_table_with_a_bad_batch_names_the_row(tmp_path: Path) -> None:
    (tmp_path / "bad.csv").write_text(HEADER + "lcnet_035,224,256,1,1,1\nlcnet_050,224,0,1,1,1\n")
    with pytest.raises(TableImportError, match=r"infer_batch_size, row 2: 0 is not a whole number"):
        import_measurements(tmp_path / "runs.db", tmp_path / "bad.csv", "my-gpu")
    assert not (tmp_path / "runs.db").exists()


def test_db_import_reads_a_timm_csv_from_the_command_line(tmp_path: Path) -> None:
    _timm_csv(tmp_path / "my-gpu.csv", "rtx4090/torch-amp", 256, 1.0)
    db = tmp_path / "runs.db"
    result = run_cli("db", "import", str(tmp_path / "my-gpu.csv"), "--device", "g", "--db", str(db), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stored"] == len(SMALL)
