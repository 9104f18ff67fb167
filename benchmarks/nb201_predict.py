"""The model-level route on latency nobody here measured: NAS-Bench-201 on 27 device settings.

Per device setting: train a CascadeBlend (latency only) on ``--train`` architectures drawn at
random, test on all the others; report Spearman ρ, Kendall τ, ±10 % accuracy and MAPE next to
the FLOPs-proportional baseline. Features are the analytic vector of the ``nb201`` space.

    .venv/bin/python benchmarks/nb201_predict.py --data ../shared/data/nb201-latency/nb201_latency.csv

Records its result in benchmarks/RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from infercast import space
from infercast.predictors import CascadeBlend, FlopsProportional, regression_metrics
from infercast.predictors.data import feature_frame
from results import machine, record, stamp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="path to nb201_latency.csv")
    parser.add_argument("--train", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-estimators", type=int, default=300)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--devices", nargs="*", help="device columns (default: all 27)")
    args = parser.parse_args()

    table = pd.read_csv(args.data)
    devices = args.devices or [c for c in table.columns if c not in ("arch_index", "arch")]
    family = space.get("nb201")
    rng = np.random.default_rng(args.seed)
    train = np.sort(rng.choice(len(table), args.train, replace=False))
    test = np.setdiff1d(np.arange(len(table)), train)
    features_by_batch: dict[int, pd.DataFrame] = {}
    rows = []
    started = time.perf_counter()
    for device in devices:
        suffix = device.rsplit("_", 1)[-1]
        batch = int(suffix) if suffix in ("32", "256") else 1
        if batch not in features_by_batch:
            configs = pd.DataFrame({"cell": table["arch"].to_numpy(dtype=object), "batch": batch})
            features_by_batch[batch] = feature_frame(family.features(configs), {"threads": 1})
        x = features_by_batch[batch]
        y = pd.DataFrame({"latency_ms": table[device].to_numpy(dtype=np.float64)})
        blend = CascadeBlend(
            order=("latency",),
            n_estimators=args.n_estimators,
            forest_estimators=args.n_estimators // 2,
            seed=args.seed,
            n_jobs=args.n_jobs,
        ).fit(x.iloc[train], y.iloc[train])
        scores = blend.evaluate(x.iloc[test], y.iloc[test])["latency"]
        flops = FlopsProportional().fit(x.iloc[train], y["latency_ms"].to_numpy()[train])
        base = regression_metrics(y["latency_ms"].to_numpy()[test], flops.predict(x.iloc[test]))
        rows.append((device, scores, base))
        print(
            f"{device:>16}: spearman {scores['spearman']:.3f}  ±10% {scores['within_10pct']:.1%}  "
            f"FLOPs spearman {base['spearman']:.3f}",
            flush=True,
        )
    elapsed = time.perf_counter() - started

    lines = [
        f"## NB201: model-level route per device ({stamp()})",
        "",
        "Command: `.venv/bin/python benchmarks/nb201_predict.py "
        "--data ../shared/data/nb201-latency/nb201_latency.csv "
        f"--train {args.train} --n-estimators {args.n_estimators}`  ",
        f"Machine: {machine()}; {elapsed:.0f} s. "
        f"Train on {args.train} random architectures (seed {args.seed}), test on the other {len(test)}.",
        "",
        "| device | Spearman ρ | Kendall τ | ±10 % | median APE | 90 % coverage | FLOPs ρ | FLOPs ±10 % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for device, s, b in rows:
        lines.append(
            f"| {device} | {s['spearman']:.3f} | {s['kendall']:.3f} | {s['within_10pct']:.1%} | "
            f"{s['median_ape']:.1f} % | {s['coverage']:.1%} | {b['spearman']:.3f} | {b['within_10pct']:.1%} |"
        )
    spearman = [s["spearman"] for _, s, _ in rows]
    within = [s["within_10pct"] for _, s, _ in rows]
    lines += [
        "",
        f"Median over devices: Spearman {np.median(spearman):.3f}, ±10 % {np.median(within):.1%}. "
        "Phones recorded at 1 ms resolution (pixel2, samsung_*, essential_ph_1) cap ±10 % for fast cells; "
        "median APE, not MAPE, because a few hundred cells of only 'none' / skip ops run in < 0.5 ms.",
        "",
    ]
    record(lines)


if __name__ == "__main__":
    main()
