"""``infercast devices list | show``: the predictors shipped for devices you do not own."""

from __future__ import annotations

from typing import Any

import typer

from infercast.cli import Table, Text, app, console, print_json, run_guarded
from infercast.machine import WIDTH_FEATURES

devices_app = typer.Typer(
    help="Predictors shipped for devices you do not own (phones, GPUs, accelerators), with accuracy cards.",
    no_args_is_help=True,
)
app.add_typer(devices_app, name="devices")


def _pct(value: Any, digits: int = 0) -> str:
    return "–" if value is None else f"{value:.{digits}%}"


def _card_cells(card: dict[str, Any]) -> list[str]:
    if not card:
        return ["–"] * 4
    median = card.get("median_abs_error_pct")
    spearman = card.get("spearman")
    return [
        _pct(card.get("within_10pct")),
        "–" if median is None else f"{median:.1f} %",
        "–" if spearman is None else f"{spearman:.3f}",
        _pct(card.get("coverage")),
    ]


@devices_app.command("list")
def list_(
    contains: str | None = typer.Argument(
        None, help="show only names containing this (e.g. pixel4, gpu, nb201)"
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Every shipped device predictor, with its accuracy card (folds held out by architecture family)."""
    from infercast.predictors.devices import list_devices

    infos = run_guarded(list_devices)
    if contains:
        infos = [i for i in infos if contains in i.name]
    if as_json:
        print_json([i.to_dict() for i in infos])
        return
    table = Table(title=f"{len(infos)} shipped device predictors (`infercast devices show NAME` for one)")
    for column in ("name", "runtime", "dtype", "n", "±10 %", "median err", "Spearman", "90 % cover"):
        table.add_column(column, justify="left" if column in ("name", "runtime", "dtype") else "right")
    for info in infos:
        table.add_row(info.name, info.runtime, info.dtype, str(info.n_train), *_card_cells(info.card))
    console.print(table)


def machine_text(fingerprint: dict[str, Any]) -> str:
    """A host's fingerprint in one line: its CPU, generation, vector features, caches, runtime."""
    cpu = fingerprint.get("processor", {})
    isa = cpu.get("isa", {})
    parts = [
        cpu.get("model_name") or cpu.get("vendor") or "an unrecorded CPU",
        f"family {cpu['family']} model {cpu.get('model')}" if "family" in cpu else None,
        f"{cpu['logical_cpus']} logical CPUs" if "logical_cpus" in cpu else None,
        " ".join(f for f, present in isa.items() if present) or None,
        " ".join(f"no {f}" for f, present in isa.items() if not present and f in WIDTH_FEATURES) or None,
        f"L2 {cpu['l2_kib']} KiB, L3 {cpu.get('l3_kib')} KiB" if "l2_kib" in cpu else None,
        ", ".join(f"{k} {v}" for k, v in fingerprint.get("libraries", {}).items()) or None,
    ]
    return "; ".join(p for p in parts if p)


@devices_app.command("show")
def show(
    name: str = typer.Argument(..., help="a device name from `infercast devices list`, e.g. pixel4/gpu"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """One shipped device predictor: what it was measured on, with what, and how accurate it is."""
    from infercast.predictors.devices import device_info

    info = run_guarded(lambda: device_info(name))
    if as_json:
        print_json(info.to_dict())
        return
    for label, value in (
        ("name", info.name),
        ("device", info.device),
        ("runtime", info.runtime),
        ("setting", info.setting),
        ("dtype", info.dtype),
        ("predicts", info.accepts),
        ("trained on", f"{info.n_train} {info.trained_on}"),
        ("data", info.source),
    ):
        console.print(Text.assemble((label, "bold"), f": {value}"), highlight=False)
    if info.fingerprint:
        from infercast.api.predicting import machine_warning

        console.print(Text.assemble(("measured on", "bold"), f": {machine_text(info.fingerprint)}"))
        here = machine_warning(info)
        console.print(Text.assemble(("this machine", "bold"), ": " + (here or "nothing it records differs")))
    card = info.card
    if not card and info.name == "local":
        console.print("no accuracy card: benchmarks/calibrate.py scores calibrations on real networks")
        return
    if not card:
        console.print("no accuracy card (run benchmarks/device_cards.py)")
        return
    table = Table(title=f"accuracy card ({card['protocol']})")
    for column in ("predictor", "n", "±10 %", "median err", "Spearman", "90 % cover"):
        table.add_column(column, justify="left" if column == "predictor" else "right")
    from infercast.predictors.routes import LABELS

    table.add_row(LABELS.get(card.get("route", ""), "this predictor"), str(card["n"]), *_card_cells(card))
    for route, figures in card.get("other_routes", {}).items():
        table.add_row(f"  {LABELS.get(route, route)}", str(figures["n"]), *_card_cells(figures))
    for baseline, figures in card.get("baselines", {}).items():
        table.add_row(f"  {baseline} baseline", str(figures["n"]), *_card_cells(figures))
    for networks, split in card.get("splits", {}).items():
        table.add_row(f"  {networks}", str(split["shipped"]["n"]), *_card_cells(split["shipped"]))
    console.print(table)
    if card.get("latency_only"):
        console.print(f"latency only: {card['latency_only']}")
    if card.get("coverage_per_family") is not None:
        console.print(
            f"90 % cover per architecture family (each family once, the level the interval promises): "
            f"{_pct(card['coverage_per_family'])}"
        )
