"""The op table: one row per op (or executed kernel) of a model, from any runtime; its columns, its
one validation (for training and for prediction), and its grouping into executed kernels."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from infercast.graph import OP_GROUPS
from infercast.graph.ops import MOVEMENT_TYPES
from infercast.predictors.errors import PredictorError

SHAPE_COLUMNS = (
    "h_in",
    "w_in",
    "c_in",
    "h_out",
    "w_out",
    "c_out",
    "kernel_size",
    "stride",
    "groups",
    "flops",
)
REQUIRED_OP_COLUMNS = ("model", "op_type")
WEIGHTED_TYPES = ("conv", "dwconv", "gconv", "linear")
# the optional column naming the algorithm a backend ran an op with (TFLite GPU's Winograd 3×3
# convolutions, say): a kernel type of its own to the op-wise route; empty is the default one
ALGORITHM = "algorithm"


def check_op_table(ops: pd.DataFrame, training: bool = False, name: str = "op table") -> None:
    """The one validation of an op table (docs/formats.md), for training and for prediction:
    the required columns (``latency_ms`` too when ``training``), the op-type vocabulary, and
    numbers where numbers belong. ``name`` (the file) starts every message."""
    required = (*REQUIRED_OP_COLUMNS, "latency_ms") if training else REQUIRED_OP_COLUMNS
    missing = [c for c in required if c not in ops.columns]
    if missing:
        raise PredictorError(f"{name} lacks the column(s) {', '.join(missing)} (see docs/formats.md)")
    if ops.empty:
        raise PredictorError(f"{name} has no rows")
    vocabulary = [*OP_GROUPS, *sorted(MOVEMENT_TYPES)]
    unknown = sorted(set(ops["op_type"].astype(str)) - set(vocabulary))
    if unknown:
        raise PredictorError(
            f"{name} has op_type values outside the vocabulary: {unknown} (use {vocabulary})"
        )
    for column in (*SHAPE_COLUMNS, "bytes", "n_ops", "latency_ms"):
        if column not in ops.columns:
            continue
        numbers = pd.to_numeric(ops[column], errors="coerce")
        bad = numbers.isna() & ops[column].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise PredictorError(
                f"{name}: column {column}, row {row + 1}: {ops[column].iloc[row]!r} is not a number"
            )


def check_e2e_table(e2e: pd.DataFrame, name: str = "end-to-end table") -> None:
    """An end-to-end table: ``model`` and a numeric ``latency_ms``."""
    missing = [c for c in ("model", "latency_ms") if c not in e2e.columns]
    if missing:
        raise PredictorError(f"{name} lacks the column(s) {', '.join(missing)}: it needs model, latency_ms")
    numbers = pd.to_numeric(e2e["latency_ms"], errors="coerce")
    bad = numbers.isna() & e2e["latency_ms"].notna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise PredictorError(
            f"{name}: latency_ms, row {row + 1}: {e2e['latency_ms'].iloc[row]!r} is not a number"
        )


def kernels(ops: pd.DataFrame) -> pd.DataFrame:
    """Op rows → one row per executed kernel: the main op's shapes and ``algorithm`` (the
    weighted op, else the first one that is not a norm / activation / elementwise op; no
    algorithm given is ``""``), FLOPs and bytes summed over the kernel's ops, ``n_ops`` ops
    covered, latency summed over the rows that carry one."""
    check_op_table(ops)
    frame = ops.copy()
    frame["model"] = frame["model"].astype(str)
    frame["op_type"] = frame["op_type"].astype(str)
    for column in (*SHAPE_COLUMNS, "bytes", "latency_ms"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce") if column in frame else np.nan
    if "n_ops" not in frame:
        frame["n_ops"] = 1.0
    algorithm = frame[ALGORITHM] if ALGORITHM in frame else pd.Series("", index=frame.index)
    frame[ALGORITHM] = algorithm.fillna("").astype(str)
    if "kernel" not in frame or frame["kernel"].isna().all():
        frame["kernel"] = np.arange(len(frame))
    frame["kernel"] = (
        frame["kernel"].astype(str).where(frame["kernel"].notna(), "row" + frame.index.astype(str))
    )
    rank = frame["op_type"].map(
        lambda t: 0 if t in WEIGHTED_TYPES else (2 if t in ("bn", "act", "add", "mul") else 1)
    )
    frame["_rank"] = rank
    frame["_order"] = np.arange(len(frame))
    main = (
        frame.sort_values(["_rank", "_order"])
        .drop_duplicates(["model", "kernel"])
        .set_index(["model", "kernel"])
    )
    grouped = frame.groupby(["model", "kernel"], sort=False)
    out = main[["op_type", ALGORITHM, *SHAPE_COLUMNS]].copy()
    out["flops"] = grouped["flops"].sum(min_count=1)
    out["bytes"] = grouped["bytes"].sum(min_count=1)
    out["n_ops"] = grouped["n_ops"].sum()
    out["latency_ms"] = grouped["latency_ms"].sum(min_count=1)
    out["_order"] = main["_order"]
    out = out.sort_values("_order").drop(columns="_order").reset_index()
    out["log_flops"] = np.log1p(out["flops"])
    out["log_bytes"] = np.log1p(out["bytes"])
    out["intensity"] = out["flops"] / out["bytes"]
    # GPU runtimes lay tensors out in slices of 4 channels (TFLite's PHWC4, OpenCL images): a
    # kernel costs what its padded channels cost, which trees cannot derive from raw channels
    slices_in, slices_out = np.ceil(out["c_in"] / 4), np.ceil(out["c_out"] / 4)
    groups = out["groups"].fillna(1).clip(lower=1)
    window = out["kernel_size"].fillna(1) ** 2
    out["c_out_slices"] = slices_out
    out["log_padded_flops"] = np.log1p(
        2 * out["h_out"] * out["w_out"] * 4 * slices_out * 4 * np.ceil(out["c_in"] / groups / 4) * window
    )
    out["log_out_elements"] = np.log1p(out["h_out"] * out["w_out"] * 4 * slices_out)
    out["log_in_elements"] = np.log1p(out["h_in"] * out["w_in"] * 4 * slices_in)
    return out


def as_op_table(ops: Any) -> pd.DataFrame:
    """An op table given as a frame, a mapping of columns or a list of row records."""
    if isinstance(ops, pd.DataFrame):
        return ops
    if isinstance(ops, dict | list):
        return pd.DataFrame(ops)
    raise PredictorError(
        f"an op table is a frame, a mapping of columns or row records, not {type(ops).__name__}"
    )


def e2e_series(e2e: Any) -> pd.Series:
    """End-to-end latency per model (the last row where a model repeats; no value, no row), from
    a table of ``model, latency_ms`` (a frame, a mapping or records) or a series indexed by model."""
    if isinstance(e2e, pd.Series):
        e2e = pd.DataFrame({"model": e2e.index.astype(str), "latency_ms": e2e.to_numpy()})
    e2e = as_op_table(e2e)
    check_e2e_table(e2e)
    values = pd.to_numeric(e2e["latency_ms"], errors="coerce")
    frame = pd.Series(values.to_numpy(), index=e2e["model"].astype(str)).dropna()
    frame = frame[frame > 0]
    return frame.groupby(level=0).last()
