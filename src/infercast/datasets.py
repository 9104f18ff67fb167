"""Training tables out of a store: one row per measured config, its features and the three targets.

- features: the analytic feature vector stored with each config plus the platform settings
  (``predictors.data.feature_frame``);
- ``latency_ms``: the measurement's ``low_ms`` by default (the fastest round's median: the most
  repeatable figure on a drifting host, see measurement.protocol), or any other latency statistic;
- ``peak_memory_mb``: the stored peak memory (its definition is per backend, see docs/measure.md);
- ``energy_j``: the measured energy per inference, NULL where the host has no sensor.

``store_tables`` gives the op-wise route's op and end-to-end tables. This module is the one bridge
between ``store`` and ``predict``: predictors learn from the tables it returns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from infercast.graph.ops import MOVEMENT_TYPES, is_alias, kind_of
from infercast.predictors.data import feature_frame
from infercast.predictors.errors import PredictorError
from infercast.predictors.fusion import shape_arithmetic
from infercast.predictors.optable import ALGORITHM, SHAPE_COLUMNS
from infercast.store import Store
from infercast.units import bytes_to_mb

# steady_ms: low_ms at the host's usual speed, by the campaign's sentinel passes (store.drift)
LATENCY_STATS = ("low_ms", "median_ms", "mean_ms", "p10_ms", "p90_ms", "steady_ms")
KERNEL_SPACE = "kernels"  # space.kernels.Kernels.name: datasets reads stores, not spaces


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
    # a kernel campaign's one-kernel networks teach the op-wise kernel regressors (their op rows),
    # not the model-level blend: they are no CNN a user would deploy
    kernel_networks = (rows["space"] == KERNEL_SPACE).to_numpy()
    if kernel_networks.all():
        raise PredictorError(
            f"{store.path}: only kernel-campaign networks on platform {chosen['id']}; the blend learns "
            "from design-space profiles (infercast profile --space NAME)"
        )
    rows = rows[~kernel_networks]
    # a config measured in several campaigns counts once: its latest measurement
    rows = rows.sort_values("id").drop_duplicates("config_id", keep="last").reset_index(drop=True)
    x = feature_frame([json.loads(f) for f in rows["features"]], chosen["settings"])
    memory = bytes_to_mb(rows["peak_memory_bytes"])
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


def kernel_campaign_configs(store: Store, platform_id: str, campaigns: list[str] | None = None) -> set[str]:
    """Config ids of the kernel-campaign networks (``space:kernels``) measured on a platform (in
    ``campaigns`` only, when given)."""
    measured = store.measurements(platform_id)
    chosen = measured["space"] == KERNEL_SPACE
    if campaigns:
        chosen &= measured["campaign"].isin(campaigns)
    return set(measured.loc[chosen, "config_id"])


def kernel_network_latencies(
    store: Store, platform_id: str, latency_stat: str = "low_ms", campaigns: list[str] | None = None
) -> pd.DataFrame:
    """``model`` (string) and ``latency_ms`` of each kernel-campaign network measured on a platform
    (its latest measurement; in ``campaigns`` only, when given)."""
    if latency_stat not in LATENCY_STATS:
        raise PredictorError(f"latency_stat={latency_stat!r}: choose among {', '.join(LATENCY_STATS)}")
    measured = store.measurements(platform_id)
    chosen = measured["space"] == KERNEL_SPACE
    if campaigns:
        chosen &= measured["campaign"].isin(campaigns)
    rows = measured[chosen].sort_values("id").drop_duplicates("config_id", keep="last")
    return pd.DataFrame(
        {"model": rows["model"].astype(str), "latency_ms": rows[latency_stat].astype(np.float64)}
    ).reset_index(drop=True)


def store_tables(
    store: Store, platform_id: str, latency_stat: str = "low_ms"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Op and end-to-end tables of a store's profiled configs on one platform (model = config id).

    Each stored op row is one executed kernel. Layout reorders and a split's copies are kept
    (``graph.ops.MOVEMENT_TYPES``: the op-wise route prices them, as ``predictors.movement`` adds
    them to a model string's kernels); other rows that computed nothing of the original graph
    (reshapes, shape arithmetic, and movement rows profiled before they were named) are left to
    the overhead model. With ``steady_ms`` the op rows are brought to the host's usual speed by their
    measurement's ``host_effect``, as its end-to-end latency is. With no op profiles on the
    platform the op table is empty."""
    columns = ["model", "op_type", "kernel", *SHAPE_COLUMNS, "bytes", "n_ops", ALGORITHM, "latency_ms"]
    every = store.measurements(platform_id)
    measured = every.sort_values("id").drop_duplicates("config_id", keep="last")
    e2e = pd.DataFrame({"model": measured["config_id"], "latency_ms": measured[latency_stat]}).reset_index(
        drop=True
    )
    ops = store.op_measurements()
    if ops.empty or not (ops["platform_id"] == platform_id).any():
        return pd.DataFrame(columns=columns), e2e
    ops = ops[ops["platform_id"] == platform_id]
    computes = ops["fused_ops"].map(
        lambda f: isinstance(f, list) and not all(is_alias(kind_of(o)) for o in f) and not shape_arithmetic(f)
    )
    moves = ops["op_type"].isin(MOVEMENT_TYPES)
    ops = ops[computes | moves].copy()
    # keep one profile per config (the latest measurement), as for the end-to-end table
    latest = ops.groupby("config_id")["measurement_id"].transform("max")
    ops = ops[ops["measurement_id"] == latest]
    ops["model"] = ops["config_id"]
    if latency_stat == "steady_ms":
        effect = ops["measurement_id"].map(every.set_index("id")["host_effect"]).fillna(0.0)
        ops["latency_ms"] = ops["latency_ms"] * np.exp(-effect.to_numpy(dtype=np.float64))
    ops["n_ops"] = ops["fused_ops"].map(len).where(~ops["op_type"].isin(MOVEMENT_TYPES), 1)
    ops["kernel"] = ops["kernel"].astype(str)
    return ops[[c for c in columns if c in ops.columns]].reset_index(drop=True), e2e
