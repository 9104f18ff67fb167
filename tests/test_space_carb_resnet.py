"""carb-resnet: configs, ids, sampling, and the closed form held equal to build + capture."""

from __future__ import annotations

import pytest

from infercast import capture, load_model
from infercast.space import SpaceError, get
from infercast.space.carb_resnet import layout

from .space_parity import assert_closed_form_matches_capture


@pytest.fixture(scope="module")
def space():
    return get("carb-resnet")


def test_standard_layouts_match_the_classic_networks(space) -> None:
    assert layout("basic", 18) == (2, 2, 2, 2) and layout("bottleneck", 152) == (3, 8, 36, 3)
    resnet50 = capture(load_model("space:carb-resnet?block=bottleneck&depth=50"))
    assert resnet50.params == 25_557_032  # torchvision's resnet50
    for block, step in (("basic", 2), ("bottleneck", 3)):
        for depth in range(8, 201, step):
            assert sum(layout(block, depth)) == (depth - 2) // step


def test_config_ids_are_stable_and_canonical(space) -> None:
    a = space.parse("depth=34&block=basic&width=1.0")
    b = space.parse("block=basic&width=1&depth=34&batch=1")
    assert space.canonical(a) == space.canonical(b)
    assert space.config_id(a) == space.config_id(b)
    assert len(space.config_id(a)) == 16 and space.config_id(a) != space.config_id(space.parse("depth=36"))
    frame = space.sample(50, seed=3)
    assert frame["id"].tolist() == space.sample(50, seed=3)["id"].tolist()
    row = frame.iloc[0]
    assert space.config_id(space.parse(row["model"].split("?", 1)[1])) == row["id"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("depth=7", "depth=7 is outside the space; allowed: 8–200"),
        ("width=9.0", "width=9.0 is outside the space; allowed: 0.1–4 in steps of 0.05"),
        ("block=bottleneck&depth=18", "depth=18 does not fit block=bottleneck"),
        ("colour=red", "unknown key 'colour' for space carb-resnet"),
        ("batch=3", "batch=3 is outside the space; allowed: 1, 2, 4"),
    ],
)
def test_configs_outside_the_space_name_the_key(space, query: str, message: str) -> None:
    with pytest.raises(SpaceError, match=message.replace("(", r"\(").replace("+", r"\+")):
        space.parse(query)


def test_stratified_sampling_covers_every_value_evenly(space) -> None:
    frame = space.sample(630, seed=0, stratified=True)
    counts = frame["input_size"].value_counts()
    assert len(counts) == 7 and counts.max() - counts.min() <= 1
    assert frame["precision"].value_counts().max() - frame["precision"].value_counts().min() <= 1
    for _, row in frame.head(30).iterrows():  # every drawn row is a valid config
        space.validate(
            {
                k: row[k]
                for k in ("block", "depth", "width", "early_downsample", "input_size", "batch", "precision")
            }
        )


def test_closed_form_equals_build_and_capture(space) -> None:
    assert_closed_form_matches_capture(space, n=60, seed=7)


def test_features_reject_configs_outside_the_space(space) -> None:
    frame = space.sample(5, seed=0)
    frame.loc[2, "depth"] = 9
    frame.loc[2, "block"] = "basic"
    with pytest.raises(SpaceError, match="depth=9 does not fit block=basic"):
        space.features(frame)


def test_precision_builds_in_that_dtype(space) -> None:
    loaded = load_model("space:carb-resnet?depth=10&width=0.25&input_size=32&precision=bf16&batch=4")
    graph = capture(loaded)
    assert graph.dtype == "bfloat16" and graph.input_shape == (4, 3, 32, 32)
    assert graph.weight_bytes == 2 * (
        graph.params + sum(n.params for n in graph.nodes if n.kind == "bn")
    )  # BN running stats: two per scale/shift pair


def test_cli_sample_writes_configs_with_features(tmp_path) -> None:
    import pandas as pd

    from .helpers import infercast

    out = tmp_path / "configs.parquet"
    result = infercast(
        "space", "sample", "carb-resnet", "--n", "40", "--seed", "1", "--features", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    frame = pd.read_parquet(out)
    assert len(frame) == 40 and frame["id"].is_unique and frame["f_flops"].gt(0).all()
    assert infercast("space", "show", "carb-resnet", "--json").returncode == 0
    bad = infercast("inspect", "space:carb-resnet?depth=7")
    assert bad.returncode == 2 and "depth=7 is outside the space" in bad.stderr
