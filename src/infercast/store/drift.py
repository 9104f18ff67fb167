"""Between-session drift of a platform, estimated from its sentinel readings.

Every campaign measures the same few sentinel models at its start, at intervals and at its end;
one such round of readings is a *pass*. A pass's **effect** is how much slower than usual its
sentinels read on this platform: ``e_p = mean_s(log median_sp − centre_s)``, where ``centre_s`` is
the sentinel's median log reading over all passes of the platform.

- **spread**: the standard deviation of ``e_p − e_q`` over pairs of passes taken in *different*
  campaigns — how far apart two readings of the same model land when taken in two sessions, which
  is what a user comparing today's figure with next week's meets. Each reading carries its own
  within-session noise, so the difference includes both. With one campaign only, pairs within it
  are used (``basis="within one campaign"``): that misses what changes between sessions, and is
  said so.
- **spread by size**: the same root-mean-square difference for each sentinel alone. How far a
  session moves a model depends on its size (working sets near the shared cache's size suffer
  most from a neighbour's: benchmarks/measure_repeatability.py), so a measurement's
  spread is interpolated between the sentinels' by log latency (flat beyond them).
- **session CI** of a measurement: ``[m·e^-h, m·e^h]`` with ``h = sqrt(h_w² + (1.96·σ(m))²)``,
  ``h_w`` the log half-width of its within-session bootstrap CI, ``σ(m)`` its spread by size.
- **contention**: a pass whose effect is above ``log(1 + tolerance)`` read slow; a measurement
  stored between a slow pass and the next one (or the previous one and a slow pass) of its
  campaign was taken while the host was slow, and says so.
- **steady latency** ``steady_ms = low_ms · e^(−h)``: a measurement at the host's usual speed.
  ``h`` (``host_effect``) is how much slower than usual the host ran when the measurement was
  taken: its campaign's pass effects on ``low_ms``, each sentinel weighted by the inverse square
  of its typical coefficient of variation (a sentinel whose rounds scatter widely would otherwise
  move the effect of every pass), linear in time between the passes
  around it. A host that speeds up or slows down every model alike for minutes at a time moves
  ``low_ms`` between campaigns, and ``steady_ms`` takes that out (docs/measure.md, "Steady
  latency").

Pure numpy / pandas on the store's frames; ``Store`` calls it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

Z95 = 1.959964
# a sentinel's weight in the steady latency's pass effects: no reading is trusted beyond this cv
_MIN_CV = 0.005


@dataclass(frozen=True)
class Drift:
    """A platform's between-session spread (log scale) and the passes it was estimated from."""

    spread: float | None
    basis: str
    passes: int
    campaigns: int
    sentinels: int
    low_spread: float | None = None
    effects: pd.DataFrame = field(default_factory=pd.DataFrame)
    # per sentinel: (its median latency in ms, its own spread), ordered by latency
    by_size: list[tuple[float, float]] = field(default_factory=list)
    # the passes' precision-weighted effects on low_ms: what steady_ms corrects by
    speed: pd.DataFrame = field(default_factory=pd.DataFrame)

    def spread_at(self, median_ms: np.ndarray) -> np.ndarray | None:
        """The spread a measurement of each latency meets: interpolated between the sentinels'
        by log latency; the pooled spread where no sentinel has one; None with no estimate."""
        if not self.by_size:
            return None if self.spread is None else np.full(len(median_ms), self.spread)
        at = np.log([ms for ms, _ in self.by_size])
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.interp(
                np.log(np.asarray(median_ms, dtype=np.float64)), at, [s for _, s in self.by_size]
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "spread": self.spread,
            "spread_percent": None if self.spread is None else 100 * math.expm1(self.spread),
            "low_spread": self.low_spread,
            "basis": self.basis,
            "passes": self.passes,
            "campaigns": self.campaigns,
            "sentinels": self.sentinels,
            "by_size": [{"median_ms": ms, "spread": spread} for ms, spread in self.by_size],
        }


def pass_effects(readings: pd.DataFrame, column: str = "median_ms", weighted: bool = False) -> pd.DataFrame:
    """One row per pass (``campaign``, ``pass_index``): its time and effect on ``column``, the
    sentinels' mean, or with ``weighted`` each sentinel weighted by ``1 / cv²`` of its median
    coefficient of variation over the platform's readings (0.5 % at least)."""
    if readings.empty:
        return pd.DataFrame(columns=["campaign", "pass_index", "created_at", "effect"])
    logs = np.log(readings[column].to_numpy(dtype=np.float64))
    by_sentinel = readings["sentinel"].to_numpy()
    centre = pd.Series(logs).groupby(by_sentinel).transform("median").to_numpy()
    weight = np.ones(len(readings))
    if weighted and "cv" in readings.columns:
        typical = readings["cv"].astype(np.float64).groupby(by_sentinel).transform("median").to_numpy()
        weight = np.where(np.isfinite(typical), 1 / np.clip(typical, _MIN_CV, None) ** 2, 1 / _MIN_CV**2)
    frame = readings[["campaign", "pass_index", "created_at"]].assign(
        weighted=(logs - centre) * weight, weight=weight
    )
    passes = frame.groupby(["campaign", "pass_index"], as_index=False).agg(
        created_at=("created_at", "max"), weighted=("weighted", "sum"), weight=("weight", "sum")
    )
    passes["effect"] = passes["weighted"] / passes["weight"]
    return passes.drop(columns=["weighted", "weight"]).sort_values("created_at", ignore_index=True)


def _pair_spread(effects: pd.DataFrame, across: bool, column: str = "effect") -> float | None:
    """Root-mean-square difference over ordered pairs of rows (in different campaigns when
    ``across``), in O(n): Σ_pairs (x_i − x_j)² = 2n·Σx² − 2(Σx)² over all pairs, less the same
    within each campaign — a platform's passes over months would not fit an n × n matrix."""
    values = effects[column].to_numpy(dtype=np.float64)
    values = values - values.mean()  # the sums below lose nothing to cancellation

    def pair_sum(x: np.ndarray) -> float:
        return 2 * len(x) * float(np.sum(x**2)) - 2 * float(np.sum(x)) ** 2

    total, pairs = pair_sum(values), len(values) ** 2 - len(values)
    if across:
        groups = [values[effects["campaign"].to_numpy() == c] for c in pd.unique(effects["campaign"])]
        total -= sum(pair_sum(g) for g in groups)
        pairs = len(values) ** 2 - sum(len(g) ** 2 for g in groups)
    if pairs <= 0:
        return None
    return float(np.sqrt(max(total, 0.0) / pairs))


def estimate(readings: pd.DataFrame) -> Drift:
    """The platform's drift from its sentinel readings (``Store.sentinels`` rows of one platform)."""
    effects = pass_effects(readings)
    campaigns = int(effects["campaign"].nunique()) if len(effects) else 0
    sentinels = int(readings["sentinel"].nunique()) if len(readings) else 0
    speed = pass_effects(readings, "low_ms", weighted=True)
    if len(effects) < 2:
        basis = "no sentinel readings yet" if effects.empty else "one sentinel pass only"
        return Drift(None, basis, len(effects), campaigns, sentinels, effects=effects, speed=speed)
    across = campaigns >= 2
    low = _pair_spread(pass_effects(readings, "low_ms"), across)
    basis = f"across {campaigns} campaigns" if across else "within one campaign"
    by_size = []
    for _, own in readings.assign(log_ms=np.log(readings["median_ms"].astype(float))).groupby("sentinel"):
        spread = _pair_spread(own, across, "log_ms") if len(own) > 1 else None
        if spread is not None:
            by_size.append((float(np.exp(own["log_ms"].median())), spread))
    by_size.sort()
    pooled = _pair_spread(effects, across)
    return Drift(pooled, basis, len(effects), campaigns, sentinels, low, effects, by_size, speed)


def session_intervals(measurements: pd.DataFrame, drift: Drift, tolerance: float = 0.10) -> pd.DataFrame:
    """``measurements`` of one platform with the session CI in ``ci_low_ms`` / ``ci_high_ms`` (the
    within-session CI kept in ``within_ci_low_ms`` / ``within_ci_high_ms``), ``session_spread``
    (the spread by size each got), ``contended`` / ``contended_reason`` from the campaign's slow
    sentinel passes, and ``host_effect`` / ``steady_ms`` (the module's steady latency)."""
    out = measurements.copy()
    out["within_ci_low_ms"] = out["ci_low_ms"]
    out["within_ci_high_ms"] = out["ci_high_ms"]
    median = out["median_ms"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        within = np.log(out["ci_high_ms"].to_numpy(dtype=np.float64) / median)
        within = np.maximum(within, np.log(median / out["ci_low_ms"].to_numpy(dtype=np.float64)))
    spread = drift.spread_at(median)
    half = np.sqrt(within**2 + (Z95 * (0.0 if spread is None else spread)) ** 2)
    out["ci_low_ms"] = median * np.exp(-half)
    out["ci_high_ms"] = median * np.exp(half)
    out["session_spread"] = None if spread is None else spread
    out["contended"], out["contended_reason"] = _contention(out, drift.effects, tolerance)
    out["host_effect"] = host_effects(out, drift.speed)
    out["steady_ms"] = out["low_ms"].to_numpy(dtype=np.float64) * np.exp(-out["host_effect"].to_numpy())
    return out


def host_effects(measurements: pd.DataFrame, speed: pd.DataFrame) -> np.ndarray:
    """How much slower than usual (log) the host ran when each measurement was taken: its
    campaign's pass effects ``speed`` linear in time between the passes around it, the nearest
    pass's before the first or after the last, 0 in a campaign without passes (taken with
    ``--no-sentinels``: nothing to correct by)."""
    effects = np.zeros(len(measurements))
    if speed.empty:
        return effects
    campaigns = measurements["campaign"].to_numpy()
    created = measurements["created_at"].to_numpy(dtype=np.float64)
    for campaign, passes in speed.groupby("campaign"):
        own = campaigns == campaign
        effects[own] = np.interp(
            created[own], passes["created_at"].to_numpy(dtype=np.float64), passes["effect"].to_numpy()
        )
    return effects


def _contention(out: pd.DataFrame, effects: pd.DataFrame, tolerance: float) -> tuple[list[bool], list[str]]:
    flags, reasons = [], []
    slow_above = math.log1p(tolerance)
    by_campaign = {name: group for name, group in effects.groupby("campaign")} if len(effects) else {}
    scores = out["contention"] if "contention" in out.columns else pd.Series(np.nan, index=out.index)
    for campaign, created, score in zip(out["campaign"], out["created_at"], scores, strict=True):
        parts = []
        passes = by_campaign.get(campaign)
        if passes is not None:
            times = passes["created_at"].to_numpy()
            after = int(np.searchsorted(times, created))
            for index, where in ((after - 1, "before"), (after, "after")):
                if 0 <= index < len(times) and passes["effect"].iloc[index] > slow_above:
                    slower = math.expm1(passes["effect"].iloc[index])
                    parts.append(f"the sentinel pass {where} it read {slower:+.0%} against their usual")
        if score is not None and np.isfinite(score) and score > 0.25:
            parts.append(f"its group ran >{tolerance:.0%} slow in {score:.0%} of its rounds")
        flags.append(bool(parts))
        reasons.append("; ".join(parts))
    return flags, reasons
