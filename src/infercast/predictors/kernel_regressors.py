"""The op-wise route's kernel regressors: one regressor of log latency per kernel type (the type
of the kernel's main op: conv, dwconv, linear, pool_max, …, and its algorithm where the op table
names one: ``conv.winograd``) on shape features — XGBoost, LightGBM or extremely-randomized trees,
whichever cross-validation (models held out) finds best for that type; types with few rows share
a pooled model, and an algorithm with a few kernels gets a factor on its op type's estimate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from infercast.graph import OP_GROUPS
from infercast.predictors.errors import PredictorError
from infercast.predictors.learners import LEARNERS, ExtraTreesLearner, Learner
from infercast.predictors.optable import ALGORITHM, SHAPE_COLUMNS

KERNEL_INPUTS = (
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
KERNEL_INPUTS_BEFORE_SLICES = KERNEL_INPUTS[:-4]
POOLED = "pooled"
# the fewest kernels of an algorithm that price it by a factor on its op type's estimate
MIN_FACTOR_ROWS = 3
# the regressors' target: log(latency / work) for a type's own regressor and log latency for the
# pooled one, or log latency everywhere in predictors saved before
RATE, LATENCY = "own_types_log_latency_per_work", "log_latency"
Models = dict[str, Learner | float]


@dataclass(frozen=True)
class KernelRegressors:
    """How an ``OpWise`` fits and prices kernels (its parameters, and the input columns and target
    its regressors learned: ``OpWise.kernel_inputs_`` / ``kernel_target_``); the fitted regressors
    themselves (``Models``: kernel type → learner, or an algorithm's log factor) are passed in."""

    n_estimators: int
    min_rows: int
    seed: int
    n_jobs: int
    kernel_learner: str = "auto"
    inputs: tuple[str, ...] = KERNEL_INPUTS
    target: str = RATE

    def matrix(self, table: pd.DataFrame, pooled: bool) -> np.ndarray:
        columns = [table[c].to_numpy(dtype=np.float64) for c in self.inputs]
        if pooled:
            columns.append(
                table["op_type"].map({g: i for i, g in enumerate(OP_GROUPS)}).to_numpy(dtype=np.float64)
            )
        return np.column_stack(columns)

    def fit(self, table: pd.DataFrame, learners: dict[str, str]) -> Models:
        """One regressor of log latency per kernel type with ``min_rows`` rows, and a pooled one
        for the rest; ``learners`` names the learner of each (``POOLED`` included). An algorithm
        with fewer rows but ``MIN_FACTOR_ROWS`` gets a factor on its op type's estimate instead
        (its log, a float): its rows are kept out of the pooled regressor, which prices them as
        their op type, and the factor is their median ratio to that price. A campaign samples
        few kernels of a backend's slow path (ONNX Runtime's plain-layout convolutions: 2, 3 and 8
        of each kind among 283 convolutions of a 400-kernel campaign), too few for a regressor but
        enough for how much slower they run."""
        log_latency = np.log(np.clip(table["latency_ms"].to_numpy(dtype=np.float64), 1e-5, None))
        rate = log_latency - self.log_work(table)
        models: Models = {}
        types = kernel_types(table)
        own = self.own_types(table)
        for kernel_type in own:
            rows = (types == kernel_type).to_numpy()
            models[kernel_type] = self.learner(learners[kernel_type]).fit(
                self.matrix(table[rows], False), rate[rows]
            )
        counts = types.value_counts()
        scaled = [
            str(t) for t, n in counts.items() if t not in own and "." in str(t) and n >= MIN_FACTOR_ROWS
        ]
        pooled_rows = ~types.isin(scaled).to_numpy()
        models[POOLED] = self.learner(learners[POOLED]).fit(
            self.matrix(table[pooled_rows], True), log_latency[pooled_rows]
        )
        for kernel_type in sorted(scaled):
            rows = (types == kernel_type).to_numpy()
            base = self.predict(table[rows], models)
            models[kernel_type] = float(np.median(log_latency[rows] - np.log(base)))
        return models

    def log_work(self, table: pd.DataFrame) -> np.ndarray:
        """What a type's own regressor leaves out of its target: log work, so that it learns a rate
        and a kernel larger than any seen in training is predicted at the rate of the largest seen
        instead of at their latency (``RATE``); nothing in predictors saved before rates
        (``LATENCY``). The pooled regressor learns latency: it also meets kernel types it never
        saw (concat, channel shuffle in a ResNet-trained predictor), whose work another type's
        rate would misprice (SqueezeNet's op-wise estimate here: +189 % as a rate, +29 % as a
        latency)."""
        return log_work(table) if self.target == RATE else np.zeros(len(table))

    def own_types(self, table: pd.DataFrame) -> list[str]:
        counts = kernel_types(table).value_counts()
        return sorted(str(t) for t, n in counts.items() if n >= self.min_rows)

    def learner(self, name: str) -> Learner:
        if name == "extratrees":
            # leaves of two rows keep a kernel forest's file small at no cost in accuracy here
            size = max(50, self.n_estimators // 4)
            return ExtraTreesLearner(
                n_estimators=size, seed=self.seed, n_jobs=self.n_jobs, min_samples_leaf=2
            )
        return LEARNERS[name](n_estimators=self.n_estimators, seed=self.seed, n_jobs=self.n_jobs)

    def predict(self, table: pd.DataFrame, models: Models) -> np.ndarray:
        log_work = self.log_work(table)
        out = np.exp(models[POOLED].predict(self.matrix(table, True)))
        types = kernel_types(table)
        regressors = {t: m for t, m in models.items() if not isinstance(m, float)}
        # an algorithm this predictor has no regressor for is priced as its op type's default one
        # (its rate, not the pooled model's latency: a predictor trained before the column, say),
        # times the algorithm's factor where it learned one
        priced_as = types.where(types.isin(list(regressors)), table["op_type"].astype(str))
        for kernel_type, model in regressors.items():
            rows = (priced_as == kernel_type).to_numpy()
            if kernel_type != POOLED and rows.any():
                out[rows] = np.exp(model.predict(self.matrix(table[rows], False)) + log_work[rows])
        factors = {t: f for t, f in models.items() if isinstance(f, float)}
        return out * np.exp(types.map(factors).fillna(0.0).to_numpy(dtype=np.float64))

    def choose(
        self, table: pd.DataFrame, folds: int, extra: pd.DataFrame
    ) -> tuple[dict[str, str], np.ndarray, dict[str, dict[str, float]]]:
        """Per kernel type, the learner with the smallest out-of-fold mean |log error| (models
        held out by group k-fold; the ``extra`` kernel rows train in every fold), the out-of-fold
        kernel times of that choice, and the scores."""
        # scikit-learn loads when a model is fitted: listing the devices imports this module
        from sklearn.model_selection import GroupKFold

        candidates = tuple(LEARNERS) if self.kernel_learner == "auto" else (self.kernel_learner,)
        target = np.log(np.clip(table["latency_ms"].to_numpy(dtype=np.float64), 1e-5, None))
        own = self.own_types(pd.concat([table, extra]))
        oof = {}
        for name in candidates:
            predicted = np.zeros(len(table))
            everywhere = dict.fromkeys([*own, POOLED], name)
            for train, held in GroupKFold(n_splits=folds).split(table, groups=table["model"]):
                fold_models = self.fit(pd.concat([table.iloc[train], extra]), everywhere)
                predicted[held] = self.predict(table.iloc[held], fold_models)
            oof[name] = np.log(predicted)
        types = kernel_types(table)
        pooled_rows = ~types.isin(own).to_numpy()
        if not pooled_rows.any():
            pooled_rows[:] = True
        subsets = {**{t: (types == t).to_numpy() for t in own}, POOLED: pooled_rows}
        # a type only the kernel campaign has keeps the first candidate: nothing held out scores it
        scores = {
            kind: {
                name: float(np.abs(oof[name][rows] - target[rows]).mean()) if rows.any() else 0.0
                for name in candidates
            }
            for kind, rows in subsets.items()
        }
        choice = {kind: min(by_learner, key=by_learner.__getitem__) for kind, by_learner in scores.items()}
        chosen = oof[choice[POOLED]].copy()
        for op_type in own:
            chosen[subsets[op_type]] = oof[choice[op_type]][subsets[op_type]]
        return choice, np.exp(chosen), scores

    def errors(self, table: pd.DataFrame, n_folds: int) -> pd.DataFrame:
        """Every timed kernel of ``table`` with its out-of-fold ``abs_log_error``: regressors
        chosen and fitted as ``OpWise.fit`` does, each model's kernels predicted by those fitted
        without that model (group k-fold)."""
        n_models = table["model"].nunique()
        if n_models < 2:
            raise PredictorError(f"kernel errors need op rows of two models or more; {n_models} given")
        _, predicted, _ = self.choose(table, min(n_folds, n_models), table.head(0))
        truth = np.clip(table["latency_ms"].to_numpy(dtype=np.float64), 1e-5, None)
        return table[["model", "op_type"]].assign(abs_log_error=np.abs(np.log(predicted / truth)))

    @staticmethod
    def summary(models: Models, choice: dict[str, str], scores: dict[str, Any]) -> dict[str, Any]:
        """What the fitted regressors are, for the predictor's training record."""
        return {
            "own_models": sorted(k for k, m in models.items() if k != POOLED and not isinstance(m, float)),
            "algorithm_factors": {k: float(np.exp(m)) for k, m in models.items() if isinstance(m, float)},
            "kernel_learners": choice,
            "kernel_cv_mean_abs_log_error": scores,
        }


def kernel_types(table: pd.DataFrame) -> pd.Series:
    """Each kernel's type: its main op's type, with the algorithm after a dot where the op table
    names one (``conv.winograd``). An algorithm runs at a rate of its own; one regressor over
    both learnt the boundary only in part: usc-mobile's TFLite GPU op rows, families held out,
    kernel sums ±10 % on iphonexs / a03s 94.1 / 96.1 % as ``conv``, 97.1 / 98.0 % apart."""
    algorithm = table[ALGORITHM].fillna("").astype(str)
    return table["op_type"].astype(str).where(algorithm == "", table["op_type"].astype(str) + "." + algorithm)


def timed(table: pd.DataFrame) -> pd.DataFrame:
    """Kernel rows with a usable latency."""
    return table[np.isfinite(table["latency_ms"]) & (table["latency_ms"] > 0)]


def log_work(table: pd.DataFrame) -> np.ndarray:
    """log of a kernel's work: its FLOPs, else its bytes moved (concat, pad, layout), else 0."""
    flops = table["flops"].to_numpy(dtype=np.float64)
    moved = table["bytes"].to_numpy(dtype=np.float64)
    return np.log(np.where(flops > 0, flops, np.where(moved > 0, moved, 1.0)))


def learner_of(file_name: str) -> type[Learner]:
    """The learner a kernel model file belongs to, by its suffix (never by unpickling)."""
    for learner in LEARNERS.values():
        if file_name.endswith(learner.suffix):
            return learner
    suffixes = ", ".join(learner.suffix for learner in LEARNERS.values())
    raise PredictorError(f"kernel model {file_name!r} is none of the known model files ({suffixes})")
