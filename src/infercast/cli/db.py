"""``infercast db``: what a store holds, its export to Parquet / CSV, and the import of latencies
measured elsewhere."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from infercast.cli import Text, app, console, err_console, print_json, run_guarded
from infercast.paths import check_output_file

db_app = typer.Typer(help="The measurement store (a SQLite file).", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("export")
def export(
    db: Path = typer.Option(..., "--db", help="the store file"),
    out: Path = typer.Option(..., "--out", help="a .parquet or .csv file"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Write every measurement (joined with its config) to Parquet or CSV."""
    from infercast.store import Store

    def body() -> dict[str, object]:
        check_output_file(out, (".parquet", ".csv"), reads=(db,))
        with Store(db, readonly=True) as store:
            rows = len(store.measurements())
            store.export(out)
        return {"db": str(db), "out": str(out), "measurements": rows}

    result = run_guarded(body)
    if as_json:
        print_json(result)
    else:
        console.print(f"wrote {result['measurements']:,} measurements to {out}")


@db_app.command("import")
def import_(
    table: Path = typer.Argument(..., help="a .csv or .parquet table: model, latency_ms[, setting columns]"),
    device: str = typer.Option(..., "--device", help="the device it was measured on (your name for it)"),
    db: Path = typer.Option(Path("runs.db"), "--db", help="the store file (created when missing)"),
    backend: str = typer.Option("imported", "--backend", help="the runtime that ran it, e.g. tflite-gpu"),
    campaign: str | None = typer.Option(None, "--campaign", help="campaign name (default import:FILE)"),
    input_shape: str | None = typer.Option(None, "--input-shape", help="capture every model at this shape"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Import end-to-end latencies measured elsewhere (optional columns: std_ms, n, peak_memory_mb,
    energy_j; any other column is a platform setting), so train and adapt can learn from them."""
    from infercast.api.importing import import_measurements

    def body() -> dict[str, object]:
        columns = (TextColumn("capturing the models"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=err_console, disable=as_json, transient=True) as bar:
            task = bar.add_task("capture", total=None)

            def progress(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            return import_measurements(db, table, device, backend, campaign, input_shape, progress=progress)

    result = run_guarded(body)
    if as_json:
        print_json(result)
        return
    for platform in result["platforms"]:
        console.print(
            f"platform {platform['id']} ({result['backend']}, {platform['settings'] or 'no settings'}): "
            f"{platform['rows']} new measurements",
            highlight=False,
        )
    console.print(f"{result['stored']} stored, {result['already_stored']} already in {db}", highlight=False)
    for model, failure in result["not_captured"].items():
        console.print(Text.assemble(("skipped", "yellow"), f" {model}: {failure['reason']}"), highlight=False)
