"""``infercast inspect``: a model's operator graph and analytic costs."""

from __future__ import annotations

from typing import Any

import typer

from infercast.cli import MODEL_HELP, Table, app, console, human_bytes, human_count, print_json, run_guarded


@app.command()
def inspect(
    model: str = typer.Argument(..., help=MODEL_HELP),
    input_shape: str | None = typer.Option(
        None, "--input-shape", help="e.g. 1x3x224x224 (default: the model's)"
    ),
    batch_size: int | None = typer.Option(None, "--batch-size", help="override the input's first dimension"),
    ops: bool = typer.Option(False, "--ops", help="also print the per-node table"),
    timeout_s: float = typer.Option(
        180.0, "--timeout-s", help="a model running your code (file.py:factory) must load within this"
    ),
    as_json: bool = typer.Option(False, "--json", help="print the stable JSON document instead of tables"),
) -> None:
    """Capture MODEL into an operator graph and print its FLOPs, parameters and memory."""
    from infercast.features import describe
    from infercast.models.capturing import capture_model

    def body() -> dict[str, Any]:
        graph, source = capture_model(model, input_shape, batch_size, timeout_s)
        return describe(graph, source)

    doc = run_guarded(body)
    if as_json:
        print_json(doc)
        return
    _print_summary(doc)
    if ops:
        _print_nodes(doc["nodes"])


def _print_summary(doc: dict[str, Any]) -> None:
    table = Table(title=f"{doc['model']}  (input {'x'.join(map(str, doc['input_shape']))}, {doc['dtype']})")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("FLOPs", human_count(doc["flops"])),
        ("MACs", human_count(doc["macs"])),
        ("parameters", f"{doc['params']:,}"),
        ("weight bytes", human_bytes(doc["weight_bytes"])),
        ("activation bytes (all tensors)", human_bytes(doc["activation_bytes"])),
        ("peak live activations", human_bytes(doc["peak_activation_bytes"])),
        ("depth (weighted layers)", f"{doc['features']['depth']:.0f}"),
        ("operators", str(doc["n_ops"])),
        ("captured with", doc["capture"]),
    ]
    for name, value in rows:
        table.add_row(name, value)
    console.print(table)


def _print_nodes(nodes: list[dict[str, Any]]) -> None:
    table = Table(title="operators in execution order")
    for column, justify in (
        ("#", "right"),
        ("name", "left"),
        ("kind", "left"),
        ("output", "left"),
        ("kernel/stride", "left"),
        ("params", "right"),
        ("FLOPs", "right"),
        ("read", "right"),
        ("written", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for node in nodes:
        attrs = node["attrs"]
        geometry = ""
        if "kernel" in attrs:
            geometry = "x".join(map(str, attrs["kernel"]))
            if "stride" in attrs:
                geometry += "/" + "x".join(map(str, attrs["stride"]))
        table.add_row(
            str(node["index"]),
            node["name"],
            node["kind"],
            "x".join(map(str, node["output_shapes"][0])) if node["output_shapes"] else "",
            geometry,
            f"{node['params']:,}" if node["params"] else "",
            human_count(node["flops"]) if node["flops"] else "",
            human_bytes(node["bytes_read"]) if node["bytes_read"] else "",
            human_bytes(node["bytes_written"]) if node["bytes_written"] else "",
        )
    console.print(table)
