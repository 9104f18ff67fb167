"""Validation on hardware: the shortlist (and the rejected candidates nearest the budgets)
measured on the predictor's platform, stored, and classified against the budgets. The only part
of screening that touches ``measure`` and ``store``."""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.features import FEATURE_NAMES
from infercast.predictors import TARGETS, CascadeBlend
from infercast.screen.candidates import Candidates
from infercast.screen.request import ScreenError
from infercast.screen.stages import ScreenResult, feature_part
from infercast.store import Store
from infercast.units import bytes_to_mb


def validate(
    result: ScreenResult,
    predictor: CascadeBlend,
    candidates: Candidates,
    db: str | Path,
    protocol: Any = None,
    probe_rejected: int = 0,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Measure the shortlist (and ``probe_rejected`` of the rejected candidates nearest the
    budgets) on this machine, on the predictor's platform; store the measurements; report
    predicted vs measured and the budget classification."""
    # measuring imports torch: a screening that validates nothing should not pay for it
    from infercast.measurement import backends, run_campaign

    platform = predictor.info.platform
    # settings that name where it ran (a device, a cluster's device kind) are not backend options
    settings = {k: v for k, v in platform.settings.items() if k not in ("device", "device_kind")}
    backend = backends.get(platform.backend, **settings)
    probe = result.rejected_near.head(probe_rejected)
    frame = pd.concat(
        [result.shortlist.assign(_role="accepted"), probe.assign(_role="rejected")], ignore_index=True
    )
    if frame.empty:
        raise ScreenError("nothing to validate: the shortlist is empty")
    rows = _config_rows(frame, candidates)
    campaign = f"screen-validate:{zlib.crc32(json.dumps(sorted(frame['id'].astype(str))).encode()):08x}"
    run_campaign(rows, db, backend, campaign, protocol, progress=progress)
    with Store(db) as store:
        measured = store.measurements()
        failures = store.failures()
    failed = failures[failures["campaign"] == campaign].drop_duplicates("config_id").set_index("config_id")
    measured = measured[measured["campaign"] == campaign].drop_duplicates("config_id").set_index("config_id")
    table, counts = _classified(frame, measured, failed, result.budgets)
    errors = [
        abs(e["predicted_latency_ms"] - e["measured_latency_ms"]) / e["measured_latency_ms"]
        for e in table
        if e.get("measured_latency_ms")
    ]
    return {
        "campaign": campaign,
        "db": str(db),
        "counts": counts,
        "budget_accuracy": (
            (counts["correct_accept"] + counts["correct_reject"]) / sum(counts.values())
            if sum(counts.values())
            else None
        ),
        "median_latency_error": float(np.median(errors)) if errors else None,
        "rows": table,
    }


def _config_rows(frame: pd.DataFrame, candidates: Candidates) -> list[dict[str, Any]]:
    """The store rows of the candidates to measure: a space's configs, or model strings (their id
    is the string itself, their features were captured)."""
    if candidates.space is not None:
        return candidates.space.config_rows(frame, feature_part(frame))
    return [
        {
            "id": m,
            "model": m,
            "space": None,
            "params": {},
            "features": dict(zip(FEATURE_NAMES, map(float, f), strict=True)),
        }
        for m, f in zip(frame["model"], feature_part(frame).to_numpy(), strict=True)
    ]


def _classified(
    frame: pd.DataFrame, measured: pd.DataFrame, failed: pd.DataFrame, budgets: Any
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Each candidate predicted against measured, and the budget verdicts counted."""
    table, counts = [], {"correct_accept": 0, "false_accept": 0, "correct_reject": 0, "false_reject": 0}
    for _, row in frame.iterrows():
        if row["id"] not in measured.index:
            reason = failed.loc[row["id"], "reason"] if row["id"] in failed.index else "not measured"
            table.append({"model": row["model"], "role": row["_role"], "failure": str(reason)})
            continue
        m = measured.loc[row["id"]]
        truth = {
            # at the host's usual speed, as train's predictors learn it (store.drift)
            "latency": float(m["steady_ms"]),
            "memory": bytes_to_mb(m["peak_memory_bytes"]),
            "energy": _num(m["energy_j"]),
        }
        fits = all(truth[t] is None or truth[t] <= limit for t, limit in budgets.items())
        accepted = row["_role"] == "accepted"
        key = (
            ("correct_accept" if fits else "false_accept")
            if accepted
            else ("false_reject" if fits else "correct_reject")
        )
        counts[key] += 1
        entry = {"model": row["model"], "role": row["_role"], "verdict": key}
        for target, column in TARGETS.items():
            if column in row and pd.notna(row[column]):
                entry[f"predicted_{column}"] = float(row[column])
                entry[f"measured_{column}"] = truth[target]
        table.append(entry)
    return table, counts


def _num(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
