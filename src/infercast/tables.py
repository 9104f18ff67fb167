"""Writing tables (configs, measurements) in the formats infercast reads back: Parquet and CSV."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from infercast.errors import InfercastError


def write_table(frame: pd.DataFrame, out: str | Path) -> Path:
    """Write ``frame`` to ``out`` by its suffix, ``.parquet`` or ``.csv``."""
    out = Path(out)
    if out.suffix == ".parquet":
        frame.to_parquet(out, index=False)
    elif out.suffix == ".csv":
        frame.to_csv(out, index=False)
    else:
        raise InfercastError(f"cannot write {out}: use a .parquet or .csv file")
    return out
