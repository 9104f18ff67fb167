"""The operation-wise latency predictor (arXiv 2210.02620, nn-Meter style).

1. Ops are grouped into the **kernels** the backend executes (``predict.fusion`` rules for model
   strings; the ``kernel`` column for op tables; the profiler's fused nodes for stored profiles).
2. One regressor of log latency per kernel type (the type of the kernel's main op: conv, dwconv,
   linear, pool_max, …, and its algorithm where the op table names one: ``conv.winograd``) on
   shape features — XGBoost, LightGBM or extremely-randomized trees,
   whichever cross-validation (models held out) finds best for that type; types with few rows
   share a pooled model.
3. End to end from Σ kernel predictions through a learned **overhead model** (``predict.overhead``):
   a multiplicative ratio on the graph's mix, or an additive cost per kernel (per kernel type) and
   per inference on top of a factor; grouped cross-validation over the training networks picks
   the form. The kernel sums it learns from are out-of-fold (models held out by group k-fold), so
   it learns the errors the kernel models really make.
4. A split-conformal interval from the out-of-fold end-to-end log residuals that widens with a
   model's distance to the training models in size and kernel mix (``predict.intervals``; the
   held-out models of above-median distance calibrate how fast).

The op table (Parquet / CSV, ``predict.optable``) is documented in docs/formats.md: ``model, op_type, kernel
(optional), h_in, w_in, c_in, h_out, w_out, c_out, kernel_size, stride, groups, flops,
latency_ms`` (+ optional ``bytes``, ``n_ops``); the end-to-end table ``model, latency_ms``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.graph import OP_GROUPS, Graph
from infercast.predictors.artifact import Described, damaged_as_error, inside_folder, read_meta, write_meta
from infercast.predictors.errors import PredictorError
from infercast.predictors.fusion import kernel_table, rules_for
from infercast.predictors.intervals import Calibration, calibrate_by_difficulty, interval_note, put_interval
from infercast.predictors.learners import LEARNERS, ExtraTreesLearner, Learner
from infercast.predictors.metrics import log_r2_score, regression_metrics
from infercast.predictors.ood import OODDetector
from infercast.predictors.optable import ALGORITHM, SHAPE_COLUMNS, e2e_series, kernels
from infercast.predictors.overhead import (
    FORMS,
    STACK,
    Overhead,
    StackedOverhead,
    choose,
    cv_scores,
    out_of_fold,
    overhead_features,
)

_KERNEL_INPUTS = (
    *SHAPE_COLUMNS,
    "bytes",
    "n_ops",
    "log_flops",
    "log_bytes",
    "intensity",
    "c_out_slices",
    "log_padded_flops",
    "log_out_elements",
    "log_in_elements",
)
# what predictors saved before the channel-slice columns learned from
_KERNEL_INPUTS_BEFORE_SLICES = _KERNEL_INPUTS[:-4]
_POOLED = "pooled"
# the fewest kernels of an algorithm that price it by a factor on its op type's estimate
_MIN_FACTOR_ROWS = 3
MIN_MODELS = 3
# a model outside the training range of these is flagged ood (the overhead features it is kept for)
_MODEL_RANGE_COLUMNS = ("log_n_kernels", "log_flops")
# what places a model among the training models for its interval's width: size and kernel mix
_MIX_COLUMNS = [
    "log_kernel_ms",
    "log_n_kernels",
    "log_mean_kernel_ms",
    "absorbed_share",
    *(f"share_{group}" for group in OP_GROUPS),
]
# the kernel regressors' target: log(latency / work) for a type's own regressor and log latency
# for the pooled one, or log latency everywhere in predictors saved before
_RATE, _LATENCY = "own_types_log_latency_per_work", "log_latency"


class OpWise(Described):
    """Kernel-level latency regressors + a learned overhead model (``fit(ops, e2e)``).

    ``ops``: an op table (docs/formats.md) with ``latency_ms`` per op or kernel; ``e2e``: ``model,
    latency_ms`` per model. ``predict(ops)`` takes an op table without latencies and returns one
    row per model: ``latency_ms``, ``latency_ms_low``, ``latency_ms_high``, ``kernel_sum_ms``,
    ``ood``, ``ood_reason``.
    """

    def __init__(
        self,
        n_estimators: int = 400,
        min_rows: int = 30,
        n_folds: int = 5,
        interval: float = 0.9,
        seed: int = 0,
        n_jobs: int = 2,
        overhead: str = STACK,
        kernel_learner: str = "auto",
    ) -> None:
        self.n_estimators = n_estimators
        self.min_rows = min_rows
        self.n_folds = n_folds
        self.interval = interval
        self.seed = seed
        self.n_jobs = n_jobs
        self.overhead = overhead
        self.kernel_learner = kernel_learner
        if kernel_learner != "auto" and kernel_learner not in LEARNERS:
            raise PredictorError(
                f"kernel_learner={kernel_learner!r} must be 'auto' or one of {', '.join(LEARNERS)}"
            )
        if overhead not in (STACK, "auto", *FORMS):
            raise PredictorError(
                f"overhead={overhead!r} must be {STACK!r}, 'auto' or one of {', '.join(FORMS)}"
            )
        if not 0 < interval < 1:
            raise PredictorError(f"interval={interval!r} must lie strictly between 0 and 1")
        for name in ("n_estimators", "min_rows", "n_jobs"):
            if getattr(self, name) < 1:
                raise PredictorError(f"{name}={getattr(self, name)!r} must be at least 1")
        if n_folds < 2:
            raise PredictorError(f"n_folds={n_folds!r} must be at least 2")
        self.models_: dict[str, Learner | float] = {}
        self.kernel_inputs_ = _KERNEL_INPUTS
        self.kernel_target_ = _RATE
        self.overhead_: Overhead | None = None  # learned: set by fit or load
        self.interval_q_ = float("nan")
        self.calibration_ = Calibration(float("nan"))
        self.mix_ood_: OODDetector | None = None
        self.ranges_: dict[str, dict[str, list[float]]] = {}
        self.overhead_ranges_: dict[str, list[float]] = {}
        self.metadata: dict[str, Any] = {}
        self.training_: dict[str, Any] = {}

    # -- training -----------------------------------------------------------------------------
    def _kernel_matrix(self, table: pd.DataFrame, pooled: bool) -> np.ndarray:
        columns = [table[c].to_numpy(dtype=np.float64) for c in self.kernel_inputs_]
        if pooled:
            columns.append(
                table["op_type"].map({g: i for i, g in enumerate(OP_GROUPS)}).to_numpy(dtype=np.float64)
            )
        return np.column_stack(columns)

    def _fit_kernels(self, table: pd.DataFrame, learners: dict[str, str]) -> dict[str, Learner | float]:
        """One regressor of log latency per kernel type with ``min_rows`` rows, and a pooled one
        for the rest; ``learners`` names the learner of each (``_POOLED`` included). An algorithm
        with fewer rows but ``_MIN_FACTOR_ROWS`` gets a factor on its op type's estimate instead
        (its log, a float): its rows are kept out of the pooled regressor, which prices them as
        their op type, and the factor is their median ratio to that price. A campaign samples
        few kernels of a backend's slow path (ONNX Runtime's plain-layout convolutions: 2, 3 and 8
        of each kind among 283 convolutions of a 400-kernel campaign), too few for a regressor but
        enough for how much slower they run."""
        log_latency = np.log(np.clip(table["latency_ms"].to_numpy(dtype=np.float64), 1e-5, None))
        rate = log_latency - self._log_work(table)
        models: dict[str, Learner | float] = {}
        types = _kernel_types(table)
        own = self._own_types(table)
        for kernel_type in own:
            rows = (types == kernel_type).to_numpy()
            models[kernel_type] = self._learner(learners[kernel_type]).fit(
                self._kernel_matrix(table[rows], False), rate[rows]
            )
        counts = types.value_counts()
        scaled = [
            str(t) for t, n in counts.items() if t not in own and "." in str(t) and n >= _MIN_FACTOR_ROWS
        ]
        pooled_rows = ~types.isin(scaled).to_numpy()
        models[_POOLED] = self._learner(learners[_POOLED]).fit(
            self._kernel_matrix(table[pooled_rows], True), log_latency[pooled_rows]
        )
        for kernel_type in sorted(scaled):
            rows = (types == kernel_type).to_numpy()
            base = self._predict_kernels(table[rows], models)
            models[kernel_type] = float(np.median(log_latency[rows] - np.log(base)))
        return models

    def _log_work(self, table: pd.DataFrame) -> np.ndarray:
        """What a type's own regressor leaves out of its target: log work, so that it learns a rate
        and a kernel larger than any seen in training is predicted at the rate of the largest seen
        instead of at their latency (``_RATE``); nothing in predictors saved before rates
        (``_LATENCY``). The pooled regressor learns latency: it also meets kernel types it never
        saw (concat, channel shuffle in a ResNet-trained predictor), whose work another type's
        rate would misprice (SqueezeNet's op-wise estimate here: +189 % as a rate, +29 % as a
        latency)."""
        return _log_work(table) if self.kernel_target_ == _RATE else np.zeros(len(table))

    def _own_types(self, table: pd.DataFrame) -> list[str]:
        counts = _kernel_types(table).value_counts()
        return sorted(str(t) for t, n in counts.items() if n >= self.min_rows)

    def _learner(self, name: str) -> Learner:
        if name == "extratrees":
            # leaves of two rows keep a kernel forest's file small at no cost in accuracy here
            size = max(50, self.n_estimators // 4)
            return ExtraTreesLearner(
                n_estimators=size, seed=self.seed, n_jobs=self.n_jobs, min_samples_leaf=2
            )
        return LEARNERS[name](n_estimators=self.n_estimators, seed=self.seed, n_jobs=self.n_jobs)

    def _predict_kernels(self, table: pd.DataFrame, models: dict[str, Learner | float]) -> np.ndarray:
        log_work = self._log_work(table)
        out = np.exp(models[_POOLED].predict(self._kernel_matrix(table, True)))
        types = _kernel_types(table)
        regressors = {t: m for t, m in models.items() if not isinstance(m, float)}
        # an algorithm this predictor has no regressor for is priced as its op type's default one
        # (its rate, not the pooled model's latency: a predictor trained before the column, say),
        # times the algorithm's factor where it learned one
        priced_as = types.where(types.isin(list(regressors)), table["op_type"].astype(str))
        for kernel_type, model in regressors.items():
            rows = (priced_as == kernel_type).to_numpy()
            if kernel_type != _POOLED and rows.any():
                out[rows] = np.exp(model.predict(self._kernel_matrix(table[rows], False)) + log_work[rows])
        factors = {t: f for t, f in models.items() if isinstance(f, float)}
        return out * np.exp(types.map(factors).fillna(0.0).to_numpy(dtype=np.float64))

    @staticmethod
    def _groups(models: list[str], groups: pd.Series | None) -> pd.Series:
        """The group of each model (indexed by model): ``groups``' values, each model its own
        group by default."""
        if groups is None:
            return pd.Series(models, index=models)
        groups = pd.Series(groups)
        groups.index = groups.index.astype(str)
        missing = [m for m in models if m not in groups.index or pd.isna(groups.get(m))]
        if missing:
            raise PredictorError(f"groups name no group for the model(s) {', '.join(missing[:5])}")
        return groups.loc[models].astype(str)

    def _choose_kernel_learners(
        self, table: pd.DataFrame, folds: int, extra: pd.DataFrame
    ) -> tuple[dict[str, str], np.ndarray, dict[str, dict[str, float]]]:
        """Per kernel type, the learner with the smallest out-of-fold mean |log error| (models
        held out by group k-fold; the ``extra`` kernel rows train in every fold), the out-of-fold
        kernel times of that choice, and the scores."""
        # scikit-learn loads when a model is fitted: listing the devices imports this module
        from sklearn.model_selection import GroupKFold

        candidates = tuple(LEARNERS) if self.kernel_learner == "auto" else (self.kernel_learner,)
        target = np.log(np.clip(table["latency_ms"].to_numpy(dtype=np.float64), 1e-5, None))
        own = self._own_types(pd.concat([table, extra]))
        oof = {}
        for name in candidates:
            predicted = np.zeros(len(table))
            everywhere = dict.fromkeys([*own, _POOLED], name)
            for train, held in GroupKFold(n_splits=folds).split(table, groups=table["model"]):
                fold_models = self._fit_kernels(pd.concat([table.iloc[train], extra]), everywhere)
                predicted[held] = self._predict_kernels(table.iloc[held], fold_models)
            oof[name] = np.log(predicted)
        types = _kernel_types(table)
        pooled_rows = ~types.isin(own).to_numpy()
        if not pooled_rows.any():
            pooled_rows[:] = True
        subsets = {**{t: (types == t).to_numpy() for t in own}, _POOLED: pooled_rows}
        # a type only the kernel campaign has keeps the first candidate: nothing held out scores it
        scores = {
            kind: {
                name: float(np.abs(oof[name][rows] - target[rows]).mean()) if rows.any() else 0.0
                for name in candidates
            }
            for kind, rows in subsets.items()
        }
        choice = {kind: min(by_learner, key=by_learner.__getitem__) for kind, by_learner in scores.items()}
        chosen = oof[choice[_POOLED]].copy()
        for op_type in own:
            chosen[subsets[op_type]] = oof[choice[op_type]][subsets[op_type]]
        return choice, np.exp(chosen), scores

    def kernel_errors(self, ops: pd.DataFrame) -> pd.DataFrame:
        """Where the kernel regressors are least sure: every kernel of the op table ``ops`` (with
        latencies) with its out-of-fold ``abs_log_error`` — regressors chosen and fitted as ``fit``
        does, each model's kernels predicted by those fitted without that model (group k-fold).
        An adaptive kernel campaign measures more around the worst."""
        table = _timed(kernels(ops))
        n_models = table["model"].nunique()
        if n_models < 2:
            raise PredictorError(f"kernel errors need op rows of two models or more; {n_models} given")
        _, predicted, _ = self._choose_kernel_learners(table, min(self.n_folds, n_models), table.head(0))
        truth = np.clip(table["latency_ms"].to_numpy(dtype=np.float64), 1e-5, None)
        return table[["model", "op_type"]].assign(abs_log_error=np.abs(np.log(predicted / truth)))

    def fit(
        self,
        ops: pd.DataFrame,
        e2e: pd.DataFrame,
        kernel_ops: pd.DataFrame | None = None,
        groups: pd.Series | None = None,
    ) -> OpWise:
        """Kernel regressors on the op rows of ``ops`` and ``kernel_ops`` (a kernel campaign's:
        one-kernel networks, no end-to-end role), the overhead model on the models of ``ops`` that
        ``e2e`` times end to end. ``groups`` (a group per model, e.g. its architecture family)
        keeps a group's models in one fold when the overhead forms are weighed (or one is chosen),
        so the weights are those that hold for a group the predictor never saw; by default each
        model is its own group. The rest stays out-of-fold by model. The kernel times the
        overhead model learns from: holding whole families out there too left the six usc-mobile
        phone GPUs less accurate on families never seen (a03s / s10 / pixel4 ±10 %: 77.5 / 80.4
        / 75.5 % against 80.4 / 79.4 / 80.4 %, one form chosen, before the one-standard-error
        rule). The interval: calibrated on families held out, it covered 83–89 % of held-out
        families' networks (pixel4, a03s, iphonexs), under its nominal 90 %; by model, 96–100 %."""
        self.kernel_target_ = _RATE
        self.kernel_inputs_ = _KERNEL_INPUTS
        table = _timed(kernels(ops))
        extra = _timed(kernels(kernel_ops)) if kernel_ops is not None and len(kernel_ops) else table.head(0)
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
        group_of = self._groups(models, groups)
        if group_of.nunique() < 2:
            raise PredictorError(
                f"groups={group_of.iloc[0]!r} for every model: need models of two groups or more"
            )
        folds = min(self.n_folds, len(models))
        choice, oof_kernel, kernel_scores = self._choose_kernel_learners(table, folds, extra)
        features = overhead_features(table, oof_kernel).loc[models]
        model_folds = np.arange(len(models)) % folds
        cv_folds = model_folds
        if groups is not None:
            from sklearn.model_selection import GroupKFold

            cv_folds = np.empty(len(models), dtype=np.int64)
            splitter = GroupKFold(n_splits=min(self.n_folds, group_of.nunique()))
            for fold, (_, held) in enumerate(splitter.split(models, groups=group_of)):
                cv_folds[held] = fold
        overhead: Overhead
        if self.overhead == STACK:
            form, overhead = STACK, StackedOverhead().fit(features, truth, cv_folds)
            form_scores = {f: cv_scores(p, truth) for f, p in overhead.out_of_fold_.items()}
            cv_log = out_of_fold(STACK, features, truth, cv_folds)
            form_scores[STACK] = cv_scores(cv_log, truth)
        else:
            forms = FORMS if self.overhead == "auto" else (self.overhead,)
            form, cv_log, form_scores = choose(features, truth, cv_folds, forms)
            overhead = Overhead.make(form).fit(features, truth)
        # the interval's residuals: each model predicted by a fit without it (by model, as the
        # kernel times the overhead learns from)
        oof_log = cv_log if groups is None else out_of_fold(form, features, truth, model_folds)
        mix = features[_MIX_COLUMNS].to_numpy(dtype=np.float64)
        difficulty = np.zeros(len(models))
        for fold in range(folds):
            held = model_folds == fold
            difficulty[held] = OODDetector().fit(mix[~held], _MIX_COLUMNS).difficulty(mix[held])
        self.calibration_ = calibrate_by_difficulty(np.log(truth) - oof_log, difficulty, self.interval)
        self.interval_q_ = self.calibration_.q
        self.mix_ood_ = OODDetector().fit(mix, _MIX_COLUMNS)
        self.overhead_ = overhead
        every_kernel = pd.concat([table, extra], ignore_index=True)
        self.models_ = self._fit_kernels(every_kernel, choice)
        self.ranges_ = {
            str(t): {
                c: [float(g[c].min()), float(g[c].max())] for c in ("log_flops", "c_in", "c_out", "h_in")
            }
            for t, g in every_kernel.groupby("op_type")
        }
        self.overhead_ranges_ = {
            c: [float(features[c].min()), float(features[c].max())] for c in _MODEL_RANGE_COLUMNS
        }
        predicted = np.exp(oof_log)
        # the out-of-fold end-to-end estimates: what a model stacked on this route learns from
        self.oof_latency_ms_ = pd.Series(predicted, index=pd.Index(models, name="model"))
        self.training_ = {
            "n_models": len(models),
            # the groups held out whole when the overhead form was chosen (each model its own: n_models)
            "n_groups": int(group_of.nunique()),
            "n_kernels": len(table),
            "n_kernel_campaign_rows": len(extra),
            "kernel_types": {str(k): int(v) for k, v in _kernel_types(every_kernel).value_counts().items()},
            "own_models": sorted(
                k for k, m in self.models_.items() if k != _POOLED and not isinstance(m, float)
            ),
            "algorithm_factors": {
                k: float(np.exp(m)) for k, m in self.models_.items() if isinstance(m, float)
            },
            "kernel_learners": choice,
            "kernel_cv_mean_abs_log_error": kernel_scores,
            "overhead_ratio_p10_p90": [
                float(v) for v in np.quantile(truth / features["kernel_ms"].to_numpy(), [0.1, 0.9])
            ],
            "overhead_form": form,
            "overhead_weights": getattr(self.overhead_, "weights", {form: 1.0}),
            "overhead_cv": form_scores,
            "oof_metrics": regression_metrics(
                truth,
                predicted,
                predicted * np.exp(-self.calibration_.half_width(difficulty, len(models))),
                predicted * np.exp(self.calibration_.half_width(difficulty, len(models))),
            ),
        }
        return self

    # -- prediction ---------------------------------------------------------------------------
    def predict(self, ops: pd.DataFrame) -> pd.DataFrame:
        if self.overhead_ is None:
            raise PredictorError("this OpWise is not fitted: call fit() or load a predictor directory")
        table = kernels(ops)
        kernel_ms = self._predict_kernels(table, self.models_)
        features = overhead_features(table, kernel_ms)
        log_pred = self.overhead_.predict(features)
        out = pd.DataFrame(index=features.index)
        difficulty = None
        if self.mix_ood_ is not None:
            difficulty = self.mix_ood_.difficulty(features[_MIX_COLUMNS].to_numpy(dtype=np.float64))
        half_width = self.calibration_.half_width(difficulty, len(features))
        put_interval(out, "latency_ms", log_pred, half_width)
        out["kernel_sum_ms"] = np.exp(features["log_kernel_ms"].to_numpy())
        reasons = [self._ood_reason(table[table["model"] == m], features.loc[m]) for m in features.index]
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
        tables = [kernel_table(g, rules, model=i) for i, g in zip(ids, graphs, strict=True)]
        return self.predict(pd.concat(tables, ignore_index=True)).loc[ids].reset_index(drop=True)

    def _ood_reason(self, table: pd.DataFrame, overhead: pd.Series) -> str:
        parts = []
        for op_type, group in table.groupby("op_type"):
            if op_type not in self.ranges_:
                parts.append(f"{len(group)} {op_type} kernel(s): no training rows of that type")
                continue
            for column, (low, high) in self.ranges_[str(op_type)].items():
                values = group[column].dropna()
                if len(values) and (values.min() < low * 0.98 or values.max() > high * 1.02):
                    parts.append(
                        f"{op_type} {column} up to {values.max():.4g} outside [{low:.4g}, {high:.4g}]"
                    )
                    break
        for column in _MODEL_RANGE_COLUMNS:
            low, high = self.overhead_ranges_.get(column, (-np.inf, np.inf))
            if not low - 0.05 <= overhead[column] <= high + 0.05:
                parts.append(f"model {column}={overhead[column]:.3g} outside [{low:.3g}, {high:.3g}]")
        return "; ".join(parts[:4])

    def score(self, ops: pd.DataFrame, e2e: pd.DataFrame) -> float:
        """One number for model selection: R² of log end-to-end latency over the models of ``ops``
        that ``e2e`` measures."""
        predicted = self.predict(ops)
        truth = e2e_series(e2e).rename("latency_ms").to_frame()
        return log_r2_score(truth.reindex(predicted.index), predicted, ["latency_ms"])

    def evaluate(self, ops: pd.DataFrame, e2e: pd.DataFrame) -> dict[str, Any]:
        """The metrics of ``regression_metrics`` over the models of ``ops`` that ``e2e`` measures."""
        predicted = self.predict(ops)
        truth = e2e_series(e2e)
        common = [m for m in predicted.index if m in truth.index]
        if not common:
            raise PredictorError("no model of the op table has an end-to-end latency to score against")
        p = predicted.loc[common]
        return regression_metrics(
            truth.loc[common].to_numpy(),
            p["latency_ms"].to_numpy(),
            p["latency_ms_low"],
            p["latency_ms_high"],
        )

    # -- persistence --------------------------------------------------------------------------
    def save(self, folder: str | Path, metadata: dict[str, Any] | None = None) -> Path:
        if self.overhead_ is None:
            raise PredictorError("this OpWise is not fitted")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        files = {}
        for op_type, model in self.models_.items():
            if isinstance(model, float):
                continue
            name = f"kernel.{op_type}{model.suffix}"
            model.save(folder / name)
            files[op_type] = name
        body = {
            "params": {
                "n_estimators": self.n_estimators,
                "min_rows": self.min_rows,
                "n_folds": self.n_folds,
                "interval": self.interval,
                "seed": self.seed,
                "n_jobs": self.n_jobs,
                "overhead": self.overhead,
                "kernel_learner": self.kernel_learner,
            },
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
        self.metadata = {**self.metadata, **(metadata or {})}
        return write_meta(folder, "opwise", body, self.metadata).parent

    @classmethod
    def load(cls, folder: str | Path) -> OpWise:
        folder = Path(folder)
        saved = read_meta(folder, "opwise", {k: dict for k in ("params", "kernel_models", "overhead")})
        with damaged_as_error(folder):
            return cls._from_meta(folder, saved)

    @classmethod
    def _from_meta(cls, folder: Path, saved: dict[str, Any]) -> OpWise:
        inputs = tuple(saved.get("kernel_inputs") or ())
        if inputs not in (_KERNEL_INPUTS, _KERNEL_INPUTS_BEFORE_SLICES):
            raise PredictorError(f"{folder}: kernel features {list(inputs)} differ from this infercast's")
        opwise = cls(**saved["params"])
        opwise.kernel_inputs_ = inputs
        opwise.models_ = {
            t: _learner_of(f).load(inside_folder(folder, f)) for t, f in saved["kernel_models"].items()
        }
        opwise.models_.update({t: float(f) for t, f in (saved.get("algorithm_log_factors") or {}).items()})
        if _POOLED not in opwise.models_:
            raise PredictorError(f"{folder}: meta.json lists no pooled kernel model")
        opwise.kernel_target_ = saved.get("kernel_target", _LATENCY)
        if opwise.kernel_target_ not in (_RATE, _LATENCY):
            raise PredictorError(f"{folder}: unknown kernel target {opwise.kernel_target_!r}")
        opwise.overhead_ = Overhead.from_dict(saved["overhead"])
        opwise.interval_q_ = float(saved["interval_q"])
        opwise.calibration_ = Calibration.from_dict(saved.get("calibration"), opwise.interval_q_)
        mix_ood = saved.get("mix_ood")
        opwise.mix_ood_ = OODDetector.from_dict(mix_ood) if mix_ood else None
        opwise.ranges_ = saved["ranges"]
        opwise.overhead_ranges_ = saved["overhead_ranges"]
        opwise.training_ = saved["training"]
        opwise.metadata = {k: v for k, v in saved.items() if k not in _BODY_KEYS}
        return opwise


_BODY_KEYS = {
    "params",
    "kernel_models",
    "algorithm_log_factors",
    "kernel_inputs",
    "kernel_target",
    "overhead",
    "interval_q",
    "calibration",
    "mix_ood",
    "ranges",
    "overhead_ranges",
    "training",
}


def _kernel_types(table: pd.DataFrame) -> pd.Series:
    """Each kernel's type: its main op's type, with the algorithm after a dot where the op table
    names one (``conv.winograd``). An algorithm runs at a rate of its own; one regressor over
    both learnt the boundary only in part: usc-mobile's TFLite GPU op rows, families held out,
    kernel sums ±10 % on iphonexs / a03s 94.1 / 96.1 % as ``conv``, 97.1 / 98.0 % apart."""
    algorithm = table[ALGORITHM].fillna("").astype(str)
    return table["op_type"].astype(str).where(algorithm == "", table["op_type"].astype(str) + "." + algorithm)


def _timed(table: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows with a usable latency."""
    return table[np.isfinite(table["latency_ms"]) & (table["latency_ms"] > 0)]


def _log_work(table: pd.DataFrame) -> np.ndarray:
    """log of a kernel's work: its FLOPs, else its bytes moved (concat, pad, layout), else 0."""
    flops = table["flops"].to_numpy(dtype=np.float64)
    moved = table["bytes"].to_numpy(dtype=np.float64)
    return np.log(np.where(flops > 0, flops, np.where(moved > 0, moved, 1.0)))


def _learner_of(file_name: str) -> type[Learner]:
    """The learner a kernel model file belongs to, by its suffix (never by unpickling)."""
    for learner in LEARNERS.values():
        if file_name.endswith(learner.suffix):
            return learner
    suffixes = ", ".join(learner.suffix for learner in LEARNERS.values())
    raise PredictorError(f"kernel model {file_name!r} is none of the known model files ({suffixes})")
