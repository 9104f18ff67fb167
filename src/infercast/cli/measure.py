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

from infercast.cli import MODEL_HELP, Table, app, console, err_console, print_json, run_guarded
from infercast.errors import install_hint

BACKEND_HELP = "ort-cpu, torch-cpu, torch-cuda or ort-cuda"


def _settings(name: str, threads: int, opt_level: str) -> dict[str, Any]:
    settings: dict[str, Any] = {"threads": threads}
    if name.startswith("ort-"):
        settings["opt_level"] = opt_level
    return settings


def _backend(name: str, threads: int, opt_level: str) -> Any:
    from infercast.measurement import backends

    return backends.get(name, **_settings(name, threads, opt_level))


def protocol_of(
    warmup_s: float,
    round_s: float,
    min_rounds: int,
    cap_s: float,
    group: int,
    timeout_s: float,
    sentinel_every_s: float = 600.0,
) -> Any:
    from infercast.measurement import Protocol

    return Protocol(
        warmup_s=warmup_s,
        round_s=round_s,
        min_rounds=min_rounds,
        cap_s=cap_s,
        group=group,
        timeout_s=timeout_s,
        sentinel_every_s=sentinel_every_s,
    )


SENTINELS_HELP = "re-measure the backend's sentinel models at the start, at intervals and at the end"
SENTINEL_EVERY_HELP = "seconds between sentinel passes (0: only at the start and the end)"


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
    backend: str = typer.Option("ort-cpu", "--backend", help=BACKEND_HELP),
    threads: int = typer.Option(1, "--threads", help="intra-op threads"),
    opt_level: str = typer.Option("all", "--opt-level", help="ONNX Runtime graph optimisation level"),
    warmup_s: float = typer.Option(0.5, "--warmup-s", help="seconds of untimed inferences after loading"),
    round_s: float = typer.Option(0.3, "--round-s", help="seconds per timing round"),
    min_rounds: int = typer.Option(6, "--min-rounds", help="rounds before the CI may stop a model"),
    cap_s: float = typer.Option(15.0, "--cap-s", help="timing seconds per model at most"),
    group: int = typer.Option(4, "--group", help="models whose rounds are interleaved"),
    timeout_s: float = typer.Option(180.0, "--timeout-s", help="a worker step taking longer fails its model"),
    energy: bool = typer.Option(True, "--energy/--no-energy", help="read the energy sensor, if any"),
    input_shape: str | None = typer.Option(
        None, "--input-shape", help="e.g. 1x3x128x128 (default: the model's)"
    ),
    db: Path | None = typer.Option(None, "--db", help="also store models and results in this store"),
    campaign: str = typer.Option("models", "--campaign", help="campaign name in the store (with --db)"),
    sentinels: bool = typer.Option(True, "--sentinels/--no-sentinels", help=SENTINELS_HELP + " (with --db)"),
    sentinel_every_s: float = typer.Option(600.0, "--sentinel-every-s", help=SENTINEL_EVERY_HELP),
    ops: bool = typer.Option(False, "--ops", help="also profile every executed kernel / op"),
    op_runs: int = typer.Option(10, "--op-runs", help="runs profiled per model with --ops"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Measure latency, peak memory and energy of MODELS on this machine, each in its own process.

    With --db the results are stored too, and models the campaign already holds are not re-measured.
    Exit code 0 when every model was measured, 1 when any failed (each failure is in the output),
    2 when the request itself is refused."""
    from infercast.measurement import measure_model_strings as run_measure

    def body() -> list[dict[str, Any]]:
        chosen = _backend(backend, threads, opt_level)
        protocol = protocol_of(warmup_s, round_s, min_rounds, cap_s, group, timeout_s, sentinel_every_s)
        with console.status(f"measuring {len(models)} model(s) on {chosen.name}", spinner="dots"):
            from infercast.models import parse_input_shape

            return run_measure(
                models,
                chosen,
                protocol,
                energy,
                input_shape=parse_input_shape(input_shape) if input_shape else None,
                db=db,
                campaign=campaign,
                op_runs=op_runs if ops else 0,
                sentinels=sentinels,
            )

    results = run_guarded(body)
    failed = any("failure" in r for r in results)
    if as_json:
        print_json(results)
        raise typer.Exit(1 if failed else 0)
    table = Table(title=f"measured on {backend} ({threads} thread{'s' if threads > 1 else ''})")
    for column in ("model", "low ms", "median ms", "95% CI", "CV", "n", "peak memory", "energy / inference"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for r in results:
        if "failure" in r:
            table.add_row(r["model"], f"[red]{r['failure']}[/]: {r['reason']}", "", "", "", "", "", "")
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
            console.print(f"[yellow]contended[/]: {r['model']}: {r['contended_reason']}")
    if any(r.get("session_spread") is not None for r in results):
        console.print("95% CI: within the session and between sessions (the platform's sentinels)")
    reasons = {r["energy_reason"] for r in results if r.get("energy_reason")}
    for reason in reasons:
        console.print(f"energy: {reason}")
    if failed:
        raise typer.Exit(1)


@app.command()
def profile(
    space: str | None = typer.Option(
        None, "--space", help="design space name or YAML file (with --kernels: a restriction of kernels)"
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
    backend: str = typer.Option("ort-cpu", "--backend", help=BACKEND_HELP),
    threads: int = typer.Option(1, "--threads"),
    opt_level: str = typer.Option("all", "--opt-level"),
    campaign: str | None = typer.Option(None, "--campaign", help="name (default: from space, n, seed)"),
    stratified: bool = typer.Option(True, "--stratified/--uniform", help="how configurations are sampled"),
    warmup_s: float = typer.Option(0.5, "--warmup-s"),
    round_s: float = typer.Option(0.3, "--round-s"),
    min_rounds: int = typer.Option(6, "--min-rounds"),
    cap_s: float = typer.Option(15.0, "--cap-s"),
    group: int = typer.Option(4, "--group"),
    timeout_s: float = typer.Option(180.0, "--timeout-s"),
    energy: bool = typer.Option(True, "--energy/--no-energy"),
    sentinels: bool = typer.Option(True, "--sentinels/--no-sentinels", help=SENTINELS_HELP),
    sentinel_every_s: float = typer.Option(600.0, "--sentinel-every-s", help=SENTINEL_EVERY_HELP),
    ops: bool = typer.Option(False, "--ops", help="also profile every executed kernel / op"),
    op_runs: int = typer.Option(10, "--op-runs", help="runs profiled per model with --ops"),
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
    from infercast.measurement import profile as run_profile

    if space is None and not kernels:
        err_console.print("[bold red]error:[/] give --space NAME (or --kernels for a kernel campaign)")
        raise typer.Exit(2)
    if adaptive and (not kernels or ray_address is not None or limit is not None):
        err_console.print(
            "[bold red]error:[/] --adaptive plans a local kernel campaign: use it with --kernels, "
            "without --ray or --limit"
        )
        raise typer.Exit(2)
    chosen_space = space or "kernels"
    if devices and ray_address is None:
        err_console.print("[bold red]error:[/] --device names a Ray device kind: it needs --ray ADDRESS")
        raise typer.Exit(2)

    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=as_json) as bar:
        task = bar.add_task("planning", total=None)

        def progress(event: str, state: dict[str, Any]) -> None:
            if event == "start":
                bar.update(task, total=state["todo"], description=f"profiling {chosen_space}")
            elif event in ("done", "failed", "lost"):
                bar.update(task, completed=state["done"] + state["failed"] + state.get("lost", 0))
            elif event == "sentinels" and state["sentinels"]["last_vs_usual"] is not None:
                slower = state["sentinels"]["last_vs_usual"]
                bar.update(task, description=f"profiling {chosen_space} (sentinels {slower:+.1%} vs usual)")

        def body() -> dict[str, Any]:
            if kernels:
                from infercast.space import get as get_space

                if get_space(chosen_space).string_name != "kernels":
                    raise ValueError(
                        f"--kernels profiles the kernels space (or a YAML restriction of it), not {space}"
                    )
            common: dict[str, Any] = {
                "seed": seed,
                "stratified": stratified,
                "campaign": campaign,
                "protocol": protocol_of(
                    warmup_s, round_s, min_rounds, cap_s, group, timeout_s, sentinel_every_s
                ),
                "energy": energy,
                # a kernel campaign exists for the op-wise kernel regressors: its op rows are the point
                "op_runs": op_runs if ops or kernels else 0,
                "progress": progress,
                "limit": limit,
            }
            settings = _settings(backend, threads, opt_level)
            if adaptive:
                from infercast.api.kernel_campaigns import profile_kernels_adaptive

                del common["stratified"], common["limit"]
                return profile_kernels_adaptive(
                    chosen_space, n, db, backend, **common, sentinels=sentinels, **settings
                )
            if ray_address is None:
                return run_profile(chosen_space, n, db, backend, **common, sentinels=sentinels, **settings)
            try:
                from infercast.distributed import profile_on_ray
            except ImportError:
                raise ValueError(f"--ray needs Ray: {install_hint('ray', repr('ray>=2.40'))}") from None
            kinds = devices or []
            return profile_on_ray(
                chosen_space, n, db, kinds, ray_address, backend, chunk=chunk, **common, **settings
            )

        summary = run_guarded(body)
    if as_json:
        print_json(summary)
        return
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
