"""Your device from a few measurements: adapt the nearest shipped device vs a model from scratch.

usc-mobile, every one of the 90 settings held out in turn, 5 folds grouped by architecture
family: the held-out families are the test networks; k networks (5, 10, 20) drawn at random from
the other families are "measured" on the held-out setting. *adapted*: ``DeviceAdapted`` picks the
nearest source among the shipped Σ cost × work predictors (refitted on the training families
only) and recalibrates it on the k; *scratch*: ``PhysicalLatency`` fitted on the k alone;
*FLOPs*: latency ∝ FLOPs, rate from the k. Two source pools: every other setting (of any phone),
and the other phones only (the whole phone held out, as for a device nobody measured before).

    .venv/bin/python benchmarks/device_adapt.py

Records its result in RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np
from sklearn.model_selection import GroupKFold

from infercast.predictors.devices import usc
from infercast.predictors.devices.costs import estimator
from infercast.predictors.devices.recalibrated import DeviceAdapted
from results import machine, record, stamp

KS = (5, 10, 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="random draws of the k networks per fold")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    networks = usc.table()
    families = networks["family"].to_numpy()
    names = usc.names()
    latency = {n: networks[usc.LATENCY_PREFIX + n].to_numpy(dtype=np.float64) for n in names}
    flops = networks["gflops"].to_numpy()
    # errors[(route, k)][setting] = relative errors of the test networks, over folds and draws
    errors: dict[tuple[str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    picked: dict[str, int] = defaultdict(int)
    rng = np.random.default_rng(args.seed)
    for fold, (train, test) in enumerate(GroupKFold(5).split(networks, groups=families)):
        sources = {
            n: estimator().fit(networks.iloc[train], latency[n][train], groups=families[train]) for n in names
        }
        logs = {n: np.log(s.predict(networks)["latency_ms"].to_numpy())[:, None] for n, s in sources.items()}
        for target in names:
            phone = target.split("/")[0]
            pools = {
                "adapted, other settings": [n for n in names if n != target],
                "adapted, other phones": [n for n in names if n.split("/")[0] != phone],
            }
            y = latency[target]
            for k in KS:
                for _ in range(args.repeats):
                    measured = np.sort(rng.choice(train, k, replace=False))
                    x_k = networks.iloc[measured]
                    for route, pool in pools.items():
                        model = DeviceAdapted({n: sources[n] for n in pool})
                        model.fit(x_k, y[measured], {n: logs[n][measured] for n in pool})
                        predicted = model.predict(networks.iloc[test])["latency_ms"].to_numpy()
                        errors[route, k][target] += list(predicted / y[test] - 1)
                        if route.endswith("phones"):
                            picked[
                                model.source_.split("/")[0]
                                + "/"
                                + ("gpu" if "gpu" in model.source_ else "cpu")
                            ] += 1
                    scratch = estimator(n_folds=min(5, k)).fit(x_k, y[measured])
                    errors["scratch", k][target] += list(
                        scratch.predict(networks.iloc[test])["latency_ms"].to_numpy() / y[test] - 1
                    )
                    rate = np.exp(np.mean(np.log(y[measured] / flops[measured])))
                    errors["FLOPs", k][target] += list(rate * flops[test] / y[test] - 1)
        print(f"fold {fold + 1}/5 done ({time.perf_counter() - started:.0f} s)", flush=True)
    elapsed = time.perf_counter() - started

    kinds = {
        "GPU (6)": [n for n in names if n.endswith("/gpu")],
        "CPU fp32 (42)": [n for n in names if not n.endswith(("/gpu", "/int8"))],
        "CPU int8 (42)": [n for n in names if n.endswith("/int8")],
    }
    routes = ("adapted, other settings", "adapted, other phones", "scratch", "FLOPs")
    lines = [
        f"## Your device from k measurements: adapting the nearest shipped device ({stamp()})",
        "",
        f"`.venv/bin/python benchmarks/device_adapt.py --repeats {args.repeats}` ({machine()}, "
        f"{elapsed:.0f} s). usc-mobile (qed-usc/mobile-ml-benchmark, MIT): each of the 90 settings "
        "held out in turn; 5 folds grouped by architecture family give the test networks; k networks "
        f"of the other families, drawn at random ({args.repeats} draws per fold), are measured on the "
        "held-out setting. Median over the settings of each group of the share of test networks "
        "within ±10 % (median |error| in brackets):",
        "",
        "| settings | k | " + " | ".join(routes) + " |",
        "|---|---|" + "---|" * len(routes),
    ]
    for label, group in kinds.items():
        for k in KS:
            cells = []
            for route in routes:
                within = [np.mean(np.abs(errors[route, k][n]) <= 0.1) for n in group]
                median = [np.median(np.abs(errors[route, k][n])) * 100 for n in group]
                cells.append(f"{np.median(within):.1%} ({np.median(median):.1f} %)")
            lines.append(f"| {label} | {k} | " + " | ".join(cells) + " |")
    common = sorted(picked.items(), key=lambda item: -item[1])[:6]
    lines += [
        "",
        "Sources picked with the phone held out (phone / CPU or GPU, count): "
        + ", ".join(f"{name} {count}" for name, count in common)
        + ".",
        "",
    ]
    record(lines)


if __name__ == "__main__":
    main()
