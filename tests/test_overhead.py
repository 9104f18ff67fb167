"""The op-wise route's overhead model: an additive law with known costs is recovered, a
multiplicative one is told apart by cross-validation, a stack weighs the forms by their
out-of-fold predictions, and the op-wise predictor stacks the forms, picks its kernel learners by
cross-validation and saves them as plain numbers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from infercast.predictors import OpWise, PredictorError
from infercast.predictors.overhead import (
    FORMS,
    STACK,
    AdditiveOverhead,
    FloorOverhead,
    RatioOverhead,
    overhead_features,
)
from infercast.predictors.overhead_choice import (
    StackedOverhead,
    choose,
    cv_scores,
    from_dict,
    make,
    out_of_fold,
)

from .helpers import conv_kernel_row, infercast


def _kernel_table(n_models: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Models of 10–300 conv / pool kernels with known kernel times."""
    rng = np.random.default_rng(seed)
    rows, times = [], []
    for m in range(n_models):
        n = int(rng.integers(10, 300))
        for k in range(n):
            rows.append(
                {"model": f"m{m:03d}", "op_type": "conv" if k % 5 else "pool_max", "n_ops": 1, "flops": 1e6}
            )
            times.append(float(rng.lognormal(-3, 1)))
    return pd.DataFrame(rows).assign(bytes=np.nan), np.asarray(times)


def _folds(n: int) -> np.ndarray:
    return np.arange(n) % 5


def test_kernels_that_each_read_slower_than_they_run_are_told_apart_by_the_signed_form() -> None:
    """Profiled kernel rows carry the profiler's cost per node: the end-to-end time sits that much
    per kernel below their sum, which only ``signed_per_kernel`` can follow; its saving is held
    to the largest share of the kernel sum it took from a training network."""
    table, times = _kernel_table(80, 4)
    x = overhead_features(table, times)
    a, b = 1.02, -0.01
    noise = np.exp(np.random.default_rng(5).normal(0, 0.003, len(x)))
    e2e = (a * x["kernel_ms"] + b * x["n_kernels"]).to_numpy() * noise

    signed = AdditiveOverhead("signed_per_kernel").fit(x, e2e)
    assert signed.costs()["kernel_ms"] == pytest.approx(a, rel=0.03)
    assert signed.costs()["n_kernels"] == pytest.approx(b, rel=0.1)
    assert np.median(np.abs(np.exp(signed.predict(x)) / e2e - 1)) < 0.005
    assert AdditiveOverhead("per_kernel").fit(x, e2e).costs()["n_kernels"] == 0.0  # a cost: never negative
    _, _, scores = choose(x, e2e, _folds(len(x)))
    # (the ratio form follows it too here: the saving's share is a function of the mean kernel time)
    for cost_only in ("factor", "affine", "per_kernel"):
        assert scores[cost_only]["mean_abs_log_error"] > 2 * scores["signed_per_kernel"]["mean_abs_log_error"]
    shares = -b * x["n_kernels"] / (a * x["kernel_ms"])
    assert signed.largest_saving == pytest.approx(shares.max(), rel=0.15)
    # a network of many more tiny kernels than any training one keeps at least what that allows
    tiny = overhead_features(
        pd.DataFrame({"model": ["t"] * 500, "op_type": "conv", "n_ops": 1, "flops": 1e6, "bytes": np.nan}),
        np.full(500, 0.002),
    )
    floor = (1 - signed.largest_saving) * signed.costs()["kernel_ms"] * 1.0 + signed.costs()["one"]
    assert np.exp(signed.predict(tiny))[0] == pytest.approx(floor, rel=1e-6)
    again = AdditiveOverhead.from_dict(json.loads(json.dumps(signed.to_dict())))
    np.testing.assert_array_equal(again.predict(x), signed.predict(x))


def test_an_additive_law_with_known_costs_is_recovered() -> None:
    table, times = _kernel_table(80, 0)
    x = overhead_features(table, times)
    a, b, c = 1.15, 0.02, 0.7  # a factor, ms per kernel, ms per inference
    noise = np.exp(np.random.default_rng(1).normal(0, 0.01, len(x)))
    e2e = (a * x["kernel_ms"] + b * x["n_kernels"] + c).to_numpy() * noise

    fitted = AdditiveOverhead("per_kernel").fit(x, e2e).costs()
    assert fitted["kernel_ms"] == pytest.approx(a, rel=0.03)
    assert fitted["n_kernels"] == pytest.approx(b, rel=0.05)
    assert fitted["one"] == pytest.approx(c, rel=0.1)

    form, oof, scores = choose(x, e2e, _folds(len(x)))
    assert form in ("per_kernel", "per_kernel_type", "signed_per_kernel") and set(scores) == set(FORMS)
    # the forms without a cost per kernel cannot follow it
    for weaker in ("factor", "affine", "ratio"):
        assert scores[weaker]["mean_abs_log_error"] > 2 * scores[form]["mean_abs_log_error"], scores
    assert np.median(np.abs(oof - np.log(e2e))) < 0.02


def test_a_floor_under_every_kernel_is_recovered_and_chosen() -> None:
    table, times = _kernel_table(80, 12)
    x = overhead_features(table, times)
    floor_ms, a, c = 0.08, 1.1, 0.5  # kernels shorter than 80 µs still cost 80 µs end to end
    floored = np.array([np.maximum(t, floor_ms).sum() for t in x["kernel_times_ms"]])
    noise = np.exp(np.random.default_rng(13).normal(0, 0.01, len(x)))
    e2e = (a * floored + c) * noise

    fitted = FloorOverhead().fit(x, e2e).costs()
    assert fitted["floor_ms"] == pytest.approx(floor_ms, rel=0.1)
    assert fitted["kernel_ms"] == pytest.approx(a, rel=0.05)
    assert fitted["one"] == pytest.approx(c, rel=0.3)

    form, _, scores = choose(x, e2e, _folds(len(x)))
    assert form == "floor", scores
    # a cost per kernel follows it only in part: short kernels pay the floor, long ones nothing
    assert scores["per_kernel"]["mean_abs_log_error"] > 2 * scores["floor"]["mean_abs_log_error"], scores


def test_a_multiplicative_overhead_is_told_apart() -> None:
    table, times = _kernel_table(80, 2)
    x = overhead_features(table, times)
    # the runtime's overhead grows with the kernel sum's scale, not by a cost per kernel
    e2e = 3.0 * x["kernel_ms"].to_numpy() ** 0.8
    form, _, scores = choose(x, e2e, _folds(len(x)))
    assert form == "ratio", scores


def test_the_simplest_form_within_one_standard_error_is_kept() -> None:
    table, times = _kernel_table(80, 7)
    x = overhead_features(table, times)
    # a cost per kernel too small to show through 5 % noise: a form with it wins by a hair
    noise = np.exp(np.random.default_rng(8).normal(0, 0.05, len(x)))
    e2e = (1.1 * x["kernel_ms"] + 2.0 + 0.006 * x["n_kernels"]).to_numpy() * noise
    form, oof, scores = choose(x, e2e, _folds(len(x)))
    best = min(scores, key=lambda f: scores[f]["mean_abs_log_error"])
    assert best in ("per_kernel", "floor", "per_kernel_type") and form == "affine", scores
    errors = np.abs(oof - np.log(e2e))
    gap = scores["affine"]["mean_abs_log_error"] - scores[best]["mean_abs_log_error"]
    assert 0 < gap <= errors.std() / np.sqrt(len(errors))
    # the factor alone misses the constant by far more than one standard error: never kept
    assert scores["factor"]["mean_abs_log_error"] > 2 * scores["affine"]["mean_abs_log_error"], scores


def test_the_stack_weighs_the_forms_by_their_out_of_fold_predictions() -> None:
    table, times = _kernel_table(80, 12)
    x = overhead_features(table, times)
    floored = np.array([np.maximum(t, 0.08).sum() for t in x["kernel_times_ms"]])
    noise = np.exp(np.random.default_rng(13).normal(0, 0.01, len(x)))
    # one form's law: that form takes the weight
    assert StackedOverhead().fit(x, (1.1 * floored + 0.5) * noise, _folds(len(x))).weights == {"floor": 1.0}
    # half a floor law and half a power of the kernel sum (in log): no one form follows it, the
    # stack does, and it is scored by nested cross-validation (weights learned inside each fold)
    e2e = np.exp(0.5 * np.log(1.1 * floored + 0.5) + 0.5 * np.log(3.0 * x["kernel_ms"].to_numpy() ** 0.8))
    stacked = StackedOverhead().fit(x, e2e, _folds(len(x)))
    assert set(stacked.weights) == {"ratio", "floor"} and sum(stacked.weights.values()) == pytest.approx(1)
    nested = cv_scores(out_of_fold(STACK, x, e2e, _folds(len(x))), e2e)["mean_abs_log_error"]
    for form in FORMS:
        alone = cv_scores(out_of_fold(form, x, e2e, _folds(len(x))), e2e)["mean_abs_log_error"]
        assert nested < 0.75 * alone, (form, nested, alone)
    # too few networks to weigh the forms by: the simplest alone
    assert StackedOverhead().fit(x.head(2), e2e[:2]).weights == {"factor": 1.0}


def test_forms_round_trip_as_plain_numbers_and_old_predictors_still_load() -> None:
    table, times = _kernel_table(30, 3)
    x = overhead_features(table, times)
    e2e = (1.2 * x["kernel_ms"] + 0.5).to_numpy()
    for form in (*FORMS, STACK):
        fitted = make(form).fit(x, e2e)
        saved = json.loads(json.dumps(fitted.to_dict()))
        np.testing.assert_allclose(from_dict(saved).predict(x), fitted.predict(x))
    # a predictor written before the additive forms: the ridge's numbers without a form
    ridge = RatioOverhead().fit(x, e2e).to_dict()
    del ridge["form"]
    assert isinstance(from_dict(ridge), RatioOverhead)
    with pytest.raises(PredictorError, match="'cubic' is not one of"):
        make("cubic")


def _additive_op_tables(n_models: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Conv kernels at 20 GFLOP/s; end to end = 1.1·Σ + 30 µs per kernel + 0.4 ms, as a GPU
    delegate spends it."""
    rng = np.random.default_rng(seed)
    rows, e2e = [], []
    for m in range(n_models):
        total, n = 0.0, int(rng.integers(10, 80))
        for k in range(n):
            conv = conv_kernel_row(f"m{m}", f"k{k}", rng)
            latency = conv["flops"] / 20e6 * float(np.exp(rng.normal(0, 0.03)))
            rows.append({**conv, "latency_ms": latency})
            total += latency
        e2e.append({"model": f"m{m}", "latency_ms": 1.1 * total + 0.03 * n + 0.4})
    return pd.DataFrame(rows), pd.DataFrame(e2e)


def test_opwise_weighs_the_additive_forms_and_picks_its_kernel_learners(tmp_path) -> None:
    ops, e2e = _additive_op_tables(50, 4)
    test_ops, test_e2e = _additive_op_tables(15, 5)
    model = OpWise(n_estimators=80).fit(ops, e2e)
    training = model.training_
    # the default stacks the forms: those with a cost per kernel take nearly all the weight
    weights = training["overhead_weights"]
    assert training["overhead_form"] == STACK and sum(weights.values()) == pytest.approx(1)
    per_kernel = ("per_kernel", "per_kernel_type", "signed_per_kernel")
    assert sum(weights.get(form, 0) for form in per_kernel) >= 0.8, weights
    assert set(training["overhead_cv"]) == {*FORMS, STACK}
    assert set(training["kernel_learners"]) == {"conv", "pooled"}
    assert set(training["kernel_cv_mean_abs_log_error"]["conv"]) == {"xgboost", "lightgbm", "extratrees"}
    scores = model.evaluate(test_ops.drop(columns="latency_ms"), test_e2e)
    assert scores["within_10pct"] >= 0.9, scores

    model.save(tmp_path / "ow")
    again = OpWise.load(tmp_path / "ow")
    pd.testing.assert_frame_equal(model.predict(test_ops), again.predict(test_ops))

    forced = OpWise(n_estimators=40, overhead="ratio", kernel_learner="extratrees").fit(ops, e2e)
    assert forced.training_["overhead_form"] == "ratio"
    assert set(forced.training_["kernel_learners"].values()) == {"extratrees"}
    forced.save(tmp_path / "forced")
    assert sorted(p.name for p in (tmp_path / "forced").glob("kernel.*")) == [
        "kernel.conv.forest.json",
        "kernel.pooled.forest.json",
    ]
    pd.testing.assert_frame_equal(
        forced.predict(test_ops), OpWise.load(tmp_path / "forced").predict(test_ops)
    )
    # "auto" keeps one form: one with a cost per kernel
    one = OpWise(n_estimators=40, overhead="auto", kernel_learner="extratrees").fit(ops, e2e).training_
    assert one["overhead_form"] in ("per_kernel", "per_kernel_type"), one["overhead_cv"]
    assert one["overhead_weights"] == {one["overhead_form"]: 1.0} and set(one["overhead_cv"]) == set(FORMS)


def test_groups_of_models_are_held_out_whole_and_named_when_missing(tmp_path) -> None:
    ops, e2e = _additive_op_tables(30, 9)
    families = pd.Series([f"family {i % 6}" for i in range(len(e2e))], index=e2e["model"])
    model = OpWise(n_estimators=30, kernel_learner="xgboost").fit(ops, e2e, groups=families)
    assert model.training_["n_groups"] == 6 and model.training_["n_models"] == 30
    assert OpWise(n_estimators=30, kernel_learner="xgboost").fit(ops, e2e).training_["n_groups"] == 30
    with pytest.raises(PredictorError, match=r"groups name no group for the model\(s\) m3"):
        OpWise(n_estimators=20).fit(ops, e2e, groups=families.drop("m3"))
    with pytest.raises(PredictorError, match="need models of two groups or more"):
        OpWise(n_estimators=20).fit(ops, e2e, groups=families.map(lambda _: "one family"))
    # train-ops reads them from the end-to-end table's group column
    ops.to_csv(tmp_path / "ops.csv", index=False)
    e2e.assign(group=families.to_numpy()).to_csv(tmp_path / "e2e.csv", index=False)
    tables = ("--ops", str(tmp_path / "ops.csv"), "--e2e", str(tmp_path / "e2e.csv"))
    trained = infercast("train-ops", *tables, "--out", str(tmp_path / "ow"), "--n-estimators", "30", "--json")
    assert trained.returncode == 0, trained.stderr
    assert json.loads(trained.stdout)["training"]["n_groups"] == 6


def test_bad_choices_and_unknown_model_files_are_named(tmp_path) -> None:
    ops, e2e = _additive_op_tables(8, 6)
    with pytest.raises(PredictorError, match="overhead='cubic' must be 'stack', 'auto' or one of ratio"):
        OpWise(overhead="cubic").fit(ops, e2e)
    with pytest.raises(PredictorError, match="kernel_learner='svm' must be 'auto' or one of xgboost"):
        OpWise(kernel_learner="svm").fit(ops, e2e)
    two = ops["model"].isin(["m0", "m1"])
    with pytest.raises(PredictorError, match="at least 3 models; 2 have both"):
        OpWise(n_estimators=20).fit(ops[two], e2e)
    OpWise(n_estimators=20, kernel_learner="xgboost").fit(ops, e2e).save(tmp_path / "ow")
    meta = json.loads((tmp_path / "ow" / "meta.json").read_text())
    meta["kernel_models"]["conv"] = "kernel.conv.pkl"
    (tmp_path / "ow" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(PredictorError, match=r"'kernel\.conv\.pkl' is none of the known model files"):
        OpWise.load(tmp_path / "ow")


def test_predictors_saved_before_kernel_rates_predict_latencies_as_they_did(tmp_path) -> None:
    from infercast.predictors.optable import kernels

    ops, e2e = _additive_op_tables(10, 7)
    model = OpWise(n_estimators=20, kernel_learner="xgboost").fit(ops, e2e)
    model.save(tmp_path / "ow")
    meta = json.loads((tmp_path / "ow" / "meta.json").read_text())
    assert meta["kernel_target"] == "own_types_log_latency_per_work"
    del meta["kernel_target"]  # as an earlier infercast wrote it: its regressors learned latency
    (tmp_path / "ow" / "meta.json").write_text(json.dumps(meta))
    earlier = OpWise.load(tmp_path / "ow")
    table = kernels(ops)
    np.testing.assert_allclose(
        earlier.predict_kernels(ops)["latency_ms"],
        model.predict_kernels(ops)["latency_ms"] / table["flops"].to_numpy(),
        rtol=1e-6,
    )


def test_train_ops_cli_takes_the_form_and_the_learner(tmp_path) -> None:
    ops, e2e = _additive_op_tables(12, 8)
    ops.to_csv(tmp_path / "ops.csv", index=False)
    e2e.to_csv(tmp_path / "e2e.csv", index=False)
    tables = ("--ops", str(tmp_path / "ops.csv"), "--e2e", str(tmp_path / "e2e.csv"))
    chosen = ("--overhead", "per_kernel", "--kernel-learner", "extratrees", "--n-estimators", "40")
    trained = infercast("train-ops", *tables, "--out", str(tmp_path / "ow"), *chosen, "--json")
    assert trained.returncode == 0, trained.stderr
    training = json.loads(trained.stdout)["training"]
    assert training["overhead_form"] == "per_kernel"
    assert set(training["kernel_learners"].values()) == {"extratrees"}
    # by default the forms are stacked, and the summary names their weights, largest first
    learner = ("--kernel-learner", "extratrees", "--n-estimators", "40")
    stacked = infercast("train-ops", *tables, "--out", str(tmp_path / "stacked"), *learner)
    assert stacked.returncode == 0, stacked.stderr
    weights = json.loads((tmp_path / "stacked" / "meta.json").read_text())["training"]["overhead_weights"]
    named = ", ".join(f"{form} {w:.2f}" for form, w in sorted(weights.items(), key=lambda fw: -fw[1]))
    assert f"overhead form stack ({named})" in " ".join(stacked.stdout.split())
    refused = infercast("train-ops", *tables, "--out", str(tmp_path / "no"), "--overhead", "cubic")
    assert refused.returncode == 2 and "overhead='cubic' must be 'stack', 'auto' or one of" in refused.stderr
    assert not (tmp_path / "no").exists()


def test_predictors_saved_before_channel_slices_load_with_their_own_inputs(tmp_path, monkeypatch) -> None:
    import infercast.predictors.opwise as opwise_module
    from infercast.predictors.optable import kernels

    ops, e2e = _additive_op_tables(10, 7)
    monkeypatch.setattr(opwise_module, "KERNEL_INPUTS", opwise_module.KERNEL_INPUTS_BEFORE_SLICES)
    earlier = OpWise(n_estimators=20, kernel_learner="xgboost").fit(ops, e2e)
    earlier.save(tmp_path / "ow")
    monkeypatch.undo()
    loaded = OpWise.load(tmp_path / "ow")
    assert loaded.kernel_inputs_ == opwise_module.KERNEL_INPUTS_BEFORE_SLICES
    pd.testing.assert_frame_equal(loaded.predict(ops), earlier.predict(ops))
    meta = json.loads((tmp_path / "ow" / "meta.json").read_text())
    meta["kernel_inputs"] = [*meta["kernel_inputs"], "c_in_squared"]
    (tmp_path / "ow" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(PredictorError, match=r"kernel features .*c_in_squared.* differ"):
        OpWise.load(tmp_path / "ow")
    # a 3-channel 3×3 convolution costs what 4 channel slices cost on a GPU runtime
    table = kernels(
        pd.DataFrame(
            {
                "model": ["m"],
                "op_type": ["conv"],
                "h_in": [8],
                "w_in": [8],
                "c_in": [3],
                "h_out": [8],
                "w_out": [8],
                "c_out": [5],
                "kernel_size": [3],
                "stride": [1],
                "groups": [1],
                "flops": [1.0],
            }
        )
    )
    assert table["c_out_slices"].iloc[0] == 2
    assert np.isclose(np.expm1(table["log_padded_flops"].iloc[0]), 2 * 64 * 8 * 4 * 9)


def test_kernel_campaign_rows_teach_the_kernel_regressors_only() -> None:
    """Rows of one-kernel networks train the kernel regressors (a type only they have gets its own)
    and never enter the overhead fit, which is on the design-space models alone."""
    ops, e2e = _additive_op_tables(12, 6)
    rng = np.random.default_rng(7)
    campaign = []
    for k in range(40):
        conv = conv_kernel_row(f"kernel{k}", "0", rng)
        campaign.append({**conv, "latency_ms": conv["flops"] / 20e6})
        concat = {**conv, "op_type": "concat", "kernel_size": None, "stride": None, "groups": None}
        campaign.append({**concat, "model": f"concat{k}", "flops": 0, "latency_ms": 0.001 * conv["c_out"]})
    kernel_ops = pd.DataFrame(campaign)
    model = OpWise(n_estimators=30, kernel_learner="xgboost").fit(ops, e2e, kernel_ops=kernel_ops)
    assert model.training_["n_models"] == 12  # the kernel networks have no end-to-end role
    assert model.training_["n_kernel_campaign_rows"] == 80
    assert "concat" in model.training_["own_models"]
    unseen_type = pd.DataFrame([{**campaign[1], "model": "m-new", "kernel": "c"}]).drop(columns="latency_ms")
    predicted = model.predict(unseen_type)
    assert "a kind it learned from no network" not in predicted["ood_reason"].iloc[0]
    without = OpWise(n_estimators=30, kernel_learner="xgboost").fit(ops, e2e)
    assert (
        "kernel time is in concat kernels, a kind it learned from no network"
        in without.predict(unseen_type)["ood_reason"].iloc[0]
    )


def _two_rate_tables(n_models: int, kernels_each: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Convolutions at 20 GFLOP/s, and half the 3×3 ones at 40 with the ``algorithm`` that runs
    them named (no shape tells them apart); end to end = Σ + 0.4 ms."""
    rng = np.random.default_rng(seed)
    rows, e2e = [], []
    for m in range(n_models):
        total = 0.0
        for k in range(kernels_each):
            conv = conv_kernel_row(f"m{m}", f"k{k}", rng)
            fast = conv["kernel_size"] == 3 and rng.random() < 0.5
            latency = conv["flops"] / (40e6 if fast else 20e6)
            rows.append({**conv, "algorithm": "winograd" if fast else "", "latency_ms": latency})
            total += latency
        e2e.append({"model": f"m{m}", "latency_ms": total + 0.4})
    return pd.DataFrame(rows), pd.DataFrame(e2e)


def test_an_algorithm_the_op_table_names_is_a_kernel_type_of_its_own(tmp_path) -> None:
    ops, e2e = _two_rate_tables(30, 30, 11)
    single, _ = _two_rate_tables(60, 1, 12)  # one kernel a model: its sum is the kernel's estimate
    model = OpWise(n_estimators=60, kernel_learner="xgboost", overhead="affine").fit(ops, e2e)
    assert "conv.winograd" in model.training_["own_models"]
    assert model.training_["kernel_types"]["conv.winograd"] == (ops["algorithm"] == "winograd").sum()
    truth = single.set_index("model")["latency_ms"]
    named = model.predict(single.drop(columns="latency_ms"))["kernel_sum_ms"].loc[truth.index]
    blind_model = OpWise(n_estimators=60, kernel_learner="xgboost", overhead="affine")
    blind_model.fit(ops.drop(columns="algorithm"), e2e)
    blind = blind_model.predict(single.drop(columns=["latency_ms", "algorithm"]))["kernel_sum_ms"]
    errors = np.abs(np.log(named / truth))
    blind_errors = np.abs(np.log(blind.loc[truth.index] / truth))
    assert errors.max() < 0.1 and blind_errors.mean() > 3 * errors.mean(), (
        errors.mean(),
        blind_errors.mean(),
    )
    # a predictor that never saw the algorithm prices its kernels as the op type's default ones
    told = blind_model.predict(single.drop(columns="latency_ms"))["kernel_sum_ms"]
    pd.testing.assert_series_equal(told, blind)

    model.save(tmp_path / "ow")
    assert (tmp_path / "ow" / "kernel.conv.winograd.xgb.json").is_file()
    pd.testing.assert_frame_equal(model.predict(single), OpWise.load(tmp_path / "ow").predict(single))


def test_an_algorithm_too_rare_for_a_regressor_is_priced_by_a_factor_on_its_op_type(tmp_path) -> None:
    # 900 convolutions at 20 GFLOP/s, and a kernel campaign's few at 4 GFLOP/s in another layout
    ops, e2e = _two_rate_tables(30, 30, 21)
    ops = ops.assign(algorithm="", latency_ms=ops["flops"] / 20e6)
    e2e = (
        ops.groupby("model", as_index=False)["latency_ms"]
        .sum()
        .assign(latency_ms=lambda t: t["latency_ms"] + 0.4)
    )
    rng = np.random.default_rng(22)
    slow = pd.DataFrame([conv_kernel_row(f"plain{i}", "k0", rng) for i in range(12)])
    slow = slow.assign(algorithm="nchw", latency_ms=slow["flops"] / 4e6)
    campaign, held = slow.iloc[:6], slow.iloc[6:]

    model = OpWise(n_estimators=60, kernel_learner="xgboost", overhead="affine").fit(
        ops, e2e, kernel_ops=campaign
    )
    assert "conv.nchw" not in model.training_["own_models"]
    assert model.training_["algorithm_factors"]["conv.nchw"] == pytest.approx(5.0, rel=0.15)
    priced = model.predict(held.drop(columns="latency_ms"))["kernel_sum_ms"]
    truth = held.set_index("model")["latency_ms"].loc[priced.index]
    assert np.abs(np.log(priced / truth)).max() < 0.15
    as_default = model.predict(held.drop(columns="latency_ms").assign(algorithm=""))["kernel_sum_ms"]
    assert (priced / as_default).to_numpy() == pytest.approx(
        model.training_["algorithm_factors"]["conv.nchw"]
    )

    # two kernels teach no factor: priced as the op type's default ones, as before the column
    few = OpWise(n_estimators=60, kernel_learner="xgboost", overhead="affine").fit(
        ops, e2e, kernel_ops=campaign.head(2)
    )
    assert "conv.nchw" not in few.training_["algorithm_factors"]
    told = few.predict(held.drop(columns="latency_ms"))["kernel_sum_ms"]
    pd.testing.assert_series_equal(
        told, few.predict(held.drop(columns="latency_ms").assign(algorithm=""))["kernel_sum_ms"]
    )

    model.save(tmp_path / "ow")
    pd.testing.assert_frame_equal(model.predict(held), OpWise.load(tmp_path / "ow").predict(held))
