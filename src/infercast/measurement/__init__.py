"""Measurement: backends × sensors × protocol, run in isolated worker processes.

- ``measure_model_strings(models, backend)``: measure a few model strings now, return their statistics.
- ``profile(space, n, seed, backend, db)``: a resumable campaign over a design space into a store;
  ``measure_model_strings(models, db=...)`` the same for a list of model strings.

Backends live in ``measure.backends`` (one file each), energy sensors in ``measure.sensors``, the
latency protocol in ``measure.protocol``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from infercast.errors import InfercastError
from infercast.measurement import backends
from infercast.measurement.backends.base import Backend, MeasureError
from infercast.measurement.campaign import Campaign
from infercast.measurement.engine import Engine, Item
from infercast.measurement.platform import fingerprint
from infercast.measurement.protocol import Protocol
from infercast.measurement.sensors import NoSensor, detect
from infercast.measurement.sentinels import Sentinels
from infercast.paths import check_store_file
from infercast.resources import check_fits
from infercast.store import Measurement, Platform, Store
from infercast.tables import to_python

__all__ = [
    "Campaign",
    "Engine",
    "Item",
    "MeasureError",
    "Protocol",
    "campaign_rows",
    "energy_sensor",
    "measure_model_strings",
    "model_configs",
    "platform_of",
    "profile",
    "run_campaign",
]


def platform_of(backend: Backend) -> Platform:
    return Platform(
        backend.name, backend.settings, {**fingerprint(backend.device), **backend.machine_facts()}
    )


def energy_sensor(backend: Backend, energy: bool) -> Any:
    """The backend's energy sensor, or a ``NoSensor`` saying why none is read."""
    return detect(backend.device) if energy else NoSensor("energy measurement was turned off")


def measure_model_strings(
    models: list[str],
    backend: str | Backend = "ort-cpu",
    protocol: Protocol | None = None,
    energy: bool = True,
    db: str | Path | None = None,
    campaign: str = "models",
    op_runs: int = 0,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
    input_shape: tuple[int, ...] | None = None,
    sentinels: bool = True,
    **settings: Any,
) -> list[dict[str, Any]]:
    """Measure model strings; one dict per model: the statistics, or ``failure`` with its reason.

    With ``db`` the models (with their analytic features) and results also go into that store
    under ``campaign``; models the campaign already holds are not measured again (their stored
    figures are returned, with ``"stored": True``), and the campaign takes sentinel passes unless
    ``sentinels`` is False.
    """
    chosen = backend if isinstance(backend, Backend) else backends.get(backend, **settings)
    results: dict[str, dict[str, Any]] = {}

    def keep(item: Item, m: Measurement) -> None:
        results[item.key] = {"model": item.model, **{k: v for k, v in asdict(m).items() if k not in ("ops",)}}

    def fail(item: Item, kind: str, reason: str) -> None:
        results[item.key] = {"model": item.model, "failure": kind, "reason": reason}

    if db is None:
        items = [Item(str(i), model, input_shape) for i, model in enumerate(models)]
        Engine(chosen, protocol, energy_sensor(chosen, energy), op_runs=op_runs).run(items, keep, fail)
        return [results[item.key] for item in items]
    check_store_file(db)
    rows, unusable = model_configs(models, input_shape, (protocol or Protocol()).timeout_s)
    run_campaign(
        rows, db, chosen, campaign, protocol, energy, op_runs, progress, keep, fail, sentinels=sentinels
    )
    with Store(db) as store:
        stored = store.measurements(platform_of(chosen).id)
    stored = stored[stored["campaign"] == campaign].drop_duplicates("config_id").set_index("config_id")
    out = []
    described = iter(rows)
    for model in models:
        if model in unusable:
            out.append({"model": model, **unusable[model]})
            continue
        row = next(described)
        if row["id"] in results and row["id"] in stored.index:
            session = _session_figures(stored.loc[row["id"]])
            out.append({**results[row["id"]], **session})
        elif row["id"] in results:
            out.append(results[row["id"]])
        elif row["id"] in stored.index:
            record = stored.loc[row["id"]]
            out.append({"model": row["model"], "stored": True, **_stored_figures(record)})
        else:
            out.append({"model": row["model"], "failure": "stored", "reason": "failed in an earlier run"})
    return out


def model_configs(
    models: list[str], input_shape: tuple[int, ...] | None = None, timeout_s: float | None = None
) -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    """Store rows for model strings: a stable id from the string and input shape, the analytic
    features, and the input shape the worker must build the model at; and, for each model that
    could not be loaded and captured (a model running user code gets ``timeout_s``), its failure
    (``failure`` kind and ``reason``), as a measurement failure would be reported."""
    from infercast.features import featurize
    from infercast.models.guarded import LoadTimeout, capture_model

    rows, unusable = [], {}
    for model in models:
        try:
            graph, _ = capture_model(model, input_shape, timeout_s=timeout_s)
        except LoadTimeout as error:
            unusable[model] = {"failure": "timeout", "reason": str(error)}
            continue
        except InfercastError as error:
            unusable[model] = {"failure": "error", "reason": str(error)}
            continue
        shape = list(graph.input_shape)
        rows.append(
            {
                "id": hashlib.sha1(f"{model}|{shape}".encode()).hexdigest()[:16],
                "model": model,
                "space": None,
                "params": {"input_shape": shape},
                "features": featurize(graph),
                "input_shape": tuple(shape),
            }
        )
    return rows, unusable


_SESSION_FIGURES = (
    "ci_low_ms",
    "ci_high_ms",
    "within_ci_low_ms",
    "within_ci_high_ms",
    "session_spread",
    "contended",
    "contended_reason",
    "host_effect",
    "steady_ms",
)


def _session_figures(record: Any) -> dict[str, Any]:
    """A stored measurement's session CI (``store.drift``), contention flag and steady latency."""
    return {name: to_python(record[name]) for name in _SESSION_FIGURES}


def _stored_figures(record: Any) -> dict[str, Any]:
    names = ("n", "median_ms", "mean_ms", "low_ms", "cv", "cap_hit", "contention")
    extra = ("peak_memory_bytes", "peak_memory_definition", "energy_j", "energy_reason", "energy_sensor")
    return {**{name: to_python(record[name]) for name in (*names, *extra)}, **_session_figures(record)}


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
    limit: int | None = None,
    sentinels: bool = True,
    **settings: Any,
) -> dict[str, Any]:
    """Measure ``n`` sampled configs of ``space`` into the store ``db``; rerunning resumes.

    ``limit`` measures only the first ``limit`` configs of the sample in this run (the campaign
    keeps its name, so a later run without it completes the same sample; another platform
    profiled with the same ``n``, ``seed`` and ``limit`` measures the same configs).

    ``op_runs`` > 0 also profiles every executed kernel (ONNX Runtime) over that many runs.
    ``progress(event, summary)`` is called with ``"start"`` (after planning: ``summary["todo"]``
    is known), ``"done"``, ``"failed"`` and ``"round"``. Returns the summary: done, failed, skipped,
    median CI half-width, and (``sentinels``, the default) the sentinel passes and the platform's
    drift (``run_campaign``).
    """
    chosen = backend if isinstance(backend, Backend) else backends.get(backend, **settings)
    rows, name = campaign_rows(space, n, seed, stratified, limit, chosen.precisions)
    summary = run_campaign(
        rows, db, chosen, campaign or name, protocol, energy, op_runs, progress, sentinels=sentinels
    )
    restricted = restriction_note(space, chosen)
    return {**summary, "restricted": restricted} if restricted else summary


def restriction_note(space: str, backend: Backend) -> str | None:
    """What a campaign of ``space`` on ``backend`` leaves out: the precisions it cannot run."""
    from infercast.space import get

    param = next((p for p in get(space).params if p.name == "precision"), None)
    if param is None or backend.precisions is None:
        return None
    left_out = [v for v in param.choices if v not in backend.precisions]
    if not left_out:
        return None
    return (
        f"sampled precision {', '.join(backend.precisions)} only: {backend.name} cannot run "
        f"{', '.join(left_out)}"
    )


def campaign_rows(
    space: str,
    n: int,
    seed: int = 0,
    stratified: bool = True,
    limit: int | None = None,
    precisions: tuple[str, ...] | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """The config rows a ``profile`` campaign measures (see ``profile`` for ``limit``) and the
    campaign's default name; the local engine and a Ray cluster measure the same rows. With
    ``precisions`` the sample is drawn from the configs of those precisions only."""
    from infercast.space import get, restrict

    if limit is not None and limit < 1:
        raise MeasureError(f"limit={limit!r}: measure at least one config (or leave it out)")
    chosen = get(space)
    if precisions is not None and any(p.name == "precision" for p in chosen.params):
        chosen = restrict(chosen, "precision", precisions)
    # a campaign holds each config's row (parameters and 42 features) until it is stored: 3.5 KB
    # per row at peak, measured with tracemalloc on 5,000 carb-resnet rows
    check_fits(f"profiling {chosen.name}", n if limit is None else min(n, limit), 3_500, " configs")
    # a small space sampled with replacement repeats configs: each is measured once
    configs = chosen.sample(n, seed=seed, stratified=stratified).drop_duplicates("id", ignore_index=True)
    name = f"{chosen.name}:n={n}:seed={seed}:{'stratified' if stratified else 'uniform'}"
    return chosen.config_rows(configs.head(limit)), name


def run_campaign(
    rows: list[dict[str, Any]],
    db: str | Path,
    backend: Backend,
    campaign: str,
    protocol: Protocol | None = None,
    energy: bool = True,
    op_runs: int = 0,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
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
    With ``sentinels`` the campaign takes sentinel passes (``measure.sentinels``): the summary then
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
