"""ONNX Runtime on the CPUs of the machines infercast is developed on — ``epyc-2core/ort-cpu``
(an AMD EPYC with AVX2, no AVX-512), ``epyc-zen4-2core/ort-cpu`` (family 25 model 17, Zen 4,
with AVX-512), ``xeon-emr-2core/ort-cpu`` (an Intel Xeon of family 6 model 207, Emerald
Rapids, with AVX-512) and ``epyc-zen3-2core/ort-cpu`` (family 25 model 1, Zen 3, AVX2 without
AVX-512) —: this project's own measurements, for any graph a user captures. Each host's rows
are kept under its name in the same tables, with its machine's fingerprint (``data/ort_cpu.json``).

Data: design-space profiles (``carb-resnet``, ``mobile-nas``; end to end and per op) and a kernel
campaign (one-kernel networks, per op), measured by ``infercast profile`` with the noise-aware
protocol (the fastest round's median, ``low_ms``). No complete zoo network (pytorchcv, timm,
torchvision) measured on that host is among them: those are the card's test set. What ships
(``data/ort_cpu_configs.parquet``: each design-space config's predictor features and latency;
``data/ort_cpu_ops.parquet``: their op rows and the kernel networks';
``data/ort_cpu_kernel_networks.parquet``: each kernel network's latency and device features;
``data/ort_cpu.json``:
the host, runtime, settings and campaigns) is built by ``python tools/device_tables.py
--host-db DB …``.

The predictor is three routes: the cascade blend on graph features and the op-wise route
(kernel regressors + overhead model), trained by the same builder from those tables and shipped
trained (``data/routes/<device>.zip``: XGBoost JSON, LightGBM text, forest JSON; training them on
first use made a first prediction slow), and the Σ cost × work model on device features
(``predictors.physical``, as for the phones) of the configs and the kernel networks, fitted on
first use. Their errors have different causes (the blend follows networks like the training
ones; the op-wise route adds up kernels it has seen in other networks; Σ cost × work adds up the
network's work at fitted rates). Which one a host's latency is (its ``route`` in
``data/ort_cpu.json``) is chosen on its training configs alone by ``benchmarks/host_card.py``
(RESULTS.md "Host CPU"): the lowest worst-case median error, either design space held out
entirely, among the routes whose interval holds. For ``epyc-2core`` that was the geometric mean
of the three (worst median error 15.8 %; the op-wise route and Σ cost × work alone had lower
ones, 8.6 % and 8.4 %, but their intervals covered 47 % and 38 % of the held-out ``mobile-nas``
configs, the mean's span of the three intervals 98 %); for ``epyc-zen4-2core``, once the
op-wise route priced ONNX Runtime's layout copies and splits, the blend given the op-wise
estimate (``combined``, shipped trained with the other two); for ``xeon-emr-2core`` the mean of
the three again (worst held-out-space median 26.3 %; the op-wise route's 29.3 % came with
intervals covering 30 % of the held-out ``mobile-nas`` configs); for ``epyc-zen3-2core`` the
mean of the three (worst held-out-space median 23.7 %; Σ cost × work's 7.1 % came with intervals
covering 77 % of the held-out ``mobile-nas`` configs). A graph any route finds
unusual is ``ood``. Screening a design space for the host uses Σ cost × work alone: it is linear in
features with a closed form for a million candidates.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from infercast.features import featurize
from infercast.graph import Graph
from infercast.predictors.data import feature_frame
from infercast.predictors.devices.common import (
    DeviceInfo,
    cards,
    data_file,
    load_packed,
    routes_archive,
    trained_once,
)
from infercast.predictors.devices.common import ship as ship_trained
from infercast.predictors.devices.costs import fit_configs_and_kernels
from infercast.predictors.devices.features import DEVICE_FEATURES, device_feature_frame
from infercast.predictors.errors import PredictorError
from infercast.predictors.ood import either_ood
from infercast.predictors.opwise import OpWise
from infercast.predictors.physical import PhysicalLatency
from infercast.predictors.routes import (
    BLEND,
    COMBINED,
    MEAN,
    OPWISE,
    OPWISE_ESTIMATE,
    PHYSICAL,
    geometric_mean,
)

if TYPE_CHECKING:
    from infercast.predictors.blend import CascadeBlend

CONFIGS_FILE = "ort_cpu_configs.parquet"
OPS_FILE = "ort_cpu_ops.parquet"
KERNEL_NETWORKS_FILE = "ort_cpu_kernel_networks.parquet"
META_FILE = "ort_cpu.json"
# a host learned from 128–224² inputs: no one input side marks a network as unlike its training
INPUT_SIDE = None
# settings chosen when the routes trained on first use (the defaults take too long for that): the
# op-wise route with one learner (XGBoost, the one cross-validation picked for most kernel types)
# and 100 trees instead of choosing among three with 400; the blend with the NB201 devices' counts.
# One overhead form, as when the card was measured: the card's real networks were measured on that
# host, and a route trained otherwise would ship with a card that no longer describes it
OPWISE_PARAMS = {"kernel_learner": "xgboost", "n_estimators": 100, "overhead": "auto"}
BLEND_PARAMS = {"n_estimators": 200, "forest_estimators": 100}
# the routes a host's ``route`` may name
SHIPPABLE = (MEAN, COMBINED, BLEND, OPWISE, PHYSICAL)


@cache
def hosts() -> dict[str, dict[str, Any]]:
    """Per shipped host device: host, runtime, settings, campaigns (``data/ort_cpu.json``)."""
    path = data_file(META_FILE)
    return json.loads(path.read_text())["devices"] if path.is_file() else {}


@cache
def _table(name: str) -> pd.DataFrame:
    return pd.read_parquet(data_file(name))


def forget_tables() -> None:
    """Read the shipped tables and descriptions again on next use (a tool rewrote them)."""
    hosts.cache_clear()
    _table.cache_clear()


def names() -> list[str]:
    return sorted(hosts())


def _info(name: str) -> DeviceInfo:
    host = hosts()[name]
    settings = ", ".join(f"{k} {v}" for k, v in host["settings"].items())
    return DeviceInfo(
        name=name,
        device=host["device"],
        runtime=f"ONNX Runtime {host['onnxruntime']} CPU",
        setting=f"{settings}; batch 1",
        dtype="fp32",
        source=host["source"],
        n_train=int(host["n_configs"]),
        accepts="any captured graph (trained on carb-resnet and mobile-nas configs at 128–224²)",
        trained_on="design-space configs",
        card=cards().get(name, {}),
        fingerprint=host.get("fingerprint", {}),
    )


def infos() -> list[DeviceInfo]:
    return [_info(name) for name in names()]


def training_tables(name: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The shipped training data of ``name``: predictor features of its design-space configs, their
    ``model`` (config id), ``space``, ``latency_ms`` and device features, their op rows, and the
    kernel networks'."""
    configs = _table(CONFIGS_FILE)
    configs = configs[configs["device"] == name].drop(columns="device").reset_index(drop=True)
    ops = _table(OPS_FILE)
    ops = ops[ops["device"] == name].drop(columns="device")
    kernel = ops["kernel_campaign"].to_numpy(dtype=bool)
    described = ["model", "space", "latency_ms", *DEVICE_FEATURES]
    return (
        configs.drop(columns=described),
        configs[described],
        ops[~kernel].drop(columns="kernel_campaign").reset_index(drop=True),
        ops[kernel].drop(columns="kernel_campaign").reset_index(drop=True),
    )


def kernel_networks(name: str) -> pd.DataFrame:
    """The one-kernel networks of ``name``'s kernel campaigns: ``model``, ``latency_ms`` and device
    features (none for a host shipped without them)."""
    if not data_file(KERNEL_NETWORKS_FILE).is_file():
        return pd.DataFrame(columns=["model", "latency_ms", *DEVICE_FEATURES])
    table = _table(KERNEL_NETWORKS_FILE)
    return table[table["device"] == name].drop(columns="device").reset_index(drop=True)


def physical(name: str) -> PhysicalLatency:
    """The Σ cost × work route of ``name``, fitted on its design-space configs and kernel networks
    on first use and kept in the user cache (the fit imports scikit-learn's folds, slower than the
    fit; loading it does not); the interval's residuals come from holding each design space out,
    the nearest the configs get to a network unlike all of them."""

    def fit() -> PhysicalLatency:
        _, e2e, _, _ = training_tables(name)
        kernels = kernel_networks(name)
        return fit_configs_and_kernels(
            e2e,
            e2e["latency_ms"].to_numpy(),
            e2e["space"].to_numpy(),
            kernels,
            kernels["latency_ms"].to_numpy(),
        )

    return trained_once(
        f"{name}/physical",
        (CONFIGS_FILE, KERNEL_NETWORKS_FILE),
        fit,
        lambda model, folder: model.save(folder, {"device": name, "source": hosts()[name]["source"]}),
        PhysicalLatency.load,
    )


class Routes:
    """The trained routes, saved as predictor directories under one folder: the blend, the
    op-wise route and, for a host that ships it, the blend given the op-wise estimate."""

    def __init__(self, blend: CascadeBlend, opwise: OpWise, combined: CascadeBlend | None = None) -> None:
        self.blend = blend
        self.opwise = opwise
        self.combined = combined

    def save(self, folder: Path, name: str) -> None:
        self.blend.save(folder / "blend", {"device": name})
        self.opwise.save(folder / "opwise", {"device": name})
        if self.combined is not None:
            self.combined.save(folder / COMBINED, {"device": name})
        (folder / "meta.json").write_text(json.dumps({"device": name, "route": route(name)}))

    @classmethod
    def load(cls, folder: Path) -> Routes:
        # the blend's module imports pandas and the blend's machinery: listing the devices never loads it
        from infercast.predictors.blend import CascadeBlend

        combined = CascadeBlend.load(folder / COMBINED) if (folder / COMBINED).is_dir() else None
        return cls(CascadeBlend.load(folder / "blend"), OpWise.load(folder / "opwise"), combined)


def route(name: str) -> str:
    """The route host ``name`` ships (``data/ort_cpu.json``; the geometric mean of three where it
    names none): the one ``benchmarks/host_card.py`` finds with the lowest worst-case median
    error, a design space held out, among those whose interval holds."""
    return str(hosts()[name].get("route", MEAN))


def ship(name: str) -> Path:
    """Train the blend and op-wise routes of host ``name`` on its shipped tables and ship them
    zipped (replacing earlier ones): a first prediction then loads, never trains."""
    routes = train_routes(name)
    return ship_trained(lambda folder: routes.save(folder, name), routes_archive(name))


def train_routes(name: str) -> Routes:
    """The blend and op-wise routes of ``name`` trained on its shipped tables (deterministic: the
    shipped ones are this, ``python tools/device_tables.py --host-db …`` writes them)."""
    from infercast.predictors.blend import CascadeBlend

    x, e2e, ops, kernel_ops = training_tables(name)
    blend = CascadeBlend(order=("latency",), seed=0, **BLEND_PARAMS).fit(x, e2e[["latency_ms"]])
    opwise = OpWise(seed=0, **OPWISE_PARAMS).fit(ops, e2e[["model", "latency_ms"]], kernel_ops=kernel_ops)
    combined = None
    if route(name) == COMBINED:
        # as `infercast train` stacks them: the op-wise estimate of each config out-of-fold
        estimate = np.log(opwise.oof_latency_ms_.reindex(e2e["model"]).to_numpy(dtype=np.float64))
        combined = CascadeBlend(order=("latency",), estimates=(OPWISE_ESTIMATE,), seed=0, **BLEND_PARAMS)
        combined.fit(x.assign(**{OPWISE_ESTIMATE: estimate}), e2e[["latency_ms"]])
    return Routes(blend, opwise, combined)


class OrtCpuDevice:
    """A host measured by this project: the shipped blend and op-wise routes (and the blend given
    the op-wise estimate, where the host ships it), and the Σ cost × work route fitted on first
    use; its latency is the host's ``route``, the others beside it."""

    def __init__(self, name: str) -> None:
        self.info = _info(name)
        self.settings: dict[str, Any] = hosts()[name]["settings"]
        self.backend: str = hosts()[name]["backend"]
        # hosts shipped before op rows named the layout carry no block: one algorithm, as trained
        self.machine = {"nchwc_block": int(hosts()[name].get("nchwc_block", 0))}
        self.routes = load_packed(routes_archive(name), Routes.load)
        self.route = route(name)
        if self.route not in SHIPPABLE or (self.route == COMBINED and self.routes.combined is None):
            raise PredictorError(
                f"{name}: data/ort_cpu.json names route {self.route!r}, which its shipped routes cannot "
                f"give (a host ships one of {', '.join(SHIPPABLE)}); rebuild them with hosts.ship"
            )
        self.physical = physical(name)

    def predict_graphs(self, graphs: list[Graph]) -> pd.DataFrame:
        x = feature_frame([featurize(g) for g in graphs], self.settings)
        blend = self.routes.blend.predict(x).reset_index(drop=True)
        opwise = self.routes.opwise.predict_graphs(graphs, self.backend, self.settings, self.machine)
        by_work = self.physical.predict(device_feature_frame(graphs))
        routes = {BLEND: blend, OPWISE: opwise, PHYSICAL: by_work.reset_index(drop=True)}
        if self.route == MEAN:
            shown = geometric_mean(*routes.values())
        elif self.route == COMBINED:
            estimate = np.log(opwise["latency_ms"].to_numpy(dtype=np.float64))
            shown = self.routes.combined.predict(x.assign(**{OPWISE_ESTIMATE: estimate}))
            shown = shown.reset_index(drop=True)
            # the op-wise estimate is an input: its doubts are the combined route's too
            shown["ood"], shown["ood_reason"] = either_ood(shown, opwise)
        else:
            shown = routes[self.route]
        return shown[["latency_ms", "latency_ms_low", "latency_ms_high", "ood", "ood_reason"]].assign(
            route=self.route,
            model_level_ms=blend["latency_ms"].to_numpy(),
            opwise_ms=opwise["latency_ms"].to_numpy(),
            physical_ms=by_work["latency_ms"].to_numpy(),
        )


def load(name: str) -> OrtCpuDevice:
    return OrtCpuDevice(name)
