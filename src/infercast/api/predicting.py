"""Predictions of the models users hold: model strings, ``nn.Module`` and ``onnx.ModelProto``
objects, ONNX paths. ``predict`` is what ``infercast.predict(…)`` calls."""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from infercast.api.inputs import as_list, input_shape_of, model_name
from infercast.predictors.data import feature_frame
from infercast.predictors.devices.features import device_feature_frame
from infercast.predictors.errors import PredictorError
from infercast.predictors.ood import either_ood
from infercast.predictors.opwise import OpWise
from infercast.predictors.physical import ROUTE as PHYSICAL
from infercast.predictors.physical import PhysicalLatency
from infercast.predictors.routes import MEAN_ROUTE, geometric_mean

if TYPE_CHECKING:
    from infercast.predictors.adapted import Adapted
    from infercast.predictors.blend import CascadeBlend

# A predictor directory's latency routes: the blend on graph features (the directory itself), the
# op-wise route (opwise/), the blend given the op-wise estimate (COMBINED/), Σ cost × work on
# device features (PHYSICAL_DIR/) and the geometric mean of blend, op-wise and Σ cost × work
# (MEAN_ROUTE), ranked in ROUTES_FILE
COMBINED, COMBINED_DIR = "blend + op-wise", "combined"
PHYSICAL_DIR = "physical"
OPWISE_ESTIMATE = "log_opwise_ms"
ROUTES_FILE = "routes.json"


def rank_routes(
    truth: np.ndarray, predicted: dict[str, np.ndarray], preferred: str = COMBINED, seed: int = 0
) -> dict[str, Any]:
    """The routes ordered by median |error| on held-out configs, with their figures — except that
    ``preferred`` (``train`` passes the route chosen on design spaces held out, ``predict.routes``)
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
    if preferred in errors and order[0] != preferred:
        resamples = np.random.default_rng(seed).integers(0, len(truth), (1000, len(truth)))
        lower = np.median(errors[order[0]][resamples], axis=1) < np.median(
            errors[preferred][resamples], axis=1
        )
        if lower.mean() < 0.9:
            order = [preferred, *(route for route in order if route != preferred)]
    return {
        "order": order,
        "held_out": figures,
        "criterion": f"median |error| of latency on the held-out configs every route predicts; {preferred} "
        "first unless another route is lower in 90 % of paired bootstrap resamples",
    }


def load_predictor(folder: str | Path) -> CascadeBlend | Adapted:
    """A model-level predictor directory (from ``train`` or ``adapt``); an op-wise one is refused
    with what to use instead."""
    from infercast.predictors import load

    model = load(folder)
    if isinstance(model, OpWise):
        raise PredictorError(
            f"{folder}: an op-wise predictor of tables; use `infercast predict-ops` with it, or a "
            "predictor directory from `infercast train`"
        )
    return model


def opwise_of(folder: str | Path) -> OpWise | None:
    """The op-wise predictor ``train`` wrote beside the blend, if it did."""
    sub = Path(folder) / "opwise"
    return OpWise.load(sub) if (sub / "meta.json").is_file() else None


def combined_of(folder: str | Path) -> tuple[CascadeBlend | None, list[str]]:
    """The blend given the op-wise estimate, if ``train`` wrote one, and the routes' ranking."""
    # the blend's module imports scikit-learn: only predictor directories of `train` need it
    from infercast.predictors.blend import CascadeBlend

    sub, ranking = Path(folder) / COMBINED_DIR, Path(folder) / ROUTES_FILE
    combined = CascadeBlend.load(sub) if (sub / "meta.json").is_file() else None
    try:
        order = [str(r) for r in json.loads(ranking.read_text())["order"]]
    except FileNotFoundError:
        order = []
    except (ValueError, KeyError, TypeError) as error:
        raise PredictorError(f"{ranking}: damaged ({error}); retrain with `infercast train`") from error
    return combined, order


def physical_of(folder: str | Path) -> PhysicalLatency | None:
    """The Σ cost × work route ``train`` wrote beside the blend, if it did."""
    sub = Path(folder) / PHYSICAL_DIR
    return PhysicalLatency.load(sub) if (sub / "meta.json").is_file() else None


def device_adapted_of(folder: str | Path) -> Any:
    """The ``DeviceAdapted`` predictor in ``folder`` (from ``infercast adapt`` without sources),
    or None when the folder holds another kind."""
    import json

    from infercast.predictors.devices.recalibrated import KIND, META, DeviceAdapted

    meta = Path(folder) / META
    try:
        kind = json.loads(meta.read_text()).get("kind")
    except (OSError, ValueError, AttributeError):
        return None
    return DeviceAdapted.load(folder) if kind == KIND else None


def _predict_device_adapted(
    adapted: Any,
    folder: str | Path,
    models: Sequence[Any],
    input_shape: str | tuple[int, ...] | None,
    batch_size: int | None,
    timeout_s: float | None,
) -> list[dict[str, Any]]:
    from infercast.models.guarded import capture_model

    graphs = [capture_model(model, input_shape, batch_size, timeout_s)[0] for model in models]
    x = device_feature_frame(graphs)
    predicted = adapted.predict(x)
    reason = f"{folder} adapts a shipped device's latency predictor ({adapted.source_}): latency only"
    results = []
    for i, model in enumerate(models):
        row = predicted.iloc[i]
        results.append(
            {
                "model": model_name(model, graphs[i]),
                "input_shape": list(graphs[i].input_shape),
                "latency_ms": float(row["latency_ms"]),
                "latency_ms_interval": [float(row["latency_ms_low"]), float(row["latency_ms_high"])],
                "peak_memory_mb": None,
                "peak_memory_mb_reason": reason,
                "energy_j": None,
                "energy_j_reason": reason,
                "ood": bool(row["ood"]),
                "ood_reason": row["ood_reason"] or None,
                "interval_note": None,
            }
        )
    return results


def predict_models(
    folder: str | Path,
    models: Sequence[Any],
    input_shape: str | tuple[int, ...] | None = None,
    batch_size: int | None = None,
    timeout_s: float | None = None,
) -> list[dict[str, Any]]:
    """Predict models — model strings, ``nn.Module`` or ``onnx.ModelProto`` objects, ONNX paths —
    with the predictor directory ``folder``: per model latency_ms, energy_j (or None with the
    reason), peak_memory_mb, their intervals, ``ood`` with its reason. Latency comes from the
    route that was most accurate on the held-out configs (``route``; every route the directory
    has in ``routes``, best first; the op-wise one also in ``opwise``). A model running user code
    must load within ``timeout_s``."""
    from infercast.features import featurize
    from infercast.models.guarded import capture_model
    from infercast.predictors.blend import TARGETS

    adapted = device_adapted_of(folder)
    if adapted is not None:
        return _predict_device_adapted(adapted, folder, models, input_shape, batch_size, timeout_s)
    blend = load_predictor(folder)
    opwise = opwise_of(folder)
    combined, order = combined_of(folder)
    platform = blend.info.platform
    settings = platform.settings
    graphs = [capture_model(model, input_shape, batch_size, timeout_s)[0] for model in models]

    x = feature_frame([featurize(g) for g in graphs], settings)
    predicted = blend.predict(x)
    routes = {"blend": predicted} if "latency" in blend.stages_ else {}
    if opwise is not None:
        routes["op-wise"] = opwise.predict_graphs(graphs, platform.backend, settings, platform.fingerprint)
        if combined is not None:
            estimate = np.log(routes["op-wise"]["latency_ms"].to_numpy())
            both = combined.predict(x.assign(**{OPWISE_ESTIMATE: estimate}))
            # the op-wise estimate is an input: its doubts are the combined route's too
            both["ood"], both["ood_reason"] = either_ood(both, routes["op-wise"])
            routes[COMBINED] = both
    physical = physical_of(folder)
    if physical is not None:
        routes[PHYSICAL] = physical.predict(device_feature_frame(graphs)).reset_index(drop=True)
        if "blend" in routes and "op-wise" in routes:
            routes[MEAN_ROUTE] = geometric_mean(
                routes["blend"].reset_index(drop=True),
                routes["op-wise"].reset_index(drop=True),
                routes[PHYSICAL],
            )
    ranked = [r for r in order if r in routes] + [r for r in routes if r not in order]
    results = []
    for i, model in enumerate(models):
        row = predicted.iloc[i]
        result: dict[str, Any] = {
            "model": model_name(model, graphs[i]),
            "input_shape": list(graphs[i].input_shape),
        }
        for target, column in TARGETS.items():
            if target in blend.unavailable_ or target not in blend.stages_:
                result[column] = None
                result[f"{column}_reason"] = blend.unavailable_.get(target, "not trained")
                continue
            result[column] = float(row[column])
            result[f"{column}_interval"] = [float(row[column + "_low"]), float(row[column + "_high"])]
        result["routes"] = [_route(name, routes[name].iloc[i]) for name in ranked]
        reasons = [row["ood_reason"]]
        result["ood"] = bool(row["ood"])
        if result["routes"]:
            best = result["routes"][0]
            result["route"] = best["route"]
            result["latency_ms"] = best["latency_ms"]
            result["latency_ms_interval"] = best["latency_ms_interval"]
            reasons.append(best["ood_reason"])
            result["ood"] = result["ood"] or best["ood"]
        reasons = [r for r in reasons if r]
        result["ood_reason"] = "; ".join(dict.fromkeys(reasons)) or None
        result["interval_note"] = (routes[ranked[0]].iloc[i] if ranked else row).get("interval_note") or None
        if "op-wise" in routes:
            op_row = routes["op-wise"].iloc[i]
            result["opwise"] = {**_route("op-wise", op_row), "kernel_sum_ms": float(op_row["kernel_sum_ms"])}
        results.append(result)
    return results


def _route(name: str, row: pd.Series) -> dict[str, Any]:
    return {
        "route": name,
        "latency_ms": float(row["latency_ms"]),
        "latency_ms_interval": [float(row["latency_ms_low"]), float(row["latency_ms_high"])],
        "ood": bool(row["ood"]),
        "ood_reason": row["ood_reason"] or None,
    }


def predict_devices(
    models: Sequence[Any],
    devices: Sequence[str],
    input_shape: str | tuple[int, ...] | None = None,
    batch_size: int | None = None,
    timeout_s: float | None = None,
) -> list[dict[str, Any]]:
    """Latency of each model on each shipped device (``infercast devices list``): one dict per
    (model, device), models outer, with the 90 % interval, ``ood`` and its reason. A device
    measured at a batch size (NB201's batch-32 GPUs) captures the model at it unless
    ``batch_size`` is given. Configs of the design space a device learned from its features
    (NB201 cells on NB201 devices) are not captured: the space's closed form gives the same
    features without PyTorch."""
    from infercast.predictors.devices import device_info, get_device

    if not devices:
        raise PredictorError("name at least one device (`infercast devices list` shows them)")
    infos = [device_info(name) for name in devices]  # an unknown name fails before any capture
    batches = [batch_size or (info.batch if info.batch > 1 else None) for info in infos]
    spaces = {info.space for info in infos}
    space = spaces.pop() if len(spaces) == 1 and input_shape is None else None
    closed_form = _space_features(models, space, batches) if space else None
    graphs: dict[tuple[int, int | None], Any] = {}
    # A predictor trained on first use (an NB201 device's blend: 3 s) trains while the models are
    # captured: on two cores the first prediction is the longer of the two, not their sum
    with ThreadPoolExecutor(max_workers=1) as pool:
        loading = pool.submit(lambda: [get_device(name) for name in devices])
        if closed_form is None:
            from infercast.models.guarded import capture_model

            for batch in batches:
                for i, model in enumerate(models):
                    if (i, batch) not in graphs:
                        graphs[i, batch] = capture_model(model, input_shape, batch, timeout_s)[0]
        predictors = loading.result()
    columns: list[tuple[list[dict[str, Any]], list[tuple[int, ...]]]] = []
    for predictor, batch in zip(predictors, batches, strict=True):
        if closed_form is None:
            captured = [graphs[i, batch] for i in range(len(models))]
            predicted, shapes = predictor.predict_graphs(captured), [g.input_shape for g in captured]
        else:
            rows, shapes = closed_form[batch]
            predicted = predictor.predict_features(rows)
        columns.append((predicted.to_dict("records"), shapes))
    results = []
    for i, model in enumerate(models):
        for predictor, batch, (predicted_rows, shapes) in zip(predictors, batches, columns, strict=True):
            row = predicted_rows[i]
            results.append(
                {
                    "model": model_name(model, graphs.get((i, batch))),
                    "device": predictor.info.name,
                    "runtime": predictor.info.runtime,
                    "input_shape": list(shapes[i]),
                    "latency_ms": float(row["latency_ms"]),
                    "latency_ms_interval": [float(row["latency_ms_low"]), float(row["latency_ms_high"])],
                    "ood": bool(row["ood"]),
                    "ood_reason": row["ood_reason"] or None,
                    "route": row.get("route") or predictor.info.card.get("route"),
                    "card": predictor.info.card,
                }
            )
            # the routes behind the latency, if several
            for other in ("model_level_ms", "opwise_ms", "physical_ms"):
                if row.get(other) is not None:
                    results[-1][other] = float(row[other])
    return results


def _space_features(
    models: Sequence[Any], space_name: str, batches: Sequence[int | None]
) -> dict[int | None, tuple[pd.DataFrame, list[tuple[int, ...]]]] | None:
    """Per batch, the models' closed-form feature rows and input shapes, when every model is a
    config string of the design space ``space_name`` and every batch one the space holds; else
    None (they are captured, which also says what is wrong with one)."""
    from infercast.space import SpaceError, parse_model_string

    prefix = f"space:{space_name}"
    if not models or not all(isinstance(m, str) and m.strip().partition("?")[0] == prefix for m in models):
        return None
    try:
        parsed = [parse_model_string(m.strip()) for m in models]
        space = parsed[0][0]
        out: dict[int | None, tuple[pd.DataFrame, list[tuple[int, ...]]]] = {}
        for batch in dict.fromkeys(batches):
            configs = [space.validate({**c, "batch": batch}) if batch else c for _, c in parsed]
            out[batch] = space.features(pd.DataFrame(configs)), [space.input_shape(c) for c in configs]
    except SpaceError:
        return None
    return out


def predict(
    models: Any,
    predictor: str | Path | None = None,
    input_shape: tuple[int, ...] | str | None = None,
    example_input: Any = None,
    batch_size: int | None = None,
    timeout_s: float | None = 180.0,
    device: str | Sequence[str] | None = None,
) -> dict[str, Any] | list[dict[str, Any]]:
    """Latency, peak memory and energy (or why not) of one model or a list of them, with 90 %
    intervals and OOD flags, from a predictor directory (``infercast train`` / ``adapt``) — or the
    latency on a shipped device (``device="pixel4/gpu"``; ``infercast devices list``).

    A model is a model string (``pytorchcv:resnet18``, ``space:carb-resnet?depth=18``, a ``.onnx``
    path, ``file.py:factory``), an ``nn.Module`` (give ``input_shape`` or ``example_input``) or an
    ``onnx.ModelProto``. One model (and one device) gives one dict; a list gives a list (with
    several devices: one dict per model and device, models outer)."""
    if (predictor is None) == (device is None):
        raise PredictorError("give either predictor= (a directory) or device= (a shipped device name)")
    items, many = as_list(models)
    shape = input_shape_of(input_shape, example_input)
    if device is not None:
        names = [device] if isinstance(device, str) else list(device)
        results = predict_devices(items, names, shape, batch_size, timeout_s)
        return results if many or len(names) > 1 else results[0]
    assert predictor is not None
    results = predict_models(predictor, items, shape, batch_size, timeout_s)
    return results if many else results[0]
