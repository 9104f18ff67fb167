"""The one contract every predictor kind follows, the registry of kinds, and loading by kind.

A predictor is a scikit-learn estimator:

- ``__init__`` stores its parameters and nothing else; ``fit`` validates them (naming the bad
  value) and sets what it learns, each name ending in ``_`` (``metadata_`` too: meta.json's
  free-form part, the platform and the training); ``get_params`` / ``set_params`` / ``clone``
  work, and so do ``cross_val_score`` and ``GridSearchCV``;
- ``fit`` and ``predict`` take frames or array-likes (``as_frame``);
- ``score(X, y)`` is one float (R² of the log target: latency first), ``evaluate(X, y)`` the dict of
  metrics (``metrics.regression_metrics``);
- ``save(folder, metadata)`` writes a directory of code-free files and meta.json (its ``kind``);
  ``load(folder)`` reads it back; ``predictors.load(folder)`` loads any kind through ``KINDS``.

A new kind is one module with a ``Predictor`` subclass and one line in ``KINDS``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from infercast.files import FileError, read_json, replaced_directory
from infercast.predictors.artifact import PredictorInfo, damaged_as_error, read_meta, write_meta
from infercast.predictors.data import TARGETS, as_targets
from infercast.predictors.errors import PredictorError
from infercast.predictors.metrics import SCORE_ORDER, log_r2_score

# kind (meta.json's "kind") → "module:class": modules are imported when a directory of that kind
# is loaded, so loading a phone's Σ cost × work predictor never imports the blend's learners
KINDS: dict[str, str] = {
    "cascade-blend": "infercast.predictors.blend:CascadeBlend",
    "opwise": "infercast.predictors.opwise:OpWise",
    "adapted": "infercast.predictors.adapted:Adapted",
    "physical-latency": "infercast.predictors.physical:PhysicalLatency",
    "device-adapted": "infercast.predictors.devices.recalibrated:DeviceAdapted",
    "flops-proportional": "infercast.predictors.baselines:FlopsProportional",
    "log-linear": "infercast.predictors.baselines:LogLinear",
}


def kind_class(kind: str) -> type[Predictor]:
    """The class of a registered kind."""
    if kind not in KINDS:
        raise PredictorError(f"unknown predictor kind {kind!r}; infercast knows {', '.join(KINDS)}")
    module, _, name = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


def kind_of(folder: str | Path) -> str:
    """The kind meta.json names (a directory written before meta.json had a format is read too)."""
    path = Path(folder) / "meta.json"
    try:
        kind = read_json(path, "meta.json").get("kind")
    except (FileError, AttributeError):
        return str(read_meta(folder).get("kind"))  # the reason, checked and worded
    if not isinstance(kind, str):
        raise PredictorError(f"{path}: names no predictor kind")
    return kind


def load(folder: str | Path) -> Predictor:
    """Any predictor directory, by the kind its meta.json names."""
    return kind_class(kind_of(folder)).load(folder)


def as_frame(x: Any, columns: Sequence[str], what: str = "X") -> pd.DataFrame:
    """``x`` as a frame: a frame as it is; a mapping or records as their columns; a 2-d array-like
    as ``columns`` in that order (its width must match)."""
    if isinstance(x, pd.DataFrame):
        return x
    if isinstance(x, dict) or (isinstance(x, list) and x and isinstance(x[0], dict)):
        return pd.DataFrame(x)
    array = np.asarray(x, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != len(columns):
        raise PredictorError(
            f"{what} has shape {array.shape}: an array needs {len(columns)} columns "
            f"({', '.join(columns[:4])}, …), or give a frame with named columns"
        )
    return pd.DataFrame(array, columns=list(columns))


class Predictor:
    """The base of every predictor kind (see the module's docstring for the contract).

    ``get_params`` and ``set_params`` read the parameters off ``__init__``'s signature, as
    scikit-learn's ``BaseEstimator`` does; it is not the base class because importing it loads
    SciPy, which a phone's prediction (a ``PhysicalLatency``) would pay for and never use."""

    kind: ClassVar[str]

    # -- parameters (scikit-learn's estimator protocol) ----------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]  # after self
        return [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> Predictor:
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"{name!r} is not a parameter of {type(self).__name__}; it has {valid}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if not _same(v, defaults.get(k))]
        return f"{type(self).__name__}({', '.join(changed)})"

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import RegressorTags, Tags, TargetTags

        return Tags(
            estimator_type="regressor", target_tags=TargetTags(required=True), regressor_tags=RegressorTags()
        )

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "metadata_")

    # -- what every kind implements -------------------------------------------------------------
    def fit(self, X: Any, y: Any, **fit_params: Any) -> Predictor:
        raise NotImplementedError

    def predict(self, X: Any) -> Any:
        raise NotImplementedError

    def evaluate(self, X: Any, y: Any) -> dict[str, Any]:
        raise NotImplementedError

    def score(self, X: Any, y: Any) -> float:
        raise NotImplementedError

    def _body(self, folder: Path) -> dict[str, Any]:
        """Write this predictor's model files into ``folder``; return meta.json's body."""
        raise NotImplementedError

    @classmethod
    def _from_body(cls, folder: Path, saved: dict[str, Any], **options: Any) -> Predictor:
        """The fitted predictor meta.json (``saved``, already checked against ``_REQUIRED``)
        describes; ``options`` are ``load``'s."""
        raise NotImplementedError

    # meta.json's keys a directory of this kind must have, with their JSON types, and every key
    # its ``_body`` may write (the rest of meta.json is ``metadata_``)
    _REQUIRED: ClassVar[dict[str, type | tuple[type, ...]]] = {}
    _BODY_KEYS: ClassVar[tuple[str, ...]] = ()

    # -- shared ---------------------------------------------------------------------------------
    @property
    def info(self) -> PredictorInfo:
        """The typed view of ``metadata_``: the platform, the latency statistic, the training."""
        return PredictorInfo.from_metadata(getattr(self, "metadata_", {}))

    def check_fitted(self) -> None:
        if not self.__sklearn_is_fitted__():
            raise PredictorError(
                f"this {type(self).__name__} is not fitted: call fit() or load a predictor directory"
            )

    def save(self, folder: str | Path, metadata: dict[str, Any] | None = None) -> Path:
        """Write the predictor directory ``folder``: its model files and meta.json, with
        ``metadata`` (the platform, the training…) kept beside what it learned. The directory is
        written whole or not at all (``files.replaced_directory``): a predictor already there is
        replaced, a process killed while saving leaves it as it was."""
        self.check_fitted()
        folder = Path(folder)
        with replaced_directory(folder) as partial:
            self.write_into(partial, metadata)
        return folder

    def write_into(self, folder: str | Path, metadata: dict[str, Any] | None = None) -> Path:
        """``save`` into the existing directory ``folder`` as it is, for a caller that writes a
        directory of several predictors whole (``train``)."""
        self.check_fitted()
        folder = Path(folder)
        body = self._body(folder)
        self.metadata_ = {**self.metadata_, **(metadata or {})}
        return write_meta(folder, self.kind, body, self.metadata_).parent

    @classmethod
    def load(cls, folder: str | Path, **options: Any) -> Predictor:
        """A directory ``save`` wrote (its format, kind and keys checked; never executes code).
        ``options``: what a kind needs beside its files (``DeviceAdapted``: its sources)."""
        folder = Path(folder)
        saved = read_meta(folder, cls.kind, cls._REQUIRED)
        with damaged_as_error(folder):
            model = cls._from_body(folder, saved, **options)
        body = {*cls._REQUIRED, *cls._BODY_KEYS}
        model.metadata_ = {k: v for k, v in saved.items() if k not in body}
        model.folder_ = str(folder)  # where it was loaded from (a source must be copied from there)
        return model


class ModelLevel(Predictor):
    """A predictor of whole networks from their feature columns (``feature_names_``) whose
    ``predict(X, ood=…)`` gives each target of ``data.TARGETS`` it learned (``targets_``)."""

    feature_names_: list[str]
    targets_: dict[str, Any]

    def score(self, X: Any, y: Any) -> float:
        """R² of the log of the first of latency, memory, energy that the predictor predicts and
        ``y`` measures."""
        self.check_fitted()
        columns = [TARGETS[t] for t in SCORE_ORDER if t in self.targets_]
        x = as_frame(X, self.feature_names_)
        return log_r2_score(as_targets(y, len(x)), self.predict(x, ood="none"), columns)

    def predict(self, X: Any, ood: str = "full") -> pd.DataFrame:
        raise NotImplementedError


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) if not isinstance(a, np.ndarray) else False
    except (TypeError, ValueError):
        return False
