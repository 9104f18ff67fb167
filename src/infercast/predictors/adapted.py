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

Length: one estimator with its selection rule and its self-contained directory format (the
sources are copied in); the per-target fit, the residual model and save / load share ``_TargetFit``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from infercast.predictors.artifact import Described, damaged_as_error, inside_folder, read_meta, write_meta
from infercast.predictors.blend import TARGETS, CascadeBlend
from infercast.predictors.data import settings_columns
from infercast.predictors.errors import PredictorError
from infercast.predictors.intervals import conformal_quantile, put_interval
from infercast.predictors.learners import XGBoostLearner
from infercast.predictors.metrics import SCORE_ORDER, log_r2_score, regression_metrics, score_target

SELECTIONS = ("spread", "random")
ALPHAS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


def _source_inputs(source: CascadeBlend, x: pd.DataFrame) -> pd.DataFrame:
    """``x`` with the platform-setting columns the source was trained with (a 1-thread source
    predicts what its own platform would do, whatever the target's thread count)."""
    own = settings_columns(source.info.platform.settings)
    return x.assign(**{k: v for k, v in own.items() if k in source.feature_names_})


def source_logs(
    sources: Sequence[CascadeBlend], x: pd.DataFrame, targets: Sequence[str]
) -> dict[str, np.ndarray]:
    """Per target, an (n, n_sources) matrix of each source's log prediction; each source's
    cascade runs once for all the targets."""
    out = {target: np.empty((len(x), len(sources))) for target in targets}
    for i, source in enumerate(sources):
        predicted = source.predict(_source_inputs(source, x), ood="none")
        for target in targets:
            values = predicted[TARGETS[target]].to_numpy(dtype=np.float64)
            out[target][:, i] = np.log(np.clip(values, 1e-12, None))
    return out


def source_log_predictions(sources: Sequence[CascadeBlend], x: pd.DataFrame, target: str) -> np.ndarray:
    """An (n, n_sources) matrix of each source's log prediction of ``target``."""
    return source_logs(sources, x, [target])[target]


def select_configs(
    sources: Sequence[CascadeBlend],
    x: pd.DataFrame,
    k: int,
    method: str = "spread",
    seed: int = 0,
    target: str = "latency",
    source_log: np.ndarray | None = None,
) -> np.ndarray:
    """Row positions of the ``k`` configs of ``x`` to measure on the target device.

    ``spread``: greedy k-centre in the sources' standardised log predictions, started at the row
    nearest the median — the chosen configs cover the predicted range evenly, extremes included.
    ``random``: a uniform draw (what the comparison in the benchmark uses as the baseline).
    ``source_log``: the sources' log predictions of ``x``, when the caller has them."""
    if method not in SELECTIONS:
        raise PredictorError(f"selection={method!r}: choose among {', '.join(SELECTIONS)}")
    if not 1 <= k <= len(x):
        raise PredictorError(f"k={k!r}: need 1 ≤ k ≤ {len(x)} (the configs to choose from)")
    if method == "random":
        return np.sort(np.random.default_rng(seed).choice(len(x), k, replace=False))
    points = source_log_predictions(sources, x, target) if source_log is None else np.array(source_log)
    spread = points.std(axis=0)
    points = (points - points.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    chosen = [int(np.argmin(np.linalg.norm(points - np.median(points, axis=0), axis=1)))]
    distance = np.linalg.norm(points - points[chosen[0]], axis=1)
    while len(chosen) < k:
        nxt = int(np.argmax(distance))
        chosen.append(nxt)
        distance = np.minimum(distance, np.linalg.norm(points - points[nxt], axis=1))
    return np.sort(np.asarray(chosen))


def fit_log_weights(p: np.ndarray, z: np.ndarray, alpha: float) -> tuple[float, np.ndarray]:
    """Intercept and non-negative weights of ``z ≈ a + p w`` with ``alpha ‖w − 1/S‖²``."""
    n_sources = p.shape[1]
    prior = np.full(n_sources, 1.0 / n_sources)
    p_mean, z_mean = p.mean(axis=0), z.mean()
    design = np.vstack([p - p_mean, np.sqrt(alpha) * np.eye(n_sources)])
    target = np.concatenate([z - z_mean, np.sqrt(alpha) * prior])
    weights, _ = nnls(design, target)
    return float(z_mean - p_mean @ weights), weights


def loo_log_residuals(p: np.ndarray, z: np.ndarray, alpha: float) -> np.ndarray:
    out = np.empty(len(z))
    for i in range(len(z)):
        keep = np.arange(len(z)) != i
        intercept, weights = fit_log_weights(p[keep], z[keep], alpha)
        out[i] = z[i] - intercept - p[i] @ weights
    return out


class _TargetFit:
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


class Adapted(Described):
    """A target-platform predictor built from source ``CascadeBlend`` predictors and a few target
    measurements. ``fit(X, y)`` with the k measured configs; ``predict`` / ``score`` / ``save`` /
    ``load`` as ``CascadeBlend`` (same output columns), so ``infercast predict`` takes it as is."""

    kind = "adapted"

    def __init__(
        self,
        sources: Sequence[CascadeBlend],
        interval: float = 0.9,
        min_residual: int = 20,
        residual_estimators: int = 100,
        seed: int = 0,
    ) -> None:
        self.sources = list(sources)
        self.interval = interval
        self.min_residual = min_residual
        self.residual_estimators = residual_estimators
        self.seed = seed
        self.fits_: dict[str, _TargetFit] = {}
        self.unavailable_: dict[str, str] = {}
        self.metadata: dict[str, Any] = {}
        self.source_folders: list[str] = []
        if not self.sources:
            raise PredictorError("sources: give at least one source predictor")
        if not 0 < interval < 1:
            raise PredictorError(f"interval={interval!r} must lie strictly between 0 and 1")
        if min_residual < 5:
            raise PredictorError(f"min_residual={min_residual!r} must be at least 5")
        names = self.sources[0].feature_names_
        for i, source in enumerate(self.sources[1:], start=1):
            if source.feature_names_ != names:
                raise PredictorError(f"source {i} uses other feature columns than source 0")

    @property
    def feature_names_(self) -> list[str]:
        return self.sources[0].feature_names_

    @property
    def stages_(self) -> dict[str, _TargetFit]:
        return self.fits_

    def _targets(self) -> list[str]:
        return [t for t in TARGETS if all(t in s.stages_ for s in self.sources)]

    def fit(
        self, x: pd.DataFrame, y: pd.DataFrame, source_log: dict[str, np.ndarray] | None = None
    ) -> Adapted:
        """``source_log``: per target, the sources' log predictions of ``x`` when the caller has
        them already (``source_log_predictions``); computed here otherwise."""
        if len(x) != len(y):
            raise PredictorError(f"X has {len(x)} rows but y has {len(y)}")
        if len(x) < 3:
            raise PredictorError(f"{len(x)} target measurements: adaptation needs 3 or more")
        self.fits_, self.unavailable_ = {}, {}
        given = source_log or {}
        computed = source_logs(self.sources, x, [t for t in self._targets() if t not in given])
        for target in TARGETS:
            column = TARGETS[target]
            if target not in self._targets():
                missing = next(s for s in self.sources if target not in s.stages_)
                self.unavailable_[target] = (
                    f"a source predictor has no {column}: {missing.unavailable_.get(target, 'not trained')}"
                )
                continue
            truth = y[column].to_numpy(dtype=np.float64) if column in y.columns else np.full(len(y), np.nan)
            keep = np.isfinite(truth) & (truth > 0)
            if keep.sum() < 3:
                self.unavailable_[target] = f"only {int(keep.sum())} target measurements of {column}"
                continue
            p = np.asarray(given[target]) if target in given else computed[target]
            self.fits_[target] = self._fit_target(x[keep], p[keep], np.log(truth[keep]))
        if not self.fits_:
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
        interval_q = conformal_quantile(loo, self.interval)  # on leave-one-out residuals
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
        self, x: pd.DataFrame, ood: str = "full", source_log: dict[str, np.ndarray] | None = None
    ) -> pd.DataFrame:
        """As ``CascadeBlend.predict``; ``source_log`` as in ``fit``."""
        if not self.fits_:
            raise PredictorError("the adapted predictor is not fitted")
        out = pd.DataFrame(index=x.index)
        given = source_log or {}
        computed = source_logs(self.sources, x, [t for t in self.fits_ if t not in given])
        for target, column in TARGETS.items():
            fit = self.fits_.get(target)
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
            fit = self.fits_.get("latency") or next(iter(self.fits_.values()))
            judge = self.sources[int(np.argmax(fit.weights))]
            if judge.ood_ is not None:
                inputs = _source_inputs(judge, x)[judge.feature_names_].to_numpy(dtype=np.float64)
                out["ood"], out["ood_reason"] = judge.ood_.check(inputs, ranges_only=ood == "ranges")
        return out

    def score(self, x: pd.DataFrame, y: pd.DataFrame) -> float:
        """One number for model selection: R² of the log target (as ``CascadeBlend.score``)."""
        columns = [TARGETS[t] for t in SCORE_ORDER if t in self.fits_]
        return log_r2_score(y, self.predict(x, ood="none"), columns)

    def evaluate(self, x: pd.DataFrame, y: pd.DataFrame) -> dict[str, dict[str, Any]]:
        """Per target: the adapted predictor's metrics, with each unadapted source's beside them."""
        logs = source_logs(self.sources, x, list(self.fits_))
        predicted = self.predict(x, ood="none", source_log=logs)
        scores: dict[str, dict[str, Any]] = {}
        for target in self.fits_:
            scored = score_target(y, predicted, TARGETS[target])
            if scored is None:
                continue
            scores[target], truth, keep = scored
            raw = np.exp(logs[target][keep])
            scores[target]["sources_unadapted"] = [
                regression_metrics(truth[keep], raw[:, i]) for i in range(len(self.sources))
            ]
        return scores

    # -- persistence --------------------------------------------------------------------------
    def save(self, folder: str | Path, metadata: dict[str, Any] | None = None) -> Path:
        """Write ``folder`` self-contained: each source predictor copied into ``sources/<i>``."""
        if not self.fits_:
            raise PredictorError("the adapted predictor is not fitted")
        if len(self.source_folders) != len(self.sources):
            raise PredictorError(
                "save needs the source predictors' folders (build it with Adapted.from_folders)"
            )
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        copies = []
        for i, source in enumerate(self.source_folders):
            copy = folder / "sources" / str(i)
            if copy.resolve() != Path(source).resolve():
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(source, copy)
            copies.append(f"sources/{i}")
        fits = {}
        for target, fit in self.fits_.items():
            residual_file = None
            if fit.residual is not None:
                residual_file = f"{target}.residual{fit.residual.suffix}"
                fit.residual.save(folder / residual_file)
            fits[target] = {
                "intercept": fit.intercept,
                "weights": fit.weights.tolist(),
                "alpha": fit.alpha,
                "interval_q": fit.interval_q,
                "residual": residual_file,
                "note": fit.note,
                "n": fit.n,
            }
        body = {
            "params": {
                "interval": self.interval,
                "min_residual": self.min_residual,
                "residual_estimators": self.residual_estimators,
                "seed": self.seed,
            },
            "sources": copies,
            "fits": fits,
            "unavailable": self.unavailable_,
        }
        self.metadata = {**self.metadata, **(metadata or {})}
        return write_meta(folder, self.kind, body, self.metadata).parent

    @classmethod
    def from_folders(cls, folders: Sequence[str | Path], **params: Any) -> Adapted:
        """An unfitted ``Adapted`` over the ``CascadeBlend`` directories ``folders``."""
        sources = []
        for folder in folders:
            kind = read_meta(folder).get("kind")
            if kind != "cascade-blend":
                raise PredictorError(f"{folder}: a {kind!r} predictor; adapt starts from cascade-blend ones")
            sources.append(CascadeBlend.load(folder))
        model = cls(sources, **params)
        model.source_folders = [str(f) for f in folders]
        return model

    @classmethod
    def load(cls, folder: str | Path) -> Adapted:
        folder = Path(folder)
        saved = read_meta(
            folder, cls.kind, {"params": dict, "sources": list, "fits": dict, "unavailable": dict}
        )
        with damaged_as_error(folder):
            return cls._from_meta(folder, saved)

    @classmethod
    def _from_meta(cls, folder: Path, saved: dict[str, Any]) -> Adapted:
        paths = []
        for name in saved["sources"]:
            meta = inside_folder(folder, f"{name}/meta.json")
            paths.append(meta.parent)
        model = cls.from_folders(paths, **saved["params"])
        model.unavailable_ = dict(saved["unavailable"])
        body_keys = ("params", "sources", "fits", "unavailable")
        model.metadata = {k: v for k, v in saved.items() if k not in body_keys}
        for target, fit in saved["fits"].items():
            if target not in TARGETS:
                raise PredictorError(f"{folder}: unknown target {target!r} in meta.json")
            residual = fit.get("residual")
            model.fits_[target] = _TargetFit(
                intercept=float(fit["intercept"]),
                weights=np.asarray(fit["weights"], dtype=np.float64),
                alpha=float(fit["alpha"]),
                interval_q=float(fit["interval_q"]),
                residual=XGBoostLearner.load(inside_folder(folder, residual)) if residual else None,
                note=str(fit.get("note", "")),
                n=int(fit.get("n", 0)),
            )
            if len(model.fits_[target].weights) != len(model.sources):
                raise PredictorError(
                    f"{folder}: {target} has {len(model.fits_[target].weights)} weights "
                    f"for {len(model.sources)} sources"
                )
        return model

    def describe(self) -> dict[str, Any]:
        """The fitted combination per target, readable: weights by source, the notes."""
        return {
            target: {
                "intercept": fit.intercept,
                "weights": dict(zip(self.source_folders, fit.weights.round(4).tolist(), strict=True)),
                "ridge_alpha": fit.alpha,
                "interval_log_q": fit.interval_q,
                "residual": fit.note,
                "n": fit.n,
            }
            for target, fit in self.fits_.items()
        }


__all__ = ["SELECTIONS", "Adapted", "select_configs", "source_log_predictions", "source_logs"]
