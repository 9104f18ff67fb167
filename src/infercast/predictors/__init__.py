"""Predictors: learn a platform's cost behaviour from measurements, predict it for unseen models.

Every kind follows one contract (``base.Predictor``: scikit-learn's estimator protocol, ``score`` a
float, ``evaluate`` the metrics, code-free ``save`` / ``load``) and is registered in ``KINDS``:

- ``CascadeBlend``: CARB's model-level cascade of blended tree ensembles (memory → energy → latency);
- ``OpWise``: an operation-wise latency predictor (executed kernels + a learned overhead model);
- ``PhysicalLatency``: latency as Σ cost × work over the device features;
- ``Adapted``: few-shot adaptation of trained blends to a new platform from k measurements;
- ``DeviceAdapted`` (``predictors.devices.recalibrated``): a shipped device recalibrated;
- ``FlopsProportional`` / ``LogLinear``: the baselines every evaluation is compared with.

``load(folder)`` loads any predictor directory by its kind; ``PredictorBundle`` a directory of
``infercast train`` with every latency route beside the blend. ``feature_frame`` turns feature
dicts into input columns. ``predictors`` learns from tables and never measures or reads a store
itself: ``infercast.datasets`` turns a store into training tables, ``infercast.api`` runs the
train / predict / evaluate workflows. ``predictors.devices``: the shipped device predictors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infercast.lazy import lazy_exports
from infercast.predictors.errors import PredictorError

if TYPE_CHECKING:
    from infercast.predictors.adapted import Adapted
    from infercast.predictors.artifact import PlatformInfo, PredictorInfo
    from infercast.predictors.base import KINDS, Predictor, kind_of, load
    from infercast.predictors.baselines import FlopsProportional, LogLinear
    from infercast.predictors.blend import CascadeBlend
    from infercast.predictors.bundle import PredictorBundle
    from infercast.predictors.data import TARGETS, feature_frame
    from infercast.predictors.folds import stratified_split
    from infercast.predictors.metrics import regression_metrics
    from infercast.predictors.opwise import OpWise
    from infercast.predictors.physical import PhysicalLatency
    from infercast.predictors.sources import select_configs

# Imported on first use: the blend and the learners' fitting need scikit-learn and SciPy's
# statistics, which listing the devices and a phone CPU setting's cached predictor never use
# (tests/test_devices.py holds that); the rest needs pandas, which a command line that fails on
# its arguments never loads.
_LAZY = {
    "PlatformInfo": "artifact",
    "PredictorInfo": "artifact",
    "KINDS": "base",
    "Predictor": "base",
    "kind_of": "base",
    "load": "base",
    "Adapted": "adapted",
    "select_configs": "sources",
    "FlopsProportional": "baselines",
    "LogLinear": "baselines",
    "TARGETS": "data",
    "CascadeBlend": "blend",
    "PredictorBundle": "bundle",
    "feature_frame": "data",
    "stratified_split": "folds",
    "regression_metrics": "metrics",
    "OpWise": "opwise",
    "PhysicalLatency": "physical",
}
__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "KINDS",
    "TARGETS",
    "Adapted",
    "CascadeBlend",
    "FlopsProportional",
    "LogLinear",
    "OpWise",
    "PhysicalLatency",
    "PlatformInfo",
    "Predictor",
    "PredictorBundle",
    "PredictorError",
    "PredictorInfo",
    "feature_frame",
    "kind_of",
    "load",
    "regression_metrics",
    "select_configs",
    "stratified_split",
]
