"""Tables (configs, measurements, op profiles) in the two formats infercast reads and writes:
Parquet and CSV."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from infercast.errors import InfercastError

if TYPE_CHECKING:  # pandas loads when a table is read: the CLI's JSON output needs only to_python
    import pandas as pd


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


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a ``.parquet`` or ``.csv`` table."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise InfercastError(f"{path}: no such file")
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix == ".csv":
        return pd.read_csv(path)
    raise InfercastError(f"cannot read {path}: use a .parquet or .csv table")


def to_python(value: Any, strict: bool = False) -> Any:
    """A numpy scalar or array as the plain Python value JSON and SQLite take (other values as
    they are; with ``strict``, a value with no plain form raises ``TypeError``, as ``json.dumps``'
    ``default`` must)."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    if strict:
        raise TypeError(f"cannot write {type(value).__name__} as JSON")
    return value
