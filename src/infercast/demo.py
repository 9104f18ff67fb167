"""The main job on the embedded default — this CPU through ONNX Runtime, a SQLite file — end to end:
profile a design space and a kernel campaign → train → evaluate → predict and measure real
networks → screen a million → validate → report. ``run_demo`` is what ``infercast demo`` and
``make demo`` run; rerunning resumes from the store (configs measured before are not measured
again).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEMO_SPACE = """\
# The demo's design space: carb-resnet restricted to what one CPU core measures in about a second
name: demo-resnets
family: carb-resnet
params:
  depth: {min: 8, max: 50}
  width: {min: 0.25, max: 1.0}
  input_size: [32, 64, 96, 128]
  batch: [1, 2, 4]
  precision: [fp32]
"""
# The demo's kernel campaign: one-kernel networks at shapes real CNNs run, restricted to the maps
# of the demo's 128² networks (64² after their stem and smaller); their op rows teach the op-wise
# kernel regressors what the design space lacks (depthwise convs, concats, SE blocks, shuffles)
DEMO_KERNELS = """\
name: demo-kernels
family: kernels
params:
  side: {min: 1, max: 64}
"""
DESIGN_SHARE, KERNEL_SHARE = 0.45, 0.2  # of --minutes: the design-space and the kernel campaign
# real networks never seen in training, at an input size the demo space covers
ZOO = (
    "torchvision:resnet18",
    "torchvision:resnet34",
    "torchvision:mobilenet_v2",
    "torchvision:squeezenet1_1",
    "torchvision:shufflenet_v2_x1_0",
)
ZOO_SHAPE = (1, 3, 128, 128)

Progress = Callable[[str, dict[str, Any]], None]
MIN_CONFIGS = 12  # what `train` needs
MIN_KERNELS = 4  # a kernel campaign measures at least these, past its share of the minutes if need be


def _check_request(
    folder: str | Path, minutes: float, configs: int, zoo: int, candidates: int, shortlist: int, kernels: int
) -> None:
    """Refuse a demo that cannot run as asked before anything is created or measured."""
    from infercast.errors import InfercastError
    from infercast.paths import check_output_dir

    if not (math.isfinite(minutes) and minutes > 0):
        raise InfercastError(f"--minutes {minutes}: the time budget must be a positive number of minutes")
    if configs < MIN_CONFIGS:
        raise InfercastError(
            f"--configs {configs}: the predictors need at least {MIN_CONFIGS} profiled configs"
        )
    if not 1 <= zoo <= len(ZOO):
        raise InfercastError(f"--zoo {zoo}: between 1 and {len(ZOO)} real networks")
    if kernels < 0:
        raise InfercastError(f"--kernels {kernels}: the kernel campaign's size is 0 (none) or more")
    if candidates < 1 or shortlist < 1:
        raise InfercastError(f"--candidates {candidates} and --shortlist {shortlist} must be at least 1")
    check_output_dir(folder)


def run_demo(
    folder: str | Path = "infercast-demo",
    minutes: float = 10.0,
    configs: int = 160,
    zoo: int = 5,
    candidates: int = 1_000_000,
    shortlist: int = 5,
    progress: Progress | None = None,
    fast: bool = False,
    kernels: int = 120,
) -> dict[str, Any]:
    """Run every stage; ``progress(step, figures)`` hears each step's one-line result as it ends.
    ``minutes`` bounds the profiling (45 % of it for the design space, a fifth for the
    ``kernels``-network kernel campaign); ``fast`` shortens the measurement protocol and the
    learners for a quick check (the CI test)."""
    from infercast import screen
    from infercast.api import predict_models, train
    from infercast.measurement import (
        CampaignSpec,
        Protocol,
        backends,
        measure_model_strings,
        platform_of,
        run_campaign,
    )
    from infercast.predictors import CascadeBlend
    from infercast.report import build_report
    from infercast.store import Store
    from infercast.units import bytes_to_mb

    _check_request(folder, minutes, configs, zoo, candidates, shortlist, kernels)
    tell = progress or (lambda step, figures: None)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    space_file = folder / "space.yaml"
    space_file.write_text(DEMO_SPACE)
    kernel_file = folder / "kernels.yaml"
    kernel_file.write_text(DEMO_KERNELS)
    db = folder / "runs.db"
    backend = backends.get("ort-cpu", threads=1, opt_level="all")
    protocol = (
        Protocol(warmup_s=0.1, round_s=0.05, min_rounds=3, cap_s=0.6, group=4)
        if fast
        else Protocol(warmup_s=0.2, round_s=0.1, min_rounds=4, cap_s=2.0, group=4)
    )
    results: dict[str, Any] = {"folder": str(folder), "db": str(db)}

    # 1. profile a stratified sample, in slices, until the count or the time budget is reached
    started = time.perf_counter()
    budget_s = minutes * 60 * DESIGN_SHARE
    rows, _ = CampaignSpec(str(space_file), n=configs, stratified=True).rows()
    with Store(db) as store:
        store.add_platform(platform_of(backend))
        done = store.done(platform_of(backend).id, "demo")

    def profiled(event: str, state: dict[str, Any]) -> None:
        if event in ("done", "failed"):
            tell("profile-progress", {"measured": len(done) + state["done"], "target": len(rows)})

    summary = run_campaign(
        rows,
        db,
        backend,
        "demo",
        protocol,
        op_runs=3,
        progress=profiled,
        deadline=time.monotonic() + budget_s,
        at_least=MIN_CONFIGS,  # training needs them: a slow host runs past its budget for them
    )
    results["profile"] = {
        "measured_now": summary["done"],
        "failed": summary["failed"],
        "in_store": len(done) + summary["done"],
        "left_for_a_rerun": summary["left"],
        "seconds": time.perf_counter() - started,
    }
    tell("profile", results["profile"])

    # 1b. the kernel campaign, within its share of the minutes
    campaigns = ["demo"]
    if kernels:
        started = time.perf_counter()
        kernel_rows, _ = CampaignSpec(str(kernel_file), n=kernels, stratified=False).rows()
        with Store(db) as store:
            before = len(store.done(platform_of(backend).id, "demo-kernels"))

        def kernel_progress(event: str, state: dict[str, Any]) -> None:
            if event in ("done", "failed"):
                measured = before + state["done"]
                tell("kernels-progress", {"measured": measured, "target": len(kernel_rows)})

        kernel_summary = run_campaign(
            kernel_rows,
            db,
            backend,
            "demo-kernels",
            protocol,
            op_runs=3,
            progress=kernel_progress,
            deadline=time.monotonic() + minutes * 60 * KERNEL_SHARE,
            at_least=min(kernels, MIN_KERNELS),
        )
        results["kernels"] = {
            "measured_now": kernel_summary["done"],
            "failed": kernel_summary["failed"],
            "in_store": before + kernel_summary["done"],
            "left_for_a_rerun": kernel_summary["left"],
            "seconds": time.perf_counter() - started,
        }
        tell("kernels", results["kernels"])
        if results["kernels"]["in_store"]:
            campaigns.append("demo-kernels")

    # 2–3. train both predictors, score the held-out configs
    started = time.perf_counter()
    predictor = folder / "predictor"
    blend = CascadeBlend(n_estimators=150 if fast else 400, forest_estimators=60 if fast else 200, n_folds=4)
    trained = train(db, predictor, campaigns=campaigns, blend=blend)
    results["train"] = {
        **{k: trained[k] for k in ("n_train", "n_test", "unavailable")},
        "kernel_campaign": trained.get("kernel_campaign"),
        "routes": trained.get("routes"),
        "seconds": time.perf_counter() - started,
    }
    tell("train", results["train"])
    results["evaluate"] = {
        "test_metrics": trained["test_metrics"],
        "opwise": trained.get("opwise_test_metrics", {}),
    }
    tell("evaluate", results["evaluate"])

    # 4. predict, then measure, real networks never seen in training
    started = time.perf_counter()
    chosen = list(ZOO[:zoo])
    predicted = predict_models(predictor, chosen, "x".join(map(str, ZOO_SHAPE)))
    measured = measure_model_strings(
        chosen, backend, protocol, db=db, campaign="demo-zoo", input_shape=ZOO_SHAPE
    )
    networks = []
    for p, m in zip(predicted, measured, strict=True):
        networks.append(
            {
                "model": p["model"],
                "route": p.get("route"),
                "predicted_ms": p["latency_ms"],
                "interval": p["latency_ms_interval"],
                "routes_ms": {r["route"]: r["latency_ms"] for r in p["routes"]},
                # what the predictor learned: low_ms at the host's usual speed
                "measured_ms": m.get("steady_ms", m.get("low_ms")),
                "predicted_memory_mb": p["peak_memory_mb"],
                "measured_memory_mb": bytes_to_mb(m.get("peak_memory_bytes")) or None,
                "ood": p["ood"],
                "ood_reason": p["ood_reason"],
                "failure": m.get("reason"),
            }
        )
    results["networks"] = networks
    results["network_errors"] = _network_errors(networks)
    tell(
        "networks",
        {"networks": networks, "errors": results["network_errors"], "seconds": time.perf_counter() - started},
    )

    # 5. screen a million candidates against a budget set from what was measured
    started = time.perf_counter()
    with Store(db) as store:
        frame = store.measurements()
    demo_rows = frame[frame["campaign"] == "demo"]
    budget = screen.Budgets(
        max_latency_ms=float(demo_rows["low_ms"].quantile(0.25)),
        max_memory_mb=float(bytes_to_mb(demo_rows["peak_memory_bytes"]).quantile(0.5)),
    )
    model = CascadeBlend.load(predictor)
    pool = screen.from_space(str(space_file), candidates, seed=1)
    result = screen.screen(model, pool, budget, ["latency", "memory", "params"], shortlist)
    results["screen"] = {
        "candidates": candidates,
        "budgets": budget.active(),
        "stage1": result.stage1,
        "stage2": result.stage2,
        "shortlist": [r["model"] for r in result.to_dict()["shortlist"]],
        "message": result.message,
        "seconds": time.perf_counter() - started,
    }
    tell("screen", results["screen"])

    # 6. validate the shortlist on this CPU
    if not result.shortlist.empty:
        started = time.perf_counter()
        validation = screen.validate(result, model, pool, db, protocol, probe_rejected=2)
        results["validate"] = {**validation, "seconds": time.perf_counter() - started}
        tell("validate", results["validate"])

    # 7. the report
    started = time.perf_counter()
    html = build_report(db, folder / "report.html", predictor)
    results["report"] = {"path": str(html), "seconds": time.perf_counter() - started}
    tell("report", results["report"])
    return results


def _network_errors(networks: list[dict[str, Any]]) -> dict[str, Any]:
    """Median |error| of each latency route over the real networks that were measured."""
    measured = [n for n in networks if n["measured_ms"]]
    per_route = {
        route: statistics.median(abs(n["routes_ms"][route] / n["measured_ms"] - 1) for n in measured)
        for route in (measured[0]["routes_ms"] if measured else ())
    }
    return {
        "n": len(measured),
        "route": measured[0]["route"] if measured else None,
        "median_abs_error": per_route,
    }
