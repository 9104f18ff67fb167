"""``import_measurements``: end-to-end latencies measured elsewhere — a phone's benchmark tool, an
accelerator's profiler — into a store, so ``train`` and ``adapt`` learn from them as from
infercast's own campaigns.

The table (CSV or Parquet) has ``model`` (any model string infercast loads) and ``latency_ms``;
optional ``input_shape`` (``256x3x224x224``: the row's input, else the import's), ``std_ms`` and
``n`` (runs behind the figure), ``peak_memory_mb``, ``energy_j``; every other column is a
*setting* of the platform (threads, delegate, precision…): rows that differ in one land on
different platforms. A CSV of timm's ``benchmark.py`` is read as it is (``timm_csv``). Each
model is captured here (``pretrained=False``, without running it) for its features. A second
import of the same rows stores nothing new.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from infercast.api.timm_csv import FORMAT, from_timm, is_timm_table
from infercast.errors import InfercastError, TableImportError
from infercast.paths import check_store_file
from infercast.tables import read_table, to_python

if TYPE_CHECKING:
    from infercast.store import Measurement

KNOWN_COLUMNS = ("model", "latency_ms", "input_shape", "std_ms", "n", "peak_memory_mb", "energy_j")


# column → (the least value it may hold, whether that bound is allowed, whether it is a count)
_NUMBERS = {
    "latency_ms": (0.0, False, False),
    "std_ms": (0.0, True, False),
    "n": (1.0, True, True),
    "peak_memory_mb": (0.0, False, False),
    "energy_j": (0.0, False, False),
}


def _numbers(table: pd.DataFrame, column: str, path: Path) -> pd.Series:
    """A numeric column, every value finite and in range (missing only where optional)."""
    raw = table[column]
    kind = raw.dtype
    if pd.api.types.is_bool_dtype(kind) or pd.api.types.is_datetime64_any_dtype(kind):
        raise TableImportError(f"{path}: {column} holds {kind} values, not numbers")
    if pd.api.types.is_timedelta64_dtype(kind):
        raise TableImportError(f"{path}: {column} holds durations ({kind}); give plain numbers")
    values = pd.to_numeric(raw, errors="coerce").astype(np.float64)
    lowest, inclusive, count = _NUMBERS[column]
    # in a column of mixed objects: booleans and dates / times (all of which have isoformat)
    typed = raw.map(lambda v: isinstance(v, bool | np.bool_) or hasattr(v, "isoformat"))
    with np.errstate(invalid="ignore"):
        below = values < lowest if inclusive else values <= lowest
    bad = (values.isna() & raw.notna()) | typed | ~np.isfinite(values.fillna(1.0)) | below
    if count:
        bad |= values.notna() & (values != np.round(values))
    if column == "latency_ms":
        bad |= values.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        need = (
            "a whole number of 1 or more"
            if count
            else "a finite number " + ("of 0 or more" if inclusive else "above 0")
        )
        raise TableImportError(f"{path}: {column}, row {row + 1}: {raw.iloc[row]!r} is not {need}")
    return values


def _given(record: dict[str, Any], column: str) -> float | None:
    """An optional column's value in one row: None where the column or the value is missing."""
    value = record.get(column)
    return None if value is None or pd.isna(value) else float(value)


def _header(path: Path) -> list[str]:
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8", errors="replace") as handle:
            return next(csv.reader(handle), [])
    import pyarrow.parquet as pq

    return list(pq.read_schema(path).names)


def _check_models(table: pd.DataFrame, path: Path) -> None:
    """Model strings are data: a string that would run code from a file is refused."""
    from infercast.models.guarded import runs_user_code

    for row, model in enumerate(table["model"]):
        model = "" if pd.isna(model) else str(model).strip()
        if not model:
            raise TableImportError(f"{path}: model, row {row + 1}: empty; every row names its model")
        if runs_user_code(model):
            raise TableImportError(
                f"{path}: model, row {row + 1}: {model!r} would run code from a file, and an imported "
                "table is data: name zoo models (pytorchcv:NAME…), space:… configs or .onnx files"
            )


def _check_duplicates(table: pd.DataFrame, path: Path, settings: list[str]) -> pd.DataFrame:
    """Identical rows once; the same model and settings with other figures refused."""
    key = ["model", *settings]
    table = table.reset_index(drop=True).drop_duplicates()
    clash = table.duplicated(subset=key, keep=False)
    if clash.any():
        # the index still counts the rows as they are in the file
        first, second = table.index[clash.to_numpy()][:2]
        raise TableImportError(
            f"{path}: {table.at[first, 'model']!r} appears twice with the same settings and different "
            f"figures (rows {first + 1} and {second + 1}): keep one"
        )
    return table


def read_measurements(path: str | Path) -> pd.DataFrame:
    """The table, checked: ``model`` and ``latency_ms`` present once each, every number finite and
    in range, no model string that runs code, no model measured twice with different figures."""
    path = Path(path)
    table = read_table(path)
    header = _header(path)
    repeated = sorted({c for c in header if header.count(c) > 1})
    if repeated:
        raise TableImportError(f"{path}: the column(s) {', '.join(repeated)} appear more than once")
    if is_timm_table(header):
        table = from_timm(table, path)
    missing = [c for c in ("model", "latency_ms") if c not in table.columns]
    if missing:
        raise TableImportError(f"{path} lacks the column(s) {', '.join(missing)}: it needs model, latency_ms")
    if table.empty:
        raise TableImportError(f"{path} has no rows")
    for column in _NUMBERS:
        if column in table.columns:
            table[column] = _numbers(table, column, path)
    _check_models(table, path)
    table["model"] = table["model"].astype(str).str.strip()
    if "input_shape" in table.columns:
        table["input_shape"] = _shapes(table["input_shape"], path)
    settings = [c for c in table.columns if c not in KNOWN_COLUMNS]
    return _check_duplicates(table, path, settings + (["input_shape"] if "input_shape" in table else []))


def _shapes(column: pd.Series, path: Path) -> list[tuple[int, ...] | None]:
    """Each row's input shape, parsed (None where the row leaves it to the import's)."""
    from infercast.models import parse_input_shape

    shapes = []
    for row, text in enumerate(column):
        try:
            shapes.append(None if pd.isna(text) else parse_input_shape(str(text)))
        except InfercastError as error:
            raise TableImportError(f"{path}: input_shape, row {row + 1}: {error}") from None
    return shapes


def _measurement(record: dict[str, Any], config_id: str, source: str) -> Measurement:
    """One imported row as a stored measurement: its latency is every statistic of the one figure."""
    from infercast.store import Measurement

    latency = float(record["latency_ms"])
    spread = _given(record, "std_ms") or 0.0
    n = int(_given(record, "n") or 1)
    half_width = 1.96 * spread / np.sqrt(n) if n > 1 else 0.0
    memory, energy = _given(record, "peak_memory_mb"), _given(record, "energy_j")
    return Measurement(
        config_id=config_id,
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
        energy_reason=f"not in {source}" if energy is None else None,
    )


def _configs(
    table: pd.DataFrame, timeout_s: float | None, progress: Callable[[int, int], None] | None
) -> tuple[dict[tuple[str, Any], dict[str, Any]], dict[str, dict[str, str]]]:
    """The store row of each (model, input shape) of the table, capturing the models of each
    shape together; and each model that could not be captured, with why (its shape named when
    the table has several)."""
    from infercast.measurement import model_configs

    groups: dict[Any, list[str]] = {}
    for model, shape in zip(table["model"], table["input_shape"], strict=True):
        groups.setdefault(shape, []).append(model)
    total = sum(len(set(models)) for models in groups.values())
    config_of, unusable, done = {}, {}, 0
    for shape, models in groups.items():
        names = sorted(set(models))

        def step(finished: int, _: int, before: int = done) -> None:
            if progress is not None:
                progress(before + finished, total)

        rows, failed = model_configs(names, shape, timeout_s, step)
        done += len(names)
        config_of.update({(row["model"], shape): row for row in rows})
        for model, failure in failed.items():
            where = f"{model} at {'x'.join(map(str, shape))}" if shape and len(groups) > 1 else model
            unusable[where] = failure
    return config_of, unusable


def import_measurements(
    db: str | Path,
    path: str | Path,
    device: str,
    backend: str = "imported",
    campaign: str | None = None,
    input_shape: tuple[int, ...] | str | None = None,
    timeout_s: float | None = 180.0,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Import ``path`` into the store ``db`` as measurements of ``device`` (a name you choose;
    it goes into the platform's fingerprint) run by ``backend``. Every row is checked before the
    store is opened, and all are written in one transaction: a table is imported whole or not at
    all. Returns the platforms written, the rows stored, those already stored and the models
    that could not be captured (when none could, nothing is imported). ``progress(done, total)``
    follows the capture of the table's distinct models."""
    from infercast.models import parse_input_shape
    from infercast.store import Platform, Store

    if not device.strip():
        raise TableImportError("--device names the device the table was measured on; it is empty")
    check_store_file(db)
    path = Path(path)
    table = read_measurements(path)
    settings_columns = [c for c in table.columns if c not in KNOWN_COLUMNS]
    if isinstance(input_shape, str):
        input_shape = parse_input_shape(input_shape)
    shapes = table["input_shape"] if "input_shape" in table else pd.Series([None] * len(table))
    table["input_shape"] = [input_shape if shape is None else shape for shape in shapes]
    config_of, unusable = _configs(table, timeout_s, progress)
    if not config_of:
        model, failure = next(iter(unusable.items()))
        raise TableImportError(
            f"{path}: none of its {len(unusable)} model(s) could be loaded, nothing was imported "
            f"(first: {model}: {failure['reason']})"
        )
    fingerprint = {"device": device, "imported_from": path.name}
    if is_timm_table(_header(path)):
        fingerprint["format"] = FORMAT
    campaign = campaign or f"import:{path.name}"
    platforms: dict[str, dict[str, Any]] = {}
    stored = already = 0
    with Store(db) as store, store.transaction():
        store.add_configs(list(config_of.values()))
        for record in table.to_dict("records"):
            config = config_of.get((record["model"], record["input_shape"]))
            if config is None:
                continue
            settings = {c: to_python(record[c]) for c in settings_columns if pd.notna(record[c])}
            platform = Platform(backend, settings, fingerprint)
            platform_id = store.add_platform(platform)
            entry = platforms.setdefault(platform_id, {"id": platform_id, "settings": settings, "rows": 0})
            measurement = _measurement(record, config["id"], path.name)
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
