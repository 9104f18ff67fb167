"""What to screen: sampled design-space configs, a table of configs, or model strings.

A sample larger than one chunk is never held whole: it is drawn chunk by chunk as stage 1 reads
it (each chunk from its own seed, derived from the sample's), so memory is bounded by one chunk
plus the survivors, not by ``n``."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.features import FEATURE_NAMES
from infercast.screen.request import ScreenError

CHUNK = 250_000
# columns stage 1 adds to a surviving config beside its features: its index, two fast
# predictions and the violation (float64 each)
_STAGE_ONE_COLUMNS = 4


def survivor_bytes(space: Any, featurize: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> float:
    """Memory one stage-1 survivor of ``space`` holds — its config and its features (``featurize``,
    default the space's), read off a sample of its configs (mobile-nas: 180 B of config, 336 B of
    features, 144 B of a device's) — doubled for the concatenation of the chunks' survivors."""
    probe = space.sample(1000, seed=0, ids=False)
    held = _row_bytes(probe) + _row_bytes((featurize or space.features)(probe))
    return 2 * (held + 8 * _STAGE_ONE_COLUMNS)


def _row_bytes(frame: pd.DataFrame) -> float:
    """Bytes per row; a categorical column counts its codes only: its categories are the space's
    choices, held once however many rows (nb201's 15,625 cells: 1.5 MB)."""
    total = sum(
        column.cat.codes.nbytes
        if isinstance(column.dtype, pd.CategoricalDtype)
        else column.memory_usage(index=False, deep=True)
        for _, column in frame.items()
    )
    return total / len(frame)


def chunk_seed(seed: int, chunk: int) -> int:
    """The seed of one chunk (or cluster shard) of a sample drawn with ``seed``."""
    return int(np.random.SeedSequence([seed, chunk]).generate_state(1)[0])


@dataclass
class Candidates:
    """What to screen: design-space configs (``space`` set) or model strings (features given).

    ``count`` without ``seed``: candidates generated elsewhere (on a cluster), only their number.
    ``count`` with ``seed``: a sample of ``space`` drawn chunk by chunk (``chunks``)."""

    configs: pd.DataFrame
    space: Any = None
    features: pd.DataFrame | None = None
    source: str = ""
    count: int | None = None
    seed: int | None = None
    # the features a predictor reads (default: the space's ``features``); a shipped device's
    # screening reads device features instead
    featurize: Callable[[pd.DataFrame], pd.DataFrame] | None = None

    def __len__(self) -> int:
        return len(self.configs) if self.count is None else self.count

    def chunks(self, size: int = CHUNK) -> Iterator[tuple[int, pd.DataFrame, pd.DataFrame]]:
        """``(start, configs, features)`` of consecutive chunks of at most ``size`` candidates."""
        for number, start in enumerate(range(0, len(self), size)):
            if self.seed is not None:
                configs = self.space.sample(
                    min(size, len(self) - start), seed=chunk_seed(self.seed, number), ids=False
                )
            else:
                configs = self.configs.iloc[start : start + size].reset_index(drop=True)
            if self.space is not None:
                features = self.features_of(configs)
            else:
                features = self.features.iloc[start : start + size].reset_index(drop=True)
            yield start, configs, features

    def features_of(self, configs: pd.DataFrame) -> pd.DataFrame:
        """Features of configs of ``space``, as the screening predictor reads them."""
        return (self.featurize or self.space.features)(configs)


def from_space(
    name: str,
    n: int,
    seed: int = 0,
    fixed: dict[str, list[Any]] | None = None,
    featurize: Callable[[pd.DataFrame], pd.DataFrame] | None = None,
) -> Candidates:
    """``n`` configs sampled from a space; above one chunk they are drawn as stage 1 reads them.
    ``fixed`` limits parameters to the values given (a device measured at one batch size);
    ``featurize`` replaces the space's features (``Candidates.featurize``)."""
    from infercast.resources import check_fits
    from infercast.space import get, restrict

    chosen = get(name)
    for param, values in (fixed or {}).items():
        chosen = restrict(chosen, param, values)
    if n < 1:
        raise ScreenError(f"--n={n} must be at least 1")
    source = f"{chosen.name} (n={n:,}, seed={seed})"
    if n <= CHUNK:
        return Candidates(chosen.sample(n, seed=seed, ids=False), chosen, source=source, featurize=featurize)
    # stage 1 drops repeated configs chunk by chunk: a chunk never keeps more than the space holds
    held = min(n, math.ceil(n / CHUNK) * chosen.size())
    check_fits(
        f"screening {chosen.name}",
        held,
        survivor_bytes(chosen, featurize),
        " survivors (if every candidate survived stage 1)",
    )
    return Candidates(pd.DataFrame(), chosen, source=source, count=n, seed=seed, featurize=featurize)


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


def from_models(models: list[str], timeout_s: float | None = None) -> Candidates:
    """Model strings of any kind; each is captured once here (slow next to a space, but exact). A
    model running user code must load within ``timeout_s``."""
    from infercast.features import featurize
    from infercast.models.capturing import capture_model

    rows = [featurize(capture_model(model, timeout_s=timeout_s)[0]) for model in models]
    configs = pd.DataFrame({"model": models, "id": models})
    return Candidates(
        configs, None, pd.DataFrame(rows)[list(FEATURE_NAMES)], source=f"{len(models)} model strings"
    )
