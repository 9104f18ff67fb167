"""nb201: cell strings, the NAS-Bench-201 data set's strings, and the closed form."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from infercast import capture, load_model
from infercast.space import SpaceError, get
from infercast.space.nb201 import ALL_CELLS, cell_string, parse_cell

from .space_parity import assert_closed_form_matches_capture

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "nb201-latency" / "nb201_latency.csv"
BEST = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"


@pytest.fixture(scope="module")
def space():
    return get("nb201")


def test_cell_strings_round_trip(space) -> None:
    assert len(ALL_CELLS) == 15_625 and space.size() == 15_625 * 9
    assert cell_string(parse_cell(BEST)) == BEST
    with pytest.raises(SpaceError, match="node 2 needs 2 incoming edge"):
        parse_cell("|nor_conv_3x3~0|+|nor_conv_3x3~0|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|")
    with pytest.raises(SpaceError, match="edge 'conv_9x9~0' should be OP~0"):
        space.parse("cell=" + BEST.replace("nor_conv_3x3~0", "conv_9x9~0", 1))


def test_model_string_keeps_plus_signs() -> None:
    loaded = load_model(f"space:nb201?cell={BEST}&batch=2")
    graph = capture(loaded)
    assert graph.input_shape == (2, 3, 32, 32)
    assert graph.nodes[-1].kind == "linear" and graph.nodes[-1].output_shapes == [(2, 10)]


@pytest.mark.skipif(not DATA.exists(), reason="../shared/data/nb201-latency is not present")
def test_accepts_every_string_of_the_nb201_latency_data(space) -> None:
    with DATA.open() as handle:
        cells = [row["arch"] for row in csv.DictReader(handle)]
    assert len(cells) == 15_625
    assert set(cells) == set(ALL_CELLS)
    frame = space.features({"cell": cells, "batch": [1] * len(cells)})
    assert len(frame) == 15_625 and frame["flops"].gt(0).all()


def test_closed_form_equals_build_and_capture(space) -> None:
    assert_closed_form_matches_capture(space, n=50, seed=11)
