"""What to screen: sampled design-space configs, a table of configs, or model strings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.features import FEATURE_NAMES
from infercast.screen.request import ScreenError


@dataclass
class Candidates:
    """What to screen: design-space configs (``space`` set) or model strings (features given)."""

    configs: pd.DataFrame
    space: Any = None
    features: pd.DataFrame | None = None
    source: str = ""
    count: int | None = None  # candidates generated elsewhere (on a cluster): only their number

    def __len__(self) -> int:
        return len(self.configs) if self.count is None else self.count


def from_space(name: str, n: int, seed: int = 0) -> Candidates:
    from infercast.space import get

    chosen = get(name)
    if n < 1:
        raise ScreenError(f"--n={n} must be at least 1")
    return Candidates(
        chosen.sample(n, seed=seed, ids=False), chosen, source=f"{chosen.name} (n={n}, seed={seed})"
    )


def from_configs(path: str | Path, space_name: str) -> Candidates:
    """A Parquet / CSV of configs of ``space_name`` (one column per parameter)."""
    from infercast.space import get
    from infercast.tables import read_table

    chosen = get(space_name)
    frame = read_table(path)
    names = [p.name for p in chosen.params]
    missing = [n for n in names if n not in frame.columns]
    if missing:
        raise ScreenError(f"{path}: columns {missing} missing for space {chosen.name} (it has {names})")
    frame = frame[names].reset_index(drop=True)
    bad = ~chosen.valid_rows(frame)
    if bad.any():
        raise ScreenError(f"{path}: row {int(np.flatnonzero(bad)[0])} is not a valid {chosen.name} config")
    return Candidates(frame, chosen, source=str(path))


def from_models(models: list[str]) -> Candidates:
    """Model strings of any kind; each is captured once here (slow next to a space, but exact)."""
    from infercast.features import features
    from infercast.graph import capture
    from infercast.models import load_model

    rows = []
    for model in models:
        loaded = load_model(model)
        rows.append(features(capture(loaded)))
    configs = pd.DataFrame({"model": models, "id": models})
    return Candidates(
        configs, None, pd.DataFrame(rows)[list(FEATURE_NAMES)], source=f"{len(models)} model strings"
    )
