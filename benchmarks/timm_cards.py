"""Accuracy cards of the desktop GPU and CPU settings learned from timm's benchmark tables.

Each setting: 5 folds grouped by architecture family (``timm_bench.family``: every ResNet in one
fold, every ViT in one, …); each fold fits the setting's predictor exactly as shipped (Σ cost ×
work per sample, interval calibrated inside the training families) and predicts the held-out
families' time per sample. Baselines on the same folds, on timm's own counts per sample (GMACs,
activations, parameters) and the input size: log-log least squares, and LightGBM; a model whose
counts the table lacks is left out of every route's score. Networks with
attention (a softmax or a scaled dot-product attention: transformers and hybrids) are reported
apart from those without (CNNs and MLPs).

    PYTHONPATH=. .venv/bin/python benchmarks/timm_cards.py

Reads only the shipped ``timm_networks.parquet``; writes the cards into ``cards.json`` (other
cards stay) and records the result in RESULTS.md.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
from benchmarks.results import machine, record, stamp
from sklearn.model_selection import GroupKFold

from infercast.predictors.devices import timm_bench
from infercast.predictors.devices.common import data_file
from infercast.predictors.metrics import regression_metrics

FOLDS = 5
_KEYS = ("n", "within_10pct", "median_abs_error_pct", "spearman", "coverage")


def _figures(truth: np.ndarray, predicted: np.ndarray, low: Any = None, high: Any = None) -> dict[str, Any]:
    m = regression_metrics(truth, predicted, low, high)
    m["median_abs_error_pct"] = m.pop("median_ape")
    return {key: m.get(key) for key in _KEYS}


def _timm_counts(rows: pd.DataFrame) -> np.ndarray:
    table = timm_bench.table().set_index(["model", "side"])
    counts = table.loc[list(zip(rows["model"], rows["side"], strict=True)), ["infer_gmacs", "infer_macts"]]
    params = table.loc[list(zip(rows["model"], rows["side"], strict=True)), "param_count"]
    return np.column_stack(
        [
            np.log(counts["infer_gmacs"].to_numpy() + 1e-3),
            np.log(counts["infer_macts"].to_numpy() + 1e-3),
            np.log(params.to_numpy() + 1e-3),
            np.log(rows["side"].to_numpy(dtype=float)),
            np.log(rows["batch"].to_numpy(dtype=float)),
        ]
    )


def held_out(name: str) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """The setting's rows and each route's out-of-fold time per sample (and interval)."""
    import lightgbm

    rows = timm_bench.measured(name)
    counts = _timm_counts(rows)
    # every route is scored on the same rows: those the baselines can read timm's counts of
    given = np.isfinite(counts).all(axis=1)
    rows, counts = rows[given].reset_index(drop=True), counts[given]
    y = rows["ms_per_sample"].to_numpy()
    out = {key: np.empty(len(rows)) for key in ("shipped", "low", "high", "log-log", "LightGBM")}
    for train, test in GroupKFold(FOLDS).split(rows, y, rows["family"]):
        model = timm_bench.estimator().fit(
            rows.iloc[train], y[train], groups=rows["family"].to_numpy()[train]
        )
        predicted = model.predict(rows.iloc[test])
        out["shipped"][test] = predicted["latency_ms"].to_numpy()
        out["low"][test] = predicted["latency_ms_low"].to_numpy()
        out["high"][test] = predicted["latency_ms_high"].to_numpy()
        design = np.column_stack([np.ones(len(rows)), counts])
        coefficients, *_ = np.linalg.lstsq(design[train], np.log(y[train]), rcond=None)
        out["log-log"][test] = np.exp(design[test] @ coefficients)
        booster = lightgbm.LGBMRegressor(n_estimators=300, learning_rate=0.05, num_leaves=15, verbose=-1)
        out["LightGBM"][test] = np.exp(booster.fit(counts[train], np.log(y[train])).predict(counts[test]))
    return rows, out


def card(name: str) -> dict[str, Any]:
    rows, out = held_out(name)
    y = rows["ms_per_sample"].to_numpy()
    attention = (rows["gflops_attention"] + rows["gflops_softmax"]).to_numpy() > 0
    figures = _figures(y, out["shipped"], out["low"], out["high"])
    splits = {}
    for label, mask in (
        ("without attention (CNNs)", ~attention),
        ("with attention (transformers)", attention),
    ):
        if mask.sum() >= 2:
            splits[label] = {
                "shipped": _figures(y[mask], out["shipped"][mask], out["low"][mask], out["high"][mask]),
                **{b: _figures(y[mask], out[b][mask]) for b in ("log-log", "LightGBM")},
            }
    return {
        "protocol": f"{FOLDS} folds grouped by architecture family, {len(rows)} timm models "
        f"({rows['family'].nunique()} families), time per sample at the table's batch",
        "route": "physical",
        **figures,
        "baselines": {
            "log-log [timm GMACs, activations, params, size, batch]": _figures(y, out["log-log"]),
            "LightGBM [same]": _figures(y, out["LightGBM"]),
        },
        "splits": splits,
        "latency_only": timm_bench.LATENCY_ONLY,
    }


def _cell(f: dict[str, Any]) -> str:
    return f"{f['median_abs_error_pct']:.1f} % / {f['within_10pct']:.0%}"


def _row(name: str, c: dict[str, Any]) -> str:
    cells = [f"**{name}**", f"{c['n']}", _cell(c), f"{c['coverage']:.0%}", f"{c['spearman']:.3f}"]
    for split in c["splits"].values():
        cells += [f"{split['shipped']['n']}", _cell(split["shipped"]), _cell(split["log-log"])]
        cells.append(_cell(split["LightGBM"]))
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    cards = {name: card(name) for name in timm_bench.names()}
    path = data_file("cards.json")
    written = json.loads(path.read_text()) if path.is_file() else {"cards": {}}
    written["written"] = stamp()
    written["cards"].update(cards)
    path.write_text(json.dumps(written, indent=1) + "\n")
    lines = [
        f"## timm_cards: desktop GPUs and a laptop CPU from timm's tables ({stamp()})",
        "",
        "`PYTHONPATH=. .venv/bin/python benchmarks/timm_cards.py` — time per sample, "
        f"{FOLDS} folds grouped by architecture family; baselines on timm's own counts. {machine()}.",
        "",
        "Each cell: median |error| / share within ±10 %. CNNs: networks without attention; "
        "transformers: with it (ViTs and hybrids).",
        "",
        "| setting | n | all | 90 % cover | Spearman | CNNs n | CNNs | log-log | LightGBM "
        "| transf. n | transformers | log-log | LightGBM |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *(_row(name, c) for name, c in cards.items()),
    ]
    record(lines)


if __name__ == "__main__":
    main()
