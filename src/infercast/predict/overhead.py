"""The op-wise route's overhead model: how far a network's end-to-end time sits above the sum of
its kernels (dispatch per kernel, the share of ops fused away, the op-type mix), per model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.linear_model import RidgeCV

from infercast.graph import OP_GROUPS


def overhead_features(table: pd.DataFrame, kernel_ms: np.ndarray) -> pd.DataFrame:
    """Per model: what decides how far the end-to-end time sits above the sum of its kernels."""
    work = table.assign(_pred=kernel_ms)
    grouped = work.groupby("model", sort=False)
    total = grouped["_pred"].sum()
    n_kernels = grouped.size()
    n_ops = grouped["n_ops"].sum()
    frame = pd.DataFrame(
        {
            "log_kernel_ms": np.log(total),
            "log_n_kernels": np.log(n_kernels),
            "log_mean_kernel_ms": np.log(total / n_kernels),
            "absorbed_share": 1 - n_kernels / n_ops,
            "log_flops": np.log1p(grouped["flops"].sum()),
            "log_bytes": np.log1p(grouped["bytes"].sum().fillna(0)),
        }
    )
    for group in OP_GROUPS:
        frame[f"share_{group}"] = (
            work.assign(_hit=work["op_type"] == group).groupby("model", sort=False)["_hit"].mean()
        )
    return frame


class OverheadRidge:
    """Standardised ridge regression of ``log(e2e / Σ kernels)`` on the overhead features, saved as
    plain numbers."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.mean = np.zeros(0)
        self.scale = np.ones(0)
        self.coef = np.zeros(0)
        self.intercept = 0.0
        self.alpha = 1.0

    def fit(self, x: pd.DataFrame, y: np.ndarray) -> OverheadRidge:
        self.names = list(x.columns)
        matrix = x.to_numpy(dtype=np.float64)
        self.mean = matrix.mean(axis=0)
        spread = matrix.std(axis=0)
        self.scale = np.where(spread > 0, spread, 1.0)
        model = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit((matrix - self.mean) / self.scale, y)
        self.coef, self.intercept, self.alpha = model.coef_, float(model.intercept_), float(model.alpha_)
        return self

    def predict(self, x: pd.DataFrame) -> np.ndarray:
        matrix = x[self.names].to_numpy(dtype=np.float64)
        return (matrix - self.mean) / self.scale @ self.coef + self.intercept

    def to_dict(self) -> dict[str, Any]:
        return {
            "names": self.names,
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "coef": self.coef.tolist(),
            "intercept": self.intercept,
            "alpha": self.alpha,
        }

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> OverheadRidge:
        ridge = cls()
        ridge.names = list(saved["names"])
        ridge.mean = np.asarray(saved["mean"], dtype=np.float64)
        ridge.scale = np.asarray(saved["scale"], dtype=np.float64)
        ridge.coef = np.asarray(saved["coef"], dtype=np.float64)
        ridge.intercept = float(saved["intercept"])
        ridge.alpha = float(saved.get("alpha", 1.0))
        return ridge
