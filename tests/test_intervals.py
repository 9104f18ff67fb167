"""Prediction intervals that widen with the distance to the training rows (predictors.intervals)."""

from __future__ import annotations

import numpy as np
import pytest

from infercast import space
from infercast.predictors import CascadeBlend
from infercast.predictors.intervals import Calibration, calibrate, conformal_quantile, interval_note
from infercast.predictors.ood import OODDetector

from .helpers import SMALL, cost_law


def _noisy(difficulty: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Log residuals whose spread grows with the distance: sd 0.03·(1 + 0.6·d)."""
    return rng.normal(0, 0.03 * (1 + 0.6 * difficulty))


def test_coverage_holds_near_and_far_when_noise_grows_with_distance() -> None:
    rng = np.random.default_rng(0)
    near_d, far_d = rng.uniform(0.5, 1.5, 600), rng.uniform(2, 8, 400)
    calibration = calibrate(_noisy(near_d, rng), near_d, 0.9, _noisy(far_d, rng), far_d)
    assert calibration.beta > 0
    plain = calibrate(_noisy(near_d, rng), near_d, 0.9)  # exchangeable held-out rows only
    assert plain.beta == 0
    for low, high in ((0.5, 1.5), (2, 4), (4, 8), (8, 12)):  # the last: farther than calibrated
        d = rng.uniform(low, high, 4000)
        residuals = np.abs(_noisy(d, rng))
        covered = np.mean(residuals <= calibration.half_width(d, len(d)))
        assert 0.85 <= covered <= 0.97, (low, high, covered)
        if low >= 4:  # a constant width, calibrated near, fails far away
            assert np.mean(residuals <= plain.half_width(d, len(d))) < 0.7


def test_a_large_group_counts_as_one_draw_in_the_grouped_quantile() -> None:
    # one family of 100 networks predicted within 1 %, and 29 singleton families at 1 … 29 %
    residuals = np.concatenate([np.full(100, 0.01), np.arange(1, 30) / 100])
    groups = np.array(["big"] * 100 + [f"f{i}" for i in range(29)])
    # rows as draws: the 117th smallest of 129 (⌈0.9 · 130⌉) lies among the singletons' low end
    assert conformal_quantile(residuals, 0.9) == pytest.approx(0.17)
    # families as draws: 30 of them, the 28th smallest family (⌈0.9 · 31⌉)
    assert conformal_quantile(residuals, 0.9, groups) == pytest.approx(0.27)
    singletons = np.random.default_rng(1).normal(size=37)
    assert conformal_quantile(singletons, 0.9, np.arange(37)) == conformal_quantile(singletons, 0.9)
    # two design spaces held out in turn are two draws: no group-level 90 % exists, rows stand
    assert conformal_quantile(residuals, 0.9, np.arange(129) % 2) == conformal_quantile(residuals, 0.9)
    with pytest.raises(ValueError, match="3 residuals but 2 group labels"):
        conformal_quantile(np.ones(3), 0.9, np.arange(2))


def test_calibration_round_trips_and_old_predictors_keep_their_width() -> None:
    calibration = Calibration(0.05, 0.5, 10, 20, 0.9, 0.91, 0.06)
    assert Calibration.from_dict(calibration.to_dict(), 0.05) == calibration
    old = Calibration.from_dict(None, 0.07)
    assert old.beta == 0 and np.allclose(old.half_width(np.array([1.0, 30.0]), 2), 0.07)
    notes = interval_note(np.array([0.075, 0.3]), calibration, ["", "in_h=224 outside the training range"])
    assert notes[0] == "" and notes[1].startswith("4.0× the in-distribution width") and "in_h=224" in notes[1]


def test_difficulty_is_about_one_inside_and_grows_outside() -> None:
    rng = np.random.default_rng(1)
    x = np.exp(rng.uniform(0, 3, size=(500, 4)))
    detector = OODDetector().fit(x, ["a", "b", "c", "d"])
    inside = detector.difficulty(np.exp(rng.uniform(0.5, 2.5, size=(200, 4))))
    outside = detector.difficulty(np.exp(rng.uniform(4, 5, size=(200, 4))))
    assert 0.3 < np.median(inside) < 2 and outside.min() > 3 * np.median(inside)
    box = detector.box_difficulty(np.vstack([x[:5], np.exp(np.full((1, 4), 5.0))]))
    assert np.allclose(box[:5], 1) and box[5] > 3  # 1 inside the training ranges, growing outside
    saved = detector.to_dict()
    saved.pop("spacing")  # saved before difficulties existed: recomputed from the points
    assert OODDetector.from_dict(saved).spacing == pytest.approx(detector.spacing)


def test_blend_intervals_widen_for_configs_beyond_the_training_range() -> None:
    """Trained on inputs up to 96², asked about 224²: the interval widens, says why, and covers."""
    carb = space.get("carb-resnet")
    rng = np.random.default_rng(0)
    configs = carb.sample(4000, seed=1, stratified=True).drop_duplicates("id", ignore_index=True)
    configs = configs[(configs["precision"] == "fp32") & (configs["batch"] <= 8)].reset_index(drop=True)
    features = carb.features(configs).assign(threads=1.0)
    targets = cost_law(features, rng)
    # the law bends beyond the training sizes (caches), as a real CPU's does
    bend = np.where(features["in_h"] > 96, 1 + 0.15 * np.log2(features["in_h"] / 96), 1.0)
    targets["latency_ms"] *= bend
    train = (features["in_h"] <= 96).to_numpy()
    blend = CascadeBlend(**SMALL).fit(features[train], targets[train])
    assert blend.targets_["latency"].calibration.beta > 0
    out = blend.predict(features[~train])
    near = blend.predict(features[train])
    far_width = np.log(out["latency_ms_high"] / out["latency_ms"])
    near_width = np.log(near["latency_ms_high"] / near["latency_ms"])
    assert far_width.median() > 1.5 * near_width.median()
    truth = targets.loc[~train, "latency_ms"]
    covered = ((truth >= out["latency_ms_low"]) & (truth <= out["latency_ms_high"])).mean()
    assert covered >= 0.85
    assert out["interval_note"].str.contains("extrapolating").mean() > 0.4
