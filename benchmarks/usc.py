"""Shared by the benchmarks on ``../shared/data/usc-mobile`` (qed-usc/mobile-ml-benchmark, MIT
licence; Li, Paolieri, Golubchik, EdgeSys '24): its TFLite GPU op rows as infercast op tables,
its end-to-end latencies, and the architecture family of each pytorchcv network, for folds that
hold out whole families. Latencies there are microseconds; here milliseconds."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

# one row per TFLite GPU op, each its own kernel, with latency_ms@<phone>
from infercast.predictors.devices.tflite_gpu import PHONES
from infercast.predictors.devices.tflite_gpu import op_rows as gpu_op_table
from infercast.predictors.devices.usc import family

__all__ = ["GPU_DEVICES", "e2e_noise", "e2e_table", "family", "gpu_op_table"]

GPU_DEVICES = PHONES


def e2e_table(folder: str | Path) -> pd.DataFrame:
    """End-to-end latencies (ms), one column per ``<device>|<setting>|<dtype>``, and the authors'
    ``FLOPS`` and ``size``; index the model."""
    raw = pd.read_csv(Path(folder) / "tflite_cnn_e2e.csv").set_index("model")
    means = [c for c in raw.columns if c.endswith("|mean")]
    table = raw[means] / 1e3
    table.columns = [c.removesuffix("|mean") for c in means]
    return table.join(raw[["FLOPS", "size"]])


def e2e_noise(folder: str | Path) -> pd.DataFrame:
    """Run-to-run noise of each end-to-end latency: the authors' standard deviation over their
    repeated runs divided by the mean; columns as ``e2e_table``'s, index the model."""
    raw = pd.read_csv(Path(folder) / "tflite_cnn_e2e.csv").set_index("model")
    means = [c for c in raw.columns if c.endswith("|mean")]
    return pd.DataFrame({c.removesuffix("|mean"): raw[c[: -len("mean")] + "std"] / raw[c] for c in means})
