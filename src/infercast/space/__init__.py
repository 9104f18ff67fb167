"""Design spaces: declarative families of networks, sampled, built and featurised in closed form.

``get(name)`` returns a :class:`Space`; ``parse_model_string("space:NAME?k=v&…")`` its config.
"""

from __future__ import annotations

import importlib
from typing import Any

from infercast.space.base import Param, Space, SpaceError

# name → "module:class" of every built-in space (a new one: one file and one line here); a space's
# module is imported when it is asked for, so listing the names costs nothing
SPACES: dict[str, str] = {
    "carb-resnet": "infercast.space.carb_resnet:CarbResNet",
    "kernels": "infercast.space.kernel_networks:Kernels",
    "mobile-nas": "infercast.space.mobile_nas:MobileNAS",
    "nb201": "infercast.space.nb201:NB201",
}

__all__ = ["Param", "Space", "SpaceError", "get", "names", "parse_model_string", "restrict"]


def names() -> list[str]:
    return sorted(SPACES)


def get(name: str) -> Space:
    """A built-in space by name, or a user space from a ``.yaml`` / ``.yml`` file."""
    if name.endswith((".yaml", ".yml")):
        from infercast.space.user import load_user_space

        return load_user_space(name)
    if name not in SPACES:
        import difflib

        close = difflib.get_close_matches(name, list(SPACES), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; spaces: {', '.join(names())}"
        raise SpaceError(f"unknown design space {name!r}{hint}")
    module, _, cls = SPACES[name].partition(":")
    return getattr(importlib.import_module(module), cls)()


def restrict(space: Space, name: str, values: tuple[Any, ...] | list[Any]) -> Space:
    """``space`` with parameter ``name`` limited to ``values`` (see ``space.user.restrict``)."""
    from infercast.space.user import restrict as restricted

    return restricted(space, name, values)


def parse_model_string(spec: str) -> tuple[Space, dict[str, Any]]:
    """``space:NAME?key=value&…`` → (space, validated config)."""
    body = spec.removeprefix("space:")
    name, _, query = body.partition("?")
    space = get(name)
    return space, space.parse(query)
