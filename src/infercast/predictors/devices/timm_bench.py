"""Desktop GPUs (RTX 3090, RTX 4090) and a laptop CPU (i7-12700H) running PyTorch, learned from
timm's public benchmark tables: about a thousand image models per table, CNNs, vision
transformers and hybrids, each timed at a large batch (GPUs) or batch 1 (the CPU).

Data: huggingface/pytorch-image-models (timm), ``results/benchmark-infer-*.csv`` (Apache-2.0).
What ships (``data/timm_networks.parquet``, built by ``python tools/timm_tables.py``) is derived:
each model captured here without weights at the row's input size, its work as PyTorch runs it
eagerly (``eager.py``: per sample and per step, captured at batches 1 and 2), its architecture
family, and each table's batch and time per sample. A setting's predictor is Σ cost × work per
sample (``physical``) at the table's batch, fitted on first use and kept in the user cache; a
prediction is the time of one step at the input's batch. The tables hold no energy or memory:
these devices predict latency only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from infercast.graph import Graph
from infercast.predictors.devices.common import DeviceInfo, cards, data_file, trained_once
from infercast.predictors.devices.eager import GROUPS, SMALL_MFLOPS, at_batch, eager_work_frame
from infercast.predictors.devices.work_mix import WorkMix
from infercast.predictors.physical import PhysicalLatency
from infercast.predictors.routes import PHYSICAL

TABLE = "timm_networks.parquet"
SOURCE = "timm benchmark tables (huggingface/pytorch-image-models results/, Apache-2.0)"
MS_PREFIX = "ms_per_sample@"
BATCH_PREFIX = "batch@"
LATENCY_ONLY = "the public tables hold no energy or memory"


@dataclass(frozen=True)
class Setting:
    """One of timm's tables: the machine and how PyTorch ran on it."""

    device: str
    torch: str
    dtype: str
    layout: str
    compiled: bool
    table: str  # timm's file name, without ``benchmark-infer-`` and ``.csv``
    processor: str = "gpu"

    @property
    def runtime(self) -> str:
        mode = "torch.compile" if self.compiled else "eager"
        return f"PyTorch {self.torch}, {mode}, {self.layout}"


_3090, _4090, _I7 = "NVIDIA RTX 3090", "NVIDIA RTX 4090", "Intel i7-12700H (laptop CPU)"
_AMP, _FP32 = "fp16 autocast", "fp32"
SETTINGS: dict[str, Setting] = {
    "rtx4090/torch-amp": Setting(_4090, "2.9.1", _AMP, "NCHW", False, "amp-nchw-pt291-cu128-4090"),
    "rtx4090/torch-amp-compile": Setting(
        _4090, "2.9.1", _AMP, "NCHW", True, "amp-nchw-pt291-cu128-4090-dynamo"
    ),
    "rtx4090/torch-amp/pt2.4": Setting(_4090, "2.4", _AMP, "NCHW", False, "amp-nchw-pt240-cu124-rtx4090"),
    "rtx4090/torch-amp-nhwc/pt2.4": Setting(
        _4090, "2.4", _AMP, "NHWC", False, "amp-nhwc-pt240-cu124-rtx4090"
    ),
    "rtx4090/torch-amp-compile/pt2.4": Setting(
        _4090, "2.4", _AMP, "NCHW", True, "amp-nchw-pt240-cu124-rtx4090-dynamo"
    ),
    "rtx3090/torch-amp": Setting(_3090, "2.4", _AMP, "NCHW", False, "amp-nchw-pt240-cu124-rtx3090"),
    "rtx3090/torch-amp-nhwc": Setting(_3090, "2.4", _AMP, "NHWC", False, "amp-nhwc-pt240-cu124-rtx3090"),
    "rtx3090/torch-amp/pt2.1": Setting(_3090, "2.1", _AMP, "NCHW", False, "amp-nchw-pt210-cu121-rtx3090"),
    "rtx3090/torch-amp-nhwc/pt2.1": Setting(
        _3090, "2.1", _AMP, "NHWC", False, "amp-nhwc-pt210-cu121-rtx3090"
    ),
    "rtx3090/torch-amp/pt1.13": Setting(_3090, "1.13", _AMP, "NCHW", False, "amp-nchw-pt113-cu117-rtx3090"),
    "rtx3090/torch-amp-nhwc/pt1.13": Setting(
        _3090, "1.13", _AMP, "NHWC", False, "amp-nhwc-pt113-cu117-rtx3090"
    ),
    "i7-12700h/torch-compile": Setting(
        _I7, "2.4", _FP32, "NCHW", True, "fp32-nchw-pt240-cpu-i7_12700h-dynamo", "cpu"
    ),
}

# Σ cost × work per sample: FLOPs and bytes of each group of operators, the kernels launched
# and the weights read once a step (both shared by the step's samples), and the step's own
# overhead; at most one small-product column, if grouped cross-validation keeps it
FEATURES: tuple[str, ...] = (
    *(f"gflops_{g}" for g in GROUPS),
    *(f"mb_{g}" for g in GROUPS),
    "kernels_per_sample",
    "mb_weights_per_sample",
    "steps_per_sample",
)
CANDIDATES: tuple[str, ...] = tuple(f"gflops_products_under_{m}m" for m in SMALL_MFLOPS)
# the coarse kind of work of each column: arithmetic, memory traffic, and what a launch or a step
# costs whatever its work (adapted predictors saved before ``recalibrated`` recalibrated each
# column on its own name these)
KINDS: dict[str, str] = {
    column: "compute" if column.startswith("gflops") else "memory" if column.startswith("mb") else "launches"
    for column in FEATURES + CANDIDATES
}


def family(model: str) -> str:
    """A timm model's architecture family: the leading word of its name, without the prefix of a
    port (``tf_efficientnet_b0`` → ``efficientnet``, ``vit_base_patch16_224`` → ``vit``)."""
    match = re.match(r"[a-z]+", re.sub(r"^(tf|gluon|legacy)_", "", model))
    return match.group(0) if match else model


@cache
def table() -> pd.DataFrame:
    return pd.read_parquet(data_file(TABLE))


def names() -> list[str]:
    columns = set(table().columns)
    return [name for name in SETTINGS if MS_PREFIX + name in columns]


def features(work: pd.DataFrame, batch: np.ndarray) -> pd.DataFrame:
    """``FEATURES`` and ``CANDIDATES`` from rows of ``eager.WORK_COLUMNS`` run at ``batch``."""
    batch = np.asarray(batch, dtype=np.float64)
    out = work[[c for c in FEATURES + CANDIDATES if c in work.columns]].astype(np.float64).copy()
    out["kernels_per_sample"] = work[[f"kernels_{g}" for g in GROUPS]].sum(axis=1).to_numpy() / batch
    out["mb_weights_per_sample"] = work["mb_weights"].to_numpy(dtype=np.float64) / batch
    out["steps_per_sample"] = 1.0 / batch
    return out[list(FEATURES + CANDIDATES)]


def graph_features(graphs: list[Graph]) -> tuple[pd.DataFrame, np.ndarray]:
    """``features`` of captured networks, per sample at each one's batch, and the batches."""
    batch = np.array([max(int(g.input_shape[0]), 1) if g.input_shape else 1 for g in graphs], dtype=float)
    return features(eager_work_frame(graphs), batch), batch


def measured(name: str) -> pd.DataFrame:
    """The rows of setting ``name``'s table: features, ``ms_per_sample``, ``batch``, family."""
    rows = table()
    rows = rows[rows[MS_PREFIX + name].notna()].reset_index(drop=True)
    batch = rows[BATCH_PREFIX + name].to_numpy(dtype=np.float64)
    out = features(at_batch(rows, batch), batch)
    out["ms_per_sample"] = rows[MS_PREFIX + name].to_numpy(dtype=np.float64)
    out["batch"] = batch
    out["family"] = rows["family"].to_numpy()
    out["model"] = rows["model"].to_numpy()
    out["side"] = rows["side"].to_numpy()
    return out


def estimator() -> PhysicalLatency:
    # Huber's loss: a family whose work the features miss (an LSTM, a reparameterised branch)
    # bends the costs of the others less
    return PhysicalLatency(FEATURES, candidates=CANDIDATES, loss="huber")


def physical(name: str) -> PhysicalLatency:
    """Setting ``name``'s Σ cost × work per sample, fitted with families grouped on first use."""

    def fit() -> PhysicalLatency:
        rows = measured(name)
        return estimator().fit(rows, rows["ms_per_sample"].to_numpy(), groups=rows["family"].to_numpy())

    return trained_once(
        name,
        (TABLE,),
        fit,
        lambda model, folder: model.save(folder, {"device": name, "source": SOURCE}),
        PhysicalLatency.load,
    )


def _info(name: str) -> DeviceInfo:
    setting = SETTINGS[name]
    rows = table()
    batches = rows[BATCH_PREFIX + name].dropna()
    return DeviceInfo(
        name=name,
        device=setting.device,
        runtime=setting.runtime,
        setting=name.split("/", 1)[1],
        dtype=setting.dtype,
        source=SOURCE,
        n_train=len(batches),
        accepts="any image model captured at its input size; the time of one step at the input's batch",
        batch=int(batches.mode().iloc[0]) if len(batches) else 1,
        any_batch=True,
        card=cards().get(name, {}),
    )


def infos() -> list[DeviceInfo]:
    return [_info(name) for name in names()]


class TimmDevice:
    """One timm table's setting: per-sample time from Σ cost × work, times the input's batch."""

    def __init__(self, name: str) -> None:
        self.info = _info(name)
        self.model = physical(name)
        batches = table()[BATCH_PREFIX + name].dropna()
        self.batches = (int(batches.min()), int(batches.max()))
        rows = measured(name)
        self.mix = WorkMix().fit(rows, rows["family"])

    def predict_graphs(self, graphs: list[Graph]) -> pd.DataFrame:
        x, batch = graph_features(graphs)
        out = self.model.predict(x).reset_index(drop=True)
        for column in ("latency_ms", "latency_ms_low", "latency_ms_high"):
            out[column] = out[column].to_numpy() * batch
        low, high = self.batches
        measured_at = f"batch {low}" if low == high else f"batches {low}–{high}"
        unlike, why = self.mix.flag(x)
        for i, b in enumerate(batch):
            notes = [why[i]] if unlike[i] else []
            if not low <= b <= high:
                notes.append(f"timm's table measured {measured_at}, this is batch {int(b)}")
            if notes:
                reason = out.at[i, "ood_reason"]
                out.at[i, "ood_reason"] = "; ".join(([reason] if reason else []) + notes)
                out.at[i, "ood"] = True
        out["route"] = PHYSICAL
        return out


def load(name: str) -> TimmDevice:
    return TimmDevice(name)


__all__ = ["SETTINGS", "Setting", "TimmDevice", "family", "infos", "load", "measured", "names"]
