from __future__ import annotations

import math

import pytest
from torch import nn

from infercast import capture, featurize
from infercast.features import FEATURE_DOCS, FEATURE_NAMES, FEATURE_SCHEMA_VERSION
from infercast.graph import OP_GROUPS


def small_net() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1, groups=16),
        nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    ).eval()


# Schema 1 as stored in every store and predictor directory: a change to the columns or their order
# without a new FEATURE_SCHEMA_VERSION (and this pin) would silently mis-read old files.
SCHEMA_1_BASE = (
    "batch", "in_channels", "in_h", "in_w", "flops", "macs", "params", "weight_bytes",
    "activation_bytes", "peak_activation_bytes", "input_bytes", "arithmetic_intensity", "depth",
    "n_ops", "max_channels", "conv_flops_share",
)  # fmt: skip


def test_schema_is_pinned_to_its_version_and_documented() -> None:
    assert FEATURE_SCHEMA_VERSION == 1
    expected = (
        *SCHEMA_1_BASE,
        *(f"count_{g}" for g in OP_GROUPS),
        *(f"flops_share_{g}" for g in OP_GROUPS),
    )
    assert expected == FEATURE_NAMES
    assert (
        *("conv", "dwconv", "gconv", "linear", "pool_max", "pool_avg", "global_pool"),
        *("concat", "add", "mul", "act", "bn", "other"),
    ) == OP_GROUPS
    undocumented = [name for name in FEATURE_NAMES if len(FEATURE_DOCS.get(name, "").split()) < 2]
    assert undocumented == []


def test_feature_values() -> None:
    graph = capture(small_net(), (2, 3, 32, 32))
    values = featurize(graph)
    assert list(values) == list(FEATURE_NAMES)
    assert (values["batch"], values["in_channels"], values["in_h"], values["in_w"]) == (2, 3, 32, 32)
    assert values["flops"] == graph.flops and values["params"] == graph.params
    assert values["depth"] == 3  # conv, dwconv, linear
    assert values["max_channels"] == 16
    assert values["count_dwconv"] == 1 and values["count_pool_max"] == 1 and values["count_act"] == 1
    assert values["n_ops"] == 7  # flatten is a view
    shares = sum(values[f"flops_share_{g}"] for g in OP_GROUPS)
    assert shares == pytest.approx(1.0)
    expected = graph.flops / (graph.weight_bytes + graph.activation_bytes)
    assert math.isclose(values["arithmetic_intensity"], expected)


def test_a_pointwise_layer_over_a_map_counts_as_the_convolution_it_equals() -> None:
    """ConvNeXt's fully connected layers on a channels-last map are 1×1 convolutions in the
    feature vector, as in the kernel tables; the classifier stays the one linear op."""
    from .measure_models import pointwise_head

    values = featurize(capture(pointwise_head(), pointwise_head.input_shape))
    assert values["count_conv"] == 2 and values["count_linear"] == 1
    assert values["flops_share_linear"] == pytest.approx(2 * 32 * 10 / values["flops"])
