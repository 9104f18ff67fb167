"""``infercast report``: one self-contained HTML file from a store (and a predictor)."""

from __future__ import annotations

from pathlib import Path

import typer

from infercast.cli import app, console, err_console, print_json, run_guarded


@app.command()
def report(
    db: Path = typer.Option(Path("runs.db"), "--db", help="the store to report on"),
    predictor: Path | None = typer.Option(None, "--predictor", help="also show this predictor's accuracy"),
    out: Path = typer.Option(Path("report.html"), "--out", help="the HTML file (PNG figures go beside it)"),
    transfer: bool = typer.Option(
        True, "--transfer/--no-transfer", help="train per-platform predictors for the transfer matrix"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the paths as JSON"),
) -> None:
    """Write the characterization report: scaling, memory composition, noise, the transfer matrix
    between platforms, predictor accuracy."""
    from infercast.report import build_report

    def body() -> Path:
        with err_console.status("plotting", spinner="dots") as status:
            return build_report(
                db, out, predictor, transfer, progress=None if as_json else lambda m: status.update(m)
            )

    path = run_guarded(body)
    figures = sorted(str(p) for p in (path.parent / f"{path.stem}_figures").glob("*.png"))
    if as_json:
        print_json({"report": str(path), "figures": figures})
        return
    console.print(
        f"report written to {path} ({len(figures)} figures in {path.parent / (path.stem + '_figures')})"
    )
