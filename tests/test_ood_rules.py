"""`ood` flags departures in the work a predictor prices, said in words; structural differences
that change no cost (a folded BatchNorm, one average pool, a classifier of 1,024) never flag."""

from __future__ import annotations

import numpy as np
import pandas as pd

from infercast.predictors.ood import OODDetector
from infercast.predictors.ood_rules import describe, kernel_reason, material

NAMES = ["flops", "params", "count_bn", "count_pool_avg", "flops_share_conv", "flops_share_dwconv"]


def test_counts_and_tiny_shares_never_flag_but_work_does() -> None:
    assert not material("count_bn", 0, 9, 65)  # the exporter folded BatchNorm: same cost
    assert not material("count_pool_avg", 1, 0, 0)
    assert not material("flops_share_pool_avg", 6.9e-6, 0, 0)  # one pool in a network of convolutions
    assert not material("params", 1.2e7, 1e6, 1e7)  # 1.2x: within what the learners spread over
    assert material("params", 4.3e7, 1e6, 1e7)
    assert material("flops_share_dwconv", 0.09, 0, 0)
    assert material("flops", 1e6, 5e6, 1e9)  # 5x less than any: flagged
    assert describe("flops_share_dwconv", 0.09, 0, 0) == (
        "9% of its FLOPs are depthwise convolutions, more than the 0% of any network it learned from"
    )
    assert describe("params", 4.3e7, 1e6, 1e7) == (
        "4.3e+07 parameters, 4.3× the most of any network it learned from (1e+07)"
    )
    assert (
        describe("flops", 0, 5e6, 1e9) == "no FLOPs, which every network it learned from had (at least 5e+06)"
    )


def test_a_detector_ignores_a_folded_batchnorm_and_words_what_it_flags() -> None:
    rng = np.random.default_rng(0)
    n = 200
    train = np.column_stack(
        [
            rng.uniform(1e8, 4e9, n),
            rng.uniform(1e6, 3e7, n),
            rng.integers(9, 66, n),
            np.zeros(n),
            rng.uniform(0.9, 0.99, n),
            np.zeros(n),
        ]
    )
    detector = OODDetector().fit(train, NAMES)
    folded = train[:1].copy()
    folded[0, 2] = 0  # no BatchNorm left: the same network, as an exported file
    pooled = train[1:2].copy()
    pooled[0, 3] = 1
    mobile = train[2:3].copy()
    mobile[0, 4:] = [0.2, 0.75]  # most of the work in depthwise convolutions
    flags, reasons = detector.check(np.vstack([folded, pooled, mobile]))
    assert flags.tolist() == [False, False, True], reasons
    assert "75% of its FLOPs are depthwise convolutions" in reasons[2]
    assert "count_" not in reasons[2] and "distance" not in reasons[2]


def test_kernels_flag_by_their_share_of_the_predicted_time() -> None:
    ranges = {"conv": {"c_out": (16, 1000)}, "linear": {"c_out": (1000, 1000)}}
    overhead = pd.Series({"log_n_kernels": np.log(20), "log_flops": np.log(1e9)})
    overhead_ranges = {"log_n_kernels": (np.log(10), np.log(50)), "log_flops": (np.log(1e8), np.log(1e10))}
    table = pd.DataFrame(
        {
            "op_type": ["conv"] * 18 + ["linear", "shuffle"],
            "c_out": [64] * 18 + [1024, 64],
            "latency_ms": [1.0] * 18 + [0.2, 0.3],
        }
    )
    # a classifier of 1,024 outputs and a shuffle kernel: 1 % and 1.6 % of the time
    assert kernel_reason(table, overhead, ranges, overhead_ranges) == ""
    heavy = table.assign(latency_ms=[1.0] * 18 + [0.2, 9.0])
    assert kernel_reason(heavy, overhead, ranges, overhead_ranges) == (
        "33% of its kernel time is in shuffle kernels, a kind it learned from no network"
    )
    big = overhead.copy()
    big["log_n_kernels"] = np.log(200)
    assert "4.0× more kernels than any network it learned from" in kernel_reason(
        table, big, ranges, overhead_ranges
    )


def test_nearest_neighbour_distances_by_brute_force_are_the_k_d_trees(monkeypatch) -> None:
    # a shipped predictor's few hundred training rows skip SciPy's import; many rows use its tree
    from infercast.predictors import ood

    rng = np.random.default_rng(0)
    points = rng.normal(size=(300, 27))
    points[7] = points[3]  # a duplicate is at distance 0 from its twin, not from itself
    brute = ood._neighbour_distances(points)
    monkeypatch.setattr(ood, "BRUTE_POINTS", 10)
    np.testing.assert_allclose(brute, ood._neighbour_distances(points), rtol=1e-12, atol=1e-12)
    assert brute[3] == brute[7] == 0 and (brute[:3] > 0).all()
