"""Hostile and malformed input, table-driven: every failure a user can cause is one line on stderr
naming the problem, the promised exit code, no traceback, and the files named stay byte-identical
(no store created or migrated, no -wal / -shm left beside a refused one). Commands that run user
code are cut off at their --timeout-s.

Each case is (id, arguments, exit code, phrase, files that must not change or appear). Arguments
and paths use ``{w}`` for the case's world folder (see ``world``), which holds real inputs: a
synthetic store, a trained predictor, op tables, model factories, YAML spaces and damaged copies.
Most cases run the CLI in-process (typer's runner: the real command, no interpreter start-up);
the ones that must show a command does not hang run it as a real subprocess with a wall clock.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infercast.cli import app

from . import hostile_world
from .helpers import SMALL, infercast, synthetic_store

FACTORIES = """
import time
import torch


def tiny():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())


tiny.input_shape = (1, 3, 16, 16)


def sleeps():
    time.sleep(3600)


def raises():
    raise RuntimeError("the factory is broken")


def not_a_module():
    return 42


def no_shape():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())


def rejects_shape():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 10))


rejects_shape.input_shape = (1, 3, 20, 20)
"""

GOOD_SPACE = """
name: small
family: carb-resnet
params:
  depth: {min: 8, max: 14}
  width: [0.25]
  input_size: [32]
  batch: [1]
  precision: [fp32]
"""

SPACES = {
    "space-depth-5000.yaml": GOOD_SPACE.replace("{min: 8, max: 14}", "{min: 8, max: 5000}"),
    "space-width-neg.yaml": GOOD_SPACE.replace("width: [0.25]", "width: {min: -1, max: 1.0}"),
    "space-min-over-max.yaml": GOOD_SPACE.replace("{min: 8, max: 14}", "{min: 50, max: 10}"),
    "space-tag.yaml": "!!python/object/apply:os.system ['echo pwned > {w}/pwned']\n",
    "space-list.yaml": "- a\n- b\n",
    "space-unknown-key.yaml": GOOD_SPACE + "colour: red\n",
    "space-unknown-param.yaml": GOOD_SPACE.replace("  batch: [1]", "  batchsize: [1]"),
    "space-bad-yaml.yaml": "name: [unclosed\n",
    "space-family-nb.yaml": GOOD_SPACE.replace("carb-resnet", "no-such-family"),
    "space-empty-list.yaml": GOOD_SPACE.replace("width: [0.25]", "width: []"),
    "space-string-width.yaml": GOOD_SPACE.replace("width: [0.25]", "width: [wide]"),
    "space-duplicate-key.yaml": GOOD_SPACE.replace("  batch: [1]", "  batch: [1]\n  width: [0.5]"),
    "space-empty-map.yaml": GOOD_SPACE.replace("width: [0.25]", "width: {}"),
    "space-family-markup.yaml": GOOD_SPACE.replace("carb-resnet", "'[red]family[/]'"),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[Path]:
    """Everything the cases read, built once: a store and a predictor trained on it, op tables,
    model factories, spaces, damaged copies of each (``hostile_world``), a tampered device cache
    (``INFERCAST_CACHE``) and a store another writer holds locked (waited for half a second)."""
    from infercast import api
    from infercast.predictors import CascadeBlend

    w = tmp_path_factory.mktemp("hostile")
    synthetic_store(w / "runs.db", n=30)
    api.train(w / "runs.db", w / "pred", opwise=False, blend=CascadeBlend(**SMALL))
    (w / "factories.py").write_text(FACTORIES)
    (w / "space.yaml").write_text(GOOD_SPACE)
    for name, text in SPACES.items():
        (w / name).write_text(text.replace("{w}", str(w)))
    (w / "empty.db").write_bytes(b"")
    (w / "garbage.db").write_bytes(b"this is not sqlite at all\n" * 40)
    (w / "truncated.db").write_bytes((w / "runs.db").read_bytes()[:3000])
    future = w / "future.db"
    shutil.copy(w / "runs.db", future)
    with sqlite3.connect(future) as db:
        db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    db.close()
    foreign = sqlite3.connect(w / "foreign.db")
    foreign.execute("CREATE TABLE t (x)")
    foreign.commit()
    foreign.close()
    (w / "a-file").write_text("not a directory\n")
    (w / "ops.csv").write_text(
        "model,op_type,h_in,w_in,c_in,h_out,w_out,c_out,kernel_size,stride,groups,flops,latency_ms\n"
        + "".join(f"m{i},conv,8,8,4,8,8,4,3,1,1,{1000 * (i + 1)},{0.1 * (i + 1)}\n" for i in range(6))
    )
    (w / "e2e-good.csv").write_text("model,latency_ms\nspace:carb-resnet?depth=8,1.5\n")
    (w / "e2e.csv").write_text("model,latency_ms\n" + "".join(f"m{i},{0.2 * (i + 1)}\n" for i in range(6)))
    (w / "ops-no-model.csv").write_text("op_type,flops,latency_ms\nconv,100,0.1\n")
    (w / "e2e-no-latency.csv").write_text("model\nm0\n")
    (w / "ops-text-flops.csv").write_text((w / "ops.csv").read_text().replace(",1000,", ",lots,", 1))
    (w / "ops.txt").write_text("model,op_type\n")
    (w / "configs.csv").write_text("depth,width\n8,0.25\n")
    _damaged_predictors(w)
    release = hostile_world.build(w)
    # the world is read by every case: none may change it
    os.sync()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFERCAST_CACHE", str(w / "cache"))
        patch.setenv("INFERCAST_STORE_WAIT_S", "0.5")
        yield w
    release()


def _damaged_predictors(w: Path) -> None:
    source = w / "pred"
    meta = json.loads((source / "meta.json").read_text())
    learner_file = meta["stages"]["latency"]["files"]["xgboost"]
    damages = {
        "pred-xgb-garbage": lambda d: _garbage(d, ".xgb.json"),
        "pred-lgb-garbage": lambda d: _garbage(d, ".lgb.txt"),
        "pred-forest-garbage": lambda d: _garbage(d, ".forest.json"),
        "pred-meta-list": lambda d: (d / "meta.json").write_text("[1, 2, 3]"),
        "pred-meta-not-json": lambda d: (d / "meta.json").write_text("{not json"),
        "pred-no-stages": lambda d: (d / "meta.json").write_text(
            json.dumps({k: v for k, v in meta.items() if k != "stages"})
        ),
        "pred-pickle": lambda d: _rename(d, learner_file, "model.pkl"),
        "pred-missing-file": lambda d: (d / learner_file).unlink(),
        "pred-escape": lambda d: _rename(d, learner_file, "../../etc/passwd"),
        "pred-future": lambda d: (d / "meta.json").write_text(json.dumps({**meta, "format_version": 99})),
        "pred-stage-not-dict": lambda d: (d / "meta.json").write_text(json.dumps({**meta, "stages": [1]})),
    }
    for name, damage in damages.items():
        shutil.copytree(source, w / name)
        damage(w / name)
    (w / "pred-empty").mkdir()


def _garbage(folder: Path, suffix: str) -> None:
    for path in folder.glob(f"*{suffix}"):
        path.write_bytes(b"\x00\x01garbage{" * 50)


def _rename(folder: Path, old: str, new: str) -> None:
    meta_path = folder / "meta.json"
    text = meta_path.read_text().replace(json.dumps(old), json.dumps(new))
    meta_path.write_text(text)
    if not new.startswith(".."):
        (folder / old).rename(folder / new)


SHAPE = "1x3x100000x100000"
LONG = "x" * 5000
# (id, args, exit code, phrase in stderr, paths that must stay byte-identical or absent)
CASES = [
    # -- read-only commands write nothing, refuse without -wal / -shm ---------------------------
    ("export-empty-db", "db export --db {w}/empty.db --out {w}/o1.csv", 2, "empty", ["empty.db", "o1.csv"]),
    ("export-missing-db", "db export --db {w}/nope.db --out {w}/o2.csv", 2, "nope.db", ["nope.db", "o2.csv"]),
    (
        "export-garbage-db",
        "db export --db {w}/garbage.db --out {w}/o3.csv",
        2,
        "not a SQLite",
        ["garbage.db"],
    ),
    (
        "export-truncated-db",
        "db export --db {w}/truncated.db --out {w}/o4.csv",
        2,
        "truncated.db",
        ["truncated.db"],
    ),
    ("export-future-db", "db export --db {w}/future.db --out {w}/o5.csv", 2, "newer than", ["future.db"]),
    (
        "export-foreign-db",
        "db export --db {w}/foreign.db --out {w}/o6.csv",
        2,
        "not an infercast store",
        ["foreign.db"],
    ),
    ("report-empty-db", "report --db {w}/empty.db --out {w}/r.html", 2, "empty", ["empty.db", "r.html"]),
    ("report-missing-db", "report --db {w}/nope.db --out {w}/r.html", 2, "nope.db", ["nope.db"]),
    ("train-missing-db", "train --db {w}/nope.db --out {w}/p1", 2, "nope.db", ["nope.db", "p1"]),
    ("train-empty-db", "train --db {w}/empty.db --out {w}/p2", 2, "empty", ["empty.db", "p2"]),
    ("train-future-db", "train --db {w}/future.db --out {w}/p3", 2, "newer than", ["future.db", "p3"]),
    ("evaluate-empty-db", "evaluate --predictor {w}/pred --db {w}/empty.db", 2, "empty", ["empty.db"]),
    (
        "evaluate-garbage-db",
        "evaluate --predictor {w}/pred --db {w}/garbage.db",
        2,
        "not a SQLite",
        ["garbage.db"],
    ),
    # -- paths checked before the work, one line naming the path and the fix --------------------
    (
        "profile-db-no-dir",
        "profile --space {w}/space.yaml --n 2 --db {w}/nodir/sub/x.db",
        2,
        "nodir",
        ["nodir"],
    ),
    ("export-out-no-dir", "db export --db {w}/runs.db --out {w}/nodir/x.csv", 2, "nodir", ["nodir"]),
    ("export-out-under-file", "db export --db {w}/runs.db --out {w}/a-file/x.csv", 2, "a-file", ["a-file"]),
    ("export-out-suffix", "db export --db {w}/runs.db --out {w}/x.json", 2, ".csv", ["x.json"]),
    ("sample-out-no-dir", "space sample carb-resnet --n 5 --out {w}/nodir/s.csv", 2, "nodir", ["nodir"]),
    ("sample-out-suffix", "space sample carb-resnet --n 5 --out {w}/s.xlsx", 2, ".parquet", ["s.xlsx"]),
    (
        "screen-out-no-dir",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms 5 --out {w}/nodir/s.csv",
        2,
        "nodir",
        ["nodir"],
    ),
    ("report-out-no-dir", "report --db {w}/runs.db --out {w}/nodir/r.html", 2, "nodir", ["nodir"]),
    ("train-out-is-file", "train --db {w}/runs.db --out {w}/a-file", 2, "a-file", ["a-file"]),
    ("demo-dir-is-file", "demo --dir {w}/a-file --minutes 1", 2, "a-file", ["a-file"]),
    (
        "adapt-out-under-file",
        "adapt --predictor {w}/pred --db {w}/runs.db --out {w}/a-file/a --k 3",
        2,
        "a-file",
        ["a-file"],
    ),
    ("inspect-long-name", "inspect " + LONG, 2, "cannot read model string", []),
    ("inspect-long-onnx", "inspect " + LONG + ".onnx", 2, "too long", []),
    ("inspect-long-py", "inspect " + LONG + ".py:f", 2, "too long", []),
    # -- sizes: say what it would need and what fits -------------------------------------------
    ("sample-huge-n", "space sample carb-resnet --n 10000000000", 2, "GB", []),
    ("sample-negative-n", "space sample carb-resnet --n -5", 2, "--n", []),
    ("profile-huge-n", "profile --space carb-resnet --n 10000000000 --db {w}/h.db", 2, "GB", ["h.db"]),
    (
        "screen-huge-n",
        "screen --predictor {w}/pred --space carb-resnet --n 10000000000 --max-latency-ms 5",
        2,
        "GB",
        [],
    ),
    (
        "screen-zero-n",
        "screen --predictor {w}/pred --space carb-resnet --n 0 --max-latency-ms 5",
        2,
        "--n",
        [],
    ),
    ("inspect-huge-input", "inspect {w}/factories.py:tiny --input-shape " + SHAPE, 2, "GB", []),
    ("measure-huge-input", "measure {w}/factories.py:tiny --input-shape " + SHAPE, 2, "GB", []),
    (
        "inspect-bad-shape",
        "inspect {w}/factories.py:tiny --input-shape 1xthreex4",
        2,
        "not a list of integers",
        [],
    ),
    ("inspect-zero-shape", "inspect {w}/factories.py:tiny --input-shape 1x0x4x4", 2, "positive", []),
    ("inspect-zero-batch", "inspect {w}/factories.py:tiny --batch-size 0", 2, "batch size", []),
    # -- damaged predictor directories: one line naming the file --------------------------------
    ("pred-xgb-garbage", "predict --predictor {w}/pred-xgb-garbage space:carb-resnet", 2, ".xgb.json", []),
    ("pred-lgb-garbage", "predict --predictor {w}/pred-lgb-garbage space:carb-resnet", 2, ".lgb.txt", []),
    (
        "pred-forest-garbage",
        "predict --predictor {w}/pred-forest-garbage space:carb-resnet",
        2,
        ".forest.json",
        [],
    ),
    ("pred-meta-list", "predict --predictor {w}/pred-meta-list space:carb-resnet", 2, "meta.json", []),
    (
        "pred-meta-not-json",
        "predict --predictor {w}/pred-meta-not-json space:carb-resnet",
        2,
        "meta.json",
        [],
    ),
    ("pred-no-stages", "predict --predictor {w}/pred-no-stages space:carb-resnet", 2, "stages", []),
    ("pred-pickle", "predict --predictor {w}/pred-pickle space:carb-resnet", 2, "model.pkl", []),
    ("pred-missing-file", "predict --predictor {w}/pred-missing-file space:carb-resnet", 2, "missing", []),
    ("pred-escape", "predict --predictor {w}/pred-escape space:carb-resnet", 2, "outside the directory", []),
    ("pred-future", "predict --predictor {w}/pred-future space:carb-resnet", 2, "format", []),
    ("pred-stage-not-dict", "predict --predictor {w}/pred-stage-not-dict space:carb-resnet", 2, "stages", []),
    ("pred-empty-dir", "predict --predictor {w}/pred-empty space:carb-resnet", 2, "meta.json", []),
    ("pred-no-dir", "predict --predictor {w}/no-pred space:carb-resnet", 2, "no-pred", []),
    (
        "screen-damaged-pred",
        "screen --predictor {w}/pred-xgb-garbage --space carb-resnet --n 10 --max-latency-ms 5",
        2,
        ".xgb.json",
        [],
    ),
    ("evaluate-damaged-pred", "evaluate --predictor {w}/pred-meta-list --db {w}/runs.db", 2, "meta.json", []),
    # -- op tables: one validation for train-ops and predict-ops --------------------------------
    (
        "train-ops-no-model",
        "train-ops --ops {w}/ops-no-model.csv --e2e {w}/e2e.csv --out {w}/o",
        2,
        "model",
        ["o"],
    ),
    ("predict-ops-no-model", "predict-ops --predictor {w}/pred --ops {w}/ops-no-model.csv", 2, "model", []),
    (
        "train-ops-e2e-no-latency",
        "train-ops --ops {w}/ops.csv --e2e {w}/e2e-no-latency.csv --out {w}/o",
        2,
        "latency_ms",
        ["o"],
    ),
    (
        "train-ops-text-flops",
        "train-ops --ops {w}/ops-text-flops.csv --e2e {w}/e2e.csv --out {w}/o",
        2,
        "flops",
        ["o"],
    ),
    (
        "train-ops-missing-file",
        "train-ops --ops {w}/none.csv --e2e {w}/e2e.csv --out {w}/o",
        2,
        "none.csv",
        ["o"],
    ),
    ("train-ops-txt", "train-ops --ops {w}/ops.txt --e2e {w}/e2e.csv --out {w}/o", 2, ".parquet", ["o"]),
    # -- strict where silence misleads ---------------------------------------------------------
    ("yaml-depth-5000", "space show {w}/space-depth-5000.yaml", 2, "5000", []),
    ("yaml-width-negative", "space show {w}/space-width-neg.yaml", 2, "-1", []),
    ("yaml-min-over-max", "space show {w}/space-min-over-max.yaml", 2, "min", []),
    ("yaml-python-tag", "space show {w}/space-tag.yaml", 2, "YAML", ["pwned"]),
    ("yaml-list", "space show {w}/space-list.yaml", 2, "mapping", []),
    ("yaml-unknown-key", "space show {w}/space-unknown-key.yaml", 2, "colour", []),
    ("yaml-unknown-param", "space show {w}/space-unknown-param.yaml", 2, "batchsize", []),
    ("yaml-bad-yaml", "space show {w}/space-bad-yaml.yaml", 2, "not valid YAML", []),
    ("yaml-unknown-family", "space show {w}/space-family-nb.yaml", 2, "no-such-family", []),
    ("yaml-empty-list", "space show {w}/space-empty-list.yaml", 2, "empty list", []),
    ("yaml-string-width", "space show {w}/space-string-width.yaml", 2, "wide", []),
    ("space-unknown", "space show no-such-space", 2, "no-such-space", []),
    (
        "adapt-plan-bogus-selection",
        "adapt --predictor {w}/pred --plan carb-resnet --selection bogus",
        2,
        "bogus",
        [],
    ),
    (
        "adapt-bogus-selection",
        "adapt --predictor {w}/pred --db {w}/runs.db --out {w}/ad --selection bogus",
        2,
        "bogus",
        ["ad"],
    ),
    ("demo-negative-minutes", "demo --dir {w}/demo-neg --minutes -1", 2, "--minutes", ["demo-neg"]),
    ("demo-zero-configs", "demo --dir {w}/demo-zero --configs 0", 2, "--configs", ["demo-zero"]),
    ("demo-negative-kernels", "demo --dir {w}/demo-nk --kernels -1", 2, "--kernels", ["demo-nk"]),
    (
        "screen-bad-objective",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms 5 --objectives speed",
        2,
        "speed",
        [],
    ),
    ("screen-no-budget", "screen --predictor {w}/pred --space carb-resnet --n 10", 2, "budget", []),
    (
        "screen-negative-budget",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms -3",
        2,
        "positive",
        [],
    ),
    (
        "screen-nan-budget",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms nan",
        2,
        "positive",
        [],
    ),
    (
        "screen-bad-weights",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms 5 --weights latency",
        2,
        "NAME=NUMBER",
        [],
    ),
    (
        "screen-configs-without-space",
        "screen --predictor {w}/pred --configs {w}/configs.csv --max-latency-ms 5",
        2,
        "--space",
        [],
    ),
    (
        "screen-bad-configs",
        "screen --predictor {w}/pred --space carb-resnet --configs {w}/configs.csv --max-latency-ms 5",
        2,
        "missing",
        [],
    ),
    (
        "screen-risk-out-of-range",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms 5 --risk 2",
        2,
        "risk",
        [],
    ),
    (
        "train-bad-latency-stat",
        "train --db {w}/runs.db --out {w}/p4 --latency-stat fastest",
        2,
        "fastest",
        ["p4"],
    ),
    ("train-bad-test-size", "train --db {w}/runs.db --out {w}/p5 --test-size 1.5", 2, "test_size", ["p5"]),
    ("train-unknown-campaign", "train --db {w}/runs.db --out {w}/p6 --campaign nope", 2, "nope", ["p6"]),
    ("train-unknown-platform", "train --db {w}/runs.db --out {w}/p7 --platform zzz", 2, "zzz", ["p7"]),
    ("measure-unknown-backend", "measure {w}/factories.py:tiny --backend tpu", 2, "tpu", []),
    ("measure-zero-threads", "measure {w}/factories.py:tiny --threads 0", 2, "threads", []),
    ("measure-bad-opt-level", "measure {w}/factories.py:tiny --opt-level max", 2, "max", []),
    (
        "profile-device-without-ray",
        "profile --space carb-resnet --n 2 --db {w}/d.db --device gpu",
        2,
        "--ray",
        ["d.db"],
    ),
    (
        "profile-zero-limit",
        "profile --space {w}/space.yaml --n 2 --db {w}/l.db --limit 0",
        2,
        "limit",
        ["l.db"],
    ),
    # -- models that cannot load ----------------------------------------------------------------
    ("inspect-unknown-zoo", "inspect pytorchcv:no_such_net", 2, "no_such_net", []),
    ("inspect-unknown-prefix", "inspect foo:bar", 2, "model string", []),
    ("inspect-missing-onnx", "inspect {w}/none.onnx", 2, "not found", []),
    ("inspect-garbage-onnx", "inspect {w}/garbage.db.onnx", 2, "not found", []),
    ("inspect-missing-py", "inspect {w}/none.py:tiny", 2, "not found", []),
    ("inspect-raising-factory", "inspect {w}/factories.py:raises", 2, "the factory is broken", []),
    ("inspect-not-a-module", "inspect {w}/factories.py:not_a_module", 2, "not a torch.nn.Module", []),
    ("inspect-missing-factory", "inspect {w}/factories.py:nothing", 2, "no function", []),
    ("inspect-no-shape", "inspect {w}/factories.py:no_shape", 2, "does not say what input", []),
    ("predict-no-shape", "predict --device pixel4/gpu {w}/factories.py:no_shape", 2, "--input-shape", []),
    # PyTorch logs the failed shape propagation with its traceback: never shown
    ("inspect-rejected-shape", "inspect {w}/factories.py:rejects_shape", 2, "cannot run on input", []),
    ("predict-rejected-shape", "predict --device pixel4/gpu {w}/factories.py:rejects_shape", 2, "input", []),
    ("measure-unknown-zoo", "measure pytorchcv:no_such_net", 2, "no_such_net", []),
    ("measure-unknown-prefix", "measure foo:bar", 2, "model string", []),
    ("measure-missing-onnx", "measure {w}/none.onnx", 2, "not found", []),
    ("measure-missing-py", "measure {w}/none.py:tiny", 2, "not found", []),
    ("inspect-bad-space-value", "inspect space:carb-resnet?depth=9", 2, "depth", []),
    ("inspect-unknown-space-key", "inspect space:carb-resnet?colour=red", 2, "colour", []),
    # -- a data file is data: importing a table never runs code, and is all or nothing ----------
    (
        "import-runs-code",
        "db import {w}/import-py.csv --device d --db {w}/i1.db",
        2,
        "run code",
        ["planted-ran", "i1.db"],
    ),
    (
        "import-inf-latency",
        "db import {w}/import-inf.csv --device d --db {w}/i2.db",
        2,
        "latency_ms, row 2",
        ["i2.db"],
    ),
    (
        "import-1e400-latency",
        "db import {w}/import-1e400.csv --device d --db {w}/i3.db",
        2,
        "latency_ms, row 2",
        ["i3.db"],
    ),
    (
        "import-negative-latency",
        "db import {w}/import-negative.csv --device d --db {w}/i4.db",
        2,
        "-2",
        ["i4.db"],
    ),
    (
        "import-zero-latency",
        "db import {w}/import-zero.csv --device d --db {w}/i5.db",
        2,
        "above 0",
        ["i5.db"],
    ),
    (
        "import-text-latency",
        "db import {w}/import-text.csv --device d --db {w}/i6.db",
        2,
        "'fast'",
        ["i6.db"],
    ),
    (
        "import-negative-std",
        "db import {w}/import-std-negative.csv --device d --db {w}/i7.db",
        2,
        "std_ms",
        ["i7.db"],
    ),
    ("import-inf-std", "db import {w}/import-std-inf.csv --device d --db {w}/i8.db", 2, "std_ms", ["i8.db"]),
    (
        "import-negative-memory",
        "db import {w}/import-memory-negative.csv --device d --db {w}/i9.db",
        2,
        "peak_memory_mb",
        ["i9.db"],
    ),
    (
        "import-zero-memory",
        "db import {w}/import-memory-zero.csv --device d --db {w}/i10.db",
        2,
        "peak_memory_mb",
        ["i10.db"],
    ),
    (
        "import-negative-energy",
        "db import {w}/import-energy-negative.csv --device d --db {w}/i11.db",
        2,
        "energy_j",
        ["i11.db"],
    ),
    (
        "import-fractional-n",
        "db import {w}/import-n-fraction.csv --device d --db {w}/i12.db",
        2,
        "whole number",
        ["i12.db"],
    ),
    ("import-inf-n", "db import {w}/import-n-inf.csv --device d --db {w}/i13.db", 2, "n, row 1", ["i13.db"]),
    (
        "import-zero-n",
        "db import {w}/import-n-zero.csv --device d --db {w}/i14.db",
        2,
        "n, row 1",
        ["i14.db"],
    ),
    (
        "import-bool-latency",
        "db import {w}/import-bool.csv --device d --db {w}/i15.db",
        2,
        "bool",
        ["i15.db"],
    ),
    (
        "import-datetime-latency",
        "db import {w}/import-datetime.parquet --device d --db {w}/i16.db",
        2,
        "datetime",
        ["i16.db"],
    ),
    (
        "import-conflicting-rows",
        "db import {w}/import-conflict.csv --device d --db {w}/i17.db",
        2,
        "appears twice",
        ["i17.db"],
    ),
    (
        "import-duplicated-column",
        "db import {w}/import-dup-column.csv --device d --db {w}/i18.db",
        2,
        "more than once",
        ["i18.db"],
    ),
    (
        "import-no-loadable-model",
        "db import {w}/import-no-model.csv --device d --db {w}/i19.db",
        2,
        "none of its 2",
        ["i19.db"],
    ),
    (
        "import-fourth-row-bad",
        "db import {w}/import-fourth-bad.csv --device d --db {w}/i20.db",
        2,
        "row 4",
        ["i20.db"],
    ),
    (
        "import-empty-model",
        "db import {w}/import-empty-model.csv --device d --db {w}/i21.db",
        2,
        "row 2: empty",
        ["i21.db"],
    ),
    (
        "import-into-runs-db-bad",
        "db import {w}/import-fourth-bad.csv --device d --db {w}/runs.db",
        2,
        "row 4",
        ["runs.db"],
    ),
    # -- an output is never what the command reads, nor a store ---------------------------------
    (
        "export-out-links-to-store",
        "db export --db {w}/runs.db --out {w}/store-link.csv",
        2,
        "which this command reads",
        ["runs.db"],
    ),
    (
        "export-out-is-a-store",
        "db export --db {w}/runs.db --out {w}/store.csv",
        2,
        "SQLite database",
        ["store.csv"],
    ),
    (
        "sample-out-is-a-store",
        "space sample carb-resnet --n 5 --out {w}/store.csv",
        2,
        "SQLite database",
        ["store.csv"],
    ),
    (
        "sample-out-links-to-store",
        "space sample carb-resnet --n 5 --out {w}/store-link.csv",
        2,
        "SQLite database",
        ["runs.db"],
    ),
    (
        "report-out-links-to-store",
        "report --db {w}/runs.db --out {w}/store-link.html",
        2,
        "which this command reads",
        ["runs.db"],
    ),
    (
        "screen-out-is-a-store",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms 5 --out {w}/store.csv",
        2,
        "SQLite database",
        ["store.csv"],
    ),
    (
        "adapt-out-is-source",
        "adapt --predictor {w}/pred --db {w}/runs.db --out {w}/pred --k 3",
        2,
        "reads",
        ["pred/meta.json"],
    ),
    (
        "adapt-out-links-to-source",
        "adapt --predictor {w}/pred --db {w}/runs.db --out {w}/pred-link --k 3",
        2,
        "reads",
        ["pred/meta.json"],
    ),
    (
        "adapt-out-foreign-dir",
        "adapt --predictor {w}/pred --db {w}/runs.db --out {w}/foreign-dir --k 3",
        2,
        "other files",
        ["foreign-dir/notes.txt"],
    ),
    (
        "train-out-foreign-dir",
        "train --db {w}/runs.db --out {w}/foreign-dir",
        2,
        "other files",
        ["foreign-dir/notes.txt"],
    ),
    ("train-out-is-the-store", "train --db {w}/runs.db --out {w}/runs.db", 2, "runs.db", ["runs.db"]),
    (
        "train-ops-out-foreign-dir",
        "train-ops --ops {w}/ops.csv --e2e {w}/e2e.csv --out {w}/foreign-dir",
        2,
        "other files",
        ["foreign-dir/notes.txt"],
    ),
    # -- model files whose numbers or links are damaged: refused, never predicted from or looped on
    ("pred-xgb-nan", "predict --predictor {w}/pred-xgb-nan space:carb-resnet", 2, "pred-xgb-nan", []),
    ("pred-xgb-huge", "predict --predictor {w}/pred-xgb-huge space:carb-resnet", 2, "pred-xgb-huge", []),
    ("pred-xgb-loop", "predict --predictor {w}/pred-xgb-loop space:carb-resnet", 2, "not a new node", []),
    ("pred-xgb-short", "predict --predictor {w}/pred-xgb-short space:carb-resnet", 2, "num_nodes", []),
    ("pred-lgb-nan", "predict --predictor {w}/pred-lgb-nan space:carb-resnet", 2, "leaf value", []),
    ("pred-lgb-shifted", "predict --predictor {w}/pred-lgb-shifted space:carb-resnet", 2, "tree_sizes", []),
    ("pred-lgb-loop", "predict --predictor {w}/pred-lgb-loop space:carb-resnet", 2, "not after it", []),
    (
        "pred-lgb-feature",
        "predict --predictor {w}/pred-lgb-feature space:carb-resnet",
        2,
        "a feature outside",
        [],
    ),
    ("pred-forest-nan", "predict --predictor {w}/pred-forest-nan space:carb-resnet", 2, "finite", []),
    (
        "pred-forest-out-of-bounds",
        "predict --predictor {w}/pred-forest-oob space:carb-resnet",
        2,
        "outside the arrays",
        [],
    ),
    (
        "pred-forest-short-arrays",
        "predict --predictor {w}/pred-forest-short space:carb-resnet",
        2,
        "differ in length",
        [],
    ),
    (
        "pred-forest-cycle",
        "predict --predictor {w}/pred-forest-cycle space:carb-resnet",
        2,
        "before itself",
        [],
    ),
    ("pred-trend-nan", "predict --predictor {w}/pred-trend-nan space:carb-resnet", 2, "trend", []),
    ("pred-weights-nan", "predict --predictor {w}/pred-weights-nan space:carb-resnet", 2, "weights", []),
    (
        "pred-weights-negative",
        "predict --predictor {w}/pred-weights-negative space:carb-resnet",
        2,
        "below 0",
        [],
    ),
    (
        "pred-quantile-negative",
        "predict --predictor {w}/pred-quantile-negative space:carb-resnet",
        2,
        "quantiles",
        [],
    ),
    (
        "pred-physical-nan-costs",
        "predict --predictor {w}/pred-physical-nan space:carb-resnet",
        2,
        "costs",
        [],
    ),
    (
        "pred-routes-unknown",
        "predict --predictor {w}/pred-routes-unknown space:carb-resnet",
        2,
        "teleport",
        [],
    ),
    (
        "pred-meta-fifo",
        "predict --predictor {w}/pred-fifo-meta space:carb-resnet",
        2,
        "not a regular file",
        [],
    ),
    (
        "pred-forest-fifo",
        "predict --predictor {w}/pred-fifo-forest space:carb-resnet",
        2,
        "not a regular file",
        [],
    ),
    (
        "pred-meta-dev-zero",
        "predict --predictor {w}/pred-meta-zero space:carb-resnet",
        2,
        "not a regular file",
        [],
    ),
    (
        "pred-meta-nested-deep",
        "predict --predictor {w}/pred-meta-deep space:carb-resnet",
        2,
        "nested too deep",
        [],
    ),
    ("pred-ood-nested-deep", "predict --predictor {w}/pred-ood-deep space:carb-resnet", 2, "ood.json", []),
    ("pred-unfinished", "predict --predictor {w}/pred-unfinished space:carb-resnet", 2, "never finished", []),
    (
        "screen-forest-cycle",
        "screen --predictor {w}/pred-forest-cycle --space carb-resnet --n 10 --max-latency-ms 5",
        2,
        "before itself",
        [],
    ),
    (
        "evaluate-trend-nan",
        "evaluate --predictor {w}/pred-trend-nan --db {w}/runs.db",
        2,
        "trend",
        ["runs.db"],
    ),
    (
        "adapt-from-damaged",
        "adapt --predictor {w}/pred-weights-nan --db {w}/runs.db --out {w}/ad2 --k 3",
        2,
        "weights",
        ["ad2"],
    ),
    ("device-cache-nan-costs", "predict --device s10/gpu space:carb-resnet", 2, "delete", []),
    ("device-cache-negative-costs", "predict --device mi8se/gpu space:carb-resnet", 2, "below 0", []),
    ("device-cache-nan-quantile", "predict --device pixel4/gpu space:carb-resnet", 2, "interval_q", []),
    # -- brackets in user text are text, not rich markup -----------------------------------------
    ("markup-model-name", "inspect [bold]x", 2, "[bold]x", []),
    ("markup-closing-tag", "inspect [/]", 2, "[/]", []),
    ("markup-onnx-path", "inspect {w}/[red]none.onnx", 2, "[red]none.onnx", []),
    ("markup-space-name", "space show [bold]nope", 2, "[bold]nope", []),
    ("markup-predictor-path", "predict --predictor {w}/[bold]pred space:carb-resnet", 2, "[bold]pred", []),
    ("markup-store-path", "db export --db {w}/[b].db --out {w}/o9.csv", 2, "[b].db", ["o9.csv"]),
    ("markup-device-name", "devices show [bold]x[/]", 2, "[bold]x[/]", []),
    ("markup-predict-device", "predict --device [red]phone space:carb-resnet", 2, "[red]phone", []),
    ("markup-import-file", "db import {w}/[x].csv --device d --db {w}/i30.db", 2, "[x].csv", ["i30.db"]),
    ("markup-factory-error", "inspect {w}/factories.py:raises_brackets", 2, "[/] broken [bold]", []),
    ("markup-yaml-value", "space show {w}/space-family-markup.yaml", 2, "[red]family[/]", []),
    # -- the machine says no: disk full, a store locked by another writer -----------------------
    ("export-disk-full", "db export --db {w}/runs.db --out {w}/full.csv", 2, "disk is full", ["runs.db"]),
    ("sample-disk-full", "space sample carb-resnet --n 50 --out {w}/full.csv", 2, "disk is full", []),
    (
        "screen-disk-full",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms 100000 --out {w}/full.csv",
        2,
        "disk is full",
        [],
    ),
    ("report-disk-full", "report --db {w}/runs.db --out {w}/full.html", 2, "disk is full", ["runs.db"]),
    (
        "import-locked-store",
        "db import {w}/e2e-good.csv --device d --db {w}/locked.db",
        2,
        "locked by another process",
        [],
    ),
    (
        "measure-locked-store",
        "measure space:carb-resnet?depth=8 --db {w}/locked.db --warmup-s 0.05 --round-s 0.02",
        2,
        "locked by another process",
        [],
    ),
    # -- an immutable store and directory (chattr +i): not writable even by root ------------------
    (
        "import-immutable-store",
        "db import {w}/e2e-good.csv --device d --db {w}/frozen/runs.db",
        2,
        "not writable",
        ["frozen/runs.db"],
    ),
    (
        "import-new-store-in-immutable-dir",
        "db import {w}/e2e-good.csv --device d --db {w}/frozen/new.db",
        2,
        "not writable",
        ["frozen/new.db"],
    ),
    (
        "measure-immutable-store",
        "measure space:carb-resnet?depth=8 --db {w}/frozen/runs.db --warmup-s 0.05 --round-s 0.02",
        2,
        "not writable",
        ["frozen/runs.db"],
    ),
    (
        "profile-immutable-store",
        "profile --space {w}/space.yaml --n 2 --db {w}/frozen/runs.db",
        2,
        "not writable",
        ["frozen/runs.db"],
    ),
    (
        "export-immutable-dir",
        "db export --db {w}/runs.db --out {w}/frozen/x.csv",
        2,
        "not writable",
        ["runs.db"],
    ),
    (
        "report-immutable-dir",
        "report --db {w}/runs.db --out {w}/frozen/r.html",
        2,
        "not writable",
        ["runs.db"],
    ),
    ("train-immutable-dir", "train --db {w}/runs.db --out {w}/frozen/pred", 2, "not writable", ["runs.db"]),
    # -- numbers that are not numbers -------------------------------------------------------------
    ("measure-warmup-nan", "measure {w}/factories.py:tiny --warmup-s nan", 2, "warmup_s", []),
    ("measure-round-nan", "measure {w}/factories.py:tiny --round-s nan", 2, "round_s", []),
    ("measure-cap-inf", "measure {w}/factories.py:tiny --cap-s inf", 2, "cap_s", []),
    ("measure-timeout-inf", "measure {w}/factories.py:tiny --timeout-s inf", 2, "timeout_s", []),
    ("measure-timeout-nan", "measure {w}/factories.py:tiny --timeout-s nan", 2, "timeout_s", []),
    ("inspect-timeout-inf", "inspect {w}/factories.py:tiny --timeout-s inf", 2, "--timeout-s", []),
    (
        "profile-warmup-nan",
        "profile --space {w}/space.yaml --n 2 --db {w}/pw.db --warmup-s nan",
        2,
        "warmup_s",
        ["pw.db"],
    ),
    ("profile-zero-n", "profile --space {w}/space.yaml --n 0 --db {w}/pz.db", 2, "n=0", ["pz.db"]),
    (
        "profile-negative-op-runs",
        "profile --space {w}/space.yaml --n 2 --db {w}/po.db --op-runs -1",
        2,
        "--op-runs",
        ["po.db"],
    ),
    (
        "screen-empty-objectives",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms 5 --objectives ,",
        2,
        "names no objective",
        [],
    ),
    (
        "screen-nan-weight",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms 5 --weights latency=nan",
        2,
        "latency=nan",
        [],
    ),
    (
        "screen-negative-weight",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms 5 --weights latency=-1",
        2,
        "latency=-1",
        [],
    ),
    (
        "screen-unknown-weight",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms 5 --weights speed=1",
        2,
        "'speed'",
        [],
    ),
    (
        "screen-zero-weights",
        "screen --predictor {w}/pred --space carb-resnet --n 10 --max-latency-ms 5 --weights latency=0",
        2,
        "every weight is 0",
        [],
    ),
    # -- shapes and factories that lie about themselves -------------------------------------------
    ("yaml-duplicate-key", "space show {w}/space-duplicate-key.yaml", 2, "appears twice", []),
    ("yaml-empty-range", "space show {w}/space-empty-map.yaml", 2, "empty range", []),
    ("onnx-shape-does-not-fit", "inspect {w}/dynamic.onnx --input-shape 1x3x32x32", 2, "?x3x16x16", []),
    ("onnx-rank-does-not-fit", "inspect {w}/dynamic.onnx --input-shape 1x3x16", 2, "?x3x16x16", []),
    ("factory-malformed-shape", "inspect {w}/factories.py:bad_shape", 2, "input_shape attribute", []),
    ("factory-negative-shape", "inspect {w}/factories.py:negative_shape", 2, "input_shape attribute", []),
    ("factory-keyboard-interrupt", "inspect {w}/factories.py:interrupts", 2, "KeyboardInterrupt", []),
    (
        "predict-keyboard-interrupt",
        "predict --predictor {w}/pred {w}/factories.py:interrupts",
        2,
        "KeyboardInterrupt",
        [],
    ),
]


HANG_S = 90


def _hung(signum: int, frame: object) -> None:
    raise TimeoutError(f"the command hung: no answer within {HANG_S} s")


def _run(args: str, w: Path) -> tuple[int, str, str]:
    runner = CliRunner()
    previous = signal.signal(signal.SIGALRM, _hung)
    signal.alarm(HANG_S)
    try:
        result = runner.invoke(app, args.replace("{w}", str(w)).split(), catch_exceptions=True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"a traceback instead of one line: {result.exception!r}") from result.exception
    return result.exit_code, result.stdout, result.stderr


def _snapshot(w: Path, names: list[str]) -> dict[str, bytes | None]:
    paths = [w / n for n in names] + [
        w / f"{n}{s}" for n in names if n.endswith(".db") for s in ("-wal", "-shm")
    ]
    return {str(p): (p.read_bytes() if p.is_file() else ("dir" if p.exists() else None)) for p in paths}


@pytest.mark.parametrize(
    ("args", "code", "phrase", "unchanged"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_hostile_input_is_one_line_and_touches_nothing(world, args, code, phrase, unchanged) -> None:
    frozen = world / hostile_world.FROZEN_UNAVAILABLE
    if "{w}/frozen/" in args and frozen.exists():
        pytest.skip(f"no immutable directory here: {frozen.read_text()}")
    before = _snapshot(world, unchanged)
    exit_code, _, stderr = _run(args, world)
    assert exit_code == code, stderr
    assert phrase in stderr, stderr
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), stderr
    assert _snapshot(world, unchanged) == before


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 175 and len({c[0] for c in CASES}) == len(CASES)


# -- commands that run user code never outlive --timeout-s by more than a few seconds -------------
@pytest.mark.parametrize(
    "args",
    [
        "measure {w}/factories.py:sleeps --db {w}/hang.db --timeout-s 4",
        "measure {w}/factories.py:sleeps --timeout-s 4",
        "inspect {w}/factories.py:sleeps --timeout-s 4",
        "predict --predictor {w}/pred {w}/factories.py:sleeps --timeout-s 4",
        "screen --predictor {w}/pred --model {w}/factories.py:sleeps --max-latency-ms 5 --timeout-s 4",
    ],
    ids=["measure-db", "measure", "inspect", "predict", "screen-model"],
)
def test_a_sleeping_factory_does_not_hang(world, args) -> None:
    started = time.monotonic()
    result = infercast(*args.replace("{w}", str(world)).split())
    elapsed = time.monotonic() - started
    assert result.returncode != 0, result.stdout
    assert "4 s" in result.stderr + result.stdout, result.stderr
    assert "Traceback" not in result.stderr
    # interpreter and torch start-up, the worker's own start-up, the deadline, and the kill
    assert elapsed < 4 + 25, elapsed


def test_measure_exits_non_zero_when_a_requested_model_failed(world) -> None:
    code, stdout, _ = _run("measure {w}/factories.py:raises --json", world)
    assert code == 1
    [row] = json.loads(stdout)
    assert row["failure"] == "error" and "the factory is broken" in row["reason"]


def test_measure_exits_2_when_a_model_cannot_load_as_given(world) -> None:
    code, stdout, _ = _run("measure {w}/factories.py:no_shape --json", world)
    assert code == 2
    [row] = json.loads(stdout)
    assert row["failure"] == "input" and "--input-shape" in row["reason"]


def test_json_output_is_strict_json(capsys) -> None:
    import numpy as np

    from infercast.cli import print_json

    print_json(
        {"a": float("inf"), "b": [float("nan"), 1.0], "c": {"d": -float("inf")}, "e": np.float32("nan")}
    )
    text = capsys.readouterr().out
    assert json.loads(text) == {"a": None, "b": [None, 1.0], "c": {"d": None}, "e": None}
    assert "Infinity" not in text and "NaN" not in text
