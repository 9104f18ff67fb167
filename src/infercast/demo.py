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
# --minutes bounds the whole demo: the steps after profiling (training, measuring the real
# networks and the shortlist, screening, the report) are reserved first, at least RESERVE_SHARE
# of the budget, else RESERVE_S plus RESERVE_PER_MODEL_S for each network they measure
# (benchmarks/history/demo.md); the design space takes DESIGN_SHARE of what is left, the kernel
# campaign the rest
RESERVE_SHARE, RESERVE_S, RESERVE_PER_MODEL_S = 0.3, 25.0, 4.0
DESIGN_SHARE = 0.7
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
    """Run every step; ``progress(step, figures)`` hears each step's one-line result as it ends.
    ``minutes`` bounds the whole run: the later steps are reserved their time first, profiling
    takes the rest (the design space first, then the ``kernels``-network kernel campaign); a
    budget too short for the least the demo needs (``MIN_CONFIGS`` configs) runs past it, and the
    results say by how much (``seconds``, ``budget_s``). ``fast`` shortens the measurement
    protocol and the learners for a quick check (the CI test)."""
    _check_request(folder, minutes, configs, zoo, candidates, shortlist, kernels)
    started = time.monotonic()
    reserve = max(RESERVE_SHARE * minutes * 60, RESERVE_S + RESERVE_PER_MODEL_S * (zoo + shortlist + 2))
    profiling_ends = started + max(minutes * 60 - reserve, 0.0)
    demo = _Demo(Path(folder), profiling_ends, fast, progress or (lambda step, figures: None))
    demo.results["budget_s"] = minutes * 60
    campaigns = ["demo"]
    demo.profile(configs)
    if kernels and demo.kernels(kernels):
        campaigns.append("demo-kernels")
    demo.train(campaigns)
    demo.networks(zoo)
    result, pool = demo.screen(candidates, shortlist)
    if not result.shortlist.empty:
        demo.validate(result, pool)
    demo.report()
    demo.results["seconds"] = time.monotonic() - started
    return demo.results


class _Demo:
    """The demo's folder, store, backend and protocol, and what each step found (``results``)."""

    def __init__(self, folder: Path, profiling_ends: float, fast: bool, tell: Progress) -> None:
        from infercast.measurement import Protocol, backends

        self.folder, self.profiling_ends, self.fast, self.tell = folder, profiling_ends, fast, tell
        folder.mkdir(parents=True, exist_ok=True)
        self.space_file = folder / "space.yaml"
        self.space_file.write_text(DEMO_SPACE)
        self.kernel_file = folder / "kernels.yaml"
        self.kernel_file.write_text(DEMO_KERNELS)
        self.db = folder / "runs.db"
        self.predictor = folder / "predictor"
        self.backend = backends.get("ort-cpu", threads=1, opt_level="all")
        self.protocol = (
            Protocol(warmup_s=0.1, round_s=0.05, min_rounds=3, cap_s=0.6, group=4)
            if fast
            else Protocol(warmup_s=0.2, round_s=0.1, min_rounds=4, cap_s=2.0, group=4)
        )
        self.results: dict[str, Any] = {"folder": str(folder), "db": str(self.db)}

    def _campaign(
        self, space: Path, n: int, stratified: bool, name: str, share: float, at_least: int
    ) -> dict[str, Any]:
        """Measure a sample of ``space`` into the campaign ``name`` within ``share`` of the
        profiling time left (past it for the first ``at_least``), reporting progress as
        ``<step>-progress``."""
        from infercast.measurement import CampaignSpec, platform_of, run_campaign
        from infercast.store import Store

        started = time.perf_counter()
        rows, _ = CampaignSpec(str(space), n=n, stratified=stratified).rows()
        with Store(self.db) as store:
            store.add_platform(platform_of(self.backend))
            before = len(store.done(platform_of(self.backend).id, name))
        step = "profile" if name == "demo" else "kernels"

        def measured(event: str, state: dict[str, Any]) -> None:
            if event in ("done", "failed"):
                self.tell(f"{step}-progress", {"measured": before + state["done"], "target": len(rows)})

        summary = run_campaign(
            rows,
            self.db,
            self.backend,
            name,
            self.protocol,
            op_runs=3,
            progress=measured,
            deadline=time.monotonic() + max(self.profiling_ends - time.monotonic(), 0.0) * share,
            at_least=at_least,
        )
        self.results[step] = {
            "measured_now": summary["done"],
            "failed": summary["failed"],
            "in_store": before + summary["done"],
            "left_for_a_rerun": summary["left"],
            "seconds": time.perf_counter() - started,
        }
        self.tell(step, self.results[step])
        return self.results[step]

    def profile(self, configs: int) -> None:
        """1. A stratified sample of the design space, until the count or the time budget is reached
        (training needs ``MIN_CONFIGS``: a slow host runs past its budget for them)."""
        self._campaign(self.space_file, configs, True, "demo", DESIGN_SHARE, MIN_CONFIGS)

    def kernels(self, kernels: int) -> bool:
        """1b. The kernel campaign, within its share of the minutes; whether it stored any."""
        figures = self._campaign(
            self.kernel_file, kernels, False, "demo-kernels", 1.0, min(kernels, MIN_KERNELS)
        )
        return bool(figures["in_store"])

    def train(self, campaigns: list[str]) -> None:
        """2–3. Train the predictors and score the held-out configs."""
        from infercast.api import train
        from infercast.predictors import CascadeBlend

        started = time.perf_counter()
        blend = CascadeBlend(
            n_estimators=150 if self.fast else 400, forest_estimators=60 if self.fast else 200, n_folds=4
        )
        trained = train(self.db, self.predictor, campaigns=campaigns, blend=blend)
        self.results["train"] = {
            **{k: trained[k] for k in ("n_train", "n_test", "unavailable")},
            "kernel_campaign": trained.get("kernel_campaign"),
            "routes": trained.get("routes"),
            "seconds": time.perf_counter() - started,
        }
        self.tell("train", self.results["train"])
        self.results["evaluate"] = {
            "test_metrics": trained["test_metrics"],
            "opwise": trained.get("opwise_test_metrics", {}),
        }
        self.tell("evaluate", self.results["evaluate"])

    def networks(self, zoo: int) -> None:
        """4. Predict, then measure, real networks never seen in training."""
        from infercast.api import predict_models
        from infercast.measurement import measure_model_strings

        started = time.perf_counter()
        chosen = list(ZOO[:zoo])
        predicted = predict_models(self.predictor, chosen, "x".join(map(str, ZOO_SHAPE)))
        measured = measure_model_strings(
            chosen, self.backend, self.protocol, db=self.db, campaign="demo-zoo", input_shape=ZOO_SHAPE
        )
        networks = [_network(p, m) for p, m in zip(predicted, measured, strict=True)]
        self.results["networks"] = networks
        self.results["network_errors"] = _network_errors(networks)
        figures = {"networks": networks, "errors": self.results["network_errors"]}
        self.tell("networks", {**figures, "seconds": time.perf_counter() - started})

    def screen(self, candidates: int, shortlist: int) -> tuple[Any, Any]:
        """5. Screen candidates against a budget set from what was measured."""
        from infercast import screen
        from infercast.predictors import CascadeBlend
        from infercast.store import Store
        from infercast.units import bytes_to_mb

        started = time.perf_counter()
        with Store(self.db) as store:
            frame = store.measurements()
        demo_rows = frame[frame["campaign"] == "demo"]
        budget = screen.Budgets(
            max_latency_ms=float(demo_rows["low_ms"].quantile(0.25)),
            max_memory_mb=float(bytes_to_mb(demo_rows["peak_memory_bytes"]).quantile(0.5)),
        )
        self.model = CascadeBlend.load(self.predictor)
        pool = screen.from_space(str(self.space_file), candidates, seed=1)
        result = screen.screen(self.model, pool, budget, ["latency", "memory", "params"], shortlist)
        self.results["screen"] = {
            "candidates": candidates,
            "budgets": budget.active(),
            "stage1": result.stage1,
            "stage2": result.stage2,
            "shortlist": [r["model"] for r in result.to_dict()["shortlist"]],
            "message": result.message,
            "seconds": time.perf_counter() - started,
        }
        self.tell("screen", self.results["screen"])
        return result, pool

    def validate(self, result: Any, pool: Any) -> None:
        """6. Measure the shortlist on this CPU."""
        from infercast import screen

        started = time.perf_counter()
        validation = screen.validate(result, self.model, pool, self.db, self.protocol, probe_rejected=2)
        self.results["validate"] = {**validation, "seconds": time.perf_counter() - started}
        self.tell("validate", self.results["validate"])

    def report(self) -> None:
        """7. The report."""
        from infercast.report import build_report

        started = time.perf_counter()
        html = build_report(self.db, self.folder / "report.html", self.predictor)
        self.results["report"] = {"path": str(html), "seconds": time.perf_counter() - started}
        self.tell("report", self.results["report"])


def _network(predicted: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any]:
    """One real network's prediction beside its measurement."""
    from infercast.units import bytes_to_mb

    return {
        "model": predicted["model"],
        "route": predicted.get("route"),
        "predicted_ms": predicted["latency_ms"],
        "interval": predicted["latency_ms_interval"],
        "routes_ms": {r["route"]: r["latency_ms"] for r in predicted["routes"]},
        # what the predictor learned: low_ms at the host's usual speed
        "measured_ms": measured.get("steady_ms", measured.get("low_ms")),
        "predicted_memory_mb": predicted["peak_memory_mb"],
        "measured_memory_mb": bytes_to_mb(measured.get("peak_memory_bytes")) or None,
        "ood": predicted["ood"],
        "ood_reason": predicted["ood_reason"],
        "failure": measured.get("reason"),
    }


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
