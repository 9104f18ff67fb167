"""Campaigns: the bookkeeping, once for every runner (the local engine, a Ray cluster) — which
configs a campaign still has to measure on a platform, and each result or failure kept as it
arrives — and ``run_campaign``, which measures config rows into a store with the local engine,
taking sentinel passes between them.

The store is the campaign's memory: a config measured or failed in a campaign on a platform is
done, so rerunning the same campaign resumes where the last run stopped, and a second row for a
config is refused (counted in ``already_stored``) when two runners raced to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from infercast.measurement.backends.base import Backend
from infercast.measurement.engine import Engine, Item
from infercast.measurement.platform import fingerprint
from infercast.measurement.protocol import Protocol
from infercast.measurement.sensors import NoSensor, detect
from infercast.measurement.sentinels import Sentinels
from infercast.paths import check_store_file
from infercast.store import Measurement, Platform, Store

Progress = Callable[[str, dict[str, Any]], None]


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


def platform_of(backend: Backend) -> Platform:
    return Platform(
        backend.name, backend.settings, {**fingerprint(backend.device), **backend.machine_facts()}
    )


def energy_sensor(backend: Backend, energy: bool) -> Any:
    """The backend's energy sensor, or a ``NoSensor`` saying why none is read."""
    return detect(backend.device) if energy else NoSensor("energy measurement was turned off")


def run_campaign(
    rows: list[dict[str, Any]],
    db: str | Path,
    backend: Backend,
    campaign: str,
    protocol: Protocol | None = None,
    energy: bool = True,
    op_runs: int = 0,
    progress: Progress | None = None,
    on_result: Callable[[Item, Measurement], None] | None = None,
    on_failure: Callable[[Item, str, str], None] | None = None,
    deadline: float | None = None,
    sentinels: bool = True,
    at_least: int = 0,
) -> dict[str, Any]:
    """Measure config rows (``id``, ``model``, ``space``, ``params``, ``features``) into a store
    campaign, skipping those it already holds; the engine behind ``profile`` and ``measure``.
    After ``deadline`` (``time.monotonic()``) no new config starts — unless fewer than
    ``at_least`` of the campaign's configs are in the store (a slow host then runs past it, in the
    same workers, rather than leave a campaign too small to train on); ``summary["left"]`` counts
    the configs not started.
    With ``sentinels`` the campaign takes sentinel passes (``measurement.sentinels``): the summary then
    has ``sentinels`` (passes, the last pass against the platform's usual), ``drift`` and
    ``contended`` (the campaign's measurements taken while the host read slow)."""
    check_store_file(db)
    widths: list[float] = []
    tell = progress or (lambda event, state: None)
    with Store(db) as store:
        book = Campaign.open(store, platform_of(backend), campaign, rows)
        summary: dict[str, Any] = {
            "campaign": campaign,
            "platform_id": book.platform.id,
            "done": 0,
            "failed": 0,
            "skipped": book.skipped,
            "todo": len(book.todo),
        }
        tell("start", summary)

        def keep(item: Item, m: Measurement) -> None:
            if book.keep(m):
                widths.append((m.ci_high_ms - m.ci_low_ms) / 2 / m.median_ms)
            summary["done"] = book.done
            if on_result is not None:
                on_result(item, m)
            tell("done", summary)

        def fail(item: Item, kind: str, reason: str) -> None:
            book.fail(item.key, kind, reason)
            summary["failed"] = book.failed
            if on_failure is not None:
                on_failure(item, kind, reason)
            tell("failed", summary)

        engine = Engine(backend, protocol, energy_sensor(backend, energy), op_runs=op_runs)
        watch = Sentinels(store, book.platform, campaign, backend, engine.protocol.sentinel_every_s)
        try:
            _measure_between_passes(
                engine, book, watch if sentinels else None, keep, fail, tell, summary, deadline, at_least
            )
        finally:
            engine.close()
        if sentinels and book.todo:
            summary["drift"] = store.drift(book.platform.id).to_dict()
            stored = store.measurements(book.platform.id)
            summary["contended"] = int(stored.loc[stored["campaign"] == campaign, "contended"].sum())
    summary["left"] = book.left
    summary["median_ci_half_width"] = float(np.median(widths)) if widths else None
    return summary


def _measure_between_passes(
    engine: Engine,
    book: Campaign,
    watch: Sentinels | None,
    keep: Callable[[Item, Measurement], None],
    fail: Callable[[Item, str, str], None],
    tell: Callable[[str, dict[str, Any]], None],
    summary: dict[str, Any],
    deadline: float | None,
    at_least: int,
) -> None:
    """The campaign's configs, with a sentinel pass at the start, whenever one is due, and at the
    end; a campaign with nothing left to measure takes none. Until ``at_least`` configs of the
    campaign are stored the deadline is not in force (for as many of them as are missing)."""
    finished: set[str] = set()

    def kept(item: Item, m: Measurement) -> None:
        finished.add(item.key)
        keep(item, m)

    def failed(item: Item, kind: str, reason: str) -> None:
        finished.add(item.key)
        fail(item, kind, reason)

    def sentinel_pass() -> None:
        if watch is not None:
            summary["sentinels"] = watch.take(engine)
            tell("sentinels", summary)

    remaining = list(book.todo)
    if not remaining:
        return

    def missing() -> int:
        return max(0, at_least - book.skipped - book.done)

    def open_() -> bool:
        return bool(remaining) and (missing() > 0 or deadline is None or time.monotonic() < deadline)

    sentinel_pass()
    while open_():
        due = watch.due_at() if watch is not None else None
        short = missing()
        # the configs still missing first, whatever the deadline; then the rest until it
        items = remaining[:short] if short else remaining
        until = min((d for d in (None if short else deadline, due) if d is not None), default=None)
        engine.run(items, kept, failed, lambda: tell("round", summary), deadline=until, keep_workers=True)
        remaining = [item for item in remaining if item.key not in finished]
        if remaining and due is not None and time.monotonic() >= due:
            sentinel_pass()
    sentinel_pass()
