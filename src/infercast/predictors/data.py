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
