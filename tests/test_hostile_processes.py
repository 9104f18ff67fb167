"""Hostile conditions that a one-line table case cannot show: ``train`` killed at random points,
a user factory that prints or forks, a file size limit hit while a store is created, a flood of
duplicate rows, and the advice printed for errors the machine raises (read-only files, locks)."""

from __future__ import annotations

import errno
import hashlib
import json
import random
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from infercast import api
from infercast.errors import explain
from infercast.files import UNFINISHED
from infercast.predictors import CascadeBlend

from . import hostile_world
from .helpers import infercast, stored_rows, synthetic_store

# boosting and forest sizes that keep one ``train`` process short: killing it is the point
TRAIN = ["--no-opwise", "--n-estimators", "20", "--forest-estimators", "10", "--json"]
SMALLEST = {"n_estimators": 20, "forest_estimators": 10}
# the metadata files record when and how long: they differ between two runs of the same training
DATED = {"meta.json", "physical/meta.json"}


def _files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _train(db: Path, out: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "infercast", "train", "--db", str(db), "--out", str(out), *TRAIN]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _finished(process: subprocess.Popen[bytes]) -> float:
    started = time.monotonic()
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err.decode()[-3000:]
    return time.monotonic() - started


def _new_meta(folder: Path, old: str) -> bool:
    """Whether a new ``meta.json`` is written, beside ``pred`` or (were it written in place) in it."""
    written = [*folder.glob(".pred.partial-*/meta.json"), folder / "pred" / "meta.json"]
    return any(p.is_file() and hashlib.sha256(p.read_bytes()).hexdigest() != old for p in written)


def _wait_for(condition: Callable[[], bool], limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, "train never reached the point to kill it at"
        time.sleep(0.01)


def test_train_killed_at_random_points_leaves_the_old_predictor_or_the_new_one(tmp_path) -> None:
    synthetic_store(tmp_path / "old.db", n=30)
    synthetic_store(tmp_path / "new.db", n=40, seed=5)
    pred, reference = tmp_path / "pred", tmp_path / "reference"
    api.train(tmp_path / "old.db", pred, opwise=False, blend=CascadeBlend(**SMALLEST))
    # a route the new training will not write: a mix would keep it
    (pred / "opwise").mkdir()
    (pred / "opwise" / "meta.json").write_text("{}")
    old = _files(pred)
    duration = _finished(_train(tmp_path / "new.db", reference))
    new = {name: digest for name, digest in _files(reference).items() if name not in DATED}
    rng = random.Random(50)
    # where the issue saw a mix (SIGTERM once the new blend's meta.json is written), then at random
    points: list[float | None] = [None] + [rng.uniform(0.3, 1.05) * duration for _ in range(5)]
    for attempt, point in enumerate(points):
        process = _train(tmp_path / "new.db", pred)
        if point is None:
            _wait_for(lambda before=old["meta.json"]: _new_meta(tmp_path, before), duration * 2)
        else:
            time.sleep(point)
        process.send_signal(signal.SIGKILL if attempt % 2 else signal.SIGTERM)
        process.communicate(timeout=60)
        now = _files(pred)
        if now == old:
            continue
        assert UNFINISHED not in now and "opwise/meta.json" not in now, sorted(now)
        assert {n: d for n, d in now.items() if n not in DATED} == new, "a mix of two trainings"
        assert now["meta.json"] != old["meta.json"]
        old = now
    # the next run sweeps what the killed ones left beside the directory
    api.train(tmp_path / "new.db", pred, opwise=False, blend=CascadeBlend(**SMALLEST))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".pred")) == []
    assert infercast("predict", "--predictor", str(pred), "space:carb-resnet?depth=8").returncode == 0


@pytest.fixture(scope="module")
def factories(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("factories")
    text = "import time\nimport torch\n\n\ndef tiny():\n"
    text += "    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())\n"
    (folder / "factories.py").write_text(text + hostile_world.MORE_FACTORIES)
    return folder / "factories.py"


def test_a_factory_that_prints_leaves_json_output_pure(factories) -> None:
    result = infercast("inspect", f"{factories}:chatty", "--json", isolated=True)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["n_ops"] == 2
    assert "hello from the factory" in result.stderr


def test_a_factory_that_forks_is_killed_with_its_children(factories) -> None:
    started = time.monotonic()
    result = infercast("inspect", f"{factories}:forks", "--timeout-s", "4", isolated=True)
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    assert "4 s" in result.stderr and "Traceback" not in result.stderr
    # the pipes closed: no forked child outlived the command holding them open
    assert elapsed < 4 + 25, elapsed


def _limited(bytes_: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (bytes_, bytes_))


def test_a_store_whose_creation_hit_the_file_size_limit_is_created_by_the_rerun(tmp_path) -> None:
    table = tmp_path / "one.csv"
    table.write_text(hostile_world.GOOD)
    db = tmp_path / "runs.db"
    command = [
        sys.executable,
        "-m",
        "infercast",
        "db",
        "import",
        str(table),
        "--device",
        "d",
        "--db",
        str(db),
    ]
    limited = subprocess.run(command, capture_output=True, text=True, preexec_fn=lambda: _limited(8192))
    assert limited.returncode == 2, limited.stderr
    lines = limited.stderr.strip().splitlines()
    assert len(lines) == 1 and "file size limit" in lines[0], limited.stderr
    assert not db.exists()
    rerun = subprocess.run(command, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert stored_rows(db) == 1


def test_a_flood_of_identical_rows_is_stored_once(tmp_path) -> None:
    table = tmp_path / "flood.csv"
    table.write_text(hostile_world.GOOD + "space:carb-resnet?depth=8,1.5\n" * 20_000)
    result = infercast("db", "import", str(table), "--device", "d", "--db", str(tmp_path / "runs.db"))
    assert result.returncode == 0, result.stderr
    assert stored_rows(tmp_path / "runs.db") == 1


@pytest.mark.parametrize(
    ("error", "advice"),
    [
        (OSError(errno.EROFS, "Read-only file system", "/mnt/runs.db"), "read-only: write elsewhere"),
        (OSError(errno.EACCES, "Permission denied", "/x/runs.db"), "permission denied"),
        (OSError(errno.EPERM, "Operation not permitted", "/x/runs.db"), "immutable"),
        (OSError(errno.ENOSPC, "No space left on device"), "disk is full"),
        (OSError(errno.EFBIG, "File too large"), "ulimit -f"),
        (sqlite3.OperationalError("attempt to write a readonly database"), "copy it somewhere writable"),
        (sqlite3.OperationalError("database is locked"), "locked by another process"),
        (sqlite3.OperationalError("unable to open database file"), "directory is read-only"),
        (sqlite3.DatabaseError("file is not a database"), "could not be used"),
    ],
    ids=["erofs", "eacces", "eperm", "enospc", "efbig", "readonly", "locked", "unable-to-open", "other"],
)
def test_errors_the_machine_raises_say_what_to_do(error, advice) -> None:
    # runs as root here, where chmod and chattr cannot make a file unwritable: the message is
    # checked from the error the kernel or SQLite raises
    text = explain(error)
    assert advice in text and "\n" not in text, text
    if isinstance(error, OSError) and error.filename:
        assert error.filename in text


def test_the_wait_for_a_locked_store_is_read_from_the_environment(monkeypatch) -> None:
    from infercast.store import StoreError, wait_s

    monkeypatch.setenv("INFERCAST_STORE_WAIT_S", "2.5")
    assert wait_s() == 2.5
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv("INFERCAST_STORE_WAIT_S", bad)
        with pytest.raises(StoreError, match="INFERCAST_STORE_WAIT_S"):
            wait_s()
    monkeypatch.delenv("INFERCAST_STORE_WAIT_S")
    assert wait_s() == 30
