"""The SQLite store: round trip, no duplicates, refusal of foreign files, atomicity under kill -9."""

from __future__ import annotations

import hashlib
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pandas as pd
import pytest

from infercast.errors import InfercastError
from infercast.store import Measurement, Platform, Store, StoreError

PLATFORM = Platform("ort-cpu", {"threads": 1, "opt_level": "all"}, {"cpu": "test-cpu", "cores": 2})


def measurement(config_id: str, ops: int = 0) -> Measurement:
    samples = [1.0, 1.1, 0.9, 1.05]
    return Measurement(
        config_id=config_id,
        n=4,
        median_ms=1.025,
        mean_ms=1.0125,
        low_ms=0.9,
        p10_ms=0.93,
        p90_ms=1.09,
        p99_ms=1.1,
        ci_low_ms=0.95,
        ci_high_ms=1.08,
        cv=0.07,
        cap_hit=False,
        samples=samples,
        peak_memory_bytes=1234,
        peak_memory_definition="test",
        energy_reason="no energy sensor on this host",
        ops=[{"op_type": "conv", "latency_ms": 0.1 * i} for i in range(ops)],
    )


def test_round_trip_and_no_duplicates(tmp_path) -> None:
    path = tmp_path / "runs.db"
    with Store(path) as store:
        platform_id = store.add_platform(PLATFORM)
        assert store.add_platform(PLATFORM) == platform_id  # idempotent
        store.add_configs([{"id": "a", "model": "space:x?k=1", "space": "x", "params": {"k": 1}}])
        store.add_configs([{"id": "b", "model": "pytorchcv:resnet18"}])
        first = store.add_measurement(platform_id, "c1", measurement("a", ops=3))
        assert first is not None
        assert store.add_measurement(platform_id, "c1", measurement("a", ops=3)) is None
        assert store.add_measurement(platform_id, "c2", measurement("a")) is not None  # another campaign
        store.add_failure("b", platform_id, "c1", "error", "RuntimeError: boom")
        assert store.done(platform_id, "c1") == {"a", "b"}
    with Store(path) as store:  # reopened
        frame = store.measurements(platform_id)
        assert len(frame) == 2 and frame.loc[0, "model"] == "space:x?k=1"
        assert frame.loc[0, "energy_j"] is None or pd.isna(frame.loc[0, "energy_j"])
        assert frame.loc[0, "energy_reason"] == "no energy sensor on this host"
        ops = store.op_measurements()
        assert len(ops) == 3 and list(ops["op_type"]) == ["conv"] * 3
        assert store.failures().loc[0, "reason"] == "RuntimeError: boom"
        assert store.platforms().loc[0, "settings"] == {"threads": 1, "opt_level": "all"}
        for suffix in (".parquet", ".csv"):
            out = store.export(tmp_path / f"runs{suffix}")
            flat = pd.read_parquet(out) if suffix == ".parquet" else pd.read_csv(out)
            assert len(flat) == 2
            # flat columns: the platform's backend and settings, the config's parameters
            assert (flat["backend"] == "ort-cpu").all() and (flat["setting_opt_level"] == "all").all()
            assert list(flat["param_k"]) == [1, 1] and "params" not in flat.columns
        with pytest.raises(InfercastError, match=r"use a \.parquet or \.csv"):
            store.export(tmp_path / "runs.xlsx")
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_store_created_meanwhile_by_another_process_is_kept(tmp_path) -> None:
    from infercast.store.connection import create

    path = tmp_path / "runs.db"
    with Store(path) as store:  # the other process: created the store and wrote to it
        platform_id = store.add_platform(PLATFORM)
        store.add_configs([{"id": "a", "model": "space:x?k=1"}])
        store.add_measurement(platform_id, "c1", measurement("a"))
    create(path, replace=False)  # this one found no file a moment ago and built its own
    with Store(path) as store:
        assert len(store.measurements()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.db"]


def test_a_schema_less_file_left_by_a_failed_creation_becomes_a_store(tmp_path) -> None:
    path = tmp_path / "runs.db"
    sqlite3.connect(path).execute("PRAGMA user_version=1").connection.close()
    assert path.read_bytes()[:16] == b"SQLite format 3\x00"
    with Store(path) as store:
        assert store.measurements().empty


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_foreign_files_are_refused_untouched(tmp_path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all" * 100)
    before = digest(garbage)
    with pytest.raises(StoreError, match=r"is not a SQLite database .*nothing was changed"):
        Store(garbage)
    assert digest(garbage) == before

    foreign = tmp_path / "foreign.db"
    connection = sqlite3.connect(foreign)
    connection.execute("CREATE TABLE invoices (id INTEGER, amount REAL)")
    connection.commit()
    connection.close()
    before = digest(foreign)
    with pytest.raises(StoreError, match="not an infercast store; nothing was changed"):
        Store(foreign)
    assert digest(foreign) == before

    newer = tmp_path / "newer.db"
    Store(newer).close()
    connection = sqlite3.connect(newer)
    connection.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    connection.commit()
    connection.close()
    with pytest.raises(StoreError, match="schema 99, newer than this infercast"):
        Store(newer)


WRITER = textwrap.dedent(
    """
    import sys, time
    from infercast.store import Store
    from tests.test_store import PLATFORM, measurement

    path, total = sys.argv[1], int(sys.argv[2])
    with Store(path) as store:
        platform_id = store.add_platform(PLATFORM)
        store.add_configs([{"id": f"c{i}", "model": f"m{i}"} for i in range(total)])
        done = store.done(platform_id, "kill")
        for i in range(total):
            if f"c{i}" in done:
                continue
            store.add_measurement(platform_id, "kill", measurement(f"c{i}", ops=20))
            time.sleep(0.003)
    """
)


def test_kill_9_loses_at_most_the_item_in_flight(tmp_path) -> None:
    # imported here: WRITER imports this module, and tests.helpers would make it import PyTorch
    from .helpers import stored_rows

    # enough items that six kills (at most 6 × 0.8 s of writing, ~250 items/s) land before the end
    path, total, ops = tmp_path / "killed.db", 2500, 20
    rng = random.Random(0)
    counts = []
    for _ in range(6):
        before = counts[-1] if counts else 0
        process = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(total)], cwd=str(_repo_root())
        )
        # kill once this run has stored something new, at a random moment after: a fixed delay of
        # 0.8–1.6 s came before the writer's first item on a slow machine under the suite's load
        deadline = time.monotonic() + 120
        while process.poll() is None and stored_rows(path) <= before and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.8))
        process.send_signal(signal.SIGKILL)
        process.wait()
        with Store(path) as store:
            frame = store.measurements()
            assert frame["config_id"].is_unique
            per_measurement = store.op_measurements().groupby("measurement_id").size()
            assert (per_measurement == ops).all() and len(per_measurement) == len(frame)  # never half-written
            counts.append(len(frame))
    assert counts == sorted(counts)  # nothing committed is ever lost
    assert counts[0] > 0 and counts[-1] < total, counts  # the kills landed mid-campaign
    finish = subprocess.run(
        [sys.executable, "-c", WRITER, str(path), str(total)], cwd=str(_repo_root()), check=True
    )
    assert finish.returncode == 0
    with Store(path) as store:
        assert sorted(store.measurements()["config_id"]) == sorted(f"c{i}" for i in range(total))


def _repo_root():
    from pathlib import Path

    return Path(__file__).resolve().parents[1]


def test_cli_export_and_refusal(tmp_path) -> None:
    from .helpers import infercast

    path = tmp_path / "runs.db"
    with Store(path) as store:
        platform_id = store.add_platform(PLATFORM)
        store.add_configs([{"id": "a", "model": "m"}])
        store.add_measurement(platform_id, "c", measurement("a"))
    result = infercast("db", "export", "--db", str(path), "--out", str(tmp_path / "runs.parquet"), "--json")
    assert result.returncode == 0, result.stderr
    assert '"measurements": 1' in result.stdout
    bad = tmp_path / "notes.db"
    bad.write_text("hello")
    refused = infercast("db", "export", "--db", str(bad), "--out", str(tmp_path / "x.csv"))
    assert refused.returncode == 2 and "not a SQLite database" in refused.stderr


def test_import_latencies_measured_elsewhere(tmp_path) -> None:
    """A table from another tool becomes a platform per setting, and train's data; a second import
    stores nothing new; a bad row is named."""
    from infercast.api.importing import TableImportError, import_measurements
    from infercast.datasets import training_data

    # imported here: the kill -9 test's writer imports this module and must start in well under 1 s
    from .helpers import infercast

    models = [f"space:carb-resnet?depth={d}&width=0.25&input_size=32&early_downsample=0" for d in (8, 10, 12)]
    table = pd.DataFrame(
        {
            "model": models * 2,
            "latency_ms": [1.0, 1.4, 1.9, 0.6, 0.8, 1.1],
            "std_ms": 0.05,
            "n": 20,
            "delegate": ["cpu"] * 3 + ["gpu"] * 3,
        }
    )
    path = tmp_path / "phone.csv"
    table.to_csv(path, index=False)
    db = tmp_path / "runs.db"
    captured: list[tuple[int, int]] = []
    result = import_measurements(
        db, path, device="my-phone", backend="tflite", progress=lambda *done: captured.append(done)
    )
    assert captured == [(0, 3), (1, 3), (2, 3), (3, 3)]  # one capture per distinct model
    assert result["stored"] == 6 and result["already_stored"] == 0 and not result["not_captured"]
    assert sorted(p["settings"]["delegate"] for p in result["platforms"]) == ["cpu", "gpu"]
    gpu = next(p["id"] for p in result["platforms"] if p["settings"]["delegate"] == "gpu")
    with Store(db, readonly=True) as store:
        data = training_data(store, gpu)
        assert sorted(data.y["latency_ms"]) == [0.6, 0.8, 1.1]
        assert data.x["flops"].nunique() == 3  # captured here: the features of each model
        row = store.measurements(gpu).iloc[0]
        assert row["n"] == 20 and row["ci_low_ms"] < row["median_ms"] < row["ci_high_ms"]
    again = import_measurements(db, path, device="my-phone", backend="tflite")
    assert again["stored"] == 0 and again["already_stored"] == 6
    table["latency_ms"] = table["latency_ms"].astype(object)
    table.loc[4, "latency_ms"] = "fast"
    table.to_csv(path, index=False)
    with pytest.raises(TableImportError, match="latency_ms, row 5: 'fast'"):
        import_measurements(db, path, device="my-phone")
    cli = infercast("db", "import", str(tmp_path / "missing.csv"), "--device", "x", "--db", str(db))
    assert cli.returncode == 2 and "no such file" in cli.stderr
