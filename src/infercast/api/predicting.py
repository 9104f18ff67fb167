"""Predictions of the models users hold: model strings, ``nn.Module`` and ``onnx.ModelProto``
objects, ONNX paths. ``predict`` is what ``infercast.predict(…)`` calls."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from infercast.api.inputs import as_list, input_shape_of, model_name
from infercast.errors import MachineMismatchWarning
from infercast.predictors.base import Predictor
from infercast.predictors.data import TARGETS
from infercast.predictors.errors import PredictorError
from infercast.predictors.routes import OPWISE, label, route_key

if TYPE_CHECKING:
    from infercast.predictors.devices.common import DeviceInfo


def load_predictor(folder: str | Path) -> Predictor:
    """The main predictor of a directory from ``train`` or ``adapt`` (an op-wise one is refused
    with what to use instead)."""
    from infercast.predictors.bundle import PredictorBundle

    return PredictorBundle.load(folder).main


def _checked(predicted: pd.DataFrame, source: object) -> pd.DataFrame:
    """Predictions whose latency is a finite positive number: a predictor file whose numbers
    loaded yet are nonsense (a huge or NaN leaf in a booster's trees) is refused, never printed."""
    latency = pd.to_numeric(predicted["latency_ms"], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(latency) | (latency <= 0)
    if bad.any():
        raise PredictorError(
            f"{source}: predicted a latency of {latency[bad][0]!r} ms, which no network has: "
            "its files are damaged (retrain it, or delete it if it is a cached predictor)"
        )
    return predicted


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
    from infercast.models import check_model_string
    from infercast.models.capturing import capture_model

    for model in models:  # a typo fails before the predictor loads
        check_model_string(model)
    from infercast.predictors.bundle import PredictorBundle

    bundle = PredictorBundle.load(folder)
    graphs = [capture_model(model, input_shape, batch_size, timeout_s)[0] for model in models]
    predicted, routes = bundle.predict_graphs(graphs)
    _checked(predicted, folder)
    if bundle.is_device_adapted:
        reason = f"{folder} adapts a shipped device's latency predictor ({bundle.main.source_}): latency only"
        return [
            _device_adapted_result(model_name(model, graph), graph, row, reason)
            for model, graph, (_, row) in zip(models, graphs, predicted.iterrows(), strict=True)
        ]
    return [
        _result(bundle.main, model_name(model, graphs[i]), graphs[i], predicted.iloc[i], routes, i)
        for i, model in enumerate(models)
    ]


def _device_adapted_result(name: str, graph: Any, row: pd.Series, reason: str) -> dict[str, Any]:
    return {
        "model": name,
        "input_shape": list(graph.input_shape),
        "latency_ms": float(row["latency_ms"]),
        "latency_ms_interval": [float(row["latency_ms_low"]), float(row["latency_ms_high"])],
        **_latency_only(reason),
        "ood": bool(row["ood"]),
        "ood_reason": row["ood_reason"] or None,
        "interval_note": None,
        # one route, the recalibrated source: nothing to rank beside it
        "routes": [],
    }


def _why_latency_only(info: Any) -> str:
    """Why a shipped device has no memory or energy: its card says so where its data hold none."""
    because = info.card.get("latency_only")
    return f"device {info.name} predicts latency only" + (f": {because}" if because else "")


def _beside_latency(row: dict[str, Any], info: Any) -> dict[str, Any]:
    """A shipped device's peak memory where it predicts one (with its interval), and why not
    energy; neither, with the reason, where it predicts latency only."""
    if row.get("peak_memory_mb") is None:
        return _latency_only(_why_latency_only(info))
    return {
        "peak_memory_mb": float(row["peak_memory_mb"]),
        "peak_memory_mb_interval": [float(row["peak_memory_mb_low"]), float(row["peak_memory_mb_high"])],
        "energy_j": None,
        "energy_j_reason": f"device {info.name} predicts latency and peak memory: it has no energy model",
    }


def _latency_only(reason: str) -> dict[str, Any]:
    """The targets a latency-only route lacks, as a full predictor's result names them: code
    written for one result reads the other without a KeyError."""
    return {
        "peak_memory_mb": None,
        "peak_memory_mb_reason": reason,
        "energy_j": None,
        "energy_j_reason": reason,
    }


def _result(
    main: Any, name: str, graph: Any, row: pd.Series, routes: dict[str, pd.DataFrame], i: int
) -> dict[str, Any]:
    """One model's result: every target the main predictor has (or why not), then the latency of
    the first route with every route beside it."""
    result: dict[str, Any] = {"model": name, "input_shape": list(graph.input_shape)}
    for target, column in TARGETS.items():
        if target in main.unavailable_ or target not in main.targets_:
            result[column] = None
            result[f"{column}_reason"] = main.unavailable_.get(target, "not trained")
            continue
        result[column] = float(row[column])
        result[f"{column}_interval"] = [float(row[column + "_low"]), float(row[column + "_high"])]
    result["routes"] = [_route(route, predicted.iloc[i]) for route, predicted in routes.items()]
    reasons = [row["ood_reason"]]
    result["ood"] = bool(row["ood"])
    if result["routes"]:
        best = result["routes"][0]
        result["route"], result["route_label"] = best["route"], best["route_label"]
        result["latency_ms"] = best["latency_ms"]
        result["latency_ms_interval"] = best["latency_ms_interval"]
        reasons.append(best["ood_reason"])
        result["ood"] = result["ood"] or best["ood"]
    reasons = [r for r in reasons if r]
    result["ood_reason"] = "; ".join(dict.fromkeys(reasons)) or None
    first = next(iter(routes.values())).iloc[i] if routes else row
    result["interval_note"] = first.get("interval_note") or None
    if OPWISE in routes:
        op_row = routes[OPWISE].iloc[i]
        result["opwise"] = {**_route(OPWISE, op_row), "kernel_sum_ms": float(op_row["kernel_sum_ms"])}
    return result


def _route(route: str, row: pd.Series) -> dict[str, Any]:
    return {
        "route": route,
        "route_label": label(route),
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
    (model, device), models outer, with the 90 % interval, ``ood`` and its reason. A model is
    captured at the batch ``_device_batch`` gives, unless ``batch_size`` is given. Configs of the
    design space a device learned from its features (NB201 cells on NB201 devices) are not
    captured: the space's closed form gives the same features without PyTorch."""
    from infercast.models import check_model_string
    from infercast.models.capturing import capture_model

    for model in models:  # a typo fails before the device predictors load
        check_model_string(model)
    from infercast.predictors.devices import device_info, get_device

    if not devices:
        raise PredictorError("name at least one device (`infercast devices list` shows them)")
    infos = [device_info(name) for name in devices]  # an unknown name fails before any capture
    _calibrated_first(devices)
    elsewhere = {info.name: machine_warning(info) for info in infos}
    for warning in filter(None, elsewhere.values()):
        warnings.warn(warning, MachineMismatchWarning, stacklevel=2)
    batches = [batch_size or _device_batch(info, input_shape) for info in infos]
    spaces = {info.space for info in infos}
    space = spaces.pop() if len(spaces) == 1 and input_shape is None else None
    closed_form = _space_features(models, space, batches) if space else None
    graphs: dict[tuple[int, int | None], Any] = {}
    # A predictor trained on first use (an NB201 device's blend) trains while the models are
    # captured: the first prediction takes the longer of the two, not their sum
    with ThreadPoolExecutor(max_workers=1) as pool:
        loading = pool.submit(lambda: [get_device(name) for name in devices])
        if closed_form is None:
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
        _checked(predicted, f"device {predictor.info.name}")
        columns.append((predicted.to_dict("records"), shapes))
    results = []
    for i, model in enumerate(models):
        for predictor, batch, (predicted_rows, shapes) in zip(predictors, batches, columns, strict=True):
            row = predicted_rows[i]
            named = row.get("route") or predictor.info.card.get("route")
            route = route_key(named) if named else None
            results.append(
                {
                    "model": model_name(model, graphs.get((i, batch))),
                    "device": predictor.info.name,
                    "runtime": predictor.info.runtime,
                    "input_shape": list(shapes[i]),
                    "latency_ms": float(row["latency_ms"]),
                    "latency_ms_interval": [float(row["latency_ms_low"]), float(row["latency_ms_high"])],
                    **_beside_latency(row, predictor.info),
                    "ood": bool(row["ood"]),
                    "ood_reason": row["ood_reason"] or None,
                    "route": route,
                    "route_label": label(route) if route else None,
                    "card": predictor.info.card,
                    "machine_warning": elsewhere[predictor.info.name],
                }
            )
            # the routes behind the latency, if several; a calibrated host's factor
            for other in ("model_level_ms", "opwise_ms", "physical_ms", "calibration_factor"):
                if row.get(other) is not None:
                    results[-1][other] = float(row[other])
    return results


def _device_batch(info: DeviceInfo, input_shape: Any) -> int | None:
    """The batch ``info`` captures a model at (None: the input's): the one it was measured at
    (NB201's batch-32 GPUs); for a device that predicts a step at any batch (timm's settings), the
    table's usual batch only where no input shape is given."""
    if info.batch <= 1 or (info.any_batch and input_shape is not None):
        return None
    return info.batch


def _calibrated_first(devices: Sequence[str]) -> None:
    """``local`` without a calibration of this machine: calibrate it now, saying so."""
    from infercast.predictors.devices import local

    if local.NAME in devices and local.load_calibration() is None:
        from infercast.api.calibrating import DEFAULT_BUDGET_S, calibrate

        print(
            f"infercast: this machine has no calibration yet; calibrating it first ({DEFAULT_BUDGET_S:.0f} s "
            "of measuring kernel networks and design-space configs, kept for later predictions; "
            "`infercast calibrate` runs it alone)",
            file=sys.stderr,
        )
        calibrate(DEFAULT_BUDGET_S)


def machine_warning(info: DeviceInfo) -> str | None:
    """One line when ``info`` is a host measured on a machine that differs from this one in what
    decides kernel speed (``machine.differences_here``): its figures may be off by a factor here."""
    if not info.fingerprint:
        return None
    from infercast.machine import UNRECORDED, differences_here

    found = differences_here(info.fingerprint)
    if not found:
        return None
    from infercast.predictors.devices import hosts

    # a shipped host measured on a machine like this one predicts for it as it is
    alike = [
        name for name in hosts.names() if not differences_here(hosts.hosts()[name].get("fingerprint", {}))
    ]
    instead = f"`--device {alike[0]}` (measured on a machine like this one) or " if alike else ""
    known = [difference for difference in found if UNRECORDED not in difference]
    where = "another machine" if known else "a machine its fingerprint cannot tell from this one"
    return (
        f"{info.name} was measured on {where} ({'; '.join(found)}): its latencies may be off "
        f"by a factor here: {instead}`infercast calibrate`, then `--device local`, predicts for this machine"
    )


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


def predict_ops(folder: str | Path, ops_path: str | Path) -> list[dict[str, Any]]:
    """Predict every model of an op table (latencies, if present, are ignored)."""
    from infercast.predictors.optable import check_op_table
    from infercast.predictors.opwise import OpWise
    from infercast.tables import read_table

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
