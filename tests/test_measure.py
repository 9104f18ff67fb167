"""The measurement engine on real ONNX Runtime / PyTorch sessions in real worker processes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from infercast.measurement import CampaignSpec, MeasureError, Protocol, measure_model_strings, run_campaign
from infercast.measurement import backends as backend_registry
from infercast.measurement.protocol import bootstrap_median_ci, summarize
from infercast.measurement.sensors import NoSensor, detect

from .helpers import E2E_SPACE

MODELS = Path(__file__).with_name("measure_models.py")
FAST = Protocol(warmup_s=0.1, round_s=0.05, min_rounds=3, max_rounds=8, cap_s=1.0, timeout_s=60, group=3)


def model(name: str) -> str:
    return f"{MODELS}:{name}"


@pytest.mark.parametrize("backend", ["ort-cpu", "torch-cpu"])
def test_measures_a_real_model(backend: str) -> None:
    [result] = measure_model_strings([model("tiny")], backend, FAST)
    assert "failure" not in result, result
    assert result["n"] == len(result["samples"]) >= FAST.min_rounds
    assert result["low_ms"] <= result["median_ms"] <= result["p90_ms"] <= result["p99_ms"]
    assert result["ci_low_ms"] <= result["median_ms"] <= result["ci_high_ms"]
    assert result["peak_memory_bytes"] > 0
    expected = {"ort-cpu": "heap bytes the session holds", "torch-cpu": "torch.profiler running sum"}[backend]
    assert result["peak_memory_definition"].startswith(expected)
    sensor = detect("cpu")
    if isinstance(sensor, NoSensor):  # the reason is stored, never a number
        assert result["energy_j"] is None and result["energy_reason"] == sensor.reason
    else:  # a host with RAPL: a positive figure per inference, from that sensor
        assert result["energy_j"] > 0 and result["energy_sensor"] == sensor.name


def test_a_script_without_a_main_guard_measures_and_runs_once(tmp_path: Path) -> None:
    """A user's script run as ``python script.py``: its workers (measurement, guarded capture of
    user code) start without importing the script again, so it needs no
    ``if __name__ == "__main__":`` and its body runs once."""
    script = tmp_path / "script.py"
    script.write_text(
        "import infercast\n"
        "from infercast.measurement import Protocol\n"
        "print('body runs', flush=True)\n"
        f"fast = Protocol(warmup_s=0.1, round_s=0.05, min_rounds=3, max_rounds=8, cap_s=1.0)\n"
        f"[m] = infercast.measurement.measure_model_strings([{model('tiny')!r}], protocol=fast)\n"
        "print('measured', m['low_ms'] > 0, flush=True)\n"
        f"r = infercast.predict({model('tiny')!r}, device='pixel4/gpu', timeout_s=120)\n"
        "print('predicted', r['latency_ms'] > 0)\n"
    )
    ran = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.splitlines() == ["body runs", "measured True", "predicted True"], ran.stdout


def test_failures_are_recorded_and_the_rest_goes_on() -> None:
    protocol = Protocol(
        warmup_s=0.1, round_s=0.05, min_rounds=3, max_rounds=5, cap_s=1.0, timeout_s=8, group=2
    )
    names = ["raises", "hangs", "crashes", "exhausts_memory", "tiny"]
    results = measure_model_strings([model(n) for n in names], "torch-cpu", protocol, energy=False)
    by_name = {n: r for n, r in zip(names, results, strict=True)}
    assert by_name["raises"]["failure"] == "error" and "this layer is broken" in by_name["raises"]["reason"]
    assert by_name["hangs"]["failure"] == "timeout"
    assert by_name["crashes"]["failure"] == "crash" and "exit code 3" in by_name["crashes"]["reason"]
    assert by_name["exhausts_memory"]["failure"] == "out-of-memory"
    assert (
        "failure" not in by_name["tiny"]
        and by_name["tiny"]["energy_reason"] == "energy measurement was turned off"
    )


def test_settings_are_validated() -> None:
    with pytest.raises(MeasureError, match="unknown backend 'tvm'"):
        backend_registry.get("tvm")
    with pytest.raises(MeasureError, match="opt_level='max'; allowed: disabled, basic, extended, all"):
        backend_registry.get("ort-cpu", opt_level="max")
    with pytest.raises(MeasureError, match="threads must be a positive integer"):
        backend_registry.get("torch-cpu", threads=0)
    with pytest.raises(MeasureError, match="round_s=0 must be positive"):
        Protocol(round_s=0)
    with pytest.raises(MeasureError, match="min_rounds <= max_rounds"):
        Protocol(min_rounds=10, max_rounds=5)


def test_gpu_backends_say_why_they_cannot_run() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the CUDA backends run (see the GPU dataset script)")
    with pytest.raises(MeasureError, match="no CUDA GPU is visible"):
        backend_registry.get("torch-cuda")


def test_statistics_of_rounds() -> None:
    rounds = [[10.0, 10.2, 10.1], [13.0, 13.1, 12.9], [10.05, 10.0, 10.1], [10.2, 10.1, 10.3]]
    stats = summarize(rounds, drifted=1, steal=0.0, protocol=Protocol(bootstrap=200), cap_hit=False)
    samples = np.concatenate(rounds)
    assert stats["n"] == 12 and stats["median_ms"] == pytest.approx(np.median(samples))
    assert stats["low_ms"] == pytest.approx(10.05)  # the fastest round's median
    assert stats["ci_low_ms"] <= stats["median_ms"] <= stats["ci_high_ms"]
    assert stats["contention"] == pytest.approx(0.25)  # one of four rounds drifted
    assert stats["cv"] == pytest.approx(samples.std() / samples.mean())


def test_the_bootstrap_ci_is_the_median_of_each_resample_concatenated() -> None:
    rng = np.random.default_rng(5)
    for trial in range(60):
        # rounds of uneven sizes, a third of them with ties, one to eleven rounds
        rounds = [rng.lognormal(0, 0.1, int(rng.integers(1, 40))) for _ in range(int(rng.integers(1, 12)))]
        rounds = [(np.round(r, 1) if trial % 3 == 0 else r).tolist() for r in rounds]
        draws = np.random.default_rng(trial).integers(0, len(rounds), size=(200, len(rounds)))
        medians = [np.median(np.concatenate([rounds[i] for i in pick])) for pick in draws]
        expected = tuple(float(v) for v in np.percentile(medians, [2.5, 97.5]))
        assert bootstrap_median_ci(rounds, 200, np.random.default_rng(trial)) == expected


def test_ort_per_op_rows_follow_fusion(tmp_path) -> None:
    """With optimisations on, Conv+BN+ReLU run as one kernel; with them off, as three."""
    from infercast.measurement import Engine, Item, backends

    space = "space:carb-resnet?depth=8&width=0.25&input_size=32&early_downsample=0"
    rows: dict[str, list] = {}

    def fail(*failure: object) -> None:
        pytest.fail(str(failure))

    for level in ("all", "disabled"):
        engine = Engine(backends.get("ort-cpu", opt_level=level), FAST, op_runs=3)
        engine.run([Item(level, space)], lambda item, m: rows.__setitem__(item.key, m.ops), fail)
    fused, plain = rows["all"], rows["disabled"]
    assert len(fused) < len(plain)
    stem = fused[0]
    assert stem["op_type"] == "conv" and {"Conv", "Relu"} <= set(stem["fused_ops"])
    assert (stem["h_in"], stem["c_in"], stem["c_out"], stem["kernel_size"], stem["stride"]) == (
        32,
        3,
        16,
        3,
        1,
    )
    assert all(row["latency_ms"] > 0 for row in fused + plain)
    assert next(row["fused_ops"] for row in plain if row["executed_op"] == "Conv") == ["Conv"]
    assert sum(r["flops"] for r in fused) == sum(r["flops"] for r in plain)  # every op lands in one kernel


def test_torch_per_op_rows_are_one_per_aten_op() -> None:
    from infercast.measurement import Engine, Item, backends

    rows: dict[str, list] = {}
    engine = Engine(backends.get("torch-cpu"), FAST, op_runs=3)
    space = "space:carb-resnet?depth=8&width=0.25&input_size=32&early_downsample=0"
    engine.run(
        [Item("a", space)], lambda item, m: rows.__setitem__(item.key, m.ops), lambda *f: pytest.fail(str(f))
    )
    ops = rows["a"]
    assert [r["executed_op"] for r in ops[:3]] == ["aten::conv2d", "aten::batch_norm", "aten::relu"]
    stem = ops[0]
    assert (
        stem["op_type"],
        stem["c_in"],
        stem["c_out"],
        stem["h_out"],
        stem["kernel_size"],
        stem["groups"],
    ) == (
        "conv",
        3,
        16,
        32,
        3,
        1,
    )
    assert stem["flops"] == 2 * 16 * 32 * 32 * 3 * 9  # the profiler's FLOP count matches the graph's
    strided = next(r for r in ops if r["op_type"] == "conv" and r["stride"] == 2)
    assert strided["h_out"] == strided["h_in"] // 2
    assert ops[-1]["op_type"] == "linear" and ops[-1]["c_out"] == 1000


@pytest.mark.parametrize("backend", ["ort-cpu", "torch-cpu"])
def test_a_fully_connected_layer_at_every_position_is_a_1x1_convolution_kernel(backend: str) -> None:
    """The profiler's row of a pointwise layer on a channels-last map is the 1×1 convolution's (a
    GEMM over the 144 positions), as the predicted kernel table describes it; the classifier's
    one-row product stays linear. ONNX Runtime runs the exported MatMul + Add as one Gemm between
    two Reshapes it inserts: the Gemm is that kernel, the Reshapes compute nothing."""
    from infercast.graph import capture
    from infercast.measurement import Engine, Item, backends
    from infercast.predictors.fusion import kernel_table, rules_for

    from .measure_models import pointwise_head

    rows: dict[str, list] = {}
    engine = Engine(backends.get(backend), FAST, op_runs=3)
    engine.run(
        [Item("a", model("pointwise_head"))],
        lambda item, m: rows.__setitem__(item.key, m.ops),
        lambda *f: pytest.fail(str(f)),
    )
    shape = ("op_type", "h_in", "w_in", "c_in", "c_out", "kernel_size", "stride", "groups")
    measured = [tuple(r.get(c) for c in shape) for r in rows["a"] if r["op_type"] in ("conv", "linear")]
    pointwise = ("conv", 12, 12, 16, 32, 1, 1, 1)
    assert pointwise in measured and measured[-1][0] == "linear", measured
    if backend == "ort-cpu":
        gemm = next(r for r in rows["a"] if r["op_type"] == "conv" and r["kernel_size"] == 1)
        assert gemm["fused_ops"] == ["MatMul", "Add"] and gemm["flops"] == 2 * 144 * 16 * 32 + 144 * 32
        assert all(r["fused_ops"] == [] for r in rows["a"] if r["executed_op"] == "Reshape")
    predicted = kernel_table(capture(pointwise_head(), pointwise_head.input_shape), rules_for(backend))
    assert pointwise in [tuple(r) for r in predicted[list(shape)].itertuples(index=False)]


def test_a_campaign_past_its_deadline_still_measures_what_it_must_have(tmp_path) -> None:
    (tmp_path / "space.yaml").write_text(E2E_SPACE)
    rows, _ = CampaignSpec(str(tmp_path / "space.yaml"), n=6, stratified=False).rows()
    db, backend = tmp_path / "runs.db", backend_registry.get("ort-cpu", threads=1)

    def run(at_least: int) -> dict:
        # the deadline has passed before the campaign starts
        return run_campaign(
            rows, db, backend, "c", FAST, deadline=time.monotonic(), sentinels=False, at_least=at_least
        )

    assert run(0)["done"] == 0
    first = run(3)
    assert first["done"] == 3 and first["left"] == len(rows) - 3
    again = run(3)  # the store holds them: nothing more to measure
    assert again["done"] == 0 and again["skipped"] == 3
    assert run(5)["done"] == 2


def test_a_measured_design_space_string_keeps_its_space_as_a_profile_stores_it() -> None:
    from infercast.measurement.strings import model_configs

    kernel = "space:kernels?act=relu&batch=1&cin=16&cout=24&groups=1&kernel=1&op=conv&side=8&stride=1"
    rows, unusable = model_configs([kernel, model("tiny")])
    assert not unusable
    # a kernel network measured by `measure` is still told apart from networks to train on
    assert rows[0]["space"] == "kernels" and rows[0]["params"]["cout"] == 24
    assert rows[0]["params"]["input_shape"] == [1, 16, 8, 8]
    assert rows[1]["space"] is None and set(rows[1]["params"]) == {"input_shape"}
