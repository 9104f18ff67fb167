"""``calibrate``: this machine's ``local`` device (``predictors.devices.local``) — the nearest
shipped host's kernel networks measured here for ``budget_s`` seconds, most informative first,
and the host recalibrated per kind of kernel on them. What ``infercast calibrate`` runs."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import pandas as pd

from infercast.errors import InfercastError

Progress = Callable[[str, dict[str, Any]], None]
DEFAULT_BUDGET_S = 60.0
# short rounds: a kernel network runs for well under a millisecond to a few, and a calibration
# buys more kinds and shapes with its seconds than it would buy precision on few of them
PROTOCOL = {"warmup_s": 0.1, "round_s": 0.05, "min_rounds": 4, "cap_s": 0.5, "sentinel_every_s": 0}
# kernel networks given their features per second of budget left: more than this machine
# measures, so the budget, not the list, ends a run
ROWS_PER_S = 3
# this host slows everything at once for seconds at a time: each network is measured in two passes
# a block apart and its faster pass kept, as the faster of two runs of a real network is its truth
PASS_BLOCK = 7
AGAIN = "-again"


def _checked(budget_s: float, threads: int, backend: str) -> None:
    if backend != "ort-cpu":
        raise InfercastError(
            f"backend={backend!r}: calibration recalibrates the shipped ONNX Runtime CPU hosts; "
            "use --backend ort-cpu (other runtimes: measure networks and `infercast adapt`)"
        )
    if isinstance(budget_s, bool) or not isinstance(budget_s, int | float) or not 0 < budget_s < math.inf:
        raise InfercastError(f"budget_s={budget_s!r}: give a positive number of seconds")
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InfercastError(f"threads={threads!r}: a whole number, 1 or more")


def _rows(models: list[str]) -> list[dict[str, Any]]:
    """Store rows of kernel networks, each twice: a block of ``PASS_BLOCK`` networks, then the
    same block again (ids ending ``AGAIN``), so a network's two passes lie seconds apart."""
    from infercast.space import get

    space = get("kernels")
    configs = space.with_ids(pd.DataFrame([space.parse(model.split("?", 1)[1]) for model in models]))
    rows = space.config_rows(configs)
    passes = []
    for first in range(0, len(rows), PASS_BLOCK):
        block = rows[first : first + PASS_BLOCK]
        passes += block + [{**row, "id": row["id"] + AGAIN} for row in block]
    return passes


def _measured(db: str, platform_id: str, campaign: str) -> pd.DataFrame:
    """Each measured network's ``here_ms``: the faster of its passes' ``low_ms``."""
    from infercast.store import Store

    with Store(db) as store:
        stored = store.measurements(platform_id)
    stored = stored[stored["campaign"] == campaign].drop_duplicates("config_id", keep="last")
    fastest = stored.groupby("model", sort=False)["low_ms"].min()
    return pd.DataFrame({"model": fastest.index, "here_ms": fastest.to_numpy()})


def calibrate(
    budget_s: float = DEFAULT_BUDGET_S,
    threads: int = 1,
    backend: str = "ort-cpu",
    progress: Progress | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """Measure kernel networks here for ``budget_s`` seconds (after those a rerun with the same
    ``threads`` already holds: it resumes and adds), fit the per-kind factors on all of them and
    keep the calibration under this machine's fingerprint (replacing one of other threads).
    ``source`` is the shipped host it recalibrates: by default the one whose machine differs
    least from this one.
    Returns its summary: ``source``, ``n``, ``measured`` (this run), ``seconds`` (this run's
    measuring), ``factor``, ``kinds`` (factor, n, se), ``folder``."""
    from infercast.measurement import Protocol, backends, platform_of, run_campaign
    from infercast.predictors.devices import local

    _checked(budget_s, threads, backend)
    tell = progress or (lambda event, state: None)
    from infercast.predictors.devices import hosts

    if source is not None and source not in hosts.names():
        raise InfercastError(f"source={source!r}: the shipped hosts are {', '.join(hosts.names())}")
    source = source or local.nearest_host()
    folder = local.folder()
    folder.mkdir(parents=True, exist_ok=True)
    db = str(folder / local.STORE_FILE)
    chosen = backends.get(backend, threads=threads, opt_level="all")
    platform_id = platform_of(chosen).id
    block = int(chosen.machine_facts().get("nchwc_block", 0))
    order = local.plan(source, block)["model"].tolist()
    done = (
        set(_measured(db, platform_id, local.CAMPAIGN)["model"])
        if (folder / local.STORE_FILE).is_file()
        else set()
    )
    left = [model for model in order if model not in done]
    state = {
        "source": source,
        "total": len(done) + min(len(left), int(budget_s * ROWS_PER_S)),
        "done": len(done),
    }
    tell("start", state)
    started = time.monotonic()
    deadline = started + budget_s

    def counted(event: str, summary: dict[str, Any]) -> None:
        if event == "done":  # a network is measured once its first pass is
            tell("done", {**state, "done": state["done"] + (summary["done"] + 1) // 2})

    while left and time.monotonic() < deadline:
        chunk = left[: max(PASS_BLOCK, int((deadline - time.monotonic()) * ROWS_PER_S))]
        left = left[len(chunk) :]
        summary = run_campaign(
            _rows(chunk), db, chosen, local.CAMPAIGN, Protocol(**PROTOCOL), energy=False,
            progress=counted, deadline=deadline, sentinels=False, at_least=2 * PASS_BLOCK,
        )  # fmt: skip
        state["done"] += (summary["done"] + 1) // 2
    seconds = time.monotonic() - started
    earlier = local.load_calibration()
    measured = _measured(db, platform_id, local.CAMPAIGN)
    calibration = local.fit(
        measured,
        source,
        threads,
        seconds + (earlier.seconds if earlier and earlier.threads == threads else 0),
        nchwc_block=block,
    )
    calibration.save(folder / local.CALIBRATION_FILE)
    tell("end", state)
    return {
        "source": source,
        "n": calibration.n,
        "measured": len(measured) - len(done),
        "seconds": seconds,
        "factor": calibration.factor,
        "kinds": calibration.kinds,
        "folder": str(folder),
    }
