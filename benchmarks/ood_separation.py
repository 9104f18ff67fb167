"""Does `ood` separate good predictions from bad? The share of networks flagged, and the median
|error| of flagged against unflagged ones, on networks the predictors never trained on.

1. usc-mobile, 102 real networks × 90 phone settings: 5 folds grouped by architecture family, as
   the cards (``device_cards.py``): each fold fits the setting's Σ cost × work route as shipped
   and predicts the held-out families with their flags; the 6 GPU settings also through their
   op-wise route (the shipped first route there), on the networks as captured here.
2. timm's tables, the four settings of issue 47 (``timm_bench``): the same family-grouped folds
   as ``timm_cards.py``, each fold fitted and flagging as shipped (its ranges and its mix of work,
   ``work_mix``), the held-out families' time per sample.
3. Real networks on a host (``--db`` with a campaign of ``benchmarks/real_networks.txt`` measured
   on this machine, ``--campaign``): ``predict --device HOST`` as shipped. A host other than the
   one the tables came from is off by one factor for every network (issue 46); the error is also
   given after that single factor (the median ratio), which is what ``ood`` can speak to.

    PYTHONPATH=. .venv/bin/python benchmarks/ood_separation.py \\
        [--db DB --campaign NAME --device epyc-2core/ort-cpu]

Records its result in RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold

from device_cards import FOLDS, captured_ops
from first_prediction import cpu_model
from infercast.predictors.devices import tflite_gpu, timm_bench, usc
from infercast.predictors.devices.costs import estimator
from infercast.predictors.devices.work_mix import WorkMix
from results import machine, record, stamp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def usc_rows() -> pd.DataFrame:
    """One row per (setting, held-out network, route): its |error| and flag."""
    networks = usc.table()
    families = networks["family"].to_numpy()
    folds = list(GroupKFold(FOLDS).split(networks, groups=families))
    rows = []
    for name in usc.names():
        y = networks[usc.LATENCY_PREFIX + name].to_numpy(dtype=np.float64)
        for train, test in folds:
            predicted = estimator().fit(networks.iloc[train], y[train], groups=families[train])
            by_work = predicted.predict(networks.iloc[test])
            rows += _rows(name, "Σ cost × work", networks.index[test], families[test], y[test], by_work)
            if name.endswith("/gpu"):
                phone, models = name.split("/")[0], networks.index
                latency = pd.Series(y, index=models)
                opwise = tflite_gpu.fit_opwise(
                    phone, latency.iloc[train], pd.Series(families, index=models).iloc[train]
                )
                held = list(models[test])
                mapped = tflite_gpu.on_phone(captured_ops(), phone)
                by_ops = opwise.predict(mapped[mapped["model"].isin(held)]).loc[held]
                rows += _rows(name, "op-wise", held, families[test], y[test], by_ops)
        print(f"{name}: done", flush=True)
    return pd.DataFrame(rows)


TIMM_SETTINGS = (
    "rtx4090/torch-amp",
    "rtx4090/torch-amp-compile",
    "rtx3090/torch-amp",
    "i7-12700h/torch-compile",
)


def timm_rows() -> pd.DataFrame:
    """One row per (timm setting, held-out model): its |error| and flag."""
    rows = []
    for name in TIMM_SETTINGS:
        table = timm_bench.measured(name)
        y = table["ms_per_sample"].to_numpy()
        families = table["family"].to_numpy()
        for train, test in GroupKFold(FOLDS).split(table, y, families):
            model = timm_bench.estimator().fit(table.iloc[train], y[train], groups=families[train])
            predicted = model.predict(table.iloc[test])
            # as the shipped setting flags: its ranges, and a mix of work unlike the training fold's
            unlike, why = WorkMix().fit(table.iloc[train], families[train]).flag(table.iloc[test])
            predicted["ood"] = predicted["ood"].to_numpy() | unlike
            predicted["ood_reason"] = [
                "; ".join(r for r in pair if r) for pair in zip(predicted["ood_reason"], why, strict=True)
            ]
            rows += _rows(
                name, "Σ cost × work", table["model"].iloc[test], families[test], y[test], predicted
            )
        print(f"{name}: done", flush=True)
    return pd.DataFrame(rows)


def _rows(setting: str, route: str, models, families, truth, predicted: pd.DataFrame) -> list[dict]:
    latency = predicted["latency_ms"].to_numpy(dtype=np.float64)
    return [
        {
            "setting": setting,
            "route": route,
            "model": m,
            "family": f,
            "error": abs(p / t - 1),
            "ood": bool(o),
            "reason": r,
        }
        for m, f, t, p, o, r in zip(
            models, families, truth, latency, predicted["ood"], predicted["ood_reason"], strict=True
        )
    ]


def host_rows(db: str, campaign: str, device: str) -> pd.DataFrame:
    import infercast
    from infercast.store import Store

    with Store(db, readonly=True) as store:
        measured = store.measurements()
    measured = measured[measured["campaign"] == campaign].drop_duplicates("model", keep="last")
    truth = measured.set_index("model")["low_ms"].astype(float)
    results = infercast.predict(list(truth.index), device=device)
    predicted = np.array([r["latency_ms"] for r in results])
    scale = float(np.median(truth.to_numpy() / predicted))
    return pd.DataFrame(
        {
            "model": truth.index,
            "error": np.abs(predicted / truth.to_numpy() - 1),
            "error_scaled": np.abs(predicted * scale / truth.to_numpy() - 1),
            "ood": [r["ood"] for r in results],
            "reason": [r["ood_reason"] or "" for r in results],
        }
    ).assign(scale=scale)


def separation(frame: pd.DataFrame, column: str = "error") -> str:
    flagged, kept = frame[frame["ood"]], frame[~frame["ood"]]
    med = lambda part: f"{part[column].median():.1%}" if len(part) else "–"  # noqa: E731
    return f"{len(frame):,} | {frame['ood'].mean():.1%} | {med(flagged)} | {med(kept)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="a store with the real networks measured on this machine")
    parser.add_argument("--campaign", default="real-here")
    parser.add_argument("--device", default="epyc-2core/ort-cpu")
    args = parser.parse_args()
    options = f" --db DB --campaign {args.campaign} --device {args.device}" if args.db else ""
    lines = [
        f"## `ood` separation ({stamp()})",
        "",
        f"`PYTHONPATH=. .venv/bin/python benchmarks/ood_separation.py{options}` "
        f"({machine()}, {cpu_model()}). Networks never trained on; flagged vs unflagged median |error|.",
        "",
        "| networks | route | predictions | flagged | median error, flagged | median error, not flagged |",
        "|---|---|---|---|---|---|",
    ]
    usc_frame = usc_rows()
    for route, part in usc_frame.groupby("route"):
        lines.append(f"| usc-mobile, families held out | {route} | {separation(part)} |")
    if args.db:
        host = host_rows(args.db, args.campaign, args.device)
        scale = host["scale"].iloc[0]
        lines.append(f"| real networks on this machine | {args.device} as shipped | {separation(host)} |")
        lines.append(
            f"| real networks on this machine | {args.device} × {scale:.3f} (one factor) | "
            f"{separation(host, 'error_scaled')} |"
        )
        flagged = host[host["ood"]]
        lines += ["", "Flagged real networks and why:", ""]
        named = [f"- {m}: {r}" for m, r in zip(flagged["model"], flagged["reason"], strict=True)]
        lines += named or ["- none"]
    top = usc_frame[usc_frame["ood"]]["reason"].str.split(";").explode().str.strip()
    lines += ["", "Most common reasons on usc-mobile (one per flag):", ""]
    common = top.str.replace(r"[\d.]+", "N", regex=True).value_counts().head(6)
    lines += [f"- {count} × {reason}" for reason, count in common.items()]
    timm_frame = timm_rows()
    lines += [
        "",
        "timm's tables, families held out (5 folds as `timm_cards.py`; time per sample):",
        "",
        "| setting | predictions | flagged | median error, flagged | median error, not flagged |",
        "|---|---|---|---|---|",
    ]
    for setting, part in timm_frame.groupby("setting", sort=False):
        lines.append(f"| {setting} | {separation(part)} |")
    lines.append(f"| all four | {separation(timm_frame)} |")
    reasons = timm_frame[timm_frame["ood"]]["reason"].str.split(";").explode().str.strip()
    common = reasons.str.replace(r"[\d.]+", "N", regex=True).value_counts().head(4)
    lines += ["", "Most common reasons on timm (one per flag):", ""]
    lines += [f"- {count} × {reason}" for reason, count in common.items()]
    record(lines)


if __name__ == "__main__":
    main()
