"""``PhysicalLatency``: latency as a sum of non-negative costs per unit of work.

``latency = Σ_i cost_i · x_i`` over the device features (``devices.features``: FLOPs per kind of
convolution, bytes moved, kernels launched, a constant). The costs are fitted by non-negative
least squares on *relative* error, so a 1 ms network weighs as much as a 100 ms one, and every
cost is a time per unit of work: a network of a family never seen still adds up its work at the
device's rates, where trees would fall back to the nearest training network.

The 90 % interval is ``prediction · e^(±q)``, q the conformal quantile of the out-of-fold
|log(truth / prediction)| — folds grouped (by architecture family, when given) and each group
weighing as one draw (``intervals.conformal_quantile``), so q holds for a family the predictor
never saw, however many networks the largest family has. A model is ``ood`` when the work it
has beyond what the training networks spanned carries a material share of its prediction, when
it has work no training network had (no cost was learned for it), or far less of a kind than any
training network; the reason says it in words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from infercast.predictors.artifact import checked_numbers
from infercast.predictors.base import Predictor, as_frame
from infercast.predictors.errors import PredictorError
from infercast.predictors.intervals import conformal_quantile
from infercast.predictors.metrics import log_r2_score, regression_metrics
from infercast.predictors.ood_rules import KERNEL_SHARE, describe_work

# a feature this many times below the training range leaves the prediction to the other costs
_RANGE_SLACK = 2.0


LOSSES = ("squared", "huber")
# Huber's loss: quadratic within this relative error, linear beyond, so that a family whose work
# the features miss pulls the costs of every other family less than its square would
HUBER_DELTA = 0.05
_HUBER_ROUNDS = 10


def fit_costs(x: np.ndarray, y: np.ndarray, loss: str = "squared") -> np.ndarray:
    """Non-negative costs minimising Σ ρ((x·cost − y) / y), ρ the squared or Huber's loss (by
    iteratively reweighted least squares)."""
    # SciPy and scikit-learn load when a model is fitted: a phone's cached predictor only predicts
    from scipy.optimize import nnls

    weights = np.ones(len(y))
    for _ in range(1 + (_HUBER_ROUNDS if loss == "huber" else 0)):
        root = np.sqrt(weights)
        design = x / y[:, None] * root[:, None]
        scale = np.abs(design).max(axis=0)
        scale[scale == 0] = 1.0  # a feature no training row has gets cost 0
        costs, _ = nnls(design / scale, root)
        costs = costs / scale
        relative = np.abs(x @ costs / y - 1)
        weights = np.minimum(1.0, HUBER_DELTA / np.maximum(relative, 1e-12))
    return costs


class PhysicalLatency(Predictor):
    """Latency (ms) of a network from its work, at non-negative per-unit costs.

    ``features``: the columns of ``X`` the costs are fitted on (by default every column of
    ``X``); ``candidates``: further columns of which grouped cross-validation keeps at most one
    (``chosen_``); ``n_folds``: grouped folds for that choice and for the interval's out-of-fold
    residuals; ``coverage``: the interval's nominal coverage; ``loss``: ``squared`` or ``huber``
    (``fit_costs``) relative error."""

    kind: ClassVar[str] = "physical-latency"
    _REQUIRED: ClassVar[dict[str, type | tuple[type, ...]]] = {
        "params": dict,
        "costs": dict,
        "interval_q": (int, float),
        "oof_log_residuals": list,
        "training_low": list,
        "training_high": list,
        "n_train": int,
    }
    _BODY_KEYS: ClassVar[tuple[str, ...]] = ("chosen",)

    def __init__(
        self,
        features: tuple[str, ...] = (),
        candidates: tuple[str, ...] = (),
        n_folds: int = 5,
        coverage: float = 0.9,
        loss: str = "squared",
    ) -> None:
        self.features = features
        self.candidates = candidates
        self.n_folds = n_folds
        self.coverage = coverage
        self.loss = loss

    # learned in fit (or read by load)
    chosen_: str | None
    columns_: tuple[str, ...]
    costs_: np.ndarray
    interval_q_: float
    residuals_: np.ndarray
    low_: np.ndarray
    high_: np.ndarray
    n_train_: int
    metadata_: dict[str, Any]

    def _validate(self) -> None:
        if self.n_folds < 2:
            raise PredictorError(f"n_folds={self.n_folds!r} must be at least 2")
        if not 0 < self.coverage < 1:
            raise PredictorError(f"coverage={self.coverage!r} must lie between 0 and 1")
        if self.loss not in LOSSES:
            raise PredictorError(f"loss={self.loss!r} must be one of {', '.join(LOSSES)}")

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "costs_")

    @staticmethod
    def _matrix(x: pd.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
        missing = [c for c in columns if c not in x.columns]
        if missing:
            raise PredictorError(f"feature columns {missing} are missing")
        matrix = x[list(columns)].to_numpy(dtype=np.float64)
        if not np.isfinite(matrix).all():
            raise PredictorError("features hold NaN or infinite values")
        return matrix

    def fit(
        self,
        X: Any,
        y: Any,
        groups: np.ndarray | None = None,
        scored: np.ndarray | None = None,
    ) -> PhysicalLatency:
        """Fit the costs on networks ``X`` with latencies ``y`` (ms); ``groups`` (e.g. families)
        keep related networks in one fold when calibrating the interval. ``scored`` (a boolean
        mask, default every row) marks the rows whose out-of-fold errors choose the extra column
        and calibrate the interval: one-kernel networks of a kernel campaign teach the costs of
        kernels the networks lack, but a network of many kernels is what the route predicts."""
        self._validate()
        columns = tuple(self.features)
        if isinstance(X, pd.DataFrame) and not columns:
            columns = tuple(c for c in X.columns if c not in self.candidates)
        x = as_frame(X, columns or [f"x{i}" for i in range(np.shape(X)[1])])
        features = columns or tuple(x.columns)
        if not features:
            raise PredictorError("X has no column to fit costs on")
        y = np.asarray(y, dtype=np.float64)
        if len(y) != len(x):
            raise PredictorError(f"{len(x)} rows of features but {len(y)} latencies")
        scored = np.ones(len(y), dtype=bool) if scored is None else np.asarray(scored, dtype=bool)
        if len(scored) != len(y) or not scored.any():
            raise PredictorError(f"scored must mark at least one of the {len(y)} rows")
        if not (np.isfinite(y).all() and (y > 0).all()):
            raise PredictorError("latencies must be positive and finite")
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        n_folds = min(self.n_folds, len(np.unique(groups)))
        if n_folds < 2:
            raise PredictorError(f"need networks of at least 2 groups to calibrate intervals, got {n_folds}")
        self.chosen_, residuals = self._choose(x, y, features, groups, scored, n_folds)
        self.columns_ = features + ((self.chosen_,) if self.chosen_ else ())
        matrix = self._matrix(x, self.columns_)
        # the out-of-fold residuals of the column chosen on them: a little optimistic when
        # candidates compete, the price of not nesting a second cross-validation
        self.interval_q_ = conformal_quantile(residuals, self.coverage, groups[scored])
        self.residuals_ = residuals
        self.costs_ = fit_costs(matrix, y, self.loss)
        self.low_, self.high_ = matrix.min(axis=0), matrix.max(axis=0)
        self.n_train_ = len(y)
        self.metadata_ = {}
        return self

    def _choose(
        self,
        x: pd.DataFrame,
        y: np.ndarray,
        features: tuple[str, ...],
        groups: np.ndarray,
        scored: np.ndarray,
        n_folds: int,
    ) -> tuple[str | None, np.ndarray]:
        """The candidate column (or none) whose costs' out-of-fold errors on the scored rows are
        lowest, and those rows' log residuals."""
        from sklearn.model_selection import GroupKFold

        folds = list(GroupKFold(n_folds).split(x, y, groups))
        best: tuple[float, str | None, np.ndarray] | None = None
        for extra in (None, *self.candidates):
            matrix = self._matrix(x, features + ((extra,) if extra else ()))
            residuals = np.empty(len(y))
            for train, test in folds:
                costs = fit_costs(matrix[train], y[train], self.loss)
                residuals[test] = np.log(y[test] / np.clip(matrix[test] @ costs, 1e-12, None))
            error = float(np.mean(np.abs(residuals[scored])))
            if best is None or error < best[0]:
                best = (error, extra, residuals[scored])
        assert best is not None
        return best[1], best[2]

    def predict(self, X: Any) -> pd.DataFrame:
        """``latency_ms`` with its 90 % interval (``latency_ms_low``, ``latency_ms_high``), ``ood``
        and ``ood_reason`` per row of ``X``."""
        self.check_fitted()
        x = as_frame(X, self.columns_)
        matrix = self._matrix(x, self.columns_)
        latency = np.clip(matrix @ self.costs_, 1e-9, None)
        # more work of a kind than any training network had rests on its per-unit cost: in
        # doubt when that extrapolated part is a material share of the prediction, or when the
        # work has no cost at all (no training network had any); far less work than any
        # training network leaves the prediction to the constant and the other costs
        extrapolated = np.clip(matrix - self.high_, 0, None) * self.costs_
        unpriced = (self.high_ <= 0) & (matrix > 0)
        outside = (
            (extrapolated >= KERNEL_SHARE * latency[:, None])
            | (unpriced & (matrix > self.high_))
            | (matrix < self.low_ / _RANGE_SLACK)
        )
        flagged = outside.any(axis=1)
        reasons = np.full(len(matrix), "", dtype=object)
        for i in np.flatnonzero(flagged):  # a screening predicts millions: only flagged rows get words
            reasons[i] = "; ".join(
                describe_work(self.columns_[j], matrix[i, j], self.low_[j], self.high_[j])
                for j in np.flatnonzero(outside[i])
            )
        return pd.DataFrame(
            {
                "latency_ms": latency,
                "latency_ms_low": latency * np.exp(-self.interval_q_),
                "latency_ms_high": latency * np.exp(self.interval_q_),
                "ood": flagged,
                # object, not Arrow-backed str: a screening filters a million of these rows
                "ood_reason": pd.Series(reasons, index=x.index, dtype=object),
            },
            index=x.index,
        )

    def margin(self, risk: float) -> float:
        """Log margin m such that a network is predicted more than e^m times its latency with
        probability about ``risk`` (one-sided, from the out-of-fold residuals): a screening drops
        a candidate only when ``prediction · e^-m`` is over budget."""
        self.check_fitted()
        if not 0 < risk < 0.5:
            raise PredictorError(f"risk={risk!r} must lie strictly between 0 and 0.5")
        return max(float(np.quantile(-self.residuals_, 1 - risk, method="higher")), 0.0)

    def score(self, X: Any, y: Any) -> float:
        """R² of log latency on networks with measured latencies ``y``."""
        truth = pd.DataFrame({"latency_ms": np.asarray(y, dtype=np.float64)})
        return log_r2_score(truth, self.predict(X).reset_index(drop=True), ["latency_ms"])

    def evaluate(self, X: Any, y: Any) -> dict[str, Any]:
        """Accuracy on networks with measured latencies ``y``: ±10 %, median error, Spearman,
        interval coverage (``metrics.regression_metrics``)."""
        predicted = self.predict(X)
        return regression_metrics(
            np.asarray(y, dtype=np.float64),
            predicted["latency_ms"].to_numpy(),
            predicted["latency_ms_low"].to_numpy(),
            predicted["latency_ms_high"].to_numpy(),
        )

    def costs(self) -> dict[str, float]:
        """The fitted cost of one unit of each feature (ms per GFLOP, per kernel, …)."""
        self.check_fitted()
        return dict(zip(self.columns_, self.costs_.tolist(), strict=True))

    def _body(self, folder: Path) -> dict[str, Any]:
        """The costs, the interval's residuals and the training ranges: numbers only."""
        return {
            "params": {
                "features": list(self.features),
                "candidates": list(self.candidates),
                "n_folds": self.n_folds,
                "coverage": self.coverage,
                "loss": self.loss,
            },
            "chosen": self.chosen_,
            "costs": self.costs(),
            "interval_q": self.interval_q_,
            "oof_log_residuals": self.residuals_.tolist(),
            "training_low": self.low_.tolist(),
            "training_high": self.high_.tolist(),
            "n_train": self.n_train_,
        }

    @classmethod
    def _from_body(cls, folder: Path, saved: dict[str, Any]) -> PhysicalLatency:
        params = saved["params"]
        model = cls(
            tuple(params["features"]),
            tuple(params["candidates"]),
            int(params["n_folds"]),
            float(params["coverage"]),
            str(params.get("loss", "squared")),  # files written before the loss was a choice
        )
        model.chosen_ = saved.get("chosen")
        model.columns_ = tuple(saved["costs"])
        where = f"{folder / 'meta.json'}"
        model.costs_ = checked_numbers(list(saved["costs"].values()), f"{where}: costs", lowest=0.0)
        model.interval_q_ = float(checked_numbers(saved["interval_q"], f"{where}: interval_q", lowest=0.0))
        model.residuals_ = checked_numbers(saved["oof_log_residuals"], f"{where}: oof_log_residuals")
        model.low_ = checked_numbers(saved["training_low"], f"{where}: training_low")
        model.high_ = checked_numbers(saved["training_high"], f"{where}: training_high")
        model.n_train_ = int(saved["n_train"])
        if not (len(model.low_) == len(model.high_) == len(model.costs_)):
            raise PredictorError(f"{folder}: costs and training ranges differ in length")
        return model
