"""Sentinel passes: the drift of a host measured, not assumed.

A campaign re-measures its backend's fixed sentinel models (``Backend.sentinels``: small, medium,
large) at its start, every ``Protocol.sentinel_every_s`` seconds and at its end, in the same
worker processes as its configs, with its protocol in shorter rounds (``sentinel_protocol``) and
timed only (no energy window, no per-op rows). Each
round of readings is a *pass*, stored in the store's ``sentinels`` table; ``store.drift`` turns
the passes of every campaign on a platform into its between-session spread and flags the
measurements taken while the host read slow.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

from infercast.measurement.backends.base import Backend
from infercast.measurement.engine import Engine, Item
from infercast.measurement.protocol import Protocol
from infercast.store import Measurement, Platform, Store

SENTINEL_PREFIX = "sentinel:"


def sentinel_protocol(protocol: Protocol) -> Protocol:
    """The campaign's protocol with rounds of 0.1 s at most and 2 s of timing per sentinel at
    most, so a pass costs seconds (in the campaign's own rounds two passes took longer than the
    measurement they framed), while a 2–9 ms sentinel still gets 60 or more timed runs in six
    rounds."""
    return replace(protocol, round_s=min(protocol.round_s, 0.1), cap_s=min(protocol.cap_s, 2.0))


class Sentinels:
    """The sentinel passes of one campaign run; ``take()`` measures and stores one pass."""

    def __init__(
        self, store: Store, platform: Platform, campaign: str, backend: Backend, every_s: float
    ) -> None:
        self.store, self.platform, self.campaign = store, platform, campaign
        self.models = dict(backend.sentinels)
        self.every_s = every_s
        self.pass_index = store.next_sentinel_pass(platform.id, campaign)
        self.taken = 0
        self.failures: list[str] = []
        self.last_effect: float | None = None
        self._last_at = time.monotonic()

    def due_at(self) -> float | None:
        """When (``time.monotonic()``) the next pass is due; None when passes are only taken at the
        start and the end (``every_s`` 0)."""
        return self._last_at + self.every_s if self.every_s > 0 else None

    def take(self, engine: Engine) -> dict[str, Any]:
        """Measure every sentinel once, interleaved as configs are, and store the readings."""
        items = [Item(SENTINEL_PREFIX + name, model) for name, model in self.models.items()]
        stored = 0

        def keep(item: Item, m: Measurement) -> None:
            nonlocal stored
            name = item.key[len(SENTINEL_PREFIX) :]
            self.store.add_sentinel(self.platform.id, self.campaign, self.pass_index, name, item.model, m)
            stored += 1

        def fail(item: Item, kind: str, reason: str) -> None:
            self.failures.append(f"{item.key} ({kind}): {reason}")

        engine.run(
            items, keep, fail, timed_only=True, keep_workers=True, protocol=sentinel_protocol(engine.protocol)
        )
        self._last_at = time.monotonic()
        if stored:
            effects = self.store.drift(self.platform.id).effects
            mine = effects[
                (effects["campaign"] == self.campaign) & (effects["pass_index"] == self.pass_index)
            ]
            self.last_effect = float(mine["effect"].iloc[0]) if len(mine) else None
            self.taken += 1
        self.pass_index += 1
        return self.summary()

    def summary(self) -> dict[str, Any]:
        slower = None if self.last_effect is None else math.expm1(self.last_effect)
        return {"passes": self.taken, "last_vs_usual": slower, "failures": list(self.failures)}
