"""Do the 90 % prediction intervals hold where predictions are really used?

1. **This CPU**: ``infercast train`` on design-space campaigns (as the README has a user do), then
   - the held-out configs of those spaces (in distribution: coverage should be 85–95 %),
   - the real networks of ``benchmarks/real_networks.txt`` measured at 224² (campaign ``--real``;
     never trained on): coverage should be ≥ 85 %,
   for the cascade blend and the op-wise route, with the intervals that widen with the distance to
   the training data ("after") and with the plain split-conformal width ("before").
2. **usc-mobile** (``--usc``): the op-wise route on the TFLite GPU op tables of six phones,
   5 folds grouped by model (in distribution) and by architecture family (networks unlike any
   trained on), the same two interval kinds.

    .venv/bin/python benchmarks/interval_coverage.py --db DB \\
        --campaign cpu-resnets:n=300:seed=0:stratified --campaign cpu-mobile:n=100:seed=0:stratified \\
        --real real-a --usc ../shared/data/usc-mobile

Records its result in benchmarks/RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from infercast.api import predict_models, train
from infercast.datasets import store_tables, training_data
from infercast.predictors import CascadeBlend, OpWise
from infercast.store import Store
from results import machine, record, stamp
from usc import GPU_DEVICES


def _coverage(truth: np.ndarray, low: np.ndarray, high: np.ndarray) -> float:
    return float(np.mean((truth >= low) & (truth <= high)))


def _row(
    name: str, truth: np.ndarray, predicted: np.ndarray, low: np.ndarray, high: np.ndarray, plain_q: float
) -> str:
    width = np.median(np.log(high / predicted))
    before = _coverage(truth, predicted * np.exp(-plain_q), predicted * np.exp(plain_q))
    return (
        f"| {name} | {len(truth)} | {before:.1%} (±{np.expm1(plain_q):.1%}) | "
        f"{_coverage(truth, low, high):.1%} (median ±{np.expm1(width):.1%}) |"
    )


HEADER = [
    "| predictions | n | 90 % coverage before (constant width) | after (widening with distance) |",
    "|---|---|---|---|",
]


def cpu(db: str, campaigns: list[str], real: str, work: Path, seed: int) -> list[str]:
    folder = work / "predictor"
    started = time.perf_counter()
    train(db, folder, campaigns=campaigns, seed=seed)
    trained_s = time.perf_counter() - started
    blend = CascadeBlend.load(folder)
    opwise = OpWise.load(folder / "opwise")
    platform_id = blend.metadata_["platform"]["id"]
    with Store(db, readonly=True) as store:
        data = training_data(store, platform_id, blend.info.latency_stat, campaigns)
        ops, e2e = store_tables(store, platform_id, blend.info.latency_stat)
        measured = store.measurements(platform_id)
    seen = set(blend.metadata_["training"]["train_config_ids"])
    held = np.array([c not in seen for c in data.config_ids])
    latency = blend.targets_["latency"].calibration
    lines = [*HEADER]
    predicted = blend.predict(data.x[held])
    truth = data.y.loc[held, "latency_ms"].to_numpy()
    lines.append(
        _row(
            "cascade blend, held-out design-space configs",
            truth,
            predicted["latency_ms"].to_numpy(),
            predicted["latency_ms_low"].to_numpy(),
            predicted["latency_ms_high"].to_numpy(),
            latency.plain_q,
        )
    )
    held_ids = [c for c, h in zip(data.config_ids, held, strict=True) if h and c in set(ops["model"])]
    if held_ids:
        op_predicted = opwise.predict(ops[ops["model"].isin(held_ids)].drop(columns="latency_ms"))
        op_truth = e2e.set_index("model").loc[op_predicted.index, "latency_ms"].to_numpy()
        lines.append(
            _row(
                "op-wise, held-out design-space configs",
                op_truth,
                op_predicted["latency_ms"].to_numpy(),
                op_predicted["latency_ms_low"].to_numpy(),
                op_predicted["latency_ms_high"].to_numpy(),
                opwise.calibration_.plain_q,
            )
        )
    networks = measured[measured["campaign"] == real].drop_duplicates("model").set_index("model")
    results = {r["model"]: r for r in predict_models(folder, list(networks.index))}
    truth = networks[blend.info.latency_stat].to_numpy()  # what the predictor learned
    for route, key, plain_q in (
        ("cascade blend", None, latency.plain_q),
        ("op-wise", "opwise", opwise.calibration_.plain_q),
    ):
        rows = [results[m][key] if key else results[m] for m in networks.index]
        values = np.array([r["latency_ms"] for r in rows])
        bounds = np.array([r["latency_ms_interval"] for r in rows])
        lines.append(
            _row(
                f"{route}, {len(truth)} real networks at 224²",
                truth,
                values,
                bounds[:, 0],
                bounds[:, 1],
                plain_q,
            )
        )
    detail = [
        "",
        "| network | measured ms | blend ms (90 % interval) | inside | why wide |",
        "|---|---|---|---|---|",
    ]
    for model, measured_ms in zip(networks.index, truth, strict=True):
        r = results[model]
        low, high = r["latency_ms_interval"]
        inside = "yes" if low <= measured_ms <= high else "**no**"
        detail.append(
            f"| {model.removeprefix('pytorchcv:')} | {measured_ms:.2f} | "
            f"{r['latency_ms']:.2f} ({low:.2f}–{high:.2f}) | {inside} | {r.get('interval_note') or ''} |"
        )
    return [
        f"**This CPU** (ONNX Runtime, 1 thread): trained on {len(seen)} configs of {', '.join(campaigns)} "
        f"in {trained_s:.0f} s; blend latency β = {latency.beta:g} (held-out coverage near "
        f"{latency.near_coverage:.1%}, far {latency.far_coverage:.1%} on {latency.n_far} rows of "
        f"extrapolation folds); op-wise β = {opwise.calibration_.beta:g}.",
        "",
        *lines,
        *detail,
        "",
    ]


def usc(folder: str, devices: list[str], groupings: list[str]) -> list[str]:
    from usc import e2e_table, family, gpu_op_table

    ops, e2e = gpu_op_table(folder), e2e_table(folder)
    lines = [*HEADER]
    for grouping in groupings:
        pooled: dict[str, list[np.ndarray]] = {"truth": [], "p": [], "low": [], "high": [], "plain": []}
        for device in devices:
            table = ops.drop(columns=[c for c in ops if c.startswith("latency_ms@")])
            table = table.assign(latency_ms=ops[f"latency_ms@{device}"])
            truth = e2e[f"{device}|gpu|float"]
            models = np.array(sorted(set(truth.index) & set(table["model"])))
            groups = models if grouping == "model" else np.array([family(m) for m in models])
            parts = []
            for train_idx, held_idx in GroupKFold(n_splits=5).split(models, groups=groups):
                train_models, held_models = list(models[train_idx]), list(models[held_idx])
                model = OpWise().fit(
                    table[table["model"].isin(train_models)],
                    truth.loc[train_models].rename("latency_ms").rename_axis("model").reset_index(),
                )
                out = model.predict(table[table["model"].isin(held_models)].drop(columns="latency_ms"))
                parts.append(out.assign(plain=model.calibration_.plain_q))
            out = pd.concat(parts)
            t = truth.loc[out.index].to_numpy()
            p = out["latency_ms"].to_numpy()
            before = _coverage(t, p * np.exp(-out["plain"]), p * np.exp(out["plain"]))
            after = _coverage(t, out["latency_ms_low"].to_numpy(), out["latency_ms_high"].to_numpy())
            width = np.median(np.log(out["latency_ms_high"] / out["latency_ms"]))
            lines.append(
                f"| op-wise, {device} GPU, folds by {grouping} | {len(t)} | {before:.1%} | "
                f"{after:.1%} (median ±{np.expm1(width):.1%}) |"
            )
            print(lines[-1], flush=True)
            for key, values in (
                ("truth", t),
                ("p", p),
                ("low", out["latency_ms_low"].to_numpy()),
                ("high", out["latency_ms_high"].to_numpy()),
                ("plain", out["plain"].to_numpy()),
            ):
                pooled[key].append(values)
        t, p, low, high, plain = (np.concatenate(pooled[k]) for k in ("truth", "p", "low", "high", "plain"))
        lines.append(
            f"| **{', '.join(devices)} together, folds by {grouping}** | {len(t)} | "
            f"{_coverage(t, p * np.exp(-plain), p * np.exp(plain)):.1%} | **{_coverage(t, low, high):.1%}** |"
        )
    return [
        "**usc-mobile**, TFLite GPU delegate, op-wise route (`OpWise()` defaults), 5 folds:",
        "",
        *lines,
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db")
    parser.add_argument("--campaign", action="append", default=[])
    parser.add_argument("--real", default="real-a")
    parser.add_argument("--usc", help="the usc-mobile data folder")
    parser.add_argument("--usc-devices", nargs="*", default=list(GPU_DEVICES))
    parser.add_argument(
        "--usc-groupings", nargs="*", default=["model", "family"], choices=["model", "family"]
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    command = "`.venv/bin/python benchmarks/interval_coverage.py " + " ".join(sys.argv[1:]) + "`"
    started = time.perf_counter()
    lines = [
        f"\n## Prediction interval coverage ({stamp()})\n",
        f"Command: {command}  ",
        f"Machine: {machine()}.",
        "",
    ]
    with tempfile.TemporaryDirectory() as work:
        if args.db:
            lines += cpu(args.db, args.campaign, args.real, Path(work), args.seed)
        if args.usc:
            lines += usc(args.usc, args.usc_devices, args.usc_groupings)
    lines.append(f"{time.perf_counter() - started:.0f} s in all.")
    record(lines)


if __name__ == "__main__":
    main()
