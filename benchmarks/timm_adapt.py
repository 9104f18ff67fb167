"""A new GPU from k measurements: `infercast adapt` from timm's settings, scored across the given
tables (3090 ↔ 4090, PyTorch 2.4 ↔ 2.9.1, eager ↔ compiled) for k = 5, 10, 20.

Each scenario plays one table as the new device and others as the shipped sources. 5 folds
grouped by architecture family over both: the sources are fitted on the training families only,
k networks of the training families are "measured" on the new device (chosen as `adapt` chooses:
k-centre over the sources' log predictions), and the adapted predictor (`DeviceAdapted`: the
nearest source by leave-one-out, recalibrated per kind of work from six networks on)
predicts the held-out families — networks neither the sources nor the k measurements saw.
Beside it: the nearest source unadapted, and one factor alone (`per_kind=False`). A second table
bounds what recalibrating a source can do: each form fitted on every training network of the new
device (not k), against the new device's own Σ cost × work refitted on them.

    PYTHONPATH=. .venv/bin/python benchmarks/timm_adapt.py

Reads only the shipped ``timm_networks.parquet``; records the result in RESULTS.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
from benchmarks.results import machine, record, stamp
from sklearn.model_selection import GroupKFold

from infercast.predictors.devices import timm_bench
from infercast.predictors.devices.recalibrated import DeviceAdapted, fit_kind_factors, kind_parts, work_kinds
from infercast.predictors.sources import select_configs

FOLDS = 5
KS = (5, 10, 20)
_4090 = [n for n in timm_bench.SETTINGS if n.startswith("rtx4090/")]
_3090 = [n for n in timm_bench.SETTINGS if n.startswith("rtx3090/")]
# scenario → (the shipped sources, the new device)
SCENARIOS: dict[str, tuple[list[str], str]] = {
    "RTX 3090 tables → RTX 4090 (2.9.1, eager)": (_3090, "rtx4090/torch-amp"),
    "RTX 4090 tables → RTX 3090 (2.4, eager)": (_4090, "rtx3090/torch-amp"),
    "4090 PyTorch 2.4 → 2.9.1": (["rtx4090/torch-amp/pt2.4"], "rtx4090/torch-amp"),
    "4090 PyTorch 2.9.1 → 2.4": (["rtx4090/torch-amp"], "rtx4090/torch-amp/pt2.4"),
    "4090 eager → compiled": (["rtx4090/torch-amp"], "rtx4090/torch-amp-compile"),
    "4090 compiled → eager": (["rtx4090/torch-amp-compile"], "rtx4090/torch-amp"),
}
ROUTES = ("nearest source unadapted", "one factor", "adapt (per kind of work)")
BOUNDS = ("one factor", "three kinds (arithmetic, memory, launches)", "per kind (each column)", "refitted")
# the ridge's pull towards the common factor where every training network is measured: nearly none
_FREE = 0.01


def _folds(sources: list[str], target: str) -> Iterator[tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]]:
    """Per fold: the sources fitted on the training families, the new device's rows of those
    families and of the held-out ones."""
    tables = {name: timm_bench.measured(name) for name in {*sources, target}}
    families = pd.concat([t["family"] for t in tables.values()]).unique()
    for _, test in GroupKFold(FOLDS).split(families, groups=families):
        held = set(families[test])
        fitted = {}
        for name in sources:
            rows = tables[name][~tables[name]["family"].isin(held)]
            fitted[name] = timm_bench.estimator().fit(
                rows, rows["ms_per_sample"].to_numpy(), groups=rows["family"].to_numpy()
            )
        rows = tables[target]
        yield fitted, rows[~rows["family"].isin(held)], rows[rows["family"].isin(held)]


def _errors(sources: list[str], target: str) -> dict[tuple[int, str], list[np.ndarray]]:
    """|relative error| on the held-out families, per (k, route), fold by fold."""
    out: dict[tuple[int, str], list[np.ndarray]] = {}
    for fitted, train, test_rows in _folds(sources, target):
        logs = np.column_stack([np.log(m.predict(train)["latency_ms"].to_numpy()) for m in fitted.values()])
        truth = test_rows["ms_per_sample"].to_numpy()
        for k in KS:
            picked = select_configs([], train, k, "spread", source_log=logs)
            measured = train.iloc[picked]
            y = measured["ms_per_sample"].to_numpy()
            column = {n: logs[picked][:, [i]] for i, n in enumerate(fitted)}
            for route, per_kind in ((ROUTES[1], False), (ROUTES[2], True)):
                model = DeviceAdapted(fitted, per_kind=per_kind).fit(measured, y, column)
                predicted = model.predict(test_rows)["latency_ms"].to_numpy()
                out.setdefault((k, route), []).append(np.abs(predicted / truth - 1))
            unadapted = fitted[model.source_].predict(test_rows)["latency_ms"].to_numpy()
            out.setdefault((k, ROUTES[0]), []).append(np.abs(unadapted / truth - 1))
    return out


def _bounds(sources: list[str], target: str) -> dict[str, list[np.ndarray]]:
    """|relative error| on the held-out families of each form fitted on every training network."""
    out: dict[str, list[np.ndarray]] = {}
    for fitted, train, test_rows in _folds(sources, target):
        y, truth = train["ms_per_sample"].to_numpy(), test_rows["ms_per_sample"].to_numpy()
        one = DeviceAdapted(fitted, per_kind=False).fit(train, y)
        source = fitted[one.source_]
        predicted = {BOUNDS[0]: one.predict(test_rows)["latency_ms"].to_numpy()}
        for form, kinds in ((BOUNDS[1], ("compute", "memory", "launches")), (BOUNDS[2], None)):
            kinds = kinds or work_kinds(source)
            factors = fit_kind_factors(kind_parts(source, train, kinds), y, _FREE)
            predicted[form] = kind_parts(source, test_rows, kinds) @ factors
        own = timm_bench.estimator().fit(train, y, groups=train["family"].to_numpy())
        predicted[BOUNDS[3]] = own.predict(test_rows)["latency_ms"].to_numpy()
        for form, values in predicted.items():
            out.setdefault(form, []).append(np.abs(values / truth - 1))
    return out


def _cell(errors: list[np.ndarray]) -> str:
    e = np.concatenate(errors)
    return f"{np.median(e) * 100:.1f} % / {np.mean(e < 0.1):.0%}"


def main() -> None:
    lines: list[Any] = [
        f"## timm_adapt: a new GPU from k measurements ({stamp()})",
        "",
        "`PYTHONPATH=. .venv/bin/python benchmarks/timm_adapt.py` — time per sample of the held-out "
        f"families ({FOLDS} folds grouped by family over sources and new device); each cell: median "
        f"|error| / share within ±10 %. {machine()}.",
        "",
        "| scenario | k | " + " | ".join(ROUTES) + " |",
        "|---|---|" + "---|" * len(ROUTES),
    ]
    for scenario, (sources, target) in SCENARIOS.items():
        errors = _errors(sources, target)
        lines += [
            f"| {scenario} | {k} | " + " | ".join(_cell(errors[k, r]) for r in ROUTES) + " |" for k in KS
        ]
    lines += [
        "",
        "What recalibrating a source can reach: each form fitted on every training network of the new "
        "device (hundreds, not k), the nearest source by one factor's leave-one-out error; beside it the "
        "new device's own Σ cost × work refitted on them:",
        "",
        "| scenario | " + " | ".join(BOUNDS) + " |",
        "|---|" + "---|" * len(BOUNDS),
    ]
    for scenario, (sources, target) in SCENARIOS.items():
        bounds = _bounds(sources, target)
        lines.append(f"| {scenario} | " + " | ".join(_cell(bounds[form]) for form in BOUNDS) + " |")
    record(lines)


if __name__ == "__main__":
    main()
