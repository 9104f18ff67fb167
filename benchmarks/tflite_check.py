"""TFLite files in: the usc-mobile networks converted to ``.tflite`` by a real converter
(``tools/tflite_convert.py``: PyTorch → ONNX → onnx2tf, fp32), predicted on the 90 phone settings
from the file and from the PyTorch network it came from (``pytorchcv:NAME``), and both against
usc-mobile's measurements.

The shipped phone predictors learned from all 102 networks, so the error against the measurement
is in-sample here (the cards hold the held-out figures); what this shows is that a converted file
reads as the network it came from: the same work, the same prediction, the same flags.

    .venv/bin/python benchmarks/tflite_check.py --tflite /tmp/usc_tflite --usc ../shared/data/usc-mobile

Records its result in RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from tools.tflite_convert import failed_conversions

from infercast.api.predicting import predict_devices
from infercast.models.capturing import capture_model
from infercast.predictors.devices import usc
from results import machine, record, stamp
from usc import e2e_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def kind_of(setting: str) -> str:
    if setting.endswith("/gpu"):
        return "GPU delegate"
    return "CPU int8" if setting.endswith("/int8") else "CPU fp32"


def column_of(setting: str) -> str:
    """``pixel4/gpu`` → ``pixel4|gpu|float``; ``s10/1large/int8`` → ``s10|1large|quant``."""
    parts = setting.split("/")
    return "|".join([parts[0], parts[1], "quant" if len(parts) == 3 else "float"])


def predictions(files: list[Path], settings: list[str]) -> pd.DataFrame:
    names = [f.stem for f in files]
    rows = []
    for source, models in (("file", [str(f) for f in files]), ("pytorch", [f"pytorchcv:{n}" for n in names])):
        results = predict_devices(models, settings)
        for i, result in enumerate(results):
            rows.append(
                {
                    "model": names[i // len(settings)],
                    "setting": result["device"],
                    "source": source,
                    "latency_ms": result["latency_ms"],
                    "ood": bool(result["ood"]),
                }
            )
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tflite", type=Path, required=True, help="a folder of NAME.tflite files")
    parser.add_argument("--usc", type=Path, default=Path("../shared/data/usc-mobile"))
    args = parser.parse_args()
    measured = e2e_table(args.usc)
    files = sorted(f for f in args.tflite.glob("*.tflite") if f.stem in measured.index)
    failed = failed_conversions(args.tflite)
    capture_s, macs = [], []
    for file in files:
        start = time.perf_counter()
        graph, _ = capture_model(str(file))
        capture_s.append(time.perf_counter() - start)
        source, _ = capture_model(f"pytorchcv:{file.stem}")
        macs.append(graph.macs / source.macs)
    settings = usc.names()
    table = predictions(files, settings)
    wide = table.pivot_table(index=["model", "setting"], columns="source", values=["latency_ms", "ood"])
    wide.columns = [f"{a}_{b}" for a, b in wide.columns]
    wide = wide.reset_index()
    wide["truth"] = [
        measured.at[m, column_of(s)] for m, s in zip(wide["model"], wide["setting"], strict=True)
    ]
    wide["kind"] = wide["setting"].map(kind_of)
    wide["agree"] = (wide["latency_ms_file"] / wide["latency_ms_pytorch"] - 1).abs()
    for source in ("file", "pytorch"):
        wide[f"error_{source}"] = (wide[f"latency_ms_{source}"] / wide["truth"] - 1).abs()

    lines = [
        f"## TFLite files in ({stamp()})",
        "",
        f"`PYTHONPATH=. .venv/bin/python benchmarks/tflite_check.py --tflite DIR` ({machine()}). "
        f"{len(files)} usc-mobile networks converted by `tools/tflite_convert.py` "
        f"(pytorchcv → ONNX → onnx2tf, fp32; {len(failed)} the converter failed on), each predicted on "
        f"the {len(settings)} phone settings from its `.tflite` file and from `pytorchcv:NAME`. "
        "Errors against usc-mobile's measurements are in-sample (the shipped settings learned from "
        "these networks; held-out figures are the cards').",
        "",
        f"- MACs of the file / of the PyTorch network: median {np.median(macs):.4f}, range "
        f"{min(macs):.4f}–{max(macs):.4f}; capture of a file: median {np.median(capture_s):.2f} s.",
        "",
        "| settings | rows | file vs PyTorch: median / max difference | flagged: file / PyTorch | "
        "median error vs measured: file / PyTorch |",
        "|---|---|---|---|---|",
    ]
    for kind, part in wide.groupby("kind"):
        agree = part["agree"]
        lines.append(
            f"| {kind} | {len(part)} | {100 * agree.median():.2f} % / {100 * agree.max():.1f} % | "
            f"{100 * part['ood_file'].mean():.0f} % / {100 * part['ood_pytorch'].mean():.0f} % | "
            f"{100 * part['error_file'].median():.1f} % / {100 * part['error_pytorch'].median():.1f} % |"
        )
    worst = wide.sort_values("agree", ascending=False).head(3)
    lines += [
        "",
        "Largest differences: "
        + "; ".join(f"{r.model} on {r.setting} {100 * r.agree:.1f} %" for r in worst.itertuples())
        + ".",
    ]
    if failed:
        lines.append(
            "Not converted: " + "; ".join(f"{f['model']} ({f['reason'][:80]})" for f in failed) + "."
        )
    record(lines)


if __name__ == "__main__":
    main()
