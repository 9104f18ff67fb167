"""Measurement repeatability: the same configs measured in two independent campaigns.

Run: .venv/bin/python benchmarks/measure_repeatability.py [--n 30] [--db /tmp/repeat.db]
Reports how many second-campaign medians fall inside the first campaign's 95 % CI, the median
|difference| of the median and of the low statistic, and seconds per config; appends to
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from infercast.measure import profile
from infercast.measure.platform import cpu_model
from infercast.store import Store

SPACE = str(Path(__file__).with_name("cpu-resnets.yaml"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", default="/tmp/infercast-repeatability.db")
    args = parser.parse_args()
    Path(args.db).unlink(missing_ok=True)

    seconds = {}
    for campaign in ("first", "second"):
        start = time.perf_counter()
        summary = profile(SPACE, args.n, args.db, "ort-cpu", seed=args.seed, campaign=campaign, threads=1)
        seconds[campaign] = (time.perf_counter() - start) / max(summary["done"], 1)
        print(campaign, summary)
    with Store(args.db) as store:
        frame = store.measurements()
    first = frame[frame["campaign"] == "first"].set_index("config_id")
    second = frame[frame["campaign"] == "second"].set_index("config_id")
    both = first.join(second, lsuffix="_a", rsuffix="_b", how="inner")
    inside = (
        (both["median_ms_b"] >= both["ci_low_ms_a"]) & (both["median_ms_b"] <= both["ci_high_ms_a"])
    ).sum()
    median_diff = np.median(np.abs(both["median_ms_b"] / both["median_ms_a"] - 1))
    low_diff = np.median(np.abs(both["low_ms_b"] / both["low_ms_a"] - 1))
    p90_low = np.percentile(np.abs(both["low_ms_b"] / both["low_ms_a"] - 1), 90)
    ci_width = np.median((both["ci_high_ms_a"] - both["ci_low_ms_a"]) / 2 / both["median_ms_a"])
    lines = [
        f"\n## Measurement repeatability ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)\n",
        f"Command: `.venv/bin/python benchmarks/measure_repeatability.py --n {args.n} --seed {args.seed}`  ",
        f"Machine: {cpu_model()}, {os.cpu_count()} cores, {platform.platform(terse=True)}; backend ort-cpu, "
        "1 thread, default protocol (0.3 s rounds, groups of 4 interleaved, CI target ±2 %, cap 15 s)\n",
        "| quantity | value |",
        "|---|---|",
        f"| configs measured in both campaigns | {len(both)} of {args.n} sampled |",
        f"| second-campaign median inside the first campaign's 95 % CI | {inside} of {len(both)} |",
        f"| median \\|Δ\\| of the median between campaigns | {median_diff:.2%} |",
        f"| median \\|Δ\\| of the low statistic (fastest round's median) "
        f"| {low_diff:.2%} (p90 {p90_low:.2%}) |",
        f"| median 95 % CI half-width (first campaign) | {ci_width:.2%} |",
        f"| seconds per config (first / second) | {seconds['first']:.1f} / {seconds['second']:.1f} |",
        f"| median latency of the configs | {both['median_ms_a'].median():.2f} ms |",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    with Path(__file__).with_name("RESULTS.md").open("a") as handle:
        handle.write(text)


if __name__ == "__main__":
    main()
