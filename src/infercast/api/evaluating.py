"""Scoring a predictor directory on a store's measurements it never trained on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from infercast.datasets import resolve_platform, store_tables, training_data
from infercast.errors import InfercastError
from infercast.predictors.bundle import PredictorBundle
from infercast.predictors.errors import PredictorError
from infercast.predictors.metrics import regression_metrics
from infercast.predictors.routes import COMBINED, OPWISE, OPWISE_ESTIMATE, label
from infercast.store import Store


def evaluate(
    folder: str | Path, db: str | Path, platform: str | None = None, campaigns: list[str] | None = None
) -> dict[str, Any]:
    """Score a predictor on a store's measurements of its platform that it never trained on:
    per target R², MAE, MAPE, RMSPE, ±5 %/±10 %, Spearman, Kendall, interval coverage, next to the
    baselines (and the op-wise predictor where there is one and the store has op profiles); and,
    under ``route``, the latency of the route ``predict`` shows first, scored as ``predict`` makes
    it: from each held-out config's captured graph."""
    bundle = PredictorBundle.load(folder)
    if bundle.is_device_adapted:
        raise PredictorError(
            f"{folder}: a shipped device recalibrated on networks you measured; `infercast adapt` scored "
            "it on the other measured networks (its meta.json), `evaluate` scores predictors of a store"
        )
    blend = bundle.main
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
    out["route"] = _first_route(bundle, data.models[keep], data.y["latency_ms"].to_numpy()[keep])
    opwise = bundle.routes.get(OPWISE)
    if opwise is not None and not ops.empty:
        unseen = set(data.config_ids[keep]) & set(ops["model"])
        if unseen:
            table = ops[ops["model"].isin(unseen)].drop(columns="latency_ms")
            out["opwise"] = opwise.evaluate(table, e2e)
            combined = bundle.routes.get(COMBINED)
            if combined is not None:
                rows = keep & np.isin(data.config_ids, list(unseen))
                estimate = opwise.predict(table)["latency_ms"].reindex(data.config_ids[rows])
                x = data.x[rows].assign(**{OPWISE_ESTIMATE: np.log(estimate.to_numpy(dtype=np.float64))})
                out["combined"] = combined.evaluate(x, data.y[rows])["latency"]
    return out


def _first_route(bundle: PredictorBundle, models: np.ndarray, truth: np.ndarray) -> dict[str, Any]:
    """The route ``predict`` shows first, with its latency metrics on ``models`` (or why not)."""
    from infercast.models.capturing import capture_model

    measured = np.isfinite(truth)
    try:
        graphs = [capture_model(str(model))[0] for model in models[measured]]
    except InfercastError as error:  # a model file gone since it was measured
        return {"route": None, "reason": f"a held-out config could not be captured again ({error})"}
    _, routes = bundle.predict_graphs(graphs)
    if not routes:
        return {"route": None, "reason": "the predictor has no latency route"}
    route, predicted = next(iter(routes.items()))
    metrics = regression_metrics(
        truth[measured],
        predicted["latency_ms"].to_numpy(dtype=np.float64),
        predicted["latency_ms_low"].to_numpy(dtype=np.float64),
        predicted["latency_ms_high"].to_numpy(dtype=np.float64),
    )
    return {"route": route, "route_label": label(route), "latency": metrics}
