"""Shipped device predictors: the registry, the cost model, the API and the CLI on the tables that
ship with the package (no ``../shared`` needed)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from tools.device_tables import add_to_host, added_kernels, host_tables, write_host
from torch import nn

import infercast
from infercast import space
from infercast.api import adapt_device, predict_devices
from infercast.features import featurize
from infercast.predictors.data import feature_frame
from infercast.predictors.devices import (
    UnknownDeviceError,
    device_info,
    get_device,
    hosts,
    list_devices,
    nb201,
    timm_bench,
    usc,
)
from infercast.predictors.devices.common import data_digest
from infercast.predictors.devices.features import DEVICE_FEATURES, SMALL_KERNEL_FEATURES
from infercast.predictors.errors import PredictorError
from infercast.predictors.physical import PhysicalLatency
from infercast.predictors.routes import BLEND, COMBINED, MEAN, OPWISE, OPWISE_ESTIMATE, PHYSICAL
from infercast.store import Platform, Store

from .conftest import requires_pytorchcv
from .helpers import infercast as run_cli
from .helpers import synthetic_measurement, synthetic_store

pytestmark = pytest.mark.usefixtures("fresh_cache")


# what benchmarks/timm_cards.py sets beside each timm setting's predictor
TIMM_BASELINES = ("log-log [timm GMACs, activations, params, size, batch]", "LightGBM [same]")
CELL = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"


def test_every_shipped_setting_is_listed_with_its_card() -> None:
    infos = list_devices()
    names = [i.name for i in infos]
    assert len(names) == len(set(names)) == 90 + 27 + len(hosts.names()) + len(timm_bench.SETTINGS)
    assert {
        "pixel4/gpu",
        "s10/1large/int8",
        "iphonexs/gpu",
        "nb201/pixel3",
        "nb201/titan_rtx_32",
        "epyc-2core/ort-cpu",
    } <= set(names)
    for info in infos:
        assert info.card, f"{info.name} has no accuracy card"
        # the host's card counts real networks measured there; the others held-out public rows
        assert 0 <= info.card["within_10pct"] <= 1 and info.card["n"] >= (
            30 if info.name in hosts.names() else 100
        )
        assert set(info.card["baselines"]) == (
            set(TIMM_BASELINES)
            if info.name in timm_bench.SETTINGS
            else {"FLOPs-proportional", "log-log [FLOPs, params]"}
        )
    assert device_info("nb201/titan_rtx_32").batch == 32
    assert device_info("s10/1large/int8").dtype == "int8"


def test_an_unknown_device_names_the_nearest() -> None:
    with pytest.raises(UnknownDeviceError, match=r"'pixel4/gpus'.*nearest: pixel4/gpu"):
        get_device("pixel4/gpus")
    # before any model is captured or any predictor trained
    with pytest.raises(UnknownDeviceError, match="'nb201/pixel33'"):
        predict_devices(["space:nb201"], ["nb201/pixel3", "nb201/pixel33"])


def test_costs_of_a_known_law_are_recovered_with_honest_intervals(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    features = ("gflops", "kernels", "constant")
    x = pd.DataFrame(
        {"gflops": rng.uniform(0.1, 5, 200), "kernels": rng.integers(10, 300, 200), "constant": 1.0}
    )
    costs = np.array([4.0, 0.02, 0.5])  # ms per GFLOP, per kernel, per inference
    noise = np.exp(rng.normal(0, 0.02, 200))
    y = x.to_numpy(dtype=np.float64) @ costs * noise
    model = PhysicalLatency(features).fit(x.iloc[:150], y[:150], groups=np.arange(150) % 10)
    assert model.costs() == pytest.approx(dict(zip(features, costs, strict=True)), rel=0.1)
    predicted = model.predict(x.iloc[150:])
    inside = (predicted["latency_ms_low"] <= y[150:]) & (y[150:] <= predicted["latency_ms_high"])
    assert 0.8 <= inside.mean() <= 1.0
    assert model.evaluate(x.iloc[150:], y[150:])["within_10pct"] > 0.9
    # far outside the training range: flagged, with the feature named
    far = pd.DataFrame({"gflops": [50.0], "kernels": [100], "constant": [1.0]})
    flagged = model.predict(far).iloc[0]
    assert flagged["ood"] and flagged["ood_reason"].startswith("50 gflops, ")
    # saved as JSON numbers (train writes it beside the blend) and loaded to the same predictions
    model.save(tmp_path / "physical", {"note": "test"})
    loaded = PhysicalLatency.load(tmp_path / "physical")
    pd.testing.assert_frame_equal(loaded.predict(x.iloc[150:]), predicted)
    assert loaded.costs() == model.costs() and loaded.margin(0.05) == model.margin(0.05)
    meta = json.loads((tmp_path / "physical" / "meta.json").read_text())
    meta["training_low"] = meta["training_low"][:1]
    (tmp_path / "physical" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(PredictorError, match="differ in length"):
        PhysicalLatency.load(tmp_path / "physical")


def test_huber_costs_hold_where_one_family_breaks_the_law(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    x = pd.DataFrame({"gflops": rng.uniform(0.1, 5, 120), "kernels": rng.integers(10, 300, 120)})
    costs = np.array([4.0, 0.02])
    y = x.to_numpy(dtype=np.float64) @ costs * np.exp(rng.normal(0, 0.01, 120))
    family = np.arange(120) % 6
    y[family == 0] *= 3.0  # work the features do not see, in one family of twenty networks
    squared = PhysicalLatency(("gflops", "kernels")).fit(x, y, groups=family)
    huber = PhysicalLatency(("gflops", "kernels"), loss="huber").fit(x, y, groups=family)
    others = family != 0  # the networks the law holds for: Huber's costs keep to it
    assert huber.costs() == pytest.approx(dict(zip(("gflops", "kernels"), costs, strict=True)), rel=0.01)
    assert huber.evaluate(x[others], y[others])["median_ape"] < 1.0
    assert squared.evaluate(x[others], y[others])["median_ape"] > 3.0
    huber.save(tmp_path / "huber", {})
    assert PhysicalLatency.load(tmp_path / "huber").loss == "huber"


def test_physical_latency_names_bad_values() -> None:
    x = pd.DataFrame({"a": [1.0, 2.0, 3.0]})
    with pytest.raises(PredictorError, match="loss='l1'"):
        PhysicalLatency(("a",), loss="l1").fit(x, np.ones(3))
    with pytest.raises(PredictorError, match="n_folds=1"):
        PhysicalLatency(("a",), n_folds=1).fit(x, np.ones(3))
    with pytest.raises(PredictorError, match=r"coverage=1\.5"):
        PhysicalLatency(("a",), coverage=1.5).fit(x, np.ones(3))
    with pytest.raises(PredictorError, match="positive"):
        PhysicalLatency(("a",)).fit(x, np.array([1.0, -1.0, 2.0]))
    with pytest.raises(PredictorError, match="not fitted"):
        PhysicalLatency(("a",)).predict(x)


@requires_pytorchcv
def test_shipped_features_are_what_this_infercast_computes() -> None:
    """A shipped row recomputed from the network: the feature code and the table agree."""
    from tools.device_tables import usc_row

    row = usc_row("squeezenet_v1_1")
    shipped = usc.table().loc["squeezenet_v1_1"]
    for name, value in row.items():
        if name == "model":
            continue
        assert shipped[name] == (value if isinstance(value, str) else pytest.approx(value, rel=1e-9)), name


@requires_pytorchcv
def test_predict_on_shipped_devices() -> None:
    one = infercast.predict("pytorchcv:squeezenet_v1_1", device="pixel4/gpu")
    assert one["device"] == "pixel4/gpu" and one["runtime"].startswith("TFLite GPU")
    low, high = one["latency_ms_interval"]
    assert 0 < low < one["latency_ms"] < high
    # the keys of a predictor directory's result, null with the reason: code reads either alike
    assert one["peak_memory_mb"] is None and one["energy_j"] is None
    assert one["energy_j_reason"] == "device pixel4/gpu predicts latency only"
    # the network is one of the training ones: predicted within 30 % of what the phone measured
    measured = usc.table().loc["squeezenet_v1_1", usc.LATENCY_PREFIX + "pixel4/gpu"]
    assert one["latency_ms"] == pytest.approx(measured, rel=0.3)
    table = infercast.predict(
        ["pytorchcv:squeezenet_v1_1", "pytorchcv:resnet10"], device=["pixel4/gpu", "pixel4/1large"]
    )
    assert [(r["model"], r["device"]) for r in table] == [
        ("pytorchcv:squeezenet_v1_1", "pixel4/gpu"),
        ("pytorchcv:squeezenet_v1_1", "pixel4/1large"),
        ("pytorchcv:resnet10", "pixel4/gpu"),
        ("pytorchcv:resnet10", "pixel4/1large"),
    ]
    assert table[0]["latency_ms"] == pytest.approx(one["latency_ms"])
    assert table[2]["latency_ms"] > table[0]["latency_ms"]  # ResNet-10 does 5× the work
    assert one["route"] == OPWISE and one["route_label"] == "op-wise" and one["model_level_ms"] > 0
    assert table[1]["route"] == PHYSICAL and "model_level_ms" not in table[1]
    assert not list(Path(os.environ["INFERCAST_CACHE"]).rglob("*opwise*"))  # shipped, not trained
    small = infercast.predict("torchvision:resnet18", device="pixel4/gpu", input_shape=(1, 3, 160, 160))
    assert small["ood"] and "224×224" in small["ood_reason"]
    with pytest.raises(PredictorError, match=r"either predictor= .* or device="):
        infercast.predict("pytorchcv:squeezenet_v1_1")


def test_nb201_devices_take_cells_and_cache_their_predictor(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("INFERCAST_CACHE", str(tmp_path))
    name = "nb201/gold_6226"
    predictor = nb201.load(name)
    [cached_folder] = (tmp_path / f"devices-{infercast.__version__}").iterdir()
    # keyed on the shipped tables it trains from: tables rebuilt within a version retrain
    assert cached_folder.name == f"nb201-gold_6226-{data_digest(nb201.TABLE, nb201.FEATURES)}"
    assert (cached_folder / "meta.json").is_file()
    cached = nb201.load(name)  # a second process would load it instead of training
    model = f"space:nb201?cell={CELL}"
    first = predict_devices([model], [name])[0]
    graph = infercast.capture(infercast.load_model(model))
    assert predictor.predict_graphs([graph])["latency_ms"].iloc[0] == pytest.approx(first["latency_ms"])
    assert cached.predict_graphs([graph])["latency_ms"].iloc[0] == pytest.approx(first["latency_ms"])
    measured = nb201.table()[name.removeprefix("nb201/")]
    assert measured.min() / 2 < first["latency_ms"] < measured.max() * 2
    with pytest.raises(PredictorError, match="NAS-Bench-201 cells"):
        predict_devices(["space:carb-resnet?depth=10&input_size=32"], [name])
    with pytest.raises(PredictorError, match="NAS-Bench-201 cells"):  # one foreign model among cells
        predict_devices([model, "space:carb-resnet?depth=10&input_size=32"], [name])
    # measured at batch 1: another batch is refused, by the closed form and by capture (an input
    # shape), with the setting measured at it where there is one
    refused = "measured at batch 1 and predicts cells at that batch only"
    with pytest.raises(PredictorError, match=refused):
        predict_devices([f"{model}&batch=64"], [name])
    with pytest.raises(PredictorError, match=refused):
        predict_devices([model], [name], input_shape=(64, 3, 32, 32))
    with pytest.raises(
        PredictorError, match="not at batch 256; nb201/titan_rtx_256 was measured at batch 256"
    ):
        predict_devices([model], ["nb201/titan_rtx_32"], batch_size=256)


def test_nb201_cells_are_predicted_from_closed_form_features_without_pytorch(tmp_path, monkeypatch) -> None:
    """A cell's features come from the nb201 space's closed form: the same predictions as from its
    captured graph, at batch 1 and at a GPU's batch, in a process that never imports PyTorch."""
    monkeypatch.setenv("INFERCAST_CACHE", str(tmp_path))  # the blends that process trains, loaded here
    script = f"""
import json, sys
from infercast.api import predict_devices
rows = predict_devices(["space:nb201?cell={CELL}", "space:nb201"], ["nb201/pixel3", "nb201/titan_rtx_32"])
print(json.dumps({{"rows": rows, "torch": "torch" in sys.modules}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    reply = json.loads(done.stdout)
    assert reply["torch"] is False
    rows = reply["rows"]
    assert [(r["device"], r["input_shape"]) for r in rows] == [
        ("nb201/pixel3", [1, 3, 32, 32]),
        ("nb201/titan_rtx_32", [32, 3, 32, 32]),
    ] * 2
    for row in rows:
        graph = infercast.capture(infercast.load_model(row["model"], batch_size=row["input_shape"][0]))
        captured = nb201.Nb201Device(row["device"]).predict_graphs([graph]).iloc[0]
        assert row["latency_ms"] == pytest.approx(captured["latency_ms"], rel=1e-9)
        assert row["latency_ms_interval"] == pytest.approx(
            [captured["latency_ms_low"], captured["latency_ms_high"]]
        )


def test_the_hosts_own_predictor_ships_trained_and_predicts_any_graph(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("INFERCAST_CACHE", str(tmp_path))
    name = "epyc-2core/ort-cpu"
    x, e2e, ops, kernel_ops = hosts.training_tables(name)
    # design-space configs and one-kernel networks only: zoo networks measured there are the card's test
    assert set(e2e["space"]) == {"space:carb-resnet", "space:mobile-nas"} and len(x) == len(e2e) >= 100
    assert set(ops["model"]) <= set(e2e["model"]) and not set(kernel_ops["model"]) & set(e2e["model"])
    assert not set(DEVICE_FEATURES) & set(x.columns) and (e2e["gflops_conv"] > 0).all()
    # Σ cost × work learns from the kernel networks too; the configs alone calibrate its interval
    kernels = hosts.kernel_networks(name)
    assert set(kernels["model"].str.split("?").str[0]) == {"space:kernels"} and len(kernels) >= 100
    work = hosts.physical(name)
    assert work.n_train_ == len(e2e) + len(kernels) and len(work.residuals_) == len(e2e)
    net = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2), nn.AdaptiveAvgPool2d(1)
    )
    one = infercast.predict(net, device=name, input_shape=(1, 3, 160, 160))
    # the blend and op-wise routes ship trained; the Σ cost × work route, fitted above, is kept
    kept = [p.name for p in tmp_path.glob("devices-*/*")]
    assert len(kept) == 1 and kept[0].startswith("epyc-2core-ort-cpu-physical-"), kept
    again = hosts.physical(name)
    assert again.costs_.tolist() == work.costs_.tolist() and again.interval_q_ == work.interval_q_
    assert one["route"] == MEAN and one["runtime"].startswith("ONNX Runtime")
    routes = [one["model_level_ms"], one["opwise_ms"], one["physical_ms"]]
    assert one["latency_ms"] == pytest.approx(math.prod(routes) ** (1 / 3))
    low, high = one["latency_ms_interval"]
    assert low < min(routes) <= one["latency_ms"] <= max(routes) < high
    # the shipped routes are what training on the shipped tables gives — to within what another
    # CPU's BLAS kernels change: the last bits of each fold's least-squares trend move the fold
    # models' trees and so the blend's weights (4e-4 relative on a machine with AVX-512); a stale
    # artifact, trained on other rows, is off by far more
    graph = infercast.capture(net, input_shape=(1, 3, 160, 160))
    shipped = hosts.load(name)
    retrained = hosts.train_routes(name)
    assert retrained.blend.predict(x.head(20))["latency_ms"].to_numpy() == pytest.approx(
        shipped.routes.blend.predict(x.head(20))["latency_ms"].to_numpy(), rel=3e-3
    )
    assert retrained.opwise.predict_graphs([graph], shipped.backend, shipped.settings)[
        "latency_ms"
    ].to_numpy() == pytest.approx([one["opwise_ms"]], rel=3e-3)
    bigger = nn.Sequential(
        *net[:-1], nn.Conv2d(32, 256, 3, padding=1), nn.Conv2d(256, 256, 3), nn.AdaptiveAvgPool2d(1)
    )
    assert (
        infercast.predict(bigger, device=name, input_shape=(1, 3, 160, 160))["latency_ms"] > one["latency_ms"]
    )


def test_a_host_ships_the_route_its_training_configs_chose(tmp_path, monkeypatch) -> None:
    """The Zen 4 host shows the blend given its op-wise estimate (the other routes beside it),
    and its op-wise route prices ONNX Runtime's layout copies and splits; a host whose metadata
    names a route its archive cannot give is refused by name."""
    monkeypatch.setenv("INFERCAST_CACHE", str(tmp_path))
    name = "epyc-zen4-2core/ort-cpu"
    device = hosts.load(name)
    assert hosts.route(name) == COMBINED == device.route and hosts.route("epyc-2core/ort-cpu") == MEAN
    assert {"reorder", "split"} <= set(device.routes.opwise.models_)
    net = nn.Sequential(nn.Conv2d(3, 40, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(40, 32, 1))
    graph = infercast.capture(net, input_shape=(1, 3, 64, 64))
    row = device.predict_graphs([graph]).iloc[0]
    # the blend given the op-wise estimate, which the other routes sit beside
    given = feature_frame([featurize(graph)], device.settings).assign(
        **{OPWISE_ESTIMATE: np.log(row["opwise_ms"])}
    )
    assert row["route"] == COMBINED and device.routes.combined is not None
    assert row["latency_ms"] == pytest.approx(device.routes.combined.predict(given)["latency_ms"].iloc[0])
    assert row["latency_ms_low"] < row["latency_ms"] < row["latency_ms_high"]
    assert {"model_level_ms", "opwise_ms", "physical_ms"} <= set(row.index)
    meta = {**hosts.hosts()[name], "route": "nonsense"}
    monkeypatch.setattr(hosts, "hosts", lambda: {name: meta})
    with pytest.raises(PredictorError, match="names route 'nonsense'"):
        hosts.load(name)


def test_a_hosts_tables_are_built_from_design_space_profiles_only(tmp_path, monkeypatch) -> None:
    made = synthetic_store(tmp_path / "runs.db", n=12)
    configs, ops, kernels, host = host_tables(made["db"], ["first"], [])
    assert len(configs) == made["n_configs"] and set(configs["space"]) == {"space:carb-resnet"}
    assert (configs[list(DEVICE_FEATURES)].notna().all().all()) and (configs["kernels"] > 0).all()
    assert ops.empty and kernels.empty and host["n_configs"] == len(configs) and host["backend"]
    files = (hosts.CONFIGS_FILE, hosts.OPS_FILE, hosts.KERNEL_NETWORKS_FILE, hosts.META_FILE)
    shipped = {f: tmp_path / f for f in files}
    monkeypatch.setattr("tools.device_tables.data_file", lambda f: shipped[f])
    write_host("test/host", configs, ops, kernels, host)
    write_host("test/host", configs, ops, kernels, host)  # rebuilding a host replaces its rows
    write_host("test/other", configs.head(3), ops, kernels, host)
    table = pd.read_parquet(shipped[hosts.CONFIGS_FILE])
    assert table["device"].value_counts().to_dict() == {"test/host": len(configs), "test/other": 3}
    assert set(json.loads(shipped[hosts.META_FILE].read_text())["devices"]) == {"test/host", "test/other"}
    # the route benchmarks/host_card.py chose stays when the tables are rebuilt, until it chooses again
    meta = json.loads(shipped[hosts.META_FILE].read_text())
    meta["devices"]["test/host"]["route"] = COMBINED
    shipped[hosts.META_FILE].write_text(json.dumps(meta))
    write_host("test/host", configs, ops, kernels, host)
    devices = json.loads(shipped[hosts.META_FILE].read_text())["devices"]
    assert devices["test/host"]["route"] == COMBINED and "route" not in devices["test/other"]
    carb = space.get("carb-resnet")
    row = carb.config_rows(carb.sample(1, seed=9))[0] | {"id": "zoo", "model": "pytorchcv:resnet18"}
    with Store(made["db"]) as store:
        store.add_configs([row])
        store.add_measurement(made["platform_id"], "first", synthetic_measurement("zoo", 5.0, 20.0, 0.01))
    with pytest.raises(PredictorError, match=r"outside the design spaces \(pytorchcv:resnet18"):
        host_tables(made["db"], ["first"], [])


def _kernel_store(db, fingerprint: dict, campaign: str) -> None:
    """A store of two one-kernel networks with their op rows, on a platform of ``fingerprint``."""
    kernels = space.get("kernels")
    shapes = [
        {
            "op": "conv",
            "side": 8,
            "cin": 18,
            "cout": 16,
            "kernel": 1,
            "stride": 1,
            "groups": 1,
            "act": "relu",
        },
        {
            "op": "dwconv",
            "side": 8,
            "cin": 18,
            "cout": 18,
            "kernel": 3,
            "stride": 1,
            "groups": 18,
            "act": "none",
        },
    ]
    configs = kernels.with_ids(pd.DataFrame(shapes).assign(batch=1))
    with Store(db) as store:
        platform_id = store.add_platform(Platform("ort-cpu", {"threads": 1, "opt_level": "all"}, fingerprint))
        store.add_configs(kernels.config_rows(configs))
        for shape, config_id in zip(shapes, configs["id"], strict=True):
            op = {"op_type": shape["op"], "kernel": "0", "fused_ops": ["Conv", "Relu"], "latency_ms": 0.02}
            op |= {"h_in": 8, "w_in": 8, "c_in": 18, "h_out": 8, "w_out": 8, "c_out": shape["cout"]}
            op |= {
                "kernel_size": shape["kernel"],
                "stride": 1,
                "groups": shape["groups"],
                "algorithm": "nchw",
            }
            measured = replace(synthetic_measurement(config_id, 0.03, 1.0, 0.01), ops=[op])
            store.add_measurement(platform_id, campaign, measured)


def test_a_shipped_route_gives_way_only_to_a_clearly_better_one(monkeypatch) -> None:
    """benchmarks/host_card.py's route choice: the lowest worst-case median error, but the route a
    host ships stays unless another is lower in 95 % of paired bootstrap draws."""
    import importlib

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    settled = importlib.import_module("host_card").settled
    rng = np.random.default_rng(0)
    shipped = {"random folds": rng.uniform(0, 0.1, 100), "a space held out": rng.uniform(0, 0.2, 60)}
    # another route as good within the draw of configs: the shipped one stays
    near = {
        label: {"stacked": e, "mean of all three": e * rng.uniform(0.8, 1.15, len(e))}
        for label, e in shipped.items()
    }
    route, why = settled(near, ["stacked", "mean of all three"], "stacked")
    assert route == "stacked" and "as shipped" in why and "a switch needs 95%" in why
    # one clearly better replaces it, and so does the best where the shipped one's interval fails
    far = {label: {"stacked": e, "mean of all three": e * 0.6} for label, e in shipped.items()}
    assert settled(far, ["stacked", "mean of all three"], "stacked")[0] == "mean of all three"
    assert settled(near, ["mean of all three"], "stacked")[0] == "mean of all three"
    assert settled(near, ["stacked", "mean of all three"], None)[0] == min(
        ("stacked", "mean of all three"), key=lambda r: max(np.median(near[s][r]) for s in near)
    )


def test_kernel_campaigns_of_a_hosts_kind_of_machine_add_to_its_tables(tmp_path, monkeypatch) -> None:
    processor = {"vendor": "AuthenticAMD", "family": 25, "model": 17, "isa": {"avx2": True, "avx512f": True}}
    processor |= {"l2_kib": 1024, "l3_kib": 32768}
    recorded = {"processor": processor, "libraries": {"onnxruntime": "1.32.0"}}
    host = {"backend": "ort-cpu", "settings": {"threads": 1, "opt_level": "all"}, "nchwc_block": 16}
    host |= {"fingerprint": recorded, "latency_stat": "steady_ms", "kernel_campaigns": ["first"]}
    host |= {"n_kernel_networks": 1, "source": "its own profiles: 3 design-space configs, 1 kernel networks"}
    files = (hosts.OPS_FILE, hosts.KERNEL_NETWORKS_FILE, hosts.META_FILE)
    shipped = {f: tmp_path / f for f in files}
    pd.DataFrame(
        {"model": ["a"], "op_type": ["conv"], "latency_ms": [1.0], "kernel_campaign": [False]}
    ).assign(device="test/host").to_parquet(shipped[hosts.OPS_FILE])
    pd.DataFrame(
        {"model": ["space:kernels?op=add"], "latency_ms": [0.1], "device": ["test/host"]}
    ).to_parquet(shipped[hosts.KERNEL_NETWORKS_FILE])
    shipped[hosts.META_FILE].write_text(json.dumps({"devices": {"test/host": host}}))
    monkeypatch.setattr("tools.device_tables.data_file", lambda f: shipped[f])
    monkeypatch.setattr("infercast.predictors.devices.hosts.data_file", lambda f: shipped[f])
    hosts.forget_tables()
    try:
        like = {"processor": processor, "libraries": {"onnxruntime": "1.32.0"}, "nchwc_block": 16}
        _kernel_store(tmp_path / "like.db", like, "nchw")
        ops, networks, described = added_kernels(tmp_path / "like.db", "test/host", ["nchw"])
        assert len(ops) == 2 and ops["kernel_campaign"].all() and set(ops["algorithm"]) == {"nchw"}
        assert len(networks) == 2 and networks["model"].str.startswith("space:kernels?").all()
        assert described["kernel_campaigns"] == ["first", "nchw"] and described["n_kernel_networks"] == 3
        assert described["source"].endswith(", 3 kernel networks")
        add_to_host("test/host", ops, networks, described)
        assert hosts.kernel_networks("test/host")["model"].nunique() == 3
        assert hosts.hosts()["test/host"]["kernel_campaigns"] == ["first", "nchw"]
        with pytest.raises(PredictorError, match=r"\['absent'\] were measured nowhere in it"):
            added_kernels(tmp_path / "like.db", "test/host", ["absent"])
        with pytest.raises(PredictorError, match=r"already holds \['nchw'\]"):
            added_kernels(tmp_path / "like.db", "test/host", ["nchw"])
        # another kind of machine: no AVX-512, another ONNX Runtime
        unlike = {"processor": processor | {"isa": {"avx2": True, "avx512f": False}}, "nchwc_block": 16}
        _kernel_store(tmp_path / "unlike.db", unlike | {"libraries": {"onnxruntime": "1.31.0"}}, "other")
        with pytest.raises(
            PredictorError,
            match=r"test/host's kind \(here: test/host's.*avx512f here, not there; ONNX Runtime 1\.31\.0 the",
        ):
            added_kernels(tmp_path / "unlike.db", "test/host", ["other"])
    finally:
        monkeypatch.undo()
        hosts.forget_tables()


def test_cli_devices_list_show_and_the_one_line_error() -> None:
    listed = run_cli("devices", "list", "pixel4/gpu", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [d["name"] for d in json.loads(listed.stdout)] == ["pixel4/gpu"]
    shown = run_cli("devices", "show", "nb201/pixel3", "--json")
    assert shown.returncode == 0, shown.stderr
    card = json.loads(shown.stdout)["card"]
    assert card["n"] > 10_000 and "FLOPs-proportional" in card["baselines"]
    assert json.loads(shown.stdout)["trained_on"] == "cells"
    host = run_cli("devices", "show", "epyc-2core/ort-cpu")
    assert host.returncode == 0, host.stderr
    # what it learned from, and the routes behind its latency beside the card's own figures
    assert "trained on: 119 design-space configs" in host.stdout
    assert re.search(r"│\s+blend\s+│\s+36 │", host.stdout) and re.search(
        r"│\s+op-wise\s+│\s+36 │", host.stdout
    )
    phone = run_cli("devices", "show", "pixel4/1large")
    assert phone.returncode == 0, phone.stderr
    assert re.search(r"90 % cover per architecture family \(.*\): \d+%", phone.stdout)
    wrong = run_cli("devices", "show", "pixel4/gpux")
    assert wrong.returncode == 2
    assert wrong.stderr.strip().count("\n") == 0 and "nearest: pixel4/gpu" in wrong.stderr


@requires_pytorchcv
def test_cli_predict_on_devices() -> None:
    result = run_cli(
        "predict",
        "pytorchcv:squeezenet_v1_1",
        "--device",
        "pixel4/gpu",
        "--device",
        "s10/1large/int8",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["device"] for r in rows] == ["pixel4/gpu", "s10/1large/int8"]
    text = run_cli("predict", "pytorchcv:squeezenet_v1_1", "--device", "pixel4/gpu")
    assert text.returncode == 0 and "pixel4/gpu" in text.stdout and "within ±10 %" in text.stdout
    both = run_cli("predict", "pytorchcv:squeezenet_v1_1")
    assert both.returncode == 2 and "--device" in both.stderr


def test_a_graph_maps_onto_the_gpu_delegates_op_rows() -> None:
    """BatchNorm, activations and a residual add vanish into their convolution; a depthwise input
    is read padded; a whole-map average pool is the MEAN op; a linear layer is a vector op."""
    from infercast.predictors.devices.tflite_gpu import COLUMNS, graph_ops

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
            self.dw = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8))
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.stem(x)
            return self.head(torch.relu(self.dw(y) + y))

    graph = infercast.capture(Block().eval(), (1, 3, 16, 16))
    ops = graph_ops(graph, "block")
    assert list(ops.columns) == list(COLUMNS)
    assert ops["op_type"].tolist() == ["conv", "dwconv", "global_pool", "linear"]
    dw = ops.iloc[1]
    assert (dw["h_in"], dw["h_out"], dw["groups"]) == (18, 16, 8)
    linear = ops.iloc[3]
    assert (linear["h_in"], linear["c_in"], linear["c_out"]) == (1, 8, 10)
    assert linear["bytes"] == 2 * (8 + 10 + 8 * 10)  # fp16 vectors and weights
    assert ops["kernel"].is_unique


def test_a_phone_that_runs_winograd_kernels_prices_a_users_convolution_as_one() -> None:
    """A 3×3 convolution of 64 channels at 56² is a Winograd kernel on the a03s GPU: the device
    predicts it with that kernel type, not as the direct convolution it is on pixel4."""
    from infercast.predictors.devices import tflite_gpu

    net = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1))
    graph = infercast.capture(net.eval(), (1, 64, 56, 56))
    ops = tflite_gpu.graph_ops(graph, "0")
    assert (tflite_gpu.on_phone(ops, "a03s")["algorithm"] == tflite_gpu.WINOGRAD).all()
    assert (tflite_gpu.on_phone(ops, "pixel4")["algorithm"] == "").all()
    device = usc.load("a03s/gpu")
    predicted = device.predict_graphs([graph])["latency_ms"].iloc[0]
    route = tflite_gpu.opwise("a03s/gpu")
    as_winograd = route.predict(tflite_gpu.on_phone(ops, "a03s"))["latency_ms"].iloc[0]
    as_direct = route.predict(ops)["latency_ms"].iloc[0]
    assert predicted == as_winograd and not math.isclose(as_winograd, as_direct, rel_tol=0.02)


def test_the_package_with_its_shipped_predictors_stays_under_25_mb() -> None:
    root = Path(infercast.__file__).parent
    files = [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    size = sum(p.stat().st_size for p in files)
    assert size <= 25e6, f"the package holds {size / 1e6:.1f} MB"


def test_the_gpu_op_wise_routes_ship_trained_on_the_shipped_tables() -> None:
    """A stale route (trained on other networks or other op rows than ship) would show here."""
    from infercast.predictors.devices import tflite_gpu

    networks = usc.table()
    gpus = [name for name in usc.names() if name.endswith("/gpu")]
    assert len(gpus) == len(tflite_gpu.PHONES)
    for name in gpus:
        route = tflite_gpu.opwise(name)
        ops = tflite_gpu.training_ops(name.split("/")[0])
        timed = ops[np.isfinite(ops["latency_ms"]) & (ops["latency_ms"] > 0)]
        assert route.metadata_["device"] == name and route.training_["n_models"] == len(networks)
        kernel_types = timed["op_type"] + timed["algorithm"].map(lambda a: f".{a}" if a else "")
        assert route.training_["kernel_types"] == kernel_types.value_counts().to_dict()
        assert route.training_["n_groups"] == networks["family"].nunique()


def test_the_delegates_winograd_choice_is_the_one_usc_mobiles_kernel_names_record() -> None:
    from infercast.predictors.devices import tflite_gpu

    ops = tflite_gpu.table()
    for phone in tflite_gpu.PHONES:
        chosen = tflite_gpu.on_phone(ops[list(tflite_gpu.COLUMNS)], phone)["algorithm"] == tflite_gpu.WINOGRAD
        assert (chosen.to_numpy() == ops[f"winograd@{phone}"].to_numpy()).all(), phone
        assert chosen.any() == (phone in tflite_gpu.WINOGRAD_PHONES)


def test_a_shipped_gpu_route_is_the_trained_one_zipped(tmp_path, monkeypatch) -> None:
    from infercast.predictors.devices import tflite_gpu

    monkeypatch.setattr(tflite_gpu, "routes_archive", lambda name: tmp_path / f"{name.replace('/', '-')}.zip")
    fits = []
    fit_opwise = tflite_gpu.fit_opwise

    def kept(*args: Any) -> Any:
        # the model ship trains, kept to compare with what it zipped (one fit, not a second to match)
        fits.append(fit_opwise(*args))
        return fits[-1]

    monkeypatch.setattr(tflite_gpu, "fit_opwise", kept)
    networks = usc.table()
    small_families = ["nas-mobile", "squeezenet", "efficientnet", "densenet", "hardnet"]
    few = networks[networks["family"].isin(small_families)]
    e2e, families = few[usc.LATENCY_PREFIX + "a03s/gpu"], few["family"]
    archive = tflite_gpu.ship("a03s/gpu", e2e, families)
    assert archive == tmp_path / "a03s-gpu.zip" and archive.stat().st_size > 0
    shipped = tflite_gpu.opwise("a03s/gpu")
    [trained] = fits
    rows = tflite_gpu.training_ops("a03s", list(networks.index[:10])).drop(columns="latency_ms")
    assert shipped.predict(rows)["latency_ms"].tolist() == trained.predict(rows)["latency_ms"].tolist()
    assert shipped.metadata_["device"] == "a03s/gpu" and shipped.training_["n_models"] == len(few)


def test_adapting_picks_the_source_that_explains_the_measurements(tmp_path) -> None:
    from infercast.predictors.devices.recalibrated import DeviceAdapted

    rng = np.random.default_rng(1)
    features = ("gflops", "kernels", "constant")
    x = pd.DataFrame(
        {"gflops": rng.uniform(0.1, 5, 60), "kernels": rng.integers(10, 300, 60), "constant": 1.0}
    )
    laws = {"gpu-like": [1.0, 0.05, 0.2], "cpu-like": [20.0, 0.001, 1.0], "npu-like": [0.3, 0.2, 3.0]}
    sources = {
        name: PhysicalLatency(features).fit(x, x.to_numpy(dtype=np.float64) @ np.array(costs))
        for name, costs in laws.items()
    }
    # a device 1.5× slower than the GPU-like one, a little noisy
    truth = (
        1.5 * (x.to_numpy(dtype=np.float64) @ np.array(laws["gpu-like"])) * np.exp(rng.normal(0, 0.02, 60))
    )
    model = DeviceAdapted(sources).fit(x.iloc[:8], truth[:8])
    assert model.source_ == "gpu-like"
    assert np.exp(model.intercept_) == pytest.approx(1.5, rel=0.1) and model.weight_ == pytest.approx(
        1, abs=0.1
    )
    predicted = model.predict(x.iloc[8:])
    assert np.median(np.abs(predicted["latency_ms"] / truth[8:] - 1)) < 0.05
    model.save(tmp_path / "adapted")
    again = DeviceAdapted.load(tmp_path / "adapted", sources)
    assert again.predict(x.iloc[8:])["latency_ms"].to_numpy() == pytest.approx(
        predicted["latency_ms"].to_numpy()
    )
    with pytest.raises(PredictorError, match="not shipped"):
        DeviceAdapted.load(tmp_path / "adapted")  # "gpu-like" is no shipped device
    with pytest.raises(PredictorError, match="3 or more"):
        DeviceAdapted(sources).fit(x.iloc[:2], truth[:2])


def test_an_outlier_at_the_extreme_rescales_the_source_by_one_factor() -> None:
    # a device 1.4× slower than the source, one of its eight measured networks — the largest, where
    # a slope bends most — 30 % slower still: a slope fitted on the others predicts it no better,
    # and one fitted with it predicts the others worse, so one factor it is
    from infercast.predictors.devices.recalibrated import DeviceAdapted

    rng = np.random.default_rng(3)
    x = pd.DataFrame(
        {"gflops": rng.uniform(0.1, 5, 40), "kernels": rng.integers(10, 300, 40), "constant": 1.0}
    )
    law = x.to_numpy(dtype=np.float64) @ np.array([1.0, 0.05, 0.2])
    source = {"gpu-like": PhysicalLatency(("gflops", "kernels", "constant")).fit(x, law)}
    measured = 1.4 * law[:8]
    measured[np.argmax(measured)] *= 1.3
    model = DeviceAdapted(source).fit(x.iloc[:8], measured)
    assert model.weight_ == pytest.approx(1.0, abs=1e-6)
    assert np.median(model.predict(x)["latency_ms"].to_numpy() / law) == pytest.approx(
        1.4 * 1.3 ** (1 / 8), rel=0.01
    )


def test_another_machine_of_the_hosts_kind_adapts_from_the_host(tmp_path) -> None:
    # the shipped hosts are sources too: an ONNX Runtime CPU twice as slow as the EPYC host is
    # nearest to it, not to a phone's CPU, and the saved predictor rebuilds it when loaded
    from infercast.predictors.devices.recalibrated import DeviceAdapted, shipped_sources, work_kinds

    sources = shipped_sources()
    assert set(usc.names()) | set(hosts.names()) == set(sources)
    _, e2e, _, _ = hosts.training_tables("epyc-2core/ort-cpu")
    x = e2e[list(DEVICE_FEATURES)]
    truth = 2 * sources["epyc-2core/ort-cpu"].predict(x)["latency_ms"].to_numpy()
    truth *= np.exp(np.random.default_rng(0).normal(0, 0.03, len(truth)))
    model = DeviceAdapted(sources).fit(x.iloc[::10], truth[::10])
    assert model.source_ == "epyc-2core/ort-cpu" and np.exp(model.intercept_) == pytest.approx(2, rel=0.1)
    # from six networks on, each kind of the host's work has its own factor
    assert set(model.kind_factors_) == set(work_kinds(sources["epyc-2core/ort-cpu"]))
    assert np.median(model.predict(x)["latency_ms"].to_numpy() / truth) == pytest.approx(1, abs=0.05)
    model.save(tmp_path / "adapted")
    again = DeviceAdapted.load(tmp_path / "adapted")
    assert again.predict(x)["latency_ms"].to_numpy() == pytest.approx(
        model.predict(x)["latency_ms"].to_numpy()
    )
    # measured with ort-cpu, as that host was: `adapt` chooses among the hosts of that runtime only
    store = synthetic_store(tmp_path / "runs.db")
    summary = adapt_device(store["db"], tmp_path / "from-store", k=10)
    fitted = summary["fit"]
    assert fitted["source"] in hosts.names() and fitted["source"] in fitted["nearest"]
    assert set(fitted["nearest"]) <= set(hosts.names())
    assert summary["sources"] == "the shipped hosts measured with ort-cpu"


def test_cli_adapts_the_nearest_shipped_device_to_imported_measurements(tmp_path) -> None:
    models = [
        f"space:carb-resnet?depth={d}&width=0.25&input_size=64&early_downsample=0"
        for d in (8, 10, 12, 14, 16, 18)
    ]
    table = pd.DataFrame({"model": models, "latency_ms": [2.0, 2.4, 2.9, 3.3, 3.9, 4.4]})
    table.to_csv(tmp_path / "board.csv", index=False)
    db, out = str(tmp_path / "runs.db"), str(tmp_path / "board")
    imported = run_cli(
        "db", "import", str(tmp_path / "board.csv"), "--device", "my-board", "--db", db, "--json"
    )
    assert imported.returncode == 0, imported.stderr
    adapted = run_cli("adapt", "--db", db, "--out", out, "--k", "4", "--json")
    assert adapted.returncode == 0, adapted.stderr
    summary = json.loads(adapted.stdout)
    assert summary["fit"]["source"] in {i.name for i in list_devices()} and summary["n_test"] == 2
    assert summary["sources"] == f"every shipped device ({len(usc.names()) + len(hosts.names())})"
    text = run_cli("adapt", "--db", db, "--out", str(tmp_path / "again"), "--k", "4")
    shown = " ".join(text.stdout.split())
    assert text.returncode == 0 and f"adapted from {summary['fit']['source']}, the nearest of every" in shown
    predicted = run_cli("predict", "--predictor", out, models[0], "--json")
    assert predicted.returncode == 0, predicted.stderr
    row = json.loads(predicted.stdout)[0]
    assert row["latency_ms"] > 0 and row["energy_j"] is None and "latency only" in row["energy_j_reason"]


def test_screen_a_design_space_for_a_shipped_device() -> None:
    measured = nb201.table()["gold_6226"]
    budget = float(measured.median())
    result = run_cli(
        "screen", "--device", "nb201/gold_6226", "--space", "nb201", "--n", "20000",
        "--max-latency-ms", f"{budget:.3f}", "--shortlist", "5", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    screened = json.loads(result.stdout)
    assert screened["candidates"] == 20000 and 0 < len(screened["shortlist"]) <= 5
    assert all("batch=1&" in row["model"] for row in screened["shortlist"])  # the device's batch size
    assert all(row["latency_ms"] <= budget for row in screened["shortlist"])
    assert screened["device"]["route"] == BLEND
    refused = run_cli("screen", "--device", "pixel4/gpu", "--space", "nb201", "--max-latency-ms", "10")
    assert refused.returncode == 2 and "screen them on an nb201/* device" in refused.stderr
    host = run_cli(
        "screen", "--device", "epyc-2core/ort-cpu", "--space", "carb-resnet", "--n", "5000",
        "--max-latency-ms", "10", "--shortlist", "5", "--json",
    )  # fmt: skip
    assert host.returncode == 0, host.stderr
    screened = json.loads(host.stdout)
    assert 0 < len(screened["shortlist"]) <= 5 and all(r["latency_ms"] <= 10 for r in screened["shortlist"])
    assert all("batch=1&" in row["model"] for row in screened["shortlist"])
    # the Σ cost × work route on closed-form device features; predict gives the card's route
    assert screened["device"]["route"] == PHYSICAL and screened["device"]["within_10pct"] is not None
    assert "--device epyc-2core/ort-cpu" in screened["device"]["note"]
    refused = run_cli("screen", "--device", "epyc-2core/ort-cpu", "--space", "nb201", "--max-latency-ms", "1")
    assert refused.returncode == 2 and "screen them on an nb201/* device" in refused.stderr


def test_screening_a_space_for_a_device_never_imports_torch() -> None:
    # sampling, closed-form features and both stages need no network: torch's import alone took
    # 1.9 s of the 10 s a million candidates may take
    code = (
        "import sys, infercast.api as api\n"
        "r = api.screen(None, {'latency': 10}, 'latency,flops', space='mobile-nas', n=2000,\n"
        "               device='pixel4/gpu')\n"
        "assert r['shortlist'], r\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_predictions_after_the_first_never_import_scikit_learn(tmp_path) -> None:
    # only fitting needs scikit-learn and SciPy's statistics (~1.5 s of a prediction's imports):
    # a phone's or a host's Σ cost × work predictor is fitted on first use into the user cache and
    # loaded from it after; the shipped boosted routes walk their trees without XGBoost or LightGBM
    code = (
        "import sys, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "from infercast.api import predict_devices\n"
        "from infercast.predictors.devices import list_devices\n"
        "assert len(list_devices()) >= 100\n"
        "model = 'space:carb-resnet?depth=8&width=0.25&input_size=32'\n"
        "rows = predict_devices([model], ['s10/1large', 's10/gpu', 'epyc-2core/ort-cpu'])\n"
        "assert rows[0]['latency_ms'] > 0 and rows[1]['route'] == 'opwise', rows\n"
        "assert rows[2]['opwise_ms'] > 0 and rows[2]['model_level_ms'] > 0, rows\n"
        "heavy = ('sklearn', 'scipy.stats', 'scipy.spatial', 'xgboost', 'lightgbm')\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
    )
    env = {**os.environ, "INFERCAST_CACHE": str(tmp_path)}
    first, second = (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
        for _ in range(2)
    )
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    assert "sklearn" in first.stdout  # the first fits
    assert second.stdout.strip() == "[]"
    cached = sorted(folder.name.rsplit("-", 1)[0] for folder in tmp_path.glob("devices-*/*"))
    assert cached == ["epyc-2core-ort-cpu-physical", "s10-1large", "s10-gpu"]


# every block variant: expansion 1 (no expand conv), h-swish (a kernel of its own), SE on / off,
# residual and not; Basic and Bottleneck blocks with and without a projection shortcut and stem pool
SPACE_CONFIGS = [
    "space:mobile-nas?width=0.35&resolution=96&e1=1&act1=hswish&se1=1&r1=2&e2=3&se2=0&act2=relu&r2=1"
    "&k3=7&e3=6&act3=hswish&se3=1&r3=2&e4=4&act4=relu&se4=1&r5=1&e6=1&se6=0",
    "space:carb-resnet?block=basic&depth=12&width=0.25&early_downsample=1&input_size=64",
    "space:carb-resnet?block=bottleneck&depth=14&width=0.2&early_downsample=0&input_size=32",
]


@pytest.mark.parametrize("model", SPACE_CONFIGS)
def test_closed_form_device_features_equal_the_captured_graph(model: str) -> None:
    from infercast.graph import capture
    from infercast.predictors.devices.features import device_features
    from infercast.space import parse_model_string

    space, config = parse_model_string(model)
    graph = capture(space.build(config), space.input_shape(config))
    closed = space.device_features(pd.DataFrame([config])).iloc[0]
    expected = {**device_features(graph), "flops": graph.flops, "params": graph.params}
    for name, value in expected.items():
        assert closed[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
    assert closed["input_side"] == config.get("resolution", config.get("input_size"))


def test_a_graph_that_runs_no_kernel_has_only_the_constant() -> None:
    from infercast.graph import capture
    from infercast.predictors.devices.features import device_features

    class Halves(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            first, second = x.chunk(2, dim=1)
            return first.contiguous(), second.contiguous()

    features = device_features(capture(Halves(), (1, 8, 7, 7)))
    assert features["constant"] == 1 and features["kernels"] == 0
    assert all(value == 0 for name, value in features.items() if name != "constant")


def test_a_fully_connected_layer_at_every_position_of_a_map_is_priced_as_a_1x1_convolution() -> None:
    """ConvNeXt's pointwise layers are fully connected layers on a channels-last map: a matrix
    product per position, compute-bound like the 1×1 convolution it equals. Only a classifier's
    one-row product stays `gflops_linear`, the memory-bound kind the training networks have."""
    from infercast.graph import capture
    from infercast.predictors.devices.features import device_features

    class Head(nn.Module):
        def __init__(self, mix: nn.Module) -> None:
            super().__init__()
            self.stem, self.mix, self.classifier = nn.Conv2d(3, 16, 3), mix, nn.Linear(32, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.classifier(self.mix(self.stem(x)).mean((2, 3)))

    class ChannelsLast(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(16, 32)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    pointwise = device_features(capture(Head(ChannelsLast()), (1, 3, 30, 30)))
    convolution = device_features(capture(Head(nn.Conv2d(16, 32, 1)), (1, 3, 30, 30)))
    assert pointwise["gflops_conv"] == pytest.approx(convolution["gflops_conv"], rel=1e-9)
    assert pointwise["gflops_conv"] > 2 * 28 * 28 * 16 * 32 / 1e9
    assert pointwise["gflops_linear"] == convolution["gflops_linear"] == pytest.approx(2 * 32 * 10 / 1e9)
    for column in SMALL_KERNEL_FEATURES:
        assert pointwise[column] == pytest.approx(convolution[column], rel=1e-9), column


def test_screen_a_design_space_for_a_phone() -> None:
    from infercast.api import screen
    from infercast.screen import ScreenError

    result = screen(
        None, {"latency": 4.0}, "latency,flops", space="mobile-nas", n=4000, seed=3, device="pixel4/1large"
    )
    assert result["device"]["route"] == PHYSICAL and result["device"]["note"] == ""
    assert 0 < len(result["shortlist"]) <= 10
    assert result["stage1"]["removed_by"]["latency"] > 0
    for row in result["shortlist"]:
        assert row["batch"] == 1 and row["latency_ms"] <= 4.0
        assert row["latency_ms_low"] < row["latency_ms"] < row["latency_ms_high"]
        assert row["ood"] == (row["resolution"] != 224 or bool(row["ood_reason"]))
    # a shortlisted candidate predicts as `infercast predict --device` predicts its captured graph
    first = result["shortlist"][0]
    assert infercast.predict(first["model"], device="pixel4/1large")["latency_ms"] == pytest.approx(
        first["latency_ms"], rel=1e-9
    )
    gpu = run_cli(
        "screen", "--device", "pixel4/gpu", "--space", "carb-resnet", "--n", "3000", "--max-latency-ms", "5",
        "--objectives", "latency,params", "--json",
    )  # fmt: skip
    assert gpu.returncode == 0, gpu.stderr
    screened = json.loads(gpu.stdout)
    assert "card's route, op-wise" in screened["device"]["note"]
    assert all(r["precision"] == "fp32" and r["batch"] == 1 for r in screened["shortlist"])
    with pytest.raises(ScreenError, match="predicts latency only"):
        screen(None, {"memory": 10}, "latency", space="mobile-nas", n=100, device="pixel4/gpu")
