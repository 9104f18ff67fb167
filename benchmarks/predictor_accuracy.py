"""Predictor accuracy on this CPU: design-space configs held out, and real networks never trained on.

1. ``infercast train`` on the design-space campaigns (``--campaign``, repeatable): held-out
   configs (20 %, stratified) scored per space — R², MAPE, ±10 %, interval coverage — next to the
   FLOPs-proportional and log-linear baselines.
2. The op-wise route vs the number of profiled models it learns from (5, 10, 20, 50, …), scored
   on the same held-out configs.
3. Real networks: the pytorchcv models measured in two independent campaigns (``--real-a``,
   ``--real-b``, e.g. with ``infercast measure $(cat benchmarks/real_networks.txt) --db … --campaign
   real-a``) predicted by that predictor; error vs the re-measurement noise |b − a| / a, and the
   fusion rules checked against the kernels ONNX Runtime reported for them.

    .venv/bin/python benchmarks/predictor_accuracy.py --db cpu.db \\
        --campaign cpu-resnets:n=1600:seed=0:stratified --campaign cpu-mobile:n=150:seed=0:stratified \\
        --real-a real-a --real-b real-b

Records its result in benchmarks/RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.api import predict_models, train
from infercast.datasets import store_tables, training_data
from infercast.predictors import CascadeBlend, OpWise, regression_metrics
from infercast.store import Store
from results import machine, record, stamp


def _row(name: str, m: dict[str, Any]) -> str:
    coverage = f"{m['coverage']:.1%}" if "coverage" in m else "–"
    return (
        f"| {name} | {m['n']} | {m['r2']:.4f} | {m['mape']:.2f} % | {m['within_10pct']:.1%} | "
        f"{m['spearman']:.3f} | {coverage} |"
    )


HEADER = ["| predictor | n | R² | MAPE | ±10 % | Spearman | 90 % coverage |", "|---|---|---|---|---|---|---|"]


def held_out(folder: Path, db: str, campaigns: list[str]) -> tuple[list[str], dict[str, Any]]:
    blend = CascadeBlend.load(folder)
    with Store(db) as store:
        data = training_data(store, blend.metadata_["platform"]["id"], blend.info.latency_stat, campaigns)
    seen = set(blend.metadata_["training"]["train_config_ids"])
    keep = np.array([c not in seen for c in data.config_ids])
    spaces = np.array([str(m).split("?")[0] for m in data.models])
    lines: list[str] = []
    figures: dict[str, Any] = {}
    for name in sorted(set(spaces[keep])):
        rows = keep & (spaces == name)
        scores = blend.evaluate(data.x[rows], data.y[rows])
        figures[name] = scores
        lines += [f"**{name}**, {rows.sum()} held-out configs:", "", *HEADER]
        for target in ("latency", "memory"):
            if target in scores:
                lines.append(_row(f"CascadeBlend {target}", scores[target]))
                for base, values in scores[target]["baselines"].items():
                    lines.append(_row(f"{base} baseline {target}", values))
        lines.append("")
    return lines, figures


def learning_curve(folder: Path, db: str, campaigns: list[str], seed: int) -> list[str]:
    blend = CascadeBlend.load(folder)
    platform_id = blend.metadata_["platform"]["id"]
    with Store(db) as store:
        data = training_data(store, platform_id, blend.info.latency_stat, campaigns)
        ops, e2e = store_tables(store, platform_id, blend.info.latency_stat)
    seen = set(blend.metadata_["training"]["train_config_ids"])
    profiled = set(ops["model"])
    train_ids = sorted(seen & profiled)
    test_ids = sorted((set(data.config_ids) - seen) & profiled)
    rng = np.random.default_rng(seed)
    order = rng.permutation(train_ids)
    lines = [
        "| profiled models | R² | MAPE | ±10 % | Spearman | 90 % coverage |",
        "|---|---|---|---|---|---|",
    ]
    test_ops = ops[ops["model"].isin(test_ids)].drop(columns="latency_ms")
    for k in [5, 10, 20, 50, 100, 200, 500, len(order)]:
        if k > len(order):
            continue
        chosen = set(order[:k])
        model = OpWise(seed=seed).fit(ops[ops["model"].isin(chosen)], e2e[e2e["model"].isin(chosen)])
        m = model.evaluate(test_ops, e2e)
        lines.append(
            f"| {k} | {m['r2']:.4f} | {m['mape']:.2f} % | {m['within_10pct']:.1%} | {m['spearman']:.3f} | "
            f"{m['coverage']:.1%} |"
        )
        print(lines[-1], flush=True)
    return [f"Op-wise route vs profiled models, scored on {len(test_ids)} held-out configs:", "", *lines, ""]


def real_networks(folder: Path, db: str, real_a: str, real_b: str) -> list[str]:
    from infercast.graph import capture
    from infercast.models import load_model
    from infercast.predictors.fusion import fusion_agreement, kernel_table, rules_for

    blend = CascadeBlend.load(folder)
    platform_id = blend.metadata_["platform"]["id"]
    with Store(db) as store:
        measured = store.measurements(platform_id)
        op_rows = store.op_measurements()
    a = measured[measured["campaign"] == real_a].set_index("model")
    b = measured[measured["campaign"] == real_b].set_index("model")
    models = [m for m in a.index if m in b.index]
    predicted = {r["model"]: r for r in predict_models(folder, models)}
    flops = {t: blend.baselines_["latency"][t] for t in ("flops", "loglinear")}
    x = pd.DataFrame([json.loads(a.loc[m, "features"]) for m in models]).assign(threads=1.0)
    # the statistic the predictor learned (train's default: steady_ms)
    truth = a.loc[models, blend.info.latency_stat].to_numpy()
    again = b.loc[models, blend.info.latency_stat].to_numpy()
    routes = {
        "CascadeBlend": np.array([predicted[m]["latency_ms"] for m in models]),
        "OpWise": np.array([predicted[m]["opwise"]["latency_ms"] for m in models]),
        "FLOPs-proportional": flops["flops"].predict(x),
        "log-linear": flops["loglinear"].predict(x),
    }
    noise = np.abs(again - truth) / truth
    rules = rules_for("ort-cpu", blend.metadata_["platform"]["settings"])
    agreement = []
    lines = [
        "| model | measured ms (a) | re-measured (b) | CascadeBlend | OpWise | FLOPs | OOD | fusion rules |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, model in enumerate(models):
        rows = op_rows[op_rows["measurement_id"] == a.loc[model, "id"]]
        fusion = "–"
        if len(rows):
            loaded = load_model(model)
            graph = capture(loaded.module, loaded.input_shape)
            result = fusion_agreement(kernel_table(graph, rules), rows.to_dict("records"))
            agreement.append(result)
            fusion = f"{result['matched']}/{result['profiled_kernels']}"
        lines.append(
            f"| {model.removeprefix('pytorchcv:')} | {truth[i]:.2f} | {again[i]:.2f} | "
            f"{routes['CascadeBlend'][i]:.2f} | {routes['OpWise'][i]:.2f} | "
            f"{routes['FLOPs-proportional'][i]:.2f} | "
            f"{'yes' if predicted[model]['ood'] else 'no'} | {fusion} |"
        )
    summary = [
        f"Real networks: {len(models)} pytorchcv models (1×3×224×224), never in training; truth = campaign "
        f"`{real_a}` (`{blend.info.latency_stat}`), noise = |`{real_b}` − `{real_a}`| / `{real_a}`.",
        "",
        "| route | median abs. error | ±10 % | Spearman | median error / median noise |",
        "|---|---|---|---|---|",
        f"| re-measurement noise | {np.median(noise):.1%} | {np.mean(noise <= 0.1):.1%} | "
        f"{regression_metrics(truth, again)['spearman']:.3f} | 1.0 |",
    ]
    for name, values in routes.items():
        error = np.abs(values - truth) / truth
        spearman = regression_metrics(truth, values)["spearman"]
        summary.append(
            f"| {name} | {np.median(error):.1%} | {np.mean(error <= 0.1):.1%} | {spearman:.3f} | "
            f"{np.median(error) / max(np.median(noise), 1e-9):.1f} |"
        )
    if agreement:
        matched = sum(r["matched"] for r in agreement)
        total = sum(r["profiled_kernels"] for r in agreement)
        summary += [
            "",
            f"Fusion rules vs ONNX Runtime's fused nodes: {matched}/{total} kernels ({matched / total:.1%}).",
        ]
    return [*summary, "", *lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument(
        "--campaign", action="append", required=True, help="design-space campaign(s) to train on"
    )
    parser.add_argument("--real-a")
    parser.add_argument("--real-b")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="keep the predictor directory here")
    args = parser.parse_args()

    started = time.perf_counter()
    folder = Path(args.out or tempfile.mkdtemp(prefix="infercast-bench-"))
    summary = train(args.db, folder, campaigns=args.campaign, seed=args.seed, progress=print)
    print(f"trained in {time.perf_counter() - started:.0f} s", flush=True)
    lines, _ = held_out(folder, args.db, args.campaign)
    curve = learning_curve(folder, args.db, args.campaign, args.seed)
    real = real_networks(folder, args.db, args.real_a, args.real_b) if args.real_a and args.real_b else []
    campaigns = " ".join(f"--campaign {c}" for c in args.campaign)
    real_args = f" --real-a {args.real_a} --real-b {args.real_b}" if real else ""
    text = [
        f"## Predictor accuracy on this CPU ({stamp()})",
        "",
        f"Command: `.venv/bin/python benchmarks/predictor_accuracy.py --db DB {campaigns}{real_args}`  ",
        f"Machine: {machine()}; ORT CPU, 1 thread, "
        f"opt level all. Trained on {summary['n_train']} configs, {time.perf_counter() - started:.0f} s for "
        "the whole benchmark.",
        "",
        f"Blend weights: {json.dumps(summary['blend_weights'])}.  ",
        f"Corrector: {json.dumps(summary['corrector'])}.",
        "",
        *lines,
        *curve,
        *real,
    ]
    record(text)


if __name__ == "__main__":
    main()
