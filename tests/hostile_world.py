"""The hostile world's second half: inputs that must never run code, be overwritten, hang or pass
as sound — tables to import, links onto the store, damaged model files, a tampered device cache,
a locked store. ``test_hostile.world`` calls ``build`` once."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pandas as pd

PLANTED = """
from pathlib import Path

Path(__file__).with_name("planted-ran").write_text("code from a data file ran")


def factory():
    Path(__file__).with_name("planted-ran").write_text("code from a data file ran")
"""

MORE_FACTORIES = """

def raises_brackets():
    raise RuntimeError("[/] broken [bold]")


def bad_shape():
    return tiny()


bad_shape.input_shape = "abc"


def negative_shape():
    return tiny()


negative_shape.input_shape = (1, 3, -4, 4)


def interrupts():
    raise KeyboardInterrupt


def chatty():
    print("hello from the factory")
    return tiny()


chatty.input_shape = (1, 3, 16, 16)


def forks():
    import os

    if os.fork() == 0:
        time.sleep(3600)
    time.sleep(3600)
"""

FROZEN_UNAVAILABLE = "frozen-unavailable"

GOOD = "model,latency_ms\nspace:carb-resnet?depth=8,1.5\n"
# name → the text of a table to import; each one is refused whole
IMPORTS = {
    "import-py.csv": "model,latency_ms\n{w}/planted.py:factory,1.0\n",
    "import-inf.csv": GOOD + "space:carb-resnet?depth=10,inf\n",
    "import-1e400.csv": GOOD + "space:carb-resnet?depth=10,1e400\n",
    "import-negative.csv": GOOD + "space:carb-resnet?depth=10,-2\n",
    "import-zero.csv": GOOD + "space:carb-resnet?depth=10,0\n",
    "import-text.csv": GOOD + "space:carb-resnet?depth=10,fast\n",
    "import-std-negative.csv": "model,latency_ms,std_ms\nspace:carb-resnet?depth=8,1.5,-0.1\n",
    "import-std-inf.csv": "model,latency_ms,std_ms\nspace:carb-resnet?depth=8,1.5,inf\n",
    "import-memory-negative.csv": "model,latency_ms,peak_memory_mb\nspace:carb-resnet?depth=8,1.5,-3\n",
    "import-memory-zero.csv": "model,latency_ms,peak_memory_mb\nspace:carb-resnet?depth=8,1.5,0\n",
    "import-energy-negative.csv": "model,latency_ms,energy_j\nspace:carb-resnet?depth=8,1.5,-1\n",
    "import-n-fraction.csv": "model,latency_ms,n\nspace:carb-resnet?depth=8,1.5,2.5\n",
    "import-n-inf.csv": "model,latency_ms,n\nspace:carb-resnet?depth=8,1.5,inf\n",
    "import-n-zero.csv": "model,latency_ms,n\nspace:carb-resnet?depth=8,1.5,0\n",
    "import-bool.csv": "model,latency_ms\nspace:carb-resnet?depth=8,True\nspace:carb-resnet?depth=10,False\n",
    "import-conflict.csv": GOOD + "space:carb-resnet?depth=8,2.5\n",
    "import-dup-column.csv": "model,latency_ms,latency_ms\nspace:carb-resnet?depth=8,1.5,2.0\n",
    "import-no-model.csv": "model,latency_ms\npytorchcv:no_such_net,1.0\npytorchcv:nor_this_one,2.0\n",
    "import-fourth-bad.csv": GOOD
    + "space:carb-resnet?depth=10,1.6\nspace:carb-resnet?depth=12,1.7\nspace:carb-resnet?depth=14,-1\n",
    "import-empty-model.csv": GOOD + ",1.0\n",
}


def build(w: Path) -> Callable[[], None]:
    """Write every input into ``w``; returns what releases the store lock it holds."""
    (w / "planted.py").write_text(PLANTED)
    (w / "factories.py").write_text((w / "factories.py").read_text() + MORE_FACTORIES)
    for name, text in IMPORTS.items():
        (w / name).write_text(text.replace("{w}", str(w)))
    pd.DataFrame(
        {"model": ["space:carb-resnet?depth=8"], "latency_ms": [pd.Timestamp("2026-01-01")]}
    ).to_parquet(w / "import-datetime.parquet")
    shutil.copy(w / "runs.db", w / "store.csv")
    for link, target in (
        ("store-link.csv", w / "runs.db"),
        ("store-link.html", w / "runs.db"),
        ("full.csv", Path("/dev/full")),
        ("full.html", Path("/dev/full")),
        ("pred-link", w / "pred"),
    ):
        (w / link).symlink_to(target)
    (w / "foreign-dir").mkdir()
    (w / "foreign-dir" / "notes.txt").write_text("the user's own notes\n")
    _damaged_files(w)
    _dynamic_onnx(w / "dynamic.onnx")
    _tampered_cache(w / "cache")
    thaw, unlock = _frozen(w / "frozen"), _locked_store(w / "locked.db")

    def release() -> None:
        unlock()
        thaw()

    return release


def _copy(w: Path, name: str) -> Path:
    shutil.copytree(w / "pred", w / name, symlinks=True)
    return w / name


def _edit_json(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _first_tree(data: dict) -> dict:
    return data["learner"]["gradient_booster"]["model"]["trees"][0]


def _damaged_files(w: Path) -> None:
    def leaves(value: float) -> Callable[[dict], None]:
        def change(data: dict) -> None:
            tree = _first_tree(data)
            tree["base_weights"] = [value] * len(tree["base_weights"])
            tree["split_conditions"] = [value] * len(tree["split_conditions"])

        return change

    _edit_json(_copy(w, "pred-xgb-nan") / "latency.xgboost.xgb.json", leaves(float("nan")))
    _edit_json(_copy(w, "pred-xgb-huge") / "latency.xgboost.xgb.json", leaves(1e300))

    def back_to_root(data: dict) -> None:
        # a child of the root links back to the root: XGBoost loads it, then crashes predicting
        tree = _first_tree(data)
        child = tree["left_children"][0]
        tree["left_children"][child] = tree["right_children"][child] = 0

    def fewer_weights(data: dict) -> None:
        _first_tree(data)["base_weights"].pop()

    _edit_json(_copy(w, "pred-xgb-loop") / "latency.xgboost.xgb.json", back_to_root)
    _edit_json(_copy(w, "pred-xgb-short") / "latency.xgboost.xgb.json", fewer_weights)
    lgb = _copy(w, "pred-lgb-nan") / "latency.lightgbm.lgb.txt"
    lines = lgb.read_text().splitlines()
    lgb.write_text(
        "\n".join(
            "leaf_value=" + " ".join(["nan"] * len(line.split(" ")))
            if line.startswith("leaf_value=")
            else line
            for line in lines
        )
        + "\n"
    )
    lgb_damages = {
        # tree_sizes off by one byte: LightGBM's own parser aborts the process on this
        "pred-lgb-shifted": ("tree_sizes=", lambda v: str(int(v.split()[0]) + 1) + v[len(v.split()[0]) :]),
        # the root's left child is the root itself (same byte length): a loop
        "pred-lgb-loop": ("left_child=", lambda v: "0" + v[1:]),
        "pred-lgb-feature": ("split_feature=", lambda v: "9" + v[1:]),
    }
    for name, (key, change) in lgb_damages.items():
        lgb = _copy(w, name) / "latency.lightgbm.lgb.txt"
        text = lgb.read_text()
        start = text.index("\n" + key) + len(key) + 1
        end = text.index("\n", start)
        lgb.write_text(text[:start] + change(text[start:end]) + text[end:])
    forest = "latency.extratrees.forest.json"

    def nan_value(data: dict) -> None:
        data["value"][0] = float("nan")

    def out_of_bounds(data: dict) -> None:
        inner = next(i for i, v in enumerate(data["left"]) if v >= 0)
        data["left"][inner] = len(data["left"]) + 10

    def short(data: dict) -> None:
        data["threshold"] = data["threshold"][:5]

    def cycle(data: dict) -> None:
        inner = next(i for i, v in enumerate(data["left"]) if v >= 0)
        child = data["left"][inner]
        data["left"][child], data["right"][child] = inner, inner
        data["feature"][child] = 0

    for name, change in (
        ("pred-forest-nan", nan_value),
        ("pred-forest-oob", out_of_bounds),
        ("pred-forest-short", short),
        ("pred-forest-cycle", cycle),
    ):
        _edit_json(_copy(w, name) / forest, change)

    def stage(change: Callable[[dict], None]) -> Callable[[dict], None]:
        return lambda meta: change(meta["stages"]["latency"])

    meta_damages = {
        "pred-trend-nan": stage(lambda s: s.__setitem__("trend", [float("nan")] * len(s["trend"]))),
        "pred-weights-nan": stage(lambda s: s["weights"].__setitem__("xgboost", float("nan"))),
        "pred-weights-negative": stage(lambda s: s["weights"].__setitem__("lightgbm", -2.0)),
        "pred-quantile-negative": stage(lambda s: s.__setitem__("interval_q", -1.0)),
    }
    for name, change in meta_damages.items():
        _edit_json(_copy(w, name) / "meta.json", change)
    _edit_json(_copy(w, "pred-physical-nan") / "physical" / "meta.json", _nan_costs)
    (_copy(w, "pred-routes-unknown") / "routes.json").write_text(json.dumps({"order": ["blend", "teleport"]}))
    fifo = _copy(w, "pred-fifo-meta") / "meta.json"
    fifo.unlink()
    os.mkfifo(fifo)
    fifo = _copy(w, "pred-fifo-forest") / forest
    fifo.unlink()
    os.mkfifo(fifo)
    zero = _copy(w, "pred-meta-zero") / "meta.json"
    zero.unlink()
    zero.symlink_to("/dev/zero")
    (_copy(w, "pred-meta-deep") / "meta.json").write_text("[" * 10_000 + "]" * 10_000)
    (_copy(w, "pred-ood-deep") / "ood.json").write_text('{"a":' * 10_000 + "1" + "}" * 10_000)
    (_copy(w, "pred-unfinished") / ".infercast-unfinished").write_text("")


def _nan_costs(meta: dict) -> None:
    first = next(iter(meta["costs"]))
    meta["costs"][first] = float("nan")


def _dynamic_onnx(path: Path) -> None:
    import torch

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())
    torch.onnx.export(
        model,
        (torch.zeros(1, 3, 16, 16),),
        str(path),
        input_names=["x"],
        dynamic_axes={"x": {0: "batch"}},
        dynamo=False,
    )


# device name → how its cached predictor is tampered with
CACHE_DAMAGES: dict[str, Callable[[dict], None]] = {
    "s10/gpu": _nan_costs,
    "mi8se/gpu": lambda meta: meta["costs"].__setitem__(next(iter(meta["costs"])), -5.0),
    "pixel4/gpu": lambda meta: meta.__setitem__("interval_q", float("nan")),
}


def _tampered_cache(root: Path) -> None:
    """A user cache whose device predictors were trained, then edited by hand."""
    from infercast.predictors.devices import _shipped, get_device

    previous = os.environ.get("INFERCAST_CACHE")
    os.environ["INFERCAST_CACHE"] = str(root)
    try:
        for name in CACHE_DAMAGES:
            get_device(name)
    finally:
        # the cases read the cache as a new process would, not this process's loaded copies
        _shipped.cache_clear()
        if previous is None:
            os.environ.pop("INFERCAST_CACHE")
        else:
            os.environ["INFERCAST_CACHE"] = previous
    for name, change in CACHE_DAMAGES.items():
        [folder] = root.glob(f"devices-*/{name.replace('/', '-')}-*")
        _edit_json(folder / "meta.json", change)


def _frozen(folder: Path) -> Callable[[], None]:
    """A directory and the store in it made immutable (``chattr +i``): neither can be written, even
    by root, whom file modes do not stop. Where that is not possible (no root, a file system
    without the attribute) ``FROZEN_UNAVAILABLE`` beside it says why, and its cases are skipped."""
    folder.mkdir()
    shutil.copy(folder.parent / "runs.db", folder / "runs.db")
    paths = [str(folder / "runs.db"), str(folder)]
    try:
        made = subprocess.run(["chattr", "+i", *paths], capture_output=True, text=True)
        problem = made.stderr.strip() if made.returncode else ""
    except FileNotFoundError:
        problem = "no chattr on this machine"
    if problem:
        (folder.parent / FROZEN_UNAVAILABLE).write_text(problem)
    return lambda: subprocess.run(["chattr", "-i", *paths], capture_output=True, check=False)


def _locked_store(path: Path) -> Callable[[], None]:
    """A store another process is writing: a write transaction held open until released."""
    from infercast.store import Store

    Store(path).close()
    ready, release = threading.Event(), threading.Event()

    def hold() -> None:
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO meta VALUES ('held', 'by another writer')")
        ready.set()
        release.wait()
        db.execute("ROLLBACK")
        db.close()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    ready.wait(30)

    def stop() -> None:
        release.set()
        holder.join(30)

    return stop
