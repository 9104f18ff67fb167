"""``infercast calibrate``: this machine as the ``local`` device — the nearest shipped host
recalibrated per kind of kernel from kernel networks and design-space configs measured here."""

from __future__ import annotations

import time
from typing import Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from infercast.cli import Table, app, console, err_console, print_json, run_guarded


@app.command()
def calibrate(
    budget_s: float = typer.Option(
        60.0, "--budget-s", help="seconds of measuring (a rerun adds to the last)"
    ),
    backend: str = typer.Option("ort-cpu", "--backend", help="the runtime to calibrate (ort-cpu)"),
    threads: int = typer.Option(1, "--threads", help="intra-op threads the predictions are for"),
    source: str = typer.Option(
        None, "--source", help="the shipped host to recalibrate (default: the nearest to this machine)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Measure the nearest shipped host's (or --source's) kernel networks here for --budget-s
    seconds, most informative first, with a few design-space configs between them on a machine
    unlike the host's, and recalibrate that host per kind of kernel (dense, depthwise and grouped
    convolutions, element-wise, memory moves, pools, linear). Kept under this machine's fingerprint:
    `infercast predict --device local MODEL` uses it. A rerun resumes where the last stopped; an
    interrupted one leaves what it measured."""
    from infercast.api.calibrating import calibrate as run

    columns = (TextColumn("{task.description}", markup=False), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("calibrating", total=budget_s)
        started = time.monotonic()

        def progress(event: str, state: dict[str, Any]) -> None:
            bar.update(
                task,
                completed=min(budget_s, time.monotonic() - started),
                description=f"calibrating from {state['source']}: {state['done']} networks measured",
            )

        summary = run_guarded(lambda: run(budget_s, threads, backend, progress, source))
    if as_json:
        print_json(summary)
        return
    table = Table(title=f"this machine against {summary['source']} ({summary['n']} kernel networks)")
    for column in ("kind of kernel", "kernel networks", "factor"):
        table.add_column(column, justify="left" if column == "kind of kernel" else "right")
    for kind, figures in summary["kinds"].items():
        table.add_row(kind, f"{figures['n']:.0f}", f"×{figures['factor']:.3f}")
    table.add_row("overall (kinds not measured)", str(summary["n"]), f"×{summary['factor']:.3f}")
    console.print(table)
    if summary["networks"]:
        pull = summary["pull"]
        moved = (
            "left their factors as they were" if pull is None else f"refitted their factors (pull {pull:g})"
        )
        console.print(
            f"{summary['networks']} design-space configs measured beside the kernel networks {moved}",
            highlight=False,
        )
    console.print(
        f"measured {summary['measured']} networks in {summary['seconds']:.0f} s; kept in "
        f"{summary['folder']}. Predict with `infercast predict --device local MODEL`; "
        "`--budget-s 300` adds more.",
        highlight=False,
    )
