"""A loaded boosted model predicts a few rows from its file's arrays with numpy (``tree_walk``): the
very numbers of its library, missing values, zeros and values on a threshold included; many
rows, and models whose prediction is more than a sum of leaves, go to the library."""

from __future__ import annotations

from pathlib import Path

import lightgbm
import numpy as np
import pytest
import xgboost

from infercast.predictors import learners
from infercast.predictors.learners import LightGBMLearner, XGBoostLearner


def _table(rows: int = 400) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 6)).round(1)  # repeated values: rows land on thresholds
    y = 2 * np.nan_to_num(x[:, 0]) + np.sin(np.nan_to_num(x[:, 1])) + 3
    x[rng.random(x.shape) < 0.05] = np.nan
    x[rng.random(rows) < 0.2, 2] = 0.0
    return x, y


def _asked(x: np.ndarray) -> np.ndarray:
    """Rows to predict: the training rows, rows on every split value, NaN and zero everywhere."""
    rng = np.random.default_rng(1)
    edges = np.tile(np.unique(x[~np.isnan(x)])[:, None], (1, x.shape[1]))
    return np.vstack(
        [x, edges, np.full((1, x.shape[1]), np.nan), np.zeros((1, x.shape[1])), rng.normal(size=(50, 6))]
    )


def test_a_loaded_xgboost_model_walks_to_xgboosts_own_numbers(tmp_path: Path) -> None:
    x, y = _table()
    booster = xgboost.XGBRegressor(n_estimators=80, max_depth=6, learning_rate=0.1).fit(x, y).get_booster()
    path = tmp_path / "m.xgb.json"
    booster.save_model(str(path))
    loaded = XGBoostLearner.load(path)
    assert loaded.walk is not None and loaded.booster is None
    asked = _asked(x)
    expected = booster.inplace_predict(asked.astype(np.float32)).astype(np.float64)
    np.testing.assert_array_equal(loaded.predict(asked), expected)
    assert loaded.booster is None  # XGBoost was not needed


@pytest.mark.parametrize("missing", [{}, {"zero_as_missing": True}, {"use_missing": False}])
def test_a_loaded_lightgbm_model_walks_to_lightgbms_own_numbers(missing: dict, tmp_path: Path) -> None:
    x, y = _table()
    params = {"objective": "regression", "verbosity": -1, "num_leaves": 15, "min_child_samples": 5, **missing}
    booster = lightgbm.train(params, lightgbm.Dataset(x, y), num_boost_round=60)
    path = tmp_path / "m.lgb.txt"
    booster.save_model(str(path))
    loaded = LightGBMLearner.load(path)
    assert loaded.walk is not None
    asked = _asked(x)
    np.testing.assert_array_equal(loaded.predict(asked), booster.predict(asked))
    assert loaded.booster is None


def test_many_rows_load_the_library_and_predict_the_same(tmp_path: Path, monkeypatch) -> None:
    x, y = _table()
    fitted = XGBoostLearner(n_estimators=40).fit(x, y)
    fitted.save(tmp_path / "m.xgb.json")
    walked = XGBoostLearner.load(tmp_path / "m.xgb.json").predict(x)
    monkeypatch.setattr(learners, "WALK_STEPS", 10)
    native = XGBoostLearner.load(tmp_path / "m.xgb.json")
    np.testing.assert_array_equal(native.predict(x), walked)
    assert native.booster is not None
    np.testing.assert_array_equal(walked, fitted.predict(x))
    # a loaded model saved again is the file it came from, byte for byte
    XGBoostLearner.load(tmp_path / "m.xgb.json").save(tmp_path / "again.xgb.json")
    assert (tmp_path / "again.xgb.json").read_bytes() == (tmp_path / "m.xgb.json").read_bytes()


def test_a_model_that_is_more_than_a_sum_of_leaves_is_left_to_its_library(tmp_path: Path) -> None:
    x, y = _table()
    xgb = xgboost.XGBRegressor(n_estimators=20, objective="reg:pseudohubererror").fit(x, y).get_booster()
    xgb.save_model(str(tmp_path / "huber.xgb.json"))
    loaded = XGBoostLearner.load(tmp_path / "huber.xgb.json")
    assert loaded.walk is None
    np.testing.assert_array_equal(loaded.predict(x[:3]), xgb.inplace_predict(x[:3].astype(np.float32)))
    params = {"objective": "regression", "boosting": "rf", "bagging_fraction": 0.5, "bagging_freq": 1}
    forest = lightgbm.train({**params, "verbosity": -1}, lightgbm.Dataset(x, y), num_boost_round=10)
    forest.save_model(str(tmp_path / "rf.lgb.txt"))
    loaded_forest = LightGBMLearner.load(tmp_path / "rf.lgb.txt")
    assert loaded_forest.walk is None  # averaged, not summed
    np.testing.assert_allclose(loaded_forest.predict(x[:3]), forest.predict(x[:3]))
