"""Which departures from the training networks make a prediction doubtful, said in plain words.

A network can lie outside every training range without its cost being in doubt: an exported file
whose BatchNorm the exporter folded has no BatchNorm at all, a classifier of 1,024 outputs is not
one of 1,000, one average pool in a network of convolutions is no work. Only departures in the
*work* a predictor prices flag a network:

- counts of operations (``count_*``, depth, widest layer) never flag on their own: what those
  operations cost is in the work features beside them;
- a share of the work (``flops_share_*``) flags when it lies at least ``SHARE_MARGIN`` of the
  network's FLOPs beyond what any training network had;
- an amount of work or memory (FLOPs, bytes, kernels, batch) flags when it is at least
  ``SIZE_FACTOR`` times beyond the training range;
- kernels an op-wise route did not learn, or work a Σ cost × work route extrapolates, flag when
  they carry ``KERNEL_SHARE`` of the predicted time.

Reasons name the work in words ("3.6e+09 FLOPs, 3.1× the most of any network it learned from").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

SHARE_MARGIN = 0.05
SIZE_FACTOR = 2.0
# kernels outside what an op-wise route learned (work a Σ cost × work route extrapolates) flag a
# network when they carry this share of its predicted time
KERNEL_SHARE = 0.10

_KINDS = {
    "conv": "dense convolutions",
    "dwconv": "depthwise convolutions",
    "gconv": "grouped convolutions",
    "linear": "fully connected layers",
    "pool_max": "max pooling",
    "pool_avg": "average pooling",
    "global_pool": "global pooling",
    "concat": "concatenations",
    "add": "additions",
    "mul": "multiplications",
    "act": "activations",
    "bn": "batch normalisation",
    "other": "other operations",
}
_AMOUNTS = {
    "batch": "batch",
    "in_h": "input height",
    "in_w": "input width",
    "flops": "FLOPs",
    "macs": "multiply-accumulates",
    "params": "parameters",
    "weight_bytes": "weight bytes",
    "activation_bytes": "activation bytes",
    "peak_activation_bytes": "peak activation bytes",
    "input_bytes": "input bytes",
    "arithmetic_intensity": "FLOPs per byte",
    "n_ops": "operations",
    "threads": "threads",
}


# the device features of Σ cost × work (``devices.features``): what one unit is
_WORK = {
    "gflops_conv": "GFLOP of dense convolutions",
    "gflops_dwconv": "GFLOP of depthwise convolutions",
    "gflops_gconv": "GFLOP of grouped convolutions",
    "gflops_linear": "GFLOP of fully connected layers",
    "mops_pool": "million pooling operations",
    "melements_concat": "million elements concatenated",
    "melements_elementwise": "million element-wise operations",
    "mb_activations": "MB of activations",
    "mb_weights": "MB of weights",
    "kernels": "kernels",
}


def describe_work(name: str, value: float, low: float, high: float) -> str:
    """A device feature of Σ cost × work outside its training range, in words."""
    what = _WORK.get(name)
    if what is None and name.startswith("gflops_conv_kernels_under_"):
        what = f"GFLOP in small convolution kernels (under {name.rsplit('_', 1)[1].upper()} FLOPs each)"
    if what is None and name.startswith("gflops_products_under_"):
        what = f"GFLOP in small matrix-product kernels (under {name.rsplit('_', 1)[1].upper()} FLOPs each)"
    return _amount(value, what or _eager_work(name), low, high)


def _eager_work(name: str) -> str:
    """A column of the work per sample as PyTorch runs it eagerly (``devices.eager``), in words."""
    unit, _, what = name.partition("_")
    if name in _PER_SAMPLE:
        return _PER_SAMPLE[name]
    if not what:
        return name.replace("_", " ")
    what = _GROUP_WORDS.get(what, what)
    if unit == "gflops":
        return f"GFLOP of {what} operators per sample"
    if unit == "mb":
        return f"MB moved by {what} operators per sample"
    return name.replace("_", " ")


_GROUP_WORDS = {
    "conv": "dense convolution",
    "dwconv": "depthwise convolution",
    "gconv": "grouped convolution",
    "norm": "normalisation",
    "act": "activation",
    "elementwise": "element-wise",
    "memory": "data-movement",
}
_PER_SAMPLE = {
    "kernels_per_sample": "kernel launches per sample",
    "mb_weights_per_sample": "MB of weights per sample",
    "steps_per_sample": "steps per sample (1 / batch)",
}


def _amount(value: float, what: str, low: float, high: float) -> str:
    """An amount outside ``[low, high]``, in words."""
    if value > high:
        if high <= 0:
            return f"{value:.3g} {what}, which no network it learned from had"
        return f"{value:.3g} {what}, {value / high:.1f}× the most of any network it learned from ({high:.3g})"
    if value <= 0:
        return f"no {what}, which every network it learned from had (at least {low:.3g})"
    least = f"the least of any network it learned from ({low:.3g})"
    return f"{value:.3g} {what}, {low / value:.1f}× less than {least}"


# the model-level columns an op-wise route checks beside its kernels, in words
MODEL_RANGE_COLUMNS = {"log_n_kernels": "kernels", "log_flops": "FLOPs"}


def kernel_reason(
    table: pd.DataFrame, overhead: pd.Series, ranges: dict[str, Any], overhead_ranges: dict[str, Any]
) -> str:
    """Why an op-wise prediction of one model (its kernels ``table`` with their predicted
    ``latency_ms``) is in doubt, in words, or "": kernels outside what the training kernels
    spanned, or of a kind never learned, count when they carry ``KERNEL_SHARE`` of its predicted
    kernel time; the model's size when it lies ``SIZE_FACTOR`` beyond the training models'."""
    time = table["latency_ms"].fillna(0.0).to_numpy(dtype=np.float64)
    total = max(float(time.sum()), 1e-12)
    parts = []
    for op_type, group in table.groupby("op_type"):
        rows = table.index.get_indexer(group.index)
        if op_type not in ranges:
            share = time[rows].sum() / total
            if share >= KERNEL_SHARE:
                parts.append(
                    f"{share:.0%} of its kernel time is in {op_type} kernels, a kind it learned "
                    "from no network"
                )
            continue
        beyond = np.zeros(len(group), dtype=bool)
        worst = ""
        for column, (low, high) in ranges[str(op_type)].items():
            values = group[column].to_numpy(dtype=np.float64)
            out = (values < low * 0.98) | (values > high * 1.02)
            if out.any() and not worst:
                above = values[out] > high
                shown = (
                    f"up to {values[out].max():.4g}" if above.any() else f"down to {values[out].min():.4g}"
                )
                worst = f"{column} {shown}, outside the {low:.4g}–{high:.4g} learned"
            beyond |= out
        share = time[rows][beyond].sum() / total
        if share >= KERNEL_SHARE:
            parts.append(f"{share:.0%} of its kernel time is in {op_type} kernels with {worst}")
    for column, what in MODEL_RANGE_COLUMNS.items():
        low, high = overhead_ranges.get(column, (-np.inf, np.inf))
        value = float(overhead[column])
        if value > high + np.log(SIZE_FACTOR):
            parts.append(f"{np.exp(value - high):.1f}× more {what} than any network it learned from")
        elif value < low - np.log(SIZE_FACTOR):
            parts.append(f"{np.exp(low - value):.1f}× fewer {what} than every network it learned from")
    return "; ".join(parts[:4])


def _structural(name: str) -> bool:
    return name.startswith("count_") or name in ("depth", "max_channels", "in_channels")


def _share(name: str) -> str | None:
    """The kind of operation a share feature measures, or None."""
    if name == "conv_flops_share":
        return "conv"
    return name.removeprefix("flops_share_") if name.startswith("flops_share_") else None


def material(name: str, value: float, low: float, high: float) -> bool:
    """Whether ``value`` of feature ``name`` lies far enough outside ``[low, high]`` to put the
    prediction in doubt."""
    if _structural(name) or not math.isfinite(value):
        return False
    if _share(name) is not None:
        return value > high + SHARE_MARGIN or value < low - SHARE_MARGIN
    if value > high:
        return value > high * SIZE_FACTOR if high > 0 else value > 0
    if value < low:
        return value * SIZE_FACTOR < low
    return False


def counts_for_distance(name: str) -> bool:
    """Whether a feature places a network among the training networks when its distance to the
    nearest one is judged: structural counts do not (their work is in the other features)."""
    return not _structural(name)


def describe(name: str, value: float, low: float, high: float) -> str:
    """A departure ``material`` found, in words."""
    kind = _share(name)
    if kind is not None:
        what = _KINDS.get(kind, kind.replace("_", " "))
        if value > high:
            return (
                f"{value:.0%} of its FLOPs are {what}, more than the {high:.0%} of any network it "
                "learned from"
            )
        return (
            f"{value:.0%} of its FLOPs are {what}, less than the {low:.0%} of every network it learned from"
        )
    return _amount(value, _AMOUNTS.get(name, name.replace("_", " ")), low, high)


def describe_distance(distance: float, spacing: float) -> str:
    return (
        "its mix of work is unlike any network it learned from (the nearest is "
        f"{distance / spacing:.1f}× as far as training networks typically are from each other)"
    )
