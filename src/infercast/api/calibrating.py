"""``calibrate``: this machine's ``local`` device (``predictors.devices.local``) — the nearest
shipped host's kernel networks measured here for ``budget_s`` seconds, most informative first,
with a few design-space configs between them on a machine unlike the host's, and the host
recalibrated per kind of kernel on them. What ``infercast calibrate`` runs."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from infercast.errors import InfercastError

if TYPE_CHECKING:
    from infercast.predictors.devices.local import Calibration

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
# design-space configs measured after each block of kernel networks (``local_networks``): the
# budget's share of whole networks
CONFIGS_PER_BLOCK = 2
# the shipped hosts' design-space ranges (benchmarks/history/kernel_campaign.md): configs each
# host predicts from its own training, each measured in a few seconds
RANGES = {"carb-resnet": {"depth": (8, 50), "width": (0.25, 1.0)}, "mobile-nas": {"width": (0.35, 1.25)}}


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
    """Store rows of networks (kernel networks, design-space configs), each twice: a block of
    ``PASS_BLOCK`` networks, then the same block again (ids ending ``AGAIN``), so a network's
    two passes lie seconds apart."""
    from infercast.space import get

    by_space: dict[str, dict[str, dict[str, Any]]] = {}
    for name in dict.fromkeys(model.split("?", 1)[0].removeprefix("space:") for model in models):
        space = get(name)
        mine = [m.split("?", 1)[1] for m in models if m.startswith(f"space:{name}?")]
        configs = space.with_ids(pd.DataFrame([space.parse(query) for query in mine]))
        by_space[name] = {row["model"]: row for row in space.config_rows(configs)}
    rows = [by_space[model.split("?", 1)[0].removeprefix("space:")][model] for model in models]
    passes = []
    for first in range(0, len(rows), PASS_BLOCK):
        block = rows[first : first + PASS_BLOCK]
        passes += block + [{**row, "id": row["id"] + AGAIN} for row in block]
    return passes


def design_configs(count: int, seed: int = 0) -> list[str]:
    """``count`` model strings, alternately of ``carb-resnet`` (fp32) and ``mobile-nas`` at 224²,
    batch 1, within the ranges the shipped hosts were trained on (``RANGES``), each space's drawn
    stratified and shuffled, so that the first few already spread over it."""
    from infercast import space

    if count < 1:
        return []
    drawn = []
    for name, fixed in (("carb-resnet", {"batch": [1], "precision": ["fp32"], "input_size": [224]}),
                        ("mobile-nas", {"batch": [1], "resolution": [224]})):  # fmt: skip
        chosen = space.get(name)
        for param, values in fixed.items():
            chosen = space.restrict(chosen, param, values)
        for param, (low, high) in RANGES[name].items():
            inside = [value for value in chosen.param(param).choices if low <= value <= high]
            chosen = space.restrict(chosen, param, inside)
        models = chosen.sample((count + 1) // 2, seed=seed, stratified=True)["model"].to_numpy()
        drawn.append(list(np.random.default_rng(seed).permutation(models)))
    return [model for pair in zip(*drawn, strict=True) for model in pair][:count]


def is_design_config(model: str) -> bool:
    return model.startswith(tuple(f"space:{name}?" for name in RANGES))


def _interleaved(kernels: list[str], per_block: int = CONFIGS_PER_BLOCK) -> list[str]:
    """The kernel networks in their order, ``per_block`` design-space configs after each block of
    ``PASS_BLOCK``: whole networks from the first minute on."""
    blocks = [kernels[i : i + PASS_BLOCK] for i in range(0, len(kernels), PASS_BLOCK)]
    configs = iter(design_configs(len(blocks) * per_block))
    return [model for block in blocks for model in [*block, *islice(configs, per_block)]]


def configs_per_block(source: str) -> int:
    """How many design-space configs a calibration from host ``source`` measures after each block:
    none on a machine like the host's (nothing its fingerprint records differs), whose tables
    already hold how kernels run inside networks on such a CPU — there the configs only took
    budget from the kernel networks (RESULTS.md, "Calibration on each machine": on the Zen 4 and
    the Xeon, from their own hosts, a minute's calibration did worse with them)."""
    from infercast.machine import differences_here
    from infercast.predictors.devices import hosts

    return CONFIGS_PER_BLOCK if differences_here(hosts.hosts()[source].get("fingerprint", {})) else 0


def _fitted(measured: pd.DataFrame, source: str, threads: int, seconds: float, block: int) -> Calibration:
    """The calibration from the kernel networks measured here, refitted on the design-space
    configs measured here (``local_networks``)."""
    from infercast.models.capturing import capture_model
    from infercast.predictors.devices import local, local_networks

    configs = measured["model"].map(is_design_config)
    calibration = local.fit(measured[~configs], source, threads, seconds, nchwc_block=block)
    models = measured.loc[configs, "model"].tolist()
    graphs = [capture_model(model)[0] for model in models]
    spaces = [model.split("?", 1)[0] for model in models]
    return local_networks.refit(calibration, graphs, measured.loc[configs, "here_ms"].to_numpy(), spaces)


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
    Returns its summary: ``source``, ``n`` (kernel networks), ``networks`` (design-space
    configs), ``pull`` (how far they moved the factors; None: not at all), ``measured`` (this
    run), ``seconds`` (this run's measuring), ``factor``, ``kinds`` (factor, n, se), ``folder``."""
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
    order = _interleaved(local.plan(source, block)["model"].tolist(), configs_per_block(source))
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
    spent = seconds + (earlier.seconds if earlier and earlier.threads == threads else 0)
    calibration = _fitted(measured, source, threads, spent, block)
    calibration.save(folder / local.CALIBRATION_FILE)
    tell("end", state)
    return {
        "source": source,
        "n": calibration.n,
        "networks": calibration.networks,
        "pull": calibration.pull,
        "measured": len(measured) - len(done),
        "seconds": seconds,
        "factor": calibration.factor,
        "kinds": calibration.kinds,
        "folder": str(folder),
    }
