"""``import_measurements``: end-to-end latencies measured elsewhere — a phone's benchmark tool, an
accelerator's profiler — into a store, so ``train`` and ``adapt`` learn from them as from
infercast's own campaigns.

The table (CSV or Parquet) has ``model`` (any model string infercast loads) and ``latency_ms``;
optional ``std_ms`` and ``n`` (runs behind the figure), ``peak_memory_mb``, ``energy_j``; every
other column is a *setting* of the platform (threads, delegate, precision…): rows that differ in
one land on different platforms. Each model is captured here (``pretrained=False``) for its
features. A second import of the same rows stores nothing new.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.errors import InfercastError
from infercast.tables import read_table, to_python

KNOWN_COLUMNS = ("model", "latency_ms", "std_ms", "n", "peak_memory_mb", "energy_j")


class TableImportError(InfercastError):
    """A table that cannot be imported; the message names the column or row."""


def _numbers(table: pd.DataFrame, column: str, path: Path, positive: bool) -> pd.Series:
    values = pd.to_numeric(table[column], errors="coerce")
    bad = values.isna() & table[column].notna()
    if positive:
        bad |= values <= 0
    if column == "latency_ms":
        bad |= values.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        need = "a positive number" if positive else "a number"
        raise TableImportError(f"{path}: {column}, row {row + 1}: {table[column].iloc[row]!r} is not {need}")
    return values


def _given(record: dict[str, Any], column: str) -> float | None:
    """An optional column's value in one row: None where the column or the value is missing."""
    value = record.get(column)
    return None if value is None or pd.isna(value) else float(value)


def read_measurements(path: str | Path) -> pd.DataFrame:
    """The table, checked: ``model`` and ``latency_ms`` present, numbers where numbers belong."""
    path = Path(path)
    table = read_table(path)
    missing = [c for c in ("model", "latency_ms") if c not in table.columns]
    if missing:
        raise TableImportError(f"{path} lacks the column(s) {', '.join(missing)}: it needs model, latency_ms")
    if table.empty:
        raise TableImportError(f"{path} has no rows")
    for column in ("latency_ms", "std_ms", "n", "peak_memory_mb", "energy_j"):
        if column in table.columns:
            table[column] = _numbers(table, column, path, positive=column in ("latency_ms", "n"))
    table["model"] = table["model"].astype(str).str.strip()
    return table


def import_measurements(
    db: str | Path,
    path: str | Path,
    device: str,
    backend: str = "imported",
    campaign: str | None = None,
    input_shape: tuple[int, ...] | str | None = None,
    timeout_s: float | None = 180.0,
) -> dict[str, Any]:
    """Import ``path`` into the store ``db`` as measurements of ``device`` (a name you choose;
    it goes into the platform's fingerprint) run by ``backend``. Returns the platforms written,
    the rows stored, those already stored and the models that could not be captured."""
    from infercast.measurement import model_configs
    from infercast.store import Measurement, Platform, Store

    if not device.strip():
        raise TableImportError("--device names the device the table was measured on; it is empty")
    path = Path(path)
    table = read_measurements(path)
    settings_columns = [c for c in table.columns if c not in KNOWN_COLUMNS]
    rows, unusable = model_configs(sorted(set(table["model"])), input_shape, timeout_s)
    config_of = {row["model"]: row for row in rows}
    campaign = campaign or f"import:{path.name}"
    platforms: dict[str, dict[str, Any]] = {}
    stored = already = 0
    with Store(db) as store:
        store.add_configs(rows)
        for record in table.to_dict("records"):
            config = config_of.get(record["model"])
            if config is None:
                continue
            settings = {c: to_python(record[c]) for c in settings_columns if pd.notna(record[c])}
            platform = Platform(backend, settings, {"device": device, "imported_from": path.name})
            platform_id = store.add_platform(platform)
            entry = platforms.setdefault(platform_id, {"id": platform_id, "settings": settings, "rows": 0})
            latency = float(record["latency_ms"])
            spread = _given(record, "std_ms") or 0.0
            n = int(_given(record, "n") or 1)
            half_width = 1.96 * spread / np.sqrt(n) if n > 1 else 0.0
            memory, energy = _given(record, "peak_memory_mb"), _given(record, "energy_j")
            measurement = Measurement(
                config_id=config["id"],
                n=n,
                median_ms=latency,
                mean_ms=latency,
                low_ms=latency,
                p10_ms=latency,
                p90_ms=latency,
                p99_ms=latency,
                ci_low_ms=latency - half_width,
                ci_high_ms=latency + half_width,
                cv=spread / latency,
                cap_hit=False,
                samples=[latency],
                peak_memory_bytes=None if memory is None else int(memory * 2**20),
                peak_memory_definition=None if memory is None else "imported",
                energy_j=energy,
                energy_reason=f"not in {path.name}" if energy is None else None,
            )
            if store.add_measurement(platform_id, campaign, measurement) is None:
                already += 1
            else:
                stored += 1
                entry["rows"] += 1
    return {
        "db": str(db),
        "file": str(path),
        "device": device,
        "backend": backend,
        "campaign": campaign,
        "platforms": list(platforms.values()),
        "stored": stored,
        "already_stored": already,
        "not_captured": unusable,
    }
