"""``mobile-nas``: a MobileNetV2 / MnasNet-style space of inverted-residual stages.

A 3×3/2 stem (32·width channels), six searchable stages at 24/32/64/96/160/320·width channels with
strides 2/2/2/1/2/1, then a 1×1 conv to 1280, global pooling and a 1000-way linear head. Per stage
``i`` (1–6): kernel ``k{i}`` 3/5/7, expansion ``e{i}`` 1/3/4/6, repeats ``r{i}`` 1–4,
squeeze-excitation ``se{i}`` on/off and activation ``act{i}`` ReLU/h-swish. Globally: width
multiplier, input resolution and batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from infercast.space.base import Param, Space
from infercast.space.device_vector import Array, KernelTotals, blocked
from infercast.space.vector import Accumulator, Block, as_columns, round_channels, scale_rows

if TYPE_CHECKING:
    from torch import nn

STAGES = ((24, 2), (32, 2), (64, 2), (96, 1), (160, 2), (320, 1))  # (base channels, stride)
STEM_CHANNELS = 32
HEAD_CHANNELS = 1280
NUM_CLASSES = 1000
RESOLUTIONS = (96, 128, 160, 192, 224, 256)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def squeeze_channels(hidden: Any) -> Any:
    return np.maximum(8, np.floor((np.asarray(hidden) / 4 + 4) / 8) * 8)


def _stage_params() -> tuple[Param, ...]:
    params: list[Param] = []
    for i in range(1, len(STAGES) + 1):
        params += [
            Param(f"k{i}", (3, 5, 7), f"stage {i} depthwise kernel"),
            Param(f"e{i}", (1, 3, 4, 6), f"stage {i} expansion ratio", default=6),
            Param(f"r{i}", (1, 2, 3, 4), f"stage {i} repeats", default=2),
            Param(f"se{i}", (False, True), f"stage {i} squeeze-excitation"),
            Param(f"act{i}", ("relu", "hswish"), f"stage {i} activation"),
        ]
    return tuple(params)


class MobileNAS(Space):
    name = "mobile-nas"
    description = "MobileNetV2/MnasNet-style inverted-residual stages (kernel, expansion, repeats, SE, act)"
    params = (
        *_stage_params(),
        Param.grid("width", 0.25, 2.0, 0.05, "channel multiplier", default=1.0),
        Param("resolution", RESOLUTIONS, "square input side in pixels", default=224),
        Param("batch", BATCHES, "batch size"),
    )

    def build(self, config: dict[str, Any], device: str = "cpu") -> nn.Module:
        from infercast.space.nets.mobile_nas import Block, build

        c = self.validate(config)
        stem = cin = int(round_channels(STEM_CHANNELS, c["width"]))
        blocks = []
        for i, (base, stride) in enumerate(STAGES, start=1):
            cout = int(round_channels(base, c["width"]))
            for repeat in range(c[f"r{i}"]):
                # the SE gate squeezes the expanded (depthwise) channels
                squeezed = int(squeeze_channels(cin * c[f"e{i}"])) if c[f"se{i}"] else 0
                step = stride if repeat == 0 else 1
                blocks.append(Block(cin, cout, c[f"k{i}"], c[f"e{i}"], step, squeezed, c[f"act{i}"]))
                cin = cout
        return build(stem, blocks, HEAD_CHANNELS, NUM_CLASSES, device)

    def input_shape(self, config: dict[str, Any]) -> tuple[int, ...]:
        c = self.validate(config)
        return (c["batch"], 3, c["resolution"], c["resolution"])

    def device_features(self, configs: pd.DataFrame) -> pd.DataFrame:
        """The device features of every config at batch 1 and fp32, in closed form."""
        return blocked(_device_walk)(configs)

    def features(self, configs: pd.DataFrame | dict[str, Sequence[Any]]) -> pd.DataFrame:
        names = [p.name for p in self.params]
        cols = as_columns(configs, names)
        # Every column by its index among the choices (an error names a value outside them), then
        # one featurisation per distinct architecture × resolution at batch 1, scaled by batch.
        codes = np.zeros(len(cols["batch"]), dtype=np.int64)
        indexed = {}
        for p in self.params:
            index = _choice_index(p, cols[p.name])
            indexed[p.name] = index
            if p.name != "batch":
                codes = codes * len(p.choices) + index
        distinct, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
        unit = {p.name: np.asarray(p.choices)[indexed[p.name][first]] for p in self.params}
        matrix = _featurize(unit, len(distinct))
        batch = cols["batch"].astype(np.float64)
        columns = scale_rows(matrix, inverse, batch, np.full(len(batch), 4.0))
        return pd.DataFrame(columns, index=getattr(configs, "index", None), copy=False)


def _choice_index(param: Param, values: np.ndarray) -> np.ndarray:
    choices = np.asarray(param.choices)
    if choices.dtype.kind == "f":
        index = np.rint((values.astype(np.float64) - choices[0]) / (choices[1] - choices[0])).astype(np.int64)
        ok = (index >= 0) & (index < len(choices))
        ok[ok] &= np.isclose(choices[index[ok]], values[ok].astype(np.float64))
    else:
        order = np.argsort(choices)
        position = np.searchsorted(choices[order], values.astype(choices.dtype))
        position = np.minimum(position, len(choices) - 1)
        index = order[position]
        ok = choices[index] == values.astype(choices.dtype)
    if not ok.all():
        param.coerce(values[~ok][0])  # raises with the key and the allowed values
    return index


def _featurize(c: dict[str, np.ndarray], rows: int) -> np.ndarray:
    acc = Accumulator(rows)
    width = c["width"].astype(np.float64)
    side = c["resolution"].astype(np.float64)
    image = 3 * side * side
    cin = round_channels(STEM_CHANNELS, width)
    h = np.ceil(side / 2)
    stem = Block(rows, image)
    out = cin * h * h
    x = stem.conv(stem.input, out, macs=out * 27, params=cin * 27, channels=cin)
    x = stem.act(stem.bn(x, out, cin), out)
    stem.close(acc, [x])

    for i, (base, stride) in enumerate(STAGES, start=1):
        cout = round_channels(base, width)
        kernel = c[f"k{i}"].astype(np.float64)
        expansion = c[f"e{i}"].astype(np.float64)
        se = c[f"se{i}"].astype(np.float64)
        repeats = c[f"r{i}"].astype(np.float64)
        h_out = np.ceil(h / stride)
        _inverted_residual(acc, cin, cout, kernel, expansion, se, h, h_out, stride, mult=1.0)
        _inverted_residual(acc, cout, cout, kernel, expansion, se, h_out, h_out, 1, mult=repeats - 1)
        cin, h = cout, h_out

    final = cin * h * h
    head = Block(rows, final)
    out = HEAD_CHANNELS * h * h
    heads = np.full(rows, float(HEAD_CHANNELS))
    x = head.conv(head.input, out, macs=out * cin, params=HEAD_CHANNELS * cin, channels=heads)
    x = head.act(head.bn(x, out, heads), out)
    pooled = head.op("global_pool", [x], heads, out)
    flat = head.op(None, [pooled], heads, alias=True)
    logits = np.full(rows, float(NUM_CLASSES))
    macs = heads * NUM_CLASSES
    params = np.full(rows, float(HEAD_CHANNELS * NUM_CLASSES + NUM_CLASSES))
    result = head.op("linear", [flat], logits, 2 * macs, macs=macs, params=params, channels=logits)
    head.close(acc, [result])
    return acc.matrix(batch=np.ones(rows), in_channels=3, side=side, input_elements=image, itemsize=1.0)


def _inverted_residual(
    acc: Accumulator,
    cin: np.ndarray,
    cout: np.ndarray,
    kernel: np.ndarray,
    expansion: np.ndarray,
    se: np.ndarray,
    h_in: np.ndarray,
    h_out: np.ndarray,
    stride: int,
    mult: Any,
) -> None:
    """One block (``mult`` identical copies); alternatives carry their presence per row."""
    rows = len(cin)
    hidden = cin * expansion
    x = cin * h_in * h_in
    block = Block(rows, x)
    expand = (expansion != 1).astype(np.float64)
    e_out = hidden * h_in * h_in
    e = block.conv(block.input, e_out, macs=e_out * cin, params=hidden * cin, channels=hidden, present=expand)
    e = block.act(block.bn(e, e_out, hidden, expand), e_out, expand)

    d_out = hidden * h_out * h_out
    k2 = kernel * kernel
    depthwise = [
        block.conv(
            source,
            d_out,
            macs=d_out * k2,
            params=hidden * k2,
            channels=hidden,
            present=present,
            group="dwconv",
        )
        for source, present in ((e, expand), (block.input, 1 - expand))
    ]
    d = block.op("bn", depthwise, d_out, 2 * d_out, params=2 * hidden, buffers=2 * hidden)
    d = block.act(d, d_out)

    squeezed = squeeze_channels(hidden)
    pooled = block.op("global_pool", [d], hidden, d_out, se)
    s = block.conv(
        pooled,
        squeezed,
        macs=squeezed * hidden,
        params=squeezed * hidden + squeezed,
        channels=squeezed,
        present=se,
    )
    s = block.act(s, squeezed, se)
    s = block.conv(
        s, hidden, macs=hidden * squeezed, params=hidden * squeezed + hidden, channels=hidden, present=se
    )
    gate = block.act(s, hidden, se)
    gated = block.op("mul", [d, gate], d_out, d_out, se)

    o = cout * h_out * h_out
    project = [
        block.conv(source, o, macs=o * hidden, params=cout * hidden, channels=cout, present=present)
        for source, present in ((gated, se), (d, 1 - se))
    ]
    p = block.op("bn", project, o, 2 * o, params=2 * cout, buffers=2 * cout)
    residual = ((cin == cout) & (stride == 1)).astype(np.float64)
    added = block.op("add", [p, block.input], o, o, residual)
    block.close(acc, [p, added], mult=mult)


def _device_walk(configs: pd.DataFrame) -> pd.DataFrame:
    """The device features of mobile-nas configs (``device_vector``), in blocks of rows."""
    rows = len(configs)
    k = KernelTotals(rows)
    width = configs["width"].to_numpy(dtype=np.float64)
    side = configs["resolution"].to_numpy(dtype=np.float64)
    cin = round_channels(STEM_CHANNELS, width)
    h = np.ceil(side / 2)
    stem_out = cin * h * h
    k.conv("conv", stem_out * 27, 3 * side * side, stem_out, cin * 27, fused_flops=stem_out, bn=cin)
    for i, (base, stride) in enumerate(STAGES, start=1):
        cout = round_channels(base, width)
        block = {
            "kernel": configs[f"k{i}"].to_numpy(dtype=np.float64),
            "expansion": configs[f"e{i}"].to_numpy(dtype=np.float64),
            "se": configs[f"se{i}"].to_numpy(dtype=bool),
            "hswish": configs[f"act{i}"].eq("hswish").to_numpy(dtype=bool),
        }
        repeats = configs[f"r{i}"].to_numpy(dtype=np.float64)
        h_out = np.ceil(h / stride)
        _device_block(k, cin, cout, h, h_out, stride, mult=1.0, **block)
        _device_block(k, cout, cout, h_out, h_out, 1, mult=repeats - 1, **block)
        cin, h = cout, h_out
    heads = float(HEAD_CHANNELS)
    final = cin * h * h
    out = heads * h * h
    k.conv("conv", out * cin, final, out, heads * cin, fused_flops=out, bn=heads)
    k.global_pool(out, np.full(rows, heads))
    k.linear(np.full(rows, heads), float(NUM_CLASSES))
    return k.frame(side, configs.index)


def _device_block(
    k: KernelTotals,
    cin: Array,
    cout: Array,
    h_in: Array,
    h_out: Array,
    stride: int,
    mult: Any,
    kernel: Array,
    expansion: Array,
    se: Array,
    hswish: Array,
) -> None:
    hidden = cin * expansion
    x = cin * h_in * h_in
    relu = (~hswish).astype(np.float64)
    # an h-swish is no activation TFLite fuses into a convolution: it runs as a kernel of its own
    own_act = hswish * mult
    expand = (expansion != 1) * mult
    e_out = hidden * h_in * h_in
    k.conv("conv", e_out * cin, x, e_out, hidden * cin, fused_flops=e_out * relu, mult=expand, bn=hidden)
    k.elementwise(e_out, e_out, e_out, own_act * (expansion != 1))
    d_out = hidden * h_out * h_out
    d_in = np.where(expansion != 1, e_out, x)
    k2 = kernel * kernel
    k.conv("dwconv", d_out * k2, d_in, d_out, hidden * k2, fused_flops=d_out * relu, mult=mult, bn=hidden)
    k.elementwise(d_out, d_out, d_out, own_act)
    gate = se * mult
    squeezed = squeeze_channels(hidden)
    k.global_pool(d_out, hidden, gate)
    sq_weights = squeezed * hidden + squeezed  # the squeeze-excitation convs have biases
    k.conv("conv", squeezed * hidden, hidden, squeezed, sq_weights, fused_flops=squeezed, mult=gate)
    ex_weights = hidden * squeezed + hidden
    k.conv("conv", hidden * squeezed, squeezed, hidden, ex_weights, fused_flops=hidden, mult=gate)
    k.elementwise(d_out + hidden, d_out, d_out, gate)
    o = cout * h_out * h_out
    k.conv("conv", o * hidden, d_out, o, cout * hidden, mult=mult, bn=cout)
    residual = float(stride == 1) * (cin == cout)
    k.flops += o * residual * mult  # the add, linked into the projection's kernel
