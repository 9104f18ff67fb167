"""``infercast space``: list, show and sample design spaces."""

from __future__ import annotations

from pathlib import Path

import typer

from infercast.cli import Table, app, console, print_json, run_guarded

space_app = typer.Typer(
    help="Design spaces: families of networks to profile and screen.", no_args_is_help=True
)
app.add_typer(space_app, name="space")


@space_app.command("list")
def list_spaces(as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """The design spaces infercast knows."""
    from infercast import space

    rows = [
        {"name": n, "description": space.get(n).description, "size": space.get(n).size()}
        for n in space.names()
    ]
    if as_json:
        print_json(rows)
        return
    table = Table(title="design spaces")
    for column in ("name", "configurations", "description"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["name"], f"{row['size']:,}", row["description"])
    console.print(table)


@space_app.command("show")
def show(name: str, as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """A space's parameters and their allowed values."""
    from infercast import space
    from infercast.space.base import spell

    chosen = run_guarded(lambda: space.get(name))
    params = [
        {
            "name": p.name,
            "allowed": p.allowed,
            "count": len(p.choices),
            "default": spell(p.fallback),
            "help": p.help,
        }
        for p in chosen.params
    ]
    if as_json:
        print_json({"name": chosen.name, "description": chosen.description, "params": params})
        return
    table = Table(title=f"{chosen.name}: {chosen.description}")
    for column in ("parameter", "allowed values", "default", "meaning"):
        table.add_column(column)
    for p in params:
        table.add_row(p["name"], p["allowed"], str(p["default"]), p["help"])
    console.print(table)


@space_app.command("sample")
def sample(
    name: str,
    n: int = typer.Option(1000, "--n", help="number of configurations"),
    seed: int = typer.Option(0, "--seed"),
    stratified: bool = typer.Option(False, "--stratified", help="cycle every parameter's values evenly"),
    with_features: bool = typer.Option(
        False, "--features", help="add the closed-form features as f_* columns"
    ),
    out: Path | None = typer.Option(None, "--out", help="write a .parquet or .csv file"),
    as_json: bool = typer.Option(False, "--json", help="print JSON rows"),
) -> None:
    """Sample configurations of a space (one row each, with its id and space: model string)."""
    import pandas as pd

    from infercast import space
    from infercast.paths import check_output_file
    from infercast.tables import write_table

    def body() -> pd.DataFrame:
        if out is not None:
            check_output_file(out, (".parquet", ".csv"))
        chosen = space.get(name)
        frame = chosen.sample(n, seed, stratified)
        if with_features:
            # prefixed: a config's "depth" and "batch" differ from the feature columns of those names
            frame = pd.concat([frame, chosen.features(frame).add_prefix("f_")], axis=1)
        if out is not None:
            write_table(frame, out)
        return frame

    frame = run_guarded(body)
    if as_json:
        print_json(frame.to_dict(orient="records"))
    elif out is not None:
        console.print(f"wrote {len(frame):,} configurations to {out}")
    else:
        console.print(frame.head(20).to_string(index=False))
        if len(frame) > 20:
            console.print(f"… {len(frame) - 20:,} more rows (use --out to save them all)")
