"""Unit conversions in one place: the store keeps bytes and joules, reports and predictors speak MB,
and the energy sensors' counters tick in micro- or millijoules (milliwatts for power)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:  # the sensors run in measurement workers, which need no pandas
    import pandas as pd

BYTES_PER_MB = 1e6


@overload
def bytes_to_mb(value: pd.Series) -> pd.Series: ...
@overload
def bytes_to_mb(value: Any) -> float | None: ...
def bytes_to_mb(value: Any) -> Any:
    """Bytes → MB (10⁶ bytes). A column becomes numbers (unparseable → NaN); a missing scalar
    (None, NaN) stays None."""
    if hasattr(value, "to_numpy"):
        import pandas as pd

        return pd.to_numeric(value, errors="coerce") / BYTES_PER_MB
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value) / BYTES_PER_MB


def microjoules_to_joules(value: float) -> float:
    """RAPL's energy counters count microjoules."""
    return value / 1e6


def millijoules_to_joules(value: float) -> float:
    """NVML's total-energy counter counts millijoules."""
    return value / 1e3


def milliwatts_to_watts(value: float) -> float:
    """NVML reports power and power limits in milliwatts."""
    return value / 1e3
