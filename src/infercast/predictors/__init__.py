"""Predictors: learn a platform's cost behaviour from measurements, predict it for unseen models.

- ``CascadeBlend``: CARB's model-level cascade of blended tree ensembles (memory → energy → latency);
- ``OpWise``: an operation-wise latency predictor (executed kernels + a learned overhead model);
- ``Adapted``: few-shot adaptation of source predictors to a new platform from k measurements;
- ``FlopsProportional`` / ``LogLinear``: the baselines every evaluation is compared with;
- ``feature_frame``: feature dicts to input columns; ``load(folder)``: any predictor directory.

``predict`` learns from tables and never measures or reads a store itself: ``infercast.datasets``
turns a store into training tables, ``infercast.api`` runs the train / predict / evaluate workflows.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from infercast.lazy import lazy_exports
from infercast.predictors.artifact import read_meta
from infercast.predictors.errors import PredictorError

if TYPE_CHECKING:
    from infercast.predictors.adapted import Adapted, select_configs
    from infercast.predictors.artifact import PlatformInfo, PredictorInfo
    from infercast.predictors.baselines import FlopsProportional, LogLinear
    from infercast.predictors.blend import TARGETS, CascadeBlend
    from infercast.predictors.data import feature_frame
    from infercast.predictors.folds import stratified_split
    from infercast.predictors.metrics import regression_metrics
    from infercast.predictors.opwise import OpWise

# Imported on first use: the blend and the learners' fitting need scikit-learn and SciPy's
# statistics (~1.5 s to import), which listing the devices and a phone CPU setting's cached
# predictor never use (tests/test_devices.py holds that; XGBoost, which the GPU routes load,
# imports scikit-learn itself).
_LAZY = {
    "Adapted": "adapted",
    "select_configs": "adapted",
    "PlatformInfo": "artifact",
    "PredictorInfo": "artifact",
    "FlopsProportional": "baselines",
    "LogLinear": "baselines",
    "TARGETS": "blend",
    "CascadeBlend": "blend",
    "feature_frame": "data",
    "stratified_split": "folds",
    "regression_metrics": "metrics",
    "OpWise": "opwise",
}
__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "TARGETS",
    "Adapted",
    "CascadeBlend",
    "FlopsProportional",
    "LogLinear",
    "OpWise",
    "PlatformInfo",
    "PredictorError",
    "PredictorInfo",
    "feature_frame",
    "load",
    "regression_metrics",
    "select_configs",
    "stratified_split",
]


def load(folder: str | Path) -> Any:
    """Load any predictor directory (``CascadeBlend``, ``OpWise`` or ``Adapted``) by the kind in its
    meta.json."""
    from infercast.predictors.adapted import Adapted
    from infercast.predictors.blend import CascadeBlend
    from infercast.predictors.opwise import OpWise

    kind = read_meta(folder).get("kind")
    if kind == "cascade-blend":
        return CascadeBlend.load(folder)
    if kind == "opwise":
        return OpWise.load(folder)
    if kind == "adapted":
        return Adapted.load(folder)
    raise PredictorError(f"{folder}: unknown predictor kind {kind!r}")
