"""Few-shot adaptation on NAS-Bench-201 latency, next to HELP's published Spearman ρ.

Sources: one latency CascadeBlend per HELP meta-training device (the nine HELP meta-trains on),
each trained on ``--source-train`` random architectures. Targets: HELP's meta-test devices. Per
target and k: choose k architectures (``spread`` = k-centre over the sources' predictions, ``random``
= uniform, averaged over ``--seeds`` draws, and HELP's own 10 reference architectures), fit
``infercast.predictors.Adapted`` on their measured latency, and score Spearman ρ / ±10 % on every
other architecture. Each device's features are computed at batch 1: the batch of a NB201 column
is part of the device setting, not of the architecture.

    .venv/bin/python benchmarks/nb201_adapt.py --data ../shared/data/nb201-latency/nb201_latency.csv

Records its result in benchmarks/RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from infercast import space
from infercast.predictors import Adapted, CascadeBlend, regression_metrics, select_configs
from infercast.predictors.data import feature_frame
from infercast.predictors.sources import source_log_predictions
from results import machine, record, stamp

HELP_SOURCES = [
    *("1080ti_1", "1080ti_32", "1080ti_256", "silver_4114", "silver_4210r"),
    *("samsung_a50", "pixel3", "essential_ph_1", "samsung_s7"),
]
HELP_TARGETS = {
    "titan_rtx_1": 0.987,
    "gold_6226": 0.989,
    "pixel2": 0.802,
    "raspi4": 0.890,
    "eyeriss": 0.940,
    "fpga": 0.985,
}
HELP_REFERENCES = (11982, 431, 55, 9, 14451, 8636, 9881, 13479, 6196, 1462)


def _score(model: Adapted, x: pd.DataFrame, p: np.ndarray, truth: np.ndarray, held: np.ndarray) -> dict:
    predicted = model.predict(x.iloc[held], ood="none", source_log={"latency": p[held]})["latency_ms"]
    return regression_metrics(truth[held], predicted.to_numpy())


def _adapt(sources, x, p, truth, chosen, seed):
    y = pd.DataFrame({"latency_ms": truth[chosen]})
    model = Adapted(sources, seed=seed).fit(x.iloc[chosen], y, source_log={"latency": p[chosen]})
    held = np.setdiff1d(np.arange(len(x)), chosen)
    return _score(model, x, p, truth, held)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="path to nb201_latency.csv")
    parser.add_argument("--source-train", type=int, default=900, help="architectures per source device")
    parser.add_argument("--ks", type=int, nargs="*", default=[5, 10, 20, 50])
    parser.add_argument("--seeds", type=int, default=5, help="random draws averaged for 'random'")
    parser.add_argument("--n-estimators", type=int, default=300)
    parser.add_argument("--n-jobs", type=int, default=1)
    args = parser.parse_args()

    started = time.perf_counter()
    table = pd.read_csv(args.data)
    index = pd.Index(table["arch_index"])
    configs = pd.DataFrame({"cell": table["arch"].to_numpy(dtype=object), "batch": 1})
    x = feature_frame(space.get("nb201").features(configs), {"threads": 1})
    rng = np.random.default_rng(0)
    sources = []
    for device in HELP_SOURCES:
        rows = np.sort(rng.choice(len(table), args.source_train, replace=False))
        blend = CascadeBlend(
            order=("latency",),
            n_estimators=args.n_estimators,
            forest_estimators=args.n_estimators // 2,
            n_jobs=args.n_jobs,
        )
        sources.append(blend.fit(x.iloc[rows], pd.DataFrame({"latency_ms": table[device].to_numpy()[rows]})))
        print(f"source {device} trained", flush=True)
    p = source_log_predictions(sources, x, "latency")
    references = index.get_indexer(list(HELP_REFERENCES))

    lines_rows = []
    for device, published in HELP_TARGETS.items():
        truth = table[device].to_numpy(dtype=np.float64)
        row: dict[str, object] = {"device": device, "help": published}
        row["mean source ρ"] = regression_metrics(truth, np.exp(p.mean(axis=1)))["spearman"]
        row["help refs k=10"] = _adapt(sources, x, p, truth, np.sort(references), 0)["spearman"]
        for k in args.ks:
            spread = select_configs(sources, x, k, "spread", source_log=p)
            scored = _adapt(sources, x, p, truth, spread, 0)
            row[f"spread k={k}"] = scored["spearman"]
            row[f"spread ±10% k={k}"] = scored["within_10pct"]
            draws = [
                _adapt(sources, x, p, truth, select_configs(sources, x, k, "random", seed=s), s)["spearman"]
                for s in range(args.seeds)
            ]
            row[f"random k={k}"] = float(np.mean(draws))
        lines_rows.append(row)
        print(row, flush=True)
    elapsed = time.perf_counter() - started

    ks = args.ks
    head = (
        "| target device | HELP ρ (10 samples) | ours, HELP's 10 refs | "
        + " | ".join(f"ours spread k={k}" for k in ks)
        + " | "
        + " | ".join(f"random k={k}" for k in ks)
        + " | mean of sources, k=0 |"
    )
    lines = [
        f"## NB201: few-shot adaptation to a new device vs HELP ({stamp()})",
        "",
        "Command: `.venv/bin/python benchmarks/nb201_adapt.py "
        "--data ../shared/data/nb201-latency/nb201_latency.csv`  ",
        f"Machine: {machine()}; {elapsed:.0f} s. Sources: HELP's 9 meta-training devices, one latency "
        f"CascadeBlend each on {args.source_train} random architectures ({args.n_estimators} trees). "
        "Spearman ρ on every architecture of the target not among the k measured (15,625 − k); "
        f"random = mean of {args.seeds} draws.",
        "",
        head,
        "|" + "---|" * (4 + 2 * len(ks)),
    ]
    for row in lines_rows:
        cells = [row["device"], f"{row['help']:.3f}", f"{row['help refs k=10']:.3f}"]
        cells += [f"{row[f'spread k={k}']:.3f}" for k in ks]
        cells += [f"{row[f'random k={k}']:.3f}" for k in ks]
        cells.append(f"{row['mean source ρ']:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    spread10 = np.median([r["spread k=10"] for r in lines_rows]) if 10 in ks else float("nan")
    lines += [
        "",
        f"Median over the six targets: HELP {np.median(list(HELP_TARGETS.values())):.3f}, "
        f"ours with 10 spread samples {spread10:.3f}. ±10 % accuracy with spread k="
        + ", ".join(f"{k}: {np.median([r[f'spread ±10% k={k}'] for r in lines_rows]):.1%}" for k in ks)
        + " (median over targets).",
        "",
    ]
    record(lines)


if __name__ == "__main__":
    main()
