"""Measurement repeatability: the same configs measured in two campaigns, at least 30 minutes apart.

Run (the campaigns are separate calls, so the machine may do other work in between, as a user's
does between today's figure and next week's):

    .venv/bin/python benchmarks/measure_repeatability.py --phase first  [--n 30] [--db DB]
    # … at least 30 minutes later …
    .venv/bin/python benchmarks/measure_repeatability.py --phase second [--db DB]
    .venv/bin/python benchmarks/measure_repeatability.py --phase report [--db DB]

Each campaign takes sentinel passes (start, every ``--sentinel-every-s``, end). The report counts
how many second-campaign medians fall inside the first campaign's 95 % CI — the within-session CI
(what the protocol alone gives) and the session CI (within-session combined with the platform's
between-session spread from the sentinels, ``store.drift``) — their half-widths, and the
agreement of the low statistic; it records its result in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from infercast.measurement import CampaignSpec, Protocol, profile
from infercast.measurement.platform import cpu_model
from infercast.store import Store
from infercast.store.drift import estimate, session_intervals
from results import record

SPACE = str(Path(__file__).with_name("cpu-resnets.yaml"))
CAMPAIGNS = ("first", "second")


def run(args: argparse.Namespace) -> None:
    if args.phase == "first" and Path(args.db).exists():
        raise SystemExit(f"{args.db} exists: the first campaign starts a new store (remove it first)")
    protocol = Protocol(sentinel_every_s=args.sentinel_every_s)
    start = time.perf_counter()
    spec = CampaignSpec(SPACE, n=args.n, seed=args.seed, protocol=protocol, campaign=args.phase)
    summary = profile(spec, args.db, "ort-cpu", threads=1)
    seconds = time.perf_counter() - start
    print(json.dumps({**summary, "seconds": seconds}, indent=1, default=str))


def report(args: argparse.Namespace) -> None:
    with Store(args.db, readonly=True) as store:
        session = store.measurements()
        within_only = store.measurements(session_ci=False)
        drift = store.drift(session["platform_id"].iloc[0]).to_dict()
        sentinels = store.sentinels()
    # the session CI as it was reported right after the first campaign: its own sentinels only
    then = estimate(sentinels[sentinels["campaign"] == "first"])
    at_the_time = pd.concat(
        [
            session_intervals(within_only[within_only["campaign"] == "first"], then),
            session[session["campaign"] == "second"],
        ]
    )
    frames = {}
    for name, frame in (("session", session), ("within", within_only), ("then", at_the_time)):
        first = frame[frame["campaign"] == "first"]
        second = frame[frame["campaign"] == "second"]
        frames[name] = first.merge(second, on="config_id", suffixes=("_a", "_b"))
    both = frames["session"]
    gap_min = (both["created_at_b"].min() - both["created_at_a"].max()) / 60
    rows = []
    labels = (
        ("within", "within-session CI (the protocol alone)"),
        ("then", f"session CI right after the first campaign ({then.basis})"),
        ("session", f"session CI now ({drift['basis']})"),
    )
    for name, label in labels:
        joined = frames[name]
        inside = (
            (joined["median_ms_b"] >= joined["ci_low_ms_a"])
            & (joined["median_ms_b"] <= joined["ci_high_ms_a"])
        ).sum()
        width = np.median((joined["ci_high_ms_a"] - joined["ci_low_ms_a"]) / 2 / joined["median_ms_a"])
        rows.append(f"| {label} | {inside} of {len(joined)} ({inside / len(joined):.0%}) | {width:.2%} |")
    median_diff = np.abs(both["median_ms_b"] / both["median_ms_a"] - 1)
    low_diff = np.abs(both["low_ms_b"] / both["low_ms_a"] - 1)
    contended = int(both["contended_a"].sum() + both["contended_b"].sum())
    lines = [
        f"\n## Measurement repeatability with sentinels ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)\n",
        f"Commands: `.venv/bin/python benchmarks/measure_repeatability.py --phase first --n {args.n} "
        f"--seed {args.seed} --sentinel-every-s {args.sentinel_every_s:g}`, the same with `--phase second` "
        f"{gap_min:.0f} minutes after the first ended, then `--phase report`.  ",
        f"Machine: {cpu_model()}, {os.cpu_count()} cores, {platform.platform(terse=True)}; backend ort-cpu, "
        "1 thread, default protocol (0.3 s rounds, groups of 4 interleaved, CI target ±2 %, cap 15 s).  ",
        f"Sentinels: {len(sentinels)} readings in {drift['passes']} passes; between-session spread "
        f"{drift['spread_percent']:.2f} % ({drift['basis']}); low statistic's "
        + (f"{100 * np.expm1(drift['low_spread']):.2f} %" if drift["low_spread"] is not None else "n/a")
        + "; by sentinel size: "
        + ", ".join(f"{s['median_ms']:.3g} ms ±{100 * np.expm1(s['spread']):.1f} %" for s in drift["by_size"])
        + " (a measurement's spread is interpolated between them by its latency).",
        "",
        "| first campaign's 95 % CI | second-campaign medians inside | median half-width |",
        "|---|---|---|",
        *rows,
        "",
        "| quantity | value |",
        "|---|---|",
        f"| configs measured in both campaigns | {len(both)} |",
        f"| median \\|Δ\\| of the median between campaigns | {np.median(median_diff):.2%} "
        f"(p90 {np.percentile(median_diff, 90):.2%}) |",
        f"| median \\|Δ\\| of the low statistic (fastest round's median) "
        f"| {np.median(low_diff):.2%} (p90 {np.percentile(low_diff, 90):.2%}) |",
        f"| measurements flagged contended (both campaigns) | {contended} |",
        f"| median latency of the configs | {both['median_ms_a'].median():.2f} ms |",
        "",
    ]
    record(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--phase", choices=(*CAMPAIGNS, "report"), required=True)
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sentinel-every-s", type=float, default=60.0)
    parser.add_argument("--db", default="/tmp/infercast-repeatability.db")
    args = parser.parse_args()
    report(args) if args.phase == "report" else run(args)


if __name__ == "__main__":
    main()
