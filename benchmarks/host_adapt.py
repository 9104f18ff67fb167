"""Another machine of the host's kind: a shipped host predictor (``--host``, ``epyc-2core/ort-cpu``
by default) on the machine this runs on, as shipped and adapted from k design-space configs
measured here.

A user whose server is not the machine a shipped host predictor was measured on measures k
configs of the built-in spaces at 224² (``--k-campaign``: sampled and measured by this script
when the store lacks them) and runs ``infercast adapt --db DB --k K`` (no ``--predictor``: the
nearest shipped device). Scored on real networks measured on this machine and never adapted on
(benchmarks/real_networks.txt, campaigns ``--real-a``, noise ``--real-b``): the shipped host
unadapted; adapted as ``infercast adapt`` does (a platform measured with ``ort-cpu`` adapts from
the host of that runtime), and on the same k configs from every shipped device (leave-one-out
choice among the 90 phone settings and the hosts), from the phones' settings alone (what
``adapt`` chose among before the hosts were sources), and from the hosts measured on other
machines alone (where a host was measured on this one, as if it were not shipped).

    infercast measure $(grep -v '^#' benchmarks/real_networks.txt) --db DB --campaign real-a \\
        --round-s 0.15 --min-rounds 5 --cap-s 4 --no-energy      # and again as real-b
    PYTHONPATH=. .venv/bin/python benchmarks/host_adapt.py --db DB --real-a real-a --real-b real-b

Records its result in RESULTS.md (``results.record``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from device_cards import card
from infercast import space
from infercast.api import adapt_device
from infercast.machine import differences_here
from infercast.measurement import Protocol, measure_model_strings
from infercast.models.guarded import capture_model
from infercast.predictors.devices import hosts, usc
from infercast.predictors.devices.features import device_feature_frame
from infercast.predictors.devices.recalibrated import DeviceAdapted, same_runtime, shipped_sources
from infercast.predictors.routes import label as route_label
from infercast.store import Store
from results import machine, record, stamp

HOST = "epyc-2core/ort-cpu"
KS = (5, 10, 20)
PROTOCOL = Protocol(round_s=0.15, min_rounds=5, cap_s=4.0)


def k_configs(n: int, seed: int) -> list[str]:
    """n configs at 224², batch 1: half carb-resnet, half mobile-nas, stratified."""
    resnets = space.restrict(space.get("carb-resnet"), "input_size", [224])
    resnets = space.restrict(space.restrict(resnets, "batch", [1]), "precision", ["fp32"])
    mobile = space.restrict(space.restrict(space.get("mobile-nas"), "resolution", [224]), "batch", [1])
    half = n // 2
    return [
        *resnets.sample(half, seed=seed, stratified=True)["model"],
        *mobile.sample(n - half, seed=seed, stratified=True)["model"],
    ]


def campaign_latency(db: str, campaign: str) -> dict[str, float]:
    """Each model's ``steady_ms`` in ``campaign``: what ``adapt_device`` learns by default."""
    with Store(db, readonly=True) as store:
        measured = store.measurements()
    rows = measured[measured["campaign"] == campaign].drop_duplicates("model", keep="last")
    return dict(zip(rows["model"], rows["steady_ms"].astype(float), strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="the store with the real networks' campaigns")
    parser.add_argument("--real-a", required=True)
    parser.add_argument("--real-b", required=True)
    parser.add_argument("--k-campaign", default="adapt-224", help="the design-space configs measured here")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--host", default=HOST, help="the shipped host predictor shown as shipped")
    args = parser.parse_args()
    started = time.perf_counter()

    measure_model_strings(
        k_configs(max(KS), args.seed), db=args.db, campaign=args.k_campaign, protocol=PROTOCOL, energy=False
    )
    real_a, real_b = campaign_latency(args.db, args.real_a), campaign_latency(args.db, args.real_b)
    models = [m for m in real_a if m in real_b]
    truth = np.array([real_a[m] for m in models])
    noise = np.abs(np.array([real_b[m] for m in models]) - truth) / truth
    graphs = [capture_model(m)[0] for m in models]
    x = device_feature_frame(graphs)

    shipped = hosts.load(args.host).predict_graphs(graphs)
    rows = {
        f"{args.host} as shipped ({route_label(hosts.route(args.host))})": card(
            truth,
            shipped["latency_ms"].to_numpy(),
            shipped["latency_ms_low"].to_numpy(),
            shipped["latency_ms_high"].to_numpy(),
        )
    }
    measured = campaign_latency(args.db, args.k_campaign)
    every = shipped_sources()
    fingerprints = {n: hosts.hosts()[n].get("fingerprint", {}) for n in same_runtime("ort-cpu")}
    elsewhere = [n for n, there in fingerprints.items() if differences_here(there)]
    pools = {
        "every shipped device": every,
        "the phones' settings only": {n: every[n] for n in usc.names()},
        "the hosts measured on other machines": {n: every[n] for n in elsewhere},
    }
    chosen: dict[str, str] = {}
    for k in KS:
        with tempfile.TemporaryDirectory() as folder:
            summary = adapt_device(args.db, Path(folder) / "adapted", k=k, campaigns=[args.k_campaign])
            models_k = {
                f"adapted, k = {k}, as `infercast adapt` does": DeviceAdapted.load(Path(folder) / "adapted")
            }
        # the same k configs, other pools of sources to choose from
        picked = summary["measured_configs"]
        features = device_feature_frame([capture_model(m)[0] for m in picked])
        latency = np.array([measured[m] for m in picked])
        for pool, sources in pools.items():
            models_k[f"adapted, k = {k}, from {pool}"] = DeviceAdapted(sources).fit(features, latency)
        for label, model in models_k.items():
            predicted = model.predict(x)
            rows[label] = card(
                truth,
                predicted["latency_ms"].to_numpy(),
                predicted["latency_ms_low"].to_numpy(),
                predicted["latency_ms_high"].to_numpy(),
            )
            chosen[label] = model.source_ or ""

    lines = [
        "",
        f"## Another machine of the host's kind: `{args.host}` adapted from k configs ({stamp()})",
        "",
        "`PYTHONPATH=. .venv/bin/python benchmarks/host_adapt.py "
        f"--db DB --real-a {args.real_a} --real-b {args.real_b} "
        f"--host {args.host}` "
        f"({machine()}; {time.perf_counter() - started:.0f} s). ONNX Runtime CPU, 1 thread, on this "
        f"machine; k configs of carb-resnet and mobile-nas at 224² measured here (campaign "
        f"`{args.k_campaign}`, round 0.15 s, ≥ 5 rounds, cap 4 s), `adapt_device` (`infercast adapt "
        f"--db DB --k K`); {len(models)} real networks measured here, never adapted on (truth "
        f"`{args.real_a}` `steady_ms`; re-measurement noise |`{args.real_b}` − `{args.real_a}`|: median "
        f"{np.median(noise):.1%}, {np.mean(noise <= 0.1):.0%} within ±10 %).",
        "",
        "| predictor | source chosen | ±10 % | median abs. error | Spearman | 90 % coverage |",
        "|---|---|---|---|---|---|",
    ]
    for label, figures in rows.items():
        coverage = figures["coverage"]
        lines.append(
            f"| {label} | {chosen.get(label, args.host)} | {figures['within_10pct']:.0%} | "
            f"{figures['median_abs_error_pct']:.1f} % | {figures['spearman']:.3f} | "
            + (f"{coverage:.0%}" if coverage is not None else "–")
            + " |"
        )
    record(lines)


if __name__ == "__main__":
    main()
