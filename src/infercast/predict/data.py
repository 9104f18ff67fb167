"""Training tables from a store: one row per measured config, features and the three targets.

- features: the analytic feature vector stored with each config (schema ``FEATURE_SCHEMA_VERSION``)
  plus the platform settings that change kernels (``SETTING_FEATURES``);
- ``latency_ms``: the measurement's ``low_ms`` by default (the fastest round's median: the most
  repeatable figure on a drifting host, see measure.protocol), or any other latency statistic;
- ``peak_memory_mb``: the stored peak memory (its definition is per backend, see docs/measure.md);
- ``energy_j``: the measured energy per inference, NULL where the host has no sensor.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from infercast.features import FEATURE_NAMES
from infercast.predict.errors import PredictorError
from infercast.store import Store

SETTING_FEATURES: tuple[str, ...] = ("threads",)
LATENCY_STATS = ("low_ms", "median_ms", "mean_ms", "p10_ms", "p90_ms")


@dataclass
class TrainingData:
    x: pd.DataFrame
    y: pd.DataFrame
    config_ids: np.ndarray
    models: np.ndarray
    platform: dict[str, Any]


def resolve_platform(store: Store, platform: str | None) -> dict[str, Any]:
    """The platform row to train on: the one named (an id or a unique id prefix), or the only one."""
    platforms = store.platforms()
    if platforms.empty:
        raise PredictorError(f"{store.path}: the store holds no platform (profile something first)")
    listing = ", ".join(f"{r.id} ({r.backend} {json.dumps(r.settings)})" for r in platforms.itertuples())
    if platform is None:
        if len(platforms) > 1:
            raise PredictorError(
                f"{store.path} holds {len(platforms)} platforms; pick one with --platform: {listing}"
            )
        return platforms.iloc[0].to_dict()
    matches = platforms[platforms["id"].str.startswith(platform)]
    if len(matches) != 1:
        raise PredictorError(
            f"platform {platform!r} {'is ambiguous' if len(matches) else 'is not in'} {store.path}: {listing}"
        )
    return matches.iloc[0].to_dict()


def settings_columns(settings: dict[str, Any]) -> dict[str, float]:
    return {"threads": float(settings.get("threads") or 1)}


def feature_frame(features: pd.DataFrame | list[dict[str, Any]], settings: dict[str, Any]) -> pd.DataFrame:
    """Features (a frame, as ``Space.features`` returns, or dicts, as ``features()`` does) to the
    predictors' input columns: ``FEATURE_NAMES`` then the platform settings."""
    frame = features if isinstance(features, pd.DataFrame) else pd.DataFrame.from_records(features)
    missing = [name for name in FEATURE_NAMES if name not in frame.columns]
    if missing:
        raise PredictorError(
            f"stored features lack {', '.join(missing[:5])}: they were computed by another feature schema; "
            "re-profile, or train with the infercast that measured them"
        )
    frame = frame[list(FEATURE_NAMES)].astype(np.float64)
    for name, value in settings_columns(settings).items():
        frame[name] = value
    return frame


def training_data(
    store: Store,
    platform: str | None = None,
    latency_stat: str = "low_ms",
    campaigns: list[str] | None = None,
) -> TrainingData:
    """The training table of one platform; ``campaigns`` restricts it to those campaigns."""
    if latency_stat not in LATENCY_STATS:
        raise PredictorError(f"latency_stat={latency_stat!r}: choose among {', '.join(LATENCY_STATS)}")
    chosen = resolve_platform(store, platform)
    rows = store.measurements(chosen["id"])
    if campaigns:
        unknown = sorted(set(campaigns) - set(rows["campaign"]))
        if unknown:
            known = ", ".join(sorted(set(rows["campaign"])))
            raise PredictorError(
                f"campaign(s) {unknown} not in {store.path} on this platform; it has: {known}"
            )
        rows = rows[rows["campaign"].isin(campaigns)]
    if rows.empty:
        raise PredictorError(f"{store.path}: no measurements on platform {chosen['id']}")
    rows = rows[rows["features"].notna()]
    # a config measured in several campaigns counts once: its latest measurement
    rows = rows.sort_values("id").drop_duplicates("config_id", keep="last").reset_index(drop=True)
    x = feature_frame([json.loads(f) for f in rows["features"]], chosen["settings"])
    memory = pd.to_numeric(rows["peak_memory_bytes"], errors="coerce") / 1e6
    y = pd.DataFrame(
        {
            "latency_ms": rows[latency_stat].astype(np.float64),
            "peak_memory_mb": memory.where(memory > 0),
            "energy_j": pd.to_numeric(rows["energy_j"], errors="coerce"),
        }
    )
    return TrainingData(
        x=x,
        y=y,
        config_ids=rows["config_id"].to_numpy(dtype=object),
        models=rows["model"].to_numpy(dtype=object),
        platform=chosen,
    )
