"""CARB's model-level predictor: a cascade of blended tree ensembles on log targets.

Per target, in cascade order (memory → energy → latency by default; each later stage also gets the
earlier stages' log predictions as features):

1. XGBoost, LightGBM and extremely-randomized trees are fitted on ``log(target)`` minus a
   log-linear trend in FLOPs, parameters and bytes moved (``detrend``, on by default; not in the
   paper): trees cannot extrapolate, so a config larger than any seen would otherwise be
   predicted as the largest one seen — with the trend it follows the trend's slope. Another
   predictor's log estimate of the target (``estimates``: the op-wise route's ``log_opwise_ms``)
   is the trend's offset (coefficient 1; the log-linear terms fit what it leaves) and a feature,
   so the trees learn where it errs and a network unlike the training ones still follows it;
2. their out-of-fold predictions (folds stratified by batch tier × depth tier, as in the paper)
   choose the blend weights by least squares constrained to be non-negative and sum to 1;
3. a small LightGBM **residual corrector** for small batches (``batch <= small_batch``, where
   fixed per-call overheads bend the scaling) is fitted on the out-of-fold residuals of those rows
   and kept only if it lowers their cross-validated error;
4. a split-conformal interval ``[pred · e^-h, pred · e^h]`` whose half-width grows with the
   input's distance to the training rows, ``h = q·(1 + β·d)``, calibrated on the out-of-fold
   residuals (near) and on the fast model's residuals in folds that hold out a whole depth tier,
   input size, batch tier or op-type mix (far), so it holds for configs like the training ones
   and for extrapolations alike (``predict.intervals``).

A target with no data (energy on a host without a sensor) is skipped and reported as unavailable.

Length: the module is one estimator. Its stages, fast screening models, corrector and their
code-free save / load share private state (``_Stage``), and each step is kept beside the others it
must agree with; the generic parts live beside it (``folds``, ``intervals``, ``metrics``,
``learners``, ``baselines``, ``ood``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls
from sklearn.base import BaseEstimator

from infercast.predictors.artifact import (
    Described,
    check_feature_schema,
    damaged_as_error,
    inside_folder,
    read_meta,
    write_meta,
)
from infercast.predictors.baselines import fit_baselines, load_baselines
from infercast.predictors.data import feature_frame
from infercast.predictors.errors import PredictorError
from infercast.predictors.folds import depth_edges, extrapolation_folds, strata, stratified_folds
from infercast.predictors.intervals import Calibration, calibrate, interval_note, put_interval
from infercast.predictors.learners import LEARNERS, LightGBMLearner, XGBoostLearner
from infercast.predictors.metrics import SCORE_ORDER, log_r2_score, regression_metrics, score_target
from infercast.predictors.ood import OODDetector

TARGETS: dict[str, str] = {"memory": "peak_memory_mb", "energy": "energy_j", "latency": "latency_ms"}
DEFAULT_ORDER: tuple[str, ...] = ("memory", "energy", "latency")
_TREND_COLUMNS = ("flops", "params", "weight_bytes", "activation_bytes")
# the keys load reads, with their JSON types (read_meta refuses a meta.json without them)
_SCHEMA: dict[str, type | tuple[type, ...]] = {
    "params": dict,
    "feature_names": list,
    "depth_edges": list,
    "stages": dict,
    "unavailable": dict,
}
_BODY_KEYS = {
    "params",
    "feature_names",
    "depth_edges",
    "stages",
    "unavailable",
    "baselines",
}


@dataclass
class _Stage:
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
    calibration: Calibration = field(default_factory=lambda: Calibration(float("nan")))  # set by _calibrate

    def predict_fast_log(self, x: np.ndarray) -> np.ndarray:
        if self.fast is None:
            raise PredictorError(f"the {self.target} stage has no fast screening model")
        trend = _design(x, self.trend_index) @ self.trend if self.trend is not None else 0.0
        return self.fast.predict(x) + trend

    def predict_log(self, x: np.ndarray, batch: np.ndarray, small_batch: int) -> np.ndarray:
        out = _design(x, self.trend_index) @ self.trend if self.trend is not None else np.zeros(len(x))
        for name, learner in self.learners.items():
            if self.weights[name] > 0:
                out += self.weights[name] * learner.predict(x)
        if self.corrector is not None and len(x):
            small = batch <= small_batch
            if small.any():
                out[small] += self.corrector.predict(x[small])
        return out


class CascadeBlend(Described, BaseEstimator):
    """Predict peak memory, energy and latency from analytic features (CARB's cascade blend).

    ``fit(X, y)``: ``X`` numeric feature columns (``batch`` and ``depth`` among them, for the
    stratified folds), ``y`` a frame with any of ``peak_memory_mb``, ``energy_j``, ``latency_ms``.
    ``predict(X)`` returns, per target, the value and its interval bounds (``<target>_low``,
    ``<target>_high``); targets it could not learn are listed in ``unavailable_`` with the reason.
    ``score(X, y)`` is one number (R² of the log target, for model selection); ``evaluate(X, y)``
    the full metrics. A scikit-learn estimator: ``clone``, ``get_params`` / ``set_params``,
    ``cross_val_score`` and ``GridSearchCV`` work; learned attributes end in ``_``.
    """

    def __init__(
        self,
        order: tuple[str, ...] = DEFAULT_ORDER,
        learners: tuple[str, ...] = ("xgboost", "lightgbm", "extratrees"),
        n_estimators: int = 600,
        forest_estimators: int = 300,
        n_folds: int = 5,
        interval: float = 0.9,
        small_batch: int = 8,
        detrend: bool = True,
        fast_estimators: int = 150,
        seed: int = 0,
        n_jobs: int = 2,
        estimates: tuple[str, ...] = (),
    ) -> None:
        self.order = order
        self.learners = learners
        self.n_estimators = n_estimators
        self.forest_estimators = forest_estimators
        self.n_folds = n_folds
        self.interval = interval
        self.small_batch = small_batch
        self.detrend = detrend
        self.fast_estimators = fast_estimators
        self.seed = seed
        self.n_jobs = n_jobs
        self.estimates = estimates
        self.metadata: dict[str, Any] = {}
        self._validate()

    # learned in fit (scikit-learn's convention: set by fit, named with a trailing underscore)
    feature_names_: list[str]
    stages_: dict[str, _Stage]
    unavailable_: dict[str, str]
    depth_edges_: np.ndarray
    ood_: OODDetector | None
    baselines_: dict[str, dict[str, Any]]

    def _validate(self) -> None:
        """Every hyper-parameter checked, each error naming the bad value (at construction, and
        again at ``fit`` after ``set_params``)."""
        unknown = [t for t in self.order if t not in TARGETS]
        if unknown or len(set(self.order)) != len(self.order) or not self.order:
            raise PredictorError(f"order={self.order!r}: use distinct targets among {list(TARGETS)}")
        bad = [name for name in self.learners if name not in LEARNERS]
        if bad or not self.learners:
            raise PredictorError(f"learners={self.learners!r}: choose among {list(LEARNERS)}")
        if not 0 < self.interval < 1:
            raise PredictorError(f"interval={self.interval!r} must lie strictly between 0 and 1")
        if self.n_folds < 2:
            raise PredictorError(f"n_folds={self.n_folds!r} must be at least 2")
        for name in ("n_estimators", "forest_estimators", "fast_estimators", "n_jobs"):
            if getattr(self, name) < 1:
                raise PredictorError(f"{name}={getattr(self, name)!r} must be at least 1")
        bad = [name for name in self.estimates if not str(name).startswith("log_")]
        if bad:
            raise PredictorError(f"estimates={self.estimates!r}: a log estimate's column is named log_*")
        if self.estimates and not self.detrend:
            raise PredictorError(f"estimates={self.estimates!r} enter the trend: they need detrend=True")

    # -- training -----------------------------------------------------------------------------
    def _make(self, name: str) -> Any:
        learner = LEARNERS[name]
        size = getattr(self, learner.size_param)
        return learner(n_estimators=size, seed=self.seed, n_jobs=self.n_jobs)

    def fit(self, x: pd.DataFrame, y: pd.DataFrame) -> CascadeBlend:
        self._validate()
        for column in ("batch", "depth", *(_TREND_COLUMNS if self.detrend else ()), *self.estimates):
            if column not in x.columns:
                raise PredictorError(f"feature column {column!r} is missing (needed for folds / trend)")
        if len(x) != len(y):
            raise PredictorError(f"X has {len(x)} rows but y has {len(y)}")
        self.feature_names_ = list(x.columns)
        base = _matrix(x, self.feature_names_)
        self.depth_edges_ = depth_edges(x["depth"])
        labels = strata(x["batch"], x["depth"], self.depth_edges_)
        batch = x["batch"].to_numpy(dtype=np.float64)
        self.stages_, self.unavailable_, self.baselines_ = {}, {}, {}
        self.ood_ = OODDetector().fit(base, self.feature_names_)
        far_folds = extrapolation_folds(x, self.depth_edges_)
        cascade: dict[str, np.ndarray] = {}
        cascade_fast: dict[str, np.ndarray] = {}
        for target in self.order:
            column = TARGETS[target]
            values = y[column].to_numpy(dtype=np.float64) if column in y.columns else np.full(len(y), np.nan)
            rows = np.flatnonzero(np.isfinite(values) & (values > 0))
            if len(rows) < 2 * self.n_folds:
                have = f"only {len(rows)} rows" if len(rows) else "no rows"
                self.unavailable_[target] = f"{have} of {column} in the training data"
                continue
            inputs = self.feature_names_ + [f"log_{t}" for t in cascade]
            full = np.column_stack([base, *cascade.values()]) if cascade else base
            stage, oof, near = self._fit_stage(target, inputs, full, np.log(values), rows, labels, batch)
            full_fast = np.column_stack([base, *cascade_fast.values()]) if cascade_fast else base
            oof_fast = self._fit_fast(stage, full_fast, np.log(values), rows, labels)
            far, far_difficulty = self._far_residuals(stage, full_fast, np.log(values), rows, far_folds)
            self._calibrate(stage, np.log(values[rows]), oof, near, far, far_difficulty)
            _calibrate_fast(stage, np.log(values[rows]) - oof_fast, near, far, far_difficulty, self.interval)
            self.baselines_[target] = fit_baselines(x.iloc[rows], values[rows])
            self.stages_[target] = stage
            estimate = stage.predict_log(full, batch, self.small_batch)
            estimate[rows] = oof  # later stages learn from honest (out-of-fold) estimates
            cascade[target] = estimate
            estimate_fast = stage.predict_fast_log(full_fast)
            estimate_fast[rows] = oof_fast
            cascade_fast[target] = estimate_fast
        if not self.stages_:
            reasons = "; ".join(self.unavailable_.values())
            raise PredictorError(f"no target has enough data to train on: {reasons}")
        return self

    def _fit_stage(
        self,
        target: str,
        inputs: list[str],
        full: np.ndarray,
        log_y: np.ndarray,
        rows: np.ndarray,
        labels: np.ndarray,
        batch: np.ndarray,
    ) -> tuple[_Stage, np.ndarray, np.ndarray]:
        """The stage, its out-of-fold log predictions and their rows' difficulties (each measured
        against the rows that predicted it)."""
        x, y = full[rows], log_y[rows]
        folds = stratified_folds(labels[rows], self.n_folds, self.seed)
        trend_columns = (*_TREND_COLUMNS, *self.estimates)
        index = [self.feature_names_.index(c) for c in trend_columns] if self.detrend else []
        design = _design(x, index) if self.detrend else np.zeros((len(x), 1))
        oof = np.zeros((len(rows), len(self.learners)))
        difficulty = np.zeros(len(rows))
        for train, held in folds:
            difficulty[held] = self._difficulty(x[train], x[held])
            coef = _trend(design[train], y[train], self.detrend)
            for j, name in enumerate(self.learners):
                fitted = self._make(name).fit(x[train], y[train] - design[train] @ coef)
                oof[held, j] = fitted.predict(x[held]) + design[held] @ coef
        weights = _blend_weights(oof, y)
        blended = oof @ weights
        corrector, note, correction = self._fit_corrector(x, y - blended, batch[rows], folds)
        blended = blended + correction
        coef = _trend(design, y, self.detrend)
        stage = _Stage(
            target=target,
            inputs=inputs,
            learners={name: self._make(name).fit(x, y - design @ coef) for name in self.learners},
            weights={name: float(w) for name, w in zip(self.learners, weights, strict=True)},
            interval_q=float("nan"),  # set by _calibrate
            corrector=corrector,
            corrector_note=note,
            n_train=len(rows),
            trend=coef if self.detrend else None,
            trend_index=index,
        )
        return stage, blended, difficulty

    def _difficulty(self, train: np.ndarray, held: np.ndarray) -> np.ndarray:
        """``OODDetector.difficulty`` of held-out rows against training rows (base features only)."""
        width = len(self.feature_names_)
        return OODDetector().fit(train[:, :width], self.feature_names_).difficulty(held[:, :width])

    def _far_residuals(
        self, stage: _Stage, full: np.ndarray, log_y: np.ndarray, rows: np.ndarray, folds: list[Any]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The fast model's log residuals (and difficulties) on folds that hold out a whole region
        (``extrapolation_folds``): how errors grow when the model extrapolates."""
        residuals, difficulties = [], []
        for train_all, held_all in folds:
            train = np.flatnonzero(np.isin(rows, train_all))
            held = np.flatnonzero(np.isin(rows, held_all))
            if len(train) < 20 or not len(held):
                continue
            x_train, x_held = full[rows[train]], full[rows[held]]
            offset_train, offset_held = 0.0, 0.0
            if stage.trend is not None:
                design_train = _design(x_train, stage.trend_index)
                coef = _trend(design_train, log_y[rows[train]], True)
                offset_train, offset_held = design_train @ coef, _design(x_held, stage.trend_index) @ coef
            fitted = self._make_fast().fit(x_train, log_y[rows[train]] - offset_train)
            residuals.append(log_y[rows[held]] - fitted.predict(x_held) - offset_held)
            difficulties.append(self._difficulty(x_train, x_held))
        if not residuals:
            return np.zeros(0), np.zeros(0)
        return np.concatenate(residuals), np.concatenate(difficulties)

    def _calibrate(
        self,
        stage: _Stage,
        y: np.ndarray,
        oof: np.ndarray,
        near: np.ndarray,
        far: np.ndarray,
        far_difficulty: np.ndarray,
    ) -> None:
        stage.calibration = calibrate(y - oof, near, self.interval, far, far_difficulty)
        stage.interval_q = stage.calibration.q
        half = stage.calibration.half_width(near, len(near))
        truth, predicted = np.exp(y), np.exp(oof)
        stage.oof_metrics = regression_metrics(
            truth, predicted, predicted * np.exp(-half), predicted * np.exp(half)
        )

    def _fit_fast(
        self, stage: _Stage, full: np.ndarray, log_y: np.ndarray, rows: np.ndarray, labels: np.ndarray
    ) -> np.ndarray:
        """The stage's screening model: one small XGBoost on the same detrended target, fed by
        the earlier stages' *fast* predictions, with out-of-fold residual quantiles for margins."""
        x, y = full[rows], log_y[rows]
        design = _design(x, stage.trend_index) if stage.trend is not None else None
        oof = np.zeros(len(rows))
        for train, held in stratified_folds(labels[rows], self.n_folds, self.seed):
            coef = _trend(design[train], y[train], True) if design is not None else None
            offset_train = design[train] @ coef if design is not None else 0.0
            offset_held = design[held] @ coef if design is not None else 0.0
            oof[held] = (
                self._make_fast().fit(x[train], y[train] - offset_train).predict(x[held]) + offset_held
            )
        trend = design @ stage.trend if design is not None else 0.0
        stage.fast = self._make_fast().fit(x, y - trend)
        return oof

    def _make_fast(self) -> XGBoostLearner:
        return XGBoostLearner(
            n_estimators=self.fast_estimators, seed=self.seed, n_jobs=self.n_jobs, max_depth=6
        )

    def _fit_corrector(
        self, x: np.ndarray, residual: np.ndarray, batch: np.ndarray, folds: list[tuple[Any, Any]]
    ) -> tuple[LightGBMLearner | None, str, np.ndarray]:
        correction = np.zeros(len(x))
        small = np.flatnonzero(batch <= self.small_batch)
        if len(small) < 30:
            note = f"not fitted: {len(small)} rows with batch <= {self.small_batch} (needs 30)"
            return None, note, correction
        params = {"num_leaves": 7, "min_child_samples": 20, "learning_rate": 0.05, "reg_lambda": 1.0}

        def make() -> LightGBMLearner:
            return LightGBMLearner(n_estimators=200, seed=self.seed, n_jobs=self.n_jobs, **params)

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

    # -- prediction ---------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not getattr(self, "stages_", None):
            raise PredictorError("this CascadeBlend is not fitted: call fit() or load a predictor directory")

    def inputs(self, features: pd.DataFrame) -> pd.DataFrame:
        """The columns this predictor reads, from a frame of ``FEATURE_NAMES`` (as ``Space.features``
        returns): the features and its platform's settings, in ``feature_names_`` order."""
        return feature_frame(features, self.info.platform.settings)[self.feature_names_]

    def predict_fast(self, x: pd.DataFrame | np.ndarray) -> dict[str, np.ndarray]:
        """Screening-speed predictions: per available target, the fast model's value (not log).

        ``x`` is a frame with the feature columns, or a float matrix in ``feature_names`` order."""
        self._check_fitted()
        base = (
            _matrix(x, self.feature_names_)
            if isinstance(x, pd.DataFrame)
            else np.asarray(x, dtype=np.float32)
        )
        if base.ndim != 2 or base.shape[1] != len(self.feature_names_):
            raise PredictorError(
                f"expected {len(self.feature_names_)} feature columns, got shape {base.shape}"
            )
        out: dict[str, np.ndarray] = {}
        cascade: list[np.ndarray] = []
        for target in self.order:
            stage = self.stages_.get(target)
            if stage is None:
                continue
            full = np.column_stack([base, *cascade]) if cascade else base
            log_pred = stage.predict_fast_log(full)
            cascade.append(log_pred.astype(base.dtype))
            out[target] = np.exp(log_pred)
        return out

    def fast_margin(self, target: str, risk: float, difficulty: np.ndarray | None = None) -> np.ndarray:
        """Log margins for the screening budget filter: a feasible candidate is discarded with
        probability about ``risk`` (one-sided, from the fast model's held-out residuals near and
        far), per row of ``difficulty`` (``OODDetector.box_difficulty``; None: in-distribution)."""
        if not 0 < risk < 0.5:
            raise PredictorError(f"risk={risk!r} must lie strictly between 0 and 0.5")
        stage = self.stages_[target]
        if not stage.fast_q:
            raise PredictorError(f"the {target} stage has no fast screening model (retrain the predictor)")
        level = int(np.clip(round((1 - 2 * risk) * 100), 1, 99))
        d = np.ones(1) if difficulty is None else np.asarray(difficulty, dtype=np.float64)
        return stage.fast_q[level - 1] * (1 + stage.fast_beta * d)

    def predict(self, x: pd.DataFrame, ood: str = "full") -> pd.DataFrame:
        """Per target: ``<column>``, ``<column>_low``, ``<column>_high`` (NaN for unavailable ones),
        then ``ood`` and ``ood_reason``. ``ood="ranges"`` checks feature ranges only (fast, for
        screening millions), ``"none"`` skips the check."""
        if ood not in ("full", "ranges", "none"):
            raise PredictorError(f"ood={ood!r}: use 'full', 'ranges' or 'none'")
        self._check_fitted()
        missing = [c for c in self.feature_names_ if c not in x.columns]
        if missing:
            raise PredictorError(f"feature columns missing: {', '.join(missing)}")
        base = _matrix(x, self.feature_names_)
        batch = x["batch"].to_numpy(dtype=np.float64)
        out = pd.DataFrame(index=x.index)
        cascade: list[np.ndarray] = []
        widening = any(s.calibration.beta > 0 for s in self.stages_.values())
        # one nearest-row search serves both the interval widths and the distance check
        wants_distance = self.ood_ is not None and (widening or ood == "full")
        distance = self.ood_.nearest_distance(base) if wants_distance else None
        difficulty = distance / self.ood_.spacing if widening and distance is not None else None
        widths: dict[str, np.ndarray] = {}
        for target in self.order:
            column = TARGETS[target]
            stage = self.stages_.get(target)
            if stage is None:
                put_interval(out, column, None, None)
                continue
            full = np.column_stack([base, *cascade]) if cascade else base
            log_pred = stage.predict_log(full, batch, self.small_batch)
            cascade.append(log_pred)
            widths[target] = stage.calibration.half_width(difficulty, len(base))
            put_interval(out, column, log_pred, widths[target])
        reasons = None
        if ood != "none" and self.ood_ is not None:
            flags, reasons = self.ood_.check(base, ranges_only=ood == "ranges", distance=distance)
            out["ood"] = flags
            out["ood_reason"] = reasons
        first = next(t for t in SCORE_ORDER if t in widths)
        out["interval_note"] = interval_note(widths[first], self.stages_[first].calibration, reasons)
        return out

    def score(self, x: pd.DataFrame, y: pd.DataFrame) -> float:
        """One number for model selection (scikit-learn's ``score``): R² of the log of the first of
        latency, memory, energy that the estimator predicts and ``y`` measures."""
        self._check_fitted()
        columns = [TARGETS[t] for t in SCORE_ORDER if t in self.stages_]
        return log_r2_score(y, self.predict(x, ood="none"), columns)

    def evaluate(self, x: pd.DataFrame, y: pd.DataFrame) -> dict[str, dict[str, Any]]:
        """Held-out metrics per available target (see ``regression_metrics``), next to the
        baselines'."""
        predicted = self.predict(x, ood="none")
        scores: dict[str, dict[str, Any]] = {}
        for target in self.stages_:
            scored = score_target(y, predicted, TARGETS[target])
            if scored is None:
                continue
            scores[target], truth, keep = scored
            scores[target]["baselines"] = {
                name: regression_metrics(truth[keep], baseline.predict(x[keep]))
                for name, baseline in self.baselines_.get(target, {}).items()
            }
        return scores

    # -- persistence --------------------------------------------------------------------------
    def save(self, folder: str | Path, metadata: dict[str, Any] | None = None) -> Path:
        """Write the predictor directory: one native file per learner + ``meta.json``.

        ``metadata`` (platform, training data, metrics…) is stored in ``meta.json`` as given."""
        self._check_fitted()
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        stages = {}
        for target, stage in self.stages_.items():
            files = {}
            for name, learner in stage.learners.items():
                path = folder / f"{target}.{name}{learner.suffix}"
                learner.save(path)
                files[name] = path.name
            fast_file = None
            if stage.fast is not None:
                fast_file = f"{target}.fast{stage.fast.suffix}"
                stage.fast.save(folder / fast_file)
            corrector_file = None
            if stage.corrector is not None:
                corrector_file = f"{target}.corrector{stage.corrector.suffix}"
                stage.corrector.save(folder / corrector_file)
            stages[target] = {
                "column": TARGETS[target],
                "inputs": stage.inputs,
                "files": files,
                "weights": stage.weights,
                "interval_q": stage.interval_q,
                "calibration": stage.calibration.to_dict(),
                "trend": None if stage.trend is None else stage.trend.tolist(),
                "trend_index": stage.trend_index,
                "fast": fast_file,
                "fast_q": stage.fast_q,
                "fast_beta": stage.fast_beta,
                "fast_plain_q": stage.fast_plain_q,
                "corrector": corrector_file,
                "corrector_note": stage.corrector_note,
                "n_train": stage.n_train,
                "oof_metrics": stage.oof_metrics,
            }
        body = {
            "params": self.get_params(),
            "feature_names": self.feature_names_,
            "depth_edges": self.depth_edges_.tolist(),
            "stages": stages,
            "unavailable": self.unavailable_,
            "baselines": {t: {n: b.to_dict() for n, b in bs.items()} for t, bs in self.baselines_.items()},
        }
        if self.ood_ is not None:
            (folder / "ood.json").write_text(json.dumps(self.ood_.to_dict()))
        self.metadata = {**self.metadata, **(metadata or {})}
        return write_meta(folder, "cascade-blend", body, self.metadata).parent

    @classmethod
    def load(cls, folder: str | Path) -> CascadeBlend:
        """Load a predictor directory written by ``save`` (checks format and feature schema)."""
        folder = Path(folder)
        saved = read_meta(folder, "cascade-blend", _SCHEMA)
        with damaged_as_error(folder):
            return cls._from_meta(folder, saved)

    @classmethod
    def _from_meta(cls, folder: Path, saved: dict[str, Any]) -> CascadeBlend:
        check_feature_schema(saved, folder, saved["feature_names"])
        params = dict(saved["params"])
        params["order"] = tuple(params["order"])
        params["learners"] = tuple(params["learners"])
        params["estimates"] = tuple(params.get("estimates", ()))
        blend = cls(**params)
        blend.feature_names_ = list(saved["feature_names"])
        blend.depth_edges_ = np.asarray(saved["depth_edges"], dtype=np.float64)
        blend.unavailable_ = dict(saved["unavailable"])
        blend.baselines_ = {t: load_baselines(b) for t, b in saved.get("baselines", {}).items()}
        blend.metadata = {k: v for k, v in saved.items() if k not in _BODY_KEYS}
        blend.stages_, blend.ood_ = {}, None
        for target, stage in saved["stages"].items():
            learners = {}
            if not isinstance(stage, dict):
                raise PredictorError(f"{folder / 'meta.json'}: stage {target!r} is not an object")
            for name, filename in stage["files"].items():
                if name not in LEARNERS:
                    raise PredictorError(f"{folder}: unknown learner {name!r} in meta.json")
                learners[name] = LEARNERS[name].load(inside_folder(folder, filename))
            corrector = stage.get("corrector")
            blend.stages_[target] = _Stage(
                target=target,
                inputs=list(stage["inputs"]),
                learners=learners,
                weights={k: float(v) for k, v in stage["weights"].items()},
                interval_q=float(stage["interval_q"]),
                trend=None if stage.get("trend") is None else np.asarray(stage["trend"], dtype=np.float64),
                trend_index=[int(i) for i in stage.get("trend_index", [])],
                corrector=LightGBMLearner.load(inside_folder(folder, corrector)) if corrector else None,
                fast=XGBoostLearner.load(inside_folder(folder, stage["fast"])) if stage.get("fast") else None,
                fast_q=[float(q) for q in stage.get("fast_q", [])],
                fast_beta=float(stage.get("fast_beta", 0.0)),
                fast_plain_q=[float(q) for q in stage.get("fast_plain_q", [])],
                corrector_note=stage.get("corrector_note", ""),
                oof_metrics=stage.get("oof_metrics", {}),
                n_train=int(stage.get("n_train", 0)),
                calibration=Calibration.from_dict(stage.get("calibration"), float(stage["interval_q"])),
            )
        if (folder / "ood.json").is_file():
            blend.ood_ = OODDetector.from_dict(json.loads((folder / "ood.json").read_text()))
        return blend


def _calibrate_fast(
    stage: _Stage,
    residual: np.ndarray,
    near: np.ndarray,
    far: np.ndarray,
    far_difficulty: np.ndarray,
    coverage: float,
) -> None:
    """The fast model's margins: ``β`` chosen as for the intervals (``predict.intervals``), then
    per level the larger of the near and far quantiles of ``|r| / (1 + β·d)``."""
    beta = calibrate(residual, near, coverage, far, far_difficulty).beta
    levels = np.arange(1, 100) / 100
    stage.fast_plain_q = [float(q) for q in np.quantile(np.abs(residual), levels)]
    quantiles = np.quantile(np.abs(residual) / (1 + beta * near), levels)
    if len(far):
        quantiles = np.maximum(quantiles, np.quantile(np.abs(far) / (1 + beta * far_difficulty), levels))
    stage.fast_q, stage.fast_beta = [float(q) for q in quantiles], float(beta)


# the trend's own columns: 1, log FLOPs, log params, log bytes moved
_BASE_TREND = 4


def _design(x: np.ndarray, index: list[int]) -> np.ndarray:
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


def _trend(design: np.ndarray, y: np.ndarray, detrend: bool) -> np.ndarray:
    """The trend's coefficients. Log estimates (the columns after ``_BASE_TREND``) are an offset,
    their mean taken with coefficient 1, and the log-linear terms fitted to what it leaves: a free
    coefficient let the trend lean partly on FLOPs and parameters instead, a mix learnt on design-
    space configs that moved real networks away from an estimate that was right for them."""
    if not detrend:
        return np.zeros(design.shape[1])
    n_estimates = design.shape[1] - _BASE_TREND
    offset = design[:, _BASE_TREND:].mean(axis=1) if n_estimates else np.zeros(len(design))
    coef, *_ = np.linalg.lstsq(design[:, :_BASE_TREND], y - offset, rcond=None)
    return np.concatenate([coef, np.full(n_estimates, 1.0 / max(n_estimates, 1))])


def _matrix(x: pd.DataFrame, names: list[str]) -> np.ndarray:
    matrix = x[names].to_numpy(dtype=np.float64)
    if not np.isfinite(matrix).all():
        bad = [n for n, ok in zip(names, np.isfinite(matrix).all(axis=0), strict=True) if not ok]
        raise PredictorError(f"feature columns with NaN or infinite values: {', '.join(bad)}")
    return matrix


def _blend_weights(oof: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative weights summing to 1 that best combine the out-of-fold predictions: least
    squares under both constraints, the sum held by one heavily weighted extra equation."""
    heavy = 1e3 * max(1.0, float(np.abs(y).max())) * math.sqrt(len(y))
    weights, _ = nnls(np.vstack([oof, np.full(oof.shape[1], heavy)]), np.append(y, heavy))
    total = weights.sum()
    return weights / total if total > 0 else np.full(oof.shape[1], 1 / oof.shape[1])
