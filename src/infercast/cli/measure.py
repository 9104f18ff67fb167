"""``infercast measure`` (a few models now) and ``infercast profile`` (a resumable campaign)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from infercast.cli import (
    MODEL_HELP,
    Table,
    Text,
    app,
    console,
    err_console,
    print_error,
    print_json,
    run_guarded,
)
from infercast.cli.options import (
    SPACES,
    Backend,
    CapS,
    Energy,
    Group,
    Json,
    MinRounds,
    OpRuns,
    Ops,
    OptLevel,
    RoundS,
    SentinelEveryS,
    Sentinels,
    Threads,
    TimeoutS,
    WarmupS,
    backend_settings,
    protocol_of,
)


def _drift_line(summary: dict[str, Any]) -> str | None:
    """What the campaign's sentinels said, in a line; None when it took no pass."""
    sentinels, drift = summary.get("sentinels"), summary.get("drift")
    if not sentinels or drift is None:
        return None
    last = sentinels["last_vs_usual"]
    parts = [f"sentinels: {sentinels['passes']} passes"]
    if last is not None:
        parts[0] += f", the last {last:+.1%} against their usual"
    if drift["spread"] is not None:
        sizes = ", ".join(f"{s['median_ms']:.3g} ms ±{math.expm1(s['spread']):.1%}" for s in drift["by_size"])
        parts.append(
            f"between-session spread ±{drift['spread_percent']:.1f}% ({drift['basis']}, "
            f"{drift['passes']} passes; by size {sizes}) is in every stored CI"
        )
    if summary.get("contended"):
        parts.append(f"{summary['contended']} measurements flagged contended (contended_reason in the store)")
    if sentinels["failures"]:
        parts.append(f"{len(sentinels['failures'])} readings failed: {sentinels['failures'][0]}")
    return "; ".join(parts)


@app.command()
def measure(
    models: list[str] = typer.Argument(..., help=MODEL_HELP),
    backend: Backend = "ort-cpu",
    threads: Threads = 1,
    opt_level: OptLevel = "all",
    warmup_s: WarmupS = 0.5,
    round_s: RoundS = 0.3,
    min_rounds: MinRounds = 6,
    cap_s: CapS = 15.0,
    group: Group = 4,
    timeout_s: TimeoutS = 180.0,
    energy: Energy = True,
    input_shape: str | None = typer.Option(
        None, "--input-shape", help="e.g. 1x3x128x128 (default: the model's)"
    ),
    db: Path | None = typer.Option(None, "--db", help="also store models and results in this store"),
    campaign: str = typer.Option("models", "--campaign", help="campaign name in the store (with --db)"),
    sentinels: Sentinels = True,
    sentinel_every_s: SentinelEveryS = 600.0,
    ops: Ops = False,
    op_runs: OpRuns = 10,
    as_json: Json = False,
) -> None:
    """Measure latency, peak memory and energy of MODELS on this machine, each in its own process.

    With --db the results are stored too, and models the campaign already holds are not re-measured.
    Exit code 0 when every model was measured, 1 when any failed to run (each failure is in the
    output), 2 when the request itself is refused or every failure is a model that cannot load as
    given (its input shape, say)."""
    from infercast.measurement import backends, measure_model_strings
    from infercast.measurement.worker import USER_ERROR

    def body() -> list[dict[str, Any]]:
        from infercast.models import parse_input_shape

        chosen = backends.get(backend, **backend_settings(backend, threads, opt_level))
        protocol = protocol_of(warmup_s, round_s, min_rounds, cap_s, group, timeout_s, sentinel_every_s)
        shape = parse_input_shape(input_shape) if input_shape else None
        with err_console.status(f"measuring {len(models)} model(s) on {chosen.name}", spinner="dots"):
            return measure_model_strings(
                models,
                chosen,
                protocol,
                energy,
                input_shape=shape,
                db=db,
                campaign=campaign,
                op_runs=op_runs if ops else 0,
                sentinels=sentinels,
            )

    results = run_guarded(body)
    failures = {r["failure"] for r in results if "failure" in r}
    if as_json:
        print_json(results)
    else:
        _print_measured(results, f"measured on {backend} ({threads} thread{'s' if threads > 1 else ''})")
    if failures:
        raise typer.Exit(2 if failures == {USER_ERROR} else 1)


def _print_measured(results: list[dict[str, Any]], title: str) -> None:
    table = Table(title=title)
    for column in ("model", "low ms", "median ms", "95% CI", "CV", "n", "peak memory", "energy / inference"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for r in results:
        if "failure" in r:
            failure = Text.assemble((r["failure"], "red"), f": {r['reason']}")
            table.add_row(r["model"], failure, "", "", "", "", "", "")
            continue
        memory = f"{r['peak_memory_bytes'] / 1e6:.1f} MB" if r["peak_memory_bytes"] is not None else "n/a"
        joules = f"{r['energy_j']:.4g} J" if r["energy_j"] is not None else "no sensor"
        table.add_row(
            r["model"],
            f"{r['low_ms']:.3f}",
            f"{r['median_ms']:.3f}",
            f"{r['ci_low_ms']:.3f}–{r['ci_high_ms']:.3f}",
            f"{r['cv']:.1%}",
            str(r["n"]),
            memory,
            joules,
        )
    console.print(table)
    for r in results:
        if r.get("contended"):
            console.print(Text.assemble(("contended", "yellow"), f": {r['model']}: {r['contended_reason']}"))
    if any(r.get("session_spread") is not None for r in results):
        console.print("95% CI: within the session and between sessions (the platform's sentinels)")
    for reason in {r["energy_reason"] for r in results if r.get("energy_reason")}:
        console.print(f"energy: {reason}")


@app.command()
def profile(
    space: str | None = typer.Option(
        None,
        "--space",
        help=f"design space ({SPACES}) or YAML file (with --kernels: a restriction of kernels)",
    ),
    kernels: bool = typer.Option(
        False,
        "--kernels",
        help="a kernel campaign: one-kernel networks at shapes real CNNs execute, each op profiled",
    ),
    adaptive: bool = typer.Option(
        False,
        "--adaptive",
        help="with --kernels: half the kernels drawn around those the kernel regressors predict worst",
    ),
    n: int = typer.Option(500, "--n", help="configurations to sample"),
    seed: int = typer.Option(0, "--seed"),
    db: Path = typer.Option(Path("runs.db"), "--db", help="the store file (created if missing)"),
    backend: Backend = "ort-cpu",
    threads: Threads = 1,
    opt_level: OptLevel = "all",
    campaign: str | None = typer.Option(None, "--campaign", help="name (default: from space, n, seed)"),
    stratified: bool = typer.Option(True, "--stratified/--uniform", help="how configurations are sampled"),
    warmup_s: WarmupS = 0.5,
    round_s: RoundS = 0.3,
    min_rounds: MinRounds = 6,
    cap_s: CapS = 15.0,
    group: Group = 4,
    timeout_s: TimeoutS = 180.0,
    energy: Energy = True,
    sentinels: Sentinels = True,
    sentinel_every_s: SentinelEveryS = 600.0,
    ops: Ops = False,
    op_runs: OpRuns = 10,
    limit: int | None = typer.Option(
        None, "--limit", help="measure only the first N configs of the sample this run"
    ),
    ray_address: str | None = typer.Option(
        None, "--ray", help="Ray cluster address (e.g. 10.0.0.1:6379): measure on its nodes"
    ),
    devices: list[str] | None = typer.Option(
        None, "--device", help="with --ray: device kind(s) to measure on (nodes offer device:KIND)"
    ),
    chunk: int = typer.Option(16, "--chunk", help="with --ray: configs per cluster task"),
    as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
) -> None:
    """Profile a sample of a design space into a store; rerunning the same command resumes.

    With --ray ADDRESS the configs are measured on the cluster's nodes that offer each --device
    kind (ray start --resources '{"device:KIND": 1}'); this process alone writes the store."""
    from infercast.api.profiling import profile as run_profile
    from infercast.measurement import CampaignSpec

    _check_profile_options(space, kernels, adaptive, limit, ray_address, devices, op_runs)
    chosen_space = space or "kernels"
    if kernels:
        run_guarded(lambda: _check_kernels_space(chosen_space))
    protocol = run_guarded(
        lambda: protocol_of(warmup_s, round_s, min_rounds, cap_s, group, timeout_s, sentinel_every_s)
    )
    # a kernel campaign exists for the op-wise kernel regressors: its op rows are the point
    measured_ops = op_runs if ops or kernels else 0
    how = {"protocol": protocol, "energy": energy, "op_runs": measured_ops, "sentinels": sentinels}
    spec = run_guarded(
        lambda: CampaignSpec(chosen_space, n, seed, stratified, limit=limit, campaign=campaign, **how)
    )
    run_on = "adaptive" if adaptive else "local" if ray_address is None else "ray"
    options: dict[str, Any] = backend_settings(backend, threads, opt_level)
    if run_on == "ray":
        options.update(kinds=devices or [], address=ray_address, chunk=chunk)
    summary = _with_progress_bar(
        chosen_space, as_json, lambda progress: run_profile(spec, db, backend, run_on, progress, **options)
    )
    if as_json:
        print_json(summary)
    else:
        _print_profiled(summary, db, ray_address)


def _check_kernels_space(space: str) -> None:
    from infercast.space import get as get_space

    if get_space(space).string_name != "kernels":
        raise ValueError(f"--kernels profiles the kernels space (or a YAML restriction of it), not {space}")


def _check_profile_options(
    space: str | None,
    kernels: bool,
    adaptive: bool,
    limit: int | None,
    ray_address: str | None,
    devices: list[str] | None,
    op_runs: int,
) -> None:
    """Options that cannot go together, or a count below zero: one line on stderr, exit 2."""
    problem = None
    if op_runs < 0:
        # checked even without --ops: a negative count is a typo whichever route would use it
        problem = f"--op-runs {op_runs}: a whole number, 0 or more"
    elif space is None and not kernels:
        problem = "give --space NAME (or --kernels for a kernel campaign)"
    elif adaptive and (not kernels or ray_address is not None or limit is not None):
        problem = "--adaptive plans a local kernel campaign: use it with --kernels, without --ray or --limit"
    elif devices and ray_address is None:
        problem = "--device names a Ray device kind: it needs --ray ADDRESS"
    if problem:
        print_error(problem)
        raise typer.Exit(2)


def _with_progress_bar(space: str, quiet: bool, body: Any) -> dict[str, Any]:
    """Run ``body(progress)`` under a progress bar of the campaign (none when ``quiet``)."""
    columns = (
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err_console, disable=quiet, transient=True) as bar:
        task = bar.add_task("planning", total=None)

        def progress(event: str, state: dict[str, Any]) -> None:
            if event == "start":
                bar.update(task, total=state["todo"], description=f"profiling {space}")
            elif event in ("done", "failed", "lost"):
                bar.update(task, completed=state["done"] + state["failed"] + state.get("lost", 0))
            elif event == "sentinels" and state["sentinels"]["last_vs_usual"] is not None:
                slower = state["sentinels"]["last_vs_usual"]
                bar.update(task, description=f"profiling {space} (sentinels {slower:+.1%} vs usual)")

        return run_guarded(lambda: body(progress))


def _print_profiled(summary: dict[str, Any], db: Path, ray_address: str | None) -> None:
    if ray_address is not None:
        console.print(
            f"campaign {summary['campaign']} on {ray_address}: {summary['done']} measured, "
            f"{summary['failed']} failed, {summary['skipped']} already in {db}, {summary['left']} left "
            f"(rerun to measure them); platforms {summary['platforms']}"
        )
        return
    width = summary["median_ci_half_width"]
    console.print(
        f"campaign {summary['campaign']}: {summary['done']} measured, {summary['failed']} failed, "
        f"{summary['skipped']} already in {db}; median 95% CI half-width "
        + (f"{width:.2%}" if width is not None else "n/a")
    )
    if summary.get("restricted"):
        console.print(f"note: {summary['restricted']}")
    if summary.get("adaptive"):
        a = summary["adaptive"]
        console.print(
            f"adaptive: {a['first_half']} kernels drawn from real CNN shapes, then {a['second_half']} "
            f"around the {len(a['drawn_around'])} the kernel regressors predicted worst (|log error| >= "
            f"{a['hard_kernels_min_abs_log_error']:.2f}; median {a['first_half_median_abs_log_error']:.2f})"
        )
    drift = _drift_line(summary)
    if drift:
        console.print(drift)
