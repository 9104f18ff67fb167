"""Build the device tables shipped in ``infercast/predict/devices/data`` from the public data.

    python -m infercast.api.device_tables --usc ../shared/data/usc-mobile \\
        --nb201 ../shared/data/nb201-latency/nb201_latency.csv

usc-mobile: captures each of the 102 pytorchcv networks here (``pretrained=False``, 224×224; about
30 s), computes its device features and keeps its family and the mean latency of each of the 90
settings (µs there, ms here), and its GPU op rows (``tflite_gpu.op_rows``). NB201: a random
1,000 cells (seed 0) with their 27 latencies, and their ``nb201`` space features at the three
batch sizes the devices ran (1, 32, 256). No raw file is copied; the tables are derived and carry
the sources' attribution (``data/ATTRIBUTION.md``). A workflow over ``models``, ``space`` and
``predict``: the predict stage itself only reads the tables.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from infercast.predict.devices import nb201, tflite_gpu, usc
from infercast.predict.devices.common import data_file
from infercast.predict.devices.features import device_features

NB201_CELLS = 1000


def usc_row(model: str) -> dict[str, float | str]:
    """The shipped row of one usc-mobile network: family, size and device features."""
    from infercast.models.guarded import capture_model

    graph, _ = capture_model(f"pytorchcv:{model}", (1, 3, usc.INPUT_SIDE, usc.INPUT_SIDE))
    return {
        "model": model,
        "family": usc.family(model),
        "gflops": graph.flops / 1e9,
        "mparams": graph.params / 1e6,
        **device_features(graph),
    }


def usc_table(folder: Path) -> pd.DataFrame:
    from rich.progress import track

    raw = pd.read_csv(folder / "tflite_cnn_e2e.csv").set_index("model")
    rows = [usc_row(str(m)) for m in track(list(raw.index), description="capturing usc-mobile networks")]
    table = pd.DataFrame(rows).set_index("model")
    means = [c for c in raw.columns if c.endswith("|mean")]
    latency = raw[means] / 1e3
    latency.columns = [usc.LATENCY_PREFIX + usc.device_name(c.removesuffix("|mean")) for c in means]
    return table.join(latency.astype(np.float32))


def nb201_table(csv: Path, seed: int = 0) -> pd.DataFrame:
    raw = pd.read_csv(csv)
    pick = np.sort(np.random.default_rng(seed).choice(len(raw), NB201_CELLS, replace=False))
    devices = [c for c in raw.columns if c not in ("arch_index", "arch")]
    return (
        raw.iloc[pick][["arch", *devices]].reset_index(drop=True).astype(dict.fromkeys(devices, np.float32))
    )


def nb201_features(cells: list[str], batch: int) -> pd.DataFrame:
    """The ``nb201`` space's feature vectors of ``cells`` at ``batch`` (``FEATURE_NAMES``)."""
    from infercast import space
    from infercast.features import FEATURE_NAMES

    configs = pd.DataFrame({"cell": np.asarray(cells, dtype=object), "batch": batch})
    return space.get("nb201").features(configs)[list(FEATURE_NAMES)]


def nb201_feature_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Features of the shipped cells at every batch size a device ran (``arch`` beside them)."""
    batches = sorted({nb201.batch_of(name.removeprefix(nb201.PREFIX)) for name in nb201.names(cells)})
    frames = [
        nb201_features(cells["arch"].tolist(), b).assign(arch=cells["arch"].to_numpy()) for b in batches
    ]
    return pd.concat(frames, ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--usc", type=Path, help="the usc-mobile folder")
    parser.add_argument("--nb201", type=Path, help="nb201_latency.csv")
    args = parser.parse_args()
    if args.usc:
        usc_table(args.usc).to_parquet(data_file(usc.TABLE))
        tflite_gpu.op_rows(args.usc).to_parquet(data_file(tflite_gpu.TABLE), index=False)
    if args.nb201:
        cells = nb201_table(args.nb201)
        cells.to_parquet(data_file(nb201.TABLE), index=False)
        nb201_feature_table(cells).to_parquet(data_file(nb201.FEATURES), index=False)


if __name__ == "__main__":
    main()
