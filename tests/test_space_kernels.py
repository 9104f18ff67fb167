"""The ``kernels`` space of kernel campaigns: sampled shapes stay inside the declared ranges (of the
space or a YAML restriction), are canonical, and every op builds one executed kernel."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from infercast.features import FEATURE_NAMES, featurize
from infercast.graph import capture
from infercast.space import SpaceError, get
from infercast.space.kernel_networks import ACTIVATIONS, KERNEL_OPS, canonical, kernel_shapes, sample_around
from infercast.space.nets.kernel_networks import ACTIVATIONS as ACTIVATION_MODULES

RESTRICTED = """
name: small-kernels
family: kernels
params:
  op: [conv, dwconv, add, pool_max, se]
  side: {min: 4, max: 32}
  cin: {min: 8, max: 96}
  cout: {min: 8, max: 96}
  act: [none, relu, sigmoid]
"""


def _inside(space, frame: pd.DataFrame) -> None:
    for param in space.params:
        assert frame[param.name].isin(param.choices).all(), param.name
    for row in frame[[p.name for p in space.params]].to_dict(orient="records"):
        assert canonical(row) == row
        space.validate(row)  # the cross-parameter rules hold too


def test_sampled_kernels_follow_real_shapes_inside_the_declared_ranges(tmp_path) -> None:
    space = get("kernels")
    sample = space.sample(600, seed=1)
    _inside(space, sample)
    assert sample["id"].duplicated().mean() < 0.05  # jittered draws rarely land on one config
    # the harvested mix: mostly convolutions, every harvested op represented in a large sample
    assert sample["op"].value_counts().idxmax() == "conv"
    assert set(sample["op"]) >= {"conv", "dwconv", "add", "concat", "se"}
    assert set(kernel_shapes()["op"]) <= set(KERNEL_OPS)
    again = space.sample(600, seed=1)
    pd.testing.assert_frame_equal(sample, again)  # a campaign's sample is reproducible (resume)

    path = tmp_path / "small.yaml"
    path.write_text(RESTRICTED)
    small = get(str(path))
    restricted = small.sample(300, seed=2)
    _inside(small, restricted)
    assert set(restricted["op"]) <= {"conv", "dwconv", "add", "pool_max", "se"}
    assert restricted["side"].between(4, 32).all() and restricted["cin"].between(8, 96).all()


def test_kernels_drawn_around_given_ones_stay_near_them_inside_the_space(tmp_path) -> None:
    """An adaptive campaign's second half: neighbours of the kernels it names, nothing else."""
    path = tmp_path / "small.yaml"
    path.write_text(RESTRICTED)
    small = get(str(path))
    pool = small.sample(200, seed=3)
    names = [p.name for p in small.params]
    shapes = pd.concat([pool[pool["op"] == op].head(1) for op in ("dwconv", "se")])[names]
    around = sample_around(small, shapes, 40, seed=0)
    assert len(around) == 40 and set(around["op"]) == {"dwconv", "se"}
    _inside(small, around)
    for op, origin in shapes.set_index("op").iterrows():
        drawn = around[around["op"] == op]
        assert drawn["side"].between(0.75 * origin["side"] - 1, 1.25 * origin["side"] + 1).all(), op
        assert drawn["cin"].between(0.75 * origin["cin"] - 8, 1.25 * origin["cin"] + 8).all(), op
    pd.testing.assert_frame_equal(around, sample_around(small, shapes, 40, seed=0))
    with pytest.raises(SpaceError, match="not the kernels space"):
        sample_around(get("carb-resnet"), shapes, 4)


def test_every_op_runs_as_one_kernel() -> None:
    space = get("kernels")
    configs = {
        "conv": "op=conv&side=14&cin=16&cout=24&kernel=3&stride=2&act=relu",
        "dwconv": "op=dwconv&side=14&cin=16&cout=16&groups=16&kernel=5&act=hswish",
        "gconv": "op=gconv&side=14&cin=16&cout=32&groups=4&kernel=3",
        "linear": "op=linear&side=1&cin=64&cout=10&kernel=1",
        "pool_max": "op=pool_max&side=16&cin=8&cout=8&kernel=3&stride=2&act=none",
        "pool_avg": "op=pool_avg&side=16&cin=8&cout=8&kernel=3&stride=1&act=none",
        "global_pool": "op=global_pool&side=7&cin=32&cout=32&kernel=1&act=none",
        "se": "op=se&side=7&cin=32&cout=8&kernel=1&act=hsigmoid",
        "add": "op=add&side=7&cin=32&cout=32&kernel=1&act=relu",
        "concat": "op=concat&side=7&cin=16&cout=24&kernel=1&act=none",
        "act": "op=act&side=7&cin=16&cout=16&kernel=1&act=swish",
        "shuffle": "op=shuffle&side=7&cin=16&cout=16&groups=4&kernel=1&act=none",
        "split": "op=split&side=7&cin=16&cout=16&groups=2&kernel=1&act=none",
        "upsample": "op=upsample&side=7&cin=16&cout=16&kernel=1&stride=2&act=none",
    }
    assert set(configs) == set(KERNEL_OPS)
    assert tuple(ACTIVATION_MODULES) == ACTIVATIONS  # the space's choices, each with its module
    for op, query in configs.items():
        config = space.parse(query)
        module = space.build(config)
        output = module(torch.randn(*space.input_shape(config)))
        assert all(torch.isfinite(t).all() for t in (output if isinstance(output, tuple) else (output,)))
        graph = capture(module, space.input_shape(config))
        closed = space.features(pd.DataFrame([config])).iloc[0]
        assert closed.to_dict() == pytest.approx(featurize(graph)), op
        assert list(closed.index) == list(FEATURE_NAMES)
    with pytest.raises(SpaceError, match="op=dwconv takes groups=16"):
        space.parse("op=dwconv&side=14&cin=16&cout=16&groups=1")
    with pytest.raises(SpaceError, match="op=gconv needs 1 < groups < cin"):
        space.parse("op=gconv&side=14&cin=16&cout=30&groups=4")


def test_jittered_channels_keep_the_granularity_real_networks_use() -> None:
    sample = get("kernels").sample(400, seed=3)
    harvested = kernel_shapes()
    for name in ("cin", "cout"):
        eights = sample[name] % 8 == 0
        # harvested channel counts are mostly multiples of 8, and drawing keeps them so
        assert eights.mean() >= (harvested[name] % 8 == 0).mean() - 0.05, name
