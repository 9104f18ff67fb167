"""The latency protocol, built for hosts whose speed drifts.

On a shared host every model slows down together for seconds at a time. So configs are measured
in short **rounds** (``round_s`` of back-to-back inferences), and rounds are **interleaved** across
``group`` configs, each in its own worker process: a slow spell hits every config in the group
alike instead of one config entirely. Per config the protocol records all iteration latencies and:

- ``low_ms``: the fastest round's median — the robust low statistic, the most repeatable figure
  here (3 % between sessions where the overall median moved 9–13 %);
- ``median_ms`` / ``mean_ms`` / ``p10/p90/p99_ms`` / ``cv`` over all iterations;
- ``ci_low_ms`` / ``ci_high_ms``: a bootstrap 95 % CI of the median, resampling whole rounds
  (iterations within a round are not independent). Rounds continue until its half-width is
  within ``ci_target`` of the median (after ``min_rounds``) or the time cap is hit (``cap_hit``);
- ``contention``: the share of the config's rounds taken while the whole group ran more than
  ``drift_tolerance`` slower than its best (drift), or the CPU steal share, whichever is larger.

What a round cannot see — the whole session running slower or faster than another — is measured by
the campaign's sentinel passes (``measurement.sentinels``, ``store.drift``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from infercast.measurement.backends.base import MeasureError


@dataclass(frozen=True)
class Protocol:
    warmup_s: float = 0.5
    round_s: float = 0.3
    min_rounds: int = 6
    max_rounds: int = 40
    ci_target: float = 0.02
    cap_s: float = 15.0
    drift_tolerance: float = 0.10
    energy_window_s: float = 2.0
    timeout_s: float = 180.0
    group: int = 4
    bootstrap: int = 1000
    seed: int = 0
    sentinel_every_s: float = 600.0  # a campaign's sentinel passes: start, this often, end (0: start, end)

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise MeasureError(f"protocol {item.name}={value!r} must be a finite non-negative number")
        for name in ("round_s", "ci_target", "timeout_s", "cap_s"):
            if getattr(self, name) <= 0:
                raise MeasureError(f"protocol {name}={getattr(self, name)!r} must be positive")
        if 0 < self.sentinel_every_s < 1:
            # a pass due before the next config could start would be taken again and again
            raise MeasureError(
                f"protocol sentinel_every_s={self.sentinel_every_s!r}: 0 (passes at the start and the "
                "end only) or at least 1 second"
            )
        if self.group < 1 or self.min_rounds < 2 or self.max_rounds < self.min_rounds:
            raise MeasureError(
                f"protocol needs group >= 1 and 2 <= min_rounds <= max_rounds, got group={self.group}, "
                f"min_rounds={self.min_rounds}, max_rounds={self.max_rounds}"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def bootstrap_median_ci(
    rounds: list[list[float]], resamples: int, rng: np.random.Generator
) -> tuple[float, float]:
    """95 % CI of the pooled median, resampling rounds with replacement.

    A resample is a count of draws per round, so its pooled median is found without building it:
    the k-th smallest pooled sample is the smallest sample with more than k of the resample's
    samples at or below it, found by a binary search over all samples sorted once, run for every
    resample at once (each step counts, per round, its samples at or below by ``searchsorted``;
    memory stays that of the samples). Concatenating each resample and taking its median gives the
    same numbers but stalls the engine between two rounds of a fast model
    (``benchmarks/bootstrap_ci.py``)."""
    arrays = [np.sort(np.asarray(r, dtype=np.float64)) for r in rounds]
    picks = rng.integers(0, len(arrays), size=(resamples, len(arrays)))
    drawn = np.zeros((resamples, len(arrays)), dtype=np.int64)
    np.add.at(drawn, (np.arange(resamples)[:, None], picks), 1)
    pooled = drawn @ np.array([a.size for a in arrays])
    everything = np.sort(np.concatenate(arrays))
    middle = (
        _kth_pooled(everything, arrays, drawn, (pooled - 1) // 2)
        + _kth_pooled(everything, arrays, drawn, pooled // 2)
    ) / 2  # np.median's mean of the two middle samples (one, twice, for an odd count)
    low, high = np.percentile(middle, [2.5, 97.5])
    return float(low), float(high)


def _kth_pooled(
    everything: np.ndarray, rounds: list[np.ndarray], drawn: np.ndarray, k: np.ndarray
) -> np.ndarray:
    """Per resample (a row of ``drawn``: draws per round), its k-th smallest pooled sample
    (0-based), from ``everything`` (all samples, sorted) and ``rounds`` (each round sorted)."""
    low = np.zeros(len(drawn), dtype=np.int64)
    high = np.full(len(drawn), everything.size - 1, dtype=np.int64)
    while (low < high).any():
        mid = (low + high) // 2
        value = everything[mid]
        at_or_below = sum(
            drawn[:, i] * np.searchsorted(samples, value, side="right") for i, samples in enumerate(rounds)
        )
        beyond = at_or_below > k
        high = np.where(beyond, mid, high)
        low = np.where(beyond, low, mid + 1)
    return everything[low]


def ci_half_width(rounds: list[list[float]], protocol: Protocol, rng: np.random.Generator) -> float:
    low, high = bootstrap_median_ci(rounds, min(protocol.bootstrap, 300), rng)
    median = float(np.median(np.concatenate(rounds)))
    return (high - low) / 2 / median if median > 0 else math.inf


def summarize(
    rounds: list[list[float]], drifted: int, steal: float | None, protocol: Protocol, cap_hit: bool
) -> dict[str, Any]:
    """The statistics stored with a measurement (keys of ``store.Measurement``)."""
    samples = np.concatenate([np.asarray(r) for r in rounds])
    rng = np.random.default_rng(protocol.seed)
    ci_low, ci_high = bootstrap_median_ci(rounds, protocol.bootstrap, rng)
    mean = float(samples.mean())
    drift_share = drifted / len(rounds)
    return {
        "n": int(samples.size),
        "median_ms": float(np.median(samples)),
        "mean_ms": mean,
        "low_ms": float(min(np.median(r) for r in rounds)),
        "p10_ms": float(np.percentile(samples, 10)),
        "p90_ms": float(np.percentile(samples, 90)),
        "p99_ms": float(np.percentile(samples, 99)),
        "ci_low_ms": ci_low,
        "ci_high_ms": ci_high,
        "cv": float(samples.std() / mean) if mean > 0 else 0.0,
        "cap_hit": cap_hit,
        "contention": max(drift_share, steal or 0.0),
        "samples": [round(float(s), 6) for s in samples],
    }


def cpu_times() -> tuple[int, int] | None:
    """(steal, total) jiffies of the whole host from /proc/stat, or None where unavailable."""
    try:
        fields_ = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    values = [int(v) for v in fields_]
    steal = values[7] if len(values) > 7 else 0
    return steal, sum(values[:8])


def steal_share(start: tuple[int, int] | None, end: tuple[int, int] | None) -> float | None:
    if start is None or end is None or end[1] <= start[1]:
        return None
    return (end[0] - start[0]) / (end[1] - start[1])
