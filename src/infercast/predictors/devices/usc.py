"""Six phones in 90 settings (usc-mobile: TFLite on CPU clusters fp32 / int8 and the GPU
delegate), learned from 102 real pytorchcv networks measured end to end.

Data: qed-usc/mobile-ml-benchmark (MIT licence), Z. Li, M. Paolieri, L. Golubchik, "A Benchmark
for ML Inference Latency on Mobile Devices", EdgeSys '24. What ships (``data/usc_networks.parquet``,
built by ``python tools/device_tables.py``) is derived: infercast's device features of
each network, captured here with ``pretrained=False`` at 224×224, its architecture family, and
the mean latency of each setting in milliseconds. The predictor of a setting is fitted on first
use (milliseconds: non-negative least squares on 102 rows) and kept in the user cache.
"""

from __future__ import annotations

import re
from functools import cache

import pandas as pd

from infercast.graph import Graph
from infercast.predictors.devices import tflite_gpu
from infercast.predictors.devices.common import DeviceInfo, cards, data_file, trained_once
from infercast.predictors.devices.costs import estimator
from infercast.predictors.devices.features import device_feature_frame
from infercast.predictors.physical import PhysicalLatency
from infercast.predictors.routes import OPWISE, PHYSICAL

TABLE = "usc_networks.parquet"
SOURCE = "usc-mobile (qed-usc/mobile-ml-benchmark, MIT; Li, Paolieri, Golubchik, EdgeSys '24)"
LATENCY_PREFIX = "latency_ms@"
INPUT_SIDE = 224


# Coarse on purpose: a held-out family leaves no close relative in training (every ResNet
# variant together, every MobileNet generation together, both RegNets together).
_FAMILIES = (
    ("resnet", r"^(pre|se|sepre)?resne(t|xt)"),
    ("squeezenet", r"^squeeze"),
    ("mobilenet", r"^(fd)?mobilenet"),
    ("regnet", r"^regnet"),
    ("nas-mobile", r"^(mnasnet|proxylessnas|spnasnet|fbnet)"),
    ("efficientnet", r"^efficientnet"),
    ("densenet", r"^densenet"),
    ("hardnet", r"^hardnet"),
    ("hrnet", r"^hrnet"),
)


def family(model: str) -> str:
    """The architecture family of a pytorchcv network name (its own name when no rule matches:
    DLA, BagNet, BN-Inception, GhostNet, PeleeNet, VoVNet, DiracNet stand alone)."""
    for name, pattern in _FAMILIES:
        if re.match(pattern, model):
            return name
    return re.sub(r"\d.*$", "", model)


def device_name(column: str) -> str:
    """``pixel4|gpu|float`` → ``pixel4/gpu``; ``s10|1large|quant`` → ``s10/1large/int8``."""
    device, setting, dtype = column.split("|")
    return f"{device}/{setting}" + ("/int8" if dtype == "quant" else "")


@cache
def table() -> pd.DataFrame:
    return pd.read_parquet(data_file(TABLE))


_CORE_KINDS = {"large": "large", "med": "medium", "small": "small"}


def cores(setting: str) -> str:
    """``1large1med`` → ``1 large + 1 medium cores``: which cores of a big.LITTLE CPU ran."""
    parts = [f"{n} {_CORE_KINDS[kind]}" for n, kind in re.findall(r"(\d+)(large|med|small)", setting)]
    return " + ".join(parts) + (" core" if setting in ("1large", "1med", "1small") else " cores")


def _info(name: str, n_train: int) -> DeviceInfo:
    device, setting, *quantised = name.split("/")
    gpu = setting == "gpu"
    return DeviceInfo(
        name=name,
        device=device,
        runtime="TFLite GPU delegate (fp16)" if gpu else f"TFLite CPU, {cores(setting)}",
        setting=setting,
        dtype="int8" if quantised else ("fp16" if gpu else "fp32"),
        source=SOURCE,
        n_train=n_train,
        accepts="any CNN (captured at its input size; trained at 224×224)",
        card=cards().get(name, {}),
    )


def names() -> list[str]:
    return [c.removeprefix(LATENCY_PREFIX) for c in table().columns if c.startswith(LATENCY_PREFIX)]


def physical(name: str) -> PhysicalLatency:
    """The Σ cost × work predictor of one setting, fitted on the 102 networks on first use and
    kept in the user cache: the fit imports SciPy's optimiser and scikit-learn's folds (slower than
    the fit itself), loading it neither."""

    def fit() -> PhysicalLatency:
        networks = table()
        return estimator().fit(
            networks, networks[LATENCY_PREFIX + name].to_numpy(), groups=networks["family"].to_numpy()
        )

    return trained_once(
        name,
        (TABLE,),
        fit,
        lambda model, folder: model.save(folder, {"device": name, "source": SOURCE}),
        PhysicalLatency.load,
    )


class UscDevice:
    """One usc-mobile setting: ``PhysicalLatency`` on the device features; for the GPU delegate
    also the op-wise route (``tflite_gpu``), which leads where it exists (its card is better)."""

    def __init__(self, name: str) -> None:
        networks = table()
        self.model = physical(name)
        self.info = _info(name, len(networks))
        self.opwise = tflite_gpu.opwise(name) if name.endswith("/gpu") else None

    def predict_graphs(self, graphs: list[Graph]) -> pd.DataFrame:
        x = device_feature_frame(graphs)
        out = self.model.predict(x)
        out["route"] = PHYSICAL
        if self.opwise is not None:
            out["model_level_ms"] = out["latency_ms"]
            ops = tflite_gpu.on_phone(
                pd.concat([tflite_gpu.graph_ops(g, str(i)) for i, g in enumerate(graphs)], ignore_index=True),
                self.info.name.split("/")[0],
            )
            if len(ops):
                by_ops = self.opwise.predict(ops)
                for i in range(len(graphs)):
                    if str(i) in by_ops.index:  # a network with no delegate kernel keeps the model level
                        row = by_ops.loc[str(i)]
                        for column in (
                            "latency_ms",
                            "latency_ms_low",
                            "latency_ms_high",
                            "ood",
                            "ood_reason",
                        ):
                            out.at[i, column] = row[column]
                        out.at[i, "route"] = OPWISE
        for i, graph in enumerate(graphs):
            side = tuple(graph.input_shape[2:])
            if side != (INPUT_SIDE, INPUT_SIDE):
                shape = "×".join(map(str, graph.input_shape))
                note = f"trained on 1×3×{INPUT_SIDE}×{INPUT_SIDE} inputs, this one is {shape}"
                reason = out.at[i, "ood_reason"]
                out.at[i, "ood_reason"] = f"{reason}; {note}" if reason else note
                out.at[i, "ood"] = True
        return out


def infos() -> list[DeviceInfo]:
    n = len(table())
    return [_info(name, n) for name in names()]


def load(name: str) -> UscDevice:
    return UscDevice(name)


__all__ = ["UscDevice", "device_name", "infos", "load", "names"]
