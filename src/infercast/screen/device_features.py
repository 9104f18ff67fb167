"""Device features of design-space candidates in closed form: ``devices.features`` of a million
configs in seconds, without building one network.

``device_features`` counts the kernels of a captured graph as TFLite runs them (BatchNorm folded,
an activation that TFLite fuses — ReLU, ReLU6, sigmoids — joined to its convolution, a residual
add linked into the convolution that produces its later input). Here each built-in space's
blocks are walked as numpy columns, one kernel template at a time, at batch 1 and fp32 (what the
shipped phone predictors were measured at). The walk mirrors the space's module and the fusion
rules; ``tests/test_devices.py`` holds it equal to capture + ``device_features``.

Besides ``DEVICE_FEATURES`` a frame holds ``flops`` and ``params`` of the whole graph (the
screening objectives) and ``input_side``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from infercast.predictors.devices.features import DEVICE_FEATURES, SMALL_KERNEL_FEATURES, SMALL_KERNEL_MFLOPS

Array = np.ndarray
_BYTES = 4.0  # fp32


class _Kernels:
    """Running totals of device features over kernel templates, each present ``mult`` times per
    row. Amounts are in elements; bytes are 4 per element."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.totals = {name: np.zeros(rows) for name in DEVICE_FEATURES}
        self.totals["constant"] = np.ones(rows)
        self.moved = np.zeros(rows)  # elements the kernels' first ops read and write (weights too)
        self.weights = np.zeros(rows)  # every parameter and buffer, folded BatchNorms included
        self.flops = np.zeros(rows)
        self.params = np.zeros(rows)

    def _launch(self, reads: Array, writes: Array, weights: Array, mult: Any) -> None:
        self.totals["kernels"] += mult
        self.moved += (reads + writes + weights) * mult

    def conv(
        self,
        kind: str,
        macs: Array,
        reads: Array,
        writes: Array,
        weights: Array,
        fused_flops: Array | float = 0.0,
        mult: Any = 1.0,
        bn: Array | float | None = None,
    ) -> None:
        """A convolution kernel (``weights``: its parameters, a bias included) with the ops fused
        after it, whose graph FLOPs are ``fused_flops``, and the BatchNorm of ``bn`` channels
        folded into it (if any)."""
        flops = 2 * macs
        gflops = flops * mult / 1e9
        self.totals[f"gflops_{kind}"] += gflops
        for column, mflops in zip(SMALL_KERNEL_FEATURES, SMALL_KERNEL_MFLOPS, strict=True):
            self.totals[column] += np.where(flops < mflops * 1e6, gflops, 0.0)
        self._launch(reads, writes, weights, mult)
        self.weights += weights * mult
        self.params += weights * mult
        self.flops += (flops + fused_flops) * mult
        if bn is not None:  # folded: weights and graph FLOPs, no kernel of its own
            self.weights += 4 * bn * mult  # weight, bias, running mean, running variance
            self.params += 2 * bn * mult
            self.flops += 2 * writes * mult

    def elementwise(self, reads: Array, writes: Array, flops: Array, mult: Any = 1.0) -> None:
        """An element-wise op, activation or BatchNorm that runs as a kernel of its own."""
        self.totals["melements_elementwise"] += writes * mult / 1e6
        self._launch(reads, writes, 0.0, mult)
        self.flops += flops * mult

    def pool(self, reads: Array, writes: Array, window: float, mult: Any = 1.0) -> None:
        """A max / average pooling kernel."""
        self.totals["mops_pool"] += writes * window * mult / 1e6
        self._launch(reads, writes, 0.0, mult)
        self.flops += writes * window * mult

    def global_pool(self, reads: Array, writes: Array, mult: Any = 1.0) -> None:
        self._launch(reads, writes, 0.0, mult)
        self.flops += reads * mult

    def linear(self, cin: Array, cout: float) -> None:
        weights = cin * cout + cout
        self.totals["gflops_linear"] += 2 * cin * cout / 1e9
        self._launch(cin, np.full(self.rows, cout), weights, 1.0)
        self.weights += weights
        self.params += weights
        self.flops += 2 * cin * cout

    def frame(self, side: Array, index: Any = None) -> pd.DataFrame:
        totals = dict(self.totals)
        totals["mb_weights"] = self.weights * _BYTES / 1e6
        # as ``device_features``: the kernels' first ops' traffic less the weights, read once
        totals["mb_activations"] = np.maximum(self.moved - self.weights, 0.0) * _BYTES / 1e6
        columns = {name: totals[name] for name in DEVICE_FEATURES}
        columns.update(flops=self.flops, params=self.params, input_side=np.asarray(side, dtype=np.float64))
        return pd.DataFrame(columns, index=index, copy=False)


def _mobile_nas(configs: pd.DataFrame) -> pd.DataFrame:
    from infercast.space import mobile_nas as space
    from infercast.space.vector import round_channels

    rows = len(configs)
    k = _Kernels(rows)
    width = configs["width"].to_numpy(dtype=np.float64)
    side = configs["resolution"].to_numpy(dtype=np.float64)
    cin = round_channels(space.STEM_CHANNELS, width)
    h = np.ceil(side / 2)
    stem_out = cin * h * h
    k.conv("conv", stem_out * 27, 3 * side * side, stem_out, cin * 27, fused_flops=stem_out, bn=cin)
    for i, (base, stride) in enumerate(space.STAGES, start=1):
        cout = round_channels(base, width)
        block = {
            "kernel": configs[f"k{i}"].to_numpy(dtype=np.float64),
            "expansion": configs[f"e{i}"].to_numpy(dtype=np.float64),
            "se": configs[f"se{i}"].to_numpy(dtype=bool),
            "hswish": configs[f"act{i}"].eq("hswish").to_numpy(dtype=bool),
        }
        repeats = configs[f"r{i}"].to_numpy(dtype=np.float64)
        h_out = np.ceil(h / stride)
        _inverted_residual(k, cin, cout, h, h_out, stride, mult=1.0, **block)
        _inverted_residual(k, cout, cout, h_out, h_out, 1, mult=repeats - 1, **block)
        cin, h = cout, h_out
    heads = float(space.HEAD_CHANNELS)
    final = cin * h * h
    out = heads * h * h
    k.conv("conv", out * cin, final, out, heads * cin, fused_flops=out, bn=heads)
    k.global_pool(out, np.full(rows, heads))
    k.linear(np.full(rows, heads), float(space.NUM_CLASSES))
    return k.frame(side, configs.index)


def _inverted_residual(
    k: _Kernels,
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
    from infercast.space.mobile_nas import squeeze_channels

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


def _carb_resnet(configs: pd.DataFrame) -> pd.DataFrame:
    from infercast.space import carb_resnet as space

    rows = len(configs)
    k = _Kernels(rows)
    bottleneck = configs["block"].eq("bottleneck").to_numpy(dtype=bool)
    depth = configs["depth"].to_numpy(dtype=np.int64)
    width = configs["width"].to_numpy(dtype=np.float64)
    early = configs["early_downsample"].to_numpy(dtype=bool)
    side = configs["input_size"].to_numpy(dtype=np.float64)
    stem = space.channels(space.STAGE_CHANNELS[0], width)
    h = np.where(early, np.ceil(side / 2), side)
    out = stem * h * h
    window = np.where(early, 49.0, 9.0)
    k.conv("conv", out * 3 * window, 3 * side * side, out, stem * 3 * window, fused_flops=out, bn=stem)
    pooled_h = np.ceil(h / 2)
    k.pool(out, stem * pooled_h * pooled_h, 9.0, early)
    h = np.where(early, pooled_h, h)
    per_stage = space._LAYOUTS[bottleneck.astype(np.int64), depth]
    cin = stem
    for stage, base in enumerate(space.STAGE_CHANNELS):
        count = per_stage[:, stage]
        present = (count > 0).astype(np.float64)
        mid = space.channels(base, width)
        cout = np.where(bottleneck, 4 * mid, mid)
        h_out = np.ceil(h / 2) if stage > 0 else h
        shortcut = ((cin != cout) | (stage > 0)).astype(np.float64)
        _residual(k, bottleneck, cin, mid, cout, h, h_out, shortcut, present)
        _residual(k, bottleneck, cout, mid, cout, h_out, h_out, np.zeros(rows), np.maximum(count - 1, 0))
        cin = np.where(present > 0, cout, cin)
        h = np.where(present > 0, h_out, h)
    k.global_pool(cin * h * h, cin)
    k.linear(cin, float(space.NUM_CLASSES))
    return k.frame(side, configs.index)


def _residual(
    k: _Kernels,
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


# rows walked at once: every template adds a few arrays of this length, which then stay in the
# CPU caches (32 k rows: 2.2× faster here than 250 k at once)
_BLOCK = 32_768


def _blocked(walk: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def featurize(configs: pd.DataFrame) -> pd.DataFrame:
        if len(configs) <= _BLOCK:
            return walk(configs)
        return pd.concat([walk(configs.iloc[s : s + _BLOCK]) for s in range(0, len(configs), _BLOCK)])

    featurize.__doc__ = walk.__doc__
    return featurize


# design space name → device features of a frame of its configs (batch 1, fp32)
FEATURIZERS: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
    "mobile-nas": _blocked(_mobile_nas),
    "carb-resnet": _blocked(_carb_resnet),
}
