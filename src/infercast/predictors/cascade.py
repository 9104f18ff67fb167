"""One target of the cascade blend, fitted: its learners and blend weights on a log-linear trend,
the small-batch corrector, the fast screening model and the interval's calibration — and how it
is written to and read from a predictor directory (one native file per model, numbers in JSON).

The trend is ``[1, log FLOPs, log params, log bytes moved, *log estimates]`` (``design``): trees
cannot extrapolate, so the learners fit what the trend leaves and a config larger than any seen
follows the trend's slope (``predictors.blend``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.predictors.artifact import checked_numbers, inside_folder
from infercast.predictors.data import TARGETS
from infercast.predictors.errors import PredictorError
from infercast.predictors.intervals import Calibration, calibrate
from infercast.predictors.learners import LEARNERS, LightGBMLearner, XGBoostLearner
from infercast.predictors.metrics import regression_metrics

TREND_COLUMNS = ("flops", "params", "weight_bytes", "activation_bytes")
# the trend's own columns: 1, log FLOPs, log params, log bytes moved
_BASE_TREND = 4


@dataclass
class TargetModel:
    """What the cascade learned of one target (``inputs``: the feature columns and the earlier
    targets' log predictions it reads)."""

    target: str
    inputs: list[str]
    learners: dict[str, Any]
    weights: dict[str, float]
    interval_q: float
    corrector: LightGBMLearner | None = None
    corrector_note: str = ""
    oof_metrics: dict[str, Any] = field(default_factory=dict)
    n_train: int = 0
    trend: np.ndarray | None = None
    trend_index: list[int] = field(default_factory=list)
    fast: XGBoostLearner | None = None
    # the fast model's |log residual| / (1 + fast_beta·d) quantiles at 1 %, 2 %, …, 99 % (the larger
    # of the near and far held-out sets'): a screening margin that widens with the difficulty d
    fast_q: list[float] = field(default_factory=list)
    fast_beta: float = 0.0
    fast_plain_q: list[float] = field(default_factory=list)  # the near rows' |r| quantiles alone
    calibration: Calibration = field(default_factory=lambda: Calibration(float("nan")))

    def offset(self, x: np.ndarray) -> np.ndarray:
        """The trend's log prediction of each row (0 without a trend)."""
        return design(x, self.trend_index) @ self.trend if self.trend is not None else np.zeros(len(x))

    def predict_fast_log(self, x: np.ndarray) -> np.ndarray:
        if self.fast is None:
            raise PredictorError(f"the {self.target} target has no fast screening model")
        return self.fast.predict(x) + self.offset(x)

    def predict_log(self, x: np.ndarray, batch: np.ndarray, small_batch: int) -> np.ndarray:
        out = self.offset(x)
        for name, learner in self.learners.items():
            if self.weights[name] > 0:
                out += self.weights[name] * learner.predict(x)
        if self.corrector is not None and len(x):
            small = batch <= small_batch
            if small.any():
                out[small] += self.corrector.predict(x[small])
        return out

    def save(self, folder: Path) -> dict[str, Any]:
        """Write this target's model files into ``folder``; return its meta.json entry."""
        files = {}
        for name, learner in self.learners.items():
            path = folder / f"{self.target}.{name}{learner.suffix}"
            learner.save(path)
            files[name] = path.name
        written = {}
        for role, model in (("fast", self.fast), ("corrector", self.corrector)):
            if model is not None:
                written[role] = f"{self.target}.{role}{model.suffix}"
                model.save(folder / written[role])
        return {
            "column": TARGETS[self.target],
            "inputs": self.inputs,
            "files": files,
            "weights": self.weights,
            "interval_q": self.interval_q,
            "calibration": self.calibration.to_dict(),
            "trend": None if self.trend is None else self.trend.tolist(),
            "trend_index": self.trend_index,
            "fast": written.get("fast"),
            "fast_q": self.fast_q,
            "fast_beta": self.fast_beta,
            "fast_plain_q": self.fast_plain_q,
            "corrector": written.get("corrector"),
            "corrector_note": self.corrector_note,
            "n_train": self.n_train,
            "oof_metrics": self.oof_metrics,
        }

    @classmethod
    def load(cls, folder: Path, target: str, entry: Any) -> TargetModel:
        """The target ``save`` wrote ``entry`` for (every file name checked to stay inside)."""
        if not isinstance(entry, dict):
            raise PredictorError(f"{folder / 'meta.json'}: stage {target!r} is not an object")
        learners = {}
        for name, filename in entry["files"].items():
            if name not in LEARNERS:
                raise PredictorError(f"{folder}: unknown learner {name!r} in meta.json")
            learners[name] = LEARNERS[name].load(inside_folder(folder, filename))
        corrector, fast, trend = entry.get("corrector"), entry.get("fast"), entry.get("trend")
        where = f"{folder / 'meta.json'}: stage {target!r}"
        checked_numbers(list(entry["weights"].values()), f"{where}, weights", lowest=0.0)
        checked_numbers(
            [entry["interval_q"], *entry.get("fast_q", []), *entry.get("fast_plain_q", [])],
            f"{where}, interval quantiles",
            lowest=0.0,
        )
        if trend is not None:
            checked_numbers(trend, f"{where}, trend")
        return cls(
            target=target,
            inputs=list(entry["inputs"]),
            learners=learners,
            weights={k: float(v) for k, v in entry["weights"].items()},
            interval_q=float(entry["interval_q"]),
            trend=None if trend is None else np.asarray(trend, dtype=np.float64),
            trend_index=[int(i) for i in entry.get("trend_index", [])],
            corrector=LightGBMLearner.load(inside_folder(folder, corrector)) if corrector else None,
            fast=XGBoostLearner.load(inside_folder(folder, fast)) if fast else None,
            fast_q=[float(q) for q in entry.get("fast_q", [])],
            fast_beta=float(entry.get("fast_beta", 0.0)),
            fast_plain_q=[float(q) for q in entry.get("fast_plain_q", [])],
            corrector_note=entry.get("corrector_note", ""),
            oof_metrics=entry.get("oof_metrics", {}),
            n_train=int(entry.get("n_train", 0)),
            calibration=Calibration.from_dict(entry.get("calibration"), float(entry["interval_q"])),
        )


def design(x: np.ndarray, index: list[int]) -> np.ndarray:
    """``[1, log FLOPs, log params, log bytes moved, *log estimates]``: the log-linear trend the
    trees refine (indices beyond the first four are columns already in log space)."""
    flops, params, weights, activations = (x[:, i] for i in index[:4])
    return np.column_stack(
        [
            np.ones(len(x)),
            *(np.log(np.clip(v, 1.0, None)) for v in (flops, params, weights + activations)),
            *(x[:, i] for i in index[4:]),
        ]
    )


def trend(design_matrix: np.ndarray, y: np.ndarray, detrend: bool) -> np.ndarray:
    """The trend's coefficients. Log estimates (the columns after ``_BASE_TREND``) are an offset,
    their mean taken with coefficient 1, and the log-linear terms fitted to what it leaves: a free
    coefficient let the trend lean partly on FLOPs and parameters instead, a mix learnt on design-
    space configs that moved real networks away from an estimate that was right for them."""
    if not detrend:
        return np.zeros(design_matrix.shape[1])
    n_estimates = design_matrix.shape[1] - _BASE_TREND
    offset = design_matrix[:, _BASE_TREND:].mean(axis=1) if n_estimates else np.zeros(len(design_matrix))
    coef, *_ = np.linalg.lstsq(design_matrix[:, :_BASE_TREND], y - offset, rcond=None)
    return np.concatenate([coef, np.full(n_estimates, 1.0 / max(n_estimates, 1))])


def matrix(x: pd.DataFrame, names: list[str]) -> np.ndarray:
    """The columns ``names`` of ``x`` as floats, refused with the columns' names if any is not
    finite."""
    values = x[names].to_numpy(dtype=np.float64)
    if not np.isfinite(values).all():
        bad = [n for n, ok in zip(names, np.isfinite(values).all(axis=0), strict=True) if not ok]
        raise PredictorError(f"feature columns with NaN or infinite values: {', '.join(bad)}")
    return values


def blend_weights(oof: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative weights summing to 1 that best combine the out-of-fold predictions: least
    squares under both constraints, the sum held by one heavily weighted extra equation. SciPy's
    optimiser loads here, at fit time: a prediction does without it."""
    from scipy.optimize import nnls

    heavy = 1e3 * max(1.0, float(np.abs(y).max())) * math.sqrt(len(y))
    weights, _ = nnls(np.vstack([oof, np.full(oof.shape[1], heavy)]), np.append(y, heavy))
    total = weights.sum()
    return weights / total if total > 0 else np.full(oof.shape[1], 1 / oof.shape[1])


def fit_corrector(
    x: np.ndarray,
    residual: np.ndarray,
    small: np.ndarray,
    folds: list[tuple[Any, Any]],
    make: Any,
    small_batch: int,
) -> tuple[LightGBMLearner | None, str, np.ndarray]:
    """The small-batch residual corrector (``make()`` builds one), its note, and its
    cross-validated correction of each row: kept only if it lowers the small-batch rows'
    cross-validated error by 2 % or more. ``small``: the row positions with ``batch <=
    small_batch``."""
    correction = np.zeros(len(x))
    if len(small) < 30:
        return None, f"not fitted: {len(small)} rows with batch <= {small_batch} (needs 30)", correction
    in_small = np.zeros(len(x), dtype=bool)
    in_small[small] = True
    cv = np.zeros(len(x))
    for train, held in folds:
        fit_rows, held_rows = train[in_small[train]], held[in_small[held]]
        if len(fit_rows) >= 20 and len(held_rows):
            cv[held_rows] = make().fit(x[fit_rows], residual[fit_rows]).predict(x[held_rows])
    before = float(np.mean(residual[small] ** 2))
    after = float(np.mean((residual[small] - cv[small]) ** 2))
    if after >= 0.98 * before:
        return None, f"not kept: cross-validated MSE {after:.3g} vs {before:.3g} without it", correction
    correction[small] = cv[small]
    note = f"kept: small-batch log-MSE {before:.3g} -> {after:.3g} (cross-validated, {len(small)} rows)"
    return make().fit(x[small], residual[small]), note, correction


def calibrate_target(
    model: TargetModel,
    y: np.ndarray,
    oof: np.ndarray,
    near: np.ndarray,
    far: np.ndarray,
    far_difficulty: np.ndarray,
    coverage: float,
) -> None:
    """The interval of ``model`` from its out-of-fold log predictions ``oof`` of ``y`` (near, with
    their difficulties) and the fast model's residuals on extrapolation folds (far), and the
    out-of-fold metrics it reports."""
    model.calibration = calibrate(y - oof, near, coverage, far, far_difficulty)
    model.interval_q = model.calibration.q
    half = model.calibration.half_width(near, len(near))
    truth, predicted = np.exp(y), np.exp(oof)
    model.oof_metrics = regression_metrics(
        truth, predicted, predicted * np.exp(-half), predicted * np.exp(half)
    )
