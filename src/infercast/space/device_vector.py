"""Device features (``infercast.features.device``) of design-space configs in closed form, a
million in seconds without building one network: a space's blocks walked as numpy columns, one
kernel template at a time, at batch 1 and fp32 (what the shipped phone predictors were measured
at).

``predictors.devices.features`` counts the kernels of a captured graph as TFLite runs them
(BatchNorm folded, an activation TFLite fuses — ReLU, ReLU6, sigmoids — joined to its
convolution, a residual add linked into the convolution that produces its later input); a
space's walk (its ``device_features``) mirrors its module and those rules, and its parity test
holds the two equal. Besides ``DEVICE_FEATURES`` a frame holds ``flops`` and ``params`` of the whole
graph (the screening objectives) and ``input_side``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from infercast.features.device import DEVICE_FEATURES, SMALL_KERNEL_FEATURES, SMALL_KERNEL_MFLOPS

Array = np.ndarray
_BYTES = 4.0  # fp32


class KernelTotals:
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


# rows walked at once: every template adds a few arrays of this length, which then stay in the
# CPU caches (benchmarks/featurize_speed.py)
_BLOCK = 32_768


def blocked(walk: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def featurize(configs: pd.DataFrame) -> pd.DataFrame:
        if len(configs) <= _BLOCK:
            return walk(configs)
        return pd.concat([walk(configs.iloc[s : s + _BLOCK]) for s in range(0, len(configs), _BLOCK)])

    featurize.__doc__ = walk.__doc__
    return featurize
