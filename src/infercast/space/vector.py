"""Closed-form, vectorised featurisation: the same columns as ``infercast.features`` from arrays of
configurations, one numpy operation per operator *template* instead of per network.

A space describes its network as a sequence of operator templates, each repeated ``mult`` times
per configuration (0 when absent). Counts are in elements; ``frame`` turns them into bytes with
the configuration's dtype size. ``live`` is the activation elements alive while the operator runs,
following the built module's execution order exactly, so the peak equals the liveness analysis
of the captured graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from infercast.features import FEATURE_NAMES
from infercast.graph import OP_GROUPS
from infercast.space.base import SpaceError

Array = np.ndarray


def as_columns(configs: pd.DataFrame | dict[str, Sequence[Any]], names: list[str]) -> dict[str, Array]:
    """Columns of a DataFrame, Arrow-backed frame or dict of sequences as numpy arrays."""
    missing = [n for n in names if n not in configs]
    if missing:
        raise SpaceError(f"configs lack the column(s) {', '.join(missing)}")
    return {n: np.asarray(configs[n]) for n in names}


class Accumulator:
    def __init__(self, rows: int) -> None:
        zeros = lambda: np.zeros(rows)  # noqa: E731 - a fresh array per total
        self.macs, self.params, self.buffers = zeros(), zeros(), zeros()
        self.activations, self.peak, self.weighted, self.max_channels = zeros(), zeros(), zeros(), zeros()
        self.counts = {g: zeros() for g in OP_GROUPS}
        self.group_flops = {g: zeros() for g in OP_GROUPS}

    def node(
        self,
        group: str,
        flops: Array,
        out: Array,
        live: Array,
        macs: Array | None = None,
        params: Array | None = None,
        buffers: Array | None = None,
        mult: Array | float = 1.0,
        channels: Array | None = None,
    ) -> None:
        """Add one operator template, present ``mult`` times in each row (an array, or 1)."""
        once = np.ndim(mult) == 0 and mult == 1

        def times(value: Array) -> Array:
            return value if once else value * mult

        self.group_flops[group] += times(flops)
        self.counts[group] += mult
        self.activations += times(out)
        for total, value in ((self.macs, macs), (self.params, params), (self.buffers, buffers)):
            if value is not None:
                total += times(value)
        np.maximum(self.peak, live if once else np.where(mult > 0, live, 0.0), out=self.peak)
        if channels is not None:
            self.weighted += mult
            np.maximum(
                self.max_channels,
                channels if once else np.where(mult > 0, channels, 0.0),
                out=self.max_channels,
            )

    def conv(
        self, macs: Array, params: Array, out: Array, live: Array, channels: Array, mult: Any = 1.0
    ) -> None:
        self.node("conv", 2 * macs, out, live, macs=macs, params=params, mult=mult, channels=channels)

    def linear(self, macs: Array, params: Array, out: Array, live: Array, channels: Array) -> None:
        self.node("linear", 2 * macs, out, live, macs=macs, params=params, channels=channels)

    def bn(self, out: Array, channels: Array, live: Array, mult: Any = 1.0) -> None:
        self.node("bn", 2 * out, out, live, params=2 * channels, buffers=2 * channels, mult=mult)

    def act(self, out: Array, live: Array, mult: Any = 1.0) -> None:
        self.node("act", out, out, live, mult=mult)

    def matrix(
        self, batch: Array, in_channels: float, side: Array, input_elements: Array, itemsize: Array
    ) -> Array:
        """Rows × ``FEATURE_NAMES`` in that order."""
        flops = sum(self.group_flops.values())
        weight_bytes = (self.params + self.buffers) * itemsize
        activation_bytes = self.activations * itemsize
        moved = weight_bytes + activation_bytes
        safe_flops = np.where(flops > 0, flops, 1.0)
        matmul_flops = self.group_flops["conv"] + self.group_flops["dwconv"] + self.group_flops["gconv"]
        matmul_flops = matmul_flops + self.group_flops["linear"]
        values: dict[str, Array] = {
            "batch": batch,
            "in_channels": np.full_like(batch, in_channels),
            "in_h": side,
            "in_w": side,
            "flops": flops,
            "macs": self.macs,
            "params": self.params,
            "weight_bytes": weight_bytes,
            "activation_bytes": activation_bytes,
            "peak_activation_bytes": self.peak * itemsize,
            "input_bytes": input_elements * itemsize,
            "arithmetic_intensity": np.where(moved > 0, flops / np.where(moved > 0, moved, 1.0), 0.0),
            "depth": self.weighted,
            "n_ops": sum(self.counts.values()),
            "max_channels": self.max_channels,
            "conv_flops_share": matmul_flops / safe_flops,
        }
        for group in OP_GROUPS:
            values[f"count_{group}"] = self.counts[group]
        for group in OP_GROUPS:
            values[f"flops_share_{group}"] = self.group_flops[group] / safe_flops
        return np.column_stack([np.broadcast_to(values[name], batch.shape) for name in FEATURE_NAMES])


_PER_SAMPLE = ("flops", "macs", "activation_bytes", "peak_activation_bytes", "input_bytes")
_BYTES = ("weight_bytes", "activation_bytes", "peak_activation_bytes", "input_bytes")


def scale_rows(unit: Array, inverse: Array, batch: Array, itemsize: Array) -> dict[str, Array]:
    """Features of distinct networks at batch 1 and 1 byte per element → every row's features.

    FLOPs, MACs and activation sizes grow linearly with the batch and bytes with the dtype size;
    parameters, counts and shares do not; arithmetic intensity is recomputed from the scaled sums.
    Returns one contiguous array per column (gathering column by column keeps memory access linear).
    """
    out = {name: unit[:, i].take(inverse) for i, name in enumerate(FEATURE_NAMES)}
    out["batch"] = batch
    for name in _PER_SAMPLE:
        out[name] *= batch
    for name in _BYTES:
        out[name] *= itemsize
    moved = out["weight_bytes"] + out["activation_bytes"]
    out["arithmetic_intensity"] = np.where(moved > 0, out["flops"] / np.where(moved > 0, moved, 1.0), 0.0)
    return out
