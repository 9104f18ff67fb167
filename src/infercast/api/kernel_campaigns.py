"""Adaptive kernel campaigns (nn-Meter's adaptive sampling, done for our backends): half the
kernels drawn from the shapes real CNNs run, the other half around those the kernel regressors
predicted worst. ``infercast profile --kernels --adaptive`` runs ``profile_adaptive`` (the
``adaptive`` executor of ``api.profiling``).

1. **First half**: ``ceil(n · first_share)`` kernels of the space, drawn as ``profile --kernels``
   draws them, measured with their op rows.
2. **Where the regressors are least sure**: the op-wise kernel regressors, chosen and fitted as
   ``train`` fits them on the platform's design-space op rows and the first half's, predict each
   first-half kernel with that kernel network held out (``OpWise.kernel_errors``). A network's
   error is its worst kernel's |log error|.
3. **Second half**: the rest of ``n``, drawn around the worst ``hard_share`` of the first half
   (channels and side moved by up to ±25 %, as the sampler moves the harvested shapes), measured
   into the same campaign.

The second half is planned from the first half's measurements and the design-space op rows in
the store when it starts; a campaign stopped in it (kill -9 included) replans the same kernels on
the next run unless the store's design-space rows changed in between, and measures what is left.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from infercast.datasets import KERNEL_SPACE, store_tables
from infercast.errors import InfercastError
from infercast.measurement import CampaignSpec, backends, platform_of, run_campaign
from infercast.measurement.backends.base import Backend
from infercast.predictors.opwise import OpWise
from infercast.space import get as get_space
from infercast.space.kernel_networks import sample_around
from infercast.store import Store

Progress = Callable[[str, dict[str, Any]], None]


def profile_adaptive(
    spec: CampaignSpec,
    db: str | Path,
    backend: str | Backend = "ort-cpu",
    progress: Progress | None = None,
    first_share: float = 0.5,
    hard_share: float = 0.25,
    **settings: Any,
) -> dict[str, Any]:
    """Measure ``spec.n`` one-kernel networks of ``spec.space`` (``kernels`` or a YAML restriction
    of it) into ``db`` in two halves (module docstring); rerunning resumes. Returns the campaign
    summary (both halves' counts summed) with ``adaptive``: the halves' sizes, the first half's
    median and worst-quartile kernel errors, and the kernels the second half was drawn around."""
    chosen_space = get_space(spec.space)
    if chosen_space.string_name != KERNEL_SPACE:
        raise InfercastError(f"--adaptive samples kernel campaigns: {spec.space} is not the kernels space")
    if not 0 < first_share < 1 or not 0 < hard_share <= 1:
        raise InfercastError(
            f"first_share={first_share!r} must lie in (0, 1) and hard_share={hard_share!r} in (0, 1]"
        )
    if spec.op_runs < 1:
        raise InfercastError(
            f"op_runs={spec.op_runs!r}: an adaptive campaign learns from op rows (1 or more)"
        )
    if spec.n < 4:
        raise InfercastError(f"--n {spec.n}: an adaptive campaign needs 4 kernels or more (two in each half)")
    if spec.limit is not None:
        raise InfercastError("an adaptive campaign plans its second half from the first: it takes no limit")
    chosen = backend if isinstance(backend, Backend) else backends.get(backend, **settings)
    first_n = max(2, math.ceil(spec.n * first_share))
    first_rows, _ = replace(spec, n=first_n, stratified=False).rows()
    name = spec.campaign or f"{chosen_space.name}:n={spec.n}:seed={spec.seed}:adaptive"

    def run(rows: list[dict[str, Any]]) -> dict[str, Any]:
        return run_campaign(
            rows,
            db,
            chosen,
            name,
            spec.protocol,
            spec.energy,
            spec.op_runs,
            progress,
            sentinels=spec.sentinels,
        )

    first = run(first_rows)
    errors = _first_half_errors(db, chosen, {r["id"] for r in first_rows}, spec.seed)
    hard = errors.nlargest(max(1, math.ceil(len(errors) * hard_share)))
    params = [p.name for p in chosen_space.params]
    by_id = {r["id"]: r["params"] for r in first_rows}
    shapes = pd.DataFrame([by_id[config] for config in hard.index], columns=params)
    around = sample_around(chosen_space, shapes, spec.n - first_n, seed=spec.seed + 1)
    around = around[~around["id"].isin(by_id)].drop_duplicates("id", ignore_index=True)
    second = run(chosen_space.config_rows(around))
    summary = {
        **second,
        **{key: first[key] + second[key] for key in ("done", "failed", "skipped", "todo", "left")},
    }
    summary["adaptive"] = {
        "first_half": len(first_rows),
        "second_half": len(around),
        "first_half_median_abs_log_error": float(errors.median()),
        "hard_kernels_min_abs_log_error": float(hard.min()),
        "drawn_around": [by_id[config] for config in hard.index],
    }
    return summary


def _first_half_errors(db: str | Path, backend: Backend, first_ids: set[str], seed: int) -> pd.Series:
    """Each measured first-half kernel network's worst out-of-fold kernel |log error|, from
    regressors fitted on the platform's design-space op rows and the other first-half networks."""
    with Store(db, readonly=True) as store:
        ops, _ = store_tables(store, platform_of(backend).id)
        measured = store.measurements(platform_of(backend).id)
    if ops.empty:
        raise InfercastError(f"{db}: the first half stored no op rows; an adaptive campaign learns from them")
    kernel_networks = set(measured.loc[measured["space"] == KERNEL_SPACE, "config_id"])
    # other kernel campaigns' networks stay out: the plan must not change with what they measure
    design = ops[~ops["model"].isin(kernel_networks)]
    first = ops[ops["model"].isin(first_ids)]
    if first["model"].nunique() < 2:
        raise InfercastError(
            f"only {first['model'].nunique()} first-half kernel networks were measured with op rows: "
            "rerun to measure the rest before the second half is planned"
        )
    errors = OpWise(seed=seed).kernel_errors(pd.concat([design, first], ignore_index=True))
    errors = errors[errors["model"].isin(first_ids)]
    return errors.groupby("model")["abs_log_error"].max().sort_index()
