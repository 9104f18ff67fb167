"""Profiling campaigns on a Ray cluster: each device kind a custom resource, the driver the only
writer of the store.

A node offers its device by joining with ``ray start … --resources '{"device:KIND": 1}'``. A
measurement task asks for one unit of ``device:KIND``, so it holds that device alone while it runs;
it measures a chunk of configs (interleaved in groups, as the local engine does) in worker
processes on that node and returns the measurements. The driver waits on the tasks,
writes each result as it arrives, and never hands a config to two tasks. A task whose worker or
node dies is retried by Ray (``max_retries``) on any node offering the kind — another one now, or
the same kind when a node offering it joins again; a result lost for good leaves its configs
unmeasured, and rerunning the campaign measures exactly those (the store says what is done, and
refuses a second row for a config anyway).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from infercast.distributed.cluster import connected
from infercast.measurement import Campaign, CampaignSpec, MeasureError, Protocol
from infercast.measurement.engine import Item
from infercast.store import Measurement, Platform, Store

DEVICE_PREFIX = "device:"


def device_resource(kind: str) -> str:
    """The Ray custom resource naming a device kind."""
    if not kind or any(c.isspace() for c in kind) or kind.startswith(DEVICE_PREFIX):
        raise MeasureError(f"device kind {kind!r}: a name without spaces, e.g. rtx3080 (not device:rtx3080)")
    return DEVICE_PREFIX + kind


def device_kinds(resources: dict[str, float]) -> list[str]:
    return sorted(k[len(DEVICE_PREFIX) :] for k in resources if k.startswith(DEVICE_PREFIX))


def _probe(backend_name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """On a node offering the device: the fingerprint its measurements will be stored under."""
    from infercast.measurement import backends
    from infercast.measurement.platform import fingerprint

    return fingerprint(backends.get(backend_name, **settings).device)


def _measure_chunk(
    items: list[dict[str, Any]],
    backend_name: str,
    settings: dict[str, Any],
    protocol: dict[str, Any],
    energy: bool,
    op_runs: int,
) -> dict[str, Any]:
    """On the node that owns the device: measure ``items`` with the local engine."""
    import ray

    from infercast.measurement import Engine, backends, energy_sensor
    from infercast.measurement.platform import fingerprint

    backend = backends.get(backend_name, **settings)
    results: list[dict[str, Any]] = []
    failures: list[tuple[str, str, str]] = []
    engine = Engine(backend, Protocol(**protocol), energy_sensor(backend, energy), op_runs=op_runs)
    engine.run(
        [Item(i["key"], i["model"], i.get("input_shape")) for i in items],
        lambda item, m: results.append(asdict(m)),
        lambda item, kind, reason: failures.append((item.key, kind, reason)),
    )
    return {
        "node": ray.get_runtime_context().get_node_id(),
        "fingerprint": fingerprint(backend.device),
        "results": results,
        "failures": failures,
    }


def profile_on_ray(
    spec: CampaignSpec,
    db: str | Path,
    backend: str = "ort-cpu",
    progress: Callable[[str, dict[str, Any]], None] | None = None,
    kinds: list[str] | None = None,
    address: str = "auto",
    chunk: int = 16,
    max_retries: int = 3,
    idle_timeout_s: float = 600.0,
    **settings: Any,
) -> dict[str, Any]:
    """Measure ``spec``'s campaign (the configs and name any executor measures) on every device
    kind in ``kinds``, on the Ray cluster at ``address``; one platform per kind (its settings name the
    kind). Stops waiting after ``idle_timeout_s`` without a result (e.g. no node offers a kind
    any more): what is left is counted in ``summary["left"]`` and a rerun measures it.

    ``chunk``: configs per task. A task starts its own measurement worker processes (seconds of
    imports), so small chunks cost start-up time; large ones lose more work to a dead node."""
    import ray

    from infercast.measurement import backends

    if not kinds:
        raise MeasureError("name at least one device kind to profile on (--device KIND)")
    if chunk < 1 or max_retries < 0:
        raise MeasureError(f"chunk={chunk!r} must be ≥ 1 and max_retries={max_retries!r} ≥ 0")
    resources = {kind: device_resource(kind) for kind in kinds}
    chosen = backends.get(backend, **settings)  # validates the backend and its settings here
    rows, name = spec.rows(chosen.precisions)
    job = _Job(chosen.name, settings, asdict(spec.protocol), spec.energy, spec.op_runs, chunk, max_retries)
    tell = progress or (lambda event, state: None)
    with connected(address):
        _check_offered(address, resources)
        with Store(db) as store:
            books = _register(store, rows, name, chosen, resources, settings, idle_timeout_s)
            tasks = _submit(books, resources, job)
            summary = _summary(name, books, tasks)
            tell("start", summary)
            pending = _collect(tasks, books, summary, idle_timeout_s, tell)
            for ref in pending:
                ray.cancel(ref, force=True)
    summary["left"] = summary["todo"] - summary["done"] - summary["failed"] - summary["already_stored"]
    return summary


@dataclass(frozen=True)
class _Job:
    """What every measurement task of a campaign is given, besides its configs."""

    backend: str
    settings: dict[str, Any]
    protocol: dict[str, Any]
    energy: bool
    op_runs: int
    chunk: int
    max_retries: int


def _check_offered(address: str, resources: dict[str, str]) -> None:
    import ray

    offered = ray.cluster_resources()
    missing = [k for k, r in resources.items() if r not in offered]
    if missing:
        raise MeasureError(
            f"no node of the cluster at {address} offers device kind(s) {missing}; it offers "
            f"{device_kinds(offered) or 'none'} (a node offers one with ray start --resources "
            "'{\"device:KIND\": 1}')"
        )


def _register(
    store: Store,
    rows: list[dict[str, Any]],
    name: str,
    backend: Any,
    resources: dict[str, str],
    settings: dict[str, Any],
    timeout_s: float,
) -> dict[str, Campaign]:
    """One campaign per device kind, on the platform a node offering it reports."""
    import ray

    probe = ray.remote(_probe)
    books: dict[str, Campaign] = {}
    for kind, resource in resources.items():
        try:
            fingerprint = ray.get(
                probe.options(resources={resource: 1}, num_cpus=0).remote(backend.name, settings),
                timeout=timeout_s,
            )
        except ray.exceptions.GetTimeoutError:
            raise MeasureError(f"no node offering {resource} answered within {timeout_s:.0f} s") from None
        platform = Platform(backend.name, {**backend.settings, "device_kind": kind}, fingerprint)
        books[kind] = Campaign.open(store, platform, name, rows)
    return books


def _submit(
    books: dict[str, Campaign], resources: dict[str, str], job: _Job
) -> dict[Any, tuple[str, list[Item]]]:
    """Each kind's to-do list in chunks, one task each holding one unit of the kind's resource."""
    import ray

    measure = ray.remote(_measure_chunk)
    tasks: dict[Any, tuple[str, list[Item]]] = {}
    for kind, book in books.items():
        for start in range(0, len(book.todo), job.chunk):
            part = book.todo[start : start + job.chunk]
            ref = measure.options(
                resources={resources[kind]: 1}, num_cpus=1, max_retries=job.max_retries
            ).remote(
                [{"key": i.key, "model": i.model, "input_shape": i.input_shape} for i in part],
                job.backend,
                job.settings,
                job.protocol,
                job.energy,
                job.op_runs,
            )
            tasks[ref] = (kind, part)
    return tasks


def _summary(
    name: str, books: dict[str, Campaign], tasks: dict[Any, tuple[str, list[Item]]]
) -> dict[str, Any]:
    return {
        "campaign": name,
        "platforms": {kind: book.platform.id for kind, book in books.items()},
        "done": 0,
        "failed": 0,
        "skipped": sum(book.skipped for book in books.values()),
        "lost": 0,
        "already_stored": 0,
        "nodes": {},
        "mismatched_nodes": [],
        "todo": sum(len(part) for _, part in tasks.values()),
    }


def _collect(
    tasks: dict[Any, tuple[str, list[Item]]],
    books: dict[str, Campaign],
    summary: dict[str, Any],
    idle_timeout_s: float,
    tell: Callable[[str, dict[str, Any]], None],
) -> list[Any]:
    """Store results as tasks finish, until none is left or none finished for ``idle_timeout_s``;
    returns the tasks still pending."""
    import ray

    pending = list(tasks)
    last = time.monotonic()
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=5.0)
        if not ready:
            if time.monotonic() - last > idle_timeout_s:
                break
            continue
        last = time.monotonic()
        kind, part = tasks[ready[0]]
        book = books[kind]
        try:
            result = ray.get(ready[0])
        except (ray.exceptions.RayError, OSError) as error:
            # retries spent: nothing is stored for these configs, a rerun measures them
            summary["lost"] += len(part)
            cause = getattr(error, "cause", None) or error
            reason = f"{kind}: {type(cause).__name__}: {str(cause).splitlines()[0][:300]}"
            if reason not in summary.setdefault("lost_reasons", []):
                summary["lost_reasons"].append(reason)
            tell("lost", summary)
            continue
        by_node = summary["nodes"].setdefault(kind, {})
        by_node[result["node"]] = by_node.get(result["node"], 0) + len(result["results"])
        mismatch = {"kind": kind, "node": result["node"]}
        if result["fingerprint"] != book.platform.fingerprint and mismatch not in summary["mismatched_nodes"]:
            summary["mismatched_nodes"].append(mismatch)
        for record in result["results"]:
            # a result another driver of the same campaign stored first is kept once
            if book.keep(Measurement(**record)):
                summary["done"] += 1
                tell("done", summary)
            else:
                summary["already_stored"] += 1
        for key, failure, reason in result["failures"]:
            book.fail(key, failure, reason)
            summary["failed"] += 1
            tell("failed", summary)
    return pending


__all__ = ["DEVICE_PREFIX", "device_kinds", "device_resource", "profile_on_ray"]
