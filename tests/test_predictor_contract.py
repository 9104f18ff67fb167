"""Every predictor kind follows one contract (``predictors.base.Predictor``): ``__init__`` stores
parameters only, ``clone`` and ``get_params`` work, nothing learned exists before ``fit``,
``score`` is a float and ``evaluate`` a dict, ``save`` → ``load`` (through the one registry of
kinds) predicts the same, and NumPy arrays and pandas frames are both accepted. One test per
rule, parametrized over every kind of ``KINDS``: a new kind without a case here fails."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from infercast import space
from infercast.predictors import KINDS, Predictor, PredictorError, load
from infercast.predictors.base import kind_class
from infercast.predictors.data import INPUT_COLUMNS, TARGET_COLUMNS, feature_frame
from infercast.predictors.devices.features import DEVICE_FEATURES

from .helpers import conv_kernel_row, cost_law


@dataclass
class Case:
    """A kind's small estimator and data: ``data()`` gives (X_train, y_train, X_test, y_test)."""

    make: Callable[[], Predictor]
    data: Callable[[], tuple[Any, Any, Any, Any]]
    # the columns X holds when it is a plain array, in order (None: an op table, named columns only)
    columns: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = INPUT_COLUMNS


def _configs() -> tuple[pd.DataFrame, pd.DataFrame]:
    carb = space.get("carb-resnet")
    configs = carb.sample(600, seed=5, stratified=True).drop_duplicates("id", ignore_index=True)
    configs = configs[(configs["batch"] <= 16) & (configs["input_size"] <= 128)].reset_index(drop=True)
    x = feature_frame(carb.features(configs), {"threads": 1})
    return x, cost_law(x, np.random.default_rng(0))


_CONFIGS: dict[str, tuple[pd.DataFrame, pd.DataFrame]] = {}


def configs() -> tuple[pd.DataFrame, pd.DataFrame]:
    if not _CONFIGS:
        _CONFIGS["carb"] = _configs()
    return _CONFIGS["carb"]


def model_level() -> tuple[Any, Any, Any, Any]:
    x, y = configs()
    return x.iloc[:60], y.iloc[:60], x.iloc[60:], y.iloc[60:]


def latency_only() -> tuple[Any, Any, Any, Any]:
    x, y = configs()
    return x.iloc[:60], y["latency_ms"].to_numpy()[:60], x.iloc[60:], y["latency_ms"].to_numpy()[60:]


def device_level() -> tuple[Any, Any, Any, Any]:
    rng = np.random.default_rng(1)
    x = pd.DataFrame(rng.uniform(0.01, 2.0, (40, len(DEVICE_FEATURES))), columns=list(DEVICE_FEATURES))
    x["constant"] = 1.0
    y = 3.0 * x["gflops_conv"] + 0.02 * x["kernels"] + 0.3 * x["mb_weights"] + 0.1
    y = (y * np.exp(rng.normal(0, 0.03, len(x)))).to_numpy()
    return x.iloc[:30], y[:30], x.iloc[30:], y[30:]


def op_tables() -> tuple[Any, Any, Any, Any]:
    rng = np.random.default_rng(2)
    rows, e2e = [], []
    for m in range(24):
        total = 0.0
        for k in range(int(rng.integers(6, 20))):
            conv = conv_kernel_row(f"m{m}", f"k{k}", rng)
            latency = conv["flops"] / 30e6 + 0.008
            rows.append({**conv, "latency_ms": latency})
            total += latency
        e2e.append({"model": f"m{m}", "latency_ms": total * 1.2})
    ops, e2e = pd.DataFrame(rows), pd.DataFrame(e2e)
    train = ops["model"].isin([f"m{m}" for m in range(18)])
    return ops[train], e2e.iloc[:18], ops[~train].drop(columns="latency_ms"), e2e.iloc[18:]


def _blend(**params: Any) -> Predictor:
    from infercast.predictors import CascadeBlend

    small = {"n_estimators": 20, "forest_estimators": 10, "n_folds": 3, "fast_estimators": 10, "n_jobs": 1}
    return CascadeBlend(**{**small, **params})


def _adapted() -> Predictor:
    from infercast.predictors import Adapted

    x, y, _, _ = model_level()
    return Adapted([_blend(order=("latency",)).fit(x, y)])


SHIPPED = "s10/1large"  # a source load can rebuild: a device-adapted predictor saves its name only


def _shipped() -> dict[str, Predictor]:
    from infercast.predictors.devices.recalibrated import shipped_sources

    return shipped_sources({SHIPPED})


def _device_adapted() -> Predictor:
    from infercast.predictors.devices.recalibrated import DeviceAdapted

    return DeviceAdapted(_shipped())


def _kind(name: str) -> Callable[..., Predictor]:
    return lambda **params: kind_class(name)(**params)


WORK = ("gflops_conv", "kernels", "constant")
CASES: dict[str, Case] = {
    "cascade-blend": Case(_blend, model_level),
    "opwise": Case(lambda: _kind("opwise")(n_estimators=20, n_folds=3, n_jobs=1), op_tables, None),
    "adapted": Case(_adapted, model_level),
    "physical-latency": Case(lambda: _kind("physical-latency")(features=WORK), device_level, WORK),
    "device-adapted": Case(_device_adapted, device_level, lambda: _shipped()[SHIPPED].columns_),
    "flops-proportional": Case(_kind("flops-proportional"), latency_only),
    "log-linear": Case(_kind("log-linear"), latency_only),
}


def test_every_registered_kind_has_a_case_and_names_itself() -> None:
    assert set(CASES) == set(KINDS)
    for kind in KINDS:
        assert kind_class(kind).kind == kind and issubclass(kind_class(kind), Predictor)


@pytest.fixture(params=sorted(KINDS))
def case(request) -> tuple[str, Case]:
    return request.param, CASES[request.param]


def _same(a: Any, b: Any) -> None:
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))
    else:
        np.testing.assert_array_equal(a, b)


def test_init_stores_parameters_only_and_clone_keeps_them(case) -> None:
    _, c = case
    model = c.make()
    params = model.get_params()
    assert set(params) == {p for p in inspect.signature(type(model).__init__).parameters if p != "self"}
    learned = [name for name in vars(model) if name.endswith("_")]
    assert learned == [] and set(vars(model)) == set(params)  # nothing fitted, nothing else set
    twin = clone(model)
    assert type(twin) is type(model) and twin.get_params().keys() == params.keys()
    with pytest.raises(PredictorError, match="not fitted"):
        model.predict(c.data()[2])


def test_score_is_a_float_and_evaluate_the_metrics(case) -> None:
    _, c = case
    x, y, x_test, y_test = c.data()
    model = c.make().fit(x, y)
    score = model.score(x_test, y_test)
    assert isinstance(score, float) and np.isfinite(score)
    metrics = model.evaluate(x_test, y_test)
    assert isinstance(metrics, dict) and metrics


def test_save_then_load_predicts_the_same(case, tmp_path) -> None:
    kind, c = case
    x, y, x_test, _ = c.data()
    model = c.make().fit(x, y)
    if kind == "adapted":  # an adapted predictor copies its sources' directories in
        source = model.sources_[0]
        source.save(tmp_path / "source")
        model = type(model)([tmp_path / "source"]).fit(x, y)
    model.save(tmp_path / "saved", {"note": "kept"})
    again = load(tmp_path / "saved")
    assert type(again) is type(model) and again.metadata_["note"] == "kept"
    _same(model.predict(x_test), again.predict(x_test))


def test_numpy_arrays_and_frames_give_the_same_predictions(case) -> None:
    kind, c = case
    if c.columns is None:
        pytest.skip(f"{kind} reads an op table: named columns are its input")
    x, y, x_test, _ = c.data()
    columns = list(c.columns() if callable(c.columns) else c.columns)
    on_frames = c.make().fit(x[columns], y).predict(x_test[columns])
    if isinstance(y, pd.DataFrame):  # the targets as an array: memory, energy, latency
        y = np.column_stack([y.get(column, np.full(len(y), np.nan)) for column in TARGET_COLUMNS])
    on_arrays = c.make().fit(x[columns].to_numpy(), np.asarray(y)).predict(x_test[columns].to_numpy())
    _same(on_frames, on_arrays)


def test_load_goes_through_the_registry_and_names_an_unknown_kind(tmp_path) -> None:
    import json

    x, y, _, _ = latency_only()
    kind_class("log-linear")().fit(x, y).save(tmp_path / "p")
    meta = json.loads((tmp_path / "p" / "meta.json").read_text())
    meta["kind"] = "neural-oracle"
    (tmp_path / "p" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(PredictorError, match="unknown predictor kind 'neural-oracle'"):
        load(tmp_path / "p")
