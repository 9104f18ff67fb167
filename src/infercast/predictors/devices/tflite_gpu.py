"""The op-wise route for the six usc-mobile GPU settings: a network as the TFLite GPU delegate runs
it, one kernel per convolution (BatchNorm and activations folded, a residual add linked in),
pooling, global pooling, fully connected layer and concatenation — the rows usc-mobile measured
per op — then ``OpWise`` (kernel regressors + the overhead model) trained on those rows, shipped
trained (``ship`` zips it into the package, ``opwise`` loads it).

``op_rows(folder)`` reads usc-mobile's op file into that table (``build`` ships it as
``data/usc_gpu_ops.parquet``); ``graph_ops(graph)`` maps any captured graph onto the same rows,
so a user's network and the training networks are described alike; ``on_phone`` adds the
algorithm a phone's delegate runs each op with (Winograd 3×3 convolutions, ``winograd``). Ops
the delegate has no row for (element-wise ops and activations of their own, reshapes, shuffles)
are left out: their cost is in the overhead model's terms, as in training.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from infercast.graph import Graph
from infercast.predictors.devices.common import data_file, load_packed, routes_archive
from infercast.predictors.devices.common import ship as ship_trained
from infercast.predictors.fusion import TFLITE, kernel_table
from infercast.predictors.optable import SHAPE_COLUMNS, WEIGHTED_TYPES
from infercast.predictors.opwise import OpWise
from infercast.predictors.routes import OPWISE

TABLE = "usc_gpu_ops.parquet"
PHONES = ("pixel4", "s10", "mi8se", "a03s", "iphone7", "iphonexs")
OP_TYPES = {
    "CONV_2D": "conv",
    "DEPTHWISE_CONV_2D": "dwconv",
    "CONV_2D_GROUP": "gconv",
    "FULLY_CONNECTED": "linear",
    "MAX_POOL_2D": "pool_max",
    "AVERAGE_POOL_2D": "pool_avg",
    "MEAN": "global_pool",
    "CONCATENATION": "concat",
}
COLUMNS = ("model", "op_type", "kernel", *SHAPE_COLUMNS, "bytes")
# The delegate's choice of algorithm, read from usc-mobile's kernel names: on these phones every
# 3×3 stride-1 convolution with at least 16 slices of 4 channels in and out and at least 32 output
# tiles of 4×4 ran as `convolution_winograd` (170 of the 3,801 convolutions; ``winograd``
# reproduces every name, a test holds it to the shipped flags), on pixel4 and mi8se (Adreno) none.
# A Winograd kernel runs about twice the FLOP rate of a direct one (iphonexs: ~1,200–1,600 against
# ~620 GFLOP/s), so it is a kernel type of its own to the op-wise route.
WINOGRAD_PHONES = ("s10", "a03s", "iphone7", "iphonexs")
WINOGRAD = "winograd"


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def fp16_bytes(
    op: str,
    h_in: float,
    w_in: float,
    c_in: float,
    h_out: float,
    w_out: float,
    c_out: float,
    window: float,
    groups: float,
) -> float:
    """Bytes the delegate moves for one op in fp16: input and output activations, and weights."""
    weights = window * window * c_in * c_out / groups if op in WEIGHTED_TYPES else 0.0
    return 2 * (h_in * w_in * c_in + h_out * w_out * c_out + float(np.nan_to_num(weights)))


def _usc_row(model: str, operation: str, feature: dict[str, object]) -> dict[str, object]:
    op_type = OP_TYPES[operation]
    h_in, c_in = _number(feature["Input_shape"]), _number(feature["Input_channel"])
    h_out, filters = _number(feature["Output_shape"]), _number(feature["Filter"])
    kernel, stride, group = _number(feature["Kernel"]), _number(feature["Stride"]), _number(feature["Group"])
    groups, c_out = 1.0, c_in
    if op_type == "conv":
        c_out = filters
    elif op_type == "dwconv":  # Filter is the depth multiplier
        c_out, groups = c_in * filters, c_in
    elif op_type == "gconv":
        c_out, groups = filters, group
    elif op_type == "linear":  # shapes are vector lengths
        h_in, h_out, c_out, kernel, stride = 1.0, 1.0, filters, 1.0, 1.0
    elif op_type == "global_pool":  # Output_shape holds the channel count
        h_out, c_out, kernel, stride = 1.0, h_out, np.nan, np.nan
    elif op_type == "concat":  # Kernel is the number of inputs, Filter the output channels
        c_out, kernel, stride = filters, np.nan, np.nan
    return {
        "model": model,
        "op_type": op_type,
        "h_in": h_in,
        "w_in": h_in,
        "c_in": c_in,
        "h_out": h_out,
        "w_out": h_out,
        "c_out": c_out,
        "kernel_size": kernel,
        "stride": stride,
        "groups": groups,
        "flops": _number(feature["FLOPS"]),
        "bytes": fp16_bytes(op_type, h_in, h_in, c_in, h_out, h_out, c_out, kernel, groups),
    }


def winograd(ops: pd.DataFrame) -> np.ndarray:
    """Which op rows (``COLUMNS``) a delegate that chooses Winograd F(4×4, 3×3) runs with it."""
    slices_in, slices_out = np.ceil(ops["c_in"] / 4), np.ceil(ops["c_out"] / 4)
    tiles = np.ceil(ops["h_out"] / 4) * np.ceil(ops["w_out"] / 4)
    chosen = (ops["op_type"] == "conv") & (ops["kernel_size"] == 3) & (ops["stride"] == 1)
    return (chosen & (slices_in >= 16) & (slices_out >= 16) & (tiles >= 32)).to_numpy()


def on_phone(ops: pd.DataFrame, phone: str) -> pd.DataFrame:
    """``ops`` (``COLUMNS``) with the ``algorithm`` the phone's delegate runs each op with."""
    chosen = winograd(ops) if phone in WINOGRAD_PHONES else np.zeros(len(ops), dtype=bool)
    return ops.assign(algorithm=np.where(chosen, WINOGRAD, ""))


def op_rows(folder: str | Path) -> pd.DataFrame:
    """usc-mobile's ``tflite_cnn_ops_gpu.csv`` as an op table (``COLUMNS``, each op its own
    kernel) with ``latency_ms@<phone>`` per phone (µs there, ms here; NaN where the delegate ran
    no kernel for the op) and ``winograd@<phone>`` (the delegate ran a Winograd kernel)."""
    raw = pd.read_csv(Path(folder) / "tflite_cnn_ops_gpu.csv")
    table = pd.DataFrame(
        [_usc_row(str(r.model), str(r.operation), ast.literal_eval(str(r.feature))) for r in raw.itertuples()]
    )
    table["kernel"] = np.arange(len(table)).astype(str)
    for phone in PHONES:
        table[f"latency_ms@{phone}"] = pd.to_numeric(raw[f"{phone}|gpu|float"], errors="coerce") / 1e3
        table[f"winograd@{phone}"] = (
            raw[f"{phone}|gpu|kernel"].fillna("").str.startswith("convolution_winograd")
        )
    return table[[*COLUMNS, *(f"{c}@{p}" for p in PHONES for c in ("latency_ms", "winograd"))]]


def graph_ops(graph: Graph, model: str) -> pd.DataFrame:
    """The delegate's op rows of a captured graph, in ``op_rows``' columns."""
    table = kernel_table(graph, TFLITE, model=model)
    table = table[table["op_type"].isin(OP_TYPES.values())].reset_index(drop=True)
    rows = []
    for i, r in enumerate(table.itertuples(index=False)):
        op_type = str(r.op_type)
        h_in, w_in, h_out, w_out = (_number(v) for v in (r.h_in, r.w_in, r.h_out, r.w_out))
        kernel, stride = _number(r.kernel_size), _number(r.stride)
        if op_type == "linear":
            h_in = w_in = h_out = w_out = kernel = stride = 1.0
        elif op_type == "pool_avg" and (h_out, w_out) == (1.0, 1.0):
            # an average pool over the whole map: the converter emitted MEAN for 93 of usc-mobile's
            # networks (AVERAGE_POOL_2D for the MobileNet V2 / V3 ones)
            op_type, kernel, stride = "global_pool", np.nan, np.nan
        if op_type == "global_pool":
            h_out = w_out = 1.0
        if op_type == "dwconv" and h_out == np.ceil(h_in / stride):
            # the converter pads a depthwise input explicitly: the delegate reads the padded map
            h_in, w_in = h_in + kernel - 1, w_in + kernel - 1
        h_in, w_in = np.nan_to_num(h_in, nan=1.0), np.nan_to_num(w_in, nan=1.0)
        h_out, w_out = np.nan_to_num(h_out, nan=1.0), np.nan_to_num(w_out, nan=1.0)
        c_in, c_out = float(r.c_in), float(r.c_out)
        groups = 1.0 if pd.isna(r.groups) else float(r.groups)
        rows.append(
            {
                "model": model,
                "op_type": op_type,
                "kernel": f"{model}#{i}",
                "h_in": h_in,
                "w_in": w_in,
                "c_in": c_in,
                "h_out": h_out,
                "w_out": w_out,
                "c_out": c_out,
                "kernel_size": kernel,
                "stride": stride,
                "groups": groups,
                "flops": float(r.flops),
                "bytes": fp16_bytes(op_type, h_in, w_in, c_in, h_out, w_out, c_out, kernel, groups),
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))


@cache
def table() -> pd.DataFrame:
    """The shipped op rows of usc-mobile's 102 networks (``op_rows``)."""
    return pd.read_parquet(data_file(TABLE))


def training_ops(phone: str, models: list[str] | None = None) -> pd.DataFrame:
    """The op rows of one phone (``latency_ms``, the ``algorithm`` of ``on_phone``), of ``models``
    only when given."""
    ops = table()
    if models is not None:
        ops = ops[ops["model"].isin(models)]
    return on_phone(ops[list(COLUMNS)], phone).assign(latency_ms=ops[f"latency_ms@{phone}"].to_numpy())


# 400 boosting rounds per kernel type (the routes ship trained, so their training time is no
# user's): with families held out, more accurate on pixel4 than 150 rounds and as accurate on the
# others; 800 rounds gained a point at twice the size a phone (benchmarks/history/usc_opwise.md).
KERNEL_TREES = 400


def fit_opwise(phone: str, e2e: pd.Series, families: pd.Series, seed: int = 0) -> OpWise:
    """The op-wise predictor of a phone's GPU delegate from its op rows and the end-to-end latency
    ``e2e`` (ms, indexed by network): XGBoost kernels; the overhead forms stacked with weights
    learned with each of ``families`` (per network) held out whole, as a user's network of a
    family never seen is predicted."""
    ops = training_ops(phone, list(e2e.index))
    frame = pd.DataFrame({"model": e2e.index, "latency_ms": e2e.to_numpy(dtype=np.float64)})
    model = OpWise(kernel_learner="xgboost", n_estimators=KERNEL_TREES, seed=seed)
    return model.fit(ops, frame, groups=families)


def ship(name: str, e2e: pd.Series, families: pd.Series) -> Path:
    """Train the op-wise route of ``<phone>/gpu`` on all its networks and ship it zipped
    (``python tools/device_tables.py --usc …`` does, for every phone): training it on
    first use took 5–7 s of a first prediction's 10–15 s."""
    model = fit_opwise(name.split("/")[0], e2e, families)
    return ship_trained(
        lambda folder: model.save(folder, {"device": name, "route": OPWISE}), routes_archive(name)
    )


def opwise(name: str) -> OpWise:
    """The shipped op-wise predictor of ``<phone>/gpu``."""
    return load_packed(routes_archive(name), OpWise.load)
