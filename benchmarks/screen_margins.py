"""Screening's stage-1 margins before and after calibrating them near and far, on measured truth.

NAS-Bench-201 (``../shared/data/nb201-latency``): a predictor is trained on ``--train`` cells of
one device setting drawn from the smaller ones only (FLOPs up to the ``--profiled-quantile``
quantile — a user who profiled the cheap part of the space), then all 15,625 cells are screened
against a latency budget, as ``infercast screen`` does: stage 1 drops a cell when even
``fast · e^-margin`` exceeds the budget; the survivors are kept when the full blend predicts them
within it. With every cell's measured latency known, the benchmark counts

- **false rejects**: cells within budget that stage 1 dropped (the margin's job is to keep these
  near ``risk``), inside and beyond the profiled FLOPs range;
- **false accepts**: kept cells over budget;
- the elimination rate of stage 1,

with the margins as they were (``fast_plain_q``: the fast model's out-of-fold residual quantile,
one width everywhere) and as calibrated now (near and far residuals, widened by
``OODDetector.box_difficulty`` off the profiled ranges).

    .venv/bin/python benchmarks/screen_margins.py --data ../shared/data/nb201-latency/nb201_latency.csv

Records its result in benchmarks/RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import pandas as pd

from infercast import space
from infercast.predictors import CascadeBlend
from infercast.predictors.data import feature_frame
from results import machine, record, stamp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="path to nb201_latency.csv")
    parser.add_argument("--devices", nargs="*", default=["pixel3", "raspi4", "gold_6240", "titan_rtx_32"])
    parser.add_argument("--train", type=int, default=500)
    parser.add_argument("--profiled-quantile", type=float, default=0.6)
    parser.add_argument("--budget-quantile", type=float, default=0.7)
    parser.add_argument("--risk", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    table = pd.read_csv(args.data)
    nb201 = space.get("nb201")
    rows = []
    for device in args.devices:
        suffix = device.rsplit("_", 1)[-1]
        batch = int(suffix) if suffix in ("32", "256") else 1
        configs = pd.DataFrame({"cell": table["arch"].to_numpy(dtype=object), "batch": batch})
        x = feature_frame(nb201.features(configs), {"threads": 1})
        truth = table[device].to_numpy(dtype=np.float64)
        flops = x["flops"].to_numpy()
        profiled = flops <= np.quantile(flops, args.profiled_quantile)
        rng = np.random.default_rng(args.seed)
        train = np.sort(rng.choice(np.flatnonzero(profiled), args.train, replace=False))
        blend = CascadeBlend(order=("latency",), n_estimators=300, seed=args.seed)
        blend.fit(x.iloc[train], pd.DataFrame({"latency_ms": truth[train]}))
        budget = float(np.quantile(truth, args.budget_quantile))
        matrix = x[blend.feature_names_].to_numpy(dtype=np.float32)
        fast = blend.predict_fast(matrix)["latency"]
        full = blend.predict(x, ood="none")["latency_ms"].to_numpy()
        stage = blend.targets_["latency"]
        level = round((1 - 2 * args.risk) * 100)
        margins = {
            "before": np.full(len(x), stage.fast_plain_q[level - 1]),
            "after": blend.fast_margin("latency", args.risk, blend.ood_.box_difficulty(matrix)),
        }
        unseen = np.ones(len(x), dtype=bool)
        unseen[train] = False
        feasible = truth <= budget
        beyond = flops > flops[train].max()
        for name, margin in margins.items():
            rejected = fast * np.exp(-margin) > budget
            kept = ~rejected & (full <= budget)
            row = {"device": device, "margins": name, "budget_ms": budget}
            for part, rows_of in (("in range", unseen & ~beyond), ("beyond", unseen & beyond)):
                ok = rows_of & feasible
                row[f"false_rejects_{part}"] = (rejected & ok).sum() / max(ok.sum(), 1)
                row[f"feasible_{part}"] = int(ok.sum())
            row["false_accepts"] = (kept & unseen & ~feasible).sum() / max((kept & unseen).sum(), 1)
            row["eliminated"] = rejected[unseen].mean()
            row["median_margin_pct"] = float(np.expm1(np.median(margin)) * 100)
            rows.append(row)
            print(row, flush=True)
    lines = [
        f"\n## Screening margins before / after calibration: NB201 with measured truth ({stamp()})\n",
        "Command: `.venv/bin/python benchmarks/screen_margins.py " + " ".join(sys.argv[1:]) + "`  ",
        f"Machine: {machine()}. Per device: a cascade blend (latency, 300 trees) trained on {args.train} "
        f"cells drawn from those with FLOPs up to the {args.profiled_quantile:.0%} quantile; all other "
        f"cells screened against a budget at the {args.budget_quantile:.0%} quantile of the device's "
        f"measured latencies, risk {args.risk}. False rejects: feasible cells stage 1 dropped (share "
        "of the feasible ones, inside the profiled FLOPs range and beyond it); false accepts: share "
        "of the kept cells (stage 1 survivors the full blend puts within budget) that are over it.",
        "",
        "| device | margins | median margin | false rejects in range | false rejects beyond "
        "| false accepts | stage 1 eliminated |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['device']} | {r['margins']} | {r['median_margin_pct']:.1f} % | "
            f"{r['false_rejects_in range']:.1%} (of {r['feasible_in range']}) | "
            f"{r['false_rejects_beyond']:.1%} (of {r['feasible_beyond']}) | {r['false_accepts']:.1%} | "
            f"{r['eliminated']:.1%} |"
        )
    lines.append(f"\n{time.perf_counter() - started:.0f} s in all.")
    record(lines)


if __name__ == "__main__":
    main()
