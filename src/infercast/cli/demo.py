"""``infercast demo``: the main job end to end on the embedded default (local CPU, SQLite file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from infercast.cli import Table, Text, app, console, err_console, print_json, run_guarded
from infercast.predictors.routes import LABELS


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _line(step: str, figures: dict[str, Any]) -> str | None:
    if step == "profile":
        return (
            f"profile: {figures['measured_now']} configs measured now, "
            f"{figures['in_store']} in the store ({figures['seconds']:.0f} s)"
        )
    if step == "kernels":
        return (
            f"kernel campaign: {figures['measured_now']} one-kernel networks measured now, "
            f"{figures['in_store']} in the store ({figures['seconds']:.0f} s)"
        )
    if step == "train":
        line = f"train: CARB cascade blend + op-wise on {figures['n_train']} configs"
        if figures.get("kernel_campaign"):
            line += f" + a kernel campaign ({figures['kernel_campaign']})"
        routes = figures.get("routes") or {}
        if routes.get("order"):
            line += f"; predict uses {routes.get('choice', LABELS[routes['order'][0]])}"
            if routes.get("warning"):
                line += f" (warning: {routes['warning']})"
        return line + f" ({figures['seconds']:.0f} s)"
    if step == "evaluate":
        parts = []
        for target, m in figures["test_metrics"].items():
            parts.append(
                f"{target} R² {m['r2']:.3f}, MAPE {m['mape']:.1f} %, ±10 % {_pct(m['within_10pct'])}"
            )
        if figures["opwise"]:
            parts.append(f"op-wise latency MAPE {figures['opwise']['mape']:.1f} %")
        return "evaluate (held-out configs): " + "; ".join(parts)
    if step == "networks":
        count = len(figures["networks"])
        return (
            f"real networks: {count} predicted, then measured: {_errors(figures['errors'])} "
            f"({figures['seconds']:.0f} s)"
        )
    if step == "screen":
        s1 = figures["stage1"]
        return (
            f"screen: {figures['candidates']:,} candidates, stage 1 {s1['seconds']:.1f} s removed "
            f"{s1['elimination_rate']:.1%}; shortlist of {len(figures['shortlist'])} "
            f"({figures['seconds']:.0f} s)"
        )
    if step == "validate":
        return (
            f"validate: {figures['counts']}, budget classification "
            + (
                f"{figures['budget_accuracy']:.0%} correct"
                if figures["budget_accuracy"] is not None
                else "n/a"
            )
            + f" ({figures['seconds']:.0f} s)"
        )
    if step == "report":
        return f"report: {figures['path']}"
    return None


def _errors(errors: dict[str, Any]) -> str:
    if not errors["n"]:
        return "none could be measured"
    best, medians = errors["route"], errors["median_abs_error"]
    others = ", ".join(f"{LABELS[r]} {v:.1%}" for r, v in medians.items() if r != best)
    return f"median |error| {medians[best]:.1%} ({LABELS[best]})" + (f"; {others}" if others else "")


@app.command()
def demo(
    minutes: float = typer.Option(
        10.0, "--minutes", help="time budget of the whole demo (profiling gets what the later steps leave)"
    ),
    folder: Path = typer.Option(
        Path("infercast-demo"), "--dir", help="where the store, predictor and report go"
    ),
    configs: int = typer.Option(160, "--configs", help="design-space configs to profile (resumes)"),
    kernels: int = typer.Option(
        120, "--kernels", help="one-kernel networks of the kernel campaign (0: none; resumes)"
    ),
    zoo: int = typer.Option(5, "--zoo", help="real networks to predict and measure (1–5)"),
    candidates: int = typer.Option(1_000_000, "--candidates", help="candidates to screen"),
    shortlist: int = typer.Option(5, "--shortlist", help="shortlist size (measured to validate)"),
    quick: bool = typer.Option(False, "--quick", help="short protocol and small learners (a smoke run)"),
    as_json: bool = typer.Option(False, "--json", help="print the results as JSON"),
) -> None:
    """Profile this CPU, train the predictors, predict real networks, screen a million, validate, report."""
    from infercast.demo import run_demo

    def progress(step: str, figures: dict[str, Any]) -> None:
        if step == "profile-progress":
            status.update(f"profiling: {figures['measured']} of {figures['target']} configs measured")
            return
        if step == "kernels-progress":
            status.update(f"kernel campaign: {figures['measured']} of {figures['target']} kernels measured")
            return
        line = _line(step, figures)
        if line and not as_json:
            name, _, rest = line.partition(":")
            console.print(Text.assemble((name, "bold"), ":", rest), highlight=False)

    def body() -> dict[str, Any]:
        return run_demo(folder, minutes, configs, zoo, candidates, shortlist, progress, quick, kernels)

    with err_console.status("profiling", spinner="dots") as status:
        results = run_guarded(body)
    if as_json:
        print_json(results)
        return
    _print_networks(results["networks"])
    _print_summary(results)
    console.print(_budget_line(results["seconds"], results["budget_s"]), highlight=False)


def _budget_line(seconds: float, budget_s: float) -> str:
    """The time the demo took against its budget, and why when it ran past it."""
    from infercast.demo import MIN_CONFIGS

    line = f"took {seconds / 60:.1f} min of --minutes {budget_s / 60:g}"
    if seconds > budget_s * 1.1:
        line += (
            f" — past the budget: the least the demo needs here ({MIN_CONFIGS} configs, training, "
            "the networks) does not fit it"
        )
    return line


def _print_networks(networks: list[dict[str, Any]]) -> None:
    table = Table(title="real networks never seen in training (1x3x128x128): predicted vs measured")
    for column in (
        "model",
        "predicted ms (90 %)",
        "measured ms",
        "error",
        "other routes' errors",
        "memory MB pred / meas",
        "ood",
    ):
        table.add_column(column, justify="left" if column in ("model", "ood") else "right")
    for n in networks:
        if n["measured_ms"] is None:
            table.add_row(n["model"], f"{n['predicted_ms']:.3g}", f"failed: {n['failure']}", "", "", "", "")
            continue
        error = (n["predicted_ms"] - n["measured_ms"]) / n["measured_ms"]
        others = ", ".join(
            f"{LABELS[route]} {ms / n['measured_ms'] - 1:+.0%}"
            for route, ms in n["routes_ms"].items()
            if route != n["route"]
        )
        table.add_row(
            n["model"],
            f"{n['predicted_ms']:.3g} ({n['interval'][0]:.3g}–{n['interval'][1]:.3g})",
            f"{n['measured_ms']:.3g}",
            f"{error:+.0%} ({LABELS[n['route']]})",
            others or "–",
            f"{n['predicted_memory_mb']:.3g} / {n['measured_memory_mb']:.3g}"
            if n["measured_memory_mb"]
            else "–",
            "yes" if n["ood"] else "no",
        )
    console.print(table)


def _print_summary(results: dict[str, Any]) -> None:
    summary = Table(title="infercast demo: summary")
    summary.add_column("step")
    summary.add_column("result")
    metrics = results["evaluate"]["test_metrics"]
    for target, m in metrics.items():
        summary.add_row(
            f"held-out {target}",
            f"R² {m['r2']:.3f}, MAPE {m['mape']:.1f} %, ±10 % {_pct(m['within_10pct'])}, "
            f"interval coverage {_pct(m.get('coverage'))}; "
            f"FLOPs baseline MAPE {m['baselines']['flops']['mape']:.1f} %",
        )
    routes = results["train"].get("routes") or {}
    if routes.get("order"):
        held = routes["held_out"]
        summary.add_row(
            "latency routes, held-out",
            ", ".join(f"{LABELS[r]} {held[r]['median_abs_error_pct']:.1f} %" for r in routes["order"])
            + f" median |error| (n={held[routes['order'][0]]['n']}); predict uses "
            + routes.get("choice", "the first")
            + (f". Warning: {routes['warning']}" if routes.get("warning") else ""),
        )
    summary.add_row("real networks", _errors(results["network_errors"]))
    for target, reason in results["train"]["unavailable"].items():
        summary.add_row(target, f"no sensor on this host — {reason}" if target == "energy" else reason)
    s1 = results["screen"]["stage1"]
    summary.add_row(
        "screening",
        f"{results['screen']['candidates']:,} candidates, stage 1 in {s1['seconds']:.1f} s, "
        f"{s1['elimination_rate']:.1%} eliminated, budgets {results['screen']['budgets']}",
    )
    if results["screen"]["message"]:
        summary.add_row("shortlist", results["screen"]["message"])
    if "validate" in results:
        v = results["validate"]
        summary.add_row(
            "validation",
            f"{v['counts']}; median latency error "
            + (f"{v['median_latency_error']:.1%}" if v["median_latency_error"] is not None else "n/a"),
        )
    summary.add_row("report", results["report"]["path"])
    console.print(summary)
