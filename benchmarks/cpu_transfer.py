"""Transfer across the CPU platforms of one store, and few-shot adaptation to each.

1. The transfer matrix (``infercast.report.transfer.transfer_matrix``): per ordered pair of
   platforms, a cascade blend trained on one is scored on the other's held-out half of the shared
   configs (latency and peak memory).
2. Few-shot: the ``--source`` predictor (trained on the source platform) adapted to every other
   platform from k of its measured configs (``spread`` selection, and ``random`` averaged over 5
   draws), scored on that platform's other configs, next to the unadapted source and to a
   log-linear model (FLOPs, params, bytes) fitted on the same k configs from scratch.

    .venv/bin/python benchmarks/cpu_transfer.py --db DB --source PREDICTOR_DIR

Records its result in benchmarks/RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from infercast.datasets import training_data
from infercast.predictors import Adapted, LogLinear, regression_metrics, select_configs
from infercast.predictors.adapted import load_sources
from infercast.predictors.sources import source_log_predictions
from infercast.report.transfer import platform_label, transfer_matrix
from infercast.store import Store
from results import machine, record, stamp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--source", required=True, help="predictor directory of the source platform")
    parser.add_argument("--ks", type=int, nargs="*", default=[5, 10, 20, 50])
    parser.add_argument("--campaign", help="target campaign to adapt from / score on")
    args = parser.parse_args()

    started = time.perf_counter()
    matrix = transfer_matrix(args.db, progress=lambda m: print(m, flush=True))
    matrix_s = time.perf_counter() - started
    blends, _ = load_sources([args.source])
    source_id = blends[0].metadata_["platform"]["id"]
    with Store(args.db) as store:
        platforms = store.platforms().to_dict("records")
        targets = {
            platform_label(p): training_data(
                store, p["id"], campaigns=[args.campaign] if args.campaign else None
            )
            for p in platforms
            if p["id"] != source_id
        }
    rows = []
    for label, data in targets.items():
        truth = data.y["latency_ms"].to_numpy()
        p = source_log_predictions(blends, data.x, "latency")
        raw = regression_metrics(truth, np.exp(p[:, 0]))
        for k in args.ks:
            if k >= len(truth) - 5:
                continue
            results = {}
            for method, seeds in (("spread", [0]), ("random", range(5))):
                scores, scratch = [], []
                for seed in seeds:
                    chosen = select_configs(blends, data.x, k, method, seed=seed, source_log=p)
                    held = np.setdiff1d(np.arange(len(truth)), chosen)
                    fitted = Adapted(blends, seed=seed).fit(
                        data.x.iloc[chosen], data.y.iloc[chosen], source_log={"latency": p[chosen]}
                    )
                    guess = fitted.predict(data.x.iloc[held], ood="none", source_log={"latency": p[held]})
                    scores.append(regression_metrics(truth[held], guess["latency_ms"].to_numpy()))
                    base = LogLinear().fit(data.x.iloc[chosen], truth[chosen])
                    scratch.append(regression_metrics(truth[held], base.predict(data.x.iloc[held])))
                results[method] = {
                    m: float(np.mean([s[m] for s in scores])) for m in ("spearman", "mape", "within_10pct")
                }
                results[f"{method} scratch"] = {
                    m: float(np.mean([s[m] for s in scratch])) for m in ("spearman", "mape", "within_10pct")
                }
            rows.append((label, len(truth), k, raw, results))
            print(label, k, results, flush=True)
    elapsed = time.perf_counter() - started

    lines = [
        f"## CPU platforms: transfer matrix and few-shot adaptation ({stamp()})",
        "",
        "Command: `.venv/bin/python benchmarks/cpu_transfer.py --db DB --source PREDICTOR`  ",
        f"Machine: {machine()}; {elapsed:.0f} s ({matrix_s:.0f} s for the matrix). Platforms: "
        + ", ".join(sorted({*matrix["source"], *matrix["target_platform"]}))
        + ". Each of the other platforms measured the first configs of the same cpu-resnets sample "
        "(`infercast profile … --limit`).",
        "",
        "Transfer matrix (trained on the row platform, scored on the column platform's held-out half "
        "of the shared configs; slope = log-log slope of the measurements on the predictions, "
        "B / A = their median ratio):",
        "",
        "| target | trained on | scored on | n | R² | Spearman ρ | MAPE | slope | B / A |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in matrix.sort_values(["target", "source", "target_platform"]).itertuples():
        lines.append(
            f"| {r.target} | {r.source} | {r.target_platform} | {r.n} | {r.r2:.3f} | {r.spearman:.3f} | "
            f"{r.mape:.1f} % | {r.slope:.2f} | {r.median_ratio:.2f} |"
        )
    lines += [
        "",
        f"Few-shot latency adaptation of `{args.source}` (scored on each platform's configs not among "
        "the k; random = mean of 5 draws; scratch = log-linear on FLOPs, params, bytes fitted on the "
        "same k):",
        "",
        "| platform | k | unadapted ρ / MAPE | adapted, spread: ρ / MAPE / ±10 % | adapted, random: ρ / MAPE "
        "| scratch, spread: ρ / MAPE |",
        "|---|---|---|---|---|---|",
    ]
    for label, n, k, raw, res in rows:
        spread, rnd, scratch = res["spread"], res["random"], res["spread scratch"]
        lines.append(
            f"| {label} ({n} configs) | {k} | {raw['spearman']:.3f} / {raw['mape']:.1f} % | "
            f"{spread['spearman']:.3f} / {spread['mape']:.1f} % / {spread['within_10pct']:.1%} | "
            f"{rnd['spearman']:.3f} / {rnd['mape']:.1f} % | "
            f"{scratch['spearman']:.3f} / {scratch['mape']:.1f} % |"
        )
    lines.append("")
    record(lines)


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    main()
