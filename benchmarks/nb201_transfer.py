"""The NB201 transfer matrix: a latency predictor trained on one device, scored on every other.

Per device setting: a latency CascadeBlend on ``--train`` random architectures (features at batch
1: a column's batch is part of its device setting). Every predictor then predicts the
architectures none of them trained on; per (source, target) pair: Spearman ρ and R² of log
latency against the target's measurements (a constant factor between devices does not hurt ρ,
it does hurt R²). Writes the heat map ``benchmarks/nb201_transfer.png``.

    .venv/bin/python benchmarks/nb201_transfer.py --data ../shared/data/nb201-latency/nb201_latency.csv

Records its result in benchmarks/RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

from infercast import space
from infercast.predictors import CascadeBlend
from infercast.predictors.data import feature_frame
from infercast.predictors.sources import source_log_predictions
from results import machine, record, stamp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="path to nb201_latency.csv")
    parser.add_argument("--train", type=int, default=1000)
    parser.add_argument("--n-estimators", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    started = time.perf_counter()
    table = pd.read_csv(args.data)
    devices = [c for c in table.columns if c not in ("arch_index", "arch")]
    configs = pd.DataFrame({"cell": table["arch"].to_numpy(dtype=object), "batch": 1})
    x = feature_frame(space.get("nb201").features(configs), {"threads": 1})
    rng = np.random.default_rng(args.seed)
    train = np.sort(rng.choice(len(table), args.train, replace=False))
    test = np.setdiff1d(np.arange(len(table)), train)
    sources = []
    for device in devices:
        blend = CascadeBlend(
            order=("latency",),
            n_estimators=args.n_estimators,
            forest_estimators=args.n_estimators // 2,
            seed=args.seed,
            n_jobs=1,
        )
        sources.append(
            blend.fit(x.iloc[train], pd.DataFrame({"latency_ms": table[device].to_numpy()[train]}))
        )
        print(f"{device} trained", flush=True)
    predicted = source_log_predictions(sources, x.iloc[test], "latency")
    truth = np.log(table[devices].to_numpy(dtype=np.float64)[test])
    rho = np.empty((len(devices), len(devices)))
    r2 = np.empty_like(rho)
    for i in range(len(devices)):
        for j in range(len(devices)):
            rho[i, j] = stats.spearmanr(predicted[:, i], truth[:, j]).statistic
            spread = np.sum((truth[:, j] - truth[:, j].mean()) ** 2)
            r2[i, j] = 1 - np.sum((truth[:, j] - predicted[:, i]) ** 2) / spread
    elapsed = time.perf_counter() - started

    fig, ax = plt.subplots(figsize=(13, 11))
    image = ax.imshow(rho, vmin=0.5, vmax=1.0, cmap="viridis")
    ax.set_xticks(range(len(devices)), devices, rotation=90)
    ax.set_yticks(range(len(devices)), devices)
    ax.set(
        xlabel="scored on",
        ylabel="trained on",
        title="NB201: Spearman ρ of a predictor trained on one device",
    )
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    figure = Path(__file__).with_name("nb201_transfer.png")
    fig.savefig(figure, dpi=70)

    off = ~np.eye(len(devices), dtype=bool)
    lines = [
        f"## NB201: transfer matrix across the 27 device settings ({stamp()})",
        "",
        "Command: `.venv/bin/python benchmarks/nb201_transfer.py "
        "--data ../shared/data/nb201-latency/nb201_latency.csv`  ",
        f"Machine: {machine()}; {elapsed:.0f} s. One latency CascadeBlend per device on the same "
        f"{args.train} random architectures (seed {args.seed}); every pair scored on the other "
        f"{len(test)}. Heat map of all 27 × 27 Spearman ρ: `benchmarks/nb201_transfer.png`.",
        "",
        "| scored on | own predictor ρ | best other source | its ρ | its R² (log) "
        "| median ρ of the other 26 | median R² (log) of the other 26 |",
        "|---|---|---|---|---|---|---|",
    ]
    for j, device in enumerate(devices):
        others = [i for i in range(len(devices)) if i != j]
        best = max(others, key=lambda i: rho[i, j])
        lines.append(
            f"| {device} | {rho[j, j]:.3f} | {devices[best]} | {rho[best, j]:.3f} | {r2[best, j]:.3f} | "
            f"{np.median(rho[others, j]):.3f} | {np.median(r2[others, j]):.3f} |"
        )
    lines += [
        "",
        f"Over all 702 ordered pairs of different devices: median Spearman ρ {np.median(rho[off]):.3f} "
        f"(10th percentile {np.percentile(rho[off], 10):.3f}), median R² of log latency "
        f"{np.median(r2[off]):.3f}: rankings carry across devices far better than values do — the "
        "reason `infercast adapt` recalibrates a source instead of using it as is.",
        "",
    ]
    record(lines)


if __name__ == "__main__":
    main()
