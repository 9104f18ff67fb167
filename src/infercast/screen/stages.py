"""The two stages and the shortlist (see the package docstring): ``stage_one`` (closed-form
features + fast models + margins, in chunks), ``stage_two`` (the full blend on the survivors) and
``screen``, which runs both and picks the Pareto shortlist. Nothing here measures."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from infercast.features import FEATURE_NAMES
from infercast.predictors import TARGETS, CascadeBlend
from infercast.screen.candidates import CHUNK, Candidates
from infercast.screen.pareto import shortlist as pareto_shortlist
from infercast.screen.request import Budgets, ScreenError, check_request, weight_vector

Progress = Callable[[str, int, int], None]


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


FEATURE_COLUMNS = [f"f_{name}" for name in FEATURE_NAMES]


def feature_part(frame: pd.DataFrame) -> pd.DataFrame:
    """The features of scored candidates (their ``f_`` columns) under their own names."""
    return frame[FEATURE_COLUMNS].set_axis(list(FEATURE_NAMES), axis=1)


def _inputs(features: pd.DataFrame, predictor: CascadeBlend) -> pd.DataFrame:
    """The columns the predictor reads, from the candidates' features (``CascadeBlend.inputs``;
    ``screen.device.DeviceScreener`` reads device features)."""
    return predictor.inputs(features)


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
    margins = {t: float(predictor.fast_margin(t, risk)[0]) for t in active}
    widest = dict(margins)
    removed = dict.fromkeys(active, 0)
    survivors, nearest = [], []
    survived, total = 0, len(candidates)
    for start, chunk, features in candidates.chunks(CHUNK):
        inputs = _inputs(features, predictor).to_numpy(dtype=np.float32)
        fast = predictor.predict_fast(inputs)
        # a candidate outside the profiled ranges gets the wider margin extrapolation needs
        difficulty = predictor.ood_.box_difficulty(inputs) if predictor.ood_ is not None else None
        keep = np.ones(len(chunk), dtype=bool)
        worst = np.zeros(len(chunk))
        for target, limit in active.items():
            margin = predictor.fast_margin(target, risk, difficulty)
            widest[target] = max(widest[target], float(margin.max()))
            optimistic = fast[target] * np.exp(-margin)
            over = optimistic > limit
            removed[target] += int(over.sum())
            keep &= ~over
            worst = np.maximum(worst, fast[target] / limit)
        frame = chunk.reset_index(drop=True).assign(_index=np.arange(start, start + len(chunk)))
        for target, values in fast.items():
            frame[f"_fast_{target}"] = values
        frame["_violation"] = worst
        # the features ride along, so stage 2 does not compute them again for a million survivors;
        # flops and params also serve as objectives
        frame = pd.concat([frame, features.reset_index(drop=True).add_prefix("f_")], axis=1)
        survived += int(keep.sum())
        part = frame[keep]
        if candidates.space is not None:
            # a sample larger than a small space repeats configs: each is scored once from here
            # on, and dropping repeats chunk by chunk keeps their features from piling up
            part = _distinct_configs(part, candidates.space)
        survivors.append(part)
        if keep_closest and (~keep).any():
            nearest.append(frame[~keep].nsmallest(keep_closest, "_violation"))
        if progress is not None:
            progress("stage 1", min(start + CHUNK, total), total)
    kept = pd.concat(survivors, ignore_index=True) if survivors else pd.DataFrame()
    if candidates.space is not None and len(kept):
        kept = _distinct_configs(kept, candidates.space)
    closest = (
        pd.concat(nearest, ignore_index=True).nsmallest(keep_closest, "_violation")
        if nearest
        else kept.head(0)
    )
    report = {
        "seconds": time.perf_counter() - started,
        "removed_by": removed,
        "margins_pct": {t: (math.exp(m) - 1) * 100 for t, m in margins.items()},
        "widest_margins_pct": {t: (math.exp(m) - 1) * 100 for t, m in widest.items()},
        "survivors": survived,
        "distinct_survivors": len(kept),
        "elimination_rate": 1 - survived / total if total else 0.0,
    }
    return kept, report, closest


def _distinct_configs(frame: pd.DataFrame, space: Any) -> pd.DataFrame:
    """The first row of each distinct config of ``space`` in ``frame``, in order. Each config is
    one integer (its choice indices in mixed radix) when the space's size fits 63 bits: on a
    million survivors of 33 parameters 0.27 s, where ``drop_duplicates`` took 1.13 s."""
    names = [p.name for p in space.params]
    if math.prod(len(p.choices) for p in space.params) >= 2**63:
        return frame.drop_duplicates(names, ignore_index=True)
    key = np.zeros(len(frame), dtype=np.int64)
    for param in space.params:
        column = frame[param.name]
        if isinstance(column.dtype, pd.CategoricalDtype) and list(column.cat.categories) == list(
            param.choices
        ):
            codes = column.cat.codes.to_numpy()
        else:
            codes = pd.Index(list(param.choices)).get_indexer(column)
        if (codes < 0).any():  # a value that is not one of the choices: compare values instead
            return frame.drop_duplicates(names, ignore_index=True)
        key = key * len(param.choices) + codes
    _, first = np.unique(key, return_index=True)
    return frame.iloc[np.sort(first)].reset_index(drop=True)


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
    # model strings of a space are spelled for the rows reported only (``_named``): for a million
    # survivors they cost more than the predictions
    named = (
        survivors.drop(columns=["model", "id"], errors="ignore")
        if candidates.space is not None
        else survivors
    )
    named = named.reset_index(drop=True)
    # a config's parameters and its features share names (depth, batch) but not meanings: stage 1
    # carries the features as f_<name>, as `space sample --features` writes them
    carried = [c for c in named.columns if c.startswith("f_")]
    features = named[carried].set_axis([c.removeprefix("f_") for c in carried], axis=1)
    named = named.drop(columns=carried)
    x = _inputs(features, predictor)
    parts = []
    for start in range(0, len(x), 50_000):
        # feature ranges here; the nearest-neighbour check runs on the shortlist only
        parts.append(predictor.predict(x.iloc[start : start + 50_000], ood="ranges"))
        if progress is not None:
            progress("stage 2", min(start + 50_000, len(x)), len(x))
    predicted = pd.concat(parts)
    scored = pd.concat([named, features.add_prefix("f_"), predicted.reset_index(drop=True)], axis=1)
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


def _named(frame: pd.DataFrame, candidates: Candidates) -> pd.DataFrame:
    """``frame`` with the ``model`` string and ``id`` of each design-space config."""
    if candidates.space is None or "model" in frame.columns or frame.empty:
        return frame.reset_index(drop=True)
    return candidates.space.with_ids(frame)


def _objective_values(frame: pd.DataFrame, objectives: list[str]) -> np.ndarray:
    columns = [TARGETS.get(o, f"f_{o}") for o in objectives]
    return frame[columns].to_numpy(dtype=np.float64)


def screen(
    predictor: CascadeBlend,
    candidates: Candidates,
    budgets: Budgets | dict[str, float],
    objectives: list[str],
    shortlist: int = 10,
    risk: float = 0.05,
    predictor_b: CascadeBlend | None = None,
    weights: dict[str, float] | None = None,
    platform: str | None = None,
    progress: Progress | None = None,
    stage_one_runner: Callable[..., tuple[pd.DataFrame, dict[str, Any], pd.DataFrame]] | None = None,
) -> ScreenResult:
    """Screen ``candidates`` against ``budgets`` (a ``Budgets`` or a dict such as
    ``{"latency": 10, "memory": 40}``); see the package docstring for the stages.
    ``stage_one_runner`` replaces the local ``stage_one`` (same arguments and results): the Ray
    route generates, featurises and filters the candidates on a cluster."""
    if shortlist < 1:
        raise ScreenError(f"--shortlist={shortlist} must be at least 1")
    budgets = Budgets.of(budgets)
    check_request(predictor, candidates, budgets, objectives, platform if predictor_b is None else None)
    if predictor_b is not None:
        check_request(predictor_b, candidates, budgets, objectives, platform)
    ranking = weight_vector(weights, objectives)
    result = ScreenResult(len(candidates), candidates.source, budgets.active(), list(objectives), risk)
    survivors, result.stage1, closest = (stage_one_runner or stage_one)(
        predictor, candidates, budgets, risk, progress
    )
    scored, result.stage2 = stage_two(predictor_b or predictor, survivors, candidates, budgets, progress)
    result.stage2["predictor"] = "b" if predictor_b is not None else "a"
    feasible = scored[scored["feasible"]] if not scored.empty else scored
    if feasible.empty:
        pool = scored if not scored.empty else closest
        result.closest = (
            _named(pool.nsmallest(min(10, len(pool)), "_violation"), candidates) if len(pool) else pool
        )
        result.message = (
            f"no candidate meets the budgets {budgets.active()}: the closest are listed "
            "(violation = predicted / budget, worst budget)"
        )
        return result
    started = time.perf_counter()
    values = _objective_values(feasible, objectives)
    rows, ranks = pareto_shortlist(values, shortlist, ranking)
    picked = feasible.iloc[rows].copy()
    picked["front"] = ranks
    scorer = predictor_b or predictor
    if scorer.ood_ is not None:
        picked["ood"], picked["ood_reason"] = scorer.ood_.check(
            _inputs(feature_part(picked), scorer).to_numpy()
        )
    result.shortlist = _named(picked, candidates)
    infeasible = scored[~scored["feasible"]]
    result.rejected_near = _named(
        infeasible.nsmallest(min(shortlist, len(infeasible)), "_violation"), candidates
    )
    result.stage2["pareto_seconds"] = time.perf_counter() - started
    result.stage2["front_1"] = int((ranks == 1).sum())
    return result
