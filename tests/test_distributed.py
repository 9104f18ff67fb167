"""Ray, for real: a head and a second node started with ``ray start`` on a loopback address, two
fake device kinds as custom resources; a campaign split across them survives the second node's
raylet being killed, a killed driver resumes from the store, and screening shards stage 1 over
the cluster. Campaigns are 8 or 4 configs on each kind, in chunks of 2: work is left after each
kill (a chunk's results are stored when it is done; with chunks of 4 the second node, killed on
the first result of its kind, sometimes finished the other chunk first once a capture stopped
importing TorchDynamo).
The cluster is stopped at the end.

Ray replaces 127.0.0.1 by the host's network address when it names a node; 127.0.0.2 (also
loopback) is taken as given, so every byte stays on this machine.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import E2E_SPACE, FAST, infercast, synthetic_store

if os.environ.get("CI"):
    import ray  # noqa: F401  (under CI Ray must be there: `make test` installs the extra)
else:
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'infercast[ray]'")

HOST = "127.0.0.2"
RAY = str(Path(sys.executable).with_name("ray"))
ENV = {
    **os.environ,
    "RAY_USAGE_STATS_ENABLED": "0",
    # notice a dead node within seconds, not the default half minute
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    # Ray starts its workers at niceness 15: beside `make test`'s other tests (niceness 10) the
    # tasks measuring the campaign starved, and these tests took 550 s instead of 150 s
    "RAY_worker_niceness": "0",
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _ray(*args: str) -> None:
    done = subprocess.run([RAY, *args], env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


class Cluster:
    def __init__(self, folder: Path) -> None:
        self.address = f"{HOST}:{_free_port()}"
        self.folder = folder
        self.second_port = 0

    def start_head(self) -> None:
        _ray(
            "start", "--head", f"--node-ip-address={HOST}", f"--port={self.address.split(':')[1]}",
            "--num-cpus=1", '--resources={"device:kind-a": 1}', "--include-dashboard=false",
            "--disable-usage-stats",
        )  # fmt: skip

    def start_second(self) -> None:
        self.second_port = _free_port()
        _ray(
            "start", f"--address={self.address}", f"--node-ip-address={HOST}", "--num-cpus=1",
            f"--node-manager-port={self.second_port}", '--resources={"device:kind-a": 1, "device:kind-b": 1}',
            "--disable-usage-stats",
        )  # fmt: skip

    def kill_second(self) -> None:
        """SIGKILL the second node's raylet (found by its node-manager port)."""
        found = subprocess.run(
            ["pgrep", "-f", f"raylet.*--node_manager_port={self.second_port}"], capture_output=True, text=True
        )
        pids = [int(p) for p in found.stdout.split()]
        assert pids, "the second node's raylet is not running"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("ray")
    (folder / "space.yaml").write_text(E2E_SPACE)
    running = Cluster(folder)
    try:
        running.start_head()
        running.start_second()
        yield running
    finally:
        subprocess.run([RAY, "stop", "--force"], env=ENV, capture_output=True, timeout=120)


def _profile(cluster: Cluster, db: Path, seed: int, n: int, chunk: int) -> list[str]:
    return [
        sys.executable, "-m", "infercast", "profile", "--space", str(cluster.folder / "space.yaml"),
        "--n", str(n), "--seed", str(seed), "--db", str(db), "--ray", cluster.address,
        "--device", "kind-a", "--device", "kind-b", "--chunk", str(chunk), *FAST, "--json",
    ]  # fmt: skip


def _stored(db: Path, kind: str | None = None) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as con:
        query = "SELECT count(*) FROM measurements m JOIN platforms p ON m.platform_id = p.id"
        try:
            if kind is None:
                return con.execute(query).fetchone()[0]
            return con.execute(query + " WHERE p.settings LIKE ?", (f'%"{kind}"%',)).fetchone()[0]
        except sqlite3.OperationalError:  # the driver has not created the tables yet
            return 0


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _per_platform(db: Path) -> dict[str, tuple[int, int]]:
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT p.settings, count(*), count(DISTINCT m.config_id) FROM measurements m "
            "JOIN platforms p ON m.platform_id = p.id GROUP BY p.id"
        ).fetchall()
    return {json.loads(settings)["device_kind"]: (n, distinct) for settings, n, distinct in rows}


def test_campaign_survives_the_second_nodes_raylet_being_killed(cluster: Cluster) -> None:
    db = cluster.folder / "killed-node.db"
    driver = subprocess.Popen(
        _profile(cluster, db, seed=0, n=8, chunk=2), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait(lambda: _stored(db, "kind-b") >= 1, 240, "a first kind-b result")
        cluster.kill_second()
        time.sleep(3)
        cluster.start_second()  # kind-b exists nowhere else: its tasks wait for this node
        out, err = driver.communicate(timeout=400)
    finally:
        driver.kill()
    assert driver.returncode == 0, err[-3000:]
    summary = json.loads(out)
    configs = summary["todo"] // 2
    assert summary["done"] == summary["todo"] and summary["left"] == 0 and summary["lost"] == 0
    # every config measured once on each kind, none twice
    assert _per_platform(db) == {"kind-a": (configs, configs), "kind-b": (configs, configs)}
    # kind-b work was done by the node before the kill and by the node that replaced it
    assert len(summary["nodes"]["kind-b"]) >= 2


def test_a_killed_driver_resumes_from_the_store(cluster: Cluster) -> None:
    db = cluster.folder / "killed-driver.db"
    driver = subprocess.Popen(
        _profile(cluster, db, seed=1, n=4, chunk=2), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        _wait(lambda: _stored(db) >= 3, 240, "three results")
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
    before = _stored(db)
    rerun = subprocess.run(
        _profile(cluster, db, seed=1, n=4, chunk=2), capture_output=True, text=True, timeout=400
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    summary = json.loads(rerun.stdout)
    assert summary["skipped"] == before and summary["left"] == 0
    configs = (summary["todo"] + before) // 2
    assert _per_platform(db) == {"kind-a": (configs, configs), "kind-b": (configs, configs)}


def test_screening_shards_stage_one_over_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    import numpy as np

    from infercast.distributed import shard_seed
    from infercast.predictors import CascadeBlend
    from infercast.screen import Budgets, from_space, stage_one

    # what is screened with comes from any store: a synthetic one, built in a second
    db = synthetic_store(tmp_path / "runs.db")["db"]
    predictor = tmp_path / "predictor"
    trained = infercast(
        "train", "--db", str(db), "--out", str(predictor), "--no-opwise",
        "--n-estimators", "40", "--forest-estimators", "20", "--test-size", "0.15", "--json",
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    args = ["--predictor", str(predictor), "--space", "carb-resnet", "--n", "20000", "--max-latency-ms", "2"]
    result = infercast("screen", *args, "--ray", cluster.address, "--shards", "4", "--json", isolated=True)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout)
    assert data["candidates"] == 20000 and data["stage1"]["shards"] == 4
    # the same four shards screened here, one after the other, survive identically
    model = CascadeBlend.load(predictor)
    local = [
        stage_one(model, from_space("carb-resnet", 5000, shard_seed(0, i)), Budgets(max_latency_ms=2), 0.05)[
            1
        ]
        for i in range(4)
    ]
    assert data["stage1"]["survivors"] == sum(r["survivors"] for r in local)
    assert data["stage1"]["removed_by"]["latency"] == sum(r["removed_by"]["latency"] for r in local)
    assert 0 < data["stage1"]["elimination_rate"] < 1
    assert data["shortlist"] or "no candidate meets" in data["message"]
    assert np.isclose(data["stage1"]["elimination_rate"], 1 - data["stage1"]["survivors"] / 20000)
