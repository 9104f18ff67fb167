"""``local``: this machine, as the nearest shipped host recalibrated per kind of kernel from a
short campaign of one-kernel networks measured here (``infercast calibrate``).

One factor cannot carry a host predictor to another CPU: a machine with other vector units speeds
dense convolutions up by one ratio and grouped convolutions, shuffles and element-wise kernels by
others (issue 46). So calibration measures the host's own kernel networks here — the ones it
shipped with their latencies there — most informative first: every kind of kernel early, each
kind's shapes spread over its range. Each kind's factor is the geometric mean of its networks'
here / there ratios, pulled towards the machine's overall (median) ratio by ``PRIOR`` networks'
weight, so a kind measured once moves little. A prediction is the host's, times the factor of
its kernels' mix: Σ factor(kind) · predicted kernel time / Σ predicted kernel time, from the
host's op-wise kernel regressors. Its interval is the host's, widened by how uncertain the mix
factor is: each kind factor's standard error (the spread of its networks' log ratios over the
square root of its weight), weighted as the factors are, at the interval's normal quantile.

What a calibration measured lives under ``cache_root()/calibrations/<key>/`` — ``kernels.db``, a
store a rerun resumes, and ``calibration.json``, written whole once it is fitted — where the key
is this machine's CPU fingerprint and its ONNX Runtime version: another machine, or an upgraded
runtime, has no calibration until it runs one. The calibration is for the threads it was run
with (``calibrate --threads``, 1 by default); a run with other threads measures anew and
replaces it, the measurements of each kept in the store.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.graph import Graph
from infercast.machine import cpu_fingerprint, differences_here, library_version
from infercast.paths import cache_root
from infercast.predictors.devices import hosts
from infercast.predictors.devices.common import DeviceInfo, data_file
from infercast.predictors.errors import PredictorError
from infercast.predictors.fusion import kernel_table, rules_for
from infercast.predictors.host_memory import HostMemory, memory_features

NAME = "local"
CALIBRATION_FILE = "calibration.json"
STORE_FILE = "kernels.db"
MEMORY_FILE = "ort_cpu_memory.json"
CAMPAIGN = "calibration"
# a kernel network's op → the kind of kernel whose speed it measures
NETWORK_KINDS = {
    "conv": "conv",
    "dwconv": "dwconv",
    "gconv": "gconv",
    "linear": "linear",
    "pool_max": "pool",
    "pool_avg": "pool",
    "global_pool": "pool",
    "se": "elementwise",
    "add": "elementwise",
    "act": "elementwise",
    "concat": "memory",
    "split": "memory",
    "shuffle": "memory",
    "upsample": "memory",
}
# an executed kernel's op type → its kind; a type not here takes the machine's overall factor
KERNEL_KINDS = {
    **{op: op for op in ("conv", "dwconv", "gconv", "linear")},
    **dict.fromkeys(("pool_max", "pool_avg", "global_pool"), "pool"),
    **dict.fromkeys(("add", "mul", "act", "bn"), "elementwise"),
    **dict.fromkeys(("concat", "other"), "memory"),
}
# dense convolutions carry most of a CNN's time: their kind leads every round of the plan
KIND_ORDER = ("conv", "dwconv", "gconv", "elementwise", "memory", "pool", "linear")
# how many networks' weight the overall ratio has in each kind's factor
PRIOR = 2.0
# the two-sided 90 % quantile of a normal: a factor's error is an average of many networks'
NORMAL_Q = 1.645


def folder() -> Path:
    """Where this machine's calibration lives (module docstring)."""
    key = {"processor": cpu_fingerprint(), "onnxruntime": library_version("onnxruntime")}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / "calibrations" / digest


def nearest_host() -> str:
    """The shipped host whose recorded machine differs least from this one."""
    return min(
        hosts.names(), key=lambda name: len(differences_here(hosts.hosts()[name].get("fingerprint", {})))
    )


def _spread(count: int) -> list[int]:
    """Positions 0…count-1 in an order that covers the range early: the middle, then the middles
    of the halves, of the quarters…"""
    order, halves = [], [(0, count)]
    while halves:
        low, high = halves.pop(0)
        if low < high:
            middle = (low + high) // 2
            order.append(middle)
            halves += [(low, middle), (middle + 1, high)]
    return order


def plan(source: str) -> pd.DataFrame:
    """The kernel networks of host ``source`` in the order a calibration measures them, with
    ``kind`` and ``there_ms`` (their latency on that host): a round takes one network of each
    kind, each kind's networks spread over their latencies."""
    networks = hosts.kernel_networks(source)[["model", "latency_ms"]].rename(
        columns={"latency_ms": "there_ms"}
    )
    ops = networks["model"].str.extract(r"[?&]op=([a-z_]+)")[0]
    networks = networks.assign(kind=ops.map(NETWORK_KINDS)).dropna(subset=["kind"])
    queues = []
    for kind in KIND_ORDER:
        members = networks[networks["kind"] == kind].sort_values("there_ms").reset_index(drop=True)
        queues.append([members.iloc[i] for i in _spread(len(members))])
    rounds = [queue[i] for i in range(max(map(len, queues), default=0)) for queue in queues if i < len(queue)]
    return pd.DataFrame(rounds).reset_index(drop=True)


@dataclass
class Calibration:
    """The fitted numbers of one calibration (``fit``), saved as ``calibration.json``."""

    source: str
    threads: int
    factor: float  # the machine's overall ratio here / there (median over the kernel networks)
    kinds: dict[str, dict[str, float]]  # kind → factor, n (networks measured), se (of its log)
    n: int
    seconds: float
    # the channel block of ONNX Runtime's blocked layout here, which decides its tensors' sizes
    nchwc_block: int
    processor: dict[str, Any] = field(default_factory=dict)

    def save(self, path: Path) -> None:
        from infercast.files import write_cached

        write_cached(path, json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> Calibration | None:
        """The calibration at ``path``; None for one this version cannot read (written by
        another, or damaged): calibrating again refits it from the store's measurements."""
        from infercast.files import FileError, read_json

        try:
            saved = read_json(path, "calibration")
            calibration = cls(**saved)
            for figures in calibration.kinds.values():
                float(figures["factor"]), float(figures["se"]), int(figures["n"])
            int(calibration.nchwc_block)
        except (FileError, TypeError, KeyError, ValueError, AttributeError):
            return None
        return calibration

    def kind_factor(self, kind: str | None) -> float:
        return self.kinds[kind]["factor"] if kind in self.kinds else self.factor

    def kind_se(self, kind: str | None) -> float:
        # a kind never measured is the overall ratio: as uncertain as the least known kind
        return self.kinds[kind]["se"] if kind in self.kinds else max(k["se"] for k in self.kinds.values())


def fit(measured: pd.DataFrame, source: str, threads: int, seconds: float, nchwc_block: int) -> Calibration:
    """The kind factors from kernel networks measured here (``model``, ``here_ms``) against the
    latencies of host ``source`` (module docstring)."""
    rows = plan(source).merge(measured[["model", "here_ms"]], on="model")
    if rows.empty:
        raise PredictorError("no kernel network was measured: give calibration a larger budget")
    log_ratio = np.log(rows["here_ms"].to_numpy()) - np.log(rows["there_ms"].to_numpy())
    overall = float(np.median(log_ratio))
    # one network says nothing of the spread: the spread over every kind's networks stands in
    spread = float(np.std(log_ratio, ddof=1)) if len(rows) > 1 else float(abs(overall))
    kinds = {}
    for kind, members in rows.groupby("kind").indices.items():
        total, n = float(log_ratio[members].sum()), len(members)
        own = float(np.std(log_ratio[members], ddof=1)) if n > 2 else spread
        kinds[kind] = {
            "factor": float(np.exp((total + PRIOR * overall) / (n + PRIOR))),
            "n": n,
            "se": own / np.sqrt(n + PRIOR),
        }
    return Calibration(
        source=source,
        threads=threads,
        factor=float(np.exp(overall)),
        kinds=kinds,
        n=len(rows),
        seconds=seconds,
        nchwc_block=nchwc_block,
        processor=cpu_fingerprint(),
    )


def load_calibration() -> Calibration | None:
    """This machine's calibration, or None where it has none yet."""
    path = folder() / CALIBRATION_FILE
    return Calibration.load(path) if path.is_file() else None


def info(calibration: Calibration | None = None) -> DeviceInfo:
    calibration = calibration or load_calibration()
    processor = cpu_fingerprint()
    facts = "not calibrated yet: `infercast calibrate` measures it (60 s by default)"
    if calibration is not None:
        per_kind = ", ".join(
            f"{kind} ×{figures['factor']:.2f} (n {figures['n']:.0f})"
            for kind, figures in calibration.kinds.items()
        )
        facts = (
            f"{calibration.source} recalibrated here per kind of kernel from {calibration.n} kernel "
            f"networks measured in {calibration.seconds:.0f} s "
            f"(overall ×{calibration.factor:.2f}; {per_kind})"
        )
    facts += (
        "; peak memory from the graph: ONNX Runtime's weights and arena worked out, the rest fitted on "
        f"{load_memory_model().n_train_} networks measured on one machine"
    )
    runtime = library_version("onnxruntime") or "?"
    threads = calibration.threads if calibration else 1
    return DeviceInfo(
        name=NAME,
        device=f"this machine: {processor.get('model_name', 'CPU')}, "
        f"{processor.get('logical_cpus', '?')} logical CPUs",
        runtime=f"ONNX Runtime {runtime} CPU",
        setting=f"device cpu, opt_level all, threads {threads}; batch 1",
        dtype="fp32",
        source=facts,
        n_train=calibration.n if calibration else 0,
        accepts="any captured graph (as the host it was calibrated from)",
        trained_on="kernel networks measured here",
        fingerprint={"processor": processor, "libraries": {"onnxruntime": runtime}},
    )


class LocalDevice:
    """The host predictor ``calibration.source`` with its latencies scaled by each graph's kernel
    mix (module docstring)."""

    def __init__(self, calibration: Calibration) -> None:
        self.calibration = calibration
        self.info = info(calibration)
        self.host = hosts.load(calibration.source)
        self.memory = load_memory_model()

    def mix_factors(self, graphs: list[Graph]) -> tuple[np.ndarray, np.ndarray]:
        """Per graph: Σ kind factor · predicted kernel time / Σ predicted kernel time, and the
        standard error of its log (the kinds' weighted alike)."""
        host = self.host
        rules = rules_for(host.backend, host.settings, host.machine)
        tables = [kernel_table(g, rules, model=str(i)) for i, g in enumerate(graphs)]
        kernels = host.routes.opwise.predict_kernels(pd.concat(tables, ignore_index=True))
        kinds = kernels["op_type"].map(KERNEL_KINDS)
        time = kernels["latency_ms"].groupby(kernels["model"]).sum()
        ids = [str(i) for i in range(len(graphs))]

        def mixed(per_kind: Any, default: float) -> np.ndarray:
            weighted = (
                (kernels["latency_ms"] * kinds.map(per_kind).astype(float)).groupby(kernels["model"]).sum()
            )
            return (weighted / time).reindex(ids).fillna(default).to_numpy()

        calibration = self.calibration
        return (
            mixed(calibration.kind_factor, calibration.factor),
            mixed(calibration.kind_se, calibration.kind_se(None)),
        )

    def predict_graphs(self, graphs: list[Graph]) -> pd.DataFrame:
        predicted = self.host.predict_graphs(graphs)
        factor, se = self.mix_factors(graphs)
        latency = predicted["latency_ms"].to_numpy() * factor
        # the host's interval (not symmetric: the span of its routes'), each side widened
        below = np.log(predicted["latency_ms"].to_numpy() / predicted["latency_ms_low"].to_numpy())
        above = np.log(predicted["latency_ms_high"].to_numpy() / predicted["latency_ms"].to_numpy())
        scaled = predicted.assign(
            latency_ms=latency,
            latency_ms_low=latency * np.exp(-np.hypot(below, NORMAL_Q * se)),
            latency_ms_high=latency * np.exp(np.hypot(above, NORMAL_Q * se)),
            calibration_factor=factor,
        )
        for route in ("model_level_ms", "opwise_ms", "physical_ms"):
            if route in scaled:
                scaled[route] = scaled[route].to_numpy() * factor
        memory = self.memory.predict(memory_features(graphs, self.calibration.nchwc_block))
        return pd.concat([scaled.reset_index(drop=True), memory], axis=1)


def load_memory_model() -> HostMemory:
    """The shipped peak-memory model of ONNX Runtime CPU sessions (``predictors.host_memory``)."""
    return HostMemory.from_json(data_file(MEMORY_FILE).read_text())


def load() -> LocalDevice:
    calibration = load_calibration()
    if calibration is None:
        raise PredictorError("this machine has no calibration yet: run `infercast calibrate`")
    return LocalDevice(calibration)


__all__ = ["NAME", "Calibration", "LocalDevice", "fit", "folder", "load", "nearest_host", "plan"]
