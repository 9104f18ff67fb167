"""The operation-wise latency predictor (arXiv 2210.02620, nn-Meter style).

1. Ops are grouped into the **kernels** the backend executes (``predictors.fusion`` rules for model
   strings; the ``kernel`` column for op tables; the profiler's fused nodes for stored profiles).
2. One regressor of log latency per kernel type (``predictors.kernel_regressors``): the learner
   cross-validation (models held out) finds best for that type; types with few rows share a
   pooled model.
3. End to end from Σ kernel predictions through a learned **overhead model**
   (``predictors.overhead``): a multiplicative ratio on the graph's mix, or an additive cost per
   kernel (per kernel type) and per inference on top of a factor; grouped cross-validation over
   the training networks picks the form. The kernel sums it learns from are out-of-fold (models
   held out by group k-fold), so it learns the errors the kernel models really make.
4. A split-conformal interval from the out-of-fold end-to-end log residuals that widens with a
   model's distance to the training models in size and kernel mix (``predictors.intervals``; the
   held-out models of above-median distance calibrate how fast).

The op table (Parquet / CSV, ``predictors.optable``) is documented in docs/formats.md: ``model,
op_type, kernel (optional), h_in, w_in, c_in, h_out, w_out, c_out, kernel_size, stride, groups,
flops, latency_ms`` (+ optional ``bytes``, ``n_ops``); the end-to-end table ``model, latency_ms``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from infercast.graph import OP_GROUPS, Graph
from infercast.graph.ops import MOVEMENT_TYPES
from infercast.predictors.artifact import inside_folder
from infercast.predictors.base import Predictor
from infercast.predictors.errors import PredictorError
from infercast.predictors.fusion import rules_for
from infercast.predictors.groups import group_folds, model_groups
from infercast.predictors.intervals import Calibration, calibrate_by_difficulty, interval_note, put_interval
from infercast.predictors.kernel_regressors import (
    KERNEL_INPUTS,
    KERNEL_INPUTS_BEFORE_SLICES,
    LATENCY,
    POOLED,
    RATE,
    KernelRegressors,
    Models,
    kernel_types,
    learner_of,
    timed,
)
from infercast.predictors.learners import LEARNERS
from infercast.predictors.metrics import log_r2_score, regression_metrics
from infercast.predictors.movement import executed_kernels
from infercast.predictors.ood import OODDetector
from infercast.predictors.ood_rules import MODEL_RANGE_COLUMNS, kernel_reason
from infercast.predictors.optable import as_op_table, e2e_series, kernels
from infercast.predictors.overhead import FORMS, STACK, Overhead, overhead_features
from infercast.predictors.overhead_choice import fit_overhead, from_dict, out_of_fold, overhead_summary

MIN_MODELS = 3
# a model outside the training range of these is flagged ood (the overhead features it is kept for)
# what places a model among the training models for its interval's width: size and kernel mix
_MIX_COLUMNS = [
    "log_kernel_ms",
    "log_n_kernels",
    "log_mean_kernel_ms",
    "absorbed_share",
    *(f"share_{group}" for group in OP_GROUPS),
]


def _priced(table: pd.DataFrame, priced: set[str]) -> pd.DataFrame:
    """``table`` without the rows of data-movement kernels (``MOVEMENT_TYPES``) of types not in
    ``priced``: a route trained on too few of them (or on tables from before they were kept)
    leaves their time to its overhead model, as it was fitted."""
    unpriced = table["op_type"].isin(MOVEMENT_TYPES) & ~table["op_type"].isin(priced)
    return table[~unpriced.to_numpy()].reset_index(drop=True) if unpriced.any() else table


class OpWise(Predictor):
    """Kernel-level latency regressors + a learned overhead model (``fit(ops, e2e)``).

    ``ops``: an op table (docs/formats.md; a frame or records) with ``latency_ms`` per op or
    kernel; ``e2e``: ``model, latency_ms`` per model (a frame, or a series of latencies indexed by
    model). ``predict(ops)`` takes an op table without latencies and returns one row per model:
    ``latency_ms``, ``latency_ms_low``, ``latency_ms_high``, ``kernel_sum_ms``, ``ood``,
    ``ood_reason``.
    """

    kind: ClassVar[str] = "opwise"
    _REQUIRED: ClassVar[dict[str, type | tuple[type, ...]]] = {
        "params": dict,
        "kernel_models": dict,
        "overhead": dict,
    }
    _BODY_KEYS: ClassVar[tuple[str, ...]] = (
        "algorithm_log_factors",
        "kernel_inputs",
        "kernel_target",
        "interval_q",
        "calibration",
        "mix_ood",
        "ranges",
        "overhead_ranges",
        "training",
    )

    def __init__(
        self,
        n_estimators: int = 400,
        min_rows: int = 30,
        n_folds: int = 5,
        coverage: float = 0.9,
        seed: int = 0,
        n_jobs: int = 2,
        overhead: str = STACK,
        kernel_learner: str = "auto",
    ) -> None:
        self.n_estimators = n_estimators
        self.min_rows = min_rows
        self.n_folds = n_folds
        self.coverage = coverage
        self.seed = seed
        self.n_jobs = n_jobs
        self.overhead = overhead
        self.kernel_learner = kernel_learner

    # learned in fit (or read by load)
    models_: Models  # kernel type → regressor, or an algorithm's log factor
    kernel_inputs_: tuple[str, ...]
    kernel_target_: str
    overhead_: Overhead
    calibration_: Calibration
    interval_q_: float
    mix_ood_: OODDetector | None
    ranges_: dict[str, dict[str, list[float]]]
    overhead_ranges_: dict[str, list[float]]
    training_: dict[str, Any]
    metadata_: dict[str, Any]

    def _validate(self) -> None:
        if self.kernel_learner != "auto" and self.kernel_learner not in LEARNERS:
            raise PredictorError(
                f"kernel_learner={self.kernel_learner!r} must be 'auto' or one of {', '.join(LEARNERS)}"
            )
        if self.overhead not in (STACK, "auto", *FORMS):
            raise PredictorError(
                f"overhead={self.overhead!r} must be {STACK!r}, 'auto' or one of {', '.join(FORMS)}"
            )
        if not 0 < self.coverage < 1:
            raise PredictorError(f"coverage={self.coverage!r} must lie strictly between 0 and 1")
        for name in ("n_estimators", "min_rows", "n_jobs"):
            if getattr(self, name) < 1:
                raise PredictorError(f"{name}={getattr(self, name)!r} must be at least 1")
        if self.n_folds < 2:
            raise PredictorError(f"n_folds={self.n_folds!r} must be at least 2")

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "overhead_")

    def _regressors(self, inputs: tuple[str, ...] | None = None, target: str = RATE) -> KernelRegressors:
        return KernelRegressors(
            self.n_estimators,
            self.min_rows,
            self.seed,
            self.n_jobs,
            self.kernel_learner,
            inputs or KERNEL_INPUTS,
            target,
        )

    def kernel_errors(self, ops: Any) -> pd.DataFrame:
        """Where the kernel regressors are least sure: every kernel of the op table ``ops`` (with
        latencies) with its out-of-fold ``abs_log_error`` (``KernelRegressors.errors``). An
        adaptive kernel campaign measures more around the worst."""
        self._validate()
        return self._regressors().errors(timed(kernels(as_op_table(ops))), self.n_folds)

    def fit(
        self,
        ops: Any,
        e2e: Any,
        kernel_ops: Any = None,
        groups: pd.Series | None = None,
    ) -> OpWise:
        """Kernel regressors on the op rows of ``ops`` and ``kernel_ops`` (a kernel campaign's:
        one-kernel networks, no end-to-end role), the overhead model on the models of ``ops`` that
        ``e2e`` times end to end. ``groups`` (a group per model, e.g. its architecture family)
        keeps a group's models in one fold when the overhead forms are weighed (or one is chosen),
        so the weights are those that hold for a group the predictor never saw; by default each
        model is its own group. The rest stays out-of-fold by model: holding whole families out
        for the kernel times the overhead learns from too left the usc-mobile phone GPUs less
        accurate on families never seen (docs/predict.md)."""
        self._validate()
        table = timed(kernels(as_op_table(ops)))
        given_kernels = kernel_ops is not None and len(kernel_ops)
        extra = timed(kernels(as_op_table(kernel_ops))) if given_kernels else table.head(0)
        counts = pd.concat([table["op_type"], extra["op_type"]]).value_counts()
        priced = {t for t in MOVEMENT_TYPES if counts.get(t, 0) >= self.min_rows}
        table, extra = _priced(table, priced), _priced(extra, priced)
        e2e = e2e_series(e2e)
        models = sorted(set(table["model"]) & set(e2e.index))
        if len(models) < MIN_MODELS:
            # the overhead form is chosen on models held out: two train on one, which fits nothing
            raise PredictorError(
                f"need kernels and an end-to-end latency for at least {MIN_MODELS} models; "
                f"{len(models)} have both"
            )
        table = table[table["model"].isin(models)].reset_index(drop=True)
        truth = e2e.loc[models].to_numpy(dtype=np.float64)
        group_of = model_groups(models, groups)
        if group_of.nunique() < 2:
            raise PredictorError(
                f"groups={group_of.iloc[0]!r} for every model: need models of two groups or more"
            )
        folds = min(self.n_folds, len(models))
        regressors = self._regressors()
        choice, oof_kernel, kernel_scores = regressors.choose(table, folds, extra)
        features = overhead_features(table, oof_kernel).loc[models]
        model_folds = np.arange(len(models)) % folds
        cv_folds = model_folds if groups is None else group_folds(models, group_of, self.n_folds)
        self.overhead_, form, form_scores, cv_log = fit_overhead(self.overhead, features, truth, cv_folds)
        # the interval's residuals: each model predicted by a fit without it (by model, as the
        # kernel times the overhead learns from)
        oof_log = cv_log if groups is None else out_of_fold(form, features, truth, model_folds)
        difficulty = self._calibrate(features, truth, oof_log, model_folds, folds)
        every_kernel = pd.concat([table, extra], ignore_index=True)
        self.models_ = regressors.fit(every_kernel, choice)
        self.kernel_inputs_, self.kernel_target_ = regressors.inputs, regressors.target
        self.ranges_ = {
            str(t): {
                c: [float(g[c].min()), float(g[c].max())] for c in ("log_flops", "c_in", "c_out", "h_in")
            }
            for t, g in every_kernel.groupby("op_type")
        }
        self.overhead_ranges_ = {
            c: [float(features[c].min()), float(features[c].max())] for c in MODEL_RANGE_COLUMNS
        }
        # the out-of-fold end-to-end estimates: what a model stacked on this route learns from
        self.oof_latency_ms_ = pd.Series(np.exp(oof_log), index=pd.Index(models, name="model"))
        self.training_ = {
            "n_models": len(models),
            # the groups held out whole when the overhead form was chosen (each model its own: n_models)
            "n_groups": int(group_of.nunique()),
            "n_kernels": len(table),
            "n_kernel_campaign_rows": len(extra),
            "kernel_types": {str(k): int(v) for k, v in kernel_types(every_kernel).value_counts().items()},
            **regressors.summary(self.models_, choice, kernel_scores),
            **overhead_summary(self.overhead_, form, form_scores, features, truth),
            "oof_metrics": self._oof_metrics(truth, oof_log, difficulty),
        }
        self.metadata_ = {}
        return self

    def _calibrate(
        self,
        features: pd.DataFrame,
        truth: np.ndarray,
        oof_log: np.ndarray,
        model_folds: np.ndarray,
        folds: int,
    ) -> np.ndarray:
        """The interval from the out-of-fold residuals, widening with each model's difficulty
        against the models of the other folds (returned), and the mix detector predictions use."""
        mix = features[_MIX_COLUMNS].to_numpy(dtype=np.float64)
        difficulty = np.zeros(len(mix))
        for fold in range(folds):
            held = model_folds == fold
            difficulty[held] = OODDetector().fit(mix[~held], _MIX_COLUMNS).difficulty(mix[held])
        self.calibration_ = calibrate_by_difficulty(np.log(truth) - oof_log, difficulty, self.coverage)
        self.interval_q_ = self.calibration_.q
        self.mix_ood_ = OODDetector().fit(mix, _MIX_COLUMNS)
        return difficulty

    def _oof_metrics(self, truth: np.ndarray, oof_log: np.ndarray, difficulty: np.ndarray) -> dict[str, Any]:
        predicted, half = np.exp(oof_log), self.calibration_.half_width(difficulty, len(truth))
        return regression_metrics(truth, predicted, predicted * np.exp(-half), predicted * np.exp(half))

    # -- prediction ---------------------------------------------------------------------------
    def predict_kernels(self, ops: Any) -> pd.DataFrame:
        """Every kernel of the op table ``ops`` (its ops grouped as the backend executes them)
        with its predicted ``latency_ms``."""
        self.check_fitted()
        table = _priced(kernels(as_op_table(ops)), set(self.models_))
        regressors = self._regressors(self.kernel_inputs_, self.kernel_target_)
        return table.assign(latency_ms=regressors.predict(table, self.models_))

    def predict(self, ops: Any) -> pd.DataFrame:
        table = self.predict_kernels(ops)
        features = overhead_features(table, table["latency_ms"].to_numpy())
        log_pred = self.overhead_.predict(features)
        out = pd.DataFrame(index=features.index)
        difficulty = None
        if self.mix_ood_ is not None:
            difficulty = self.mix_ood_.difficulty(features[_MIX_COLUMNS].to_numpy(dtype=np.float64))
        half_width = self.calibration_.half_width(difficulty, len(features))
        put_interval(out, "latency_ms", log_pred, half_width)
        out["kernel_sum_ms"] = np.exp(features["log_kernel_ms"].to_numpy())
        reasons = [
            kernel_reason(table[table["model"] == m], features.loc[m], self.ranges_, self.overhead_ranges_)
            for m in features.index
        ]
        out["ood"] = [bool(r) for r in reasons]
        out["ood_reason"] = reasons
        out["interval_note"] = interval_note(half_width, self.calibration_, reasons)
        out.index.name = "model"
        return out

    def predict_graphs(
        self,
        graphs: list[Graph],
        backend: str,
        settings: dict[str, Any],
        machine: dict[str, Any] | None = None,
    ) -> pd.DataFrame:
        """``predict`` on captured graphs, one row per graph in their order: each graph's kernels
        as ``backend`` with ``settings`` fuses them on ``machine`` (a platform fingerprint), and
        the algorithm each convolution runs with there (``fusion.rules_for``)."""
        rules = rules_for(backend, settings, machine)
        ids = [str(i) for i in range(len(graphs))]
        tables = [executed_kernels(g, rules, model=i) for i, g in zip(ids, graphs, strict=True)]
        return self.predict(pd.concat(tables, ignore_index=True)).loc[ids].reset_index(drop=True)

    def _scored(self, ops: Any, e2e: Any) -> tuple[pd.DataFrame, pd.Series]:
        predicted = self.predict(ops)
        truth = e2e_series(e2e)
        common = [m for m in predicted.index if m in truth.index]
        if not common:
            raise PredictorError("no model of the op table has an end-to-end latency to score against")
        return predicted.loc[common], truth.loc[common]

    def score(self, ops: Any, e2e: Any) -> float:
        """R² of log end-to-end latency over the models of ``ops`` that ``e2e`` measures."""
        predicted, truth = self._scored(ops, e2e)
        return log_r2_score(truth.rename("latency_ms").to_frame(), predicted, ["latency_ms"])

    def evaluate(self, ops: Any, e2e: Any) -> dict[str, Any]:
        """The metrics of ``regression_metrics`` over the models of ``ops`` that ``e2e`` measures."""
        p, truth = self._scored(ops, e2e)
        return regression_metrics(
            truth.to_numpy(), p["latency_ms"].to_numpy(), p["latency_ms_low"], p["latency_ms_high"]
        )

    # -- persistence --------------------------------------------------------------------------
    def _body(self, folder: Path) -> dict[str, Any]:
        files = {}
        for op_type, model in self.models_.items():
            if not isinstance(model, float):
                files[op_type] = f"kernel.{op_type}{model.suffix}"
                model.save(folder / files[op_type])
        return {
            "params": self.get_params(),
            "kernel_models": files,
            "algorithm_log_factors": {t: m for t, m in self.models_.items() if isinstance(m, float)},
            "kernel_inputs": list(self.kernel_inputs_),
            "kernel_target": self.kernel_target_,
            "overhead": self.overhead_.to_dict(),
            "interval_q": self.interval_q_,
            "calibration": self.calibration_.to_dict(),
            "mix_ood": None if self.mix_ood_ is None else self.mix_ood_.to_dict(),
            "ranges": self.ranges_,
            "overhead_ranges": self.overhead_ranges_,
            "training": self.training_,
        }

    @classmethod
    def _from_body(cls, folder: Path, saved: dict[str, Any]) -> OpWise:
        inputs = tuple(saved.get("kernel_inputs") or ())
        if inputs not in (KERNEL_INPUTS, KERNEL_INPUTS_BEFORE_SLICES):
            raise PredictorError(f"{folder}: kernel features {list(inputs)} differ from this infercast's")
        params = dict(saved["params"])
        if "interval" in params:  # the coverage's name in predictors saved before
            params["coverage"] = params.pop("interval")
        opwise = cls(**params)
        opwise.kernel_inputs_ = inputs
        opwise.models_ = {
            t: learner_of(f).load(inside_folder(folder, f)) for t, f in saved["kernel_models"].items()
        }
        opwise.models_.update({t: float(f) for t, f in (saved.get("algorithm_log_factors") or {}).items()})
        if POOLED not in opwise.models_:
            raise PredictorError(f"{folder}: meta.json lists no pooled kernel model")
        opwise.kernel_target_ = saved.get("kernel_target", LATENCY)
        if opwise.kernel_target_ not in (RATE, LATENCY):
            raise PredictorError(f"{folder}: unknown kernel target {opwise.kernel_target_!r}")
        opwise.overhead_ = from_dict(saved["overhead"])
        opwise.interval_q_ = float(saved["interval_q"])
        opwise.calibration_ = Calibration.from_dict(saved.get("calibration"), opwise.interval_q_)
        mix_ood = saved.get("mix_ood")
        opwise.mix_ood_ = OODDetector.from_dict(mix_ood) if mix_ood else None
        opwise.ranges_ = saved["ranges"]
        opwise.overhead_ranges_ = saved["overhead_ranges"]
        opwise.training_ = saved["training"]
        return opwise
