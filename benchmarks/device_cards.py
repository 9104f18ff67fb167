"""Accuracy cards of the shipped device predictors (``infercast devices list``).

usc-mobile (90 settings, 102 real networks): 5 folds grouped by architecture family (every ResNet
variant in one fold, every MobileNet in one, …, ``devices.usc.family``): each fold fits the
setting's predictor exactly as shipped (``PhysicalLatency`` on the device features, interval
calibrated inside the training families; for the 6 GPU settings also the op-wise route, trained
on the training families' op rows and applied to the held-out networks as captured here) and
predicts the held-out families; baselines on the same folds: latency ∝ FLOPs, and log-log least
squares on [FLOPs, parameters].
NB201 (27 settings): the shipped predictor (trained on the shipped 1,000 cells) on the other
14,625 cells of ``--nb201``; same baselines.

    PYTHONPATH=. .venv/bin/python benchmarks/device_cards.py \\
        --nb201 ../shared/data/nb201-latency/nb201_latency.csv

Writes its cards into ``src/infercast/predictors/devices/data/cards.json`` (other cards stay) and
records its result in RESULTS.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold
from tools.device_tables import nb201_features

from infercast.predictors.data import feature_frame
from infercast.predictors.devices import nb201, tflite_gpu, usc
from infercast.predictors.devices.common import data_file
from infercast.predictors.devices.costs import estimator
from infercast.predictors.metrics import regression_metrics
from infercast.predictors.routes import BLEND, OPWISE, OPWISE_OWN_OPS, PHYSICAL
from results import machine, record, stamp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for tools/

FOLDS = 5


def card(
    truth: np.ndarray,
    predicted: np.ndarray,
    low: np.ndarray | None = None,
    high: np.ndarray | None = None,
    families: np.ndarray | None = None,
) -> dict[str, Any]:
    """The card's figures; with ``families``, also the interval's coverage per family (the mean
    over families of the share of each family's networks covered): the level a conformal interval
    whose draws are families promises, where the per-network share weighs the 30 MobileNets 30 times."""
    metrics = regression_metrics(truth, predicted, low, high)
    figures = {
        "n": metrics["n"],
        "within_10pct": metrics["within_10pct"],
        "median_abs_error_pct": metrics["median_ape"],
        "spearman": metrics["spearman"],
        "coverage": metrics.get("coverage"),
    }
    if families is not None and low is not None and high is not None:
        covered = pd.Series((truth >= low) & (truth <= high))
        figures["coverage_per_family"] = float(covered.groupby(families).mean().mean())
    return figures


def baselines(flops: np.ndarray, params: np.ndarray, y: np.ndarray, folds: list) -> dict[str, np.ndarray]:
    """Out-of-fold predictions of latency ∝ FLOPs and of log-log least squares on [FLOPs, params]."""
    proportional, loglog = np.empty(len(y)), np.empty(len(y))
    design = np.column_stack([np.ones(len(y)), np.log(flops), np.log(params)])
    for train, test in folds:
        proportional[test] = flops[test] * np.exp(np.mean(np.log(y[train] / flops[train])))
        coef, *_ = np.linalg.lstsq(design[train], np.log(y[train]), rcond=None)
        loglog[test] = np.exp(design[test] @ coef)
    return {"FLOPs-proportional": proportional, "log-log [FLOPs, params]": loglog}


def usc_cards() -> dict[str, dict[str, Any]]:
    networks = usc.table()
    families = networks["family"].to_numpy()
    folds = list(GroupKFold(FOLDS).split(networks, groups=families))
    flops, params = networks["gflops"].to_numpy(), networks["mparams"].to_numpy()
    cards = {}
    for name in usc.names():
        y = networks[usc.LATENCY_PREFIX + name].to_numpy(dtype=np.float64)
        out = pd.DataFrame(index=networks.index, columns=["latency_ms", "latency_ms_low", "latency_ms_high"])
        for train, test in folds:
            model = estimator().fit(networks.iloc[train], y[train], groups=families[train])
            predicted = model.predict(networks.iloc[test])
            out.iloc[test] = predicted[out.columns].to_numpy()
        values = out.to_numpy(dtype=np.float64)
        cards[name] = {
            "protocol": f"{FOLDS} folds grouped by architecture family, 102 usc-mobile networks",
            "route": PHYSICAL,
            **card(y, values[:, 0], values[:, 1], values[:, 2], families),
            "baselines": {b: card(y, p) for b, p in baselines(flops, params, y, folds).items()},
        }
        if name.endswith("/gpu"):
            by_ops, by_their_rows = gpu_opwise(name, y, folds, families)
            model_level = {k: v for k, v in cards[name].items() if k not in ("protocol", "baselines")}
            cards[name].update(by_ops)
            cards[name]["route"] = OPWISE
            cards[name]["other_routes"] = {
                PHYSICAL: model_level,
                OPWISE_OWN_OPS: by_their_rows,
            }
    return cards


@functools.cache
def captured_ops() -> pd.DataFrame:
    """Each usc-mobile network's delegate op rows as a user's network gets them: captured here
    and mapped by ``tflite_gpu.graph_ops`` (not usc-mobile's rows)."""
    from infercast.models.guarded import capture_model

    side = (1, 3, usc.INPUT_SIDE, usc.INPUT_SIDE)
    return pd.concat(
        [tflite_gpu.graph_ops(capture_model(f"pytorchcv:{m}", side)[0], m) for m in usc.table().index],
        ignore_index=True,
    )


def gpu_opwise(
    name: str, y: np.ndarray, folds: list, families: np.ndarray
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Family-grouped figures of the GPU op-wise route as shipped (``tflite_gpu.fit_opwise``), on
    the captured networks' rows and on usc-mobile's own rows of the same networks."""
    models = usc.table().index
    phone = name.split("/")[0]
    latency = pd.Series(y, index=models)
    ours = np.empty((len(y), 3))
    theirs = np.empty((len(y), 3))
    columns = ["latency_ms", "latency_ms_low", "latency_ms_high"]
    for train, test in folds:
        model = tflite_gpu.fit_opwise(
            phone, latency.iloc[train], pd.Series(families, index=models).iloc[train]
        )
        held_out = list(models[test])
        mapped = tflite_gpu.on_phone(captured_ops(), phone)
        ours[test] = model.predict(mapped[mapped["model"].isin(held_out)]).loc[held_out, columns].to_numpy()
        rows = tflite_gpu.training_ops(phone, held_out).drop(columns="latency_ms")
        theirs[test] = model.predict(rows).loc[held_out, columns].to_numpy()
    print(f"{name}: op-wise ±10 % {card(y, ours[:, 0])['within_10pct']:.1%}", flush=True)
    return card(y, *ours.T, families), card(y, *theirs.T, families)


def nb201_cards(csv: Path) -> dict[str, dict[str, Any]]:
    raw = pd.read_csv(csv)
    shipped = set(nb201.table()["arch"])
    held_out = raw[~raw["arch"].isin(shipped)].reset_index(drop=True)
    cards = {}
    before = os.environ.get("INFERCAST_CACHE")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["INFERCAST_CACHE"] = cache  # train each predictor afresh, as on a new install
        features: dict[int, pd.DataFrame] = {}
        for name in nb201.names():
            device = nb201.load(name)
            batch = device.info.batch
            if batch not in features:
                features[batch] = feature_frame(
                    nb201_features(held_out["arch"].tolist(), batch), nb201.SETTINGS
                )
            x = features[batch]
            y = held_out[name.removeprefix(nb201.PREFIX)].to_numpy(dtype=np.float64)
            predicted = device.blend.predict(x, ood="none")
            train_x = nb201.training_features(batch)
            train_y = nb201.table()[name.removeprefix(nb201.PREFIX)].to_numpy(dtype=np.float64)
            both = np.concatenate([train_y, y])
            flops = np.concatenate([train_x["flops"], x["flops"]])
            params = np.concatenate([train_x["params"], x["params"]])
            split = [(np.arange(len(train_y)), np.arange(len(train_y), len(both)))]
            base = baselines(flops, params, both, split)
            cards[name] = {
                "protocol": f"trained on {len(train_y)} cells, tested on the other {len(y)}",
                "route": BLEND,
                **card(
                    y,
                    predicted["latency_ms"].to_numpy(),
                    predicted["latency_ms_low"].to_numpy(),
                    predicted["latency_ms_high"].to_numpy(),
                ),
                "baselines": {b: card(y, p[len(train_y) :]) for b, p in base.items()},
            }
            print(f"{name}: ±10 % {cards[name]['within_10pct']:.1%}", flush=True)
    if before is None:
        del os.environ["INFERCAST_CACHE"]
    else:
        os.environ["INFERCAST_CACHE"] = before
    return cards


def _median(
    cards: dict[str, dict[str, Any]], names: list[str], key: str, baseline: str | None = None
) -> float:
    values = [(cards[n]["baselines"][baseline] if baseline else cards[n])[key] for n in names]
    return float(np.median(values))


def _figures(c: dict[str, Any]) -> str:
    coverage = "–" if c.get("coverage") is None else f"{c['coverage']:.0%}"
    return f"{c['within_10pct']:.1%} / {c['median_abs_error_pct']:.1f} % / {coverage}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nb201", type=Path, required=True, help="nb201_latency.csv (all 15,625 cells)")
    args = parser.parse_args()
    started = time.perf_counter()
    cards = {**usc_cards(), **nb201_cards(args.nb201)}
    elapsed = time.perf_counter() - started
    # other benchmarks' cards (host_card.py's) stay: this one rewrites only the settings it scores
    path = data_file("cards.json")
    written = json.loads(path.read_text()) if path.is_file() else {"cards": {}}
    written["written"] = stamp()
    written["cards"].update(cards)
    path.write_text(json.dumps(written, indent=1) + "\n")

    groups = {
        "usc-mobile GPU delegate (6)": [n for n in usc.names() if n.split("/")[1] == "gpu"],
        "usc-mobile CPU fp32 (42)": [n for n in usc.names() if n.split("/")[1] != "gpu" and "int8" not in n],
        "usc-mobile CPU int8 (42)": [n for n in usc.names() if n.endswith("/int8")],
        "NB201 (27)": nb201.names(),
    }
    flops, loglog = "FLOPs-proportional", "log-log [FLOPs, params]"
    lines = [
        f"## Device cards: shipped predictors for devices nobody here owns ({stamp()})",
        "",
        "`PYTHONPATH=. .venv/bin/python benchmarks/device_cards.py "
        "--nb201 ../shared/data/nb201-latency/nb201_latency.csv` "
        f"({machine()}, {elapsed:.0f} s). usc-mobile: {FOLDS} folds grouped by architecture family "
        "(qed-usc/mobile-ml-benchmark, MIT; Li, Paolieri, Golubchik, EdgeSys '24); NB201: the shipped "
        "1,000 cells train, the other 14,625 test (HELP / HW-NAS-Bench, MIT). Baselines on the same "
        "folds. Medians over the settings of each group:",
        "",
        "| settings | ±10 % | median abs. err. | Spearman | 90 % coverage | per family | FLOPs ±10 % "
        "| FLOPs median err. | log-log ±10 % | log-log median err. |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, names in groups.items():
        per_family = (
            f"{_median(cards, names, 'coverage_per_family'):.1%}"
            if all("coverage_per_family" in cards[n] for n in names)
            else "–"
        )
        lines.append(
            f"| {label} | {_median(cards, names, 'within_10pct'):.1%} "
            f"| {_median(cards, names, 'median_abs_error_pct'):.1f} % "
            f"| {_median(cards, names, 'spearman'):.3f} | {_median(cards, names, 'coverage'):.1%} "
            f"| {per_family} "
            f"| {_median(cards, names, 'within_10pct', flops):.1%} "
            f"| {_median(cards, names, 'median_abs_error_pct', flops):.1f} % "
            f"| {_median(cards, names, 'within_10pct', loglog):.1%} "
            f"| {_median(cards, names, 'median_abs_error_pct', loglog):.1f} % |"
        )
    gpu_names = groups["usc-mobile GPU delegate (6)"]
    lines += [
        "",
        "GPU settings by route (±10 % / median abs. error / 90 % coverage), family-grouped:",
        "",
        "| setting | op-wise, networks captured here (shipped) | op-wise, usc-mobile's own op rows "
        "| model level (Σ cost × work) | FLOPs ±10 % |",
        "|---|---|---|---|---|",
    ]
    for name in gpu_names:
        c = cards[name]
        other = list(c["other_routes"].values())
        cells = [_figures(c), _figures(other[1]), _figures(other[0])]
        lines.append(f"| {name} | {' | '.join(cells)} | {c['baselines'][flops]['within_10pct']:.0%} |")
    lines += [
        "",
        "Every setting (±10 % / median abs. error / 90 % coverage; `infercast devices show NAME` "
        "has the rest):",
        "",
    ]
    lines.append(
        "; ".join(
            f"{n} {c['within_10pct']:.0%} / {c['median_abs_error_pct']:.1f} % / {c['coverage']:.0%}"
            for n, c in cards.items()
        )
    )
    lines.append("")
    record(lines)


if __name__ == "__main__":
    main()
