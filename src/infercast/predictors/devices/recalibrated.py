"""``DeviceAdapted``: a predictor for a device you measured a few networks on, from the nearest
shipped device.

Each shipped Σ cost × work predictor is a candidate source. With k measured networks, the source
is the one whose log predictions explain the measurements best out of sample — the smallest
leave-one-out error of ``log y = a + w · log p_source`` (``w`` pulled towards 1 by a ridge whose
strength is chosen the same way, as ``predict.adapt`` does for trained predictors). The interval
is split-conformal on those leave-one-out residuals. Saved as one JSON file (the source's name and
the fitted numbers): the source is rebuilt from the shipped tables when loaded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.predictors.adapted import ALPHAS, fit_log_weights, loo_log_residuals
from infercast.predictors.errors import PredictorError
from infercast.predictors.intervals import conformal_quantile
from infercast.predictors.physical import PhysicalLatency

KIND = "device-adapted"
META = "meta.json"
# choosing among ~90 sources with one ridge strength: the strength is refined for the winner only
_SCREENING_ALPHA = 1.0


class DeviceAdapted:
    """``fit(x, y)`` on k networks' device features and latencies (ms) picks the nearest of
    ``sources`` (name → fitted ``PhysicalLatency``) and recalibrates it; ``predict`` as the
    shipped predictors (``latency_ms`` with its interval, ``ood``, ``ood_reason``)."""

    def __init__(self, sources: Mapping[str, PhysicalLatency], coverage: float = 0.9) -> None:
        if not sources:
            raise PredictorError("sources: give at least one shipped device predictor")
        if not 0 < coverage < 1:
            raise PredictorError(f"coverage={coverage!r} must lie between 0 and 1")
        self.sources = dict(sources)
        self.coverage = coverage
        self.source_: str | None = None
        self.intercept_ = 0.0
        self.weight_ = 1.0
        self.alpha_ = _SCREENING_ALPHA
        self.interval_q_ = float("nan")
        self.loo_error_: dict[str, float] = {}
        self.n_train_ = 0

    def _log(self, name: str, x: pd.DataFrame) -> np.ndarray:
        return np.log(self.sources[name].predict(x)["latency_ms"].to_numpy())[:, None]

    def fit(
        self, x: pd.DataFrame, y: np.ndarray, source_logs: Mapping[str, np.ndarray] | None = None
    ) -> DeviceAdapted:
        """``source_logs``: each source's log predictions of ``x`` (an (n, 1) column) when the
        caller has them already; computed here otherwise."""
        y = np.asarray(y, dtype=np.float64)
        if len(y) != len(x):
            raise PredictorError(f"{len(x)} networks of features but {len(y)} latencies")
        if len(y) < 3:
            raise PredictorError(f"{len(y)} measured networks: adapting needs 3 or more")
        if not (np.isfinite(y).all() and (y > 0).all()):
            raise PredictorError("latencies must be positive and finite")
        z = np.log(y)
        logs = {name: self._log(name, x) for name in self.sources} if source_logs is None else source_logs
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
        return self

    def predict(self, x: pd.DataFrame) -> pd.DataFrame:
        if self.source_ is None:
            raise PredictorError("DeviceAdapted is not fitted: call fit first")
        source = self.sources[self.source_].predict(x)
        log_latency = self.intercept_ + self.weight_ * np.log(source["latency_ms"].to_numpy())
        latency = np.exp(log_latency)
        return pd.DataFrame(
            {
                "latency_ms": latency,
                "latency_ms_low": latency * np.exp(-self.interval_q_),
                "latency_ms_high": latency * np.exp(self.interval_q_),
                "ood": source["ood"].to_numpy(),
                "ood_reason": source["ood_reason"].to_numpy(),
            },
            index=x.index,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source_,
            "intercept": self.intercept_,
            "weight": self.weight_,
            "alpha": self.alpha_,
            "interval_q": self.interval_q_,
            "n_train": self.n_train_,
            "nearest": sorted(self.loo_error_, key=self.loo_error_.__getitem__)[:5],
        }

    def save(self, folder: str | Path, metadata: dict[str, Any] | None = None) -> Path:
        if self.source_ is None:
            raise PredictorError("DeviceAdapted is not fitted: nothing to save")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        body = {"kind": KIND, "coverage": self.coverage, **self.describe(), "metadata": metadata or {}}
        (folder / META).write_text(json.dumps(body, indent=1))
        return folder

    @classmethod
    def load(cls, folder: str | Path, sources: Mapping[str, PhysicalLatency] | None = None) -> DeviceAdapted:
        """A saved predictor; its source is refitted from the shipped tables unless given."""
        saved = json.loads((Path(folder) / META).read_text())
        if saved.get("kind") != KIND:
            raise PredictorError(f"{folder}: not a device-adapted predictor (kind {saved.get('kind')!r})")
        if sources is None:
            sources = shipped_sources({saved["source"]})
        if saved["source"] not in sources:
            raise PredictorError(
                f"{folder}: its source device {saved['source']!r} is not shipped with this infercast"
            )
        model = cls({saved["source"]: sources[saved["source"]]}, saved["coverage"])
        model.source_ = saved["source"]
        model.intercept_, model.weight_ = saved["intercept"], saved["weight"]
        model.alpha_, model.interval_q_ = saved["alpha"], saved["interval_q"]
        model.n_train_ = saved["n_train"]
        return model


def shipped_sources(names: set[str] | None = None) -> dict[str, PhysicalLatency]:
    """Every shipped Σ cost × work predictor — the phone settings' and the hosts' (about 1 s to
    fit all 91) — or those of ``names``."""
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
