"""``carb-resnet``: the ResNet family CARB characterises.

Basic or Bottleneck blocks in four stages, depth 8–200 (standard layouts at 18/34/50/101/152/200,
proportional to 3-4-6-3 elsewhere), width multiplier 0.1–4.0, early down-sampling (7×7/2 stem +
3×3/2 max-pool) on or off (3×3/1 stem), square inputs of 32–224 px, batch 1–256, fp32/fp16/bf16.

The network (``nets.carb_resnet``, built from the numbers ``build`` decides here) and the
closed-form features (operator templates) describe the same network and must change together;
the parity test holds them equal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from infercast.features import FEATURE_NAMES
from infercast.space.base import Param, Space, SpaceError
from infercast.space.device_vector import Array, KernelTotals, blocked
from infercast.space.vector import Accumulator, as_columns, round_channels, scale_rows

if TYPE_CHECKING:
    from torch import nn

STAGE_CHANNELS = (64, 128, 256, 512)
NUM_CLASSES = 1000
CONVS_PER_BLOCK = {"basic": 2, "bottleneck": 3}
EXPANSION = {"basic": 1, "bottleneck": 4}
STANDARD_LAYOUTS = {
    ("basic", 18): (2, 2, 2, 2),
    ("basic", 34): (3, 4, 6, 3),
    ("bottleneck", 50): (3, 4, 6, 3),
    ("bottleneck", 101): (3, 4, 23, 3),
    ("bottleneck", 152): (3, 8, 36, 3),
    ("bottleneck", 200): (3, 24, 36, 3),
}
_PROPORTIONS = np.array([3, 4, 6, 3]) / 16


def layout(block: str, depth: int) -> tuple[int, int, int, int]:
    """Blocks per stage. depth = 2 (stem conv + classifier) + convs per block × blocks."""
    if (block, depth) in STANDARD_LAYOUTS:
        return STANDARD_LAYOUTS[(block, depth)]
    blocks = (depth - 2) // CONVS_PER_BLOCK[block]
    if blocks < 4:  # too shallow for four stages: the first ``blocks`` stages get one block each
        return tuple([1] * blocks + [0] * (4 - blocks))  # type: ignore[return-value]
    shares = blocks * _PROPORTIONS
    counts = np.maximum(1, np.floor(shares)).astype(int)
    for stage in np.argsort(-(shares - np.floor(shares)), kind="stable")[: blocks - counts.sum()]:
        counts[stage] += 1
    return tuple(int(c) for c in counts)  # type: ignore[return-value]


channels = round_channels


def _valid_depths(block: str) -> list[int]:
    return [d for d in range(8, 201) if (d - 2) % CONVS_PER_BLOCK[block] == 0]


class CarbResNet(Space):
    name = "carb-resnet"
    description = "ResNet-style networks (Basic/Bottleneck, depth 8-200, width 0.1-4.0), as in CARB"
    params = (
        Param("block", ("basic", "bottleneck"), "residual block type"),
        Param(
            "depth",
            tuple(range(8, 201)),
            "layers with weights in the standard count (stem conv + block convs + classifier)",
            "8–200; basic: even (2 + 2·blocks), bottleneck: 2 + 3·blocks",
            default=18,
        ),
        Param.grid("width", 0.1, 4.0, 0.05, "channel multiplier on 64-128-256-512", default=1.0),
        Param("early_downsample", (True, False), "7x7/2 stem + max-pool (1) or 3x3/1 stem (0)"),
        Param("input_size", (32, 64, 96, 128, 160, 192, 224), "square input side in pixels", default=224),
        Param("batch", (1, 2, 4, 8, 16, 32, 64, 128, 256), "batch size"),
        Param("precision", ("fp32", "fp16", "bf16"), "parameter and activation dtype"),
    )

    def check(self, config: dict[str, Any]) -> None:
        block, depth = config.get("block"), config.get("depth")
        if block in CONVS_PER_BLOCK and isinstance(depth, int) and (depth - 2) % CONVS_PER_BLOCK[block]:
            step = CONVS_PER_BLOCK[block]
            below = depth - (depth - 2) % step
            raise SpaceError(
                f"depth={depth} does not fit block={block}: depth = 2 + {step}·blocks, so the nearest "
                f"allowed depths are {', '.join(str(d) for d in (below, below + step) if 8 <= d <= 200)}"
            )

    def count(self, params: tuple[Param, ...]) -> int:
        by_name = {p.name: p.choices for p in params}
        pairs = sum((d - 2) % CONVS_PER_BLOCK[b] == 0 for b in by_name["block"] for d in by_name["depth"])
        return pairs * math.prod(len(c) for name, c in by_name.items() if name not in ("block", "depth"))

    def valid_rows(self, frame: pd.DataFrame) -> np.ndarray:
        # compared as a column: a categorical one compares its codes, not a million strings
        step = np.where((frame["block"] == "bottleneck").to_numpy(), 3, 2)
        return (frame["depth"].to_numpy().astype(np.int64) - 2) % step == 0

    def draw(self, rng: np.random.Generator, n: int, stratified: bool) -> dict[str, np.ndarray]:
        columns = super().draw(rng, n, stratified)
        # depth is drawn among the depths its block allows, so no draw is wasted or biased
        depth = np.empty(n, dtype=np.int64)
        for block in CONVS_PER_BLOCK:
            rows = np.flatnonzero(columns["block"] == block)
            allowed = np.array(_valid_depths(block))
            if stratified:
                index = np.resize(np.arange(len(allowed)), len(rows))
                rng.shuffle(index)
            else:
                index = rng.integers(0, len(allowed), len(rows))
            depth[rows] = allowed[index]
        columns["depth"] = depth
        return columns

    def build(self, config: dict[str, Any], device: str = "cpu") -> nn.Module:
        from infercast.space.nets.carb_resnet import build

        c = self.validate(config)
        block = c["block"]
        # the stem is as wide as the first stage's blocks
        widths = tuple(int(channels(base, c["width"])) for base in STAGE_CHANNELS)
        return build(
            block == "bottleneck",
            layout(block, c["depth"]),
            widths,
            EXPANSION[block],
            c["early_downsample"],
            NUM_CLASSES,
            c["precision"],
            device,
        )

    def input_shape(self, config: dict[str, Any]) -> tuple[int, ...]:
        c = self.validate(config)
        return (c["batch"], 3, c["input_size"], c["input_size"])

    def device_features(self, configs: pd.DataFrame) -> pd.DataFrame:
        """The device features of every config at batch 1 and fp32, in closed form."""
        return blocked(_device_walk)(configs)

    def features(self, configs: pd.DataFrame | dict[str, Sequence[Any]]) -> pd.DataFrame:
        cols = as_columns(configs, [p.name for p in self.params])
        for p in self.params:
            if p.name == "width":
                continue  # a continuous grid: checked through the channel rounding, any value works
            bad = ~np.isin(cols[p.name], np.asarray(p.choices, dtype=cols[p.name].dtype))
            if bad.any():
                raise SpaceError(
                    f"{p.name}={_first(cols[p.name][bad])} is outside the space; allowed: {p.allowed}"
                )
        depth = cols["depth"].astype(np.int64)
        bottleneck = cols["block"] == "bottleneck"
        misfit = (depth - 2) % np.where(bottleneck, 3, 2) != 0
        if misfit.any():
            row = int(np.flatnonzero(misfit)[0])
            self.check({"block": cols["block"][row], "depth": int(depth[row])})
        # Features scale exactly with batch (activations) and dtype size (bytes): featurise each
        # distinct architecture × resolution once at batch 1 and one byte per element, then scale.
        # Dense key of (block, depth, width step, early down-sampling, input size): a counting pass
        # finds the distinct ones in O(rows), and each key decodes back into its configuration.
        sizes = np.asarray(self.param("input_size").choices)
        width_step = np.rint((cols["width"].astype(np.float64) - 0.1) / 0.05).astype(np.int64)
        key = (bottleneck * 201 + depth) * 80 + width_step
        key = (key * 2 + cols["early_downsample"].astype(np.int64)) * len(sizes)
        key += np.searchsorted(sizes, cols["input_size"].astype(np.int64))
        seen = np.zeros(2 * 201 * 80 * 2 * len(sizes), dtype=bool)
        seen[key] = True
        distinct = np.flatnonzero(seen)
        rank = np.cumsum(seen) - 1
        inverse = rank[key]
        rest, size_index = np.divmod(distinct, len(sizes))
        rest, eds = np.divmod(rest, 2)
        rest, step = np.divmod(rest, 80)
        is_bottleneck, unit_depth = np.divmod(rest, 201)
        unit = {
            "depth": unit_depth,
            "width": np.round(0.1 + 0.05 * step, 10),
            "early_downsample": eds.astype(bool),
            "input_size": sizes[size_index],
            "batch": np.ones(len(distinct)),
        }
        unique = np.empty((len(distinct), len(FEATURE_NAMES)), order="F")  # row per distinct network
        for flag in (False, True):
            rows = np.flatnonzero(is_bottleneck == flag)
            for start in range(0, len(rows), _CHUNK):
                chunk = rows[start : start + _CHUNK]
                unique[chunk] = _featurize({k: v[chunk] for k, v in unit.items()}, flag)
        itemsize = np.where(cols["precision"] == "fp32", 4.0, 2.0)  # fp16 and bf16: 2 bytes
        columns = scale_rows(unique, inverse, cols["batch"].astype(np.float64), itemsize)
        return pd.DataFrame(columns, index=getattr(configs, "index", None), copy=False)


_CHUNK = 16384
_LAYOUTS = np.array(
    [
        [
            layout(block, d) if d >= 8 and (d - 2) % CONVS_PER_BLOCK[block] == 0 else (0, 0, 0, 0)
            for d in range(201)
        ]
        for block in ("basic", "bottleneck")
    ],
    dtype=np.float64,
)


def _first(values: np.ndarray) -> Any:
    return values.reshape(-1)[0]


def _featurize(cols: dict[str, np.ndarray], bottleneck: bool) -> np.ndarray:
    depth = cols["depth"].astype(np.int64)
    width = cols["width"].astype(np.float64)
    eds = cols["early_downsample"].astype(bool)
    side = cols["input_size"].astype(np.float64)
    batch = cols["batch"].astype(np.float64)
    itemsize = 1.0  # bytes are counted in elements here; ``scale_rows`` applies the dtype size

    acc = Accumulator(len(depth))
    image = batch * 3 * side * side
    stem = channels(STAGE_CHANNELS[0], width)
    # stem: conv 7x7/2 + bn + relu + maxpool 3x3/2, or conv 3x3/1 + bn + relu
    h = np.where(eds, np.ceil(side / 2), side)
    out = batch * stem * h * h
    kernel = np.where(eds, 49.0, 9.0)
    acc.conv(macs=out * 3 * kernel, params=stem * 3 * kernel, out=out, live=image + out, channels=stem)
    acc.bn(out, stem, live=2 * out)
    acc.act(out, live=2 * out)
    pooled_h = np.ceil(h / 2)
    pooled = batch * stem * pooled_h * pooled_h
    acc.node("pool_max", flops=pooled * 9, out=pooled, live=out + pooled, mult=eds)
    h = np.where(eds, pooled_h, h)

    per_stage = _LAYOUTS[int(bottleneck), depth]
    cin = stem
    for stage, base in enumerate(STAGE_CHANNELS):
        count = per_stage[:, stage]
        present = count > 0
        mid = channels(base, width)
        cout = 4 * mid if bottleneck else mid
        h_out = np.ceil(h / 2) if stage > 0 else h
        shortcut = (cin != cout) | (stage > 0)
        _block(acc, bottleneck, batch, cin, mid, cout, h, h_out, shortcut, present.astype(np.float64))
        repeated = np.maximum(count - 1, 0)
        _block(acc, bottleneck, batch, cout, mid, cout, h_out, h_out, np.zeros_like(present), repeated)
        cin = np.where(present, cout, cin)
        h = np.where(present, h_out, h)

    final = batch * cin * h * h
    pooled = batch * cin
    acc.node("global_pool", flops=final, out=pooled, live=final + pooled)
    logits = batch * NUM_CLASSES
    acc.linear(
        macs=pooled * NUM_CLASSES,
        params=cin * NUM_CLASSES + NUM_CLASSES,
        out=logits,
        live=pooled + logits,
        channels=np.full_like(cin, NUM_CLASSES),
    )
    return acc.matrix(batch=batch, in_channels=3, side=side, input_elements=image, itemsize=itemsize)


def _block(
    acc: Accumulator,
    bottleneck: bool,
    batch: np.ndarray,
    cin: np.ndarray,
    mid: np.ndarray,
    cout: np.ndarray,
    h_in: np.ndarray,
    h_out: np.ndarray,
    shortcut: np.ndarray,
    mult: np.ndarray,
) -> None:
    """One residual block, ``mult`` times; ``live`` follows the module's execution order."""
    x = batch * cin * h_in * h_in
    o = batch * cout * h_out * h_out
    if not bottleneck:  # conv3x3(stride) bn relu conv3x3 bn [conv1x1 bn] add relu
        acc.conv(macs=o * cin * 9, params=cout * cin * 9, out=o, live=x + o, channels=cout, mult=mult)
        acc.bn(o, cout, live=x + 2 * o, mult=mult)
        acc.act(o, live=x + 2 * o, mult=mult)
        acc.conv(macs=o * cout * 9, params=cout * cout * 9, out=o, live=x + 2 * o, channels=cout, mult=mult)
        acc.bn(o, cout, live=x + 2 * o, mult=mult)
    else:  # conv1x1 bn relu conv3x3(stride) bn relu conv1x1 bn [conv1x1 bn] add relu
        m1 = batch * mid * h_in * h_in
        m2 = batch * mid * h_out * h_out
        acc.conv(macs=m1 * cin, params=mid * cin, out=m1, live=x + m1, channels=mid, mult=mult)
        acc.bn(m1, mid, live=x + 2 * m1, mult=mult)
        acc.act(m1, live=x + 2 * m1, mult=mult)
        acc.conv(macs=m2 * mid * 9, params=mid * mid * 9, out=m2, live=x + m1 + m2, channels=mid, mult=mult)
        acc.bn(m2, mid, live=x + 2 * m2, mult=mult)
        acc.act(m2, live=x + 2 * m2, mult=mult)
        acc.conv(macs=o * mid, params=cout * mid, out=o, live=x + m2 + o, channels=cout, mult=mult)
        acc.bn(o, cout, live=x + 2 * o, mult=mult)
    with_shortcut = mult * shortcut
    acc.conv(macs=o * cin, params=cout * cin, out=o, live=x + 2 * o, channels=cout, mult=with_shortcut)
    acc.bn(o, cout, live=3 * o, mult=with_shortcut)
    acc.node("add", flops=o, out=o, live=np.where(shortcut, 3 * o, 2 * o + x), mult=mult)
    acc.act(o, live=2 * o, mult=mult)


def _device_walk(configs: pd.DataFrame) -> pd.DataFrame:
    """The device features of carb-resnet configs (``device_vector``), in blocks of rows."""
    rows = len(configs)
    k = KernelTotals(rows)
    bottleneck = configs["block"].eq("bottleneck").to_numpy(dtype=bool)
    depth = configs["depth"].to_numpy(dtype=np.int64)
    width = configs["width"].to_numpy(dtype=np.float64)
    early = configs["early_downsample"].to_numpy(dtype=bool)
    side = configs["input_size"].to_numpy(dtype=np.float64)
    stem = channels(STAGE_CHANNELS[0], width)
    h = np.where(early, np.ceil(side / 2), side)
    out = stem * h * h
    window = np.where(early, 49.0, 9.0)
    k.conv("conv", out * 3 * window, 3 * side * side, out, stem * 3 * window, fused_flops=out, bn=stem)
    pooled_h = np.ceil(h / 2)
    k.pool(out, stem * pooled_h * pooled_h, 9.0, early)
    h = np.where(early, pooled_h, h)
    per_stage = _LAYOUTS[bottleneck.astype(np.int64), depth]
    cin = stem
    for stage, base in enumerate(STAGE_CHANNELS):
        count = per_stage[:, stage]
        present = (count > 0).astype(np.float64)
        mid = channels(base, width)
        cout = np.where(bottleneck, 4 * mid, mid)
        h_out = np.ceil(h / 2) if stage > 0 else h
        shortcut = ((cin != cout) | (stage > 0)).astype(np.float64)
        _device_block(k, bottleneck, cin, mid, cout, h, h_out, shortcut, present)
        _device_block(k, bottleneck, cout, mid, cout, h_out, h_out, np.zeros(rows), np.maximum(count - 1, 0))
        cin = np.where(present > 0, cout, cin)
        h = np.where(present > 0, h_out, h)
    k.global_pool(cin * h * h, cin)
    k.linear(cin, float(NUM_CLASSES))
    return k.frame(side, configs.index)


def _device_block(
    k: KernelTotals,
    bottleneck: Array,
    cin: Array,
    mid: Array,
    cout: Array,
    h_in: Array,
    h_out: Array,
    shortcut: Array,
    mult: Array,
) -> None:
    """A Basic or Bottleneck block, ``mult`` times. The add and the ReLU after it join the last
    convolution to run: the shortcut's when there is one, else the main path's."""
    basic = ~bottleneck
    x = cin * h_in * h_in
    o = cout * h_out * h_out
    m1, m2 = mid * h_in * h_in, mid * h_out * h_out
    tail = 2 * o  # the add and the ReLU
    on_main = np.where(shortcut > 0, 0.0, tail)
    # basic: conv3x3(stride) bn relu, conv3x3 bn; bottleneck: conv1x1 bn relu, conv3x3(stride)
    # bn relu, conv1x1 bn
    k.conv("conv", o * cin * 9, x, o, cout * cin * 9, fused_flops=o, mult=mult * basic, bn=cout)
    k.conv("conv", o * cout * 9, o, o, cout * cout * 9, fused_flops=on_main, mult=mult * basic, bn=cout)
    k.conv("conv", m1 * cin, x, m1, mid * cin, fused_flops=m1, mult=mult * bottleneck, bn=mid)
    k.conv("conv", m2 * mid * 9, m1, m2, mid * mid * 9, fused_flops=m2, mult=mult * bottleneck, bn=mid)
    k.conv("conv", o * mid, m2, o, cout * mid, fused_flops=on_main, mult=mult * bottleneck, bn=cout)
    k.conv("conv", o * cin, x, o, cout * cin, fused_flops=tail, mult=mult * shortcut, bn=cout)
