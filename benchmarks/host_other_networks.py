"""The shipped host predictor (``epyc-2core/ort-cpu``) on CNNs from other zoos than its card's:
torchvision's and timm's implementations (``pretrained=False``, 1×3×224×224), measured on this machine now
(ONNX Runtime CPU, one thread, ``steady_ms``) and never trained on. Per network: the measured
latency, each route's error, whether the shipped route's 90 % interval holds it and whether it is
flagged ``ood``; then each route's median |error|, ±10 % and median signed error.

The shipped tables were measured on another VM of this kind, at another time: to tell that
machine's speed from the predictor's accuracy, seven of the shipped kernel networks (one-kernel
networks of its kernel campaigns, 2–20 ms) are measured in the same campaign, and their median
ratio now / shipped is this machine's speed against the tables'. Each route's errors are given as
they are and with the predictions scaled by that ratio (no zoo network is used for it).

    .venv/bin/python benchmarks/host_other_networks.py --db /tmp/torchvision.db

Measures what ``--db`` lacks (27 networks, about 3 minutes here); records its result in RESULTS.md.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

import infercast
from infercast.predictors.devices import hosts
from infercast.predictors.devices.common import data_file
from results import machine, record, stamp

MODELS = (
    "torchvision:convnext_tiny",
    "torchvision:googlenet",
    "torchvision:regnet_y_400mf",
    "torchvision:regnet_x_800mf",
    "torchvision:mnasnet0_5",
    "torchvision:shufflenet_v2_x0_5",
    "torchvision:mobilenet_v3_large",
    "torchvision:efficientnet_b1",
    "torchvision:resnext50_32x4d",
    "torchvision:alexnet",
    "torchvision:wide_resnet50_2",
    "torchvision:squeezenet1_1",
    "timm:convnext_nano",
    "timm:efficientnet_b0",
    "timm:regnety_008",
    "timm:resnet50d",
    "timm:ghostnet_100",
    "timm:repvgg_a0",
    "timm:dla34",
    "timm:hrnet_w18_small",
)
DEVICE = "epyc-2core/ort-cpu"
ROUTES = {
    "shipped": "latency_ms",
    "blend": "model_level_ms",
    "op-wise": "opwise_ms",
    "Σ cost × work": "physical_ms",
}


def anchors() -> pd.DataFrame:
    """Seven shipped kernel networks of 2–20 ms, spread over that range: model, latency_ms."""
    networks = pd.read_parquet(data_file(hosts.KERNEL_NETWORKS_FILE))
    mid = networks[networks["latency_ms"].between(2, 20)].sort_values("latency_ms", kind="stable")
    return mid.iloc[np.linspace(0, len(mid) - 1, 7).round().astype(int)][["model", "latency_ms"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="store of the measurements (measured when missing)")
    args = parser.parse_args()
    started = time.perf_counter()
    models = list(MODELS)
    reference = anchors()
    results = infercast.measure([*models, *reference["model"]], db=args.db, energy=False)
    measured = {r["model"]: r["steady_ms"] for r in results}
    speed = float(
        np.median([measured[m] / t for m, t in zip(reference["model"], reference["latency_ms"], strict=True)])
    )
    predicted = infercast.predict(models, device=DEVICE)
    errors = {route: [] for route in ROUTES}
    scaled = {route: [] for route in ROUTES}
    covered, rows = [], []
    for prediction in predicted:
        truth = measured[prediction["model"]]
        low, high = prediction["latency_ms_interval"]
        covered.append(low <= truth <= high)
        cells = []
        for route, key in ROUTES.items():
            error = prediction[key] / truth - 1
            errors[route].append(error)
            scaled[route].append(prediction[key] * speed / truth - 1)
            cells.append(f"{error * 100:+.1f} %")
        rows.append(
            f"| {prediction['model']} | {truth:.1f} | {' | '.join(cells)} | "
            f"{'yes' if covered[-1] else 'no'} | {'yes' if prediction['ood'] else 'no'} |"
        )
    summary = [
        f"| {route} | {np.median(np.abs(e)) * 100:.1f} % | {np.mean(np.abs(e) <= 0.1) * 100:.0f} % | "
        f"{np.median(e) * 100:+.1f} % | {np.median(np.abs(z)) * 100:.1f} % | "
        f"{np.mean(np.abs(z) <= 0.1) * 100:.0f} % |"
        for route, e, z in ((r, np.array(errors[r]), np.array(scaled[r])) for r in ROUTES)
    ]
    record(
        [
            "",
            f"## Host predictor on torchvision's and timm's CNNs ({stamp()})",
            "",
            f"`.venv/bin/python benchmarks/host_other_networks.py --db DB` ({machine()}; "
            f"{time.perf_counter() - started:.0f} s). `{DEVICE}` as shipped; {len(models)} torchvision "
            "and timm networks at 1×3×224×224 measured now (ONNX Runtime CPU, 1 thread, `steady_ms`), never "
            "trained on. "
            f"The shipped route's 90 % interval holds {sum(covered)} of {len(covered)}. This machine "
            f"against the shipped tables, from {len(reference)} of their kernel networks re-measured "
            f"in the same campaign: {speed:.3f}× their latency.",
            "",
            f"| network | measured (ms) | {' | '.join(ROUTES)} | in the interval | ood |",
            "|---|---|" + "---|" * (len(ROUTES) + 2),
            *rows,
            "",
            "| route | median abs. error | ±10 % | median signed error | median abs. error, scaled | "
            "±10 %, scaled |",
            "|---|---|---|---|---|---|",
            *summary,
        ]
    )


if __name__ == "__main__":
    main()
