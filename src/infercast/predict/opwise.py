"""The operation-wise latency predictor (arXiv 2210.02620, nn-Meter style).

1. Ops are grouped into the **kernels** the backend executes (``predict.fusion`` rules for model
   strings; the ``kernel`` column for op tables; the profiler's fused nodes for stored profiles).
2. One gradient-boosted regressor per kernel type (the type of the kernel's main op: conv, dwconv,
   linear, pool_max, …) on shape features; types with few rows share a pooled model.
3. End to end = Σ kernel predictions × a learned **overhead factor**, a ridge regression of
   ``log(e2e / Σ kernels)`` on the graph: kernel count, op-type mix, FLOPs and memory traffic,
   the share of ops with no kernel of their own. The kernel sums it learns from are out-of-fold
   (models held out by group k-fold), so it learns the errors the kernel models really make.
4. A split-conformal interval from the out-of-fold end-to-end log residuals.

The op table (Parquet / CSV, ``predict.optable``) is documented in docs/formats.md: ``model, op_type, kernel
(optional), h_in, w_in, c_in, h_out, w_out, c_out, kernel_size, stride, groups, flops,
latency_ms`` (+ optional ``bytes``, ``n_ops``); the end-to-end table ``model, latency_ms``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from infercast.graph import OP_GROUPS
from infercast.predict.artifact import Described, damaged_as_error, inside_folder, read_meta, write_meta
from infercast.predict.errors import PredictorError
from infercast.predict.intervals import conformal_quantile, put_interval
from infercast.predict.learners import XGBoostLearner
from infercast.predict.metrics import log_r2_score, regression_metrics
from infercast.predict.optable import SHAPE_COLUMNS, e2e_series, kernels
from infercast.predict.overhead import OverheadRidge, overhead_features

_KERNEL_INPUTS = (*SHAPE_COLUMNS, "bytes", "n_ops", "log_flops", "log_bytes", "intensity")
_POOLED = "pooled"


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
    ) -> None:
        self.n_estimators = n_estimators
        self.min_rows = min_rows
        self.n_folds = n_folds
        self.interval = interval
        self.seed = seed
        self.n_jobs = n_jobs
        if not 0 < interval < 1:
            raise PredictorError(f"interval={interval!r} must lie strictly between 0 and 1")
        for name in ("n_estimators", "min_rows", "n_jobs"):
            if getattr(self, name) < 1:
                raise PredictorError(f"{name}={getattr(self, name)!r} must be at least 1")
        if n_folds < 2:
            raise PredictorError(f"n_folds={n_folds!r} must be at least 2")
        self.models_: dict[str, XGBoostLearner] = {}
        self.overhead_: OverheadRidge | None = None  # learned: set by fit or load
        self.interval_q_ = float("nan")
        self.ranges_: dict[str, dict[str, list[float]]] = {}
        self.overhead_ranges_: dict[str, list[float]] = {}
        self.metadata: dict[str, Any] = {}
        self.training_: dict[str, Any] = {}

    # -- training -----------------------------------------------------------------------------
    def _kernel_matrix(self, table: pd.DataFrame, pooled: bool) -> np.ndarray:
        columns = [table[c].to_numpy(dtype=np.float64) for c in _KERNEL_INPUTS]
        if pooled:
            columns.append(
                table["op_type"].map({g: i for i, g in enumerate(OP_GROUPS)}).to_numpy(dtype=np.float64)
            )
        return np.column_stack(columns)

    def _fit_kernels(self, table: pd.DataFrame) -> dict[str, XGBoostLearner]:
        target = np.log(np.clip(table["latency_ms"].to_numpy(dtype=np.float64), 1e-5, None))
        models = {}
        counts = table["op_type"].value_counts()
        for op_type, count in counts.items():
            if count >= self.min_rows:
                rows = (table["op_type"] == op_type).to_numpy()
                models[str(op_type)] = self._learner().fit(
                    self._kernel_matrix(table[rows], False), target[rows]
                )
        models[_POOLED] = self._learner().fit(self._kernel_matrix(table, True), target)
        return models

    def _learner(self) -> XGBoostLearner:
        return XGBoostLearner(n_estimators=self.n_estimators, seed=self.seed, n_jobs=self.n_jobs, max_depth=6)

    def _predict_kernels(self, table: pd.DataFrame, models: dict[str, XGBoostLearner]) -> np.ndarray:
        out = np.exp(models[_POOLED].predict(self._kernel_matrix(table, True)))
        for op_type, model in models.items():
            rows = (table["op_type"] == op_type).to_numpy()
            if op_type != _POOLED and rows.any():
                out[rows] = np.exp(model.predict(self._kernel_matrix(table[rows], False)))
        return out

    def fit(self, ops: pd.DataFrame, e2e: pd.DataFrame) -> OpWise:
        table = kernels(ops)
        table = table[np.isfinite(table["latency_ms"]) & (table["latency_ms"] > 0)]
        e2e = e2e_series(e2e)
        models = sorted(set(table["model"]) & set(e2e.index))
        if len(models) < 2:
            raise PredictorError(
                f"need kernels and an end-to-end latency for at least 2 models; {len(models)} have both"
            )
        table = table[table["model"].isin(models)].reset_index(drop=True)
        truth = e2e.loc[models].to_numpy(dtype=np.float64)
        folds = min(self.n_folds, len(models))
        oof_kernel = np.zeros(len(table))
        for train, held in GroupKFold(n_splits=folds).split(table, groups=table["model"]):
            fold_models = self._fit_kernels(table.iloc[train])
            oof_kernel[held] = self._predict_kernels(table.iloc[held], fold_models)
        features = overhead_features(table, oof_kernel).loc[models]
        gap = np.log(truth) - features["log_kernel_ms"].to_numpy()
        oof_gap = np.zeros(len(models))
        order = np.arange(len(models))
        for fold in range(folds):
            held = order % folds == fold
            if (~held).sum() >= 2:
                oof_gap[held] = OverheadRidge().fit(features[~held], gap[~held]).predict(features[held])
        self.interval_q_ = conformal_quantile(gap - oof_gap, self.interval)
        self.overhead_ = OverheadRidge().fit(features, gap)
        self.models_ = self._fit_kernels(table)
        self.ranges_ = {
            str(t): {
                c: [float(g[c].min()), float(g[c].max())] for c in ("log_flops", "c_in", "c_out", "h_in")
            }
            for t, g in table.groupby("op_type")
        }
        self.overhead_ranges_ = {
            c: [float(features[c].min()), float(features[c].max())] for c in features.columns
        }
        predicted = np.exp(features["log_kernel_ms"].to_numpy() + oof_gap)
        self.training_ = {
            "n_models": len(models),
            "n_kernels": len(table),
            "kernel_types": {str(k): int(v) for k, v in table["op_type"].value_counts().items()},
            "own_models": sorted(k for k in self.models_ if k != _POOLED),
            "overhead_ratio_p10_p90": [float(v) for v in np.quantile(np.exp(gap), [0.1, 0.9])],
            "oof_metrics": regression_metrics(
                truth,
                predicted,
                predicted * math.exp(-self.interval_q_),
                predicted * math.exp(self.interval_q_),
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
        log_pred = features["log_kernel_ms"].to_numpy() + self.overhead_.predict(features)
        out = pd.DataFrame(index=features.index)
        put_interval(out, "latency_ms", log_pred, self.interval_q_)
        out["kernel_sum_ms"] = np.exp(features["log_kernel_ms"].to_numpy())
        reasons = [self._ood_reason(table[table["model"] == m], features.loc[m]) for m in features.index]
        out["ood"] = [bool(r) for r in reasons]
        out["ood_reason"] = reasons
        out.index.name = "model"
        return out

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
        for column in ("log_n_kernels", "log_flops"):
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
            },
            "kernel_models": files,
            "kernel_inputs": list(_KERNEL_INPUTS),
            "overhead": self.overhead_.to_dict(),
            "interval_q": self.interval_q_,
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
        if saved.get("kernel_inputs") != list(_KERNEL_INPUTS):
            raise PredictorError(
                f"{folder}: kernel features {saved.get('kernel_inputs')} differ from this infercast's"
            )
        opwise = cls(**saved["params"])
        opwise.models_ = {
            t: XGBoostLearner.load(inside_folder(folder, f)) for t, f in saved["kernel_models"].items()
        }
        if _POOLED not in opwise.models_:
            raise PredictorError(f"{folder}: meta.json lists no pooled kernel model")
        opwise.overhead_ = OverheadRidge.from_dict(saved["overhead"])
        opwise.interval_q_ = float(saved["interval_q"])
        opwise.ranges_ = saved["ranges"]
        opwise.overhead_ranges_ = saved["overhead_ranges"]
        opwise.training_ = saved["training"]
        opwise.metadata = {k: v for k, v in saved.items() if k not in _BODY_KEYS}
        return opwise


_BODY_KEYS = {
    "params",
    "kernel_models",
    "kernel_inputs",
    "overhead",
    "interval_q",
    "ranges",
    "overhead_ranges",
    "training",
}
