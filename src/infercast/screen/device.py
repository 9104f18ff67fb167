"""A shipped phone setting or measured host (``infercast devices list``) as a screening predictor.

Its Σ cost × work model (``predictors.physical``) reads device features, which
the design space computes for its candidates in closed form (``Space.device_features``). It predicts
latency only; the stage-1 margin comes from its out-of-fold residuals on held-out architecture
families (a host's: held-out design spaces), and stage 2 adds its interval and the ``ood`` check.
The candidates run at batch 1 in fp32, as the devices were measured; for a phone an input side
other than 224 is flagged ``ood``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from infercast.screen.request import ScreenError


@dataclass(frozen=True)
class _Platform:
    id: str
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Info:
    platform: _Platform
    trained_models: list[str] = field(default_factory=list)


class DeviceScreener:
    """Stage 1 and stage 2 of a screening (``screen.stages``) for the usc-mobile setting or host
    named ``device`` on candidates of ``space`` (a space with a closed form of the device features,
    ``Space.device_features``)."""

    def __init__(self, device: str, space: Any) -> None:
        from infercast.predictors.devices import cards, source_of
        from infercast.predictors.routes import PHYSICAL, label
        from infercast.space import get, names

        if not space.has_device_features:
            closed = [name for name in names() if get(name).has_device_features]
            raise ScreenError(
                f"--device {device} screens the spaces {', '.join(closed)} (their device features "
                f"have a closed form), not {space.name}"
            )
        self.featurize = space.device_features
        # the source's Σ cost × work route: the others (a GPU setting's op-wise one, a host's blend
        # and op-wise) need each graph
        source = source_of(device)
        self.model = source.physical(device)
        self.input_side = source.INPUT_SIDE
        self.route = PHYSICAL
        self.feature_names_ = list(self.model.columns_)
        self.targets_ = {"latency": self.model}
        self.unavailable_ = {
            target: f"the shipped device {device} predicts latency only" for target in ("memory", "energy")
        }
        self.info = _Info(_Platform(device))
        self.ood_ = None  # stage 2's predictions carry the ood check
        card = cards().get(device, {})
        # a GPU setting's card is its op-wise route's; this route's own figures are beside it
        self.card = card.get("other_routes", {}).get(self.route, card)
        self.note = (
            f"`infercast predict --device {device}` on the shortlist gives the card's route, "
            f"{label(card['route']) if card.get('route') else 'unknown'}: it needs each network's graph"
            if card.get("route") != self.route
            else ""
        )

    def summary(self) -> dict[str, Any]:
        """The route and its card figures (family-grouped), as a screening reports them."""
        figures = {
            k: self.card.get(k) for k in ("within_10pct", "median_abs_error_pct", "spearman", "coverage")
        }
        return {"device": self.info.platform.id, "route": self.route, **figures, "note": self.note}

    def inputs(self, features: pd.DataFrame) -> pd.DataFrame:
        """The model's columns, then the input side (for the ood note)."""
        return features[[*self.feature_names_, "input_side"]]

    def predict_fast(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Stage 1: Σ cost × work of rows of ``inputs`` as a matrix (the full model: it is linear)."""
        return {"latency": np.asarray(x, dtype=np.float64)[:, : len(self.feature_names_)] @ self.model.costs_}

    def fast_margin(self, target: str, risk: float, difficulty: np.ndarray | None = None) -> np.ndarray:
        """The one-sided log margin at ``risk`` (``PhysicalLatency.margin``); no ood widening
        (``difficulty``, a blend's): held-out families already set it."""
        if target != "latency":
            raise ScreenError(self.unavailable_[target])
        return np.array([self.model.margin(risk)])

    def predict(self, x: pd.DataFrame, ood: str = "ranges") -> pd.DataFrame:
        """Stage 2: latency, its interval and the ood check (feature ranges, the input side) of
        rows of ``inputs``; ``ood`` as a blend's, whose range check is the only one here."""
        out = self.model.predict(x)
        side = x["input_side"].to_numpy()
        other = np.flatnonzero(side != self.input_side) if self.input_side else np.array([], dtype=int)
        if len(other):
            sides, which = np.unique(side[other], return_inverse=True)
            notes = np.array(
                [
                    f"trained on {self.input_side}×{self.input_side} inputs, this one is {s:.0f}×{s:.0f}"
                    for s in sides
                ],
                dtype=object,
            )[which]
            reasons = out["ood_reason"].to_numpy(dtype=object).copy()
            both = np.flatnonzero(reasons[other] != "")
            notes[both] = [f"{r}; {n}" for r, n in zip(reasons[other[both]], notes[both], strict=True)]
            reasons[other] = notes
            flagged = out["ood"].to_numpy().copy()
            flagged[other] = True
            out["ood_reason"], out["ood"] = reasons, flagged
        out["route"] = self.route
        return out
