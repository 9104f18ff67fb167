"""``DeviceAdapted``: a predictor for a device you measured a few networks on, from the nearest
shipped device.

Each shipped Σ cost × work predictor is a candidate source. With k measured networks, the source
is the one whose log predictions explain the measurements best out of sample — the smallest
leave-one-out error of ``log y = a + w · log p_source`` (``w`` pulled towards 1 by a ridge whose
strength is chosen the same way, as ``predictors.adapted`` does for trained predictors, one factor
with the slope held at 1 among the choices). The interval is split-conformal on those
leave-one-out residuals. Saved as meta.json alone (the
source's name and the fitted numbers): the source is rebuilt from the shipped tables when loaded.

From six measured networks on, the source is instead recalibrated per kind of work: its prediction
is Σ cost × work, so each column's part (a timm setting's FLOPs of each group of operators, their
bytes moved, the kernels launched, the steps; a phone's or a host's FLOPs and bytes of each kind of
kernel) gets its own factor, pulled towards one common factor by a ridge whose strength
leave-one-out chooses — the measurements say how far each kind may depart from the others. A new
device speeds convolutions, matrix products and each kind of memory traffic up by different
ratios. Three coarser kinds (all arithmetic, all memory traffic, launches: ``timm_bench.KINDS``)
could not say it: fitted on every training network of a new GPU they left the held-out families
as far off as one factor did (``benchmarks/timm_adapt.py``). Keeping one factor wherever its
leave-one-out error was lower than the kinds' never did better there and up to 1.1 points worse;
on the phones (``benchmarks/device_adapt.py``) the kinds gain in every group at k = 10 and 20.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from infercast.files import FileError, read_json
from infercast.graph import Graph
from infercast.predictors.artifact import checked_numbers
from infercast.predictors.base import Predictor, as_frame
from infercast.predictors.errors import PredictorError
from infercast.predictors.intervals import conformal_quantile
from infercast.predictors.metrics import log_r2_score, regression_metrics
from infercast.predictors.physical import PhysicalLatency
from infercast.predictors.sources import ALPHAS, fit_log_weights, loo_log_residuals

# choosing among ~90 sources with one ridge strength: the strength is refined for the winner only
_SCREENING_ALPHA = 1.0
# the ridge strengths of the slope's pull towards 1, the last so strong that it holds it there: one
# factor alone, where a slope fitted on a few networks predicts them worse out of sample
_ALPHAS = (*ALPHAS, 1e9)
# ridge strengths of the per-kind factors' pull towards one common factor (relative-error units)
_KIND_ALPHAS = (0.01, 0.1, 1.0, 10.0)
# fewer measured networks than this leave too little to tell per-kind factors from one
_KIND_MIN_NETWORKS = 6


class DeviceAdapted(Predictor):
    """``fit(X, y)`` on k networks' device features and latencies (ms) picks the nearest of
    ``sources`` (name → fitted ``PhysicalLatency``; by default every shipped Σ cost × work
    predictor) and recalibrates it — with ``per_kind``, per kind of work where six networks or
    more are measured; ``predict`` as the shipped predictors (``latency_ms``
    with its interval, ``ood``, ``ood_reason``)."""

    kind: ClassVar[str] = "device-adapted"
    _REQUIRED: ClassVar[dict[str, type | tuple[type, ...]]] = {"source": str, "intercept": (int, float)}
    _BODY_KEYS: ClassVar[tuple[str, ...]] = (
        "coverage",
        "weight",
        "alpha",
        "interval_q",
        "n_train",
        "nearest",
        "metadata",
        "kind_factors",
        "per_kind",
    )

    def __init__(
        self,
        sources: Mapping[str, PhysicalLatency] | None = None,
        coverage: float = 0.9,
        per_kind: bool = True,
    ) -> None:
        self.sources = sources
        self.coverage = coverage
        self.per_kind = per_kind

    # learned in fit (or read by load)
    sources_: dict[str, PhysicalLatency]
    source_: str
    intercept_: float
    weight_: float
    alpha_: float
    interval_q_: float
    loo_error_: dict[str, float]
    n_train_: int
    metadata_: dict[str, Any]
    kind_factors_: dict[str, float] | None

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "source_")

    def fit(self, X: Any, y: Any, source_logs: Mapping[str, np.ndarray] | None = None) -> DeviceAdapted:
        """``source_logs``: each source's log predictions of ``X`` (an (n, 1) column) when the
        caller has them already; computed here otherwise."""
        if self.sources is not None and not len(self.sources):
            raise PredictorError("sources: give at least one shipped device predictor")
        if not 0 < self.coverage < 1:
            raise PredictorError(f"coverage={self.coverage!r} must lie between 0 and 1")
        self.sources_ = dict(self.sources) if self.sources is not None else shipped_sources()
        x = as_frame(X, next(iter(self.sources_.values())).columns_)
        y = np.asarray(y, dtype=np.float64)
        if len(y) != len(x):
            raise PredictorError(f"{len(x)} networks of features but {len(y)} latencies")
        if len(y) < 3:
            raise PredictorError(f"{len(y)} measured networks: adapting needs 3 or more")
        if not (np.isfinite(y).all() and (y > 0).all()):
            raise PredictorError("latencies must be positive and finite")
        z = np.log(y)
        logs = source_logs if source_logs is not None else {n: self._log(n, x) for n in self.sources_}
        self.loo_error_ = {
            name: float(np.mean(loo_log_residuals(p, z, _SCREENING_ALPHA) ** 2)) for name, p in logs.items()
        }
        self.source_ = min(self.loo_error_, key=self.loo_error_.__getitem__)
        p = logs[self.source_]
        errors = {alpha: float(np.mean(loo_log_residuals(p, z, alpha) ** 2)) for alpha in _ALPHAS}
        self.alpha_ = min(errors, key=errors.__getitem__)
        self.intercept_, weights = fit_log_weights(p, z, self.alpha_)
        self.weight_ = float(weights[0])
        residuals = loo_log_residuals(p, z, self.alpha_)
        self.kind_factors_ = None
        kinds = work_kinds(self.sources_[self.source_])
        if self.per_kind and kinds and len(y) >= _KIND_MIN_NETWORKS:
            parts = kind_parts(self.sources_[self.source_], x, kinds)
            alpha, residuals = min(
                ((a, loo_kind_residuals(parts, y, a)) for a in _KIND_ALPHAS),
                key=lambda pair: float(np.mean(pair[1] ** 2)),
            )
            self.kind_factors_ = dict(zip(kinds, fit_kind_factors(parts, y, alpha).tolist(), strict=True))
        self.interval_q_ = conformal_quantile(residuals, self.coverage)
        self.n_train_ = len(y)
        self.metadata_ = {}
        return self

    def _log(self, name: str, x: pd.DataFrame) -> np.ndarray:
        return np.log(self.sources_[name].predict(x)["latency_ms"].to_numpy())[:, None]

    def predict(self, X: Any) -> pd.DataFrame:
        self.check_fitted()
        model = self.sources_[self.source_]
        x = as_frame(X, model.columns_)
        return self._recalibrated(model.predict(x), x)

    def predict_graphs(self, graphs: list[Graph]) -> pd.DataFrame:
        """Each captured network's latency: from the features its source reads, times the batch
        where the source predicts one sample."""
        x, per_graph = graph_features(self.source_, graphs)
        out = self.predict(x).reset_index(drop=True)
        for column in ("latency_ms", "latency_ms_low", "latency_ms_high"):
            out[column] = out[column].to_numpy() * per_graph
        return out

    def _recalibrated(self, source: pd.DataFrame, x: pd.DataFrame) -> pd.DataFrame:
        """The source's predictions, recalibrated; its ``ood`` verdicts as they are."""
        if self.kind_factors_ is not None:
            parts = kind_parts(self.sources_[self.source_], x, tuple(self.kind_factors_))
            latency = np.clip(parts @ np.array(list(self.kind_factors_.values())), 1e-9, None)
        else:
            latency = np.exp(self.intercept_ + self.weight_ * np.log(source["latency_ms"].to_numpy()))
        return pd.DataFrame(
            {
                "latency_ms": latency,
                "latency_ms_low": latency * np.exp(-self.interval_q_),
                "latency_ms_high": latency * np.exp(self.interval_q_),
                "ood": source["ood"].to_numpy(),
                "ood_reason": source["ood_reason"].to_numpy(),
            },
            index=source.index,
        )

    def score(self, X: Any, y: Any) -> float:
        """R² of log latency on networks with measured latencies ``y``."""
        truth = pd.DataFrame({"latency_ms": np.asarray(y, dtype=np.float64)})
        return log_r2_score(truth, self.predict(X).reset_index(drop=True), ["latency_ms"])

    def evaluate(self, X: Any, y: Any) -> dict[str, Any]:
        """The recalibrated predictor's metrics, with the source's unadapted beside them."""
        self.check_fitted()
        model = self.sources_[self.source_]
        x = as_frame(X, model.columns_)
        source = model.predict(x)
        truth, predicted = np.asarray(y, dtype=np.float64), self._recalibrated(source, x)
        scores = regression_metrics(
            truth,
            predicted["latency_ms"].to_numpy(),
            predicted["latency_ms_low"].to_numpy(),
            predicted["latency_ms_high"].to_numpy(),
        )
        unadapted = source["latency_ms"].to_numpy()
        scores["baselines"] = {f"{self.source_} unadapted": regression_metrics(truth, unadapted)}
        return scores

    def describe(self) -> dict[str, Any]:
        self.check_fitted()
        return {
            "source": self.source_,
            "intercept": self.intercept_,
            "weight": self.weight_,
            "alpha": self.alpha_,
            "interval_q": self.interval_q_,
            "n_train": self.n_train_,
            "nearest": sorted(self.loo_error_, key=self.loo_error_.__getitem__)[:5],
            "kind_factors": self.kind_factors_,
        }

    def _body(self, folder: Path) -> dict[str, Any]:
        return {"coverage": self.coverage, "per_kind": self.per_kind, **self.describe()}

    @classmethod
    def load(cls, folder: str | Path, sources: Mapping[str, PhysicalLatency] | None = None) -> DeviceAdapted:
        """A saved predictor; its source is taken from ``sources``, else refitted from the shipped
        tables. A directory written before meta.json had a format (the numbers alone) loads too."""
        path = Path(folder) / "meta.json"
        try:
            saved = read_json(path, "meta.json")
        except FileError as error:
            raise PredictorError(str(error)) from None
        if isinstance(saved, dict) and "format" not in saved and saved.get("kind") == cls.kind:
            model = cls._from_body(Path(folder), saved, sources)
            model.metadata_ = dict(saved.get("metadata") or {})
            return model
        return super().load(folder, sources=sources)  # type: ignore[return-value]

    @classmethod
    def _from_body(
        cls, folder: Path, saved: dict[str, Any], sources: Mapping[str, PhysicalLatency] | None = None
    ) -> DeviceAdapted:
        source = str(saved["source"])
        sources = dict(sources) if sources is not None else shipped_sources({source})
        if source not in sources:
            raise PredictorError(f"{folder}: its source device {source!r} is not shipped with this infercast")
        model = cls(sources, float(saved["coverage"]), bool(saved.get("per_kind", True)))
        model.sources_, model.source_ = sources, source
        where = f"{folder / 'meta.json'}"
        intercept, weight, alpha = checked_numbers(
            [saved["intercept"], saved["weight"], saved["alpha"]], where
        )
        model.intercept_, model.weight_, model.alpha_ = float(intercept), float(weight), float(alpha)
        model.interval_q_ = float(checked_numbers(saved["interval_q"], f"{where}: interval_q", lowest=0.0))
        model.n_train_ = int(saved["n_train"])
        model.loo_error_ = {name: float(i) for i, name in enumerate(saved.get("nearest", [source]))}
        factors = saved.get("kind_factors")
        model.kind_factors_ = None
        if factors is not None:
            values = checked_numbers(list(factors.values()), f"{where}: kind_factors", lowest=0.0)
            known = {*sources[source].columns_, *_coarse_kinds()}
            if unknown := sorted(set(factors) - known):
                raise PredictorError(f"{where}: kind_factors: {source} has no kind of work {unknown[0]!r}")
            model.kind_factors_ = dict(zip(factors, values.tolist(), strict=True))
        return model


def shipped_sources(names: set[str] | None = None) -> dict[str, PhysicalLatency]:
    """Every shipped Σ cost × work predictor of a network's device features — the phone
    settings' and the hosts' — or those of ``names``, which may name timm's settings too (they
    read another work: ``timm_sources``)."""
    from infercast.predictors.devices import hosts, timm_bench, usc

    modules = (usc, hosts) if names is None else (usc, hosts, timm_bench)
    return {
        name: module.physical(name)
        for module in modules
        for name in module.names()
        if names is None or name in names
    }


def timm_sources(processor: str | None = None) -> dict[str, PhysicalLatency]:
    """timm's settings (``processor``: ``"gpu"`` or ``"cpu"`` for those of that kind alone),
    whose Σ cost × work reads a network's eager work per sample."""
    from infercast.predictors.devices import timm_bench

    return {
        name: timm_bench.physical(name)
        for name in timm_bench.names()
        if processor is None or timm_bench.SETTINGS[name].processor == processor
    }


def graph_features(source: str, graphs: list[Graph]) -> tuple[pd.DataFrame, np.ndarray]:
    """The features ``source`` reads of each graph, and what turns its prediction into the
    graph's latency: the batch for a timm setting (it predicts one sample), else 1."""
    from infercast.predictors.devices import timm_bench
    from infercast.predictors.devices.features import device_feature_frame

    if source in timm_bench.SETTINGS:
        return timm_bench.graph_features(graphs)
    return device_feature_frame(graphs), np.ones(len(graphs))


def work_kinds(model: PhysicalLatency) -> tuple[str, ...]:
    """The kinds of work a source's costs split into, each recalibrated on its own: the columns
    of its Σ cost × work that cost something."""
    return tuple(column for column, cost in zip(model.columns_, model.costs_, strict=True) if cost > 0)


def kind_parts(model: PhysicalLatency, x: pd.DataFrame, kinds: tuple[str, ...]) -> np.ndarray:
    """Each network's predicted time split by kind of work (n × kinds): Σ cost × work over the
    columns of each kind — a column, or one of ``timm_bench.KINDS``' coarser kinds, which adapted
    predictors saved before the columns were recalibrated one by one name."""
    from infercast.predictors.devices import timm_bench

    timed = x[list(model.columns_)].to_numpy(dtype=np.float64) * model.costs_
    columns = np.array(model.columns_)
    of = np.array([timm_bench.KINDS.get(c, c) for c in model.columns_])
    return np.column_stack([timed[:, (columns == kind) | (of == kind)].sum(axis=1) for kind in kinds])


def _coarse_kinds() -> set[str]:
    from infercast.predictors.devices import timm_bench

    return set(timm_bench.KINDS.values())


def fit_kind_factors(parts: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """Non-negative factors of each kind minimising Σ ((parts · f − y) / y)² + alpha ‖f − c‖²,
    c the one common factor (the geometric mean ratio of measured to predicted)."""
    from scipy.optimize import nnls

    common = float(np.exp(np.mean(np.log(y / np.clip(parts.sum(axis=1), 1e-12, None)))))
    n_kinds = parts.shape[1]
    design = np.vstack([parts / y[:, None], np.sqrt(alpha) * np.eye(n_kinds)])
    target = np.concatenate([np.ones(len(y)), np.full(n_kinds, np.sqrt(alpha) * common)])
    factors, _ = nnls(design, target)
    return factors


def loo_kind_residuals(parts: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    out = np.empty(len(y))
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        predicted = parts[i] @ fit_kind_factors(parts[keep], y[keep], alpha)
        out[i] = np.log(y[i] / max(predicted, 1e-12))
    return out


def same_runtime(backend: str) -> set[str]:
    """The shipped hosts measured with ``backend`` (an infercast backend such as ``ort-cpu``).

    A platform of a runtime a host ran adapts from those hosts alone: on another EPYC measured
    with ``ort-cpu``, the leave-one-out choice among all 91 sources fell on phone settings with
    k = 5 or 10 (39.9 / 15.1 % median error on 36 real networks) where the host gave 12.4 / 6.9 %
    (benchmarks/host_adapt.py, RESULTS.md); a few points cannot tell 91 candidates apart, what
    ran the kernels can."""
    from infercast.predictors.devices import hosts

    return {name for name, host in hosts.hosts().items() if host["backend"] == backend}
