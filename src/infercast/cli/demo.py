"""``infercast demo``: the main job, run on the embedded default (local CPU, no services)."""

from __future__ import annotations

import time
from typing import Any

import typer
from rich.progress import Progress

from infercast.cli import Table, app, console, human_bytes, human_count, print_json, run_guarded

DEMO_MODELS = ("pytorchcv:resnet18", "pytorchcv:mobilenetv2_w1", "pytorchcv:efficientnet_b0")
FALLBACK_MODELS = ("torchvision:resnet18", "torchvision:mobilenet_v2", "torchvision:efficientnet_b0")


@app.command()
def demo(
    candidates: int = typer.Option(1_000_000, "--candidates", help="carb-resnet configurations to featurise"),
    as_json: bool = typer.Option(False, "--json", help="print the results as JSON"),
) -> None:
    """Inspect three zoo CNNs and featurise a million carb-resnet candidates in closed form.

    Profiling, prediction, screening and the report join this command as they land.
    """
    from infercast import space
    from infercast.features import describe
    from infercast.graph import capture
    from infercast.models import load_model, zoo

    models = DEMO_MODELS if zoo.available("pytorchcv") else FALLBACK_MODELS

    def body() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        rows = []
        with Progress(console=console, transient=True, disable=as_json) as progress:
            task = progress.add_task("capturing operator graphs", total=len(models) + 1)
            for spec in models:
                started = time.perf_counter()
                loaded = load_model(spec)
                doc = describe(capture(loaded), loaded.source)
                doc["capture_seconds"] = round(time.perf_counter() - started, 3)
                doc.pop("nodes")
                rows.append(doc)
                progress.advance(task)
            progress.update(task, description=f"featurising {candidates:,} carb-resnet candidates")
            resnets = space.get("carb-resnet")
            started = time.perf_counter()
            configs = resnets.sample(candidates, seed=0)
            sampled = time.perf_counter()
            table = resnets.features(configs)
            done = time.perf_counter()
            progress.advance(task)
        summary = {
            "space": resnets.name,
            "candidates": candidates,
            "sample_seconds": round(sampled - started, 3),
            "features_seconds": round(done - sampled, 3),
            "gflops_median": float(table["flops"].median() / 1e9),
            "peak_activation_mb_median": float(table["peak_activation_bytes"].median() / 1e6),
        }
        return rows, summary

    rows, summary = run_guarded(body)
    if as_json:
        print_json({"stages": ["graph", "space"], "models": rows, "space": summary})
        return
    table = Table(
        title="infercast demo: analytic costs of three CNNs (input 1x3x224x224, CPU, no weights downloaded)"
    )
    for column in (
        "model",
        "params",
        "FLOPs",
        "weights",
        "peak activations",
        "depth",
        "captured with",
        "seconds",
    ):
        table.add_column(column, justify="left" if column in ("model", "captured with") else "right")
    for doc in rows:
        table.add_row(
            doc["model"],
            f"{doc['params']:,}",
            human_count(doc["flops"]),
            human_bytes(doc["weight_bytes"]),
            human_bytes(doc["peak_activation_bytes"]),
            f"{doc['features']['depth']:.0f}",
            doc["capture"],
            f"{doc['capture_seconds']:.2f}",
        )
    console.print(table)
    console.print(
        f"Featurised {summary['candidates']:,} {summary['space']} candidates in closed form in "
        f"{summary['features_seconds']:.2f} s (sampling them: {summary['sample_seconds']:.2f} s); "
        f"median {summary['gflops_median']:.2f} GFLOPs, median peak activations "
        f"{summary['peak_activation_mb_median']:.1f} MB."
    )
    console.print(
        "Built so far: model graphs, design spaces and the measurement engine; this run measured and "
        "predicted nothing. Try [bold]infercast inspect pytorchcv:resnet18 --ops[/], "
        "[bold]infercast space show carb-resnet[/] or [bold]infercast measure pytorchcv:resnet18[/]."
    )
