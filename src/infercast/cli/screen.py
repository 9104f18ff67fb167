"""``infercast screen``: a million candidates to a (validated) Pareto shortlist."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from infercast.cli import Table, Text, app, console, err_console, print_json, run_guarded
from infercast.cli.options import SPACES, protocol_of

_SHOW = ("latency_ms", "peak_memory_mb", "energy_j", "f_flops", "f_params")


def _parse_weights(text: str | None) -> dict[str, float] | None:
    if not text:
        return None
    weights = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--weights: {part!r} is not NAME=NUMBER") from None
    return weights


def _count(text: str) -> int:
    """``--n``: a whole number, also written as 1e8 or 1_000_000."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise ValueError(f"--n {text!r} is not a number of candidates (e.g. 1000000 or 1e6)") from None
    if not value.is_integer() or value < 1:
        raise ValueError(f"--n {text}: a whole number of candidates, at least 1")
    return int(value)


PredictorDir = Annotated[
    Path | None, typer.Option("--predictor", help="predictor directory (stage 1, and stage 2 without -b)")
]
Device = Annotated[
    str | None,
    typer.Option(
        "--device",
        help="a shipped device instead of --predictor: nb201/* for --space nb201, phone settings for "
        "mobile-nas and carb-resnet (latency)",
    ),
]
Count = Annotated[
    str,
    typer.Option("--n", help="candidates to sample from the space, e.g. 1000000 or 1e8 (streamed in chunks)"),
]
Configs = Annotated[
    Path | None, typer.Option("--configs", help="Parquet / CSV of configs of --space instead")
]
PredictorB = Annotated[Path | None, typer.Option("--predictor-b", help="re-score survivors on this platform")]
Objectives = Annotated[
    str | None,
    typer.Option(
        "--objectives",
        help="among latency,memory,energy,flops,params (default latency,memory; with --device latency,flops)",
    ),
]
ProbeRejected = Annotated[
    int, typer.Option("--probe-rejected", help="with --validate: rejected ones to measure too")
]
Refit = Annotated[bool, typer.Option("--refit", help="with --validate: retrain the predictor into DIR-refit")]
RayAddress = Annotated[
    str | None,
    typer.Option("--ray", help="Ray cluster address: sample, featurise and filter --space on its nodes"),
]
ModelTimeoutS = Annotated[
    float,
    typer.Option("--timeout-s", help="a --model running your code (file.py:factory) must load within this"),
]


@app.command()
def screen(
    predictor: PredictorDir = None,
    device: Device = None,
    space: str | None = typer.Option(None, "--space", help=f"design space ({SPACES}) or YAML file to sample"),
    n_text: Count = "1000000",
    seed: int = typer.Option(0, "--seed"),
    configs: Configs = None,
    models: list[str] | None = typer.Option(None, "--model", help="model string(s) to screen instead"),
    predictor_b: PredictorB = None,
    max_latency_ms: float | None = typer.Option(None, "--max-latency-ms"),
    max_memory_mb: float | None = typer.Option(None, "--max-memory-mb"),
    max_energy_j: float | None = typer.Option(None, "--max-energy-j"),
    objectives: Objectives = None,
    weights: str | None = typer.Option(None, "--weights", help="rank by weights, e.g. latency=1,memory=0.5"),
    shortlist: int = typer.Option(10, "--shortlist", help="size of the shortlist"),
    risk: float = typer.Option(0.05, "--risk", help="stage 1: chance to wrongly drop a feasible candidate"),
    platform: str | None = typer.Option(None, "--platform", help="refuse a predictor of another platform"),
    validate: bool = typer.Option(False, "--validate", help="measure the shortlist here and compare"),
    probe_rejected: ProbeRejected = 3,
    refit: Refit = False,
    db: Path = typer.Option(Path("runs.db"), "--db", help="store for --validate measurements"),
    warmup_s: float = typer.Option(0.5, "--warmup-s", help="with --validate: untimed seconds after loading"),
    round_s: float = typer.Option(0.3, "--round-s", help="with --validate: seconds per timing round"),
    min_rounds: int = typer.Option(6, "--min-rounds", help="with --validate: rounds before the CI may stop"),
    cap_s: float = typer.Option(15.0, "--cap-s", help="with --validate: timing seconds per model at most"),
    out: Path | None = typer.Option(None, "--out", help="write the shortlist to .parquet / .csv"),
    ray_address: RayAddress = None,
    shards: int | None = typer.Option(None, "--shards", help="with --ray: stage-1 tasks (default 2 per CPU)"),
    timeout_s: ModelTimeoutS = 180.0,
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Screen design candidates against latency / memory / energy budgets; keep a Pareto shortlist."""
    from infercast.api import screen as run_screen

    def body() -> dict[str, Any]:
        with _stage_bars(as_json) as bar:
            tasks: dict[str, Any] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = bar.add_task(stage, total=total)
                bar.update(tasks[stage], completed=done)

            return run_screen(
                predictor,
                {"latency": max_latency_ms, "memory": max_memory_mb, "energy": max_energy_j},
                objectives or ("latency,flops" if device else "latency,memory"),
                space=space,
                n=_count(n_text),
                seed=seed,
                configs=configs,
                models=list(models or []),
                predictor_b=predictor_b,
                weights=_parse_weights(weights),
                shortlist=shortlist,
                risk=risk,
                platform=platform,
                validate=validate,
                probe_rejected=probe_rejected,
                refit=refit,
                db=db,
                protocol=protocol_of(warmup_s, round_s, min_rounds, cap_s, 4, timeout_s)
                if validate
                else None,
                out=out,
                ray_address=ray_address,
                shards=shards,
                timeout_s=timeout_s,
                progress=progress,
                status=None if as_json else lambda message: bar.console.print(f"{message}…"),
                device=device,
            )

    data = run_guarded(body)
    if as_json:
        print_json(data)
        return
    _print(data)


def _stage_bars(quiet: bool) -> Progress:
    """One bar per screening stage (none when ``quiet``)."""
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn())
    return Progress(*columns, TimeElapsedColumn(), console=err_console, disable=quiet, transient=True)


def _print(data: dict[str, Any]) -> None:
    stage1, stage2 = data["stage1"], data["stage2"]
    console.print(f"{data['candidates']:,} candidates from {data['source']}; budgets {data['budgets']}")
    removed = ", ".join(f"{t}: {k:,}" for t, k in stage1["removed_by"].items())
    widest = stage1.get("widest_margins_pct", {})
    margins = ", ".join(
        f"{t} {m:.1f} %"
        + (f" (up to {widest[t]:.1f} % off the profiled ranges)" if widest.get(t, m) > m + 0.05 else "")
        for t, m in stage1["margins_pct"].items()
    )
    console.print(
        f"stage 1 ({stage1['seconds']:.1f} s): removed by budget {removed} "
        f"(margins {margins}, risk {data['risk']}); {stage1['survivors']:,} survive — "
        f"{stage1['elimination_rate']:.1%} eliminated ({stage1['distinct_survivors']:,} distinct)"
    )
    if stage2:
        console.print(
            f"stage 2 ({stage2['seconds']:.1f} s, predictor {stage2.get('predictor', 'a')}): "
            f"{stage2.get('feasible', 0):,} of {stage2.get('rescored', 0):,} meet the budgets"
        )
    device = data.get("device")
    if device:
        figures = (
            f"{device['within_10pct']:.0%} within ±10 %, median error {device['median_abs_error_pct']:.1f} %"
            if device.get("within_10pct") is not None
            else "no card"
        )
        console.print(f"device {device['device']}: {device['route']} — card: {figures}")
        if device["note"]:
            console.print(device["note"], style="yellow")
    if data["message"]:
        console.print(data["message"], style="yellow")
        rows = data["closest"]
    else:
        rows = data["shortlist"]
    table = Table(title="shortlist" if not data["message"] else "closest candidates")
    shown = [c for c in _SHOW if rows and c in rows[0] and any(r.get(c) is not None for r in rows)]
    for column in ("model", *shown, "front", "ood"):
        if column in ("front", "ood") and (not rows or column not in rows[0]):
            continue
        table.add_column(column, justify="left" if column in ("model", "ood") else "right")
    for r in rows:
        cells = [str(r["model"]).removeprefix("space:")]
        cells += [f"{r[c]:.4g}" if r.get(c) is not None else "–" for c in shown]
        if "front" in r:
            cells.append(str(r["front"]))
        if "ood" in r:
            cells.append(Text("yes", style="yellow") if r["ood"] else "no")
        table.add_row(*cells)
    console.print(table)
    if data.get("validation"):
        _print_validation(data["validation"])


def _print_validation(validation: dict[str, Any]) -> None:
    counts = validation["counts"]
    console.print(
        f"validation ({validation['campaign']} in {validation['db']}): {counts}; budget classification "
        + (
            f"{validation['budget_accuracy']:.0%} correct"
            if validation["budget_accuracy"] is not None
            else "n/a"
        )
        + "; median latency error "
        + (
            f"{validation['median_latency_error']:.1%}"
            if validation["median_latency_error"] is not None
            else "n/a"
        )
    )
    check = Table(title="predicted vs measured")
    for column in ("model", "role", "latency ms pred / meas", "memory MB pred / meas", "verdict"):
        check.add_column(column)
    for r in validation["rows"]:
        check.add_row(
            str(r["model"]).removeprefix("space:"),
            r["role"],
            _pair(r, "latency_ms"),
            _pair(r, "peak_memory_mb"),
            r.get("verdict", r.get("failure", "")),
        )
    console.print(check)
    if "refit" in validation:
        console.print(f"refitted predictor: {validation['refit']['predictor']}")


def _pair(row: dict[str, Any], column: str) -> str:
    predicted, measured = row.get(f"predicted_{column}"), row.get(f"measured_{column}")
    if predicted is None or measured is None:
        return "–"
    return f"{predicted:.3g} / {measured:.3g}"
