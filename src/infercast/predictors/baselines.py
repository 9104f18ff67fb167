"""The baselines every evaluation is compared with: what a FLOPs count alone tells you.

- ``FlopsProportional``: ``y = a · FLOPs``, ``a`` the geometric mean of ``y / FLOPs`` (fitted on logs,
  so a few huge models do not decide it).
- ``LogLinear``: ``log y = b0 + b1 log FLOPs + b2 log params + b3 log bytes`` by least squares, bytes
  being weight + activation bytes.

Both are a handful of coefficients, saved in the predictor's ``meta.json``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def _log(values: pd.Series | np.ndarray) -> np.ndarray:
    return np.log(np.clip(np.asarray(values, dtype=np.float64), 1.0, None))


class FlopsProportional:
    name = "flops"

    def __init__(self, coef: float | None = None) -> None:
        self.coef = coef

    def fit(self, x: pd.DataFrame, y: np.ndarray) -> FlopsProportional:
        self.coef = float(np.exp(np.mean(np.log(y) - _log(x["flops"]))))
        return self

    def predict(self, x: pd.DataFrame) -> np.ndarray:
        if self.coef is None:
            raise ValueError("FlopsProportional is not fitted")
        return self.coef * np.clip(np.asarray(x["flops"], dtype=np.float64), 1.0, None)

    def to_dict(self) -> dict[str, Any]:
        return {"coef": self.coef}


class LogLinear:
    name = "loglinear"

    def __init__(self, coef: list[float] | None = None) -> None:
        self.coef = None if coef is None else np.asarray(coef, dtype=np.float64)

    @staticmethod
    def _design(x: pd.DataFrame) -> np.ndarray:
        moved = np.asarray(x["weight_bytes"], dtype=np.float64) + np.asarray(x["activation_bytes"])
        return np.column_stack([np.ones(len(x)), _log(x["flops"]), _log(x["params"]), _log(moved)])

    def fit(self, x: pd.DataFrame, y: np.ndarray) -> LogLinear:
        self.coef, *_ = np.linalg.lstsq(self._design(x), np.log(y), rcond=None)
        return self

    def predict(self, x: pd.DataFrame) -> np.ndarray:
        if self.coef is None:
            raise ValueError("LogLinear is not fitted")
        return np.exp(self._design(x) @ self.coef)

    def to_dict(self) -> dict[str, Any]:
        return {"coef": None if self.coef is None else self.coef.tolist()}


BASELINES = {cls.name: cls for cls in (FlopsProportional, LogLinear)}


def fit_baselines(x: pd.DataFrame, y: np.ndarray) -> dict[str, Any]:
    return {name: cls().fit(x, y) for name, cls in BASELINES.items()}


def load_baselines(saved: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: BASELINES[name](**params) for name, params in saved.items()}
