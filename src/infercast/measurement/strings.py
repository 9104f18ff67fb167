"""Measuring model strings (zoo names, ONNX paths, ``file.py:factory``) rather than a design
space's sample: now, or as a campaign of a store that keeps what it measured."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from infercast.errors import InfercastError
from infercast.measurement import backends
from infercast.measurement.backends.base import Backend, tflite_refused
from infercast.measurement.campaign import Progress, energy_sensor, platform_of, run_campaign
from infercast.measurement.engine import Engine, Item
from infercast.measurement.protocol import Protocol
from infercast.measurement.worker import failure_kind
from infercast.paths import check_store_file
from infercast.store import Measurement, Store
from infercast.tables import to_python


def measure_model_strings(
    models: list[str],
    backend: str | Backend = "ort-cpu",
    protocol: Protocol | None = None,
    energy: bool = True,
    db: str | Path | None = None,
    campaign: str = "models",
    op_runs: int = 0,
    progress: Progress | None = None,
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
    from infercast.models import check_model_string

    for model in models:  # a model string that cannot load is the request's error, not a failure
        check_model_string(model)
        if model.strip().lower().endswith(".tflite"):
            raise tflite_refused(Path(model.strip()).name)
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


def _space_of(model: str) -> tuple[str | None, dict[str, Any]]:
    """A design-space config string's space and parameters, as ``profile`` stores them (a kernel
    campaign's networks are told apart from networks to train on by their space); none for any
    other model."""
    if not model.startswith("space:"):
        return None, {}
    from infercast.space import parse_model_string

    space, config = parse_model_string(model)  # it was captured, so it parses
    return space.name, config


def model_configs(
    models: list[str],
    input_shape: tuple[int, ...] | None = None,
    timeout_s: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    """Store rows for model strings: a stable id from the string and input shape, the analytic
    features, and the input shape the worker must build the model at; and, for each model that
    could not be loaded and captured (a model running user code gets ``timeout_s``), its failure
    (``failure`` kind and ``reason``), as a measurement failure would be reported.
    ``progress(done, total)`` follows the captures."""
    from infercast.features import featurize
    from infercast.models.capturing import capture_model
    from infercast.models.guarded import LoadTimeout

    rows, unusable = [], {}
    for done, model in enumerate(models):
        if progress is not None:
            progress(done, len(models))
        try:
            graph, _ = capture_model(model, input_shape, timeout_s=timeout_s)
        except LoadTimeout as error:
            unusable[model] = {"failure": "timeout", "reason": str(error)}
            continue
        except InfercastError as error:
            unusable[model] = {"failure": failure_kind(error), "reason": str(error)}
            continue
        shape = list(graph.input_shape)
        space, params = _space_of(model)
        rows.append(
            {
                "id": hashlib.sha1(f"{model}|{shape}".encode()).hexdigest()[:16],
                "model": model,
                "space": space,
                "params": {**params, "input_shape": shape},
                "features": featurize(graph),
                "input_shape": tuple(shape),
            }
        )
    if progress is not None:
        progress(len(models), len(models))
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
