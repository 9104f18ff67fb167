"""What a kernel campaign adds: the op-wise route trained on design-space profiles alone vs on the
same profiles plus a kernel campaign (``infercast profile --kernels``), scored on real networks
never trained on (benchmarks/real_networks.txt measured in two campaigns: truth and noise).

    .venv/bin/python benchmarks/kernel_campaign.py --db DB \\
        --campaign DESIGN_CAMPAIGN [--campaign …] --kernels KERNELS[+KERNELS…] [--kernels …] \\
        --real-a real-a --real-b real-b [--latency-stat steady_ms]

``--latency-stat`` is what both training and truth read (``low_ms`` by default; ``steady_ms``:
``low_ms`` at the host's usual speed by the campaigns' sentinel passes, ``store.drift``).
Every predictor (design-space profiles alone, and with each kernel campaign) goes through
``infercast train`` (``api.train``) with the same seed; a kernel campaign's networks only add op
rows to the kernel regressors. Per latency route of each predictor
(blend, op-wise, blend + op-wise, Σ cost × work, the geometric mean of blend, op-wise and Σ cost ×
work; ``train`` ranks them on its held-out configs and ``predict`` shows the first): median
|error|, ±10 %, Spearman, per architecture family. Records its result in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from infercast.api import predict_models, train
from infercast.datasets import LATENCY_STATS
from infercast.predictors import regression_metrics
from infercast.predictors.devices.usc import family
from infercast.store import Store
from results import family_table, machine, record, stamp


def _figures(truth: np.ndarray, predicted: np.ndarray) -> str:
    error = np.abs(predicted - truth) / truth
    spearman = regression_metrics(truth, predicted)["spearman"]
    return f"{np.median(error):.1%} | {np.mean(error <= 0.1):.0%} | {spearman:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--campaign", action="append", required=True, help="design-space campaign(s)")
    parser.add_argument(
        "--kernels",
        action="append",
        required=True,
        help="a kernel campaign, or several joined by + (repeat: each trained apart)",
    )
    parser.add_argument("--real-a", required=True)
    parser.add_argument("--real-b", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--latency-stat", default="low_ms", choices=LATENCY_STATS)
    args = parser.parse_args()

    started = time.perf_counter()
    with Store(args.db, readonly=True) as store:
        measured = store.measurements()
    a = measured[measured["campaign"] == args.real_a].drop_duplicates("model", keep="last").set_index("model")
    b = measured[measured["campaign"] == args.real_b].drop_duplicates("model", keep="last").set_index("model")
    models = [m for m in a.index if m in b.index]
    stat = args.latency_stat
    truth = a.loc[models, stat].to_numpy(dtype=np.float64)
    noise = np.abs(b.loc[models, stat].to_numpy(dtype=np.float64) - truth) / truth

    routes: dict[str, np.ndarray] = {}
    summaries = {}
    trainings = {"design-space profiles": args.campaign}
    trainings.update({f"+ {kernels}": [*args.campaign, *kernels.split("+")] for kernels in args.kernels})
    for label, campaigns in trainings.items():
        folder = Path(tempfile.mkdtemp(prefix="infercast-kernels-"))
        summaries[label] = train(
            args.db, folder, latency_stat=stat, campaigns=campaigns, seed=args.seed, progress=print
        )
        predicted = {r["model"]: r for r in predict_models(folder, models)}
        for route in predicted[models[0]]["routes"]:
            name = route["route"]
            routes[f"{name}, {label}"] = np.array(
                [next(r for r in predicted[m]["routes"] if r["route"] == name)["latency_ms"] for m in models]
            )
    families = np.array([family(m.removeprefix("pytorchcv:")) for m in models])

    lines = [
        "",
        f"## Kernel campaign → op-wise route on real networks ({stamp()})",
        "",
        "`.venv/bin/python benchmarks/kernel_campaign.py --db DB "
        + " ".join(f"--campaign {c}" for c in args.campaign)
        + "".join(f" --kernels {k}" for k in args.kernels)
        + f" --real-a {args.real_a} --real-b {args.real_b}"
        + ("" if stat == "low_ms" else f" --latency-stat {stat}")
        + f"` ({machine()}; "
        f"{time.perf_counter() - started:.0f} s). ONNX Runtime CPU, 1 thread; {len(models)} pytorchcv "
        f"networks at 1×3×224×224 never trained on; truth `{args.real_a}` (`{stat}`, as trained on), "
        f"noise "
        f"|`{args.real_b}` − `{args.real_a}`| / `{args.real_a}`. Kernel campaigns: "
        + "; ".join(f"`{k}` {summaries[f'+ {k}'].get('kernel_campaign', '–')}" for k in args.kernels)
        + ".",
        "",
        "| route | median abs. error | ±10 % | Spearman |",
        "|---|---|---|---|",
        f"| re-measurement noise | {np.median(noise):.1%} | {np.mean(noise <= 0.1):.0%} | – |",
        *(f"| {name} | {_figures(truth, values)} |" for name, values in routes.items()),
        "",
        "Per family (median abs. error; networks):",
        "",
        *family_table(families, truth, routes),
    ]
    lines += [
        "",
        "What `train` ranked on its held-out design-space configs (routes.json; predict shows the first):",
        "",
    ]
    for label, summary in summaries.items():
        held = summary["routes"]["held_out"]
        ranking = ", ".join(
            f"{r} {held[r]['median_abs_error_pct']:.1f} %" for r in summary["routes"]["order"]
        )
        lines.append(f"- {label}: {ranking} (median |error|, n = {next(iter(held.values()))['n']})")
    lines += [
        "",
        "Goal (issue 14): median |error| ≤ 4 %, ≥ 90 % within ±10 %, Spearman ≥ 0.99.",
    ]
    record(lines)


if __name__ == "__main__":
    main()
