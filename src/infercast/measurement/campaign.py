"""Campaign bookkeeping, once for every runner (the local engine, a Ray cluster): which configs a
campaign still has to measure on a platform, and each result or failure kept as it arrives.

The store is the campaign's memory: a config measured or failed in a campaign on a platform is
done, so rerunning the same campaign resumes where the last run stopped, and a second row for a
config is refused (counted in ``already_stored``) when two runners raced to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infercast.measurement.engine import Item
from infercast.store import Measurement, Platform, Store


@dataclass
class Campaign:
    """One campaign on one platform of a store: what is left to do, and the running counts."""

    store: Store
    platform: Platform
    name: str
    todo: list[Item] = field(default_factory=list)
    skipped: int = 0
    done: int = 0
    failed: int = 0
    already_stored: int = 0

    @classmethod
    def open(cls, store: Store, platform: Platform, name: str, rows: list[dict[str, Any]]) -> Campaign:
        """Register the platform and the config rows; what the store already holds is skipped."""
        store.add_platform(platform)
        store.add_configs(rows)
        finished = store.done(platform.id, name)
        todo = [Item(r["id"], r["model"], r.get("input_shape")) for r in rows if r["id"] not in finished]
        return cls(store, platform, name, todo, skipped=len(rows) - len(todo))

    def keep(self, measurement: Measurement) -> bool:
        """Store one result; False when the campaign already held that config (kept once)."""
        if self.store.add_measurement(self.platform.id, self.name, measurement) is None:
            self.already_stored += 1
            return False
        self.done += 1
        return True

    def fail(self, key: str, kind: str, reason: str) -> None:
        self.store.add_failure(key, self.platform.id, self.name, kind, reason)
        self.failed += 1

    @property
    def left(self) -> int:
        """Configs of this run's to-do list that neither a result nor a failure answered."""
        return len(self.todo) - self.done - self.failed - self.already_stored
