"""Two-stage deployment screening (CARB): a million candidates to a validated Pareto shortlist.

- **Stage 1** (``stage_one``): candidates featurised in closed form (no module is built) in
  chunks, every target predicted by the predictor's fast screening models, and each budget applied
  with a safety margin from those models' out-of-fold residuals: a feasible candidate is wrongly
  discarded with probability about ``risk``.
- **Stage 2** (``stage_two``): the survivors re-scored by the full cascade blend (optionally a second
  platform's predictor, as CARB re-scores with the target GPU's model), the budgets applied to the
  point predictions, non-dominated sorting on the objectives, and a shortlist ranked by crowding
  distance or a user weighting.
- **Validation** (``validate``): the shortlist (and the rejected candidates closest to the
  budgets) measured with the measurement engine: predicted vs measured, correct accept / false
  accept / false reject, all stored.

``screen`` never measures unless asked to validate, and never imports a learner library itself.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.errors import InfercastError
from infercast.features import FEATURE_NAMES
from infercast.predict import TARGETS, CascadeBlend
from infercast.predict.data import feature_frame
from infercast.screen.pareto import shortlist as pareto_shortlist

OBJECTIVES = ("latency", "memory", "energy", "flops", "params")
_BUDGET_TARGETS = {"latency": "max_latency_ms", "memory": "max_memory_mb", "energy": "max_energy_j"}
CHUNK = 250_000

Progress = Callable[[str, int, int], None]


class ScreenError(InfercastError):
    """A screening request that cannot be met as asked (bad objectives, wrong predictor…)."""


@dataclass
class Budgets:
    max_latency_ms: float | None = None
    max_memory_mb: float | None = None
    max_energy_j: float | None = None

    def __post_init__(self) -> None:
        for name, value in self.items():
            if value is not None and (not math.isfinite(value) or value <= 0):
                raise ScreenError(
                    f"{_BUDGET_TARGETS[name].replace('_', '-')}={value!r} must be a positive number"
                )

    def items(self) -> list[tuple[str, float | None]]:
        return [(target, getattr(self, option)) for target, option in _BUDGET_TARGETS.items()]

    def active(self) -> dict[str, float]:
        return {target: value for target, value in self.items() if value is not None}


@dataclass
class Candidates:
    """What to screen: design-space configs (``family`` set) or model strings (features given)."""

    configs: pd.DataFrame
    family: Any = None
    features: pd.DataFrame | None = None
    source: str = ""
    count: int | None = None  # candidates generated elsewhere (on a cluster): only their number

    def __len__(self) -> int:
        return len(self.configs) if self.count is None else self.count


def from_space(name: str, n: int, seed: int = 0) -> Candidates:
    from infercast import space

    family = space.get(name)
    if n < 1:
        raise ScreenError(f"--n={n} must be at least 1")
    return Candidates(
        family.sample(n, seed=seed, ids=False), family, source=f"{family.name} (n={n}, seed={seed})"
    )


def from_configs(path: str | Path, space_name: str) -> Candidates:
    """A Parquet / CSV of configs of ``space_name`` (one column per parameter)."""
    from infercast import space
    from infercast.tables import read_table

    family = space.get(space_name)
    frame = read_table(path)
    names = [p.name for p in family.params]
    missing = [n for n in names if n not in frame.columns]
    if missing:
        raise ScreenError(f"{path}: columns {missing} missing for space {family.name} (it has {names})")
    frame = frame[names].reset_index(drop=True)
    bad = ~family.valid_rows(frame)
    if bad.any():
        raise ScreenError(f"{path}: row {int(np.flatnonzero(bad)[0])} is not a valid {family.name} config")
    return Candidates(frame, family, source=str(path))


def from_models(models: list[str]) -> Candidates:
    """Model strings of any kind; each is captured once here (slow next to a space, but exact)."""
    from infercast.features import features
    from infercast.graph import capture
    from infercast.models import load_model

    rows = []
    for model in models:
        loaded = load_model(model)
        rows.append(
            features(capture(loaded.module if loaded.module is not None else loaded.onnx, loaded.input_shape))
        )
    configs = pd.DataFrame({"model": models, "id": models})
    return Candidates(
        configs, None, pd.DataFrame(rows)[list(FEATURE_NAMES)], source=f"{len(models)} model strings"
    )


@dataclass
class ScreenResult:
    candidates: int
    source: str
    budgets: dict[str, float]
    objectives: list[str]
    risk: float
    stage1: dict[str, Any] = field(default_factory=dict)
    stage2: dict[str, Any] = field(default_factory=dict)
    shortlist: pd.DataFrame = field(default_factory=pd.DataFrame)
    closest: pd.DataFrame = field(default_factory=pd.DataFrame)
    rejected_near: pd.DataFrame = field(default_factory=pd.DataFrame)
    message: str = ""
    validation: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidates": self.candidates,
            "source": self.source,
            "budgets": self.budgets,
            "objectives": self.objectives,
            "risk": self.risk,
            "stage1": self.stage1,
            "stage2": self.stage2,
            "message": self.message,
            "shortlist": _records(self.shortlist),
            "closest": _records(self.closest),
            "validation": self.validation,
        }


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    if frame.empty:
        return []
    out = frame.drop(columns=[c for c in frame.columns if c.startswith("_")]).astype(object)
    return out.where(out.notna(), None).to_dict(orient="records")


def check_request(
    predictor: CascadeBlend,
    candidates: Candidates,
    budgets: Budgets,
    objectives: list[str],
    platform: str | None,
) -> None:
    """Refuse what cannot be answered: unknown or repeated objectives, a budget or objective on a
    target the predictor cannot predict, a predictor for another space or platform."""
    unknown = [o for o in objectives if o not in OBJECTIVES]
    if unknown:
        raise ScreenError(f"unknown objective(s) {unknown}: choose among {', '.join(OBJECTIVES)}")
    if len(set(objectives)) != len(objectives) or not objectives:
        raise ScreenError(f"objectives {objectives} must be distinct and not empty")
    for target in [*budgets.active(), *(o for o in objectives if o in TARGETS)]:
        if target not in predictor.stages:
            reason = predictor.unavailable.get(target, "not trained")
            raise ScreenError(
                f"the predictor cannot predict {target} ({reason}); drop that budget / objective"
            )
    own = predictor.metadata.get("platform", {}).get("id")
    if platform is not None and own is not None and not own.startswith(platform):
        raise ScreenError(f"the predictor was trained on platform {own}, not {platform}")
    if candidates.family is not None:
        trained = predictor.metadata.get("training", {}).get("models", [])
        family = f"space:{candidates.family.string_name}"
        if trained and family not in trained:
            raise ScreenError(
                f"the predictor was trained on {', '.join(trained)}, not on {family}: its predictions for "
                "this space would be extrapolations (train one on a sample of it)"
            )


def _inputs(features: pd.DataFrame, predictor: CascadeBlend) -> pd.DataFrame:
    """The predictor's input columns: the features + its platform's settings."""
    frame = feature_frame(features, predictor.metadata.get("platform", {}).get("settings", {}))
    return frame[predictor.feature_names]


def stage_one(
    predictor: CascadeBlend,
    candidates: Candidates,
    budgets: Budgets,
    risk: float,
    progress: Progress | None = None,
    keep_closest: int = 10,
) -> tuple[pd.DataFrame, dict[str, Any], pd.DataFrame]:
    """Fast predictions and the margin-aware budget filter, in chunks. Returns the survivors
    (configs + fast predictions), the stage report and the closest rejected candidates."""
    started = time.perf_counter()
    active = budgets.active()
    margins = {t: predictor.fast_margin(t, risk) for t in active}
    removed = dict.fromkeys(active, 0)
    survivors, nearest = [], []
    total = len(candidates)
    for start in range(0, total, CHUNK):
        chunk = candidates.configs.iloc[start : start + CHUNK]
        if candidates.family is not None:
            features = candidates.family.features(chunk)
        else:
            features = candidates.features.iloc[start : start + CHUNK].reset_index(drop=True)
        fast = predictor.predict_fast(_inputs(features, predictor).to_numpy(dtype=np.float32))
        keep = np.ones(len(chunk), dtype=bool)
        worst = np.zeros(len(chunk))
        for target, limit in active.items():
            optimistic = fast[target] * math.exp(-margins[target])
            over = optimistic > limit
            removed[target] += int(over.sum())
            keep &= ~over
            worst = np.maximum(worst, fast[target] / limit)
        frame = chunk.reset_index(drop=True).assign(_index=np.arange(start, start + len(chunk)))
        for target, values in fast.items():
            frame[f"_fast_{target}"] = values
        frame["_violation"] = worst
        frame["flops"] = features["flops"].to_numpy()
        frame["params"] = features["params"].to_numpy()
        survivors.append(frame[keep])
        if keep_closest and (~keep).any():
            nearest.append(frame[~keep].nsmallest(keep_closest, "_violation"))
        if progress is not None:
            progress("stage 1", min(start + CHUNK, total), total)
    kept = pd.concat(survivors, ignore_index=True) if survivors else pd.DataFrame()
    distinct = len(kept)
    if candidates.family is not None and len(kept):
        # a sample larger than a small space repeats configs: each is scored once from here on
        kept = kept.drop_duplicates([p.name for p in candidates.family.params], ignore_index=True)
        distinct = len(kept)
    closest = (
        pd.concat(nearest, ignore_index=True).nsmallest(keep_closest, "_violation")
        if nearest
        else kept.head(0)
    )
    report = {
        "seconds": time.perf_counter() - started,
        "removed_by": removed,
        "margins_pct": {t: (math.exp(m) - 1) * 100 for t, m in margins.items()},
        "survivors": _survivor_count(survivors),
        "distinct_survivors": distinct,
        "elimination_rate": 1 - _survivor_count(survivors) / total if total else 0.0,
    }
    return kept, report, closest


def _survivor_count(parts: list[pd.DataFrame]) -> int:
    return sum(len(p) for p in parts)


def stage_two(
    predictor: CascadeBlend,
    survivors: pd.DataFrame,
    candidates: Candidates,
    budgets: Budgets,
    progress: Progress | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The full cascade blend on the survivors, with intervals and OOD flags."""
    started = time.perf_counter()
    if survivors.empty:
        return survivors, {"seconds": 0.0, "feasible": 0}
    if candidates.family is not None:
        named = candidates.family.with_ids(survivors.drop(columns=["model", "id"], errors="ignore"))
        features = candidates.family.features(named)
    else:
        named = survivors
        features = candidates.features.iloc[survivors["_index"].to_numpy()].reset_index(drop=True)
    x = _inputs(features, predictor)
    parts = []
    for start in range(0, len(x), 50_000):
        # feature ranges here; the nearest-neighbour check runs on the shortlist only
        parts.append(predictor.predict(x.iloc[start : start + 50_000], ood="ranges"))
        if progress is not None:
            progress("stage 2", min(start + 50_000, len(x)), len(x))
    predicted = pd.concat(parts)
    named = named.drop(columns=[c for c in FEATURE_NAMES if c in named.columns]).reset_index(drop=True)
    scored = pd.concat([named, features.reset_index(drop=True), predicted.reset_index(drop=True)], axis=1)
    feasible = np.ones(len(scored), dtype=bool)
    violation = np.zeros(len(scored))
    for target, limit in budgets.active().items():
        values = scored[TARGETS[target]].to_numpy()
        feasible &= values <= limit
        violation = np.maximum(violation, values / limit)
    scored["_violation"] = violation
    scored["feasible"] = feasible
    report = {
        "seconds": time.perf_counter() - started,
        "rescored": len(scored),
        "feasible": int(feasible.sum()),
    }
    return scored, report


def _objective_values(frame: pd.DataFrame, objectives: list[str]) -> np.ndarray:
    columns = [TARGETS.get(o, o) for o in objectives]
    return frame[columns].to_numpy(dtype=np.float64)


def screen(
    predictor: CascadeBlend,
    candidates: Candidates,
    budgets: Budgets,
    objectives: list[str],
    shortlist: int = 10,
    risk: float = 0.05,
    predictor_b: CascadeBlend | None = None,
    weights: dict[str, float] | None = None,
    platform: str | None = None,
    progress: Progress | None = None,
    stage_one_runner: Callable[..., tuple[pd.DataFrame, dict[str, Any], pd.DataFrame]] | None = None,
) -> ScreenResult:
    """Screen ``candidates`` against ``budgets``; see the module docstring for the stages.
    ``stage_one_runner`` replaces the local ``stage_one`` (same arguments and results): the Ray
    route generates, featurises and filters the candidates on a cluster."""
    if shortlist < 1:
        raise ScreenError(f"--shortlist={shortlist} must be at least 1")
    check_request(predictor, candidates, budgets, objectives, platform if predictor_b is None else None)
    if predictor_b is not None:
        check_request(predictor_b, candidates, budgets, objectives, platform)
    weight_vector = None
    if weights:
        unknown = [k for k in weights if k not in objectives]
        if unknown:
            raise ScreenError(f"weights for {unknown}, which are not among the objectives {objectives}")
        weight_vector = np.array([weights.get(o, 0.0) for o in objectives])
    result = ScreenResult(len(candidates), candidates.source, budgets.active(), list(objectives), risk)
    survivors, result.stage1, closest = (stage_one_runner or stage_one)(
        predictor, candidates, budgets, risk, progress
    )
    scored, result.stage2 = stage_two(predictor_b or predictor, survivors, candidates, budgets, progress)
    result.stage2["predictor"] = "b" if predictor_b is not None else "a"
    feasible = scored[scored["feasible"]] if not scored.empty else scored
    if feasible.empty:
        pool = scored if not scored.empty else closest
        result.closest = pool.nsmallest(min(10, len(pool)), "_violation") if len(pool) else pool
        if candidates.family is not None and "model" not in result.closest.columns and len(result.closest):
            result.closest = candidates.family.with_ids(result.closest)
        result.message = (
            f"no candidate meets the budgets {budgets.active()}: the closest are listed "
            "(violation = predicted / budget, worst budget)"
        )
        return result
    started = time.perf_counter()
    values = _objective_values(feasible, objectives)
    rows, ranks = pareto_shortlist(values, shortlist, weight_vector)
    picked = feasible.iloc[rows].copy()
    picked["front"] = ranks
    scorer = predictor_b or predictor
    if scorer.ood is not None:
        picked["ood"], picked["ood_reason"] = scorer.ood.check(_inputs(picked, scorer).to_numpy())
    result.shortlist = picked.reset_index(drop=True)
    infeasible = scored[~scored["feasible"]]
    result.rejected_near = infeasible.nsmallest(min(shortlist, len(infeasible)), "_violation")
    result.stage2["pareto_seconds"] = time.perf_counter() - started
    result.stage2["front_1"] = int((ranks == 1).sum())
    return result


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
    import json
    import zlib

    from infercast.measure import backends, run_campaign
    from infercast.store import Store

    platform = predictor.metadata.get("platform", {})
    # settings that name where it ran (a device, a cluster's device kind) are not backend options
    settings = {k: v for k, v in platform.get("settings", {}).items() if k not in ("device", "device_kind")}
    backend = backends.get(platform.get("backend", "ort-cpu"), **settings)
    probe = result.rejected_near.head(probe_rejected)
    frame = pd.concat(
        [result.shortlist.assign(_role="accepted"), probe.assign(_role="rejected")], ignore_index=True
    )
    if frame.empty:
        raise ScreenError("nothing to validate: the shortlist is empty")
    family = candidates.family
    names = [p.name for p in family.params] if family is not None else []
    rows = [
        {
            "id": row["id"],
            "model": row["model"],
            "space": family.string_name if family is not None else None,
            "params": {n: _plain(row[n]) for n in names},
            "features": {n: float(row[n]) for n in FEATURE_NAMES},
        }
        for _, row in frame.iterrows()
    ]
    campaign = f"screen-validate:{zlib.crc32(json.dumps(sorted(frame['id'].astype(str))).encode()):08x}"
    run_campaign(rows, db, backend, campaign, protocol, progress=progress)
    with Store(db) as store:
        measured = store.measurements()
        failures = store.failures()
    failed = failures[failures["campaign"] == campaign].drop_duplicates("config_id").set_index("config_id")
    measured = measured[measured["campaign"] == campaign].drop_duplicates("config_id").set_index("config_id")
    budgets = result.budgets
    table, counts = [], {"correct_accept": 0, "false_accept": 0, "correct_reject": 0, "false_reject": 0}
    for _, row in frame.iterrows():
        if row["id"] not in measured.index:
            reason = failed.loc[row["id"], "reason"] if row["id"] in failed.index else "not measured"
            table.append({"model": row["model"], "role": row["_role"], "failure": str(reason)})
            continue
        m = measured.loc[row["id"]]
        truth = {
            "latency": float(m["low_ms"]),
            "memory": _mb(m["peak_memory_bytes"]),
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


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _mb(value: Any) -> float | None:
    number = _num(value)
    return None if number is None else number / 1e6


def _num(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
