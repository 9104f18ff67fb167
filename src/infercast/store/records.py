"""What a store holds, as Python objects: a platform (a backend with the settings that change its
kernels, on a fingerprinted machine) and one measurement of a config on it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Platform:
    """A backend with the settings that change its kernels, on a fingerprinted machine."""

    backend: str
    settings: dict[str, Any]
    fingerprint: dict[str, Any]

    @property
    def id(self) -> str:
        text = json.dumps([self.backend, self.settings, self.fingerprint], sort_keys=True)
        return hashlib.sha1(text.encode()).hexdigest()[:16]


@dataclass
class Measurement:
    """One config on one platform: latency statistics, peak memory, energy (or why not)."""

    config_id: str
    n: int
    median_ms: float
    mean_ms: float
    low_ms: float
    p10_ms: float
    p90_ms: float
    p99_ms: float
    ci_low_ms: float
    ci_high_ms: float
    cv: float
    cap_hit: bool
    samples: list[float]
    contention: float | None = None
    peak_memory_bytes: int | None = None
    peak_memory_definition: str | None = None
    energy_j: float | None = None
    energy_reason: str | None = None
    energy_sensor: str | None = None
    ops: list[dict[str, Any]] = field(default_factory=list)
