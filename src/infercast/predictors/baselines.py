"""The baselines every evaluation is compared with: what a FLOPs count alone tells you.

- ``FlopsProportional``: ``y = a · FLOPs``, ``a`` the geometric mean of ``y / FLOPs`` (fitted on logs,
  so a few huge models do not decide it).
- ``LogLinear``: ``log y = b0 + b1 log FLOPs + b2 log params + b3 log bytes`` by least squares, bytes
  being weight + activation bytes.

Both are a handful of coefficients (``coef_``): the blend keeps them in its meta.json, and each
is a predictor directory of its own when saved alone. ``predict`` returns the target's values
(scikit-learn's regressors' shape), not a frame: a baseline has no interval and no OOD check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from infercast.predictors.base import Predictor, as_frame
from infercast.predictors.data import INPUT_COLUMNS
from infercast.predictors.errors import PredictorError
from infercast.predictors.metrics import log_r2_score, regression_metrics


def _log(values: pd.Series | np.ndarray) -> np.ndarray:
    return np.log(np.clip(np.asarray(values, dtype=np.float64), 1.0, None))


class Baseline(Predictor):
    """A target ``y`` (one value per row, e.g. latency in ms) from a few columns of ``X``."""

    name: ClassVar[str]
    _REQUIRED: ClassVar[dict[str, type | tuple[type, ...]]] = {"coef": list}

    def __init__(self) -> None:
        pass

    coef_: np.ndarray

    def _design(self, x: pd.DataFrame) -> np.ndarray:
        raise NotImplementedError

    def _target(self, y: Any, n_rows: int) -> np.ndarray:
        values = np.asarray(y, dtype=np.float64).reshape(-1)
        if len(values) != n_rows:
            raise PredictorError(f"X has {n_rows} rows but y has {len(values)}")
        if not (np.isfinite(values).all() and (values > 0).all()):
            raise PredictorError(f"{type(self).__name__}: y must be positive and finite")
        return values

    def predict(self, X: Any) -> np.ndarray:
        self.check_fitted()
        return self._predict(self._design(as_frame(X, INPUT_COLUMNS)))

    def _predict(self, design: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def score(self, X: Any, y: Any) -> float:
        """R² of log ``y``."""
        x = as_frame(X, INPUT_COLUMNS)
        truth = pd.DataFrame({"target": self._target(y, len(x))})
        return log_r2_score(truth, pd.DataFrame({"target": self.predict(x)}), ["target"])

    def evaluate(self, X: Any, y: Any) -> dict[str, Any]:
        x = as_frame(X, INPUT_COLUMNS)
        return regression_metrics(self._target(y, len(x)), self.predict(x))

    def to_dict(self) -> dict[str, Any]:
        return {"coef": np.atleast_1d(self.coef_).tolist()}

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> Baseline:
        model = cls()
        coef = np.asarray(saved["coef"], dtype=np.float64)
        model.coef_ = coef if coef.ndim else coef.reshape(1)
        if not np.isfinite(model.coef_).all():
            raise PredictorError(f"{cls.__name__}: coefficients {saved['coef']!r} are not finite")
        model.metadata_ = {}
        return model

    def _body(self, folder: Path) -> dict[str, Any]:
        return self.to_dict()

    @classmethod
    def _from_body(cls, folder: Path, saved: dict[str, Any]) -> Baseline:
        return cls.from_dict(saved)


class FlopsProportional(Baseline):
    name: ClassVar[str] = "flops"
    kind: ClassVar[str] = "flops-proportional"

    def _design(self, x: pd.DataFrame) -> np.ndarray:
        return np.clip(np.asarray(x["flops"], dtype=np.float64), 1.0, None)[:, None]

    def fit(self, X: Any, y: Any) -> FlopsProportional:
        x = as_frame(X, INPUT_COLUMNS)
        values = self._target(y, len(x))
        self.coef_ = np.array([np.exp(np.mean(np.log(values) - _log(x["flops"])))])
        self.metadata_ = {}
        return self

    def _predict(self, design: np.ndarray) -> np.ndarray:
        return self.coef_[0] * design[:, 0]


class LogLinear(Baseline):
    name: ClassVar[str] = "loglinear"
    kind: ClassVar[str] = "log-linear"

    def _design(self, x: pd.DataFrame) -> np.ndarray:
        moved = np.asarray(x["weight_bytes"], dtype=np.float64) + np.asarray(x["activation_bytes"])
        return np.column_stack([np.ones(len(x)), _log(x["flops"]), _log(x["params"]), _log(moved)])

    def fit(self, X: Any, y: Any) -> LogLinear:
        x = as_frame(X, INPUT_COLUMNS)
        self.coef_, *_ = np.linalg.lstsq(self._design(x), np.log(self._target(y, len(x))), rcond=None)
        self.metadata_ = {}
        return self

    def _predict(self, design: np.ndarray) -> np.ndarray:
        return np.exp(design @ self.coef_)


BASELINES: dict[str, type[Baseline]] = {cls.name: cls for cls in (FlopsProportional, LogLinear)}


def fit_baselines(x: pd.DataFrame, y: np.ndarray) -> dict[str, Baseline]:
    return {name: cls().fit(x, y) for name, cls in BASELINES.items()}


def load_baselines(saved: dict[str, dict[str, Any]]) -> dict[str, Baseline]:
    unknown = [name for name in saved if name not in BASELINES]
    if unknown:
        raise PredictorError(f"unknown baselines {unknown}; infercast knows {', '.join(BASELINES)}")
    return {name: BASELINES[name].from_dict(params) for name, params in saved.items()}
