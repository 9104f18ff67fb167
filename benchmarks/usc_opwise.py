"""The op-wise route on a runtime that is not ONNX Runtime: TFLite's GPU delegate on six phones.

The per-op GPU rows of ``../shared/data/usc-mobile`` (102 real pytorchcv networks) become op
tables, and each fold goes through the public ``train-ops`` / ``predict-ops`` path
(``infercast.api.train_ops`` / ``predict_ops`` on Parquet files): 5 folds grouped by model, and
5 grouped by architecture family (every ResNet variant in one fold, …). On the same folds: the
FLOPs-proportional baseline and the earlier op-wise route (XGBoost kernels, ratio overhead). For one phone,
accuracy against the number of training networks. For every phone, what the stacked overhead
model reaches on the measured kernel times (the kernel regressors' share of the misses) and the
run-to-run noise of the end-to-end latencies.

    .venv/bin/python benchmarks/usc_opwise.py --data ../shared/data/usc-mobile

Records its result in benchmarks/RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from infercast.api import predict_ops, train_ops
from infercast.predictors import OpWise, regression_metrics
from infercast.predictors.devices.tflite_gpu import on_phone
from infercast.predictors.optable import kernels
from infercast.predictors.overhead import STACK, overhead_features
from infercast.predictors.overhead_choice import out_of_fold
from results import machine, record, stamp
from usc import GPU_DEVICES, e2e_noise, e2e_table, family, gpu_op_table


def _device_tables(ops: pd.DataFrame, e2e: pd.DataFrame, device: str) -> tuple[pd.DataFrame, pd.Series]:
    """The device's op table (with the ``algorithm`` its delegate runs each op with) and its
    end-to-end latencies."""
    table = on_phone(ops.drop(columns=[c for c in ops if "@" in c]), device)
    return table.assign(latency_ms=ops[f"latency_ms@{device}"]), e2e[f"{device}|gpu|float"]


def _through_the_api(
    table: pd.DataFrame,
    truth: pd.Series,
    train: list[str],
    held: list[str],
    folder: Path,
    groups: dict[str, str] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """``train-ops`` on the training networks' tables (with ``groups`` as the end-to-end table's
    ``group`` column), ``predict-ops`` on the held-out ones."""
    folder.mkdir(parents=True, exist_ok=True)
    table[table["model"].isin(train)].to_parquet(folder / "ops.parquet")
    e2e = truth.loc[train].rename("latency_ms").rename_axis("model").reset_index()
    if groups is not None:
        e2e["group"] = e2e["model"].map(groups)
    e2e.to_parquet(folder / "e2e.parquet")
    table[table["model"].isin(held)].drop(columns="latency_ms").to_parquet(folder / "new.parquet")
    summary = train_ops(folder / "ops.parquet", folder / "e2e.parquet", folder / "predictor", test_size=0)
    rows = pd.DataFrame(predict_ops(folder / "predictor", folder / "new.parquet")).set_index("model")
    return rows, summary["training"]


def _earlier_route(
    table: pd.DataFrame, truth: pd.Series, train: list[str], held: list[str], n: int
) -> pd.Series:
    table = table.drop(columns="algorithm")  # the earlier route knew no algorithms
    model = OpWise(n_estimators=n, overhead="ratio", kernel_learner="xgboost").fit(
        table[table["model"].isin(train)],
        truth.loc[train].rename("latency_ms").rename_axis("model").reset_index(),
    )
    return model.predict(table[table["model"].isin(held)].drop(columns="latency_ms"))["latency_ms"]


def _scores(truth: pd.Series, predicted: pd.DataFrame) -> dict:
    p = predicted.loc[truth.index]
    low, high = p.get("latency_ms_low"), p.get("latency_ms_high")
    return regression_metrics(truth.to_numpy(), p["latency_ms"].to_numpy(), low, high)


def evaluate_device(
    ops: pd.DataFrame, e2e: pd.DataFrame, device: str, grouping: str, work: Path, n_estimators: int
) -> dict:
    table, truth = _device_tables(ops, e2e, device)
    models = np.array(sorted(set(truth.index) & set(table["model"])))
    truth = truth.loc[models]
    groups = models if grouping == "model" else np.array([family(m) for m in models])
    flops = e2e.loc[models, "FLOPS"].astype(float)
    opwise, earlier, proportional = [], [], []
    forms, learners = Counter(), Counter()
    for i, (train_idx, held_idx) in enumerate(GroupKFold(n_splits=5).split(models, groups=groups)):
        train, held = list(models[train_idx]), list(models[held_idx])
        # held out by family: the training networks' families go in as the e2e table's group column
        families = None if grouping == "model" else dict(zip(models, groups, strict=True))
        rows, training = _through_the_api(
            table, truth, train, held, work / f"{device}-{grouping}-{i}", families
        )
        opwise.append(rows)
        forms[training["overhead_form"]] += 1
        learners.update(training["kernel_learners"].values())
        earlier.append(_earlier_route(table, truth, train, held, n_estimators))
        rate = np.median(truth.loc[train] / flops.loc[train])
        proportional.append(flops.loc[held] * rate)
    return {
        "device": device,
        "grouping": grouping,
        "opwise": _scores(truth, pd.concat(opwise)),
        "earlier": _scores(truth, pd.concat(earlier).rename("latency_ms").to_frame()),
        "flops": _scores(truth, pd.concat(proportional).rename("latency_ms").to_frame()),
        "forms": dict(forms),
        "learners": dict(learners),
    }


def overhead_ceiling(ops: pd.DataFrame, e2e: pd.DataFrame, noise: pd.DataFrame, device: str) -> dict:
    """What the stacked overhead model reaches when every kernel time is the measured one (only
    the overhead predicted, out of fold by model and by family), beside the phone's own
    run-to-run noise of the end-to-end latencies: how much of the route's miss is its kernel
    regressors', how much the overhead's, and how much the truth's."""
    table, truth = _device_tables(ops, e2e, device)
    measured = kernels(table)
    measured = measured[np.isfinite(measured["latency_ms"]) & (measured["latency_ms"] > 0)]
    x = overhead_features(measured, measured["latency_ms"].to_numpy(dtype=np.float64))
    x = x.loc[x.index.isin(truth.index)]
    y = truth.loc[x.index].to_numpy(dtype=np.float64)
    models = x.index.to_numpy()
    out = {"device": device}
    for grouping in ("model", "family"):
        groups = models if grouping == "model" else np.array([family(m) for m in models])
        folds = np.empty(len(models), dtype=np.int64)
        for fold, (_, held) in enumerate(GroupKFold(n_splits=5).split(models, groups=groups)):
            folds[held] = fold
        error = np.expm1(out_of_fold(STACK, x, y, folds) - np.log(y))
        out[grouping] = float((np.abs(error) <= 0.10).mean())
    spread = noise.loc[models, f"{device}|gpu|float"]
    out["noise_median"], out["noise_over_5pct"] = float(spread.median()), float((spread > 0.05).mean())
    return out


def learning_curve(
    ops: pd.DataFrame, e2e: pd.DataFrame, device: str, sizes: list[int], work: Path, seed: int
) -> list[dict]:
    table, truth = _device_tables(ops, e2e, device)
    models = np.array(sorted(set(truth.index) & set(table["model"])))
    truth = truth.loc[models]
    rng = np.random.default_rng(seed)
    out = []
    for size in sizes:
        if size >= len(models):
            continue  # all of them: the model-grouped row of the main table
        predicted = []
        for i, (train_idx, held_idx) in enumerate(GroupKFold(n_splits=5).split(models, groups=models)):
            train = list(models[train_idx])
            train = sorted(rng.choice(train, min(size, len(train)), replace=False).tolist())
            rows, _ = _through_the_api(
                table, truth, train, list(models[held_idx]), work / f"curve-{size}-{i}"
            )
            predicted.append(rows)
        scores = _scores(truth, pd.concat(predicted))
        out.append({"networks": size, **scores})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the usc-mobile folder")
    parser.add_argument("--devices", nargs="*", default=list(GPU_DEVICES))
    parser.add_argument(
        "--family-devices", nargs="*", help="devices also scored with folds by family (default: all)"
    )
    parser.add_argument("--curve-device", default="pixel4")
    parser.add_argument("--curve-sizes", nargs="*", type=int, default=[5, 10, 20, 50])
    parser.add_argument("--earlier-estimators", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    ops, e2e, noise = gpu_op_table(args.data), e2e_table(args.data), e2e_noise(args.data)
    started = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        family_devices = args.devices if args.family_devices is None else args.family_devices
        for device in args.devices:
            for grouping in ("model", "family") if device in family_devices else ("model",):
                result = evaluate_device(ops, e2e, device, grouping, work, args.earlier_estimators)
                results.append(result)
                o = result["opwise"]
                earlier, flops = result["earlier"]["within_10pct"], result["flops"]["within_10pct"]
                print(
                    f"{device:9s} {grouping:6s} ±10 % {o['within_10pct']:.1%} median {o['median_ape']:.1f} % "
                    f"(earlier {earlier:.1%}, FLOPs {flops:.1%}) forms {result['forms']}",
                    flush=True,
                )
        ceilings = [overhead_ceiling(ops, e2e, noise, device) for device in args.devices]
        curve = (
            learning_curve(ops, e2e, args.curve_device, args.curve_sizes, work, args.seed)
            if args.curve_sizes
            else []
        )
    elapsed = time.perf_counter() - started

    lines = [
        "",
        f"## Op-wise route on TFLite GPU (usc-mobile, 102 real networks) — {stamp()}",
        "",
        f"`.venv/bin/python benchmarks/usc_opwise.py {' '.join(sys.argv[1:])}` "
        f"({machine()}, {elapsed / 60:.0f} min). Data: qed-usc/mobile-ml-benchmark (MIT), "
        "Li, Paolieri, Golubchik, EdgeSys '24. Each fold trains through `infercast.api.train_ops` and "
        "predicts the held-out networks through `predict_ops` (defaults: kernel learner chosen and "
        "overhead forms stacked by cross-validation inside the training networks). 5 folds grouped "
        "by model, "
        "and 5 grouped by architecture family (`benchmarks/usc.py`; train-ops gets the training "
        "networks' families as the e2e table's `group` column). *earlier route*: XGBoost "
        "kernels and the multiplicative (ratio) overhead model only; *FLOPs*: latency ∝ FLOPs, "
        "rate fitted on the training networks.",
        "",
        "| phone GPU | folds by | ±10 % | median abs. err. | Spearman | 90 % interval coverage "
        "| earlier route ±10 % | FLOPs ±10 % | overhead form (folds) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        o = r["opwise"]
        chosen = ", ".join(f"{form} {n}" for form, n in sorted(r["forms"].items()))
        lines.append(
            f"| {r['device']} | {r['grouping']} | {o['within_10pct']:.1%} | {o['median_ape']:.1f} % "
            f"| {o['spearman']:.3f} | {o['coverage']:.0%} | {r['earlier']['within_10pct']:.1%} "
            f"| {r['flops']['within_10pct']:.1%} | {chosen} |"
        )
    learners = Counter()
    for r in results:
        learners.update(r["learners"])
    lines += ["", f"Kernel learners chosen (kernel types × folds, all phones): {dict(learners)}."]
    route = {(r["device"], r["grouping"]): r["opwise"]["within_10pct"] for r in results}

    def _share(value: float | None) -> str:
        return "–" if value is None else f"{value:.1%}"

    lines += [
        "",
        "Where the misses come from: the stacked overhead model fed every network's *measured* kernel "
        "times (only the overhead out of fold, the same folds), beside the route's ±10 % above and "
        "the phone's run-to-run noise of the end-to-end latencies (the authors' std / mean):",
        "",
        "| phone GPU | ±10 %, measured kernels, by model | route, by model | ±10 %, measured kernels, "
        "by family | route, by family | run-to-run noise, median | networks with noise > 5 % |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in ceilings:
        d = c["device"]
        lines.append(
            f"| {d} | {c['model']:.1%} | {_share(route.get((d, 'model')))} | {c['family']:.1%} "
            f"| {_share(route.get((d, 'family')))} | {c['noise_median']:.1%} | {c['noise_over_5pct']:.0%} |"
        )
    if curve:
        lines += [
            "",
            f"Accuracy vs number of training networks ({args.curve_device}, folds by model; "
            "a random subset of each fold's training networks; all of them: the table above):",
            "",
            "| training networks | ±10 % | median abs. err. | Spearman |",
            "|---|---|---|---|",
        ]
        for c in curve:
            within, median = c["within_10pct"], c["median_ape"]
            lines.append(f"| {c['networks']} | {within:.1%} | {median:.1f} % | {c['spearman']:.3f} |")
    record(lines)


if __name__ == "__main__":
    main()
