"""The training workflows: a store (or op tables) → predictor directories, and their scores:
``train``, ``evaluate``, ``train_ops``, ``predict_ops``, ``adapt``, ``adapt_device``, ``suggest``.

A predictor directory from ``train`` holds the CARB ``CascadeBlend`` and, when the store has op
profiles, the ``OpWise`` predictor in ``opwise/``. Both record the platform they were trained on
and the config ids they saw, so ``evaluate`` scores only configs the predictor never trained on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import gmean
from sklearn.base import clone

from infercast.api.predicting import (
    COMBINED,
    COMBINED_DIR,
    OPWISE_ESTIMATE,
    PHYSICAL,
    PHYSICAL_DIR,
    ROUTES_FILE,
    combined_of,
    load_predictor,
    opwise_of,
    rank_routes,
)
from infercast.datasets import (
    TrainingData,
    kernel_campaign_configs,
    kernel_network_latencies,
    resolve_platform,
    store_tables,
    training_data,
)
from infercast.errors import InfercastError
from infercast.paths import check_output_dir
from infercast.predictors.adapted import SELECTIONS, Adapted, select_configs
from infercast.predictors.artifact import PlatformInfo
from infercast.predictors.blend import CascadeBlend
from infercast.predictors.data import feature_frame
from infercast.predictors.devices.costs import fit_configs_and_kernels
from infercast.predictors.devices.features import device_feature_frame
from infercast.predictors.errors import PredictorError
from infercast.predictors.folds import stratified_split
from infercast.predictors.optable import check_e2e_table, check_op_table
from infercast.predictors.opwise import MIN_MODELS, OpWise
from infercast.predictors.routes import MEAN_ROUTE
from infercast.store import Store
from infercast.tables import read_table

Progress = Callable[[str], None]


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
    tell = progress or (lambda message: None)
    check_output_dir(out)
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
    model = blend or CascadeBlend(seed=seed)
    tell(f"training the cascade blend on {len(train_rows)} configs")
    model.fit(data.x.iloc[train_rows], data.y.iloc[train_rows])
    scores = model.evaluate(data.x.iloc[test_rows], data.y.iloc[test_rows])
    spaces = sorted({m.split("?")[0] for m in data.models if isinstance(m, str)})
    metadata = {
        "platform": PlatformInfo.from_row(data.platform).to_meta(),
        "training": {
            "db": str(db),
            "latency_stat": latency_stat,
            "campaigns": campaigns,
            "models": spaces,
            "n_train": len(train_rows),
            "n_test": len(test_rows),
            "train_config_ids": sorted(data.config_ids[train_rows].tolist()),
            "test_metrics": scores,
        },
    }
    out = Path(out)
    model.save(out, metadata)
    summary: dict[str, Any] = {
        "predictor": str(out),
        "platform": data.platform["id"],
        "n_train": len(train_rows),
        "n_test": len(test_rows),
        "unavailable": model.unavailable_,
        "test_metrics": scores,
        "blend_weights": {t: s.weights for t, s in model.stages_.items()},
        "corrector": {t: s.corrector_note for t, s in model.stages_.items()},
    }
    kernel_ops = ops[ops["model"].isin(kernel_networks)] if ops is not None else None
    if kernel_ops is not None and len(kernel_ops):
        summary["kernel_campaign"] = (
            f"{kernel_ops['model'].nunique()} kernel networks, {len(kernel_ops)} op rows"
        )
    # what the other routes record of the training (the blend's test metrics are not theirs)
    route_meta = {
        **metadata,
        "training": {k: v for k, v in metadata["training"].items() if k != "test_metrics"},
    }
    # each route's latency on the held-out configs (NaN where it has none), ranked at the end
    held: dict[str, np.ndarray] = {}
    if "latency" in model.stages_:
        held["blend"] = model.predict(data.x.iloc[test_rows], ood="none")["latency_ms"].to_numpy()
    if ops is not None and not ops.empty:
        train_ids = set(data.config_ids[train_rows])
        test_ids = set(data.config_ids[test_rows])
        profiled = len(train_ids & set(ops["model"]))
        if profiled < MIN_MODELS:
            summary["opwise"] = (
                f"not trained: op profiles of {profiled} training configs "
                f"(needs {MIN_MODELS}; profile with --ops)"
            )
        else:
            tell(f"training the op-wise predictor on the op profiles of {profiled} configs")
            op_model = OpWise(seed=seed).fit(
                ops[ops["model"].isin(train_ids)], e2e[e2e["model"].isin(train_ids)], kernel_ops=kernel_ops
            )
            held_ops = ops[ops["model"].isin(test_ids)]
            op_scores = op_model.evaluate(held_ops.drop(columns="latency_ms"), e2e) if len(held_ops) else {}
            op_model.save(
                out / "opwise",
                {"platform": PlatformInfo.from_row(data.platform).to_meta(), "test_metrics": op_scores},
            )
            summary["opwise_test_metrics"] = op_scores
            tell("training the blend on the op-wise estimate")
            held.update(
                _fit_combined(model, data, train_rows, test_rows, op_model, ops, out, route_meta, summary)
            )
    elif opwise:
        summary["opwise"] = "not trained: the store has no op profiles (profile with --ops)"
    held.update(_fit_physical(data, train_rows, test_rows, kernel_latencies, out, route_meta, summary, tell))
    if {"blend", "op-wise", PHYSICAL} <= set(held):
        held[MEAN_ROUTE] = gmean([held["blend"], held["op-wise"], held[PHYSICAL]], axis=0)
    if len(held) > 1:
        summary["routes"] = _rank(data, test_rows, held, out)
    return summary


def _fit_combined(
    blend: CascadeBlend,
    data: TrainingData,
    train_rows: np.ndarray,
    test_rows: np.ndarray,
    op_model: OpWise,
    ops: pd.DataFrame,
    out: Path,
    metadata: dict[str, Any],
    summary: dict[str, Any],
) -> dict[str, np.ndarray]:
    """The route ``blend + op-wise``: the blend refitted (latency only) with the op-wise estimate
    as a feature and in its trend — out-of-fold for the training configs, so it learns the errors
    the op-wise route really makes. Returns the op-wise and combined latencies of the held-out
    configs (NaN where a config has no op profile)."""
    ids = data.config_ids
    test_ops = ops[ops["model"].isin(set(ids[test_rows]))].drop(columns="latency_ms")
    estimate = pd.concat([op_model.oof_latency_ms_, op_model.predict(test_ops)["latency_ms"]])
    x = data.x.assign(**{OPWISE_ESTIMATE: np.log(estimate.reindex(ids).to_numpy(dtype=np.float64))})
    held_opwise = np.exp(x[OPWISE_ESTIMATE].to_numpy()[test_rows])
    fit_rows = train_rows[np.isfinite(x[OPWISE_ESTIMATE].to_numpy()[train_rows])]
    if len(fit_rows) < 2 * blend.n_folds:  # what the blend's own folds need
        summary["combined"] = (
            f"blend + op-wise not trained: {len(fit_rows)} training configs have "
            f"an op-wise estimate (needs {2 * blend.n_folds})"
        )
        return {"op-wise": held_opwise}
    combined = clone(blend).set_params(order=("latency",), estimates=(OPWISE_ESTIMATE,))
    combined.fit(x.iloc[fit_rows], data.y.iloc[fit_rows])
    combined.save(
        out / COMBINED_DIR, {**metadata, "training": {**metadata["training"], "n_train": len(fit_rows)}}
    )
    held_combined = np.full(len(test_rows), np.nan)
    known = np.isfinite(held_opwise)
    if known.any():
        held_combined[known] = combined.predict(x.iloc[test_rows[known]], ood="none")["latency_ms"].to_numpy()
    return {"op-wise": held_opwise, COMBINED: held_combined}


def _fit_physical(
    data: TrainingData,
    train_rows: np.ndarray,
    test_rows: np.ndarray,
    kernel_latencies: pd.DataFrame,
    out: Path,
    metadata: dict[str, Any],
    summary: dict[str, Any],
    tell: Progress,
) -> dict[str, np.ndarray]:
    """The route Σ cost × work (``predictors.physical``) on the device features of each config's
    graph, captured again from its model string, and of each kernel-campaign network (which
    teach the costs of kernels the design spaces lack; the configs alone score the route): its
    interval's residuals come from holding each design space out when the store has several.
    Returns its latencies of the held-out configs, or nothing (with the reason in ``summary``)
    when a graph cannot be captured."""
    from infercast.models.guarded import capture_model

    models = [str(m) for m in data.models[train_rows]] + kernel_latencies["model"].tolist()
    tell(f"capturing the graphs of {len(models)} networks for the Σ cost × work route")
    try:
        x = device_feature_frame([capture_model(m, None)[0] for m in models])
        held_out = device_feature_frame([capture_model(str(m), None)[0] for m in data.models[test_rows]])
    except InfercastError as error:  # a model file gone since it was measured: that route only is lost
        summary["physical"] = f"Σ cost × work not trained: a graph could not be captured again ({error})"
        return {}
    configs = len(train_rows)
    model = fit_configs_and_kernels(
        x.iloc[:configs],
        data.y["latency_ms"].to_numpy(dtype=np.float64)[train_rows],
        np.array([m.split("?")[0] for m in models[:configs]]),
        x.iloc[configs:],
        kernel_latencies["latency_ms"].to_numpy(),
    )
    model.save(out / PHYSICAL_DIR, metadata)
    summary["physical_costs"] = model.costs()
    if len(kernel_latencies):
        summary["physical"] = (
            f"Σ cost × work fitted on {len(train_rows)} configs and {len(kernel_latencies)} kernel networks"
        )
    return {PHYSICAL: model.predict(held_out)["latency_ms"].to_numpy()}


def _rank(
    data: TrainingData, test_rows: np.ndarray, held: dict[str, np.ndarray], out: Path
) -> dict[str, Any]:
    """The routes ranked on the held-out configs every route predicts (``routes.json``; ``predict``
    shows the first): the geometric mean of the three routes is preferred where it exists (chosen
    with design spaces held out, ``predict.routes``), else blend + op-wise, else the blend."""
    every = np.logical_and.reduce([np.isfinite(v) for v in held.values()])
    if not every.any():
        # nothing to rank them on: predict keeps the blend first
        return {"order": [], "note": "no held-out config has a prediction of every route: not ranked"}
    truth = data.y["latency_ms"].to_numpy(dtype=np.float64)[test_rows][every]
    preferred = next(r for r in (MEAN_ROUTE, COMBINED, "blend", *held) if r in held)
    routes = rank_routes(truth, {route: values[every] for route, values in held.items()}, preferred)
    (out / ROUTES_FILE).write_text(json.dumps(routes, indent=2))
    return routes


def evaluate(
    folder: str | Path, db: str | Path, platform: str | None = None, campaigns: list[str] | None = None
) -> dict[str, Any]:
    """Score a predictor on a store's measurements of its platform that it never trained on:
    per target R², MAE, MAPE, RMSPE, ±5 %/±10 %, Spearman, Kendall, interval coverage, next to the
    baselines (and the op-wise predictor where there is one and the store has op profiles)."""
    blend = load_predictor(folder)
    info = blend.info
    with Store(db, readonly=True) as store:
        chosen = resolve_platform(store, platform or info.platform.id)
        data = training_data(store, chosen["id"], info.latency_stat, campaigns)
        ops, e2e = store_tables(store, chosen["id"], info.latency_stat)
    keep = np.array([cid not in info.train_config_ids for cid in data.config_ids])
    if not keep.any():
        raise PredictorError(f"every config of {db} on this platform was used to train the predictor")
    scores = blend.evaluate(data.x[keep], data.y[keep])
    out: dict[str, Any] = {
        "predictor": str(folder),
        "db": str(db),
        "platform": chosen["id"],
        "same_platform": chosen["id"] == info.platform.id,
        "n_evaluated": int(keep.sum()),
        "n_excluded_as_training": int((~keep).sum()),
        "targets": scores,
        "unavailable": blend.unavailable_,
    }
    opwise = opwise_of(folder)
    if opwise is not None and not ops.empty:
        unseen = set(data.config_ids[keep]) & set(ops["model"])
        if unseen:
            table = ops[ops["model"].isin(unseen)].drop(columns="latency_ms")
            out["opwise"] = opwise.evaluate(table, e2e)
            combined, _ = combined_of(folder)
            if combined is not None:
                rows = keep & np.isin(data.config_ids, list(unseen))
                estimate = opwise.predict(table)["latency_ms"].reindex(data.config_ids[rows])
                x = data.x[rows].assign(**{OPWISE_ESTIMATE: np.log(estimate.to_numpy(dtype=np.float64))})
                out["combined"] = combined.evaluate(x, data.y[rows])["latency"]
    return out


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
    check_output_dir(out)
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


def predict_ops(folder: str | Path, ops_path: str | Path) -> list[dict[str, Any]]:
    """Predict every model of an op table (latencies, if present, are ignored)."""
    table = read_table(ops_path)
    check_op_table(table, name=str(ops_path))
    model = OpWise.load(folder)
    predicted = model.predict(table.drop(columns=["latency_ms"], errors="ignore"))
    return [
        {
            "model": str(name),
            "latency_ms": float(row["latency_ms"]),
            "latency_ms_low": float(row["latency_ms_low"]),
            "latency_ms_high": float(row["latency_ms_high"]),
            "kernel_sum_ms": float(row["kernel_sum_ms"]),
            "ood": bool(row["ood"]),
            "ood_reason": row["ood_reason"] or None,
        }
        for name, row in predicted.iterrows()
    ]


def _target_platform(store: Store, platform: str | None, sources: Adapted) -> dict[str, Any]:
    """The platform to adapt to: the one named, else the only one no source was trained on."""
    own = {s.info.platform.id for s in sources.sources}
    if platform is None:
        others = store.platforms()
        others = others[~others["id"].isin(own)]
        if len(others) == 1:
            platform = str(others.iloc[0]["id"])
    chosen = resolve_platform(store, platform)
    if chosen["id"] in own:
        raise PredictorError(
            f"platform {chosen['id']} is a source predictor's own platform: adapt builds a predictor for "
            "another one (name it with --platform)"
        )
    return chosen


def adapt(
    sources: list[str | Path],
    db: str | Path,
    out: str | Path,
    k: int = 10,
    platform: str | None = None,
    selection: str = "spread",
    seed: int = 0,
    campaigns: list[str] | None = None,
) -> dict[str, Any]:
    """Few-shot adaptation: choose ``k`` of the target platform's measured configs (``selection``),
    fit an ``Adapted`` predictor on them, score it on the rest next to the unadapted sources, and
    write it to ``out`` (self-contained: the sources are copied in)."""
    _check_selection(selection, k)
    check_output_dir(out)
    model = Adapted.from_folders(sources, seed=seed)
    stat = model.sources[0].info.latency_stat
    with Store(db, readonly=True) as store:
        chosen = _target_platform(store, platform, model)
        data = training_data(store, chosen["id"], stat, campaigns)
    if len(data.x) < k:
        raise PredictorError(
            f"{db} holds {len(data.x)} measured configs on platform {chosen['id']}; --k {k} needs that many"
        )
    picked = select_configs(model.sources, data.x, k, selection, seed)
    model.fit(data.x.iloc[picked], data.y.iloc[picked])
    rest = np.setdiff1d(np.arange(len(data.x)), picked)
    scores = model.evaluate(data.x.iloc[rest], data.y.iloc[rest]) if len(rest) else {}
    metadata = {
        "platform": PlatformInfo.from_row(chosen).to_meta(),
        "training": {
            "db": str(db),
            "latency_stat": stat,
            "campaigns": campaigns,
            "k": k,
            "selection": selection,
            "train_config_ids": sorted(data.config_ids[picked].tolist()),
            "n_test": len(rest),
            "test_metrics": scores,
        },
    }
    model.save(out, metadata)
    return {
        "predictor": str(out),
        "platform": chosen["id"],
        "sources": [str(s) for s in sources],
        "k": k,
        "selection": selection,
        "measured_configs": data.models[picked].tolist(),
        "n_test": len(rest),
        "test_metrics": scores,
        "fit": model.describe(),
        "unavailable": model.unavailable_,
    }


def adapt_device(
    db: str | Path,
    out: str | Path,
    k: int = 10,
    platform: str | None = None,
    selection: str = "spread",
    seed: int = 0,
    campaigns: list[str] | None = None,
    latency_stat: str = "steady_ms",
) -> dict[str, Any]:
    """Few-shot adaptation from the shipped devices: ``k`` of the platform's measured networks
    (``db import`` or a campaign) choose the nearest shipped device — among the hosts of the
    platform's runtime when there are any (``devices.recalibrated.same_runtime``) — and recalibrate it
    (``DeviceAdapted``); scored on the platform's other measurements next to that device
    unadapted; written to ``out`` (``infercast predict --predictor`` takes it)."""

    from infercast.models.guarded import capture_model
    from infercast.predictors.devices.features import device_feature_frame
    from infercast.predictors.devices.recalibrated import DeviceAdapted, same_runtime, shipped_sources
    from infercast.predictors.metrics import regression_metrics

    _check_selection(selection, k)
    check_output_dir(out)
    with Store(db, readonly=True) as store:
        chosen = resolve_platform(store, platform)
        data = training_data(store, chosen["id"], latency_stat, campaigns)
    if len(data.x) < max(k, 3):
        raise PredictorError(
            f"{db} holds {len(data.x)} measured networks on platform {chosen['id']}; --k {k} needs that many"
        )
    shapes = [
        tuple(int(d) for d in (data.x.loc[i, ["batch", "in_channels", "in_h", "in_w"]])) for i in data.x.index
    ]
    graphs = [capture_model(str(m), shape)[0] for m, shape in zip(data.models, shapes, strict=True)]
    x = device_feature_frame(graphs)
    y = data.y["latency_ms"].to_numpy(dtype=np.float64)
    hosts = same_runtime(chosen["backend"])
    sources = shipped_sources(hosts or None)
    logs = {name: np.log(s.predict(x)["latency_ms"].to_numpy())[:, None] for name, s in sources.items()}
    if selection == "random":
        picked = np.sort(np.random.default_rng(seed).choice(len(x), k, replace=False))
    else:  # k-centre over every shipped device's log prediction: the k cover the range
        matrix = np.hstack(list(logs.values()))
        picked = select_configs([], x, k, "spread", seed, source_log=matrix)
    model = DeviceAdapted(sources).fit(x.iloc[picked], y[picked], {n: v[picked] for n, v in logs.items()})
    rest = np.setdiff1d(np.arange(len(x)), picked)
    scores: dict[str, Any] = {}
    if len(rest):
        predicted = model.predict(x.iloc[rest])
        scores = regression_metrics(
            y[rest],
            predicted["latency_ms"].to_numpy(),
            predicted["latency_ms_low"].to_numpy(),
            predicted["latency_ms_high"].to_numpy(),
        )
        scores["baselines"] = {
            f"{model.source_} unadapted": regression_metrics(y[rest], np.exp(logs[model.source_][rest, 0]))
        }
    metadata = {
        "platform": PlatformInfo.from_row(chosen).to_meta(),
        "training": {
            "db": str(db),
            "latency_stat": latency_stat,
            "k": k,
            "selection": selection,
            "measured": data.models[picked].tolist(),
        },
    }
    model.save(out, metadata)
    return {
        "predictor": str(out),
        "platform": chosen["id"],
        "k": k,
        "selection": selection,
        "measured_configs": data.models[picked].tolist(),
        "sources": f"the shipped hosts measured with {chosen['backend']}"
        if hosts
        else f"every shipped device ({len(sources)})",
        "n_test": len(rest),
        "test_metrics": {"latency": scores} if scores else {},
        "fit": model.describe(),
    }


def _check_selection(selection: str, k: int) -> None:
    if selection not in SELECTIONS:
        raise PredictorError(f"--selection {selection!r}: choose among {', '.join(SELECTIONS)}")
    if k < 1:
        raise PredictorError(f"--k {k}: adapt from at least one measured config")


def suggest(
    sources: list[str | Path],
    space_name: str,
    k: int = 10,
    pool: int = 5000,
    seed: int = 0,
    selection: str = "spread",
) -> list[str]:
    """The ``k`` configs of a design space worth measuring on a new device before ``adapt``:
    spread over the sources' predictions among ``pool`` sampled ones (or drawn at random)."""
    _check_selection(selection, k)
    from infercast.space import get as get_space

    model = Adapted.from_folders(sources, seed=seed)
    chosen = get_space(space_name)
    configs = chosen.sample(pool, seed=seed)
    settings = model.sources[0].info.platform.settings
    x = feature_frame(chosen.features(configs), settings)
    picked = select_configs(model.sources, x, k, selection, seed)
    return configs["model"].iloc[picked].tolist()
