"""Accuracy card of a shipped host predictor (``epyc-2core/ort-cpu``: ONNX Runtime on the CPU
infercast is developed on), and the evidence for its route.

1. Route choice, on the shipped training tables alone: the blend, the op-wise route, Σ cost × work
   on device features, the geometric means of the first two and of all three, and ``infercast
   train``'s stacked blend + op-wise, each fitted as shipped, scored on design-space configs held
   out — 5 random folds, and each design space held out entirely (train on the other). The
   shipped route is the one with the lowest worst-case median error among the routes whose 90 %
   interval holds: on no split does it cover significantly less than 90 % of the held-out
   configs (one-sided binomial test at 5 %) — but a route the host ships, whose interval holds,
   gives way only to one clearly better: lower in 95 % of paired bootstrap draws of the held-out
   configs (``settled``). Where that is another route than the host ships, it is written into
   ``data/ort_cpu.json`` and the host's routes are trained and shipped again (a mean of two
   routes is not offered: the host keeps its route).
2. The card: the predictor as shipped (the time of a first ``infercast predict --device`` in a
   fresh process with an empty cache is reported) on real networks never trained on
   (benchmarks/real_networks.txt measured on that host in campaign ``--real-a``; noise: campaign
   ``--real-b``): ±10 %, median |error|, Spearman, 90 % coverage, per family; the baselines
   (latency ∝ FLOPs, log-log least squares on [FLOPs, params]) fitted on the same training configs.

    PYTHONPATH=. .venv/bin/python benchmarks/host_card.py --db DB --real-a real-a --real-b real-b

Merges the card into ``src/infercast/predictors/devices/data/cards.json``; records its result in RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import binomtest
from sklearn.model_selection import KFold

from device_cards import card
from infercast.models.guarded import capture_model
from infercast.predictors.blend import CascadeBlend
from infercast.predictors.devices import hosts
from infercast.predictors.devices.common import data_file
from infercast.predictors.devices.costs import fit_configs_and_kernels
from infercast.predictors.devices.features import device_feature_frame
from infercast.predictors.devices.usc import family
from infercast.predictors.opwise import OpWise
from infercast.predictors.routes import (
    BLEND,
    COMBINED,
    LABELS,
    MEAN,
    OPWISE,
    OPWISE_ESTIMATE,
    PHYSICAL,
    geometric_mean,
)
from infercast.store import Store
from results import family_table, machine, record, stamp

FIRST_HOST = "epyc-2core/ort-cpu"
ROUTES = ("blend", "op-wise", "Σ cost × work", "mean of blend, op-wise", "mean of all three", "stacked")
NOMINAL = 0.9
# an interval holds unless its coverage is below NOMINAL with p < this (one-sided binomial test)
HOLDS_P = 0.05
# the shipped route gives way only to a route whose worst-case median error is lower in this share
# of paired bootstrap draws of the held-out configs: new rows in the tables otherwise flip the
# choice between routes whose difference is the draw of configs held out
SWITCH_SHARE = 0.95
BOOTSTRAP_DRAWS = 2000


def held_out_routes(
    name: str, train: np.ndarray, test: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The routes fitted as shipped on the configs ``train``, predicting the configs ``test`` — and,
    for comparison, what ``infercast train`` calls blend + op-wise (``stacked``): the blend refitted
    with the op-wise estimate as a feature (out-of-fold for its training configs). Also the 90 %
    intervals (a mean's spans its routes' intervals)."""
    x, e2e, ops, kernel_ops = hosts.training_tables(name)
    fit_ids, test_ids = set(e2e["model"].iloc[train]), list(e2e["model"].iloc[test])
    blend = CascadeBlend(order=("latency",), seed=0, **hosts.BLEND_PARAMS)
    blend.fit(x.iloc[train], e2e.iloc[train][["latency_ms"]])
    opwise = OpWise(seed=0, **hosts.OPWISE_PARAMS).fit(
        ops[ops["model"].isin(fit_ids)], e2e.iloc[train][["model", "latency_ms"]], kernel_ops=kernel_ops
    )
    held = ops[ops["model"].isin(set(test_ids))].drop(columns="latency_ms")
    blended = blend.predict(x.iloc[test])
    by_ops = opwise.predict(held).reindex(test_ids)
    by_opwise = by_ops["latency_ms"].to_numpy(dtype=np.float64)
    estimate = opwise.oof_latency_ms_.reindex(e2e["model"].iloc[train]).to_numpy(dtype=np.float64)
    stacked = CascadeBlend(order=("latency",), estimates=(OPWISE_ESTIMATE,), seed=0, **hosts.BLEND_PARAMS)
    stacked.fit(x.iloc[train].assign(**{OPWISE_ESTIMATE: np.log(estimate)}), e2e.iloc[train][["latency_ms"]])
    given = x.iloc[test].assign(**{OPWISE_ESTIMATE: np.log(by_opwise)})
    kernels = hosts.kernel_networks(name)
    work = fit_configs_and_kernels(  # as shipped: the training configs and every kernel network
        e2e.iloc[train],
        e2e["latency_ms"].to_numpy()[train],
        e2e["space"].to_numpy()[train],
        kernels,
        kernels["latency_ms"].to_numpy(),
    )
    worked = work.predict(e2e.iloc[test])
    by_ops = by_ops.reset_index(drop=True)
    worked = worked.reset_index(drop=True)
    frames = (
        blended,
        by_ops,
        worked,
        geometric_mean(blended, by_ops),
        geometric_mean(blended, by_ops, worked),
        stacked.predict(given, ood="none"),
    )
    values = {
        route: frame["latency_ms"].to_numpy(dtype=np.float64)
        for route, frame in zip(ROUTES, frames, strict=True)
    }
    intervals = {
        route: (frame["latency_ms_low"].to_numpy(), frame["latency_ms_high"].to_numpy())
        for route, frame in zip(ROUTES, frames, strict=True)
    }
    return values, intervals


def route_choice(name: str) -> tuple[list[str], str, str]:
    """The table rows (per split, each route's median |error| / ±10 % / 90 % interval coverage),
    the route to ship among those whose interval holds on every split (``settled``) and why."""
    _, e2e, _, _ = hosts.training_tables(name)
    truth = e2e["latency_ms"].to_numpy(dtype=np.float64)
    spaces = e2e["space"].to_numpy()
    splits: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {
        "5 random folds": list(KFold(5, shuffle=True, random_state=0).split(truth))
    }
    for space in sorted(set(spaces)):
        splits[f"{space} held out"] = [(np.flatnonzero(spaces != space), np.flatnonzero(spaces == space))]
    rows = []
    errors: dict[str, dict[str, np.ndarray]] = {}
    holds = dict.fromkeys(ROUTES, True)
    for label, folds in splits.items():
        predicted = {route: np.full(len(truth), np.nan) for route in ROUTES}
        covered = {route: np.zeros(len(truth), dtype=bool) for route in ROUTES}
        tested = np.concatenate([test for _, test in folds])
        for train, test in folds:
            values, intervals = held_out_routes(name, train, test)
            for route, estimate in values.items():
                predicted[route][test] = estimate
                low, high = intervals[route]
                covered[route][test] = (low <= truth[test]) & (truth[test] <= high)
        cells = []
        errors[label] = {}
        for route in ROUTES:
            error = np.abs(predicted[route][tested] - truth[tested]) / truth[tested]
            errors[label][route] = error
            inside = int(covered[route][tested].sum())
            below = binomtest(inside, len(tested), NOMINAL, alternative="less").pvalue < HOLDS_P
            holds[route] &= not below
            coverage = f"{inside / len(tested):.0%}" + (" ✗" if below else "")
            cells.append(f"{np.median(error) * 100:.1f} % / {np.mean(error <= 0.1):.0%} / {coverage}")
        rows.append(f"| {label} | {len(tested)} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    shipped = next((label for label, key in SHIPS_AS.items() if key == hosts.route(name)), None)
    return rows, *settled(errors, [r for r in ROUTES if holds[r]], shipped)


def settled(
    errors: dict[str, dict[str, np.ndarray]], holding: list[str], shipped: str | None
) -> tuple[str, str]:
    """The route to ship and why, in words: of the ``holding`` routes the one of lowest worst-case
    median error over the splits (``errors``: split → route → |error| of each held-out config),
    unless ``shipped`` holds too and that one is lower in fewer than ``SWITCH_SHARE`` of paired
    bootstrap draws (each split's configs drawn again, the same draw for both routes)."""

    def worst(route: str, draw: dict[str, np.ndarray] | None = None) -> float:
        return max(
            float(np.median(split[route] if draw is None else split[route][draw[label]]))
            for label, split in errors.items()
        )

    best = min(holding, key=worst)
    if shipped not in holding or best == shipped:
        return best, f"{best}, the lowest worst-case median error among the routes whose interval holds"
    rng = np.random.default_rng(0)
    lower = 0
    for _ in range(BOOTSTRAP_DRAWS):
        draw = {label: rng.integers(0, len(split[best]), len(split[best])) for label, split in errors.items()}
        lower += worst(best, draw) < worst(shipped, draw)
    share = lower / BOOTSTRAP_DRAWS
    versus = (
        f"{best}'s worst-case median error {worst(best) * 100:.1f} % against {shipped}'s "
        f"{worst(shipped) * 100:.1f} % is lower in {share:.0%} of paired bootstrap draws of the "
        f"held-out configs"
    )
    if share >= SWITCH_SHARE:
        return best, f"{best}: {versus}"
    return shipped, f"{shipped}, as shipped: {versus} (a switch needs {SWITCH_SHARE:.0%})"


# the route-choice table's routes → the route a host ships (a mean of two is not offered)
SHIPS_AS = {
    "blend": BLEND,
    "op-wise": OPWISE,
    "Σ cost × work": PHYSICAL,
    "mean of all three": MEAN,
    "stacked": COMBINED,
}


def ship_route(name: str, best: str) -> None:
    """Make ``best`` (a ``ROUTES`` label) the route host ``name`` ships, retraining its routes when
    that changes it (``data/ort_cpu.json``, ``data/routes``)."""
    if best not in SHIPS_AS:
        print(f"{best} is no route a host ships; {name} keeps {hosts.route(name)}")
        return
    if SHIPS_AS[best] == hosts.route(name):
        return
    path = data_file(hosts.META_FILE)
    meta = json.loads(path.read_text())
    meta["devices"][name]["route"] = SHIPS_AS[best]
    path.write_text(json.dumps(meta, indent=1) + "\n")
    hosts.hosts.cache_clear()
    hosts.ship(name)


def first_use_seconds(name: str) -> float:
    """Wall time of a whole ``infercast predict --device`` on one network in a fresh process with
    an empty cache, as on a fresh install: start-up, capture, loading the shipped routes."""
    command = ["predict", "--device", name, "--json", "pytorchcv:resnet18"]
    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        subprocess.run(
            [str(Path(sys.executable).with_name("infercast")), *command],
            check=True,
            capture_output=True,
            env={**os.environ, "INFERCAST_CACHE": cache},
        )
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="the store with the real networks' campaigns")
    parser.add_argument("--real-a", required=True)
    parser.add_argument("--real-b", required=True)
    parser.add_argument("--name", default=FIRST_HOST)
    args = parser.parse_args()
    started = time.perf_counter()
    name = args.name

    with Store(args.db, readonly=True) as store:
        measured = store.measurements()
    by = {
        c: measured[measured["campaign"] == c].drop_duplicates("model", keep="last").set_index("model")
        for c in (args.real_a, args.real_b)
    }
    models = [m for m in by[args.real_a].index if m in by[args.real_b].index]
    # the truth in the statistic the shipped rows hold (steady_ms: at the host's usual speed)
    stat = hosts.hosts()[name].get("latency_stat", "low_ms")
    truth = by[args.real_a].loc[models, stat].to_numpy(dtype=np.float64)
    noise = np.abs(by[args.real_b].loc[models, stat].to_numpy(dtype=np.float64) - truth) / truth

    choice, best, why = route_choice(name)
    ship_route(name, best)
    first_use = sorted(first_use_seconds(name) for _ in range(3))  # the host slows by phases
    device = hosts.load(name)
    graphs = [capture_model(m, None)[0] for m in models]
    predicted = device.predict_graphs(graphs)
    by_work = device.physical.predict(device_feature_frame(graphs))
    values = {
        device.route: predicted["latency_ms"].to_numpy(),
        BLEND: predicted["model_level_ms"].to_numpy(),
        OPWISE: predicted["opwise_ms"].to_numpy(),
        PHYSICAL: predicted["physical_ms"].to_numpy(),
    }
    x, e2e, _, _ = hosts.training_tables(name)
    y = e2e["latency_ms"].to_numpy(dtype=np.float64)
    flops = np.array([g.flops for g in graphs], dtype=np.float64)
    params = np.array([g.params for g in graphs], dtype=np.float64)
    rate = np.exp(np.mean(np.log(y / x["flops"].to_numpy())))
    design = np.column_stack([np.ones(len(y)), np.log(x["flops"]), np.log(x["params"])])
    coef, *_ = np.linalg.lstsq(design, np.log(y), rcond=None)
    baselines = {
        "FLOPs-proportional": flops * rate,
        "log-log [FLOPs, params]": np.exp(
            np.column_stack([np.ones(len(flops)), np.log(flops), np.log(params)]) @ coef
        ),
    }
    shipped = card(truth, values[device.route], predicted["latency_ms_low"], predicted["latency_ms_high"])
    host = hosts.hosts()[name]
    entry = {
        "protocol": f"{len(models)} pytorchcv networks at 224² measured on that host, never trained on; "
        f"trained on {host['n_configs']} design-space configs, {host['n_kernel_networks']} kernel networks",
        "route": device.route,
        **shipped,
        "baselines": {label: card(truth, v) for label, v in baselines.items()},
        "other_routes": {
            BLEND: card(truth, values[BLEND]),
            OPWISE: card(truth, values[OPWISE]),
            PHYSICAL: card(truth, values[PHYSICAL], by_work["latency_ms_low"], by_work["latency_ms_high"]),
        },
        "first_use_s": round(first_use[0], 1),
    }
    path = data_file("cards.json")
    written = json.loads(path.read_text()) if path.is_file() else {"cards": {}}
    written["cards"][name] = entry
    path.write_text(json.dumps(written, indent=1) + "\n")

    def figures(values: np.ndarray) -> str:
        c = card(truth, values)
        return f"{c['within_10pct']:.0%} | {c['median_abs_error_pct']:.1f} % | {c['spearman']:.3f}"

    settings = ", ".join(f"{k} {v}" for k, v in host["settings"].items())
    families = np.array([family(m.removeprefix("pytorchcv:")) for m in models])
    lines = [
        "",
        f"## Host CPU: the shipped `{name}` predictor ({stamp()})",
        "",
        "`PYTHONPATH=. .venv/bin/python benchmarks/host_card.py "
        f"--db DB --real-a {args.real_a} --real-b {args.real_b} "
        f"--name {name}` "
        f"({machine()}; {time.perf_counter() - started:.0f} s). ONNX Runtime {host['onnxruntime']} CPU, "
        f"{settings}; trained on the shipped tables ({host['source']}; campaigns "
        f"{', '.join(host['campaigns'] + host['kernel_campaigns'])}).",
        "",
        "Route choice on the training configs alone (median |error| / ±10 % / coverage of the 90 % "
        "interval, a mean's spanning its routes' intervals; ✗: significantly below 90 %, one-sided "
        f"binomial test at {HOLDS_P:.0%}):",
        "",
        "| held out | n | " + " | ".join(ROUTES) + " |",
        "|---|---|" + "---|" * len(ROUTES),
        *choice,
        "",
        f"Route: {why} (shipped: {LABELS[device.route]}).",
        "",
        f"Card: {len(models)} pytorchcv networks at 1×3×224×224 never trained on (truth `{args.real_a}` "
        f"`{stat}`; noise |`{args.real_b}` − `{args.real_a}`|). 90 % coverage of the shipped route: "
        f"{shipped['coverage']:.0%}. First `infercast predict --device {name} pytorchcv:resnet18` with "
        f"an empty cache (the routes ship trained), three runs: "
        + ", ".join(f"{seconds:.1f} s" for seconds in first_use)
        + ".",
        "",
        "| predictor | ±10 % | median abs. error | Spearman |",
        "|---|---|---|---|",
        f"| re-measurement noise | {np.mean(noise <= 0.1):.0%} | {np.median(noise) * 100:.1f} % | – |",
        *(f"| {label} | {figures(v)} |" for label, v in {**values, **baselines}.items()),
        "",
        "Per family (median abs. error):",
        "",
        *family_table(families, truth, values),
    ]
    # one section per shipped host: the first host's keeps its name
    record(lines, name="host_card" if name == FIRST_HOST else f"host_card-{name.split('/')[0]}")


if __name__ == "__main__":
    main()
