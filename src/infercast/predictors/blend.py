"""CARB's model-level predictor: a cascade of blended tree ensembles on log targets.

Per target, in cascade order (memory → energy → latency by default; each later target also gets
the earlier targets' log predictions as features):

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
   and for extrapolations alike (``predictors.intervals``).

A target with no data (energy on a host without a sensor) is skipped and reported as unavailable.

Each target's fitted parts and their files are ``cascade.TargetModel``; the fast screening models
are ``fast``; the generic parts live beside them (``folds``, ``intervals``, ``metrics``,
``learners``, ``baselines``, ``ood``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from infercast.files import read_json
from infercast.predictors.artifact import check_feature_schema
from infercast.predictors.base import ModelLevel, as_frame
from infercast.predictors.baselines import fit_baselines, load_baselines
from infercast.predictors.cascade import (
    TREND_COLUMNS,
    TargetModel,
    blend_weights,
    calibrate_target,
    design,
    fit_corrector,
    matrix,
    trend,
)
from infercast.predictors.data import INPUT_COLUMNS, TARGETS, as_targets, feature_frame
from infercast.predictors.errors import PredictorError
from infercast.predictors.fast import calibrate_fast, far_residuals, fit_fast, margin, predict_fast
from infercast.predictors.folds import depth_edges, extrapolation_folds, strata, stratified_folds
from infercast.predictors.intervals import interval_note, put_interval
from infercast.predictors.learners import LEARNERS, LightGBMLearner, XGBoostLearner
from infercast.predictors.metrics import SCORE_ORDER, regression_metrics, score_target
from infercast.predictors.ood import OODDetector

DEFAULT_ORDER: tuple[str, ...] = ("memory", "energy", "latency")


class CascadeBlend(ModelLevel):
    """Predict peak memory, energy and latency from analytic features (CARB's cascade blend).

    ``fit(X, y)``: ``X`` the feature columns (a frame with ``batch`` and ``depth`` among them, for
    the stratified folds, or an array of ``data.INPUT_COLUMNS``), ``y`` a frame with any of
    ``peak_memory_mb``, ``energy_j``, ``latency_ms`` (or an array: ``data.as_targets``).
    ``predict(X)`` returns, per target, the value and its interval bounds (``<target>_low``,
    ``<target>_high``); targets it could not learn are listed in ``unavailable_`` with the reason.
    ``score(X, y)`` is one number (R² of the log target), ``evaluate(X, y)`` the full metrics.
    """

    kind: ClassVar[str] = "cascade-blend"
    _REQUIRED: ClassVar[dict[str, type | tuple[type, ...]]] = {
        "params": dict,
        "feature_names": list,
        "depth_edges": list,
        "stages": dict,
        "unavailable": dict,
    }
    _BODY_KEYS: ClassVar[tuple[str, ...]] = ("baselines",)

    def __init__(
        self,
        order: tuple[str, ...] = DEFAULT_ORDER,
        learners: tuple[str, ...] = ("xgboost", "lightgbm", "extratrees"),
        n_estimators: int = 600,
        forest_estimators: int = 300,
        n_folds: int = 5,
        coverage: float = 0.9,
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
        self.coverage = coverage
        self.small_batch = small_batch
        self.detrend = detrend
        self.fast_estimators = fast_estimators
        self.seed = seed
        self.n_jobs = n_jobs
        self.estimates = estimates

    # learned in fit (scikit-learn's convention: set by fit, named with a trailing underscore)
    feature_names_: list[str]
    targets_: dict[str, TargetModel]  # per target learned, in cascade order
    unavailable_: dict[str, str]
    depth_edges_: np.ndarray
    ood_: OODDetector | None
    baselines_: dict[str, dict[str, Any]]
    metadata_: dict[str, Any]

    def _validate(self) -> None:
        """Every parameter checked, each error naming the bad value."""
        unknown = [t for t in self.order if t not in TARGETS]
        if unknown or len(set(self.order)) != len(self.order) or not self.order:
            raise PredictorError(f"order={self.order!r}: use distinct targets among {list(TARGETS)}")
        bad = [name for name in self.learners if name not in LEARNERS]
        if bad or not self.learners:
            raise PredictorError(f"learners={self.learners!r}: choose among {list(LEARNERS)}")
        if not 0 < self.coverage < 1:
            raise PredictorError(f"coverage={self.coverage!r} must lie strictly between 0 and 1")
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

    def _make_fast(self) -> XGBoostLearner:
        return XGBoostLearner(
            n_estimators=self.fast_estimators, seed=self.seed, n_jobs=self.n_jobs, max_depth=6
        )

    def _make_corrector(self) -> LightGBMLearner:
        params = {"num_leaves": 7, "min_child_samples": 20, "learning_rate": 0.05, "reg_lambda": 1.0}
        return LightGBMLearner(n_estimators=200, seed=self.seed, n_jobs=self.n_jobs, **params)

    def fit(self, X: Any, y: Any) -> CascadeBlend:
        self._validate()
        x = as_frame(X, INPUT_COLUMNS)
        y = as_targets(y, len(x))
        for column in ("batch", "depth", *(TREND_COLUMNS if self.detrend else ()), *self.estimates):
            if column not in x.columns:
                raise PredictorError(f"feature column {column!r} is missing (needed for folds / trend)")
        self.feature_names_ = list(x.columns)
        base = matrix(x, self.feature_names_)
        self.depth_edges_ = depth_edges(x["depth"])
        labels = strata(x["batch"], x["depth"], self.depth_edges_)
        batch = x["batch"].to_numpy(dtype=np.float64)
        self.targets_, self.unavailable_, self.baselines_, self.metadata_ = {}, {}, {}, {}
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
            model, oof, near = self._fit_target(target, inputs, full, np.log(values), rows, labels, batch)
            full_fast = np.column_stack([base, *cascade_fast.values()]) if cascade_fast else base
            oof_fast = fit_fast(
                model, full_fast, np.log(values), rows, labels, self._make_fast, self.n_folds, self.seed
            )
            far, far_difficulty = far_residuals(
                model, full_fast, np.log(values), rows, far_folds, self._make_fast, self._difficulty
            )
            calibrate_target(model, np.log(values[rows]), oof, near, far, far_difficulty, self.coverage)
            calibrate_fast(model, np.log(values[rows]) - oof_fast, near, far, far_difficulty, self.coverage)
            self.baselines_[target] = fit_baselines(x.iloc[rows], values[rows])
            self.targets_[target] = model
            estimate = model.predict_log(full, batch, self.small_batch)
            estimate[rows] = oof  # later targets learn from honest (out-of-fold) estimates
            cascade[target] = estimate
            estimate_fast = model.predict_fast_log(full_fast)
            estimate_fast[rows] = oof_fast
            cascade_fast[target] = estimate_fast
        if not self.targets_:
            reasons = "; ".join(self.unavailable_.values())
            raise PredictorError(f"no target has enough data to train on: {reasons}")
        return self

    def _fit_target(
        self,
        target: str,
        inputs: list[str],
        full: np.ndarray,
        log_y: np.ndarray,
        rows: np.ndarray,
        labels: np.ndarray,
        batch: np.ndarray,
    ) -> tuple[TargetModel, np.ndarray, np.ndarray]:
        """The target's model, its out-of-fold log predictions and their rows' difficulties (each
        measured against the rows that predicted it)."""
        x, y = full[rows], log_y[rows]
        folds = stratified_folds(labels[rows], self.n_folds, self.seed)
        index = (
            [self.feature_names_.index(c) for c in (*TREND_COLUMNS, *self.estimates)] if self.detrend else []
        )
        matrix_ = design(x, index) if self.detrend else np.zeros((len(x), 1))
        oof = np.zeros((len(rows), len(self.learners)))
        difficulty = np.zeros(len(rows))
        for train, held in folds:
            difficulty[held] = self._difficulty(x[train], x[held])
            coef = trend(matrix_[train], y[train], self.detrend)
            for j, name in enumerate(self.learners):
                fitted = self._make(name).fit(x[train], y[train] - matrix_[train] @ coef)
                oof[held, j] = fitted.predict(x[held]) + matrix_[held] @ coef
        weights = blend_weights(oof, y)
        blended = oof @ weights
        small = np.flatnonzero(batch[rows] <= self.small_batch)
        corrector, note, correction = fit_corrector(
            x, y - blended, small, folds, self._make_corrector, self.small_batch
        )
        blended = blended + correction
        coef = trend(matrix_, y, self.detrend)
        model = TargetModel(
            target=target,
            inputs=inputs,
            learners={name: self._make(name).fit(x, y - matrix_ @ coef) for name in self.learners},
            weights={name: float(w) for name, w in zip(self.learners, weights, strict=True)},
            interval_q=float("nan"),  # set by calibrate_target
            corrector=corrector,
            corrector_note=note,
            n_train=len(rows),
            trend=coef if self.detrend else None,
            trend_index=index,
        )
        return model, blended, difficulty

    def _difficulty(self, train: np.ndarray, held: np.ndarray) -> np.ndarray:
        """``OODDetector.difficulty`` of held-out rows against training rows (base features only)."""
        width = len(self.feature_names_)
        return OODDetector().fit(train[:, :width], self.feature_names_).difficulty(held[:, :width])

    # -- prediction ---------------------------------------------------------------------------
    def __sklearn_is_fitted__(self) -> bool:
        return bool(getattr(self, "targets_", None))

    def inputs(self, features: pd.DataFrame) -> pd.DataFrame:
        """The columns this predictor reads, from a frame of ``FEATURE_NAMES`` (as ``Space.features``
        returns): the features and its platform's settings, in ``feature_names_`` order."""
        return feature_frame(features, self.info.platform.settings)[self.feature_names_]

    def predict_fast(self, X: Any) -> dict[str, np.ndarray]:
        """Screening-speed predictions: per available target, the fast model's value (not log).

        ``X`` is a frame with the feature columns, or a float matrix in ``feature_names_`` order."""
        self.check_fitted()
        base = (
            matrix(X, self.feature_names_) if isinstance(X, pd.DataFrame) else np.asarray(X, dtype=np.float32)
        )
        if base.ndim != 2 or base.shape[1] != len(self.feature_names_):
            raise PredictorError(
                f"expected {len(self.feature_names_)} feature columns, got shape {base.shape}"
            )
        return predict_fast([self.targets_[t] for t in self.order if t in self.targets_], base)

    def fast_margin(self, target: str, risk: float, difficulty: np.ndarray | None = None) -> np.ndarray:
        """Log margins for the screening budget filter: a feasible candidate is discarded with
        probability about ``risk`` (one-sided, from the fast model's held-out residuals near and
        far), per row of ``difficulty`` (``OODDetector.box_difficulty``; None: in-distribution)."""
        if not 0 < risk < 0.5:
            raise PredictorError(f"risk={risk!r} must lie strictly between 0 and 0.5")
        model = self.targets_[target]
        if not model.fast_q:
            raise PredictorError(f"the {target} target has no fast screening model (retrain the predictor)")
        return margin(model, risk, difficulty)

    def predict(self, X: Any, ood: str = "full") -> pd.DataFrame:
        """Per target: ``<column>``, ``<column>_low``, ``<column>_high`` (NaN for unavailable ones),
        then ``ood`` and ``ood_reason``. ``ood="ranges"`` checks feature ranges only (fast, for
        screening millions), ``"none"`` skips the check."""
        if ood not in ("full", "ranges", "none"):
            raise PredictorError(f"ood={ood!r}: use 'full', 'ranges' or 'none'")
        self.check_fitted()
        x = as_frame(X, self.feature_names_)
        missing = [c for c in self.feature_names_ if c not in x.columns]
        if missing:
            raise PredictorError(f"feature columns missing: {', '.join(missing)}")
        base = matrix(x, self.feature_names_)
        batch = x["batch"].to_numpy(dtype=np.float64)
        out = pd.DataFrame(index=x.index)
        cascade: list[np.ndarray] = []
        widening = any(m.calibration.beta > 0 for m in self.targets_.values())
        difficulty = self.ood_.difficulty(base) if widening and self.ood_ is not None else None
        widths: dict[str, np.ndarray] = {}
        for target in self.order:
            column = TARGETS[target]
            model = self.targets_.get(target)
            if model is None:
                put_interval(out, column, None, None)
                continue
            full = np.column_stack([base, *cascade]) if cascade else base
            log_pred = model.predict_log(full, batch, self.small_batch)
            cascade.append(log_pred)
            widths[target] = model.calibration.half_width(difficulty, len(base))
            put_interval(out, column, log_pred, widths[target])
        reasons = None
        if ood != "none" and self.ood_ is not None:
            flags, reasons = self.ood_.check(base, ranges_only=ood == "ranges")
            out["ood"] = flags
            out["ood_reason"] = reasons
        first = next(t for t in SCORE_ORDER if t in widths)
        out["interval_note"] = interval_note(widths[first], self.targets_[first].calibration, reasons)
        return out

    def evaluate(self, X: Any, y: Any) -> dict[str, dict[str, Any]]:
        """Held-out metrics per available target (``regression_metrics``), next to the baselines'."""
        x = as_frame(X, self.feature_names_)
        y = as_targets(y, len(x))
        predicted = self.predict(x, ood="none")
        scores: dict[str, dict[str, Any]] = {}
        for target in self.targets_:
            scored = score_target(y, predicted, TARGETS[target])
            if scored is None:
                continue
            scores[target], truth, keep = scored
            scores[target]["baselines"] = {
                name: regression_metrics(truth[keep], baseline.predict(x[keep]))
                for name, baseline in self.baselines_.get(target, {}).items()
            }
        return scores

    # -- persistence: one native file per learner, the rest in meta.json ------------------------
    def _body(self, folder: Path) -> dict[str, Any]:
        if self.ood_ is not None:
            (folder / "ood.json").write_text(json.dumps(self.ood_.to_dict()))
        return {
            "params": self.get_params(),
            "feature_names": self.feature_names_,
            "depth_edges": self.depth_edges_.tolist(),
            "stages": {target: model.save(folder) for target, model in self.targets_.items()},
            "unavailable": self.unavailable_,
            "baselines": {t: {n: b.to_dict() for n, b in bs.items()} for t, bs in self.baselines_.items()},
        }

    @classmethod
    def _from_body(cls, folder: Path, saved: dict[str, Any]) -> CascadeBlend:
        check_feature_schema(saved, folder, saved["feature_names"])
        params = dict(saved["params"])
        if "interval" in params:  # the coverage's name in predictors saved before
            params["coverage"] = params.pop("interval")
        params.update({k: tuple(params[k]) for k in ("order", "learners", "estimates") if k in params})
        blend = cls(**params)
        blend.feature_names_ = list(saved["feature_names"])
        blend.depth_edges_ = np.asarray(saved["depth_edges"], dtype=np.float64)
        blend.unavailable_ = dict(saved["unavailable"])
        blend.baselines_ = {t: load_baselines(b) for t, b in saved.get("baselines", {}).items()}
        blend.targets_ = {
            target: TargetModel.load(folder, target, entry) for target, entry in saved["stages"].items()
        }
        blend.ood_ = None
        if (folder / "ood.json").is_file():
            blend.ood_ = OODDetector.from_dict(read_json(folder / "ood.json", "ood.json"))
        return blend
