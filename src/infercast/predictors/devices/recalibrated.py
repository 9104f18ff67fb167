"""``DeviceAdapted``: a predictor for a device you measured a few networks on, from the nearest
shipped device.

Each shipped Σ cost × work predictor is a candidate source. With k measured networks, the source
is the one whose log predictions explain the measurements best out of sample — the smallest
leave-one-out error of ``log y = a + w · log p_source`` (``w`` pulled towards 1 by a ridge whose
strength is chosen the same way, as ``predictors.adapted`` does for trained predictors). The
interval is split-conformal on those leave-one-out residuals. Saved as meta.json alone (the
source's name and the fitted numbers): the source is rebuilt from the shipped tables when loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from infercast.files import FileError, read_json
from infercast.predictors.artifact import checked_numbers
from infercast.predictors.base import Predictor, as_frame
from infercast.predictors.errors import PredictorError
from infercast.predictors.intervals import conformal_quantile
from infercast.predictors.metrics import log_r2_score, regression_metrics
from infercast.predictors.physical import PhysicalLatency
from infercast.predictors.sources import ALPHAS, fit_log_weights, loo_log_residuals

# choosing among ~90 sources with one ridge strength: the strength is refined for the winner only
_SCREENING_ALPHA = 1.0


class DeviceAdapted(Predictor):
    """``fit(X, y)`` on k networks' device features and latencies (ms) picks the nearest of
    ``sources`` (name → fitted ``PhysicalLatency``; by default every shipped Σ cost × work
    predictor) and recalibrates it; ``predict`` as the shipped predictors (``latency_ms`` with
    its interval, ``ood``, ``ood_reason``)."""

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
    )

    def __init__(self, sources: Mapping[str, PhysicalLatency] | None = None, coverage: float = 0.9) -> None:
        self.sources = sources
        self.coverage = coverage

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
        errors = {alpha: float(np.mean(loo_log_residuals(p, z, alpha) ** 2)) for alpha in ALPHAS}
        self.alpha_ = min(errors, key=errors.__getitem__)
        self.intercept_, weights = fit_log_weights(p, z, self.alpha_)
        self.weight_ = float(weights[0])
        self.interval_q_ = conformal_quantile(loo_log_residuals(p, z, self.alpha_), self.coverage)
        self.n_train_ = len(y)
        self.metadata_ = {}
        return self

    def _log(self, name: str, x: pd.DataFrame) -> np.ndarray:
        return np.log(self.sources_[name].predict(x)["latency_ms"].to_numpy())[:, None]

    def predict(self, X: Any) -> pd.DataFrame:
        self.check_fitted()
        model = self.sources_[self.source_]
        x = as_frame(X, model.columns_)
        return self._recalibrated(model.predict(x))

    def _recalibrated(self, source: pd.DataFrame) -> pd.DataFrame:
        """The source's predictions, recalibrated; its ``ood`` verdicts as they are."""
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
        source = model.predict(as_frame(X, model.columns_))
        truth, predicted = np.asarray(y, dtype=np.float64), self._recalibrated(source)
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
        }

    def _body(self, folder: Path) -> dict[str, Any]:
        return {"coverage": self.coverage, **self.describe()}

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
        model = cls(sources, float(saved["coverage"]))
        model.sources_, model.source_ = sources, source
        where = f"{folder / 'meta.json'}"
        intercept, weight, alpha = checked_numbers(
            [saved["intercept"], saved["weight"], saved["alpha"]], where
        )
        model.intercept_, model.weight_, model.alpha_ = float(intercept), float(weight), float(alpha)
        model.interval_q_ = float(checked_numbers(saved["interval_q"], f"{where}: interval_q", lowest=0.0))
        model.n_train_ = int(saved["n_train"])
        model.loo_error_ = {name: float(i) for i, name in enumerate(saved.get("nearest", [source]))}
        return model


def shipped_sources(names: set[str] | None = None) -> dict[str, PhysicalLatency]:
    """Every shipped Σ cost × work predictor — the phone settings' and the hosts' — or those of
    ``names``."""
    from infercast.predictors.devices import hosts, usc

    return {
        name: module.physical(name)
        for module in (usc, hosts)
        for name in module.names()
        if names is None or name in names
    }


def same_runtime(backend: str) -> set[str]:
    """The shipped hosts measured with ``backend`` (an infercast backend such as ``ort-cpu``).

    A platform of a runtime a host ran adapts from those hosts alone: on another EPYC measured
    with ``ort-cpu``, the leave-one-out choice among all 91 sources fell on phone settings with
    k = 5 or 10 (39.9 / 15.1 % median error on 36 real networks) where the host gave 12.4 / 6.9 %
    (benchmarks/host_adapt.py, RESULTS.md); a few points cannot tell 91 candidates apart, what
    ran the kernels can."""
    from infercast.predictors.devices import hosts

    return {name for name, host in hosts.hosts().items() if host["backend"] == backend}
