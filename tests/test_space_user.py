"""User spaces from YAML: restriction of a family, schema errors that name the key."""

from __future__ import annotations

import textwrap

import pytest

from infercast.space import SpaceError, get

from .space_parity import assert_closed_form_matches_capture

SMALL = """
name: small-resnets
family: carb-resnet
description: shallow, narrow ResNets
params:
  block: [basic]
  depth: {min: 10, max: 34}
  width: {min: 0.25, max: 1.0, step: 0.25}
  input_size: 96
"""


def write(tmp_path, text: str) -> str:
    path = tmp_path / "space.yaml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_user_space_restricts_its_family(tmp_path) -> None:
    space = get(write(tmp_path, SMALL))
    assert space.name == "small-resnets"
    assert space.param("width").choices == (0.25, 0.5, 0.75, 1.0)
    assert space.size() == 13 * 4 * 2 * 1 * 9 * 3  # even depths 10..34 for basic blocks
    frame = space.sample(300, seed=0, stratified=True)
    assert set(frame["block"]) == {"basic"} and frame["depth"].between(10, 34).all()
    assert (frame["depth"] % 2 == 0).all() and set(frame["input_size"]) == {96}
    assert frame["model"].str.startswith("space:carb-resnet?").all()  # a config of the family
    family = get("carb-resnet")
    row = frame.iloc[0]
    assert family.config_id(family.parse(row["model"].split("?", 1)[1])) == row["id"]
    with pytest.raises(SpaceError, match="depth=40 is outside the space; allowed: 10, 11"):
        space.parse("depth=40")


def test_user_space_features_match_capture(tmp_path) -> None:
    assert_closed_form_matches_capture(get(write(tmp_path, SMALL)), n=20, seed=1)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\nfamily: carb-resnet\nparms: {}\n", "unknown key 'parms'"),
        ("name: x\nfamily: nope\n", "unknown design space 'nope'"),
        ("family: carb-resnet\n", "key 'name' must be a non-empty string"),
        ("name: x\nfamily: carb-resnet\nparams:\n  colour: [red]\n", "params.colour is not a parameter"),
        ("name: x\nfamily: carb-resnet\nparams:\n  depth: {min: ten}\n", "params.depth.min must be a number"),
        ("name: x\nfamily: carb-resnet\nparams:\n  depth: [eight]\n", "params.depth: 'eight' is a str"),
        ("name: x\nfamily: carb-resnet\nparams:\n  width: [9.0]\n", "params.width: width=9 is outside"),
        (
            "name: x\nfamily: carb-resnet\nparams:\n  depth: {min: 300}\n",
            "min=300 is above the family's largest",
        ),
        (
            "name: x\nfamily: carb-resnet\nparams:\n  depth: {min: 8, max: 5000}\n",
            "max=5000 is above the family's",
        ),
        ("name: x\nfamily: carb-resnet\nparams:\n  width: {min: -1}\n", "min=-1 is below the family's"),
        (
            "name: x\nfamily: carb-resnet\nparams:\n  input_size: {min: 33, max: 63}\n",
            "selects none of input_size's values",
        ),
        ("name: x\nfamily: carb-resnet\nparams:\n  block: [bottleneck]\n  depth: [10]\n", "no configuration"),
        ("- just\n- a list\n", "the top level must be a mapping"),
        ("name: [unclosed\n", "is not valid YAML"),
    ],
)
def test_bad_yaml_names_the_key(tmp_path, text: str, message: str) -> None:
    with pytest.raises(SpaceError, match=message.replace("(", r"\(").replace("[", r"\[")):
        get(write(tmp_path, text))


def test_cli_reports_yaml_errors_with_exit_2(tmp_path) -> None:
    from .helpers import infercast

    path = write(tmp_path, "name: x\nfamily: carb-resnet\nparams:\n  width: [9.0]\n")
    result = infercast("space", "show", path)
    assert result.returncode == 2 and "params.width" in result.stderr and "Traceback" not in result.stderr
