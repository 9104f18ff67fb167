"""Closed-form featurisation speed of the design spaces vs the per-model route (build + capture).

carb-resnet is the screening space (target: >= 10^6 configs/s on one core); mobile-nas and nb201
are measured on --n-other configurations.

Run: .venv/bin/python benchmarks/featurize_speed.py [--n 1000000] [--repeats 5]
Records its result in benchmarks/RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from datetime import datetime, timezone

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the target is stated per core

import numpy as np

from infercast import capture, featurize
from infercast.space import get
from results import record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--per-model", type=int, default=20, help="configs built + captured one by one")
    parser.add_argument("--n-other", type=int, default=100_000, help="configs for mobile-nas and nb201")
    args = parser.parse_args()

    space = get("carb-resnet")
    frame = space.sample(args.n, seed=0)
    columns = {p.name: frame[p.name].to_numpy() for p in space.params}
    space.features(columns)  # warm-up: first-touch page faults are not featurisation
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        space.features(columns)
        times.append(time.perf_counter() - start)
    best, median = min(times), float(np.median(times))

    sample = frame.head(args.per_model)
    start = time.perf_counter()
    for _, row in sample.iterrows():
        config = {p.name: row[p.name] for p in space.params}
        featurize(capture(space.build(config, device="meta"), space.input_shape(config)))
    per_model = (time.perf_counter() - start) / len(sample)

    others = []
    for name in ("mobile-nas", "nb201"):
        other = get(name)
        configs = other.sample(args.n_other, seed=0)
        start = time.perf_counter()
        other.features(configs)
        others.append((name, time.perf_counter() - start))

    lines = [
        f"\n## carb-resnet featurisation ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)\n",
        f"Command: `.venv/bin/python benchmarks/featurize_speed.py --n {args.n} --repeats {args.repeats} "
        f"--per-model {args.per_model} --n-other {args.n_other}`  ",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, numpy {np.__version__}, OMP_NUM_THREADS=1\n",
        "| route (carb-resnet unless named) | configs | seconds | configs / s |",
        "|---|---|---|---|",
        f"| closed form, best of {args.repeats} | {args.n:,} | {best:.3f} | {args.n / best:,.0f} |",
        f"| closed form, median of {args.repeats} | {args.n:,} | {median:.3f} | {args.n / median:,.0f} |",
        f"| build (meta device) + torch.fx capture + features | {len(sample)} "
        f"| {per_model * len(sample):.2f} | {1 / per_model:,.1f} |",
        *(
            f"| {name}: closed form, one run | {args.n_other:,} | {secs:.3f} | {args.n_other / secs:,.0f} |"
            for name, secs in others
        ),
        f"\nClosed form / per-model speed-up: {per_model / (median / args.n):,.0f}x (median).\n",
    ]
    record(lines)


if __name__ == "__main__":
    main()
