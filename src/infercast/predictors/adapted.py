"""Few-shot adaptation: a predictor for a new platform from source predictors and k measurements.

A new device behaves like some mix of devices already characterised: its log latency is close to
an affine, non-negative combination of the sources' log predictions (one source: a recalibration;
several: HELP's idea of describing a device by how it relates to known ones, without
meta-training a network). ``Adapted`` fits, per target,

    log y = a + Σ_s w_s · log p_s(x),    w_s ≥ 0,

with a ridge pull of ``w`` towards equal weights summing to 1 (the "average source, slope 1"
prior), its strength chosen by leave-one-out error on the k measurements. From ``min_residual``
measurements on, a shallow gradient-boosted residual model on the features is added when
cross-validation says it helps: that is what can change the ranking the sources give.

Which k configs to measure matters as much as how many: ``select_configs`` spreads them over the
sources' predictions (k-centre in the standardised log-prediction space), so the fit sees the
whole range instead of a cluster.

The directory is self-contained: the sources are copied in.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from infercast.predictors.artifact import inside_folder
from infercast.predictors.base import ModelLevel, as_frame, kind_of
from infercast.predictors.blend import CascadeBlend
from infercast.predictors.data import INPUT_COLUMNS, TARGETS, as_targets
from infercast.predictors.errors import PredictorError
from infercast.predictors.intervals import conformal_quantile, put_interval
from infercast.predictors.learners import XGBoostLearner
from infercast.predictors.metrics import regression_metrics, score_target
from infercast.predictors.sources import (
    ALPHAS,
    fit_log_weights,
    loo_log_residuals,
    source_inputs,
    source_logs,
)


class _TargetFit:
    """One target's fitted combination of the sources (and its residual model)."""

    def __init__(
        self,
        intercept: float,
        weights: np.ndarray,
        alpha: float,
        interval_q: float,
        residual: XGBoostLearner | None,
        note: str,
        n: int,
    ) -> None:
        self.intercept = intercept
        self.weights = weights
        self.alpha = alpha
        self.interval_q = interval_q
        self.residual = residual
        self.note = note
        self.n = n

    def save(self, folder: Path, target: str) -> dict[str, Any]:
        """Write the residual model (if any) into ``folder``; return meta.json's entry."""
        residual_file = None
        if self.residual is not None:
            residual_file = f"{target}.residual{self.residual.suffix}"
            self.residual.save(folder / residual_file)
        return {
            "intercept": self.intercept,
            "weights": self.weights.tolist(),
            "alpha": self.alpha,
            "interval_q": self.interval_q,
            "residual": residual_file,
            "note": self.note,
            "n": self.n,
        }

    @classmethod
    def load(cls, folder: Path, fit: dict[str, Any]) -> _TargetFit:
        residual = fit.get("residual")
        return cls(
            intercept=float(fit["intercept"]),
            weights=np.asarray(fit["weights"], dtype=np.float64),
            alpha=float(fit["alpha"]),
            interval_q=float(fit["interval_q"]),
            residual=XGBoostLearner.load(inside_folder(folder, residual)) if residual else None,
            note=str(fit.get("note", "")),
            n=int(fit.get("n", 0)),
        )


class Adapted(ModelLevel):
    """A target-platform predictor built from source ``CascadeBlend`` predictors and a few target
    measurements. ``sources``: the sources' predictor directories or fitted ``CascadeBlend``
    objects (``save`` copies the sources' directories in, so a source given as an object must
    have been loaded from one). ``fit(X, y)`` with the k measured configs; ``predict`` /
    ``score`` / ``evaluate`` as ``CascadeBlend`` (same output columns)."""

    kind: ClassVar[str] = "adapted"
    _REQUIRED: ClassVar[dict[str, type | tuple[type, ...]]] = {
        "params": dict,
        "sources": list,
        "fits": dict,
        "unavailable": dict,
    }

    def __init__(
        self,
        sources: Sequence[str | Path | CascadeBlend] = (),
        coverage: float = 0.9,
        min_residual: int = 20,
        residual_estimators: int = 100,
        seed: int = 0,
    ) -> None:
        self.sources = sources
        self.coverage = coverage
        self.min_residual = min_residual
        self.residual_estimators = residual_estimators
        self.seed = seed

    # learned in fit (or read by load)
    sources_: list[CascadeBlend]
    source_folders_: list[str | None]
    targets_: dict[str, _TargetFit]
    unavailable_: dict[str, str]
    metadata_: dict[str, Any]

    def _validate(self) -> None:
        if not len(self.sources):
            raise PredictorError("sources: give at least one source predictor")
        if not 0 < self.coverage < 1:
            raise PredictorError(f"coverage={self.coverage!r} must lie strictly between 0 and 1")
        if self.min_residual < 5:
            raise PredictorError(f"min_residual={self.min_residual!r} must be at least 5")

    def _load_sources(self) -> None:
        """``sources_`` and their folders from ``sources`` (each checked to be a fitted blend of
        the same feature columns)."""
        self.sources_, self.source_folders_ = load_sources(self.sources)
        names = self.sources_[0].feature_names_
        for i, source in enumerate(self.sources_[1:], start=1):
            if source.feature_names_ != names:
                raise PredictorError(f"source {i} uses other feature columns than source 0")

    def __sklearn_is_fitted__(self) -> bool:
        return bool(getattr(self, "targets_", None))

    @property
    def feature_names_(self) -> list[str]:
        return self.sources_[0].feature_names_

    def _targets(self) -> list[str]:
        return [t for t in TARGETS if all(t in s.targets_ for s in self.sources_)]

    def fit(self, X: Any, y: Any, source_log: dict[str, np.ndarray] | None = None) -> Adapted:
        """``source_log``: per target, the sources' log predictions of ``X`` when the caller has
        them already (``source_logs``); computed here otherwise."""
        self._validate()
        self._load_sources()
        x = as_frame(X, INPUT_COLUMNS)
        y = as_targets(y, len(x))
        if len(x) < 3:
            raise PredictorError(f"{len(x)} target measurements: adaptation needs 3 or more")
        self.targets_, self.unavailable_, self.metadata_ = {}, {}, {}
        given = source_log or {}
        computed = source_logs(self.sources_, x, [t for t in self._targets() if t not in given])
        for target, column in TARGETS.items():
            if target not in self._targets():
                missing = next(s for s in self.sources_ if target not in s.targets_)
                reason = missing.unavailable_.get(target, "not trained")
                self.unavailable_[target] = f"a source predictor has no {column}: {reason}"
                continue
            truth = y[column].to_numpy(dtype=np.float64) if column in y.columns else np.full(len(y), np.nan)
            keep = np.isfinite(truth) & (truth > 0)
            if keep.sum() < 3:
                self.unavailable_[target] = f"only {int(keep.sum())} target measurements of {column}"
                continue
            p = np.asarray(given[target]) if target in given else computed[target]
            self.targets_[target] = self._fit_target(x[keep], p[keep], np.log(truth[keep]))
        if not self.targets_:
            raise PredictorError(f"nothing to adapt: {self.unavailable_}")
        return self

    def _fit_target(self, x: pd.DataFrame, p: np.ndarray, z: np.ndarray) -> _TargetFit:
        errors = {alpha: np.mean(loo_log_residuals(p, z, alpha) ** 2) for alpha in ALPHAS}
        alpha = min(errors, key=errors.__getitem__)
        intercept, weights = fit_log_weights(p, z, alpha)
        loo = loo_log_residuals(p, z, alpha)
        residual, note = None, f"below {self.min_residual} measurements: no residual model"
        if len(z) >= self.min_residual:
            residual, note, loo = self._fit_residual(x, p, z, alpha, loo)
        interval_q = conformal_quantile(loo, self.coverage)  # on leave-one-out residuals
        return _TargetFit(intercept, weights, alpha, interval_q, residual, note, len(z))

    def _residual_inputs(self, x: pd.DataFrame, p: np.ndarray, weights: np.ndarray) -> np.ndarray:
        combined = p @ weights
        return np.column_stack([x[self.feature_names_].to_numpy(dtype=np.float64), combined])

    def _make_residual(self) -> XGBoostLearner:
        return XGBoostLearner(
            n_estimators=self.residual_estimators,
            seed=self.seed,
            n_jobs=1,
            max_depth=2,
            learning_rate=0.05,
            min_child_weight=3.0,
            subsample=1.0,
        )

    def _fit_residual(
        self, x: pd.DataFrame, p: np.ndarray, z: np.ndarray, alpha: float, loo: np.ndarray
    ) -> tuple[XGBoostLearner | None, str, np.ndarray]:
        """A residual model kept only if its 5-fold error beats the combination's LOO error."""
        order = np.random.default_rng(self.seed).permutation(len(z))
        folds = np.array_split(order, 5)
        cv = np.empty(len(z))
        for held in folds:
            keep = np.setdiff1d(np.arange(len(z)), held)
            intercept, weights = fit_log_weights(p[keep], z[keep], alpha)
            base = intercept + p @ weights
            model = self._make_residual().fit(
                self._residual_inputs(x.iloc[keep], p[keep], weights), z[keep] - base[keep]
            )
            held_inputs = self._residual_inputs(x.iloc[held], p[held], weights)
            cv[held] = z[held] - base[held] - model.predict(held_inputs)
        before, after = float(np.sqrt(np.mean(loo**2))), float(np.sqrt(np.mean(cv**2)))
        if after >= before:
            return None, f"residual model not kept (CV log-RMSE {after:.4f} ≥ {before:.4f} without)", loo
        intercept, weights = fit_log_weights(p, z, alpha)
        base = intercept + p @ weights
        model = self._make_residual().fit(self._residual_inputs(x, p, weights), z - base)
        return model, f"residual model kept (CV log-RMSE {after:.4f} < {before:.4f} without)", cv

    def predict(
        self, X: Any, ood: str = "full", source_log: dict[str, np.ndarray] | None = None
    ) -> pd.DataFrame:
        """As ``CascadeBlend.predict``; ``source_log`` as in ``fit``."""
        self.check_fitted()
        x = as_frame(X, self.feature_names_)
        out = pd.DataFrame(index=x.index)
        given = source_log or {}
        computed = source_logs(self.sources_, x, [t for t in self.targets_ if t not in given])
        for target, column in TARGETS.items():
            fit = self.targets_.get(target)
            if fit is None:
                put_interval(out, column, None, None)
                continue
            p = np.asarray(given[target]) if target in given else computed[target]
            log_pred = fit.intercept + p @ fit.weights
            if fit.residual is not None:
                log_pred = log_pred + fit.residual.predict(self._residual_inputs(x, p, fit.weights))
            put_interval(out, column, log_pred, fit.interval_q)
        if ood != "none":
            # the features' domain is the sources' training data: the best-weighted source judges it
            fit = self.targets_.get("latency") or next(iter(self.targets_.values()))
            judge = self.sources_[int(np.argmax(fit.weights))]
            if judge.ood_ is not None:
                inputs = source_inputs(judge, x)[judge.feature_names_].to_numpy(dtype=np.float64)
                out["ood"], out["ood_reason"] = judge.ood_.check(inputs, ranges_only=ood == "ranges")
        return out

    def evaluate(self, X: Any, y: Any) -> dict[str, dict[str, Any]]:
        """Per target: the adapted predictor's metrics, with each unadapted source's beside them."""
        self.check_fitted()
        x = as_frame(X, self.feature_names_)
        y = as_targets(y, len(x))
        logs = source_logs(self.sources_, x, list(self.targets_))
        predicted = self.predict(x, ood="none", source_log=logs)
        scores: dict[str, dict[str, Any]] = {}
        for target in self.targets_:
            scored = score_target(y, predicted, TARGETS[target])
            if scored is None:
                continue
            scores[target], truth, keep = scored
            raw = np.exp(logs[target][keep])
            scores[target]["sources_unadapted"] = [
                regression_metrics(truth[keep], raw[:, i]) for i in range(len(self.sources_))
            ]
        return scores

    # -- persistence: the sources copied into sources/<i>, the fits in meta.json ----------------
    def _body(self, folder: Path) -> dict[str, Any]:
        if None in self.source_folders_:
            raise PredictorError("save needs the source predictors' folders: give sources as directories")
        copies = []
        for i, source in enumerate(self.source_folders_):
            copy = folder / "sources" / str(i)
            if copy.resolve() != Path(str(source)).resolve():
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(str(source), copy)
            copies.append(f"sources/{i}")
        fits = {target: fit.save(folder, target) for target, fit in self.targets_.items()}
        params = {k: v for k, v in self.get_params().items() if k != "sources"}
        return {"params": params, "sources": copies, "fits": fits, "unavailable": self.unavailable_}

    @classmethod
    def _from_body(cls, folder: Path, saved: dict[str, Any]) -> Adapted:
        paths = [inside_folder(folder, f"{name}/meta.json").parent for name in saved["sources"]]
        params = dict(saved["params"])
        if "interval" in params:  # the coverage's name in predictors saved before
            params["coverage"] = params.pop("interval")
        model = cls(paths, **params)
        model._load_sources()
        model.unavailable_ = dict(saved["unavailable"])
        model.targets_ = {}
        for target, fit in saved["fits"].items():
            if target not in TARGETS:
                raise PredictorError(f"{folder}: unknown target {target!r} in meta.json")
            model.targets_[target] = _TargetFit.load(folder, fit)
            if len(model.targets_[target].weights) != len(model.sources_):
                raise PredictorError(
                    f"{folder}: {target} has {len(model.targets_[target].weights)} weights "
                    f"for {len(model.sources_)} sources"
                )
        return model

    def describe(self) -> dict[str, Any]:
        """The fitted combination per target, readable: weights by source, the notes."""
        names = [str(f) if f else f"source {i}" for i, f in enumerate(self.source_folders_)]
        return {
            target: {
                "intercept": fit.intercept,
                "weights": dict(zip(names, fit.weights.round(4).tolist(), strict=True)),
                "ridge_alpha": fit.alpha,
                "interval_log_q": fit.interval_q,
                "residual": fit.note,
                "n": fit.n,
            }
            for target, fit in self.targets_.items()
        }


def load_sources(sources: Sequence[str | Path | CascadeBlend]) -> tuple[list[CascadeBlend], list[str | None]]:
    """Source blends from directories (or as given) and the directory each came from (None for an
    object not loaded from one)."""
    blends: list[CascadeBlend] = []
    folders: list[str | None] = []
    for source in sources:
        if isinstance(source, CascadeBlend):
            blends.append(source)
            folders.append(getattr(source, "folder_", None))
            continue
        kind = kind_of(source)
        if kind != CascadeBlend.kind:
            raise PredictorError(f"{source}: a {kind!r} predictor; adapt starts from cascade-blend ones")
        blends.append(CascadeBlend.load(source))
        folders.append(str(source))
    return blends, folders


__all__ = ["Adapted", "load_sources"]
