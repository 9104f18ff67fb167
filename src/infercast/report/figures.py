"""The report's figures: each a function of a DataFrame that returns a matplotlib Figure.

A new figure is one function here and one ``Section`` in ``report.build_report``.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server, no GUI toolkit needed

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure


def _log2(color: pd.Series | None) -> pd.Series | None:
    """Colours on a log2 scale; a zero (FLOPs of a kernel network that only moves data) takes the
    colour of the smallest positive value instead of log2(0)."""
    if color is None or not (color > 0).any():
        return None
    return np.log2(color.clip(lower=color[color > 0].min()))


def _scatter(ax: plt.Axes, x: pd.Series, y: pd.Series, color: pd.Series | None, label: str) -> None:
    points = ax.scatter(x, y, c=_log2(color), s=10, cmap="viridis", alpha=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    if color is not None and color.nunique() > 1:
        bar = ax.figure.colorbar(points, ax=ax)
        bar.set_label(f"log2 {label}")


def scaling(frame: pd.DataFrame) -> Figure:
    """Latency and memory against FLOPs, efficiency against batch and against input size."""
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    _scatter(axes[0, 0], frame["flops"], frame["latency_ms"], frame["batch"], "batch")
    axes[0, 0].set(xlabel="FLOPs", ylabel="latency (ms)", title="latency vs FLOPs")
    if frame["peak_memory_mb"].notna().any():
        _scatter(axes[0, 1], frame["flops"], frame["peak_memory_mb"], frame["batch"], "batch")
    axes[0, 1].set(xlabel="FLOPs", ylabel="peak memory (MB)", title="memory vs FLOPs")
    efficiency = frame["flops"] / (frame["latency_ms"] * 1e6)  # GFLOP/s
    by_batch = efficiency.groupby(frame["batch"]).median()
    axes[1, 0].plot(by_batch.index, by_batch.to_numpy(), marker="o")
    axes[1, 0].set(xscale="log", xlabel="batch", ylabel="median GFLOP/s", title="throughput vs batch")
    by_size = efficiency.groupby(frame["in_h"]).median()
    axes[1, 1].plot(by_size.index, by_size.to_numpy(), marker="o", color="tab:orange")
    axes[1, 1].set(xlabel="input side (px)", ylabel="median GFLOP/s", title="throughput vs input size")
    fig.tight_layout()
    return fig


def depth_width(frame: pd.DataFrame) -> Figure:
    """How latency and memory grow with depth (weighted layers) and with FLOPs per layer."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, column, label in (
        (axes[0], "latency_ms", "latency (ms)"),
        (axes[1], "peak_memory_mb", "memory (MB)"),
    ):
        if frame[column].notna().any():
            _scatter(
                ax,
                frame["depth"],
                frame[column],
                frame["flops"] / frame["depth"].clip(lower=1),
                "FLOPs/layer",
            )
        ax.set_xscale("linear")  # depth is a small integer count: log ticks would be unreadable
        ax.set(xlabel="depth (weighted layers)", ylabel=label, title=f"{label.split(' ')[0]} vs depth")
    fig.tight_layout()
    return fig


def memory_composition(frame: pd.DataFrame) -> Figure:
    """Measured peak memory split into analytic weights, analytic peak activations and the rest
    (runtime arena rounding, pre-packed weights, workspace), for configs sorted by memory."""
    data = frame.dropna(subset=["peak_memory_mb"]).sort_values("peak_memory_mb")
    step = max(1, len(data) // 60)
    data = data.iloc[::step]
    weights = data["weight_bytes"] / 1e6
    activations = data["peak_activation_bytes"] / 1e6
    rest = (data["peak_memory_mb"] - weights - activations).clip(lower=0)
    fig, ax = plt.subplots(figsize=(11, 4))
    position = np.arange(len(data))
    ax.bar(position, weights, label="weights (analytic)")
    ax.bar(position, activations, bottom=weights, label="peak activations (analytic)")
    ax.bar(position, rest, bottom=weights + activations, label="rest of the measured peak")
    ax.set(xlabel="configs, by measured peak memory", ylabel="MB", title="memory composition")
    ax.set_xticks([])
    ax.legend()
    fig.tight_layout()
    return fig


def energy_vs_latency(frame: pd.DataFrame) -> Figure:
    """Energy per inference / latency (mean power) against arithmetic intensity."""
    data = frame.dropna(subset=["energy_j"])
    fig, ax = plt.subplots(figsize=(6, 4))
    power = data["energy_j"] / (data["latency_ms"] / 1e3)
    _scatter(ax, data["arithmetic_intensity"], power, data["batch"], "batch")
    ax.set(
        xlabel="arithmetic intensity (FLOPs / byte)", ylabel="energy / latency (W)", title="energy vs latency"
    )
    fig.tight_layout()
    return fig


def noise(frame: pd.DataFrame) -> Figure:
    """The measurement noise: CI half-width of each median, and the re-measurement change of
    ``low_ms`` where a config was measured in more than one campaign."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = (frame["ci_high_ms"] - frame["ci_low_ms"]) / 2 / frame["median_ms"] * 100
    # rounded to 0.001 %: values equal but for float noise would leave no room for the bins
    axes[0].hist(width.clip(upper=width.quantile(0.99)).round(3), bins=40)
    axes[0].set(
        xlabel="95 % CI half-width of the median (%)", ylabel="configs", title="within-campaign noise"
    )
    repeats = frame[frame.duplicated(["platform_id", "config_id"], keep=False)]
    if len(repeats):
        spread = repeats.groupby(["platform_id", "config_id"])["low_ms"].agg(
            lambda v: (v.max() - v.min()) / v.min() * 100
        )
        axes[1].hist(spread.round(3), bins=30, color="tab:orange")
        axes[1].set(xlabel="|Δ low_ms| between campaigns (%)", ylabel="configs", title="re-measurement noise")
    else:
        axes[1].text(0.5, 0.5, "no config measured twice", ha="center", va="center")
        axes[1].set_axis_off()
    fig.tight_layout()
    return fig


def accuracy(frame: pd.DataFrame) -> Figure:
    """Predicted vs measured (log-log, 90 % intervals as bars) and the relative-error histogram,
    for every target in ``frame`` (columns ``<target>`` and ``<target>_predicted`` etc.)."""
    targets = [c for c in ("latency_ms", "peak_memory_mb", "energy_j") if f"{c}_predicted" in frame]
    fig, axes = plt.subplots(2, max(1, len(targets)), figsize=(5.5 * max(1, len(targets)), 8), squeeze=False)
    for i, column in enumerate(targets):
        data = frame.dropna(subset=[column, f"{column}_predicted"])
        truth, predicted = data[column], data[f"{column}_predicted"]
        ax = axes[0, i]
        ax.errorbar(
            truth,
            predicted,
            yerr=[predicted - data[f"{column}_low"], data[f"{column}_high"] - predicted],
            fmt="o",
            markersize=3,
            alpha=0.6,
            elinewidth=0.5,
        )
        bounds = [min(truth.min(), predicted.min()), max(truth.max(), predicted.max())]
        ax.plot(bounds, bounds, color="black", linewidth=1)
        ax.set(xscale="log", yscale="log", xlabel=f"measured {column}", ylabel="predicted", title=column)
        error = (predicted - truth) / truth * 100
        axes[1, i].hist(error.clip(-50, 50), bins=40, color="tab:green")
        axes[1, i].set(xlabel="relative error (%), clipped to ±50", ylabel="configs")
    fig.tight_layout()
    return fig


def transfer(frame: pd.DataFrame) -> Figure:
    """Measured latency of shared configs on each pair of platforms (log-log), slope in the title."""
    platforms = sorted(frame["platform_id"].unique())
    pairs = [(a, b) for i, a in enumerate(platforms) for b in platforms[i + 1 :]]
    fig, axes = plt.subplots(1, max(1, len(pairs)), figsize=(5 * max(1, len(pairs)), 4), squeeze=False)
    for ax, (a, b) in zip(axes[0], pairs, strict=False):
        left = frame[frame["platform_id"] == a].groupby("config_id")["latency_ms"].min()
        right = frame[frame["platform_id"] == b].groupby("config_id")["latency_ms"].min()
        shared = left.index.intersection(right.index)
        x, y = left.loc[shared], right.loc[shared]
        slope = np.polyfit(np.log(x), np.log(y), 1)[0] if len(shared) > 1 else float("nan")
        ax.scatter(x, y, s=8)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel=f"{a} (ms)",
            ylabel=f"{b} (ms)",
            title=f"log-log slope {slope:.2f}",
        )
    fig.tight_layout()
    return fig


def transfer_matrix(matrix: pd.DataFrame) -> Figure:
    """Heat maps of the transfer matrix: per cost target, R² and Spearman ρ of a predictor trained
    on the row platform, scored on the column platform."""
    targets = list(dict.fromkeys(matrix["target"]))
    names = list(dict.fromkeys([*matrix["source"], *matrix["target_platform"]]))
    fig, axes = plt.subplots(
        len(targets),
        2,
        figsize=(5.5 + 1.1 * len(names), (2.2 + 0.8 * len(names)) * len(targets)),
        squeeze=False,
    )
    for row, target in enumerate(targets):
        part = matrix[matrix["target"] == target]
        for col, (metric, low) in enumerate((("r2", 0.0), ("spearman", 0.5))):
            grid = part.pivot(index="source", columns="target_platform", values=metric)
            grid = grid.reindex(index=[n for n in names if n in grid.index], columns=names)
            ax = axes[row, col]
            image = ax.imshow(grid.to_numpy(dtype=float), vmin=low, vmax=1.0, cmap="viridis")
            for (i, j), value in np.ndenumerate(grid.to_numpy(dtype=float)):
                if np.isfinite(value):
                    ax.text(
                        j,
                        i,
                        f"{value:.2f}",
                        ha="center",
                        va="center",
                        color="white" if value < 0.8 else "black",
                    )
            ax.set_xticks(range(len(grid.columns)), grid.columns, rotation=30, ha="right")
            ax.set_yticks(range(len(grid.index)), grid.index)
            ax.set(xlabel="scored on", ylabel="trained on" if col == 0 else "", title=f"{target}: {metric}")
            fig.colorbar(image, ax=ax)
    fig.tight_layout()
    return fig
