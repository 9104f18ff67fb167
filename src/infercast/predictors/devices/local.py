"""``local``: this machine, as the nearest shipped host recalibrated per kind of kernel from a
short campaign of one-kernel networks (and design-space configs) measured here (``infercast calibrate``).

One factor cannot carry a host predictor to another CPU: other vector units speed dense
convolutions up by one ratio and grouped convolutions, shuffles and element-wise kernels by others
(issue 46). So calibration measures the host's own kernel networks here, most informative first:
every kind early, four dense convolutions a round (their factor's error goes into every
prediction), each kind's shapes spread over its range. A convolution ONNX Runtime lays out
otherwise here than there (8-channel groups run plain on a 16-channel block) is a kind of its own
(``layout_class``). Each kind's factor is the geometric mean of its here / there ratios weighted
by their time there (a tiny network's time is mostly fixed cost), pulled towards the machine's
median ratio — a layout class towards its kind's — by ``PRIOR`` networks' weight. A prediction is
the host's times the factor of its kernels' mix (Σ factor(kind) · predicted kernel time / Σ
predicted kernel time, from the host's op-wise kernel regressors); design-space configs measured
beside the kernel networks may refit the factors (``local_networks``). Its interval is the
host's, widened by each kind factor's standard error (the weighted spread of its log ratios over
the square root of their effective number and the prior's weight), at the normal quantile.

What a calibration measured lives under ``cache_root()/calibrations/<key>/`` — ``kernels.db``, a
store a rerun resumes, and ``calibration.json``, written whole once fitted — keyed by this
machine's CPU fingerprint and ONNX Runtime version, and for the threads it ran with (``calibrate
--threads``; a run with other threads measures anew and replaces it, the store keeps both).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.graph import Graph
from infercast.graph.ops import MOVEMENT_TYPES
from infercast.machine import cpu_fingerprint, distance_here, library_version
from infercast.paths import cache_root
from infercast.predictors.devices import hosts
from infercast.predictors.devices.common import DeviceInfo, data_file
from infercast.predictors.errors import PredictorError
from infercast.predictors.fusion import ort_blocks, rules_for
from infercast.predictors.host_memory import HostMemory, memory_features
from infercast.predictors.movement import executed_kernels

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
    **dict.fromkeys(("concat", "other", *MOVEMENT_TYPES), "memory"),
}
# dense convolutions carry most of a CNN's time: their kind leads every round of the plan
KIND_ORDER = ("conv", "dwconv", "gconv", "elementwise", "memory", "pool", "linear")
# networks of a kind per round of the plan, where not one: dense convolutions carry nine tenths of
# the real networks' predicted kernel time, and their factor's error goes into every prediction
SLOTS = {"conv": 4}
# the kinds whose layout (blocked or plain) may differ between two machines
CONV_CLASSES = frozenset({"conv", "dwconv", "gconv"})
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
    """The shipped host whose recorded machine is nearest this one (``machine.distance_here``)."""
    return min(hosts.names(), key=lambda name: distance_here(hosts.hosts()[name].get("fingerprint", {})))


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


def layout_class(kind: str, c_in: int, c_out: int, groups: int, there: int, here: int) -> str:
    """A kernel's kind, or for a convolution that ONNX Runtime lays out otherwise here than on
    the host (one machine's channel block ``here``, the other's ``there``), the kind and the
    layout it moves to: a grouped convolution blocked there may run plain here, several times
    slower per FLOP, which no factor of its kind carries."""
    if kind not in CONV_CLASSES:
        return kind
    blocked = [bool(block) and ort_blocks(c_in, c_out, groups, block) for block in (there, here)]
    return kind if blocked[0] == blocked[1] else f"{kind}→{'blocked' if blocked[1] else 'plain'}"


def plan(source: str, nchwc_block: int) -> pd.DataFrame:
    """The kernel networks of host ``source`` in the order a calibration on a machine of channel
    block ``nchwc_block`` measures them, with ``kind`` (``layout_class``) and ``there_ms`` (their
    latency on that host): a round takes ``SLOTS`` networks of a kind (one where it names none),
    each kind's networks spread over their latencies."""
    networks = hosts.kernel_networks(source)[["model", "latency_ms"]].rename(
        columns={"latency_ms": "there_ms"}
    )
    params = (
        networks["model"]
        .str.extract(r"[?&]op=(?P<op>[a-z_]+)")
        .join(
            networks["model"].str.extract(
                r"[?&]cin=(?P<cin>\d+).*?[?&]cout=(?P<cout>\d+).*?[?&]groups=(?P<groups>\d+)"
            )
        )
    )
    there = int(hosts.hosts()[source].get("nchwc_block") or 0)
    kinds = [
        layout_class(NETWORK_KINDS[op], int(c_in), int(c_out), int(groups), there, nchwc_block)
        if op in NETWORK_KINDS and pd.notna(c_in) else NETWORK_KINDS.get(op)
        for op, c_in, c_out, groups in params[["op", "cin", "cout", "groups"]].itertuples(index=False)
    ]  # fmt: skip
    networks = networks.assign(kind=kinds).dropna(subset=["kind"])
    queues = []
    classes = sorted(set(networks["kind"]), key=lambda kind: (KIND_ORDER.index(kind.split("→")[0]), kind))
    for kind in classes:
        members = networks[networks["kind"] == kind].sort_values("there_ms").reset_index(drop=True)
        order = [members.iloc[i] for i in _spread(len(members))]
        queues.append([order[i : i + SLOTS.get(kind, 1)] for i in range(0, len(order), SLOTS.get(kind, 1))])
    rounds = [
        network
        for i in range(max(map(len, queues), default=0))
        for queue in queues
        if i < len(queue)
        for network in queue[i]
    ]
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
    networks: int = 0  # design-space configs measured beside the kernel networks (``local_networks``)
    pull: float | None = 0.1  # how far they moved the factors (None: not at all; 0.1 before a choice)

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

    def configs_said(self) -> str:
        """What the design-space configs measured beside the kernel networks did to their factors."""
        kept = "left those factors as they were (one design space's refit predicted the other's worse)"
        done = kept if self.pull is None else f"refitted those factors (pull {self.pull:g})"
        return f"; {self.networks} design-space configs measured beside them {done}" if self.networks else ""

    def measured_kind(self, kind: str | None) -> str | None:
        """The kind as measured: itself, else the kind of its layout class, else None."""
        if not isinstance(kind, str):  # a kernel type of no kind
            return None
        for name in (kind, kind.split("→")[0]):
            if name in self.kinds:
                return name
        return None

    def kind_factor(self, kind: str | None) -> float:
        measured = self.measured_kind(kind)
        return self.kinds[measured]["factor"] if measured else self.factor

    def kind_se(self, kind: str | None) -> float:
        measured = self.measured_kind(kind)
        # a kind never measured is the overall ratio: as uncertain as the least known kind
        return self.kinds[measured]["se"] if measured else max(k["se"] for k in self.kinds.values())


def _weighted(values: np.ndarray, weights: np.ndarray, spread: float) -> tuple[float, float, float]:
    """The mean of log ratios weighted by the networks' time there, as a network's time weighs
    its kernels (a large kernel's ratio tells more of a real network's than a tiny one's, whose
    time is mostly fixed cost), their weighted spread (``spread`` where two say nothing of it) and
    the effective number of networks, (Σw)² / Σw²."""
    share = weights / weights.sum()
    mean = float(share @ values)
    count = float(1 / (share @ share))
    if len(values) <= 2:
        return mean, spread, count
    return mean, float(np.sqrt(share @ (values - mean) ** 2 * len(values) / (len(values) - 1))), count


def fit(measured: pd.DataFrame, source: str, threads: int, seconds: float, nchwc_block: int) -> Calibration:
    """The kind factors from kernel networks measured here (``model``, ``here_ms``) against the
    latencies of host ``source`` (module docstring)."""
    rows = plan(source, nchwc_block).merge(measured[["model", "here_ms"]], on="model")
    if rows.empty:
        raise PredictorError("no kernel network was measured: give calibration a larger budget")
    log_ratio = np.log(rows["here_ms"].to_numpy()) - np.log(rows["there_ms"].to_numpy())
    overall = float(np.median(log_ratio))
    # one network says nothing of the spread: the spread over every kind's networks stands in
    spread = float(np.std(log_ratio, ddof=1)) if len(rows) > 1 else float(abs(overall))
    kinds: dict[str, dict[str, float]] = {}
    weights = rows["there_ms"].to_numpy()
    # a kind before its layout classes ("gconv" sorts before "gconv→plain"): a class is pulled
    # towards its kind's factor, a kind towards the overall ratio
    for kind, members in sorted(rows.groupby("kind").indices.items()):
        base = kinds.get(kind.split("→")[0])
        prior = np.log(base["factor"]) if base else overall
        mean, std, effective = _weighted(log_ratio[members], weights[members], spread)
        kinds[kind] = {
            "factor": float(np.exp((effective * mean + PRIOR * prior) / (effective + PRIOR))),
            "n": len(members),
            "se": std / np.sqrt(effective + PRIOR),
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
            f"{calibration.source} recalibrated here per kind of kernel from {calibration.n} kernel networks"
            f" measured in {calibration.seconds:.0f} s (overall ×{calibration.factor:.2f}; {per_kind})"
            f"{calibration.configs_said()}"
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
        n_train=calibration.n + calibration.networks if calibration else 0,
        accepts="any captured graph (as the host it was calibrated from)",
        trained_on="kernel networks and design-space configs measured here",
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

    def kind_times(self, graphs: list[Graph]) -> pd.DataFrame:
        """Per graph (a row each, in order) the host's predicted kernel time of each kind (a
        column each; "" for kernels of no kind)."""
        host = self.host
        rules = rules_for(host.backend, host.settings, host.machine)
        tables = [executed_kernels(g, rules, model=str(i)) for i, g in enumerate(graphs)]
        kernels = host.routes.opwise.predict_kernels(pd.concat(tables, ignore_index=True))
        there, here = rules.nchwc_block, self.calibration.nchwc_block
        kinds = pd.Series(
            [
                layout_class(kind, int(c_in), int(c_out), int(groups), there, here)
                if kind in CONV_CLASSES else kind if isinstance(kind, str) else ""
                for kind, c_in, c_out, groups in zip(
                    kernels["op_type"].map(KERNEL_KINDS), kernels["c_in"], kernels["c_out"],
                    kernels["groups"].fillna(1), strict=True,
                )
            ],
            index=kernels.index,
        )  # fmt: skip
        times = kernels["latency_ms"].groupby([kernels["model"], kinds]).sum().unstack(fill_value=0.0)
        return times.reindex([str(i) for i in range(len(graphs))], fill_value=0.0)

    def mix_factors(self, graphs: list[Graph]) -> tuple[np.ndarray, np.ndarray]:
        """Per graph: Σ kind factor · predicted kernel time / Σ predicted kernel time, and the
        standard error of its log (the kinds' weighted alike)."""
        times = self.kind_times(graphs)
        total = times.to_numpy().sum(axis=1)
        calibration = self.calibration

        def mixed(per_kind: Any, default: float) -> np.ndarray:
            weighted = times.to_numpy() @ np.array([per_kind(kind or None) for kind in times.columns])
            return np.where(total > 0, weighted / np.where(total > 0, total, 1.0), default)

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


@cache
def load_memory_model() -> HostMemory:
    """The shipped peak-memory model of ONNX Runtime CPU sessions (``predictors.host_memory``)."""
    return HostMemory.from_json(data_file(MEMORY_FILE).read_text())


def load() -> LocalDevice:
    calibration = load_calibration()
    if calibration is None:
        raise PredictorError("this machine has no calibration yet: run `infercast calibrate`")
    return LocalDevice(calibration)


__all__ = ["NAME", "Calibration", "LocalDevice", "fit", "folder", "load", "nearest_host", "plan"]
