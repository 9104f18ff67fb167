"""Two-stage screening: Pareto sorting, the budget filter with its margin, errors, validation.

The predictor here learns a known law (see test_predict._law) from real analytic features of
carb-resnet configs, so what screening must keep and drop is known.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from infercast import screen, space
from infercast.predictors import CascadeBlend
from infercast.predictors.data import feature_frame
from infercast.screen.pareto import crowding_distance, first_front, shortlist

from .helpers import SMALL, cost_law, infercast

PLATFORM = {
    "id": "test-platform",
    "backend": "ort-cpu",
    "settings": {"threads": 1, "opt_level": "all", "device": "cpu"},
    "fingerprint": {},
}
TINY = """
name: tiny
family: carb-resnet
params:
  block: [basic]
  depth: [8, 10]
  width: [0.1, 0.25]
  early_downsample: [true]
  input_size: [32]
  batch: [1]
  precision: [fp32]
"""


@pytest.fixture(scope="module")
def predictor(tmp_path_factory) -> tuple[CascadeBlend, Path]:
    family = space.get("carb-resnet")
    configs = family.sample(800, seed=5, stratified=True)
    x = feature_frame(family.features(configs), {"threads": 1})
    blend = CascadeBlend(**SMALL).fit(x, cost_law(x, np.random.default_rng(1)))
    folder = tmp_path_factory.mktemp("screen") / "predictor"
    blend.save(folder, {"platform": PLATFORM, "training": {"models": ["space:carb-resnet"]}})
    return CascadeBlend.load(folder), folder


def _dominated(values: np.ndarray, row: np.ndarray) -> bool:
    return bool(np.any(np.all(values <= row, axis=1) & np.any(values < row, axis=1)))


@pytest.mark.parametrize("objectives", [2, 3])
def test_first_front_equals_brute_force(objectives: int) -> None:
    rng = np.random.default_rng(0)
    values = np.round(rng.random((400, objectives)) * 20)  # ties and duplicates included
    expected = {i for i in range(len(values)) if not _dominated(values, values[i])}
    assert set(first_front(values).tolist()) == expected
    assert set(first_front(values, block=16).tolist()) == expected  # blocks of rows settled at once


def test_crowding_and_weighted_shortlist() -> None:
    values = np.array([[1.0, 9.0], [2.0, 5.0], [3.0, 4.5], [9.0, 1.0], [5.0, 5.0]])
    assert np.isinf(crowding_distance(values[:4])[[0, 3]]).all()
    rows, ranks = shortlist(values, 2, weights=np.array([0.0, 1.0]))
    assert rows.tolist() == [3, 2] and ranks.tolist() == [1, 1]
    rows, ranks = shortlist(values, 5)
    assert sorted(rows.tolist()) == [0, 1, 2, 3, 4] and ranks.tolist()[-1] == 2


def test_screen_keeps_only_feasible_non_dominated_candidates(predictor) -> None:
    blend, _ = predictor
    candidates = screen.from_space("carb-resnet", 20_000, seed=1)
    budgets = screen.Budgets(max_latency_ms=20.0, max_memory_mb=200.0)
    result = screen.screen(blend, candidates, budgets, ["latency", "memory", "params"], shortlist=6)
    stage1 = result.stage1
    removed = stage1["removed_by"]
    # a candidate over both budgets counts in both: survivors lie between the two bounds
    assert 20_000 - sum(removed.values()) <= stage1["survivors"] <= 20_000 - max(removed.values())
    assert stage1["distinct_survivors"] <= stage1["survivors"]
    assert all(0 < k < 20_000 for k in removed.values())
    picked = result.shortlist
    assert len(picked) == 6
    assert (picked["latency_ms"] <= 20.0).all() and (picked["peak_memory_mb"] <= 200.0).all()
    # a config's parameters keep their names; its features are f_<name> (depth means different things)
    for _, row in picked.iterrows():
        assert f"depth={row['depth']}&" in row["model"] and row["f_depth"] > 0
    # no feasible re-scored candidate dominates a first-front pick
    feasible = screen.stage_two(
        blend, screen.stage_one(blend, candidates, budgets, 0.05)[0], candidates, budgets
    )[0].query("feasible")
    values = feasible[["latency_ms", "peak_memory_mb", "f_params"]].to_numpy()
    for _, row in picked[picked["front"] == 1].iterrows():
        assert not _dominated(values, row[["latency_ms", "peak_memory_mb", "f_params"]].to_numpy(dtype=float))


def test_a_lower_risk_keeps_more_candidates(predictor) -> None:
    blend, _ = predictor
    candidates = screen.from_space("carb-resnet", 20_000, seed=2)
    budgets = screen.Budgets(max_latency_ms=10.0)
    loose = screen.stage_one(blend, candidates, budgets, risk=0.01)[1]["survivors"]
    tight = screen.stage_one(blend, candidates, budgets, risk=0.4)[1]["survivors"]
    assert loose > tight


def test_impossible_budgets_name_the_closest_candidates(predictor) -> None:
    blend, _ = predictor
    candidates = screen.from_space("carb-resnet", 5_000, seed=3)
    result = screen.screen(blend, candidates, screen.Budgets(max_latency_ms=1e-6), ["latency"])
    assert result.shortlist.empty and "no candidate meets" in result.message
    assert len(result.closest) == 10 and result.closest["model"].str.startswith("space:carb-resnet").all()


@pytest.mark.parametrize(
    ("objectives", "budgets", "message"),
    [
        (["latency", "speed"], {"max_latency_ms": 5.0}, "unknown objective"),
        (["latency", "latency"], {"max_latency_ms": 5.0}, "distinct"),
        (["latency", "energy"], {"max_latency_ms": 5.0}, "cannot predict energy"),
        (["latency"], {"max_energy_j": 1.0}, "cannot predict energy"),
    ],
)
def test_bad_requests_are_refused(predictor, objectives, budgets, message) -> None:
    blend, _ = predictor
    candidates = screen.from_space("carb-resnet", 100)
    with pytest.raises(screen.ScreenError, match=message):
        screen.screen(blend, candidates, screen.Budgets(**budgets), objectives)


def test_a_predictor_for_another_space_or_platform_is_refused(predictor) -> None:
    blend, _ = predictor
    with pytest.raises(screen.ScreenError, match="not on space:mobile-nas"):
        screen.screen(blend, screen.from_space("mobile-nas", 100), screen.Budgets(1.0), ["latency"])
    with pytest.raises(screen.ScreenError, match="not other-gpu"):
        screen.screen(
            blend,
            screen.from_space("carb-resnet", 100),
            screen.Budgets(1.0),
            ["latency"],
            platform="other-gpu",
        )
    with pytest.raises(screen.ScreenError, match="must be a positive number"):
        screen.Budgets(max_memory_mb=-1)


def test_cli_screen_json_and_errors(predictor, tmp_path) -> None:

    _, folder = predictor
    args = [
        "screen",
        "--predictor",
        str(folder),
        "--space",
        "carb-resnet",
        "--n",
        "3000",
        "--max-latency-ms",
        "15",
    ]
    result = infercast(*args, "--shortlist", "3", "--out", str(tmp_path / "short.parquet"), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["candidates"] == 3000 and len(data["shortlist"]) == 3
    assert {"latency_ms", "latency_ms_low", "latency_ms_high", "ood", "front", "model"} <= set(
        data["shortlist"][0]
    )
    assert (tmp_path / "short.parquet").is_file()
    bad = infercast(*args, "--objectives", "latency,beauty")
    assert bad.returncode == 2 and "unknown objective" in bad.stderr
    none = infercast("screen", "--predictor", str(folder), "--space", "carb-resnet", "--n", "10")
    assert none.returncode == 2 and "at least one budget" in none.stderr


def test_validation_measures_the_shortlist_and_classifies_it(predictor, tmp_path) -> None:
    from infercast.measurement import Protocol

    blend, _ = predictor
    (tmp_path / "tiny.yaml").write_text(TINY)
    candidates = screen.from_space(str(tmp_path / "tiny.yaml"), 50, seed=0)
    result = screen.screen(
        blend, candidates, screen.Budgets(max_memory_mb=1e4), ["latency", "params"], shortlist=2
    )
    protocol = Protocol(round_s=0.05, min_rounds=3, cap_s=0.5, group=2)
    report = screen.validate(result, blend, candidates, tmp_path / "runs.db", protocol, probe_rejected=1)
    assert (
        sum(report["counts"].values())
        == len(report["rows"])
        == len(result.shortlist) + len(result.rejected_near)
    )
    measured = [r for r in report["rows"] if "measured_latency_ms" in r]
    assert measured and all(r["measured_latency_ms"] > 0 for r in measured)
    from infercast.store import Store

    with Store(tmp_path / "runs.db") as store:
        stored = store.measurements()
    assert set(stored["campaign"]) == {report["campaign"]}
    assert json.loads(stored.loc[0, "features"])["flops"] > 0
