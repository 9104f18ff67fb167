"""Measurement: backends × sensors × protocol, run in isolated worker processes.

- ``measure(models, backend)``: measure a few model strings now, return their statistics.
- ``profile(space, n, seed, backend, db)``: a resumable campaign over a design space into a store.

Backends live in ``measure.backends`` (one file each), energy sensors in ``measure.sensors``, the
latency protocol in ``measure.protocol``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from infercast.measure import backends
from infercast.measure.backends.base import Backend, MeasureError
from infercast.measure.engine import Engine, Item
from infercast.measure.platform import fingerprint
from infercast.measure.protocol import Protocol
from infercast.measure.sensors import NoSensor, detect
from infercast.store import Measurement, Platform, Store

__all__ = ["Engine", "Item", "MeasureError", "Protocol", "measure", "platform_of", "profile"]


def platform_of(backend: Backend) -> Platform:
    return Platform(backend.name, backend.settings, fingerprint(backend.device))


def _sensor(backend: Backend, energy: bool) -> Any:
    return detect(backend.device) if energy else NoSensor("energy measurement was turned off")


def measure(
    models: list[str],
    backend: str | Backend = "ort-cpu",
    protocol: Protocol | None = None,
    energy: bool = True,
    **settings: Any,
) -> list[dict[str, Any]]:
    """Measure model strings; one dict per model: the statistics, or ``failure`` with its reason."""
    chosen = backend if isinstance(backend, Backend) else backends.get(backend, **settings)
    engine = Engine(chosen, protocol, _sensor(chosen, energy))
    results: dict[str, dict[str, Any]] = {}

    def keep(item: Item, m: Measurement) -> None:
        results[item.key] = {"model": item.model, **{k: v for k, v in asdict(m).items() if k not in ("ops",)}}

    def fail(item: Item, kind: str, reason: str) -> None:
        results[item.key] = {"model": item.model, "failure": kind, "reason": reason}

    items = [Item(str(i), model) for i, model in enumerate(models)]
    engine.run(items, keep, fail)
    return [results[item.key] for item in items]


def profile(
    space: str,
    n: int,
    db: str | Path,
    backend: str | Backend = "ort-cpu",
    seed: int = 0,
    stratified: bool = True,
    campaign: str | None = None,
    protocol: Protocol | None = None,
    energy: bool = True,
    op_runs: int = 0,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Measure ``n`` sampled configs of ``space`` into the store ``db``; rerunning resumes.

    ``op_runs`` > 0 also profiles every executed kernel (ONNX Runtime) over that many runs.
    ``progress(event, summary)`` is called with ``"start"`` (after planning: ``summary["todo"]``
    is known), ``"done"``, ``"failed"`` and ``"round"``. Returns the summary: done, failed, skipped,
    median CI half-width.
    """
    from infercast import space as spaces

    chosen = backend if isinstance(backend, Backend) else backends.get(backend, **settings)
    family = spaces.get(space)
    # a small space sampled with replacement repeats configs: each is measured once
    configs = family.sample(n, seed=seed, stratified=stratified).drop_duplicates("id", ignore_index=True)
    features = family.features(configs)
    campaign = campaign or f"{family.name}:n={n}:seed={seed}:{'stratified' if stratified else 'uniform'}"
    platform = platform_of(chosen)
    names = [p.name for p in family.params]
    summary: dict[str, Any] = {"campaign": campaign, "platform_id": platform.id, "done": 0, "failed": 0}
    widths: list[float] = []
    with Store(db) as store:
        store.add_platform(platform)
        store.add_configs(
            {
                "id": row["id"],
                "model": row["model"],
                "space": family.string_name,
                "params": {k: _plain(row[k]) for k in names},
                "features": {k: float(v) for k, v in features.loc[index].items()},
            }
            for index, row in configs.iterrows()
        )
        finished = store.done(platform.id, campaign)
        todo = [Item(row["id"], row["model"]) for _, row in configs.iterrows() if row["id"] not in finished]
        summary["skipped"] = len(configs) - len(todo)
        summary["todo"] = len(todo)
        report = progress or (lambda event, state: None)
        report("start", summary)

        def keep(item: Item, m: Measurement) -> None:
            store.add_measurement(platform.id, campaign, m)
            summary["done"] += 1
            widths.append((m.ci_high_ms - m.ci_low_ms) / 2 / m.median_ms)
            report("done", summary)

        def fail(item: Item, kind: str, reason: str) -> None:
            store.add_failure(item.key, platform.id, campaign, kind, reason)
            summary["failed"] += 1
            report("failed", summary)

        engine = Engine(chosen, protocol, _sensor(chosen, energy), op_runs=op_runs)
        engine.run(todo, keep, fail, on_round=lambda: report("round", summary))
    summary["median_ci_half_width"] = float(np.median(widths)) if widths else None
    return summary


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
