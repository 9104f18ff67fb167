"""What the saved predictors in tests/saved/ learned from and are asked: synthetic tables of real
carb-resnet configs (tests/saved/build.py), the models predicted, the shipped devices asked."""

from __future__ import annotations

import numpy as np
import pandas as pd

PLATFORM = {
    "id": "savedplatform001",
    "backend": "ort-cpu",
    "settings": {"threads": 1, "opt_level": "all"},
    "fingerprint": {"cpu": "synthetic-test-cpu", "cores": 2},
}
SPACE = "carb-resnet"
N_CONFIGS = 40
SMALL = {
    "depth": list(range(8, 28)),
    "width": [0.1, 0.25, 0.4, 0.55],
    "input_size": [32, 64],
    "batch": [1, 2],
    "precision": ["fp32"],
}
ADAPT_ROWS = 12
MODELS = [
    "space:carb-resnet?batch=1&block=basic&depth=10&early_downsample=1&input_size=64&width=0.25",
    "space:carb-resnet?batch=2&block=basic&depth=14&early_downsample=0&input_size=32&width=0.5",
    "space:carb-resnet?batch=1&block=bottleneck&depth=26&early_downsample=1&input_size=64&width=0.5",
    # larger than any training config: the ood flags and the widened intervals are part of the output
    "space:carb-resnet?batch=4&block=bottleneck&depth=50&early_downsample=1&input_size=128&width=1.0",
]
DEVICES = ["epyc-2core/ort-cpu", "pixel4/gpu", "s10/1large", "s10/1large/int8"]
DEVICE_MODELS = MODELS[:2]


def _configs() -> pd.DataFrame:
    from infercast import space

    small = space.get(SPACE)
    for name, values in SMALL.items():
        small = space.restrict(small, name, values)
    configs = small.sample(N_CONFIGS, seed=11, stratified=True)
    return configs.drop_duplicates("id", ignore_index=True)


def _kernel_latency(table: pd.DataFrame) -> np.ndarray:
    """40 GFLOP/s, 4 GB/s and 10 µs a kernel, 3 % more for each 3×3 convolution's padding."""
    flops = table["flops"].to_numpy(dtype=np.float64)
    moved = table["bytes"].fillna(0).to_numpy(dtype=np.float64)
    padded = np.where(table["kernel_size"].fillna(1).to_numpy() == 3, 1.03, 1.0)
    return (flops / 40e6 + moved / 4e6 + 0.01) * padded


def tables() -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray, np.ndarray, pd.DataFrame, pd.DataFrame]:
    """Features, targets, config ids, model strings, op table (one row per executed op) and
    end-to-end table of the training configs."""
    from infercast import space
    from infercast.graph import capture
    from infercast.predictors.data import feature_frame
    from infercast.predictors.fusion import kernel_table, rules_for

    carb = space.get(SPACE)
    configs = _configs()
    x = feature_frame(carb.features(configs), PLATFORM["settings"])
    rules = rules_for(PLATFORM["backend"], PLATFORM["settings"], PLATFORM["fingerprint"])
    op_tables, e2e = [], []
    for config_id, row in zip(configs["id"], configs.to_dict("records"), strict=True):
        params = {p.name: row[p.name] for p in carb.params}
        graph = capture(carb.build(params, device="meta"), carb.input_shape(params))
        table = kernel_table(graph, rules, model=config_id)
        # a kernel's latency on its first op's row, as a profiler reports fused ops
        first = ~table.duplicated("kernel")
        table["latency_ms"] = np.where(first, _kernel_latency(table), np.nan)
        total = float(np.nansum(table["latency_ms"]))
        e2e.append(total * (1.05 + 0.002 * table["kernel"].nunique()))
        op_tables.append(table)
    ops = pd.concat(op_tables, ignore_index=True)
    memory = (x["weight_bytes"] + 2 * x["peak_activation_bytes"]) / 1e6
    y = pd.DataFrame({"latency_ms": e2e, "peak_memory_mb": memory.to_numpy()})
    ids, models = configs["id"].to_numpy(), configs["model"].to_numpy()
    return x, y, ids, models, ops, pd.DataFrame({"model": ids, "latency_ms": e2e})


def device_inputs() -> tuple[pd.DataFrame, np.ndarray]:
    """Device features of a dozen configs and their latency on an imagined device."""
    from infercast import space
    from infercast.graph import capture
    from infercast.predictors.devices.features import device_feature_frame

    carb = space.get(SPACE)
    configs = _configs().head(ADAPT_ROWS)
    graphs = []
    for row in configs.to_dict("records"):
        params = {p.name: row[p.name] for p in carb.params}
        graphs.append(capture(carb.build(params, device="meta"), carb.input_shape(params)))
    features = device_feature_frame(graphs)
    latency = 0.6 * features["gflops_conv"].to_numpy() * 30 + 0.05 * features["kernels"].to_numpy() + 0.2
    return features, latency
