"""The predictors' input columns: the analytic feature vector (schema ``FEATURE_SCHEMA_VERSION``)
plus the platform settings that change kernels (``SETTING_FEATURES``). Reading them out of a store
is ``infercast.datasets``' job: ``predict`` learns from tables."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from infercast.features import FEATURE_NAMES
from infercast.predictors.errors import PredictorError

SETTING_FEATURES: tuple[str, ...] = ("threads",)
# a model-level predictor's input columns, in the order an array of them is read
INPUT_COLUMNS: tuple[str, ...] = (*FEATURE_NAMES, *SETTING_FEATURES)
# each target a model-level predictor learns, and its column
TARGETS: dict[str, str] = {"memory": "peak_memory_mb", "energy": "energy_j", "latency": "latency_ms"}
# the targets' columns, in the order a 2-d array of them is read
TARGET_COLUMNS: tuple[str, ...] = tuple(TARGETS.values())


def settings_columns(settings: dict[str, Any]) -> dict[str, float]:
    return {"threads": float(settings.get("threads") or 1)}


def feature_frame(features: pd.DataFrame | list[dict[str, Any]], settings: dict[str, Any]) -> pd.DataFrame:
    """Features (a frame, as ``Space.features`` returns, or dicts, as ``features()`` does) to the
    predictors' input columns: ``FEATURE_NAMES`` then the platform settings."""
    frame = features if isinstance(features, pd.DataFrame) else pd.DataFrame.from_records(features)
    missing = [name for name in FEATURE_NAMES if name not in frame.columns]
    if missing:
        raise PredictorError(
            f"stored features lack {', '.join(missing[:5])}: they were computed by another feature schema; "
            "re-profile, or train with the infercast that measured them"
        )
    frame = frame[list(FEATURE_NAMES)].astype(np.float64)
    for name, value in settings_columns(settings).items():
        frame[name] = value
    return frame


def as_targets(y: Any, n_rows: int) -> pd.DataFrame:
    """Measured targets as a frame of ``TARGET_COLUMNS``: a frame as it is, a named series as its
    column, a 1-d array-like as ``latency_ms``, a 2-d one as the three columns in that order (NaN
    where a target was not measured)."""
    if isinstance(y, pd.DataFrame):
        frame = y
    elif isinstance(y, pd.Series) and y.name in TARGET_COLUMNS:
        frame = y.to_frame()
    else:
        array = np.asarray(y, dtype=np.float64)
        if array.ndim == 1:
            frame = pd.DataFrame({"latency_ms": array})
        elif array.ndim == 2 and array.shape[1] == len(TARGET_COLUMNS):
            frame = pd.DataFrame(array, columns=list(TARGET_COLUMNS))
        else:
            raise PredictorError(
                f"y has shape {array.shape}: give latencies (1-d), an array of {', '.join(TARGET_COLUMNS)} "
                "(n × 3), or a frame with any of those columns"
            )
    if len(frame) != n_rows:
        raise PredictorError(f"X has {n_rows} rows but y has {len(frame)}")
    return frame
