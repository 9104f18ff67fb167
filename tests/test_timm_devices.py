"""Desktop GPUs and a laptop CPU from timm's benchmark tables: attention as an operator, work per
sample as PyTorch runs it eagerly, capture at a large batch without running, the shipped
settings and their prediction per step (the shipped table; no ``../shared`` needed)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from tools.timm_tables import setting_of, write_table
from torch import nn

import infercast
from infercast.compat import import_torchvision
from infercast.graph.torch_capture import capture_module
from infercast.predictors.devices import device_info, get_device, list_devices, timm_bench
from infercast.predictors.devices.eager import (
    PER_STEP,
    PRODUCT_GROUPS,
    WORK_COLUMNS,
    at_batch,
    eager_work,
    group_of,
    split_per_step,
)

from .helpers import StandardisedConv, matmul_flops, reference_flops

pytestmark = pytest.mark.usefixtures("fresh_cache")


class _Attention(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4, fused: bool = True) -> None:
        super().__init__()
        self.heads = heads
        self.fused = fused
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v)
        else:
            y = (q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5).softmax(-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, n, c))


def test_attention_is_one_operator_counted_as_pytorch_counts_it() -> None:
    module = _Attention().eval()
    graph = infercast.capture(module, input_shape=(2, 10, 32))
    attention = [n for n in graph.nodes if n.kind == "attention"]
    assert len(attention) == 1 and group_of("attention") == "attention"
    # query-key scores and the weighted values: 2 × (2·4·10·10·8) multiply-accumulates
    assert attention[0].macs == 2 * 2 * 4 * 10 * 10 * 8
    # PyTorch counts no FLOPs for the fused kernel on a CPU: the same attention written out is the reference
    written_out = _Attention(fused=False).eval()
    assert matmul_flops(graph) + 2 * attention[0].macs == reference_flops(written_out, (2, 10, 32))


def test_work_is_per_sample_whatever_the_batch_captured_on_meta_tensors() -> None:
    if importlib.util.find_spec("timm") is None:
        pytest.skip("timm is not installed")
    import_torchvision()  # timm imports torchvision: through infercast's shim first
    import timm

    with torch.device("meta"):  # no weights: nothing here could run the network
        module = timm.create_model("test_vit", pretrained=False)
    one = eager_work(capture_module(module, (1, 3, 160, 160), "test_vit"))
    many = eager_work(capture_module(module, (1024, 3, 160, 160), "test_vit"))
    assert set(one) == set(WORK_COLUMNS) and one["gflops_attention"] > 0 and one["gflops_linear"] > 0
    for column in WORK_COLUMNS:
        # the products' work grows with the batch; what a step reads once (weights, a position
        # table broadcast over the batch) is shared by its samples
        if column.startswith(tuple(f"gflops_{g}" for g in PRODUCT_GROUPS)) or column.startswith("kernels_"):
            assert many[column] == pytest.approx(one[column], rel=1e-6), column
        else:
            assert many[column] <= one[column] * (1 + 1e-6), column
    assert many["mb_weights"] == one["mb_weights"] and many["mb_linear"] < one["mb_linear"]


def test_work_per_sample_and_per_step_from_batches_1_and_2_gives_any_batch() -> None:
    module = nn.Sequential(
        StandardisedConv(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.LazyLinear(5)
    )
    module(torch.zeros(1, 3, 8, 8))
    one, two, many = (eager_work(capture_module(module.eval(), (b, 3, 8, 8), "m")) for b in (1, 2, 64))
    parts = split_per_step(one, two)
    # standardising the kernel and reading the weights happen once a step
    assert parts["mb_conv" + PER_STEP] > 0 and parts["gflops_bn" + PER_STEP] > 0
    at_64 = at_batch(pd.DataFrame([parts]), 64).iloc[0]
    for column in WORK_COLUMNS:
        assert at_64[column] == pytest.approx(many[column], rel=1e-9, abs=1e-12), column


def test_every_timm_table_has_a_setting_and_every_setting_a_card() -> None:
    for name, setting in timm_bench.SETTINGS.items():
        assert setting_of(Path(f"benchmark-infer-{setting.table}.csv")) == name
    with pytest.raises(ValueError, match="not one of the timm tables"):
        setting_of(Path("benchmark-infer-amp-nchw-pt999-cu999-h100.csv"))
    listed = {i.name: i for i in list_devices()}
    for name in (
        "rtx4090/torch-amp",
        "rtx4090/torch-amp-compile",
        "rtx3090/torch-amp",
        "i7-12700h/torch-compile",
    ):
        info = listed[name]
        assert info.card["latency_only"] == timm_bench.LATENCY_ONLY
        assert info.card["n"] >= 400 and 0 < info.card["median_abs_error_pct"] < 100
        assert set(info.card["splits"]) == {"without attention (CNNs)", "with attention (transformers)"}
    assert (
        device_info("rtx4090/torch-amp").batch == 1024 and device_info("i7-12700h/torch-compile").batch == 1
    )


def test_families_group_ports_with_their_originals() -> None:
    assert timm_bench.family("tf_efficientnet_b0") == timm_bench.family("efficientnet_b3") == "efficientnet"
    assert timm_bench.family("vit_base_patch16_224") == "vit"
    assert timm_bench.family("resnet50d") == "resnet"


def test_a_step_is_the_batch_times_a_sample_and_a_batch_never_measured_is_flagged() -> None:
    module = _TinyCnn().eval()
    graphs = [infercast.capture(module, input_shape=(b, 3, 64, 64)) for b in (256, 512, 1)]
    predicted = get_device("rtx4090/torch-amp").predict_graphs(graphs)
    per_sample = predicted["latency_ms"].to_numpy() / np.array([256, 512, 1])
    # the kernels and weights of a step are shared by its samples: a larger batch costs no more a sample
    assert per_sample[1] <= per_sample[0] and predicted["latency_ms"][1] > predicted["latency_ms"][0]
    assert (predicted["latency_ms_low"] < predicted["latency_ms"]).all()
    assert (predicted["latency_ms"] < predicted["latency_ms_high"]).all()
    assert not predicted["ood"][0] or "batch" not in predicted["ood_reason"][0]
    assert predicted["ood"][2] and "measured batches" in predicted["ood_reason"][2]
    assert "this is batch 1" in predicted["ood_reason"][2]


def test_predict_names_why_there_is_no_memory_or_energy() -> None:
    result = infercast.predict(_TinyCnn(), device="rtx3090/torch-amp", input_shape=(512, 3, 64, 64))
    assert result["latency_ms"] > 0 and result["peak_memory_mb"] is None
    assert result["energy_j_reason"].endswith(timm_bench.LATENCY_ONLY)
    # the input's batch is the step's, not the table's usual one (which --batch-size still overrides)
    assert result["input_shape"] == [512, 3, 64, 64]
    half = infercast.predict(_TinyCnn(), device="rtx3090/torch-amp", input_shape=(256, 3, 64, 64))
    assert half["input_shape"] == [256, 3, 64, 64] and half["latency_ms"] < result["latency_ms"]
    usual = device_info("rtx3090/torch-amp").batch
    forced = infercast.predict(
        _TinyCnn(), device="rtx3090/torch-amp", input_shape=(256, 3, 64, 64), batch_size=usual
    )
    assert forced["input_shape"] == [usual, 3, 64, 64]


def test_the_shipped_table_is_rebuilt_from_timm_csvs(tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    tables.mkdir()
    header = (
        "model,infer_img_size,infer_samples_per_sec,infer_step_time,infer_batch_size,"
        "param_count,infer_gmacs,infer_macts\n"
    )
    (tables / "benchmark-infer-amp-nchw-pt291-cu128-4090.csv").write_text(
        header + "m1,224,1000,1024,1024,5,1,2\nm2,224,500,512,256,9,2,3\n"
    )
    work = tmp_path / "work.jsonl"
    ones = dict.fromkeys(WORK_COLUMNS, 1.0)
    work.write_text(
        "\n".join(
            [
                json.dumps({"model": "m1", "side": 224, **split_per_step(ones, ones)}),
                '{"model": "m2", "side": 224, "error": "RuntimeError: Unknown model (m2)"}',
            ]
        )
    )
    from tools.timm_tables import read_tables

    wide = write_table(read_tables(tables), work, tmp_path / "out.parquet")
    assert list(wide["model"]) == ["m1"]
    assert wide.loc[0, "ms_per_sample@rtx4090/torch-amp"] == pytest.approx(1.0)
    assert wide.loc[0, "batch@rtx4090/torch-amp"] == 1024
    assert (tmp_path / "timm_failed.json").read_text().count("Unknown model (m2)") == 1


class _TinyCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 32, 3)
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).mean((2, 3)))


def test_a_mix_of_work_unlike_every_training_family_is_flagged() -> None:
    from infercast.predictors.devices.work_mix import WorkMix

    rng = np.random.default_rng(0)
    kinds = ("conv", "linear", "pool")

    def rows(shares: list[tuple[float, float, float]]) -> pd.DataFrame:
        table = {}
        for i, kind in enumerate(kinds):
            table[f"gflops_{kind}"] = [s[i] for s in shares]
            table[f"mb_{kind}"] = [s[i] for s in shares]
        table["gflops_products_under_1m"] = 1.0  # a size bin and the weights are not kinds of work
        table["mb_weights_per_sample"] = 5.0
        return pd.DataFrame(table)

    families = {"convs": (0.9, 0.1, 0.0), "mlps": (0.1, 0.9, 0.0), "mixed": (0.5, 0.5, 0.0)}
    shares = [
        tuple(np.clip(np.array(m) + rng.normal(0, 0.02, 3), 0, None))
        for m in families.values()
        for _ in range(8)
    ]
    mix = WorkMix().fit(rows(shares), [f for f in families for _ in range(8)])
    flagged, why = mix.flag(rows([(0.88, 0.12, 0.0), (0.2, 0.1, 0.7)]))
    assert flagged.tolist() == [False, True]
    assert why[0] == "" and why[1].startswith("its mix of work is unlike any network it learned from")
