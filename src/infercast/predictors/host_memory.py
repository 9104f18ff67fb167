"""Peak memory of an ONNX Runtime CPU session, from the graph (issue 46, item 5).

What a graph decides — its weights as held and its arena (``ort_memory``) and the input it is fed
— is worked out by ONNX Runtime's rules; what it does not is each kernel's own state and the
session's fixed cost. ``HostMemory`` fits that rest as a line in the number of kernels, at the
median and at the 5th and 95th percentiles (quantile regression), on networks measured on a host;
the percentile lines are the 90 % interval. The fitted lines ship as JSON
(``data/ort_cpu_memory.json``, built by ``python tools/memory_fit.py``), with the machine and
runtime they were measured on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from infercast.graph import Graph
from infercast.predictors.errors import PredictorError
from infercast.predictors.fusion import FusionRules, rules_for
from infercast.predictors.ort_memory import memory_terms
from infercast.units import BYTES_PER_MB

# the interval's percentiles, and the median between them
QUANTILES = {"low": 0.05, "median": 0.5, "high": 0.95}
TERMS = ("weights", "arena", "input", "kernels")
FORMAT = "infercast-host-memory-1"


def ort_rules(nchwc_block: int) -> FusionRules:
    """The kernels ONNX Runtime's CPU provider makes at level ``all`` on a machine whose blocked
    layout is ``nchwc_block`` channels wide (0: none)."""
    return rules_for("ort-cpu", {"opt_level": "all"}, {"nchwc_block": nchwc_block})


def memory_features(graphs: Sequence[Graph], nchwc_block: int) -> pd.DataFrame:
    """Per graph: ``weights``, ``arena`` and ``input`` bytes and its number of ``kernels``."""
    rules = ort_rules(nchwc_block)
    rows = [{**memory_terms(graph, rules), "input": graph.input_bytes} for graph in graphs]
    return pd.DataFrame(rows, columns=list(TERMS))


class HostMemory:
    """Peak memory (bytes) = weights + arena + input + the rest, the rest a line in the number of
    kernels fitted at the median and at the interval's percentiles (module docstring)."""

    def __init__(self, alpha: float = 0.0) -> None:
        self.alpha = alpha

    def _checked(self, features: Any) -> pd.DataFrame:
        frame = pd.DataFrame(features)
        missing = [term for term in TERMS if term not in frame]
        if missing:
            raise PredictorError(f"memory features lack {', '.join(missing)} (memory_features makes them)")
        return frame

    def fit(self, features: Any, peak_bytes: Any) -> HostMemory:
        from sklearn.linear_model import QuantileRegressor

        if self.alpha < 0:
            raise PredictorError(f"alpha={self.alpha!r}: the penalty cannot be negative")
        frame = self._checked(features)
        peak = np.asarray(peak_bytes, dtype=float)
        if len(peak) != len(frame) or len(frame) < 3:
            raise PredictorError(f"{len(frame)} networks and {len(peak)} peaks: need as many, at least 3")
        if not np.all(np.isfinite(peak)) or np.any(peak <= 0):
            raise PredictorError("peak_bytes holds a value that is not a positive number")
        rest = (peak - frame[["weights", "arena", "input"]].sum(axis=1).to_numpy()) / BYTES_PER_MB
        kernels = frame[["kernels"]].to_numpy(dtype=float)
        self.lines_ = {}
        for name, quantile in QUANTILES.items():
            model = QuantileRegressor(quantile=quantile, alpha=self.alpha, solver="highs").fit(kernels, rest)
            self.lines_[name] = [float(model.intercept_), float(model.coef_[0])]
        self.n_train_ = len(frame)
        self.provenance_: dict[str, Any] = {}
        return self

    def predict(self, features: Any) -> pd.DataFrame:
        """``peak_memory_mb`` with ``peak_memory_mb_low`` / ``_high`` (the 90 % interval)."""
        if not hasattr(self, "lines_"):
            raise PredictorError("HostMemory is not fitted: call fit, or load a fitted one")
        frame = self._checked(features)
        known = frame[["weights", "arena", "input"]].sum(axis=1).to_numpy() / BYTES_PER_MB
        kernels = frame["kernels"].to_numpy(dtype=float)
        rest = {name: intercept + slope * kernels for name, (intercept, slope) in self.lines_.items()}
        middle = known + rest["median"]
        # the percentile lines may cross far from the kernel counts they were fitted on
        return pd.DataFrame(
            {
                "peak_memory_mb": middle,
                "peak_memory_mb_low": np.minimum(known + rest["low"], middle),
                "peak_memory_mb_high": np.maximum(known + rest["high"], middle),
            }
        )

    def score(self, features: Any, peak_bytes: Any) -> float:
        """R² of the predicted peak (MB) against ``peak_bytes``."""
        from sklearn.metrics import r2_score

        return float(
            r2_score(
                np.asarray(peak_bytes, dtype=float) / BYTES_PER_MB, self.predict(features)["peak_memory_mb"]
            )
        )

    def to_json(self, provenance: dict[str, Any]) -> str:
        return json.dumps(
            {"format": FORMAT, "lines_mb": self.lines_, "n_train": self.n_train_, **provenance}, indent=1
        )

    @classmethod
    def from_json(cls, text: str) -> HostMemory:
        saved = json.loads(text)
        if saved.get("format") != FORMAT:
            raise PredictorError(f"not a host memory model ({FORMAT}): format {saved.get('format')!r}")
        model = cls()
        model.lines_ = {name: [float(v) for v in saved["lines_mb"][name]] for name in QUANTILES}
        model.n_train_ = int(saved["n_train"])
        model.provenance_ = {k: v for k, v in saved.items() if k not in ("format", "lines_mb", "n_train")}
        return model


__all__ = ["HostMemory", "memory_features", "ort_rules"]
