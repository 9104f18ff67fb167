"""A CSV written by timm's ``benchmark.py`` read as an import table, as it is.

timm's benchmark writes one row per model: ``model``, ``infer_img_size``, ``infer_batch_size``,
``infer_step_time`` (ms per step) and, depending on its version, throughput and its own counts.
``db import`` recognises such a table by those four columns and reads each row as the timm model
``timm:NAME`` at input ``batch × 3 × size × size`` with the step's time as its latency; the other
columns (throughput, GMACs, parameters) are figures derived from those and are not kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from infercast.errors import TableImportError
from infercast.tables import to_python

COLUMNS = ("model", "infer_img_size", "infer_batch_size", "infer_step_time")
FORMAT = "timm benchmark"


def is_timm_table(header: Iterable[str]) -> bool:
    return set(COLUMNS) <= set(header)


def _whole(table: pd.DataFrame, column: str, path: Path) -> np.ndarray:
    values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values) | (values < 1) | (values != np.round(values))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise TableImportError(
            f"{path}: {column}, row {row + 1}: {to_python(table[column].iloc[row])!r} "
            "is not a whole number of 1 or more"
        )
    return values.astype(np.int64)


def from_timm(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    """``model`` (``timm:NAME``), ``latency_ms`` (the step's time) and ``input_shape``
    (``BATCHx3xSIZExSIZE``) of each row of a timm benchmark table."""
    side = _whole(table, "infer_img_size", path)
    batch = _whole(table, "infer_batch_size", path)
    return pd.DataFrame(
        {
            "model": "timm:" + table["model"].astype(str).str.strip(),
            "latency_ms": table["infer_step_time"],
            "input_shape": [f"{b}x3x{s}x{s}" for b, s in zip(batch, side, strict=True)],
        }
    )
