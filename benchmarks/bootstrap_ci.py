"""The measurement engine's bootstrap CI of the pooled median, against its definition.

    .venv/bin/python benchmarks/bootstrap_ci.py [--repeats 5]

The engine checks the CI after every round from ``min_rounds`` on (300 resamples) and computes it
once more for the stored measurement (``Protocol.bootstrap``, 1,000); the worker waits meanwhile.
The definition concatenates each resample's rounds and takes its median; ``bootstrap_median_ci``
finds the same medians in the samples sorted once. Rounds are log-normal samples shaped like the
engine's: a 0.23 ms model in the default 0.3 s rounds (~1,300 samples a round), a 5 ms model (60),
the tests' short protocol (0.05 s rounds of a 0.2 ms model: 250) and a 5 µs kernel at the cap
(40 rounds of 75,000). Best of ``--repeats`` wall times, and the peak of what each allocates
beyond its input (``tracemalloc``, which sees numpy's buffers); the two must give the same
interval to the last digit. Records its result in RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from infercast.measurement.protocol import bootstrap_median_ci
from results import machine, record, stamp

CASES = (
    # (what, samples per round, rounds, resamples)
    ("0.23 ms model, default rounds: check at round 6", 1300, 6, 300),
    ("0.23 ms model, default rounds: check at round 30", 1300, 30, 300),
    ("0.23 ms model, default rounds: stored, 40 rounds", 1300, 40, 1000),
    ("5 ms model, default rounds: check at round 6", 60, 6, 300),
    ("5 ms model, default rounds: stored, 12 rounds", 60, 12, 1000),
    ("tests' short protocol: check at round 3", 250, 3, 300),
    ("5 µs kernel at the cap: check at round 40", 75000, 40, 300),
)


def by_definition(rounds: list[list[float]], resamples: int, rng: np.random.Generator) -> tuple[float, float]:
    arrays = [np.asarray(r) for r in rounds]
    picks = rng.integers(0, len(arrays), size=(resamples, len(arrays)))
    medians = [np.median(np.concatenate([arrays[i] for i in pick])) for pick in picks]
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


def best_of(function, rounds: list[list[float]], resamples: int, repeats: int) -> tuple[float, float, tuple]:
    """Best wall time, peak MB allocated, the interval."""
    times, result = [], ()
    for _ in range(repeats):
        start = time.perf_counter()
        result = function(rounds, resamples, np.random.default_rng(0))
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    function(rounds, resamples, np.random.default_rng(0))
    peak = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return min(times), peak, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    lines = [
        f"## Bootstrap CI of the pooled median: the engine's search against its definition ({stamp()})",
        "",
        f"`.venv/bin/python benchmarks/bootstrap_ci.py --repeats {args.repeats}` ({machine()}); best of "
        f"{args.repeats} wall times.",
        "",
        "| rounds | samples | resamples | definition s | bootstrap_median_ci s | speed-up "
        "| peak MB: definition / now | same interval |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for what, per_round, n_rounds, resamples in CASES:
        rounds = [rng.lognormal(0, 0.15, per_round).tolist() for _ in range(n_rounds)]
        slow, slow_peak, expected = best_of(by_definition, rounds, resamples, args.repeats)
        fast, fast_peak, got = best_of(bootstrap_median_ci, rounds, resamples, args.repeats)
        lines.append(
            f"| {what} | {per_round * n_rounds:,} | {resamples:,} | {slow:.4f} | {fast:.4f} | "
            f"{slow / fast:.0f}× | {slow_peak:.1f} / {fast_peak:.1f} | {'yes' if got == expected else 'NO'} |"
        )
    lines.append("")
    record(lines)


if __name__ == "__main__":
    main()
