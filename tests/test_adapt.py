"""Few-shot adaptation: recalibration from one source, mixing several sources, choosing the k
configs, artifacts. Targets follow known laws of real design-space features (as in
test_predict), so what a correct adaptation must reach is known."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from infercast import space
from infercast.predictors import Adapted, CascadeBlend, PredictorError, load, select_configs
from infercast.predictors.adapted import load_sources
from infercast.predictors.data import feature_frame
from infercast.predictors.sources import source_log_predictions

LIGHT = {"order": ("latency",), "n_estimators": 100, "forest_estimators": 50, "n_folds": 3, "n_jobs": 1}


def _compute_bound(x: pd.DataFrame) -> np.ndarray:
    return (x["flops"] / 40e6).to_numpy()


def _overhead_bound(x: pd.DataFrame) -> np.ndarray:
    return (0.05 * x["n_ops"] + x["activation_bytes"] / 2e8).to_numpy()


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    family = space.get("carb-resnet")
    configs = family.sample(900, seed=5, stratified=True)
    configs = configs[(configs["batch"] <= 8) & (configs["input_size"] <= 128)].reset_index(drop=True)
    return feature_frame(family.features(configs), {"threads": 1})


@pytest.fixture(scope="module")
def sources(data) -> list[CascadeBlend]:
    """Two source platforms: one compute-bound, one bound by per-op overhead and memory traffic."""
    half = len(data) // 2
    fitted = []
    for law in (_compute_bound, _overhead_bound):
        y = pd.DataFrame({"latency_ms": law(data)})
        fitted.append(CascadeBlend(**LIGHT).fit(data.iloc[:half], y.iloc[:half]))
    return fitted


def _frame(values: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"latency_ms": values})


def test_one_source_is_recalibrated_from_ten_measurements(data, sources) -> None:
    # the new device is faster and scales super-linearly: the source alone is far off
    truth = 0.3 * _compute_bound(data) ** 1.1
    chosen = select_configs(sources[:1], data, 10)
    model = Adapted(sources[:1]).fit(data.iloc[chosen], _frame(truth[chosen]))
    rest = np.setdiff1d(np.arange(len(data)), chosen)
    scores = model.evaluate(data.iloc[rest], _frame(truth[rest]))["latency"]
    assert scores["sources_unadapted"][0]["within_10pct"] < 0.05
    assert scores["within_10pct"] > 0.8 and scores["r2_log"] > 0.98
    assert 0.7 < scores["coverage"] <= 1.0
    assert model.targets_["latency"].residual is None  # below min_residual measurements


def test_several_sources_are_mixed_by_how_the_target_relates_to_them(data, sources) -> None:
    # a device between the two: geometric mix 0.7 / 0.3 of the two laws, times 1.3
    truth = 1.3 * _compute_bound(data) ** 0.7 * _overhead_bound(data) ** 0.3
    chosen = select_configs(sources, data, 20)
    model = Adapted(sources, min_residual=50).fit(data.iloc[chosen], _frame(truth[chosen]))
    weights = model.targets_["latency"].weights
    assert weights[0] > weights[1] and abs(weights.sum() - 1.0) < 0.2
    rest = np.setdiff1d(np.arange(len(data)), chosen)
    scores = model.evaluate(data.iloc[rest], _frame(truth[rest]))["latency"]
    best_single = max(s["spearman"] for s in scores["sources_unadapted"])
    assert scores["spearman"] > best_single and scores["within_10pct"] > 0.8


def test_spread_selection_covers_the_predicted_range(data, sources) -> None:
    chosen = select_configs(sources, data, 8, "spread")
    assert len(set(chosen)) == 8
    predicted = source_log_predictions(sources, data, "latency")
    for column in range(predicted.shape[1]):
        span = np.ptp(predicted[chosen, column]) / np.ptp(predicted[:, column])
        assert span > 0.8  # the k-centre reaches the extremes, not a cluster
    again = select_configs(sources, data, 8, "random", seed=1)
    assert np.array_equal(again, select_configs(sources, data, 8, "random", seed=1))
    with pytest.raises(PredictorError, match="k=0"):
        select_configs(sources, data, 0)
    with pytest.raises(PredictorError, match="selection='best'"):
        select_configs(sources, data, 5, "best")


def test_adapted_predictor_round_trips_through_its_directory(data, sources, tmp_path) -> None:
    folders = []
    for i, source in enumerate(sources):
        source.save(tmp_path / f"source{i}", {"platform": {"id": f"p{i}", "settings": {"threads": 1}}})
        folders.append(tmp_path / f"source{i}")
    truth = 2.0 * _overhead_bound(data)
    model = Adapted(folders, min_residual=10)
    chosen = select_configs(load_sources(folders)[0], data, 30)
    model.fit(data.iloc[chosen], _frame(truth[chosen]))
    model.save(tmp_path / "adapted", {"platform": {"id": "target", "settings": {"threads": 1}}})
    loaded = load(tmp_path / "adapted")
    assert isinstance(loaded, Adapted) and loaded.metadata_["platform"]["id"] == "target"
    probe = data.iloc[:50]
    pd.testing.assert_frame_equal(loaded.predict(probe), model.predict(probe))
    assert (tmp_path / "adapted" / "sources" / "1" / "meta.json").is_file()  # self-contained

    meta = json.loads((tmp_path / "adapted" / "meta.json").read_text())
    meta["fits"]["latency"]["weights"] = [1.0]
    (tmp_path / "adapted" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(PredictorError, match="1 weights for 2 sources"):
        load(tmp_path / "adapted")
    meta["sources"] = ["../source0"]
    (tmp_path / "adapted" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(PredictorError, match="outside the directory"):
        load(tmp_path / "adapted")


def test_adapted_refuses_what_it_cannot_fit(data, sources) -> None:
    with pytest.raises(PredictorError, match="at least one source"):
        Adapted([]).fit(data.iloc[:5], _frame(np.ones(5)))
    with pytest.raises(PredictorError, match="needs 3 or more"):
        Adapted(sources).fit(data.iloc[:2], _frame(np.ones(2)))
    with pytest.raises(PredictorError, match="min_residual=2"):
        Adapted(sources, min_residual=2).fit(data.iloc[:5], _frame(np.ones(5)))
