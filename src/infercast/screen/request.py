"""What a screening asks: objectives, budgets, and the checks that refuse what cannot be answered."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from infercast.errors import InfercastError
from infercast.predictors import TARGETS, CascadeBlend

OBJECTIVES = ("latency", "memory", "energy", "flops", "params")


def weight_vector(weights: dict[str, float] | None, objectives: list[str]) -> np.ndarray | None:
    """The ranking weights in the order of ``objectives`` (None without weights), refused when one
    names no objective asked for, is not a finite number of 0 or more, or all are 0."""
    if not weights:
        return None
    for name, weight in weights.items():
        if name not in objectives:
            raise ScreenError(f"--weights: {name!r} is not among the objectives {', '.join(objectives)}")
        if not 0 <= weight < math.inf:
            raise ScreenError(f"--weights: {name}={weight!r} must be a finite number of 0 or more")
    if not any(weights.values()):
        raise ScreenError("--weights: every weight is 0; give at least one a positive weight")
    return np.array([weights.get(o, 0.0) for o in objectives])


_BUDGET_TARGETS = {"latency": "max_latency_ms", "memory": "max_memory_mb", "energy": "max_energy_j"}


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

    @classmethod
    def of(cls, budgets: Budgets | dict[str, float] | None) -> Budgets:
        """Budgets from a ``Budgets``, or a dict keyed by target (``{"latency": 10, "memory": 40}``)
        or by option (``{"max_latency_ms": 10}``)."""
        if isinstance(budgets, cls):
            return budgets
        given = dict(budgets or {})
        by_option = {_BUDGET_TARGETS.get(k, k): v for k, v in given.items()}
        unknown = sorted(set(by_option) - set(_BUDGET_TARGETS.values()))
        if unknown:
            known = [*_BUDGET_TARGETS, *_BUDGET_TARGETS.values()]
            raise ScreenError(f"unknown budget(s) {unknown}: use {', '.join(known)}")
        return cls(**{k: None if v is None else float(v) for k, v in by_option.items()})

    def items(self) -> list[tuple[str, float | None]]:
        return [(target, getattr(self, option)) for target, option in _BUDGET_TARGETS.items()]

    def active(self) -> dict[str, float]:
        return {target: value for target, value in self.items() if value is not None}


def check_request(
    predictor: CascadeBlend,
    candidates: Any,
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
        if target not in predictor.targets_:
            reason = predictor.unavailable_.get(target, "not trained")
            raise ScreenError(
                f"the predictor cannot predict {target} ({reason}); drop that budget / objective"
            )
    own = predictor.info.platform.id
    if platform is not None and own is not None and not own.startswith(platform):
        raise ScreenError(f"the predictor was trained on platform {own}, not {platform}")
    if candidates.space is not None:
        trained = predictor.info.trained_models
        wanted = f"space:{candidates.space.string_name}"
        if trained and wanted not in trained:
            raise ScreenError(
                f"the predictor was trained on {', '.join(trained)}, not on {wanted}: its predictions for "
                "this space would be extrapolations (train one on a sample of it)"
            )
