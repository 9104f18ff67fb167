"""``infercast db``: what a store holds, and its export to Parquet / CSV."""

from __future__ import annotations

from pathlib import Path

import typer

from infercast.cli import app, console, print_json, run_guarded
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
        check_output_file(out, (".parquet", ".csv"))
        with Store(db, readonly=True) as store:
            rows = len(store.measurements())
            store.export(out)
        return {"db": str(db), "out": str(out), "measurements": rows}

    result = run_guarded(body)
    if as_json:
        print_json(result)
    else:
        console.print(f"wrote {result['measurements']:,} measurements to {out}")
