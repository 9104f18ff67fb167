"""The transfer matrix: how well a predictor trained on platform A predicts platform B.

For every ordered pair of platforms in a store, per target: train a ``CascadeBlend`` on A's
configs outside a held-out set, predict the held-out configs B measured, and score the prediction
against B's measurements — R², Spearman ρ, MAPE, and the log-log slope of B's measurements on A's
predictions (1 when the scale transfers; the median ratio B / A tells the constant factor). The
held-out set is half of the configs measured on two or more platforms, so the diagonal (A = B)
is the ordinary held-out accuracy on the same configs the off-diagonal cells are scored on.
``slope_measured`` is the same slope between the two platforms' own measurements, where both
measured a config: the relation of the devices, independent of any predictor.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.datasets import TrainingData, training_data
from infercast.predictors import TARGETS, CascadeBlend, regression_metrics
from infercast.predictors.data import settings_columns
from infercast.store import Store

MIN_TRAIN = 12


def platform_label(row: dict[str, Any]) -> str:
    """A short readable name: backend, threads and (ONNX Runtime) optimisation level."""
    settings = row.get("settings") or {}
    label = f"{row['backend']} {settings.get('threads', 1)}t"
    if "opt_level" in settings:
        label += f" opt={settings['opt_level']}"
    return label


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.ptp(np.log(x)) == 0:
        return float("nan")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def transfer_matrix(
    db: str | Path,
    test_fraction: float = 0.5,
    n_estimators: int = 200,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """One row per (source, target platform, cost target) with n, r2, r2_log, spearman, mape,
    slope, median_ratio and slope_measured; empty when fewer than two platforms share configs."""
    say = progress or (lambda message: None)
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction={test_fraction!r} must lie strictly between 0 and 1")
    with Store(db, readonly=True) as store:
        platforms = store.platforms().to_dict("records")
        data: dict[str, TrainingData] = {p["id"]: training_data(store, p["id"]) for p in platforms}
    counts = pd.Series(np.concatenate([d.config_ids for d in data.values()])).value_counts()
    shared = np.sort(counts[counts >= 2].index.to_numpy(dtype=object))
    if len(platforms) < 2 or len(shared) < 4:
        return pd.DataFrame()
    rng = np.random.default_rng(seed)
    held = set(rng.permutation(shared)[: max(2, int(len(shared) * test_fraction))].tolist())
    labels = {p["id"]: platform_label(p) for p in platforms}
    repeated = pd.Series(list(labels.values())).duplicated(keep=False).to_numpy()
    for (pid, label), twice in zip(list(labels.items()), repeated, strict=True):
        if twice:  # the same settings on two machines: the id tells them apart
            labels[pid] = f"{label} [{pid[:6]}]"
    rows = []
    for source in platforms:
        own = data[source["id"]]
        train = np.array([cid not in held for cid in own.config_ids])
        if train.sum() < MIN_TRAIN:
            say(f"{labels[source['id']]}: {int(train.sum())} training configs, too few to be a source")
            continue
        order = tuple(t for t in ("memory", "energy", "latency") if own.y[TARGETS[t]].notna().any())
        say(f"training on {labels[source['id']]} ({int(train.sum())} configs)")
        # one thread: OpenMP's spin-waiting made two threads many times slower on a busy host
        blend = CascadeBlend(
            order=order,
            n_estimators=n_estimators,
            forest_estimators=max(1, n_estimators // 2),
            seed=seed,
            n_jobs=1,
        ).fit(own.x[train], own.y[train])
        measured_a = pd.DataFrame(own.y.to_numpy(), index=own.config_ids, columns=own.y.columns)
        for target_platform in platforms:
            other = data[target_platform["id"]]
            test = np.array([cid in held for cid in other.config_ids])
            if not test.any():
                continue
            x = other.x[test].assign(**settings_columns(source["settings"]))
            predicted = blend.predict(x, ood="none")
            for target in blend.targets_:
                column = TARGETS[target]
                truth = other.y[column].to_numpy(dtype=np.float64)[test]
                guess = predicted[column].to_numpy(dtype=np.float64)
                keep = np.isfinite(truth) & (truth > 0) & np.isfinite(guess)
                if keep.sum() < 3:
                    continue
                metrics = regression_metrics(truth[keep], guess[keep])
                both = measured_a[column].reindex(other.config_ids[test]).to_numpy(dtype=np.float64)
                pair = keep & np.isfinite(both) & (both > 0)
                rows.append(
                    {
                        "source": labels[source["id"]],
                        "target_platform": labels[target_platform["id"]],
                        "target": target,
                        "n": int(keep.sum()),
                        "r2": metrics["r2"],
                        "r2_log": metrics["r2_log"],
                        "spearman": metrics["spearman"],
                        "mape": metrics["mape"],
                        "slope": _slope(guess[keep], truth[keep]),
                        "median_ratio": float(np.median(truth[keep] / guess[keep])),
                        "slope_measured": _slope(both[pair], truth[pair]),
                    }
                )
    return pd.DataFrame(rows)


__all__ = ["platform_label", "transfer_matrix"]
