"""What every design space shares: declared parameters, validation, canonical strings, stable ids,
sampling, and the contract between ``build`` (module → graph → features) and ``features`` (closed
form, vectorised)."""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import numpy as np

from infercast.errors import InfercastError
from infercast.resources import check_fits
from infercast.tables import to_python

if TYPE_CHECKING:  # pandas loads when configs are sampled: parsing a model string needs none
    import pandas as pd


class SpaceError(InfercastError):
    """A configuration outside its space, or a malformed space definition."""


@dataclass(frozen=True)
class Param:
    """One hyper-parameter: a finite, ordered list of allowed values.

    Ranges are declared as choices on a grid (``Param.grid``) so every space is finite, every
    configuration has one canonical spelling, and sampling can be stratified over the values.
    """

    name: str
    choices: tuple[Any, ...]
    help: str = ""
    describe: str = ""  # how the allowed values are shown in errors, e.g. "even integers 8–200"
    default: Any = None  # used where a model string leaves the key out; None: the first choice

    @classmethod
    def grid(
        cls, name: str, low: float, high: float, step: float, help: str = "", default: Any = None
    ) -> Param:
        count = round((high - low) / step) + 1
        values = tuple(round(low + i * step, 10) for i in range(count))
        if all(float(v).is_integer() for v in (low, high, step)):
            values = tuple(int(v) for v in values)
        return cls(name, values, help, f"{low:g}–{high:g} in steps of {step:g}", default)

    @functools.cached_property
    def _lookup(self) -> frozenset[Any]:
        return frozenset(self.choices)

    @property
    def fallback(self) -> Any:
        return self.choices[0] if self.default is None else self.default

    @property
    def allowed(self) -> str:
        if self.describe:
            return self.describe
        return ", ".join(spell(v) for v in self.choices)

    def coerce(self, raw: Any) -> Any:
        """Parse ``raw`` (a string from a model string, or a Python value) into an allowed value."""
        kind = type(self.choices[0])
        try:
            if kind is bool:
                value: Any = _parse_bool(raw)
            elif kind is int:
                value = int(raw) if float(raw).is_integer() else float(raw)
            elif kind is float:
                value = float(raw)
            else:
                value = str(raw)
        except (TypeError, ValueError):
            raise SpaceError(f"{self.name}={raw!r} is not a valid value; allowed: {self.allowed}") from None
        if kind is str:
            if value in self._lookup:
                return value
        else:
            for choice in self.choices:
                if value == choice or (kind is float and math.isclose(value, choice, abs_tol=1e-9)):
                    return choice
        raise SpaceError(f"{self.name}={spell(raw)} is outside the space; allowed: {self.allowed}")


def _parse_bool(raw: Any) -> bool:
    if isinstance(raw, bool | np.bool_):
        return bool(raw)
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


def spell(value: Any) -> str:
    if isinstance(value, bool | np.bool_):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class Space(ABC):
    """A family of networks. Subclasses declare ``name``, ``params`` and implement the builders."""

    name: str
    description: str
    params: tuple[Param, ...]

    # --- configurations ---------------------------------------------------------------------
    def param(self, key: str) -> Param:
        for p in self.params:
            if p.name == key:
                return p
        known = ", ".join(p.name for p in self.params)
        raise SpaceError(f"unknown key {key!r} for space {self.name}; keys: {known}")

    def validate(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check every key and value, fill left-out keys with their defaults; canonical types."""
        clean = {p.name: p.fallback for p in self.params}
        for key, raw in config.items():
            clean[key] = self.param(key).coerce(raw)
        self.check(clean)
        return {p.name: clean[p.name] for p in self.params}

    def check(self, config: dict[str, Any]) -> None:
        """Constraints between parameters; raise :class:`SpaceError` naming the key."""
        return  # most spaces have no cross-parameter constraint

    @property
    def string_name(self) -> str:
        """The space named in model strings (a user space writes its family's)."""
        return self.name

    def valid_rows(self, frame: pd.DataFrame) -> np.ndarray:
        """Vectorised ``check``: which sampled rows satisfy the cross-parameter constraints."""
        return np.ones(len(frame), dtype=bool)

    def canonical(self, config: dict[str, Any]) -> str:
        config = self.validate(config)
        query = "&".join(f"{key}={spell(config[key])}" for key in sorted(config))
        return f"space:{self.string_name}?{query}"

    def config_id(self, config: dict[str, Any]) -> str:
        """Stable id: a hash of the canonical string (independent of key order and spelling)."""
        return hashlib.sha1(self.canonical(config).encode()).hexdigest()[:16]

    def parse(self, query: str) -> dict[str, Any]:
        """``key=value&…`` → a validated config."""
        # not parse_qsl: a "+" stays a "+" (NAS-Bench-201 cell strings are full of them)
        pairs = [part.partition("=") for part in query.split("&") if part]
        seen: dict[str, str] = {}
        for key, sep, value in pairs:
            if not sep:
                raise SpaceError(f"{key!r} in {query!r} has no value; write key=value")
            key, value = unquote(key), unquote(value)
            if key in seen:
                raise SpaceError(f"key {key!r} given twice in {query!r}")
            seen[key] = value
        return self.validate(seen)

    # --- enumeration and sampling -----------------------------------------------------------
    def size(self) -> int:
        """Number of configurations (respecting constraints), counted without enumerating."""
        return self.count(self.params)

    def count(self, params: tuple[Param, ...]) -> int:
        """How many configurations ``params`` allow; spaces with constraints count them their way."""
        return math.prod(len(p.choices) for p in params)

    def enumerate(self) -> Iterator[dict[str, Any]]:
        names = [p.name for p in self.params]
        for values in itertools.product(*(p.choices for p in self.params)):
            config = dict(zip(names, values, strict=True))
            try:
                self.check(config)
            except SpaceError:
                continue
            yield config

    def sample(self, n: int, seed: int = 0, stratified: bool = False, ids: bool = True) -> pd.DataFrame:
        """``n`` configurations as a DataFrame (one row each, plus ``id`` and ``model`` columns
        unless ``ids`` is false: screening names only the survivors, with ``with_ids``).

        Uniform: every parameter drawn independently, constraint violations redrawn.
        Stratified: every parameter's values are cycled through in shuffled order, so each value
        appears ``n / len(choices)`` times (±1) — the even coverage a profiling campaign wants.
        """
        import pandas as pd

        if n < 0:
            raise SpaceError(f"--n={n}: the number of configurations must not be negative")
        # measured with tracemalloc on the built-in spaces: per row and parameter, plus the
        # model string and id of every row when ids are asked for
        per_row = 70 * len(self.params) + 400 if ids else 12 * len(self.params) + 16
        check_fits(f"sampling {self.name}", n, per_row, " configs")
        rng = np.random.default_rng(seed)
        drawn = pd.DataFrame(self.draw(rng, n, stratified))
        # rows breaking a cross-parameter constraint are drawn again (none in most spaces), and
        # only those are checked again: a restriction of carb-resnet draws depths blind to the
        # block and takes ~20 rounds, each of which would otherwise check the whole frame again
        kept = []
        for _ in range(100):
            valid = self.valid_rows(drawn)
            kept.append(drawn[valid])
            if valid.all():
                frame = pd.concat(kept, ignore_index=True) if len(kept) > 1 else drawn
                return self.with_ids(frame) if ids else frame.reset_index(drop=True)
            drawn = pd.DataFrame(self.draw(rng, int((~valid).sum()), stratified))
        raise SpaceError(f"sampling {self.name} found too few configurations that satisfy its constraints")

    def draw(self, rng: np.random.Generator, n: int, stratified: bool) -> dict[str, np.ndarray]:
        return self.draw_within(self.params, rng, n, stratified)

    def draw_within(
        self, params: tuple[Param, ...], rng: np.random.Generator, n: int, stratified: bool
    ) -> dict[str, np.ndarray | pd.Categorical]:
        """``n`` rows of values of ``params`` (this space's, or a restriction's): each drawn
        independently (``stratified``: cycled through in shuffled order). A space whose sampler
        knows more (``kernels``: real CNN shapes) overrides it, and its restrictions use it."""
        import pandas as pd

        columns: dict[str, np.ndarray | pd.Categorical] = {}
        for p in params:
            if stratified:
                index = np.resize(np.arange(len(p.choices)), n)
                rng.shuffle(index)
            else:
                index = rng.integers(0, len(p.choices), n)
            if isinstance(p.choices[0], str):
                # categorical: a million Arrow-backed strings cost seconds to filter and
                # deduplicate in a screening, their codes milliseconds
                columns[p.name] = pd.Categorical.from_codes(index, categories=list(p.choices))
            else:
                columns[p.name] = np.asarray(p.choices)[index]
        return columns

    def with_ids(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Add the canonical ``model`` string and the stable ``id`` of every row."""
        frame = frame.reset_index(drop=True)
        # Each column's values come from a short list of choices: spell each choice once. Numpy
        # object arrays, because iterating Arrow-backed strings is ten times slower.
        parts = [
            frame[k].map({c: f"{k}={spell(c)}" for c in self.param(k).choices}).to_numpy(dtype=object)
            for k in sorted(p.name for p in self.params)
        ]
        prefix = f"space:{self.string_name}?"
        models = [prefix + "&".join(row) for row in zip(*parts, strict=True)]
        frame["model"] = models
        frame["id"] = [hashlib.sha1(m.encode()).hexdigest()[:16] for m in models]
        return frame

    def config_rows(
        self, configs: pd.DataFrame, features: pd.DataFrame | None = None
    ) -> list[dict[str, Any]]:
        """The store's config rows (``id``, ``model``, ``space``, ``params``, ``features``) of
        configs with ``model`` and ``id`` columns; ``features`` if already computed (same rows)."""
        configs = configs.reset_index(drop=True)
        features = self.features(configs) if features is None else features.reset_index(drop=True)
        names = [p.name for p in self.params]
        columns = list(features.columns)
        return [
            {
                "id": row["id"],
                "model": row["model"],
                "space": self.string_name,
                "params": {k: to_python(row[k]) for k in names},
                "features": dict(zip(columns, map(float, values), strict=True)),
            }
            for (_, row), values in zip(configs.iterrows(), features.to_numpy(), strict=True)
        ]

    # --- networks ----------------------------------------------------------------------------
    @abstractmethod
    def build(self, config: dict[str, Any], device: str = "cpu") -> Any:
        """The ``torch.nn.Module`` of one configuration (in eval mode, at its precision).

        ``device="meta"`` builds it without allocating or initialising weights: enough to capture
        its graph, and instant even for a 4×-wide ResNet-200.
        """

    @abstractmethod
    def input_shape(self, config: dict[str, Any]) -> tuple[int, ...]:
        """The input the network takes (batch included)."""

    def device_features(self, configs: pd.DataFrame) -> pd.DataFrame:
        """Optional: the device features (``infercast.features.device``) of every configuration at
        batch 1 and fp32, in closed form (``space.device_vector``), equal to those of its captured
        graph. A space with it can be screened for a shipped device (``screen.device``)."""
        raise SpaceError(f"the {self.name} space has no closed form of the device features")

    @property
    def has_device_features(self) -> bool:
        return type(self).device_features is not Space.device_features

    @abstractmethod
    def features(self, configs: pd.DataFrame | dict[str, Sequence[Any]]) -> pd.DataFrame:
        """The feature vector of every configuration, in closed form, without building modules.

        Columns are ``infercast.features.FEATURE_NAMES``; values equal ``features(capture(build(c)))``.
        """
