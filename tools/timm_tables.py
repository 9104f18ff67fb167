"""Build ``timm_networks.parquet``: every model of timm's benchmark tables captured at its input
size on the meta device (no weights, nothing run), its work as PyTorch runs it eagerly
(``predictors.devices.eager``), and each table's time per sample.

    python tools/timm_tables.py --tables ../shared/data/timm-bench --work /tmp/timm_work.jsonl

Capturing is resumable: each (model, input size) is one line of ``--work`` as soon as it is done,
its work or why it failed; a rerun captures only what is missing. ``--jobs`` processes capture at
once, each model under ``--timeout-s``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import signal
import sys
import time
from pathlib import Path

import pandas as pd

from infercast.graph import Graph
from infercast.predictors.devices.eager import PER_STEP, STEP_COLUMNS, WORK_COLUMNS
from infercast.predictors.devices.timm_bench import BATCH_PREFIX, MS_PREFIX, SETTINGS, TABLE, family

DATA = Path("src/infercast/predictors/devices/data")
# timm's own counts of a model, kept beside ours for the cards' baselines
TIMM_COUNTS = ("param_count", "infer_gmacs", "infer_macts")


def setting_of(path: Path) -> str:
    """The setting a table ships as (``timm_bench.SETTINGS``), from its file name."""
    stem = path.name.removeprefix("benchmark-infer-").removesuffix(".csv")
    for name, setting in SETTINGS.items():
        if setting.table == stem:
            return name
    raise ValueError(f"{path.name}: not one of the timm tables infercast ships a setting for")


def read_tables(folder: Path) -> pd.DataFrame:
    """Every table's rows: model, input size, batch, ms per sample, timm's own counts, setting."""
    frames = []
    for path in sorted(folder.glob("benchmark-infer-*.csv")):
        rows = pd.read_csv(path)
        rows["setting"] = setting_of(path)
        rows["ms_per_sample"] = rows["infer_step_time"] / rows["infer_batch_size"]
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def _capture(task: tuple[str, int, int]) -> dict[str, object]:
    name, side, timeout_s = task
    started = time.perf_counter()
    signal.alarm(timeout_s)
    try:
        row = {"model": name, "side": side, **_work(name, side)}
    except BaseException as error:  # a model that fails is a row saying why
        text = str(error).strip().splitlines()
        row = {
            "model": name,
            "side": side,
            "error": f"{type(error).__name__}: {text[0] if text else ''}"[:300],
        }
    finally:
        signal.alarm(0)
    row["seconds"] = round(time.perf_counter() - started, 2)
    return row


def _timeout(signum: int, frame: object) -> None:
    raise TimeoutError("capture took too long")


def _work(name: str, side: int) -> dict[str, float]:
    """The model's work per sample and per step: captured at batch 1 and 2, the difference is
    what a sample adds, the rest what a step does once (``eager.split_per_step``)."""
    from infercast.predictors.devices.eager import eager_work, split_per_step

    one, two = (_capture_at(name, side, batch) for batch in (1, 2))
    return {**split_per_step(eager_work(one), eager_work(two)), "nodes": float(len(one.nodes))}


def _capture_at(name: str, side: int, batch: int) -> Graph:
    import torch

    from infercast.compat import import_torchvision
    from infercast.errors import InfercastError
    from infercast.graph.torch_capture import capture_module

    import_torchvision()
    import timm

    shape = (batch, 3, side, side)
    with torch.device("meta"):
        module = timm.create_model(name, pretrained=False)
    try:
        return capture_module(module, shape, name)
    except InfercastError:
        # a model whose position table is sized for its default input is built for this one
        with torch.device("meta"):
            module = timm.create_model(name, pretrained=False, img_size=side)
        return capture_module(module, shape, name)


def capture_missing(pairs: list[tuple[str, int]], work: Path, jobs: int, timeout_s: int) -> None:
    done = set()
    if work.is_file():
        for line in work.read_text().splitlines():
            row = json.loads(line)
            done.add((row["model"], row["side"]))
    tasks = [(m, s, timeout_s) for m, s in pairs if (m, s) not in done]
    _import_once()
    print(f"{len(done)} captured before, {len(tasks)} to capture", file=sys.stderr)
    with (
        multiprocessing.get_context("fork").Pool(jobs, initializer=_init, maxtasksperchild=20) as pool,
        work.open("a") as out,
    ):
        for i, row in enumerate(pool.imap_unordered(_capture, tasks), 1):
            out.write(json.dumps(row) + "\n")
            out.flush()
            status = row.get("error", "ok")
            print(
                f"[{i}/{len(tasks)}] {row['model']}@{row['side']} {row['seconds']} s {status}",
                file=sys.stderr,
            )


def _import_once() -> None:
    """Import PyTorch, timm and the capture in this process: a worker forked from it (one per
    ``maxtasksperchild`` models) starts with them instead of importing them again."""
    from infercast.compat import import_torchvision
    from infercast.graph import torch_capture  # noqa: F401

    import_torchvision()
    import timm  # noqa: F401


def _init() -> None:
    signal.signal(signal.SIGALRM, _timeout)


def write_table(rows: pd.DataFrame, work: Path, out: Path) -> pd.DataFrame:
    """One row per captured (model, input size): family, timm's counts, work, and each setting's
    batch and time per sample; what failed to capture goes to ``timm_failed.json`` beside it."""
    captured = pd.DataFrame([json.loads(line) for line in work.read_text().splitlines()])
    failed = captured[captured["error"].notna()] if "error" in captured else captured.iloc[:0]
    captured = captured[captured["error"].isna()] if "error" in captured else captured
    rows = rows.rename(columns={"infer_img_size": "side"})
    newest = rows.drop_duplicates(["model", "side"], keep="last")[["model", "side", *TIMM_COUNTS]]
    parts = [*WORK_COLUMNS, *(c + PER_STEP for c in WORK_COLUMNS if c not in STEP_COLUMNS)]
    wide = newest.merge(captured[["model", "side", *parts]], on=["model", "side"])
    wide.insert(2, "family", wide["model"].map(family))
    for name, group in rows.groupby("setting", sort=False):
        timed = group.drop_duplicates(["model", "side"])[
            ["model", "side", "infer_batch_size", "ms_per_sample"]
        ]
        timed = timed.rename(
            columns={"infer_batch_size": BATCH_PREFIX + name, "ms_per_sample": MS_PREFIX + name}
        )
        wide = wide.merge(timed, on=["model", "side"], how="left")
    wide = wide.astype({c: "float32" for c in wide.columns if c.startswith((MS_PREFIX, BATCH_PREFIX))})
    wide.to_parquet(out, index=False)
    reasons = sorted(zip(failed["model"], failed["side"].astype(int), failed["error"], strict=True))
    failures = [{"model": m, "side": side, "reason": reason} for m, side, reason in reasons]
    (out.parent / "timm_failed.json").write_text(json.dumps(failures, indent=1) + "\n")
    print(f"{out}: {len(wide)} rows; {len(failures)} failed to capture", file=sys.stderr)
    return wide


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=Path, required=True, help="the timm-bench folder")
    parser.add_argument("--work", type=Path, required=True, help="where captured work is kept (JSON lines)")
    parser.add_argument("--out", type=Path, default=DATA / TABLE)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout-s", type=int, default=300)
    args = parser.parse_args()
    rows = read_tables(args.tables)
    pairs = sorted(set(zip(rows["model"], rows["infer_img_size"].astype(int), strict=True)))
    capture_missing(pairs, args.work, args.jobs, args.timeout_s)
    write_table(rows, args.work, args.out)


if __name__ == "__main__":
    main()
