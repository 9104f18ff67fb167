"""User spaces: a YAML file that restricts a built-in family's parameters.

.. code-block:: yaml

    name: small-resnets          # required
    family: carb-resnet          # required: carb-resnet, mobile-nas or nb201
    description: shallow, narrow ResNets for a microcontroller-class budget
    params:                      # optional; parameters left out keep the family's choices
      block: [basic]             # a list of choices
      depth: {min: 10, max: 34}  # an inclusive range over the family's choices
      width: {min: 0.25, max: 1.0, step: 0.25}
      input_size: 96             # one value

Every configuration of a user space is a configuration of its family, so its canonical string
(``space:carb-resnet?…``), id, module and features are the family's.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from infercast.space.base import Param, Space, SpaceError, spell

_TOP_KEYS = {"name", "family", "description", "params"}
_RANGE_KEYS = {"min", "max", "step"}


class UserSpace(Space):
    def __init__(self, name: str, family: Space, params: tuple[Param, ...], description: str) -> None:
        self.name = name
        self.family = family
        self.params = params
        self.description = description or f"restriction of {family.name}"

    @property
    def string_name(self) -> str:
        return self.family.name

    def check(self, config: dict[str, Any]) -> None:
        self.family.check(config)

    def size(self) -> int:
        return self.family.count(self.params)

    def valid_rows(self, frame: pd.DataFrame) -> np.ndarray:
        return self.family.valid_rows(frame)

    def draw(self, rng: np.random.Generator, n: int, stratified: bool) -> dict[str, np.ndarray]:
        return self.family.draw_within(self.params, rng, n, stratified)

    def build(self, config: dict[str, Any], device: str = "cpu") -> Any:
        return self.family.build(self.validate(config), device)

    def input_shape(self, config: dict[str, Any]) -> tuple[int, ...]:
        return self.family.input_shape(self.validate(config))

    def features(self, configs: Any) -> pd.DataFrame:
        return self.family.features(configs)

    def device_features(self, configs: pd.DataFrame) -> pd.DataFrame:
        return self.family.device_features(configs)

    @property
    def has_device_features(self) -> bool:
        return self.family.has_device_features


def restrict(space: Space, name: str, values: tuple[Any, ...] | list[Any]) -> Space:
    """``space`` with parameter ``name`` limited to ``values`` (in the space's order): a user space
    of the same family, so its configs keep their model strings, ids and features."""
    family = space.family if isinstance(space, UserSpace) else space
    params = []
    for param in space.params:
        if param.name == name:
            kept = tuple(c for c in param.choices if c in values)
            if not kept:
                raise SpaceError(
                    f"{space.name}: none of {name}'s values ({param.allowed}) is among {list(values)}"
                )
            default = param.fallback if param.fallback in kept else kept[0]
            param = Param(name, kept, param.help, _describe(param, kept), default)
        params.append(param)
    return UserSpace(space.name, family, tuple(params), space.description)


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (YAML keeps the last one
    silently, so a space would quietly lose a choice its author wrote)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        for i, key in enumerate(keys):
            if key in keys[:i]:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} appears twice", node.value[i][0].start_mark
                )
        return super().construct_mapping(node, deep=deep)


def load_user_space(path: str | Path) -> UserSpace:
    from infercast.space import get

    file = Path(path)
    if not file.is_file():
        raise SpaceError(f"space file not found: {path}")
    try:
        document = yaml.load(file.read_text(), Loader=_UniqueKeyLoader)  # a SafeLoader
    except yaml.YAMLError as error:
        raise SpaceError(f"{path} is not valid YAML: {str(error).splitlines()[0]}") from None
    if not isinstance(document, dict):
        raise SpaceError(f"{path}: the top level must be a mapping with keys name, family, params")
    unknown = sorted(set(document) - _TOP_KEYS)
    if unknown:
        raise SpaceError(f"{path}: unknown key {unknown[0]!r}; allowed keys: {', '.join(sorted(_TOP_KEYS))}")
    for key in ("name", "family"):
        if not isinstance(document.get(key), str) or not document[key].strip():
            raise SpaceError(f"{path}: key {key!r} must be a non-empty string")
    family = get(document["family"])
    if isinstance(family, UserSpace):
        raise SpaceError(f"{path}: family must be a built-in space, not another YAML file")
    description = document.get("description") or ""
    if not isinstance(description, str):
        raise SpaceError(f"{path}: key 'description' must be a string")
    overrides = document.get("params") or {}
    if not isinstance(overrides, dict):
        raise SpaceError(f"{path}: key 'params' must be a mapping of parameter → choices or range")
    params = []
    for param in family.params:
        if param.name in overrides:
            params.append(_restrict(path, param, overrides.pop(param.name)))
        else:
            params.append(param)
    if overrides:
        key = next(iter(overrides))
        known = ", ".join(p.name for p in family.params)
        raise SpaceError(f"{path}: params.{key} is not a parameter of {family.name}; parameters: {known}")
    space = UserSpace(document["name"].strip(), family, tuple(params), description)
    if space.size() == 0:
        raise SpaceError(f"{path}: no configuration satisfies the space's constraints (e.g. depth vs block)")
    return space


def _restrict(path: str | Path, param: Param, spec: Any) -> Param:
    where = f"{path}: params.{param.name}"
    if isinstance(spec, dict) and not spec:
        raise SpaceError(f"{where}: an empty range {{}}; give min and/or max, or a list of choices")
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - _RANGE_KEYS)
        if unknown:
            raise SpaceError(f"{where}: unknown key {unknown[0]!r}; a range takes min, max and step")
        bounds = {k: spec[k] for k in spec}
        for key, value in bounds.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SpaceError(f"{where}.{key} must be a number, got {value!r}")
        if not isinstance(param.choices[0], int | float) or isinstance(param.choices[0], bool):
            raise SpaceError(f"{where}: a range needs a numeric parameter; give a list of choices")
        low, high = bounds.get("min", param.choices[0]), bounds.get("max", param.choices[-1])
        # a bound beyond the family's values is a typo or a wish the family cannot meet: saying so
        # beats silently clipping it to the family's range
        for key, value in (("min", low), ("max", high)):
            if value < param.choices[0] - 1e-9:
                raise SpaceError(
                    f"{where}.{key}={value} is below the family's smallest value ({param.allowed})"
                )
            if value > param.choices[-1] + 1e-9:
                raise SpaceError(
                    f"{where}.{key}={value} is above the family's largest value ({param.allowed})"
                )
        if low > high:
            raise SpaceError(f"{where}: min={low} is above max={high}")
        step = bounds.get("step")
        if step is not None and step <= 0:
            raise SpaceError(f"{where}.step must be positive, got {step}")
        values = [
            c
            for c in param.choices
            if low - 1e-9 <= c <= high + 1e-9 and (step is None or _on_step(c - low, step))
        ]
    elif isinstance(spec, list):
        if not spec:
            raise SpaceError(f"{where}: an empty list leaves nothing to choose")
        values = [_coerce(where, param, value) for value in spec]
    else:
        values = [_coerce(where, param, spec)]
    if not values:
        raise SpaceError(f"{where}: {spec!r} selects none of {param.name}'s values ({param.allowed})")
    ordered = tuple(c for c in param.choices if c in values)
    default = param.fallback if param.fallback in ordered else ordered[0]
    return Param(param.name, ordered, param.help, _describe(param, ordered), default)


def _describe(param: Param, ordered: tuple[Any, ...]) -> str:
    """How the restricted values read: listed when few, else their own range (a family's rule,
    such as which depths a block allows, still applies within it)."""
    if len(ordered) < 40:
        return ""
    rule = param.describe.partition(";")[2].strip()
    return f"{spell(ordered[0])}–{spell(ordered[-1])} ({len(ordered)} values" + (
        f"; {rule})" if rule else ")"
    )


def _on_step(offset: float, step: float) -> bool:
    ratio = offset / step
    return math.isclose(ratio, round(ratio), abs_tol=1e-6)


def _coerce(where: str, param: Param, value: Any) -> Any:
    kind = type(param.choices[0])
    if kind in (int, float) and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise SpaceError(
            f"{where}: {value!r} is a {type(value).__name__}; expected a number ({param.allowed})"
        )
    if kind is bool and not isinstance(value, bool | int):
        raise SpaceError(f"{where}: {value!r} is not a boolean (true/false)")
    if kind is str and not isinstance(value, str):
        raise SpaceError(f"{where}: {value!r} is not a string ({param.allowed})")
    try:
        return param.coerce(value)
    except SpaceError as error:
        raise SpaceError(f"{where}: {error}") from None
