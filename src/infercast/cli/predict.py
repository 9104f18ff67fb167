"""``infercast train | predict | evaluate | adapt | train-ops | predict-ops``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infercast.cli import MODEL_HELP, Table, app, console, err_console, print_json, run_guarded

_SHOWN = ("r2", "mape", "within_10pct", "spearman", "coverage")


def _metric(value: Any, name: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    if name in ("within_10pct", "within_5pct", "coverage"):
        return f"{value:.1%}"
    if name in ("mape", "median_ape", "rmspe"):
        return f"{value:.2f} %"
    return f"{value:.4f}"


def _metrics_table(title: str, scores: dict[str, dict[str, Any]]) -> Table:
    table = Table(title=title)
    table.add_column("target / model")
    table.add_column("n", justify="right")
    for name in _SHOWN:
        table.add_column(name.replace("within_10pct", "±10 %"), justify="right")
    for target, metrics in scores.items():
        table.add_row(target, str(metrics["n"]), *(_metric(metrics.get(m), m) for m in _SHOWN))
        for baseline, values in metrics.get("baselines", {}).items():
            table.add_row(
                f"  {baseline} baseline", str(values["n"]), *(_metric(values.get(m), m) for m in _SHOWN)
            )
    return table


@app.command()
def train(
    db: Path = typer.Option(Path("runs.db"), "--db", help="the store to learn from"),
    out: Path = typer.Option(..., "--out", help="predictor directory to write"),
    platform: str | None = typer.Option(
        None, "--platform", help="platform id (or prefix); optional with one"
    ),
    latency_stat: str = typer.Option(
        "steady_ms",
        "--latency-stat",
        help="steady_ms (low_ms at the host's usual speed, by the campaigns' sentinel passes), "
        "low_ms, median_ms, mean_ms, p10_ms or p90_ms",
    ),
    test_size: float = typer.Option(0.2, "--test-size", help="share of configs held out to score"),
    seed: int = typer.Option(0, "--seed"),
    campaign: list[str] | None = typer.Option(None, "--campaign", help="train on these campaigns only"),
    opwise: bool = typer.Option(True, "--opwise/--no-opwise", help="also train the op-wise predictor"),
    n_estimators: int = typer.Option(600, "--n-estimators", help="boosting rounds of XGBoost / LightGBM"),
    forest_estimators: int = typer.Option(300, "--forest-estimators", help="extremely-randomized trees"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
) -> None:
    """Train the CARB cascade blend (and the op-wise predictor) on a store's measurements."""
    from infercast.api import train as run_train
    from infercast.predictors import CascadeBlend

    def body() -> dict[str, Any]:
        blend = CascadeBlend(n_estimators=n_estimators, forest_estimators=forest_estimators, seed=seed)
        with console.status("training", spinner="dots") as status:
            return run_train(
                db,
                out,
                platform,
                latency_stat,
                test_size,
                seed,
                opwise,
                blend,
                campaign or None,
                progress=None if as_json else lambda message: status.update(message),
            )

    summary = run_guarded(body)
    if as_json:
        print_json(summary)
        return
    console.print(f"predictor written to {summary['predictor']} (platform {summary['platform']})")
    console.print(
        _metrics_table(
            f"held-out configs ({summary['n_test']}; trained on {summary['n_train']})",
            summary["test_metrics"],
        )
    )
    for target, reason in summary["unavailable"].items():
        console.print(f"{target}: unavailable — {reason}")
    if summary.get("opwise_test_metrics"):
        console.print(
            _metrics_table("op-wise latency, held-out configs", {"latency": summary["opwise_test_metrics"]})
        )
    elif "opwise" in summary:
        console.print(f"op-wise: {summary['opwise']}")
    for route in ("combined", "physical"):
        if route in summary:
            console.print(summary[route])
    routes = summary.get("routes")
    if routes and routes["order"]:
        held = routes["held_out"]
        ranked = ", ".join(f"{r} {held[r]['median_abs_error_pct']:.1f} %" for r in routes["order"])
        console.print(f"latency routes by median |error| on the held-out configs: {ranked}")
        console.print(f"predict shows {routes['order'][0]} first")
    elif routes:
        console.print(routes["note"])


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
    from infercast.api import predict_devices, predict_models
    from infercast.predictors.errors import PredictorError

    def body() -> list[dict[str, Any]]:
        if (predictor is None) == (not device):
            raise PredictorError(
                "give --predictor DIR (from infercast train) or --device NAME (a shipped device)"
            )
        if device:
            with console.status("predicting", spinner="dots"):
                return predict_devices(models, device, input_shape, batch_size, timeout_s)
        return predict_models(predictor, models, input_shape, batch_size, timeout_s)

    results = run_guarded(body)
    if device:
        if as_json:
            print_json(results)
        else:
            _device_table(results, device)
        return
    if as_json:
        print_json(results)
        return
    from infercast.predictors.physical import ROUTE as PHYSICAL
    from infercast.predictors.routes import MEAN_ROUTE

    # long route names, shortened in the table (and spelled out under it): its cells stay one line
    short_routes = {MEAN_ROUTE: "mean of 3", PHYSICAL: "Σ cost × work"}

    def short(route: str) -> str:
        return short_routes.get(route, route)

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
        ood = f"[yellow]yes[/]: {r['ood_reason'].split(';')[0]}" if r["ood"] else "no"
        table.add_row(r["model"], latency, short(r.get("route", "–")), others, memory, energy, ood)
    console.print(table)
    shown = {o["route"] for r in results for o in r["routes"]}
    for route in sorted(shown & set(short_routes)):
        if not route.startswith(short_routes[route]):
            console.print(f"{short_routes[route]}: {route}", highlight=False)
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
            model, *(_with_interval(r, "latency_ms") + ("[yellow]*[/]" if r["ood"] else "") for r in rows)
        )
    console.print(table)
    for r in results:
        if r["ood"]:
            console.print(f"* {r['model']} on {r['device']}: {r['ood_reason']}", highlight=False)
    for name in devices:
        card = next(r["card"] for r in results if r["device"] == name)
        if card:
            console.print(
                f"{name} ({card['route']}): {card['within_10pct']:.0%} within ±10 %, median error "
                f"{card['median_abs_error_pct']:.1f} % on {card['protocol']}",
                highlight=False,
            )


def _with_interval(result: dict[str, Any], key: str) -> str:
    if result.get(key) is None:
        return "n/a"
    low, high = result[f"{key}_interval"]
    return f"{result[key]:.3g} ({low:.3g}–{high:.3g})"


@app.command()
def evaluate(
    predictor: Path = typer.Option(..., "--predictor", help="predictor directory"),
    db: Path = typer.Option(Path("runs.db"), "--db", help="store with measurements to score against"),
    platform: str | None = typer.Option(None, "--platform", help="score on another platform of the store"),
    campaign: list[str] | None = typer.Option(None, "--campaign", help="score these campaigns only"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Score a predictor on measured configs it never trained on, next to the FLOPs baselines."""
    from infercast.api import evaluate as run_evaluate

    result = run_guarded(lambda: run_evaluate(predictor, db, platform, campaign or None))
    if as_json:
        print_json(result)
        return
    title = (
        f"{result['n_evaluated']} configs of {result['db']} "
        f"({result['n_excluded_as_training']} left out: used in training)"
    )
    console.print(_metrics_table(title, result["targets"]))
    if not result["same_platform"]:
        console.print(f"[yellow]note[/]: platform {result['platform']} is not the predictor's own")
    if "opwise" in result:
        console.print(_metrics_table("op-wise latency", {"latency": result["opwise"]}))
    if "combined" in result:
        console.print(_metrics_table("blend + op-wise latency", {"latency": result["combined"]}))
    for target, reason in result["unavailable"].items():
        console.print(f"{target}: unavailable — {reason}")


@app.command("train-ops")
def train_ops(
    ops: Path = typer.Option(..., "--ops", help="op table (.parquet / .csv, columns in docs/formats.md)"),
    e2e: Path = typer.Option(..., "--e2e", help="end-to-end table: model, latency_ms"),
    out: Path = typer.Option(..., "--out", help="predictor directory to write"),
    test_size: float = typer.Option(0.2, "--test-size", help="share of models held out to score"),
    seed: int = typer.Option(0, "--seed"),
    overhead: str = typer.Option(
        "stack",
        "--overhead",
        help="stack (the forms weighted by cross-validation), auto (one form chosen by it), ratio, "
        "factor, affine, per_kernel, per_kernel_type, floor",
    ),
    kernel_learner: str = typer.Option(
        "auto", "--kernel-learner", help="auto (per kernel type), xgboost, lightgbm or extratrees"
    ),
    n_estimators: int = typer.Option(400, "--n-estimators", help="boosting rounds per kernel regressor"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
) -> None:
    """Train the op-wise latency predictor from op measurements of any runtime."""
    from infercast.api import train_ops as run_train_ops
    from infercast.predictors import OpWise

    def body() -> dict[str, Any]:
        model = OpWise(n_estimators=n_estimators, seed=seed, overhead=overhead, kernel_learner=kernel_learner)
        with console.status("training the op-wise predictor", spinner="dots"):
            return run_train_ops(ops, e2e, out, test_size, seed, opwise=model)

    summary = run_guarded(body)
    if as_json:
        print_json(summary)
        return
    training = summary["training"]
    console.print(
        f"op-wise predictor written to {summary['predictor']}: {summary['n_train_models']} models, "
        f"{training['n_kernels']} kernels; kernel types {training['kernel_types']}; overhead form "
        f"{_overhead_form(training)}; kernel learners {training['kernel_learners']}"
    )
    if summary["test_metrics"]:
        console.print(
            _metrics_table(
                f"{summary['n_test_models']} held-out models", {"latency": summary["test_metrics"]}
            )
        )


def _overhead_form(training: dict[str, Any]) -> str:
    """``stack (affine 0.62, floor 0.38)``, or the one form kept."""
    weights = training.get("overhead_weights", {})
    if training["overhead_form"] != "stack" or not weights:
        return str(training["overhead_form"])
    parts = ", ".join(f"{form} {w:.2f}" for form, w in sorted(weights.items(), key=lambda fw: -fw[1]))
    return f"stack ({parts})"


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
            f"[yellow]yes[/]: {r['ood_reason']}" if r["ood"] else "no",
        )
    console.print(table)


@app.command()
def adapt(
    predictor: list[Path] | None = typer.Option(
        None,
        "--predictor",
        help="source predictor directory (repeat for several); without it, the nearest shipped device",
    ),
    db: Path | None = typer.Option(None, "--db", help="store with the target platform's measurements"),
    out: Path | None = typer.Option(None, "--out", help="adapted predictor directory to write"),
    k: int = typer.Option(10, "--k", help="target measurements to adapt from"),
    platform: str | None = typer.Option(
        None, "--platform", help="target platform id (default: the store's only non-source one)"
    ),
    selection: str = typer.Option("spread", "--selection", help="spread (k-centre) or random"),
    campaign: list[str] | None = typer.Option(None, "--campaign", help="use these campaigns only"),
    plan: str | None = typer.Option(
        None, "--plan", help="instead: list the k configs of this design space worth measuring"
    ),
    seed: int = typer.Option(0, "--seed"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Adapt source predictors — or, without --predictor, the nearest shipped device — to a new
    platform from k of its measured configs (few-shot; `infercast db import` brings measurements
    made with other tools).

    First `--plan SPACE` lists k configs to measure on the new device (spread over the sources'
    predictions); measure them into a store; then `--db STORE --out DIR` fits and scores."""
    from infercast.api import adapt as run_adapt
    from infercast.api import adapt_device, suggest

    if plan is not None and not predictor:
        err_console.print("[bold red]error:[/] --plan needs --predictor (source predictors to spread over)")
        raise typer.Exit(2)
    if plan is not None:
        models = run_guarded(
            lambda: suggest([str(p) for p in predictor], plan, k, seed=seed, selection=selection)
        )
        if as_json:
            print_json(models)
            return
        console.print(f"measure these {len(models)} configs on the new device (`infercast measure … --db`):")
        for model in models:
            console.print(model, soft_wrap=True, highlight=False)
        return
    if db is None or out is None:
        err_console.print("[bold red]error:[/] --db and --out are needed (or --plan SPACE to choose configs)")
        raise typer.Exit(2)

    def body() -> dict[str, Any]:
        with console.status(f"adapting from {k} target measurements", spinner="dots"):
            if not predictor:
                return adapt_device(db, out, k, platform, selection, seed, campaign or None)
            return run_adapt(
                [str(p) for p in predictor], db, out, k, platform, selection, seed, campaign or None
            )

    summary = run_guarded(body)
    if as_json:
        print_json(summary)
        return
    if not predictor:
        fit = summary["fit"]
        runners_up = f" (then {', '.join(fit['nearest'][1:3])})" if len(fit["nearest"]) > 1 else ""
        console.print(
            f"adapted from {fit['source']}, the nearest of {summary['sources']}{runners_up}: "
            f"log latency = {fit['intercept']:.3f} + {fit['weight']:.3f} · log {fit['source']}; "
            f"written to {summary['predictor']}",
            highlight=False,
        )
        if summary["test_metrics"]:
            metrics = summary["test_metrics"]["latency"]
            console.print(
                _metrics_table(f"the other {summary['n_test']} measured networks", {"latency": metrics})
            )
        return
    console.print(
        f"adapted predictor written to {summary['predictor']} (platform {summary['platform']}, "
        f"k={summary['k']}, {summary['selection']} selection)"
    )
    if summary["test_metrics"]:
        scores = {}
        for target, metrics in summary["test_metrics"].items():
            scores[target] = {
                **metrics,
                "baselines": {
                    f"source {i} unadapted": m for i, m in enumerate(metrics.get("sources_unadapted", []))
                },
            }
        console.print(_metrics_table(f"the other {summary['n_test']} measured configs", scores))
    for target, fit in summary["fit"].items():
        console.print(f"{target}: {fit['residual']}; weights {fit['weights']}")
