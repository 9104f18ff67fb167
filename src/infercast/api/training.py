"""Training from a store: ``train`` writes a predictor directory (``predictors.bundle``) — the CARB
``CascadeBlend`` and, as the store allows, the op-wise route (op profiles), the blend given the
op-wise estimate, and Σ cost × work on device features — and ranks the latency routes on held-out
configs. ``train_ops`` trains an ``OpWise`` from op and end-to-end tables.

Every predictor records the platform it was trained on and the config ids it saw, so
``evaluate`` (``api.evaluating``) scores only configs it never trained on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.datasets import (
    TrainingData,
    kernel_campaign_configs,
    kernel_network_latencies,
    store_tables,
    training_data,
)
from infercast.errors import InfercastError
from infercast.files import check_replaceable, replaced_directory
from infercast.paths import check_output_dir
from infercast.predictors.artifact import PlatformInfo
from infercast.predictors.blend import CascadeBlend
from infercast.predictors.bundle import PredictorBundle
from infercast.predictors.devices.costs import fit_configs_and_kernels
from infercast.predictors.devices.features import device_feature_frame
from infercast.predictors.errors import PredictorError
from infercast.predictors.folds import stratified_split
from infercast.predictors.optable import check_e2e_table, check_op_table
from infercast.predictors.opwise import MIN_MODELS, OpWise
from infercast.predictors.routes import BLEND, COMBINED, MEAN, OPWISE, OPWISE_ESTIMATE, PHYSICAL, label
from infercast.store import Store
from infercast.tables import read_table

Progress = Callable[[str], None]


@dataclass
class _Run:
    """One ``train``: the store's tables, the split, where it writes, what it reports."""

    data: TrainingData
    train_rows: np.ndarray
    test_rows: np.ndarray
    out: Path
    metadata: dict[str, Any]  # what every route records of the training
    tell: Progress
    summary: dict[str, Any] = field(default_factory=dict)
    blend: CascadeBlend | None = None  # the main predictor, once fitted

    def ids(self, rows: np.ndarray) -> set[str]:
        return set(self.data.config_ids[rows])


def train(
    db: str | Path,
    out: str | Path,
    platform: str | None = None,
    latency_stat: str = "steady_ms",
    test_size: float = 0.2,
    seed: int = 0,
    opwise: bool = True,
    blend: CascadeBlend | None = None,
    campaigns: list[str] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Train on a store's measurements of one platform, hold out ``test_size`` (stratified by batch
    × depth tier), score the held-out configs, and write the predictor directory ``out``.

    ``latency_stat``: what the predictor learns; by default ``steady_ms``, the fastest round's
    median at the host's usual speed (by the campaigns' sentinel passes, ``store.drift``), so
    campaigns taken while the host ran fast or slow teach the same latency."""
    check_replaceable(check_output_dir(out))
    with Store(db, readonly=True) as store:
        data = training_data(store, platform, latency_stat, campaigns)
        ops, e2e = store_tables(store, data.platform["id"], latency_stat) if opwise else (None, None)
        kernel_networks = kernel_campaign_configs(store, data.platform["id"], campaigns) if opwise else set()
        kernel_latencies = kernel_network_latencies(store, data.platform["id"], latency_stat, campaigns)
    if len(data.x) < 12:
        raise PredictorError(
            f"{db}: only {len(data.x)} measured configs on this platform; train needs 12 or more"
        )
    train_rows, test_rows = stratified_split(data.x, test_size, seed)
    spaces = sorted({m.split("?")[0] for m in data.models if isinstance(m, str)})
    training = {
        "db": str(db),
        "latency_stat": latency_stat,
        "campaigns": campaigns,
        "models": spaces,
        "n_train": len(train_rows),
        "n_test": len(test_rows),
        "train_config_ids": sorted(data.config_ids[train_rows].tolist()),
    }
    metadata = {"platform": PlatformInfo.from_row(data.platform).to_meta(), "training": training}
    # the directory is written whole or not at all: a run killed half-way leaves the old one
    with replaced_directory(out) as partial:
        run = _Run(data, train_rows, test_rows, partial, metadata, progress or (lambda message: None))
        held = _fit_blend(run, blend or CascadeBlend(seed=seed))
        kernel_ops = ops[ops["model"].isin(kernel_networks)] if ops is not None else None
        if kernel_ops is not None and len(kernel_ops):
            run.summary["kernel_campaign"] = (
                f"{kernel_ops['model'].nunique()} kernel networks, {len(kernel_ops)} op rows"
            )
        if ops is not None and not ops.empty:
            held.update(_fit_opwise(run, held, ops, e2e, kernel_ops, seed))
        elif opwise:
            run.summary["opwise"] = "not trained: the store has no op profiles (profile with --ops)"
        held.update(_fit_physical(run, kernel_latencies))
        if {BLEND, OPWISE, PHYSICAL} <= set(held):
            from scipy.stats import gmean

            held[MEAN] = gmean([held[BLEND], held[OPWISE], held[PHYSICAL]], axis=0)
        if len(held) > 1:
            run.summary["routes"] = _rank(run, held)
    return {**run.summary, "predictor": str(out)}


def _fit_blend(run: _Run, model: CascadeBlend) -> dict[str, np.ndarray]:
    """Fit and save the blend (the directory's main predictor); its held-out latencies."""
    x, y = run.data.x, run.data.y
    run.tell(f"training the cascade blend on {len(run.train_rows)} configs")
    model.fit(x.iloc[run.train_rows], y.iloc[run.train_rows])
    scores = model.evaluate(x.iloc[run.test_rows], y.iloc[run.test_rows])
    model.write_into(
        run.out, {**run.metadata, "training": {**run.metadata["training"], "test_metrics": scores}}
    )
    run.summary.update(
        {
            "platform": run.data.platform["id"],
            "n_train": len(run.train_rows),
            "n_test": len(run.test_rows),
            "unavailable": model.unavailable_,
            "test_metrics": scores,
            "blend_weights": {t: m.weights for t, m in model.targets_.items()},
            "corrector": {t: m.corrector_note for t, m in model.targets_.items()},
        }
    )
    run.blend = model
    if "latency" not in model.targets_:
        return {}
    return {BLEND: model.predict(x.iloc[run.test_rows], ood="none")["latency_ms"].to_numpy()}


def _fit_opwise(
    run: _Run,
    held: dict[str, np.ndarray],
    ops: pd.DataFrame,
    e2e: pd.DataFrame,
    kernel_ops: pd.DataFrame | None,
    seed: int,
) -> dict[str, np.ndarray]:
    """The op-wise route on the training configs' op profiles (and the kernel campaign's), then
    the blend given its estimate; their held-out latencies (none, with the reason in the
    summary, when too few training configs were profiled)."""
    train_ids, test_ids = run.ids(run.train_rows), run.ids(run.test_rows)
    profiled = len(train_ids & set(ops["model"]))
    if profiled < MIN_MODELS:
        run.summary["opwise"] = (
            f"not trained: op profiles of {profiled} training configs "
            f"(needs {MIN_MODELS}; profile with --ops)"
        )
        return {}
    run.tell(f"training the op-wise predictor on the op profiles of {profiled} configs")
    op_model = OpWise(seed=seed).fit(
        ops[ops["model"].isin(train_ids)], e2e[e2e["model"].isin(train_ids)], kernel_ops=kernel_ops
    )
    held_ops = ops[ops["model"].isin(test_ids)]
    op_scores = op_model.evaluate(held_ops.drop(columns="latency_ms"), e2e) if len(held_ops) else {}
    PredictorBundle.save_route(
        run.out, OPWISE, op_model, {"platform": run.metadata["platform"], "test_metrics": op_scores}
    )
    run.summary["opwise_test_metrics"] = op_scores
    run.tell("training the blend on the op-wise estimate")
    return _fit_combined(run, op_model)


def _fit_combined(run: _Run, op_model: OpWise) -> dict[str, np.ndarray]:
    """The route ``blend + op-wise``: the blend refitted (latency only) with the op-wise estimate
    as a feature and in its trend — out-of-fold for the training configs, so it learns the errors
    the op-wise route really makes. Returns the op-wise and combined latencies of the held-out
    configs as ``predict`` makes them: the op-wise estimate from each one's captured graph, not
    from its measured op profile, which a network to predict does not have (NaN where a graph
    cannot be captured again)."""
    ids, train_rows, test_rows = run.data.config_ids, run.train_rows, run.test_rows
    assert run.blend is not None
    estimate = op_model.oof_latency_ms_.reindex(ids).to_numpy(dtype=np.float64, copy=True)
    estimate[test_rows] = _graph_estimates(run, op_model)
    x = run.data.x.assign(**{OPWISE_ESTIMATE: np.log(estimate)})
    held_opwise = estimate[test_rows]
    fit_rows = train_rows[np.isfinite(x[OPWISE_ESTIMATE].to_numpy()[train_rows])]
    blend = run.blend
    if len(fit_rows) < 2 * blend.n_folds:  # what the blend's own folds need
        run.summary["combined"] = (
            f"blend + op-wise not trained: {len(fit_rows)} training configs have "
            f"an op-wise estimate (needs {2 * blend.n_folds})"
        )
        return {OPWISE: held_opwise}
    combined = blend.__class__(
        **{**blend.get_params(), "order": ("latency",), "estimates": (OPWISE_ESTIMATE,)}
    )
    combined.fit(x.iloc[fit_rows], run.data.y.iloc[fit_rows])
    training = {**run.metadata["training"], "n_train": len(fit_rows)}
    PredictorBundle.save_route(run.out, COMBINED, combined, {**run.metadata, "training": training})
    held_combined = np.full(len(test_rows), np.nan)
    known = np.isfinite(held_opwise)
    if known.any():
        held_combined[known] = combined.predict(x.iloc[test_rows[known]], ood="none")["latency_ms"].to_numpy()
    return {OPWISE: held_opwise, COMBINED: held_combined}


def _graph_estimates(run: _Run, op_model: OpWise) -> np.ndarray:
    """The op-wise latencies of the held-out configs from their captured graphs (``predict``'s
    way), or NaN for all when one cannot be captured again (a model file gone since)."""
    from infercast.models.capturing import capture_model

    platform = PlatformInfo.from_row(run.data.platform)
    try:
        graphs = [capture_model(str(m))[0] for m in run.data.models[run.test_rows]]
    except InfercastError:
        return np.full(len(run.test_rows), np.nan)
    predicted = op_model.predict_graphs(graphs, platform.backend, platform.settings, platform.fingerprint)
    return predicted["latency_ms"].to_numpy(dtype=np.float64)


def _fit_physical(run: _Run, kernel_latencies: pd.DataFrame) -> dict[str, np.ndarray]:
    """The route Σ cost × work (``predictors.physical``) on the device features of each config's
    graph, captured again from its model string, and of each kernel-campaign network (which
    teach the costs of kernels the design spaces lack; the configs alone score the route): its
    interval's residuals come from holding each design space out when the store has several.
    Returns its latencies of the held-out configs, or nothing (with the reason in the summary)
    when a graph cannot be captured."""
    from infercast.models.capturing import capture_model

    data, train_rows = run.data, run.train_rows
    models = [str(m) for m in data.models[train_rows]] + kernel_latencies["model"].tolist()
    run.tell(f"capturing the graphs of {len(models)} networks for the Σ cost × work route")
    try:
        x = device_feature_frame([capture_model(m, None)[0] for m in models])
        held_out = device_feature_frame([capture_model(str(m), None)[0] for m in data.models[run.test_rows]])
    except InfercastError as error:  # a model file gone since it was measured: that route only is lost
        run.summary["physical"] = f"Σ cost × work not trained: a graph could not be captured again ({error})"
        return {}
    configs = len(train_rows)
    model = fit_configs_and_kernels(
        x.iloc[:configs],
        data.y["latency_ms"].to_numpy(dtype=np.float64)[train_rows],
        np.array([m.split("?")[0] for m in models[:configs]]),
        x.iloc[configs:],
        kernel_latencies["latency_ms"].to_numpy(),
    )
    PredictorBundle.save_route(run.out, PHYSICAL, model, run.metadata)
    run.summary["physical_costs"] = model.costs()
    if len(kernel_latencies):
        run.summary["physical"] = (
            f"Σ cost × work fitted on {configs} configs and {len(kernel_latencies)} kernel networks"
        )
    return {PHYSICAL: model.predict(held_out)["latency_ms"].to_numpy()}


def _rank(run: _Run, held: dict[str, np.ndarray]) -> dict[str, Any]:
    """The routes ranked on the held-out configs every route predicts (``routes.json``; ``predict``
    shows the first): the geometric mean of the three routes is preferred where it exists (chosen
    with design spaces held out, ``predictors.routes``), else blend + op-wise, else the blend."""
    every = np.logical_and.reduce([np.isfinite(v) for v in held.values()])
    if not every.any():
        # nothing to rank them on: predict keeps the blend first
        return {"order": [], "note": "no held-out config has a prediction of every route: not ranked"}
    truth = run.data.y["latency_ms"].to_numpy(dtype=np.float64)[run.test_rows][every]
    preferred = next(r for r in (MEAN, COMBINED, BLEND, *held) if r in held)
    routes = rank_routes(truth, {route: values[every] for route, values in held.items()}, preferred)
    PredictorBundle.save_ranking(run.out, routes)
    return routes


# held-out configs below which route figures are too noisy to rank routes by
MIN_RANKED = 20


def rank_routes(
    truth: np.ndarray, predicted: dict[str, np.ndarray], preferred: str = COMBINED, seed: int = 0
) -> dict[str, Any]:
    """The routes ordered by median |error| on held-out configs, with their figures — except that
    ``preferred`` (``train`` passes the route chosen on design spaces held out, ``predictors.routes``)
    stays first unless another one's median is lower in at least 90 % of paired bootstrap
    resamples of the configs: a few dozen held-out configs do not separate routes a tenth of a
    point apart, and the first route is the one ``predict`` shows."""
    errors = {route: np.abs(values - truth) / truth for route, values in predicted.items()}
    figures = {
        route: {
            "median_abs_error_pct": float(np.median(error) * 100),
            "within_10pct": float(np.mean(error <= 0.1)),
            "n": len(truth),
        }
        for route, error in errors.items()
    }
    order = sorted(figures, key=lambda route: figures[route]["median_abs_error_pct"])
    lowest = order[0]
    choice = f"{label(lowest)}: the lowest median |error| on the {len(truth)} held-out configs"
    if preferred in errors and lowest != preferred:
        resamples = np.random.default_rng(seed).integers(0, len(truth), (1000, len(truth)))
        lower = np.median(errors[lowest][resamples], axis=1) < np.median(errors[preferred][resamples], axis=1)
        if lower.mean() < 0.9:
            order = [preferred, *(route for route in order if route != preferred)]
            choice = (
                f"{label(preferred)}, the route chosen with design spaces held out, kept first: "
                f"{label(lowest)} had a lower median |error| on the {len(truth)} held-out configs "
                f"({figures[lowest]['median_abs_error_pct']:.1f} % vs "
                f"{figures[preferred]['median_abs_error_pct']:.1f} %), but in only {lower.mean():.0%} "
                "of bootstrap resamples (90 % needed to replace it)"
            )
        else:
            choice += f", lower than {label(preferred)} in {lower.mean():.0%} of bootstrap resamples"
    ranked = {
        "order": order,
        "held_out": figures,
        "criterion": f"median |error| of latency on the held-out configs every route predicts; "
        f"{label(preferred) if preferred in predicted else preferred} first unless another route is "
        "lower in 90 % of paired bootstrap resamples",
        "choice": choice,
    }
    if len(truth) < MIN_RANKED:
        ranked["warning"] = (
            f"only {len(truth)} held-out configs: too few to tell the routes apart (their medians "
            f"move by several points from one sample of configs to the next; {MIN_RANKED} or more "
            "are needed); profile more configs before trusting this order"
        )
    return ranked


def train_ops(
    ops_path: str | Path,
    e2e_path: str | Path,
    out: str | Path,
    test_size: float = 0.2,
    seed: int = 0,
    opwise: OpWise | None = None,
) -> dict[str, Any]:
    """The table route: train an ``OpWise`` (``opwise``, or one with default settings) from op and
    end-to-end tables (docs/formats.md), holding out ``test_size`` of the models to report
    accuracy, and save it to ``out``. An end-to-end ``group`` column (an architecture family, say)
    keeps each group's models in one fold when the overhead forms are weighed (``OpWise.fit``'s
    ``groups``)."""
    check_replaceable(check_output_dir(out))
    ops, e2e = read_table(ops_path), read_table(e2e_path)
    check_op_table(ops, training=True, name=str(ops_path))
    check_e2e_table(e2e, name=str(e2e_path))
    models = sorted(set(ops["model"].astype(str)) & set(e2e["model"].astype(str)))
    if len(models) < 3:
        raise PredictorError(f"only {len(models)} models appear in both tables; train-ops needs 3 or more")
    rng = np.random.default_rng(seed)
    n_test = max(1, math.floor(len(models) * test_size)) if test_size > 0 else 0
    test = set(rng.permutation(models)[:n_test].tolist())
    train_models = [m for m in models if m not in test]
    ops = ops.assign(model=ops["model"].astype(str))
    e2e = e2e.assign(model=e2e["model"].astype(str))
    groups = e2e.drop_duplicates("model", keep="last").set_index("model")["group"] if "group" in e2e else None
    model = (opwise or OpWise(seed=seed)).fit(
        ops[ops["model"].isin(train_models)], e2e[e2e["model"].isin(train_models)], groups=groups
    )
    scores = model.evaluate(ops[ops["model"].isin(test)].drop(columns="latency_ms"), e2e) if test else {}
    model.save(out, {"training": {"ops": str(ops_path), "e2e": str(e2e_path)}, "test_metrics": scores})
    return {
        "predictor": str(out),
        "n_train_models": len(train_models),
        "n_test_models": len(test),
        "test_metrics": scores,
        "training": model.training_,
    }
