"""``infercast adapt``: a predictor for a new platform from k of its measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infercast.cli import app, console, err_console, print_error, print_json, run_guarded
from infercast.cli.train import metrics_table


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
        print_error("--plan needs --predictor (source predictors to spread over)")
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
        print_error("--db and --out are needed (or --plan SPACE to choose configs)")
        raise typer.Exit(2)

    def body() -> dict[str, Any]:
        with err_console.status(f"adapting from {k} target measurements", spinner="dots"):
            if not predictor:
                return adapt_device(db, out, k, platform, selection, seed, campaign or None)
            return run_adapt(
                [str(p) for p in predictor], db, out, k, platform, selection, seed, campaign or None
            )

    summary = run_guarded(body)
    if as_json:
        print_json(summary)
    elif not predictor:
        _print_device_adapted(summary)
    else:
        _print_adapted(summary)


def _print_device_adapted(summary: dict[str, Any]) -> None:
    fit = summary["fit"]
    runners_up = f" (then {', '.join(fit['nearest'][1:3])})" if len(fit["nearest"]) > 1 else ""
    if fit.get("kind_factors"):
        factors = fit["kind_factors"]
        low, high = min(factors, key=factors.__getitem__), max(factors, key=factors.__getitem__)
        spread = f"from {low} × {factors[low]:.3g} to {high} × {factors[high]:.3g}"
        how = (
            f"its time per kind of work recalibrated ({len(factors)} kinds, {spread}, each pulled "
            "towards one common factor as far as leave-one-out prefers)"
        )
    else:
        how = f"log latency = {fit['intercept']:.3f} + {fit['weight']:.3f} · log {fit['source']}"
    console.print(
        f"adapted from {fit['source']}, the nearest of {summary['sources']}{runners_up}: {how}; "
        f"written to {summary['predictor']}",
        highlight=False,
    )
    if summary["test_metrics"]:
        metrics = summary["test_metrics"]["latency"]
        console.print(metrics_table(f"the other {summary['n_test']} measured networks", {"latency": metrics}))


def _print_adapted(summary: dict[str, Any]) -> None:
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
        console.print(metrics_table(f"the other {summary['n_test']} measured configs", scores))
    for target, fit in summary["fit"].items():
        console.print(f"{target}: {fit['residual']}; weights {fit['weights']}")
