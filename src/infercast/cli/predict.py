"""``infercast predict | predict-ops``: latency, energy and peak memory of models with a predictor
directory or on shipped devices; end-to-end latency of an op table."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import typer

from infercast.cli import MODEL_HELP, Table, Text, app, console, err_console, print_json, run_guarded


@app.command()
def predict(
    models: list[str] = typer.Argument(..., help=MODEL_HELP + " or space:NAME?k=v"),
    predictor: Path | None = typer.Option(
        None, "--predictor", help="predictor directory (from infercast train)"
    ),
    device: list[str] | None = typer.Option(
        None,
        "--device",
        help="a shipped device instead of --predictor (`infercast devices list`); "
        "repeat it for a model × device table",
    ),
    input_shape: str | None = typer.Option(None, "--input-shape", help="e.g. 1x3x224x224"),
    batch_size: int | None = typer.Option(None, "--batch-size"),
    timeout_s: float = typer.Option(
        180.0, "--timeout-s", help="a model running your code (file.py:factory) must load within this"
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Predict latency, energy and peak memory of MODELS on the predictor's platform, or their
    latency on shipped devices (--device pixel4/gpu)."""
    from infercast.errors import MachineMismatchWarning
    from infercast.models import check_model_string
    from infercast.predictors.errors import PredictorError

    def body() -> list[dict[str, Any]]:
        if (predictor is None) == (not device):
            raise PredictorError(
                "give --predictor DIR (from infercast train) or --device NAME (a shipped device)"
            )
        for model in models:  # a typo fails before the predicting code (and pandas) loads
            check_model_string(model)
        from infercast.api import predict_devices, predict_models

        if device:
            with err_console.status("predicting", spinner="dots"), warnings.catch_warnings():
                # said once per device below, in one line, instead of Python's warning format
                warnings.simplefilter("ignore", MachineMismatchWarning)
                return predict_devices(models, device, input_shape, batch_size, timeout_s)
        return predict_models(predictor, models, input_shape, batch_size, timeout_s)

    results = run_guarded(body)
    for warning in dict.fromkeys(r["machine_warning"] for r in results if r.get("machine_warning")):
        err_console.print(
            Text.assemble(("warning:", "bold yellow"), " ", warning), highlight=False, soft_wrap=True
        )
    if device:
        if as_json:
            print_json(results)
        else:
            _device_table(results, device)
        return
    if as_json:
        print_json(results)
    else:
        _predictor_table(results, predictor)


def _predictor_table(results: list[dict[str, Any]], predictor: Path | None) -> None:
    """What ``predict --predictor`` prints: one row per model, the notes under it."""
    from infercast.predictors.routes import LABELS, MEAN, PHYSICAL

    # long route labels, shortened in the table (and spelled out under it): its cells stay one line
    short_routes = {MEAN: "mean of 3", PHYSICAL: "Σ cost × work"}

    def short(route: str) -> str:
        return short_routes.get(route, LABELS.get(route, route))

    table = Table(title=f"predicted by {predictor}")
    columns = ("model", "latency ms (90 % interval)", "route", "other routes ms", "peak memory MB")
    for column in (*columns, "energy J", "ood"):
        table.add_column(column, justify="left" if column in ("model", "route", "ood") else "right")
    for r in results:
        latency = _with_interval(r, "latency_ms")
        memory = _with_interval(r, "peak_memory_mb")
        energy = _with_interval(r, "energy_j") if r["energy_j"] is not None else "n/a"
        others = ", ".join(f"{short(o['route'])} {o['latency_ms']:.3g}" for o in r["routes"][1:]) or "–"
        # the first (worst) reason only; --json has them all
        ood = Text.assemble(("yes", "yellow"), f": {r['ood_reason'].split(';')[0]}") if r["ood"] else "no"
        table.add_row(r["model"], latency, short(r.get("route", "–")), others, memory, energy, ood)
    console.print(table)
    shown = {o["route"] for r in results for o in r["routes"]}
    for route in sorted(shown & set(short_routes)):
        console.print(f"{short_routes[route]}: {LABELS[route]}", highlight=False)
    for r in results:
        if r.get("interval_note"):
            console.print(f"interval of {r['model']}: {r['interval_note']}")
    reasons = {r.get("energy_j_reason") for r in results if r.get("energy_j") is None}
    for reason in reasons - {None}:
        console.print(f"energy: {reason}")


def _device_table(results: list[dict[str, Any]], devices: list[str]) -> None:
    """Models down, devices across: latency ms (90 % interval); ``*`` marks an ood prediction."""
    table = Table(title="predicted latency, ms (90 % interval); * outside the training data")
    table.add_column("model")
    for name in devices:
        table.add_column(name, justify="right")
    by_model: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_model.setdefault(r["model"], []).append(r)
    for model, rows in by_model.items():
        table.add_row(
            model,
            *(
                Text.assemble(_with_interval(r, "latency_ms"), ("*" if r["ood"] else "", "yellow"))
                for r in rows
            ),
        )
    console.print(table)
    _memory_table(results)
    for r in results:
        if r["ood"]:
            console.print(f"* {r['model']} on {r['device']}: {r['ood_reason']}", highlight=False)
    for name in devices:
        card = next(r["card"] for r in results if r["device"] == name)
        if card:
            console.print(
                f"{name} ({card['route']}): {card['within_10pct']:.0%} within ±10 %, median error "
                f"{card['median_abs_error_pct']:.1f} % (scored on: {card['protocol']})",
                highlight=False,
            )


def _memory_table(results: list[dict[str, Any]]) -> None:
    """Peak memory, for the devices that predict it (models down, devices across)."""
    devices = list(dict.fromkeys(r["device"] for r in results if r.get("peak_memory_mb") is not None))
    if not devices:
        return
    table = Table(title="predicted peak memory, MB (90 % interval)")
    table.add_column("model")
    for name in devices:
        table.add_column(name, justify="right")
    by_model: dict[str, dict[str, dict[str, Any]]] = {}
    for r in results:
        by_model.setdefault(r["model"], {})[r["device"]] = r
    for model, rows in by_model.items():
        table.add_row(model, *(_with_interval(rows[name], "peak_memory_mb") for name in devices))
    console.print(table)


def _with_interval(result: dict[str, Any], key: str) -> str:
    if result.get(key) is None:
        return "n/a"
    low, high = result[f"{key}_interval"]
    return f"{result[key]:.3g} ({low:.3g}–{high:.3g})"


@app.command("predict-ops")
def predict_ops(
    predictor: Path = typer.Option(..., "--predictor", help="op-wise predictor directory"),
    ops: Path = typer.Option(..., "--ops", help="op table of the models to predict"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Predict end-to-end latency of every model in an op table."""
    from infercast.api import predict_ops as run_predict_ops

    results = run_guarded(lambda: run_predict_ops(predictor, ops))
    if as_json:
        print_json(results)
        return
    table = Table(title=f"predicted by {predictor}")
    for column in ("model", "latency ms", "90 % interval", "Σ kernels ms", "ood"):
        table.add_column(column, justify="left" if column in ("model", "ood") else "right")
    for r in results:
        table.add_row(
            r["model"],
            f"{r['latency_ms']:.4g}",
            f"{r['latency_ms_low']:.4g}–{r['latency_ms_high']:.4g}",
            f"{r['kernel_sum_ms']:.4g}",
            Text.assemble(("yes", "yellow"), f": {r['ood_reason']}") if r["ood"] else "no",
        )
    console.print(table)
