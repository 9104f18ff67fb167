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


def round_channels(base: Any, width: Any) -> Any:
    """base × width rounded to a multiple of 8, at least 8. Works on scalars and arrays alike."""
    return np.maximum(8, np.floor((np.asarray(base) * width + 4) / 8) * 8)


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


class Block:
    """Operator templates of one block of a network, in the built module's execution order.

    Templates may be present in some rows only (``present``), alternatives included (one edge of
    a cell being a conv in some rows and a pool in others). ``close`` computes, for every template,
    the activation elements alive while it runs — tensors from their producer to their last
    present reader (a view's readers keep its base alive), the block input from the start, the
    outputs to the end — and hands the templates to the :class:`Accumulator`, ``mult`` times
    (identical repeated blocks share one evaluation).
    """

    def __init__(self, rows: int, input_elements: Array) -> None:
        self.rows = rows
        ones = np.ones(rows)
        # per tensor: size, producer index (-1: block input), last reader index, presence, base
        self.size: list[Array] = [np.asarray(input_elements, dtype=np.float64)]
        self.start: list[int] = [-1]
        self.end: list[Array] = [np.full(rows, -1.0)]
        self.present: list[Array] = [ones]
        self.base: list[int] = [0]
        self.templates: list[dict[str, Any]] = []

    @property
    def input(self) -> int:
        return 0

    def op(
        self,
        group: str | None,
        inputs: Sequence[int],
        out: Array | float,
        flops: Array | float = 0.0,
        present: Array | float = 1.0,
        alias: bool = False,
        **costs: Array,
    ) -> int:
        """Add one operator; ``group`` None with ``alias`` for views. Returns its output tensor."""
        index = len(self.templates)
        here = np.broadcast_to(np.asarray(present, dtype=np.float64), (self.rows,))
        for tensor in inputs:
            base = self.base[tensor]
            reads = (here > 0) & (self.present[tensor] > 0)
            self.end[base] = np.where(reads, np.maximum(self.end[base], index), self.end[base])
        if alias:
            self.size.append(np.zeros(self.rows))
            self.base.append(self.base[inputs[0]])
        else:
            self.size.append(np.broadcast_to(np.asarray(out, dtype=np.float64), (self.rows,)))
            self.base.append(len(self.size) - 1)
        self.start.append(index)
        self.end.append(np.where(here > 0, float(index), -1.0))
        self.present.append(here)
        self.templates.append({"group": group, "out": out, "flops": flops, "present": here, "costs": costs})
        return len(self.size) - 1

    def close(self, acc: Accumulator, outputs: Sequence[int], mult: Array | float = 1.0) -> None:
        last = float(len(self.templates))
        for tensor in outputs:
            self.end[self.base[tensor]] = np.full(self.rows, last)
        for index, template in enumerate(self.templates):
            if template["group"] is None:
                continue  # a view allocates nothing, so nothing is more alive than one node before
            live = np.zeros(self.rows)
            for tensor, start in enumerate(self.start):
                if start <= index and self.base[tensor] == tensor:
                    live += np.where(self.end[tensor] >= index, self.size[tensor] * self.present[tensor], 0.0)
            acc.node(
                template["group"],
                flops=template["flops"],
                out=template["out"],
                live=live,
                mult=template["present"] * mult,
                **template["costs"],
            )

    # common templates ------------------------------------------------------------------------
    def conv(
        self,
        x: int,
        out: Array,
        macs: Array,
        params: Array,
        channels: Array,
        present: Any = 1.0,
        group: str = "conv",
    ) -> int:
        return self.op(group, [x], out, 2 * macs, present, macs=macs, params=params, channels=channels)

    def bn(self, x: int, out: Array, channels: Array, present: Any = 1.0) -> int:
        return self.op("bn", [x], out, 2 * out, present, params=2 * channels, buffers=2 * channels)

    def act(self, x: int, out: Array, present: Any = 1.0) -> int:
        return self.op("act", [x], out, out, present)
