"""Screening speed: stage 1 on a million carb-resnet candidates vs the per-model route.

Stage 1 = closed-form features in chunks + the predictor's fast models + the margin-aware budget
filter (``infercast.screen.stage_one``). The per-model route builds each candidate's module (on
the meta device: no weights, no arithmetic) and counts its FLOPs with ``FlopCounterMode`` — what
a FLOPs-based screen does — timed on ``--per-model`` candidates and extrapolated. Both run in
this one process.

    .venv/bin/python benchmarks/screen_speed.py --predictor PREDICTOR_DIR

Records its result in benchmarks/RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from infercast import screen, space
from infercast.predictors import CascadeBlend
from results import machine, record, stamp


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predictor", required=True)
    parser.add_argument("--space", default="carb-resnet")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--per-model", type=int, default=20)
    parser.add_argument("--max-latency-ms", type=float, default=20.0)
    parser.add_argument("--max-memory-mb", type=float, default=100.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    predictor = CascadeBlend.load(args.predictor)
    budgets = screen.Budgets(max_latency_ms=args.max_latency_ms, max_memory_mb=args.max_memory_mb)
    sampling, stage1 = [], []
    report = {}
    for repeat in range(args.repeats):
        started = time.perf_counter()
        candidates = screen.from_space(args.space, args.n, seed=repeat)
        sampled = time.perf_counter()
        _, report, _ = screen.stage_one(predictor, candidates, budgets, risk=0.05)
        sampling.append(sampled - started)
        stage1.append(time.perf_counter() - sampled)
        print(f"repeat {repeat}: sampling {sampling[-1]:.2f} s, stage 1 {stage1[-1]:.2f} s", flush=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    family = space.get(args.space)
    sample = family.sample(args.per_model, seed=99)
    torch.set_num_threads(os.cpu_count() or 1)
    started = time.perf_counter()
    for _, row in sample.iterrows():
        config = {p.name: row[p.name] for p in family.params}
        module = family.build(config, device="meta")  # no weights, no arithmetic: only the count
        dtype = next(module.parameters()).dtype
        with torch.no_grad(), FlopCounterMode(display=False):
            module(torch.zeros(family.input_shape(config), dtype=dtype, device="meta"))
    per_model = (time.perf_counter() - started) / args.per_model
    total = np.median(sampling) + np.median(stage1)
    ratio = per_model * args.n / total

    lines = [
        f"## Screening speed: stage 1 vs the per-model route ({stamp()})",
        "",
        f"Command: `.venv/bin/python benchmarks/screen_speed.py --predictor DIR --n {args.n} "
        f"--per-model {args.per_model}`  ",
        f"Machine: {machine()}, "
        f"torch {torch.__version__}. Predictor: {args.predictor} (fast models: "
        f"{predictor.fast_estimators} trees per target). Budgets: {budgets.active()}, risk 0.05.",
        "",
        "| route | candidates | seconds | candidates / s |",
        "|---|---|---|---|",
        f"| sampling (median of {args.repeats}) | {args.n:,} | {np.median(sampling):.2f} | "
        f"{args.n / np.median(sampling):,.0f} |",
        f"| stage 1: features + fast prediction + filter (median of {args.repeats}) | {args.n:,} | "
        f"{np.median(stage1):.2f} | {args.n / np.median(stage1):,.0f} |",
        f"| sampling + stage 1 | {args.n:,} | {total:.2f} | {args.n / total:,.0f} |",
        f"| per model: build (meta) + FlopCounterMode ({args.per_model} timed, extrapolated) | {args.n:,} | "
        f"{per_model * args.n:,.0f} | {1 / per_model:.2f} |",
        "",
        f"Stage 1 removed {report['removed_by']} and kept {report['survivors']:,} "
        f"({report['elimination_rate']:.1%} eliminated). Peak RSS of the whole process (torch, the "
        f"predictor, {args.repeats} repeat(s) included): {peak_mb:,.0f} MB. Sampling + stage 1 is "
        f"{ratio:,.0f}× faster than the per-model route.",
        "",
    ]
    record(lines)


if __name__ == "__main__":
    main()
