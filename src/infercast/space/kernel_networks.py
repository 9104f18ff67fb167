"""``kernels``: networks of one executed kernel each — what a kernel campaign measures
(``infercast profile --kernels``), nn-Meter's idea done for our backends.

A config is one op at one shape: ``op`` (below), the input side ``side`` (square maps; a linear
layer reads a vector), channels ``cin`` → ``cout``, ``kernel``, ``stride``, ``groups`` and the
activation ``act`` fused after it (a backend runs conv + BatchNorm + activation as one kernel).
The op decides which of the other parameters mean something; the rest sit at one canonical value
(``check`` says which), so one kernel has one id.

ops: ``conv`` / ``dwconv`` / ``gconv`` (+ BatchNorm + ``act``), ``linear``, ``pool_max`` /
``pool_avg`` (``kernel``, ``stride``), ``global_pool``, ``se`` (squeeze-excitation: pool, 1×1
conv to ``cout`` channels + ReLU, 1×1 conv back + ``act`` gate, multiply), ``add`` (+ ``act``),
``concat`` (of ``cin`` and ``cout`` channels), ``act``, ``shuffle`` (channel shuffle in
``groups``), ``split`` (the two channel halves, ShuffleNet V2's), ``upsample`` (nearest, ×
``stride``).

Sampling draws shapes from those real CNNs execute (``data/kernel_shapes.parquet``: op and shape
of every kernel of a set of torchvision networks, shapes only, no timing; rebuilt by
``python tools/kernel_shapes.py``), each drawn shape moved to a random neighbour (channel
counts keep their granularity: a multiple of 8 stays one) so a campaign covers the space around
them, not only the exact points.
``features`` captures each network on the meta device (milliseconds: one op).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from infercast.space.base import Param, Space, SpaceError

if TYPE_CHECKING:
    from torch import nn

KERNEL_OPS = (
    "conv",
    "dwconv",
    "gconv",
    "linear",
    "pool_max",
    "pool_avg",
    "global_pool",
    "se",
    "add",
    "concat",
    "act",
    "shuffle",
    "split",
    "upsample",
)
# the activation fused after an op (``nets.kernels`` maps each to its module)
ACTIVATIONS = ("none", "relu", "relu6", "hswish", "hsigmoid", "sigmoid", "swish")
MAX_SIDE = 320
MAX_CHANNELS = 4096
SHAPES_TABLE = Path(__file__).with_name("data") / "kernel_shapes.parquet"
SHAPE_COLUMNS = ("op", "side", "cin", "cout", "kernel", "stride", "groups", "act")
_CONVS = ("conv", "dwconv", "gconv")
_GATES = ("sigmoid", "hsigmoid")


def canonical(config: dict[str, Any]) -> dict[str, Any]:
    """The values an op ignores, set to their canonical ones (``check`` refuses others)."""
    c = dict(config)
    op = c["op"]
    if op == "dwconv":
        c["groups"], c["cout"] = c["cin"], c["cin"]
    if op == "conv":
        c["groups"] = 1
    if op == "linear":
        c["side"] = 1
    if op not in (*_CONVS, "pool_max", "pool_avg"):
        c["kernel"] = 1
    if op not in (*_CONVS, "pool_max", "pool_avg", "upsample"):
        c["stride"] = 1
    if op not in ("gconv", "dwconv", "shuffle"):
        c["groups"] = 1
    if op == "split":
        c["groups"] = 2
    if op in ("pool_max", "pool_avg", "global_pool", "add", "act", "shuffle", "split", "upsample"):
        c["cout"] = c["cin"]
    if op not in (*_CONVS, "linear", "se", "add", "act"):
        c["act"] = "none"
    return c


def check_kernel(config: dict[str, Any]) -> None:
    """The cross-parameter rules of a ``kernels`` config (``Kernels.check``)."""
    op = config.get("op")
    if op not in KERNEL_OPS:
        return
    want = canonical(config)
    for key in ("side", "cout", "kernel", "stride", "groups", "act"):
        if config.get(key) != want[key]:
            raise SpaceError(f"op={op} takes {key}={want[key]}, got {key}={config.get(key)}")
    cin, cout, groups = config["cin"], config["cout"], config["groups"]
    if op == "gconv" and not (1 < groups < cin and cin % groups == 0 and cout % groups == 0):
        raise SpaceError(f"op=gconv needs 1 < groups < cin dividing cin and cout, got groups={groups}")
    if op in ("shuffle", "split") and cin % groups:
        raise SpaceError(f"op={op} needs cin divisible by groups={groups}, got cin={cin}")
    if op == "se" and config["act"] not in _GATES:
        raise SpaceError(f"op=se gates with act in {', '.join(_GATES)}, got act={config['act']}")
    if op == "act" and config["act"] == "none":
        raise SpaceError("op=act needs an activation: act=relu, hswish, …")


class Kernels(Space):
    name = "kernels"
    description = (
        "one executed kernel per network (conv, pools, SE, adds, concats, shuffles…) at real CNN shapes"
    )
    params = (
        Param("op", KERNEL_OPS, "the op (and what a backend fuses into it)"),
        Param.grid("side", 1, MAX_SIDE, 1, "input height = width (1 for linear)", default=56),
        Param.grid("cin", 1, MAX_CHANNELS, 1, "input channels (concat: the first input's)", default=64),
        Param.grid(
            "cout", 1, MAX_CHANNELS, 1, "output channels (se: squeezed; concat: the second's)", default=64
        ),
        Param("kernel", (1, 3, 5, 7, 9, 11), "window of a conv or pool", default=3),
        Param("stride", (1, 2, 4), "stride (upsample: scale)"),
        Param.grid("groups", 1, MAX_CHANNELS, 1, "groups of a grouped conv or channel shuffle"),
        Param("act", ACTIVATIONS, "activation after the op (se: its gate)"),
        Param("batch", (1,), "batch size"),
    )

    def check(self, config: dict[str, Any]) -> None:
        check_kernel(config)

    def valid_rows(self, frame: pd.DataFrame) -> np.ndarray:
        return _valid(frame)

    def draw_within(
        self, params: tuple[Param, ...], rng: np.random.Generator, n: int, stratified: bool
    ) -> dict[str, np.ndarray]:
        """``n`` kernels at shapes real CNNs execute (``kernel_shapes``), each moved to a random
        neighbour: channels and side by up to ±25 % in log scale (channels in steps of the largest
        of 8, 4, 2 dividing the harvested count), snapped to the nearest value of ``params``. Ops
        and activations ``params`` exclude are never drawn, nor are kernels whose canonical values
        fall outside ``params`` (drawn again). ``stratified`` does not apply: the real shapes'
        frequencies are the point."""
        return _draw_around(kernel_shapes(), params, rng, n, "harvested kernel shapes")

    def draw(self, rng: np.random.Generator, n: int, stratified: bool) -> dict[str, np.ndarray]:
        return self.draw_within(self.params, rng, n, stratified)

    def build(self, config: dict[str, Any], device: str = "cpu") -> nn.Module:
        from infercast.space.nets.kernel_networks import build

        return build(self.validate(config), device)

    def input_shape(self, config: dict[str, Any]) -> tuple[int, ...]:
        c = self.validate(config)
        if c["op"] == "linear":
            return (c["batch"], c["cin"])
        channels = c["cin"] + c["cout"] if c["op"] == "concat" else c["cin"]
        return (c["batch"], channels, c["side"], c["side"])

    def features(self, configs: pd.DataFrame | dict[str, Sequence[Any]]) -> pd.DataFrame:
        """``featurize(capture(build(c)))`` of every config, built on the meta device (one op: a
        few milliseconds each; no closed form is worth it for a campaign's few thousand)."""
        from infercast.features import FEATURE_NAMES, featurize
        from infercast.graph import capture

        frame = pd.DataFrame(configs)
        rows = []
        for config in frame[[p.name for p in self.params]].to_dict(orient="records"):
            rows.append(featurize(capture(self.build(config, "meta"), self.input_shape(config))))
        return pd.DataFrame(rows, columns=list(FEATURE_NAMES), index=getattr(configs, "index", None))


def sample_around(space: Space, shapes: pd.DataFrame, n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` kernels of ``space`` (``kernels`` or a YAML restriction of it) around ``shapes``
    (rows of kernel parameters), each drawn shape moved to a random neighbour as the sampler
    moves the harvested ones, with ``id`` and ``model``: what an adaptive kernel campaign
    measures next around the kernels its regressors predicted worst."""
    if space.string_name != "kernels":
        raise SpaceError(f"{space.name} is not the kernels space or a restriction of it")
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(_draw_around(shapes, space.params, rng, n, "the given kernels"))
    return space.with_ids(frame)


def _draw_around(
    shapes: pd.DataFrame, params: tuple[Param, ...], rng: np.random.Generator, n: int, what: str
) -> dict[str, np.ndarray]:
    """``n`` kernels moved from ``shapes`` (``_jittered``) that fall inside ``params``."""
    by_name = {p.name: p for p in params}
    usable = shapes["op"].isin(by_name["op"].choices) & shapes["act"].isin(by_name["act"].choices)
    shapes = shapes[usable.to_numpy()].reset_index(drop=True)
    if shapes.empty:
        raise SpaceError(f"none of {what} has an op and activation this space allows")
    kept: list[pd.DataFrame] = []
    for _ in range(100):
        drawn = _jittered(shapes, by_name, rng, 2 * n + 16)
        inside = np.ones(len(drawn), dtype=bool)
        for p in params:
            inside &= drawn[p.name].isin(p.choices).to_numpy()
        kept.append(drawn[inside])
        if sum(len(k) for k in kept) >= n:
            break
    else:
        raise SpaceError(f"too few of {what} fit the space's parameters")
    frame = pd.concat(kept, ignore_index=True).head(n)
    return {p.name: frame[p.name].to_numpy() for p in params}


def _snap(values: np.ndarray, choices: Sequence[Any]) -> np.ndarray:
    """Each value moved to the nearest allowed choice (ties to the lower)."""
    grid = np.asarray(choices, dtype=np.float64)
    if len(grid) == 1:
        return np.full(len(values), grid[0]).astype(np.int64)
    upper = np.clip(np.searchsorted(grid, values), 1, len(grid) - 1)
    nearer_lower = values - grid[upper - 1] <= grid[upper] - values
    return grid[np.where(nearer_lower, upper - 1, upper)].astype(np.int64)


def _granularity(values: np.ndarray) -> np.ndarray:
    """The largest of 8, 4, 2, 1 that divides each value."""
    step = np.ones(len(values))
    for size in (2, 4, 8):
        step = np.where(values % size == 0, size, step)
    return step


def _jittered(
    shapes: pd.DataFrame, by_name: dict[str, Param], rng: np.random.Generator, n: int
) -> pd.DataFrame:
    """``n`` harvested shapes drawn at random, moved and made canonical (see ``draw_within``)."""
    picked = shapes.iloc[rng.integers(0, len(shapes), n)].reset_index(drop=True)
    columns: dict[str, Any] = {"op": picked["op"].to_numpy(dtype=object)}
    for name in ("side", "cin", "cout"):
        values = picked[name].to_numpy(dtype=np.float64)
        jitter = np.exp(rng.uniform(np.log(0.75), np.log(1.25), n))
        # channels keep the granularity they had (a multiple of 8 stays one): a backend's fast
        # paths need it (ONNX Runtime's blocked layout: 8 channels), and a real CNN keeps to it
        step = _granularity(values) if name != "side" else np.ones(n)
        moved = np.maximum(step, np.round(values * jitter / step) * step)
        columns[name] = _snap(moved, by_name[name].choices)
    for name in ("kernel", "stride", "groups"):
        columns[name] = _snap(picked[name].to_numpy(dtype=np.float64), by_name[name].choices)
    columns["act"] = picked["act"].to_numpy(dtype=object)
    columns["batch"] = np.full(n, by_name["batch"].choices[0])
    fixed = pd.DataFrame([canonical(row) for row in pd.DataFrame(columns).to_dict(orient="records")])
    rows = (fixed["op"] == "gconv").to_numpy()
    if rows.any():
        groups = fixed.loc[rows, "groups"].to_numpy()
        for name in ("cin", "cout"):
            # a group's width keeps the granularity the harvested one had (ResNeXt's 4 and 8,
            # RegNet's 8, 16, 24 channels): ONNX Runtime's blocked layout takes a grouped
            # convolution only if each group fills whole blocks (16 channels with AVX-512)
            step = _granularity(picked.loc[rows, name].to_numpy() / picked.loc[rows, "groups"].to_numpy())
            width = np.maximum(step, np.round(fixed.loc[rows, name].to_numpy() / groups / step) * step)
            fixed.loc[rows, name] = (width * groups).astype(np.int64)
    # channels of a shuffle or split: a multiple of the groups, as such CNNs build them
    for op in ("shuffle", "split"):
        rows = (fixed["op"] == op).to_numpy()
        if rows.any():
            groups = fixed.loc[rows, "groups"].to_numpy()
            for name in ("cin", "cout"):
                # a shuffle or split keeps its channels: both counts follow the input's
                values = fixed.loc[rows, "cin"].to_numpy()
                fixed.loc[rows, name] = np.maximum(groups, np.round(values / groups) * groups).astype(
                    np.int64
                )
    return fixed[_valid(fixed)].reset_index(drop=True)


def _valid(frame: pd.DataFrame) -> np.ndarray:
    ok = np.ones(len(frame), dtype=bool)
    for i, row in enumerate(frame.to_dict(orient="records")):
        try:
            check_kernel(row)
        except SpaceError:
            ok[i] = False
    return ok


@cache
def kernel_shapes() -> pd.DataFrame:
    """The harvested kernel shapes (``SHAPE_COLUMNS`` and ``model``)."""
    if not SHAPES_TABLE.is_file():
        raise SpaceError(f"{SHAPES_TABLE} is missing: rebuild it with python tools/kernel_shapes.py")
    return pd.read_parquet(SHAPES_TABLE)
