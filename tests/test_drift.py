"""Session drift: sentinel passes in campaigns, the between-session spread, the session CI."""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from infercast.store import Measurement, Platform, Store
from infercast.store.drift import Z95, estimate
from tests.helpers import E2E_SPACE, FAST, infercast

PLATFORM = Platform("ort-cpu", {"threads": 1}, {"cpu": "replayed"})
USUAL_MS = {"small": 0.2, "medium": 2.4, "large": 9.0}


def _reading(median_ms: float, half_width: float = 0.005) -> Measurement:
    return Measurement(
        config_id="",
        n=100,
        median_ms=median_ms,
        mean_ms=median_ms,
        low_ms=median_ms * 0.99,
        p10_ms=median_ms,
        p90_ms=median_ms,
        p99_ms=median_ms,
        ci_low_ms=median_ms * (1 - half_width),
        ci_high_ms=median_ms * (1 + half_width),
        cv=0.01,
        cap_hit=False,
        samples=[median_ms],
    )


def _replay(store: Store, campaign: str, factors: list[float], rng: np.random.Generator) -> None:
    """One campaign's passes: every sentinel reads its usual times the pass's factor, with 0.3 %
    of reading noise."""
    for index, factor in enumerate(factors):
        for name, usual in USUAL_MS.items():
            noisy = usual * factor * math.exp(rng.normal(0, 0.003))
            store.add_sentinel(PLATFORM.id, campaign, index, name, f"space:{name}", _reading(noisy))


def test_known_between_session_shift_is_recovered(tmp_path) -> None:
    rng = np.random.default_rng(0)
    with Store(tmp_path / "drift.db") as store:
        store.add_platform(PLATFORM)
        assert store.drift(PLATFORM.id).spread is None  # no passes: nothing assumed
        _replay(store, "monday", [1.0] * 4, rng)
        within = store.drift(PLATFORM.id)
        assert within.basis == "within one campaign" and within.spread < 0.01
        _replay(store, "tuesday", [1.06] * 4, rng)  # the whole host 6 % slower the next day
        drift = store.drift(PLATFORM.id)
    # every cross-session pair differs by log(1.06): the pair spread is that shift, recovered
    assert drift.basis == "across 2 campaigns" and drift.passes == 8 and drift.sentinels == 3
    assert drift.spread == pytest.approx(math.log(1.06), rel=0.08)
    assert drift.low_spread == pytest.approx(math.log(1.06), rel=0.08)


def test_spread_follows_the_size_of_the_model(tmp_path) -> None:
    """A session that slows mid-sized models most (a neighbour thrashing the shared cache): each
    measurement gets the spread of the sentinels of its size."""
    shift = {"small": 1.01, "medium": 1.10, "large": 1.04}
    with Store(tmp_path / "drift.db") as store:
        store.add_platform(PLATFORM)
        for campaign, slower in (("monday", False), ("tuesday", True)):
            for index in range(3):
                for name, usual in USUAL_MS.items():
                    value = usual * (shift[name] if slower else 1.0)
                    store.add_sentinel(PLATFORM.id, campaign, index, name, name, _reading(value))
        drift = store.drift(PLATFORM.id)
    at = np.array([ms for ms, _ in drift.by_size])  # each sentinel's median over both days
    spreads = dict(zip(USUAL_MS, drift.spread_at(at), strict=True))
    for name, factor in shift.items():
        # 9 of the 15 pairs of a sentinel's readings span the two days
        assert spreads[name] == pytest.approx(math.log(factor), rel=0.02)
    assert drift.spread_at(np.array([0.01, 100.0])) == pytest.approx([spreads["small"], spreads["large"]])
    assert drift.spread_at(np.array([1.0]))[0] > spreads["small"]  # between small and medium


def test_spread_of_many_sessions_matches_their_scatter() -> None:
    """Sessions whose speed scatters with a known sd: the spread of two readings is √2 of it."""
    rng = np.random.default_rng(1)
    rows = []
    sigma = 0.03
    for session in range(40):
        shift = rng.normal(0, sigma)
        for index in range(3):
            for name, usual in USUAL_MS.items():
                value = usual * math.exp(shift + rng.normal(0, 0.002))
                rows.append(
                    {
                        "campaign": f"s{session}",
                        "pass_index": index,
                        "sentinel": name,
                        "created_at": session * 100 + index,
                        "median_ms": value,
                        "low_ms": value,
                    }
                )
    drift = estimate(pd.DataFrame(rows))
    assert drift.spread == pytest.approx(math.sqrt(2) * sigma, rel=0.2)


def test_session_ci_widens_by_the_spread_and_slow_passes_flag_contention(tmp_path) -> None:
    rng = np.random.default_rng(2)
    with Store(tmp_path / "drift.db") as store:
        store.add_platform(PLATFORM)
        store.add_configs([{"id": "c1", "model": "space:x"}, {"id": "c2", "model": "space:y"}])
        # monday: pass 0, c1, pass 1, c2, pass 2 — which reads the host 25 % slow
        for index, factor in enumerate((1.0, 1.0, 1.25)):
            for name, usual in USUAL_MS.items():
                store.add_sentinel(PLATFORM.id, "monday", index, name, name, _reading(usual * factor))
            if index < 2:
                measured = replace(_reading(5.0 + index, half_width=0.01), config_id=f"c{index + 1}")
                store.add_measurement(PLATFORM.id, "monday", measured)
        _replay(store, "tuesday", [1.04, 1.04], rng)
        frame = store.measurements().set_index("config_id")
        drift = store.drift(PLATFORM.id)
        raw = store.measurements(session_ci=False).set_index("config_id")
    spread = drift.spread
    within = math.log(1.01 / 1.0)
    at_five = drift.spread_at(np.array([5.0]))[0]  # between the medium and large sentinels
    assert at_five == pytest.approx(spread, rel=0.1)  # every sentinel moved alike
    expected = math.sqrt(within**2 + (Z95 * at_five) ** 2)
    assert frame.at["c1", "ci_high_ms"] == pytest.approx(5.0 * math.exp(expected), rel=1e-3)
    # effects against the median day (1.04): monday -3.9 %, -3.9 %, +18.4 %; tuesday 0, 0
    pairs = [math.log(1 / 1.04)] * 4 + [math.log(1.25 / 1.04)] * 2
    assert spread == pytest.approx(math.sqrt(np.mean(np.square(pairs))), rel=0.05)
    assert frame.at["c1", "within_ci_high_ms"] == pytest.approx(raw.at["c1", "ci_high_ms"])
    assert frame.at["c1", "ci_low_ms"] < raw.at["c1", "ci_low_ms"]
    assert not frame.at["c1", "contended"]
    assert frame.at["c2", "contended"]
    assert "read +" in frame.at["c2", "contended_reason"]


def test_schema_1_store_gains_the_sentinels_table(tmp_path) -> None:
    path = tmp_path / "old.db"
    with Store(path) as store:
        store.add_platform(PLATFORM)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE sentinels")
    db.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    db.commit()
    db.close()
    with Store(path, readonly=True) as store:  # read-only: nothing changes, no readings
        assert store.sentinels().empty and store.drift(PLATFORM.id).spread is None
    with Store(path) as store:
        store.add_sentinel(PLATFORM.id, "c", 0, "small", "m", _reading(1.0))
        assert len(store.sentinels()) == 1
    version = sqlite3.connect(path).execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    assert version == ("2",)


def test_campaign_takes_sentinel_passes_and_resumes_their_count(tmp_path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text(E2E_SPACE)
    db = tmp_path / "runs.db"
    common = ["profile", "--space", str(space), "--db", str(db), *FAST, "--sentinels", "--json"]
    first = infercast(*common, "--n", "2", "--limit", "1")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["sentinels"]["passes"] == 2 and summary["drift"]["passes"] == 2
    assert summary["contended"] in (0, 1)  # counted over the one config measured
    again = infercast(*common, "--n", "2")  # resumes: one config left, passes 2 and 3
    assert again.returncode == 0, again.stderr
    with Store(db, readonly=True) as store:
        readings = store.sentinels()
        frame = store.measurements()
    assert sorted(readings["pass_index"].unique()) == [0, 1, 2, 3]
    assert set(readings["sentinel"]) == {"small", "medium", "large"}
    assert len(frame) == 2 and frame["session_spread"].notna().all()
    assert (frame["ci_high_ms"] >= frame["within_ci_high_ms"]).all()
    measured = infercast(
        "measure", frame["model"].iloc[0], "--db", str(db), "--campaign", "m", *FAST, "--json"
    )
    assert measured.returncode == 0, measured.stderr
    result = json.loads(measured.stdout)[0]
    assert result["ci_low_ms"] <= result["within_ci_low_ms"] and result["session_spread"] > 0


def test_steady_latency_undoes_a_fast_phase_of_the_host(tmp_path) -> None:
    """The host runs every model 20 % fast for a while (this VM did, for minutes): the passes
    around a measurement carry that, and ``steady_ms`` brings it and its op rows back to the
    host's usual speed. A 1 ms sentinel reading 8 % off in one pass, as noisy small ones do, barely
    moves the correction: each sentinel weighs by the inverse square of its typical cv."""
    from infercast.datasets import store_tables

    def pass_of(campaign: str, index: int, factor: float, small_off: float = 1.0) -> None:
        for name, usual in USUAL_MS.items():
            reading = _reading(usual * factor * (small_off if name == "small" else 1.0))
            cv = 0.08 if name == "small" else 0.01
            reading = replace(reading, low_ms=reading.median_ms, cv=cv)
            store.add_sentinel(PLATFORM.id, campaign, index, name, name, reading)

    def measured(config: str, campaign: str, low_ms: float) -> None:
        row = replace(
            _reading(low_ms),
            config_id=config,
            low_ms=low_ms,
            ops=[{"op_type": "conv", "kernel": "k0", "fused_ops": ["Conv"], "latency_ms": low_ms * 0.9}],
        )
        store.add_measurement(PLATFORM.id, campaign, row)

    with Store(tmp_path / "drift.db") as store:
        store.add_platform(PLATFORM)
        store.add_configs([{"id": c, "model": f"space:{c}"} for c in ("usual", "fast", "untimed")])
        pass_of("monday", 0, 1.0)
        measured("usual", "monday", 10.0)
        pass_of("monday", 1, 1.0)
        pass_of("tuesday", 0, 0.8, small_off=1.08)
        measured("fast", "tuesday", 8.0)  # a 10 ms model read 20 % fast
        pass_of("tuesday", 1, 0.8)
        pass_of("wednesday", 0, 1.0)
        pass_of("wednesday", 1, 1.0)
        measured("untimed", "no-sentinels", 9.0)
        frame = store.measurements().set_index("config_id")
        ops, e2e = store_tables(store, PLATFORM.id, "steady_ms")
    assert frame.at["usual", "steady_ms"] == pytest.approx(10.0, rel=1e-3)
    # the noisy small sentinel read 8 % off: weighed by cv it moves the effect by 0.1 %, not 2.6 %
    assert frame.at["fast", "host_effect"] == pytest.approx(math.log(0.8), abs=0.003)
    assert frame.at["fast", "steady_ms"] == pytest.approx(10.0, rel=0.005)
    assert frame.at["untimed", "host_effect"] == 0.0  # a campaign without passes is left as read
    assert frame.at["untimed", "steady_ms"] == 9.0
    steady_ops = ops.set_index("model")["latency_ms"]
    assert steady_ops["fast"] == pytest.approx(frame.at["fast", "steady_ms"] * 0.9, rel=1e-9)
    assert e2e.set_index("model").at["fast", "latency_ms"] == frame.at["fast", "steady_ms"]
