"""Design spaces: declarative families of networks, sampled, built and featurised in closed form.

``get(name)`` returns a :class:`Space`; ``parse_model_string("space:NAME?k=v&…")`` its config.
"""

from __future__ import annotations

from typing import Any

from infercast.space.base import Param, Space, SpaceError
from infercast.space.carb_resnet import CarbResNet
from infercast.space.kernel_networks import Kernels
from infercast.space.mobile_nas import MobileNAS
from infercast.space.nb201 import NB201

_SPACES: dict[str, type[Space]] = {cls.name: cls for cls in (CarbResNet, Kernels, MobileNAS, NB201)}

__all__ = ["Param", "Space", "SpaceError", "get", "names", "parse_model_string", "restrict"]


def names() -> list[str]:
    return sorted(_SPACES)


def get(name: str) -> Space:
    """A built-in space by name, or a user space from a ``.yaml`` / ``.yml`` file."""
    if name.endswith((".yaml", ".yml")):
        from infercast.space.user import load_user_space

        return load_user_space(name)
    if name not in _SPACES:
        import difflib

        close = difflib.get_close_matches(name, list(_SPACES), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; spaces: {', '.join(names())}"
        raise SpaceError(f"unknown design space {name!r}{hint}")
    return _SPACES[name]()


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
