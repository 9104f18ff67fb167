"""Peak memory of ONNX Runtime CPU sessions predicted from the graph (issue 46, item 5), scored on
the 36 real networks of ``benchmarks/real_networks.txt`` measured on this machine, which the
shipped memory model (``data/ort_cpu_memory.json``, fitted on design-space configs and kernel
networks) never saw.

    infercast measure $(grep -v '^#' benchmarks/real_networks.txt) --db DB --campaign real-here-a
    PYTHONPATH=. .venv/bin/python benchmarks/host_memory.py --db DB --truth real-here-a

Beside it: weights + the peak of live activations, input included (what a graph's features say), and
weights + arena + input without the fitted rest (what the allocator's arithmetic alone says).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from benchmarks.results import machine, record, stamp


def truth(db: str, campaign: str) -> tuple[pd.Series, dict]:
    """Each network's measured peak (bytes) and the fingerprint of the machine it was measured on."""
    from infercast.store import Store

    with Store(db, readonly=True) as store:
        frame = store.measurements()
        platforms = store.platforms().set_index("id")
    frame = frame[(frame["campaign"] == campaign) & frame["peak_memory_bytes"].notna()]
    frame = frame.drop_duplicates("model", keep="last")
    fingerprint = platforms.loc[frame["platform_id"].iloc[0], "fingerprint"]
    return frame.set_index("model")["peak_memory_bytes"].astype(float), fingerprint


def described(fingerprint: dict) -> str:
    processor = fingerprint.get("processor", {})
    return f"{fingerprint.get('cpu')}, family {processor.get('family')}, model {processor.get('model')}"


def scores(
    measured: np.ndarray, predicted: np.ndarray, low: np.ndarray, high: np.ndarray
) -> dict[str, float]:
    from sklearn.metrics import r2_score

    error = np.abs(predicted / measured - 1)
    return {
        "r2": float(r2_score(measured, predicted)),
        "median": float(np.median(error)),
        "within_10": float(np.mean(error <= 0.10)),
        "coverage": float(np.mean((measured >= low) & (measured <= high))),
        "half_width": float(np.median((high - low) / 2 / predicted)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="a store with the real networks measured here")
    parser.add_argument("--truth", default="real-here-a")
    args = parser.parse_args()
    from infercast.models.capturing import capture_model
    from infercast.predictors.devices.local import load_memory_model
    from infercast.predictors.host_memory import memory_features
    from infercast.units import BYTES_PER_MB as MB

    started = time.monotonic()
    peak, here = truth(args.db, args.truth)
    block = int(here.get("nchwc_block") or 0)
    graphs = [capture_model(model)[0] for model in peak.index]
    features = memory_features(graphs, block)
    measured = peak.to_numpy() / MB
    model = load_memory_model()
    predicted = model.predict(features)
    naive = np.array([g.weight_bytes + g.peak_activation_bytes for g in graphs]) / MB
    arithmetic = features[["weights", "arena", "input"]].sum(axis=1) / MB
    nan = np.full(len(measured), np.nan)
    rows = {
        "weights + peak of live activations (input included)": scores(measured, naive, nan, nan),
        "weights + arena + input (no fitted rest)": scores(measured, arithmetic.to_numpy(), nan, nan),
        "the shipped model (`predict --device local`)": scores(
            measured,
            *(
                predicted[c].to_numpy()
                for c in ("peak_memory_mb", "peak_memory_mb_low", "peak_memory_mb_high")
            ),
        ),
    }
    error = predicted["peak_memory_mb"].to_numpy() / measured - 1
    worst = np.argsort(-np.abs(error))[:5]
    provenance = model.provenance_
    lines = [
        f"## Peak memory on this CPU from the graph ({stamp()})",
        "",
        "`PYTHONPATH=. .venv/bin/python benchmarks/host_memory.py "
        f"--db DB --truth {args.truth}` ({machine()}; "
        f"{time.monotonic() - started:.0f} s). ONNX Runtime CPU, 1 thread, blocked layout of {block} "
        f"channels; {len(measured)} pytorchcv networks at 1×3×224×224, the heap a session holds after "
        f"its runs, measured {peak.min() / MB:.0f}–{peak.max() / MB:.0f} MB on {described(here)}. The model: "
        f"{provenance['source']}; fingerprint {described(provenance['fingerprint'])}.",
        "",
        "| prediction | R² | median error | within ±10 % | 90 % cover | median half-width |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in rows.items():
        cover = "–" if np.isnan(s["coverage"]) or name != list(rows)[-1] else f"{s['coverage']:.0%}"
        width = "–" if cover == "–" else f"±{s['half_width']:.0%}"
        lines.append(
            f"| {name} | {s['r2']:.3f} | {s['median']:.1%} | {s['within_10']:.0%} | {cover} | {width} |"
        )
    lines += [
        "",
        "Largest errors of the shipped model: "
        + ", ".join(f"{peak.index[i].split(':')[-1]} {error[i]:+.0%}" for i in worst)
        + ".",
    ]
    record(lines)


if __name__ == "__main__":
    main()
