"""mobile-nas: configs, the closed form, and the blocks it builds."""

from __future__ import annotations

import pytest

from infercast import capture, load_model
from infercast.space import SpaceError, get

from .space_parity import assert_closed_form_matches_capture


@pytest.fixture(scope="module")
def space():
    return get("mobile-nas")


def test_blocks_follow_the_config(space) -> None:
    query = "k1=7&e1=1&r1=1&se1=1&act1=hswish&r2=3&width=0.5&resolution=128"
    graph = capture(load_model(f"space:mobile-nas?{query}"))
    kinds = [n.kind for n in graph.nodes]
    assert graph.input_shape == (1, 3, 128, 128)
    first_dw = next(n for n in graph.nodes if n.kind == "dwconv")
    assert first_dw.attrs["kernel"] == (7, 7) and first_dw.attrs["stride"] == (2, 2)
    assert {"hardswish", "hardsigmoid", "global_pool", "mul", "add"} <= set(kinds)
    with pytest.raises(SpaceError, match=r"e3=5 is outside the space; allowed: 1, 3, 4, 6"):
        space.parse("e3=5")


def test_closed_form_equals_build_and_capture(space) -> None:
    assert_closed_form_matches_capture(space, n=40, seed=5)
