"""Fit the shipped peak-memory model of ONNX Runtime CPU sessions (``predictors.host_memory``)
from networks measured on this machine, and write ``data/ort_cpu_memory.json``.

    infercast measure $(cat MODELS) --db DB --campaign memory-fit --round-s 0.05 --min-rounds 1
    python tools/memory_fit.py --db DB --campaign memory-fit

MODELS are design-space configs and kernel networks (``space:carb-resnet?…``,
``space:mobile-nas?…``, ``space:kernels?…``), never complete zoo networks: those measured on a
host are its test set (``benchmarks/host_memory.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from infercast.predictors.host_memory import HostMemory, memory_features
from infercast.units import BYTES_PER_MB

OUT = Path(__file__).parents[1] / "src/infercast/predictors/devices/data/ort_cpu_memory.json"
ZOOS = ("pytorchcv:", "timm:", "torchvision:")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--campaign", required=True)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    from infercast.models.capturing import capture_model
    from infercast.store import Store

    with Store(args.db, readonly=True) as store:
        frame = store.measurements()
        platforms = store.platforms()
    frame = frame[(frame["campaign"] == args.campaign) & frame["peak_memory_bytes"].notna()]
    frame = frame.drop_duplicates("model", keep="last")
    if frame.empty:
        sys.exit(f"{args.db}: campaign {args.campaign!r} holds no measurement with a peak memory")
    if frame["model"].str.startswith(ZOOS).any():
        sys.exit("the campaign holds complete zoo networks: they are a host's test set, never its training")
    if frame["platform_id"].nunique() > 1:
        sys.exit(f"campaign {args.campaign!r} was measured on several platforms: fit one machine at a time")
    fingerprint = platforms.set_index("id").loc[frame["platform_id"].iloc[0], "fingerprint"]
    block = int(fingerprint.get("nchwc_block") or 0)
    graphs = [capture_model(model)[0] for model in frame["model"]]
    features = memory_features(graphs, block)
    peak = frame["peak_memory_bytes"].to_numpy(dtype=float)
    model = HostMemory().fit(features, peak)
    predicted = model.predict(features)
    error = np.abs(predicted["peak_memory_mb"].to_numpy() / (peak / BYTES_PER_MB) - 1)
    provenance = {
        "source": f"{len(frame)} design-space configs and kernel networks measured by `infercast measure` "
        f"(campaign {args.campaign}), the heap a session holds after its runs",
        "fingerprint": fingerprint,
        "nchwc_block": block,
        "fit_median_error": float(np.median(error)),
    }
    args.out.write_text(model.to_json(provenance) + "\n")
    print(
        f"{args.out}: {len(frame)} networks, lines (MB, MB per kernel) {model.lines_}, "
        f"median error {np.median(error):.1%} on them"
    )


if __name__ == "__main__":
    main()
