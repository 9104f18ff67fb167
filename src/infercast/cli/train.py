"""``infercast train | evaluate | train-ops``: predictors from a store or from op tables, and their
scores on what they never trained on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infercast.cli import Table, Text, app, console, err_console, print_json, run_guarded

_SHOWN = ("r2", "mape", "within_10pct", "spearman", "coverage")


def metric_cell(value: Any, name: str) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    if name in ("within_10pct", "within_5pct", "coverage"):
        return f"{value:.1%}"
    if name in ("mape", "median_ape", "rmspe"):
        return f"{value:.2f} %"
    return f"{value:.4f}"


def metrics_table(title: str, scores: dict[str, dict[str, Any]]) -> Table:
    table = Table(title=title)
    table.add_column("target / model")
    table.add_column("n", justify="right")
    for name in _SHOWN:
        table.add_column(name.replace("within_10pct", "±10 %"), justify="right")
    for target, metrics in scores.items():
        table.add_row(target, str(metrics["n"]), *(metric_cell(metrics.get(m), m) for m in _SHOWN))
        for baseline, values in metrics.get("baselines", {}).items():
            table.add_row(
                f"  {baseline} baseline", str(values["n"]), *(metric_cell(values.get(m), m) for m in _SHOWN)
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
        with err_console.status("training", spinner="dots") as status:
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
        metrics_table(
            f"held-out configs ({summary['n_test']}; trained on {summary['n_train']})",
            summary["test_metrics"],
        )
    )
    for target, reason in summary["unavailable"].items():
        console.print(f"{target}: unavailable — {reason}")
    if summary.get("opwise_test_metrics"):
        console.print(
            metrics_table("op-wise latency, held-out configs", {"latency": summary["opwise_test_metrics"]})
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
        console.print(f"predict shows first {routes.get('choice', routes['order'][0])}")
        if routes.get("warning"):
            err_console.print(f"warning: {routes['warning']}", highlight=False)
    elif routes:
        console.print(routes["note"])


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
    console.print(metrics_table(title, result["targets"]))
    if not result["same_platform"]:
        console.print(
            Text.assemble(("note", "yellow"), f": platform {result['platform']} is not the predictor's own")
        )
    first = result["route"]
    if first["route"] is None:
        console.print(f"the route predict shows: not scored — {first['reason']}")
    else:
        title = f"latency as predict gives it: {first['route_label']}"
        console.print(metrics_table(title, {"latency": first["latency"]}))
    if "opwise" in result:
        console.print(metrics_table("op-wise latency", {"latency": result["opwise"]}))
    if "combined" in result:
        console.print(metrics_table("blend + op-wise latency", {"latency": result["combined"]}))
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
        with err_console.status("training the op-wise predictor", spinner="dots"):
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
            metrics_table(f"{summary['n_test_models']} held-out models", {"latency": summary["test_metrics"]})
        )


def _overhead_form(training: dict[str, Any]) -> str:
    """``stack (affine 0.62, floor 0.38)``, or the one form kept."""
    weights = training.get("overhead_weights", {})
    if training["overhead_form"] != "stack" or not weights:
        return str(training["overhead_form"])
    parts = ", ".join(f"{form} {w:.2f}" for form, w in sorted(weights.items(), key=lambda fw: -fw[1]))
    return f"stack ({parts})"
