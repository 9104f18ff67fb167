"""Predictors: the cascade blend, the op-wise route, baselines, artifacts and OOD flags.

Learning tests use real analytic features of design-space configs with targets from a known law
(stated in ``helpers.cost_law``), so what a correct learner must reach is known; the end-to-end test at the
bottom profiles real models into a real store and runs the CLI on it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.ensemble import ExtraTreesRegressor

from infercast import api, space
from infercast.api.training import rank_routes
from infercast.predictors import (
    CascadeBlend,
    FlopsProportional,
    LogLinear,
    PredictorError,
    load,
    stratified_split,
)
from infercast.predictors.data import feature_frame
from infercast.predictors.forest import ArrayForest
from infercast.predictors.optable import kernels
from infercast.predictors.opwise import OpWise
from infercast.predictors.physical import PhysicalLatency
from infercast.predictors.routes import BLEND, COMBINED, LABELS, MEAN, OPWISE, PHYSICAL
from infercast.store import Store

from .helpers import (
    E2E_SPACE,
    FAST,
    SMALL,
    SYNTHETIC_PLATFORM,
    blocked_profile,
    conv_kernel_row,
    cost_law,
    infercast,
    synthetic_measurement,
    synthetic_store,
)


@pytest.fixture(scope="module")
def table() -> tuple[pd.DataFrame, pd.DataFrame]:
    family = space.get("carb-resnet")
    configs = family.sample(1500, seed=3, stratified=True)
    configs = configs[(configs["batch"] <= 16) & (configs["input_size"] <= 128)].reset_index(drop=True)
    x = feature_frame(family.features(configs), {"threads": 1})
    return x, cost_law(x, np.random.default_rng(0))


@pytest.fixture(scope="module")
def fitted(table) -> tuple[CascadeBlend, np.ndarray, np.ndarray]:
    x, y = table
    train, test = stratified_split(x, 0.25, seed=0)
    return CascadeBlend(**SMALL).fit(x.iloc[train], y.iloc[train]), train, test


def test_array_forest_matches_scikit_learn() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(400, 6))
    y = x[:, 0] ** 2 + np.sin(x[:, 1]) + rng.normal(0, 0.1, 400)
    forest = ExtraTreesRegressor(n_estimators=25, random_state=0).fit(x, y)
    probe = rng.normal(size=(300, 6))
    np.testing.assert_allclose(
        ArrayForest.from_sklearn(forest).predict(probe), forest.predict(probe), rtol=1e-9
    )


def test_cascade_blend_learns_the_law_and_reports_energy_unavailable(fitted, table) -> None:
    blend, _, test = fitted
    x, y = table
    scores = blend.evaluate(x.iloc[test], y.iloc[test])
    assert scores["latency"]["r2"] > 0.97 and scores["memory"]["r2"] > 0.97
    assert scores["latency"]["r2"] > scores["latency"]["baselines"]["flops"]["r2"]
    assert "energy" in blend.unavailable_ and "energy_j" in blend.unavailable_["energy"]
    for stage in blend.targets_.values():
        weights = np.array(list(stage.weights.values()))
        assert (weights >= 0).all() and math.isclose(weights.sum(), 1.0)
    # the cascade: latency sees the memory stage's prediction, memory sees none
    assert (
        "log_memory" in blend.targets_["latency"].inputs
        and "log_latency" not in blend.targets_["memory"].inputs
    )
    predicted = blend.predict(x.iloc[test])
    assert predicted["energy_j"].isna().all()


def test_intervals_are_calibrated_on_held_out_rows(fitted, table) -> None:
    blend, _, test = fitted
    x, y = table
    coverage = blend.evaluate(x.iloc[test], y.iloc[test])["latency"]["coverage"]
    assert 0.8 <= coverage <= 0.99, coverage


def test_stratified_split_keeps_every_batch_tier(table) -> None:
    x, _ = table
    train, test = stratified_split(x, 0.2, seed=0)
    assert set(np.intersect1d(train, test)) == set() and len(train) + len(test) == len(x)
    tiers = np.searchsorted([1, 8, 32], x["batch"], side="left")
    assert set(tiers[test]) == set(tiers)


def test_save_load_round_trip_is_code_free_and_exact(fitted, table, tmp_path) -> None:
    blend, _, test = fitted
    x, _ = table
    blend.save(tmp_path / "p", {"platform": {"id": "abc"}})
    suffixes = {p.name.split(".", 2)[-1] for p in (tmp_path / "p").iterdir()}
    assert suffixes <= {"xgb.json", "lgb.txt", "forest.json", "json", "corrector.lgb.txt"}, suffixes
    again = load(tmp_path / "p")
    pd.testing.assert_frame_equal(blend.predict(x.iloc[test]), again.predict(x.iloc[test]))
    assert again.metadata_["platform"] == {"id": "abc"}


def test_load_refuses_a_foreign_schema_with_a_clear_message(fitted, tmp_path) -> None:
    blend, _, _ = fitted
    folder = blend.save(tmp_path / "p")
    meta = json.loads((folder / "meta.json").read_text())
    (folder / "meta.json").write_text(json.dumps({**meta, "feature_schema": 99}))
    with pytest.raises(PredictorError, match="feature schema 99"):
        CascadeBlend.load(folder)
    (folder / "meta.json").write_text(json.dumps({**meta, "format": "pickle"}))
    with pytest.raises(PredictorError, match="not an infercast predictor"):
        CascadeBlend.load(folder)
    (folder / "meta.json").write_text(
        json.dumps(
            {
                **meta,
                "stages": {
                    "latency": {**meta["stages"]["latency"], "files": {"xgboost": "../../etc/passwd"}}
                },
            }
        )
    )
    with pytest.raises(PredictorError, match="outside the directory"):
        CascadeBlend.load(folder)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"order": ("latency", "speed")}, "order="),
        ({"learners": ("xgboost", "svm")}, "learners="),
        ({"coverage": 1.5}, "coverage=1.5"),
        ({"n_folds": 1}, "n_folds=1"),
        ({"estimates": ("opwise_ms",)}, "estimates="),
        ({"estimates": ("log_opwise_ms",), "detrend": False}, "need detrend=True"),
    ],
)
def test_bad_hyper_parameters_name_the_value_at_fit(params, message, table) -> None:
    blend = CascadeBlend(**params)  # stored as given, as scikit-learn's estimators do
    with pytest.raises(PredictorError, match=message):
        blend.fit(*table)


def test_a_log_estimate_joins_the_trend_and_is_followed_beyond_the_training_range(table, tmp_path) -> None:
    """Latency carries a per-network factor the features cannot see (as a runtime's kernel choices
    are to FLOPs); another predictor's noisy log estimate sees it. The blend given that estimate
    learns it, follows it where it leaves the training range (trees alone would stop at the edge),
    and keeps it through save / load."""
    x, y = table
    x, y = x.iloc[:500].reset_index(drop=True), y.iloc[:500].reset_index(drop=True)
    rng = np.random.default_rng(5)
    latency = y["latency_ms"].to_numpy() * np.exp(rng.normal(0, 0.3, len(y)))
    y = y.assign(latency_ms=latency)
    with_estimate = x.assign(log_estimate=np.log(latency) + rng.normal(0, 0.02, len(y)))
    train, test = stratified_split(x, 0.25, seed=0)
    plain = CascadeBlend(**SMALL, order=("latency",)).fit(x.iloc[train], y.iloc[train])
    given = CascadeBlend(**SMALL, order=("latency",), estimates=("log_estimate",))
    given.fit(with_estimate.iloc[train], y.iloc[train])

    def median_error(model: CascadeBlend, frame: pd.DataFrame) -> float:
        predicted = model.predict(frame.iloc[test], ood="none")["latency_ms"].to_numpy()
        return float(np.median(np.abs(predicted / latency[test] - 1)))

    assert median_error(given, with_estimate) < median_error(plain, x) / 3
    assert given.targets_["latency"].trend[-1] > 0.7  # the estimate's coefficient in the log trend
    beyond = with_estimate.iloc[test].assign(log_estimate=lambda f: f["log_estimate"] + np.log(8.0))
    ratio = (
        given.predict(beyond, ood="none")["latency_ms"]
        / given.predict(with_estimate.iloc[test], ood="none")["latency_ms"]
    )
    assert ratio.median() > 4
    given.save(tmp_path / "given")
    again = load(tmp_path / "given")
    assert again.estimates == ("log_estimate",)
    pd.testing.assert_frame_equal(given.predict(beyond), again.predict(beyond))


def test_a_network_the_estimate_finds_slow_follows_it_where_flops_explained_the_training_configs(
    table,
) -> None:
    """On design-space configs FLOPs explain latency better than a noisy op-wise estimate does; a
    real network whose kernels run 3× slower than its FLOPs say, which only the estimate sees,
    must still be predicted 3× slower: the estimate is the trend's offset, not one more regressor
    whose coefficient the training configs shrink."""
    x, y = table
    x, y = x.iloc[:500].reset_index(drop=True), y.iloc[:500].reset_index(drop=True)
    rng = np.random.default_rng(7)
    latency = y["latency_ms"].to_numpy()
    with_estimate = x.assign(log_estimate=np.log(latency) + rng.normal(0, 0.15, len(y)))
    train, test = stratified_split(x, 0.25, seed=0)
    given = CascadeBlend(**SMALL, order=("latency",), estimates=("log_estimate",))
    given.fit(with_estimate.iloc[train], y.iloc[train])
    assert given.targets_["latency"].trend[-1] == 1.0
    held = with_estimate.iloc[test]
    slow = held.assign(log_estimate=held["log_estimate"] + np.log(3.0))
    ratio = given.predict(slow, ood="none")["latency_ms"] / given.predict(held, ood="none")["latency_ms"]
    assert ratio.median() > 2.5


TINY = {"order": ("memory", "latency"), "n_estimators": 30, "forest_estimators": 10, "n_folds": 2}


def test_scikit_learn_clone_params_cross_validation_and_grid_search(table) -> None:
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

    x, y = table
    x, y = x.iloc[:240].reset_index(drop=True), y.iloc[:240].reset_index(drop=True)
    blend = CascadeBlend(**TINY, fast_estimators=10, n_jobs=1)
    twin = clone(blend)
    assert twin is not blend and twin.get_params() == blend.get_params()
    assert blend.get_params(deep=True)["n_estimators"] == 30
    assert blend.set_params(n_estimators=40) is blend and blend.n_estimators == 40
    with pytest.raises(PredictorError, match="n_folds=1"):
        blend.set_params(n_folds=1).fit(x, y)
    blend.set_params(n_folds=2)
    assert not hasattr(blend, "targets_")  # learned attributes exist only after fit
    fitted = blend.fit(x, y)
    assert fitted is blend and set(blend.targets_) == {"memory", "latency"}
    score = blend.score(x, y)
    assert isinstance(score, float) and 0.9 < score <= 1.0  # R² of log latency, on what it saw
    assert set(blend.evaluate(x, y)) == {"memory", "latency"}
    folds = KFold(3, shuffle=True, random_state=0)
    scores = cross_val_score(CascadeBlend(**TINY, fast_estimators=10, n_jobs=1), x, y, cv=folds)
    assert scores.shape == (3,) and (scores > 0.5).all()
    search = GridSearchCV(
        CascadeBlend(**TINY, fast_estimators=10, n_jobs=1), {"n_estimators": [10, 30]}, cv=folds
    ).fit(x, y)
    assert search.best_params_["n_estimators"] in (10, 30) and hasattr(search.best_estimator_, "targets_")


def test_out_of_distribution_inputs_are_flagged_with_a_reason(fitted) -> None:
    blend, _, _ = fitted
    family = space.get("mobile-nas")
    configs = family.sample(3, seed=0)
    x = feature_frame(family.features(configs), {"threads": 1})
    predicted = blend.predict(x)
    assert predicted["ood"].all()
    # in words: the depthwise-convolution work no training network had
    assert predicted["ood_reason"].str.contains("of its FLOPs are depthwise convolutions").all()


def test_in_distribution_inputs_are_mostly_not_flagged(fitted, table) -> None:
    blend, _, test = fitted
    x, _ = table
    assert blend.predict(x.iloc[test])["ood"].mean() < 0.2


def test_baselines_fit_what_they_model(table) -> None:
    x, _ = table
    proportional = 3e-8 * x["flops"].to_numpy()
    np.testing.assert_allclose(FlopsProportional().fit(x, proportional).predict(x), proportional, rtol=1e-9)
    loglinear = np.exp(0.5) * x["flops"] ** 0.7 * x["params"] ** 0.1
    np.testing.assert_allclose(LogLinear().fit(x, loglinear).predict(x), loglinear, rtol=1e-6)


# -- op-wise ---------------------------------------------------------------------------------


def _op_tables(n_models: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Synthetic op profiles: convs at 30 GFLOP/s + 8 µs launch, pools and adds memory-bound;
    end to end = Σ ops × an overhead that grows with the number of kernels (1.05–1.5)."""
    rng = np.random.default_rng(seed)
    rows, e2e = [], []
    for m in range(n_models):
        total, n = 0.0, int(rng.integers(8, 40))
        for k in range(n):
            conv = conv_kernel_row(f"m{m}", f"k{k}", rng)
            latency = (conv["flops"] / 30e6 + 0.008) * math.exp(rng.normal(0, 0.03))
            rows.append({**conv, "latency_ms": latency})
            h, c_out = conv["h_out"], conv["c_out"]
            # an activation fused into the conv's kernel: no latency row of its own
            rows.append(
                {
                    "model": f"m{m}",
                    "op_type": "act",
                    "kernel": f"k{k}",
                    "h_in": h,
                    "w_in": h,
                    "c_in": c_out,
                    "h_out": h,
                    "w_out": h,
                    "c_out": c_out,
                    "flops": c_out * h * h,
                }
            )
            total += latency
        pool_latency = 0.002 * h * h * c_out / 1e3
        rows.append(
            {
                "model": f"m{m}",
                "op_type": "global_pool",
                "h_in": h,
                "w_in": h,
                "c_in": c_out,
                "flops": c_out * h * h,
                "latency_ms": pool_latency,
            }
        )
        total += pool_latency
        e2e.append({"model": f"m{m}", "latency_ms": total * (1.05 + 0.45 * n / 40)})
    return pd.DataFrame(rows), pd.DataFrame(e2e)


def test_kernels_group_fused_rows_and_keep_the_main_op() -> None:
    ops, _ = _op_tables(2, 0)
    table = kernels(ops)
    assert set(table["op_type"]) == {"conv", "global_pool"}
    assert (table.loc[table["op_type"] == "conv", "n_ops"] == 2).all()


def test_opwise_learns_kernels_and_the_overhead(tmp_path) -> None:
    ops, e2e = _op_tables(60, 1)
    test_ops, test_e2e = _op_tables(20, 2)
    model = OpWise(n_estimators=150).fit(ops, e2e)
    scores = model.evaluate(test_ops.drop(columns="latency_ms"), test_e2e)
    assert scores["within_10pct"] >= 0.8 and scores["spearman"] > 0.95, scores
    # a constant overhead factor cannot do that: the ratio spans 1.05–1.5
    ratio = (
        test_e2e["latency_ms"].to_numpy()
        / test_ops.groupby("model", sort=False)["latency_ms"].sum().to_numpy()
    )
    constant = np.median(ratio) * test_ops.groupby("model", sort=False)["latency_ms"].sum().to_numpy()
    assert scores["mape"] < np.mean(np.abs(constant / test_e2e["latency_ms"].to_numpy() - 1)) * 100
    model.save(tmp_path / "ow")
    again = load(tmp_path / "ow")
    pd.testing.assert_frame_equal(model.predict(test_ops), again.predict(test_ops))


def test_opwise_flags_kernel_types_it_never_saw() -> None:
    ops, e2e = _op_tables(12, 3)
    model = OpWise(n_estimators=50).fit(ops, e2e)
    novel = ops[ops["model"] == "m0"].assign(op_type="dwconv")
    [reason] = model.predict(novel)["ood_reason"]
    assert "100% of its kernel time is in dwconv kernels, a kind it learned from no network" in reason


def test_op_table_errors_name_the_problem() -> None:
    ops, e2e = _op_tables(4, 0)
    with pytest.raises(PredictorError, match="vocabulary"):
        OpWise().fit(ops.assign(op_type="convolution"), e2e)
    with pytest.raises(PredictorError, match="op_type"):
        OpWise().fit(ops.drop(columns="op_type"), e2e)
    with pytest.raises(PredictorError, match="model, latency_ms"):
        OpWise().fit(ops, e2e.rename(columns={"latency_ms": "ms"}))


def test_train_ops_and_predict_ops_from_csv_with_missing_columns(tmp_path: Path) -> None:

    ops, e2e = _op_tables(30, 4)
    ops = ops.drop(columns=["kernel_size", "stride"])  # e.g. a runtime that reports neither
    ops.to_csv(tmp_path / "ops.csv", index=False)
    e2e.to_parquet(tmp_path / "e2e.parquet")
    trained = infercast(
        "train-ops",
        "--ops",
        str(tmp_path / "ops.csv"),
        "--e2e",
        str(tmp_path / "e2e.parquet"),
        "--out",
        str(tmp_path / "ow"),
        "--json",
    )
    assert trained.returncode == 0, trained.stderr
    assert json.loads(trained.stdout)["n_test_models"] == 6
    test_ops, _ = _op_tables(3, 5)
    test_ops.drop(columns="latency_ms").to_parquet(tmp_path / "new.parquet")
    predicted = infercast(
        "predict-ops", "--predictor", str(tmp_path / "ow"), "--ops", str(tmp_path / "new.parquet"), "--json"
    )
    assert predicted.returncode == 0, predicted.stderr
    rows = json.loads(predicted.stdout)
    assert [r["model"] for r in rows] == ["m0", "m1", "m2"]
    assert all(
        r["latency_ms_low"] < r["latency_ms"] < r["latency_ms_high"] and r["ood"] in (True, False)
        for r in rows
    )
    missing = infercast(
        "predict-ops", "--predictor", str(tmp_path / "nothing"), "--ops", str(tmp_path / "new.parquet")
    )
    assert missing.returncode == 2 and "no meta.json" in missing.stderr


# -- end to end on a real store -----------------------------------------------------------------


def test_routes_rank_by_held_out_error_and_keep_the_combined_route_when_others_are_not_clearly_better() -> (
    None
):
    rng = np.random.default_rng(0)
    truth = rng.uniform(1, 10, 30)
    noise = rng.normal(0, 0.05, 30)
    other = np.roll(noise, 7) * 0.99  # the same errors, 1 % smaller, on other configs
    close = {
        COMBINED: truth * (1 + noise),
        OPWISE: truth * (1 + other),
        BLEND: truth * (1 + 3 * noise),
    }
    ranked = rank_routes(truth, close)
    held = ranked["held_out"]
    assert held[OPWISE]["median_abs_error_pct"] < held[COMBINED]["median_abs_error_pct"]
    assert ranked["order"] == [COMBINED, OPWISE, BLEND]
    # the rule is said as it is: which route had the lower median, and why it is not first
    assert ranked["choice"].startswith(f"{LABELS[COMBINED]}, the route chosen with design spaces held out")
    assert LABELS[OPWISE] in ranked["choice"] and "bootstrap" in ranked["choice"]
    assert "warning" not in ranked
    clearly = rank_routes(truth, {**close, OPWISE: truth * (1 + 0.3 * other)})
    assert clearly["order"] == [OPWISE, COMBINED, BLEND]
    assert clearly["choice"].startswith(f"{LABELS[OPWISE]}: the lowest median |error| on the 30 held-out")
    few = rank_routes(truth[:4], {route: values[:4] for route, values in close.items()})
    assert "only 4 held-out configs" in few["warning"]
    assert rank_routes(truth, {OPWISE: close[OPWISE], BLEND: close[BLEND]})["order"] == [OPWISE, BLEND]


def test_train_without_op_profiles_ranks_the_blend_and_sum_of_costs(tmp_path: Path) -> None:
    """No op profiles: no op-wise, combined or mean route; Σ cost × work on the configs' captured
    graphs is ranked beside the blend, which stays preferred, and predict follows that order."""
    store = synthetic_store(tmp_path / "runs.db")
    out = tmp_path / "predictor"
    summary = api.train(store["db"], out, opwise=False, blend=CascadeBlend(**SMALL))
    routes = summary["routes"]
    assert set(routes["order"]) == {BLEND, PHYSICAL} and "; blend first unless" in routes["criterion"]
    assert routes["held_out"]["blend"]["n"] == summary["n_test"]
    assert PhysicalLatency.load(out / "physical").costs() == summary["physical_costs"]
    config = "space:carb-resnet?batch=1&block=basic&depth=18&early_downsample=1&input_size=64&width=0.5"
    [row] = api.predict_models(out, [config])
    assert [r["route"] for r in row["routes"]] == routes["order"] and row["route"] == routes["order"][0]
    assert all(r["latency_ms"] > 0 for r in row["routes"])


def test_kernel_networks_teach_sum_of_costs_the_kernels_configs_lack(tmp_path: Path) -> None:
    """The carb-resnet configs have no depthwise convolution (alone, they leave its cost at 0): a
    kernel campaign's dwconv networks give Σ cost × work one, while the configs alone score its
    interval."""
    from infercast.graph import capture
    from infercast.predictors.devices.features import device_features

    store = synthetic_store(tmp_path / "runs.db")
    kernels = space.restrict(space.get("kernels"), "op", ["dwconv"])
    configs = kernels.sample(12, seed=0).drop_duplicates("id", ignore_index=True)
    rows = kernels.config_rows(configs)
    with Store(store["db"]) as db:
        platform_id = db.add_platform(SYNTHETIC_PLATFORM)
        db.add_configs(rows)
        for row, config in zip(rows, configs.to_dict("records"), strict=True):
            params = {p.name: config[p.name] for p in kernels.params}
            work = device_features(capture(kernels.build(params), kernels.input_shape(params)))
            # 40 ms per GFLOP of depthwise convolution, 20 µs per kernel launched
            latency = 40 * work["gflops_dwconv"] + 0.02 * work["kernels"]
            db.add_measurement(platform_id, "kernels", synthetic_measurement(row["id"], latency, 1.0, 0.005))
    out = tmp_path / "predictor"
    summary = api.train(store["db"], out, opwise=False, blend=CascadeBlend(**SMALL))
    assert summary["physical_costs"]["gflops_dwconv"] > 0
    assert summary["physical"] == (
        f"Σ cost × work fitted on {summary['n_train']} configs and {len(rows)} kernel networks"
    )
    saved = json.loads((out / "physical" / "meta.json").read_text())
    assert saved["n_train"] == summary["n_train"] + len(rows)
    assert len(saved["oof_log_residuals"]) == summary["n_train"]  # the configs' errors only


def test_profile_train_predict_evaluate_through_the_cli(tmp_path: Path) -> None:

    (tmp_path / "space.yaml").write_text(E2E_SPACE)
    db, out = str(tmp_path / "runs.db"), str(tmp_path / "predictor")
    profiled = infercast(
        "profile",
        "--space",
        str(tmp_path / "space.yaml"),
        "--n",
        "24",
        "--db",
        db,
        "--ops",
        "--op-runs",
        "2",
        *FAST,
        "--json",
    )
    assert profiled.returncode == 0, profiled.stderr
    trained = infercast(
        "train", "--db", db, "--out", out, "--n-estimators", "60", "--forest-estimators", "30", "--json"
    )
    assert trained.returncode == 0, trained.stderr
    summary = json.loads(trained.stdout)
    assert summary["unavailable"]["energy"].startswith("no rows of energy_j")
    assert summary["test_metrics"]["latency"]["n"] == summary["n_test"] > 0
    assert "opwise_test_metrics" in summary
    meta = json.loads((Path(out) / "meta.json").read_text())
    assert meta["platform"]["backend"] == "ort-cpu" and meta["platform"]["settings"]["threads"] == 1
    assert len(meta["training"]["train_config_ids"]) == summary["n_train"]

    config = "space:carb-resnet?batch=1&block=basic&depth=12&early_downsample=1&input_size=32&width=0.25"
    predicted = infercast("predict", "--predictor", out, config, "--json")
    assert predicted.returncode == 0, predicted.stderr
    [row] = json.loads(predicted.stdout)
    assert row["latency_ms"] > 0 and row["peak_memory_mb"] > 0 and row["energy_j"] is None
    assert "no rows of energy_j" in row["energy_j_reason"]
    assert row["latency_ms_interval"][0] < row["latency_ms"] < row["latency_ms_interval"][1]
    assert row["opwise"]["latency_ms"] > 0
    # five latency routes, in the order train ranked them on the held-out configs; the first leads
    ranking = json.loads((Path(out) / "routes.json").read_text())
    assert summary["routes"] == ranking
    assert set(ranking["order"]) == {BLEND, COMBINED, OPWISE, PHYSICAL, MEAN}
    # the mean of three is the preferred route: first unless another is clearly better
    assert f"; {LABELS[MEAN]} first unless" in ranking["criterion"]
    by_route = {r["route"]: r["latency_ms"] for r in row["routes"]}
    assert by_route[MEAN] == pytest.approx(
        (by_route[BLEND] * by_route[OPWISE] * by_route[PHYSICAL]) ** (1 / 3)
    )
    assert set(summary["physical_costs"]) >= {"gflops_conv", "kernels", "constant"}
    assert [r["route"] for r in row["routes"]] == ranking["order"] and row["route"] == ranking["order"][0]
    assert row["latency_ms"] == row["routes"][0]["latency_ms"] > 0
    table = infercast("predict", "--predictor", out, config)
    # the table shows the first route by its label (Σ cost × work's shortened to what precedes its
    # parenthesis, the mean's spelled out under the table)
    first = LABELS[ranking["order"][0]]
    assert table.returncode == 0 and first.split(" (")[0] in table.stdout, table.stderr

    evaluated = infercast("evaluate", "--predictor", out, "--db", db, "--json")
    assert evaluated.returncode == 0, evaluated.stderr
    result = json.loads(evaluated.stdout)
    assert (
        result["n_evaluated"] == summary["n_test"] and result["n_excluded_as_training"] == summary["n_train"]
    )
    assert set(result["targets"]["latency"]["baselines"]) == {"flops", "loglinear"}
    assert result["combined"]["n"] == result["opwise"]["n"] > 0
    # evaluate scores the route predict shows, as predict makes it: train's held-out figure
    first_route = ranking["order"][0]
    assert result["route"]["route"] == first_route and result["route"]["latency"]["n"] == summary["n_test"]
    assert result["route"]["latency"]["median_ape"] == pytest.approx(
        ranking["held_out"][first_route]["median_abs_error_pct"], rel=1e-6
    )

    foreign = infercast("evaluate", "--predictor", out, "--db", str(tmp_path / "other.db"))
    # a store that does not exist is refused, never created by a command that only reads
    assert foreign.returncode == 2 and "does not exist" in foreign.stderr
    assert not (tmp_path / "other.db").exists()


def test_measure_into_a_store_resumes(tmp_path: Path) -> None:

    factory = tmp_path / "nets.py"
    factory.write_text(
        "import torch\n"
        "def make():\n"
        "    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten())\n"
        "make.input_shape = (1, 3, 32, 32)\n"
    )
    db = str(tmp_path / "runs.db")
    args = ("measure", f"{factory}:make")
    first = infercast(*args, "--db", db, "--campaign", "c1", *FAST, "--json")
    assert first.returncode == 0, first.stderr
    [row] = json.loads(first.stdout)
    assert row["low_ms"] > 0 and "stored" not in row
    again = infercast(*args, "--db", db, "--campaign", "c1", *FAST, "--json")
    [stored] = json.loads(again.stdout)
    assert stored["stored"] is True and stored["low_ms"] == row["low_ms"]
    from infercast.store import Store

    with Store(db) as store:
        frame = store.measurements()
    assert len(frame) == 1 and json.loads(frame.loc[0, "features"])["flops"] > 0


class _FusionProbe(torch.nn.Module):
    """Conv-BN-ReLU, a residual block, a depthwise conv, a concat and a pool: the cases the rules cover."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU()
        )
        self.conv1 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(16)
        self.depthwise = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.branch = torch.nn.Conv2d(16, 16, 1)
        self.pool = torch.nn.MaxPool2d(2)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = torch.relu(self.bn1(self.conv1(x)) + x)
        x = torch.cat([torch.relu(self.depthwise(x)), self.branch(x)], dim=1)
        x = self.pool(x).mean(dim=(2, 3))
        return self.head(x)


@pytest.mark.parametrize("level", ["all", "extended", "disabled"])
def test_fusion_rules_match_what_onnx_runtime_fuses(level: str) -> None:
    from infercast.graph import capture
    from infercast.measurement.backends.ort_cpu import OrtCpuBackend, onnx_bytes
    from infercast.measurement.ops import profile_ort
    from infercast.models import load_model
    from infercast.predictors.fusion import fusion_agreement, kernel_table, rules_for

    loaded = load_model(_FusionProbe().eval(), (1, 3, 16, 16))
    backend = OrtCpuBackend(opt_level=level)
    feed = {"input": np.zeros(loaded.input_shape, dtype=np.float32)}
    rows = profile_ort(onnx_bytes(loaded), backend.session_options(), backend.providers, feed, 2)
    predicted = kernel_table(
        capture(loaded.module, loaded.input_shape), rules_for("ort-cpu", {"opt_level": level})
    )
    result = fusion_agreement(predicted, rows)
    assert result["agreement"] == 1.0 and not result["extra"], (result["missing"], result["extra"])
    if level == "all":  # the residual Add and its ReLU ran inside the convolution
        assert any(sorted(r["fused_ops"]) == ["Add", "Conv", "Relu"] for r in rows)


class _SwishProbe(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x) + 1.0  # the add keeps the swish out of the convolution's kernel
        return y * torch.sigmoid(y)


def test_a_swish_kernel_counts_the_ops_onnx_runtime_profiles() -> None:
    """ONNX Runtime runs x · sigmoid(x) as one kernel whose profile row holds Sigmoid and Mul; the
    captured graph's one swish node counts as those two ops, so the kernel regressors see the
    n_ops they learned from profiles."""
    from infercast.graph import capture
    from infercast.measurement.backends.ort_cpu import OrtCpuBackend, onnx_bytes
    from infercast.measurement.ops import profile_ort
    from infercast.models import load_model
    from infercast.predictors.fusion import TFLITE, kernel_table, rules_for

    loaded = load_model(_SwishProbe().eval(), (1, 3, 16, 16))
    backend = OrtCpuBackend(opt_level="all")
    feed = {"input": np.zeros(loaded.input_shape, dtype=np.float32)}
    rows = profile_ort(onnx_bytes(loaded), backend.session_options(), backend.providers, feed, 2)
    swish_rows = [r for r in rows if "Sigmoid" in r["fused_ops"]]
    assert len(swish_rows) == 1 and sorted(swish_rows[0]["fused_ops"]) == ["Mul", "Sigmoid"]
    graph = capture(loaded.module, loaded.input_shape)
    for rules, n_ops in ((rules_for("ort-cpu", {"opt_level": "all"}), 2), (TFLITE, 1)):
        table = kernel_table(graph, rules)
        assert table.loc[table["op_type"] == "act", "n_ops"].tolist() == [n_ops]


def test_the_blocked_layout_rule_is_what_onnx_runtimes_optimiser_does() -> None:
    from infercast.measurement.backends.ort_cpu import nchwc_block, optimiser_blocks
    from infercast.predictors.fusion import ort_blocks

    block = nchwc_block()
    if block == 0:
        pytest.skip("ONNX Runtime runs no blocked convolutions on this CPU")
    shapes = [(c, 32, 1) for c in (3, 12, 17, 24, 33, 34, 36, 58, 100)]
    shapes += [(c, c, c) for c in (8, 10, 24, 30, 40, 58, 120)]
    shapes += [(w * g, w * g, g) for w in (4, 8, 12, 16, 24, 32) for g in (2, 4)]
    rule = [ort_blocks(*shape, block) for shape in shapes]
    assert rule == [optimiser_blocks(*shape) for shape in shapes]
    assert any(rule) and not all(rule)


class _LayoutProbe(torch.nn.Module):
    """Convolutions ONNX Runtime runs blocked and plain on one CPU: grouped 4- and 32-wide,
    depthwise over 58 and 64 channels, ungrouped from 58 and 64 channels."""

    def __init__(self) -> None:
        super().__init__()
        self.narrow_groups = torch.nn.Conv2d(64, 64, 3, padding=1, groups=16)
        self.wide_groups = torch.nn.Conv2d(64, 64, 3, padding=1, groups=2)
        self.odd = torch.nn.Conv2d(64, 58, 1)
        self.odd_depthwise = torch.nn.Conv2d(58, 58, 3, padding=1, groups=58)
        self.from_odd = torch.nn.Conv2d(58, 64, 1)
        self.depthwise = torch.nn.Conv2d(64, 64, 3, padding=1, groups=64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.wide_groups(torch.relu(self.narrow_groups(x))))
        x = torch.relu(self.from_odd(torch.relu(self.odd_depthwise(self.odd(x)))))
        return self.depthwise(x)


def test_the_rules_name_the_layout_each_convolution_ran_in() -> None:
    from infercast.predictors.fusion import kernel_table, rules_for

    rows, graph, rules = blocked_profile(_LayoutProbe(), (1, 64, 16, 16))
    predicted = kernel_table(graph, rules)

    def convolutions(table: pd.DataFrame) -> list[tuple]:
        table = table[table["op_type"].isin(["conv", "dwconv", "gconv"])]
        algorithm = table["algorithm"] if "algorithm" in table else pd.Series("", index=table.index)
        return sorted(
            zip(
                table["c_in"].astype(int),
                table["c_out"].astype(int),
                table["groups"].astype(int),
                algorithm.fillna(""),
                strict=True,
            )
        )

    profiled = convolutions(pd.DataFrame(rows))
    assert profiled == convolutions(predicted)
    assert {algorithm for *_, algorithm in profiled} == {"", "nchw"}  # both layouts ran
    # without the machine's block the rules name no layout: one algorithm, as before
    assert set(kernel_table(graph, rules_for("ort-cpu", {"opt_level": "all"}))["algorithm"]) == {""}
