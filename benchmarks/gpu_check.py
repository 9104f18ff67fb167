"""The check on a real NVIDIA GPU (issue 47, item 5), run by ``benchmarks/gpu_check.sh``.

1. ~40 timm CNNs of the shipped ``rtx4090/torch-amp`` table (families spread, 224², no
   attention) at batch 256 under fp16 autocast, timed twice: timm's benchmark method (warm-up
   steps, then the mean of synchronised steps, ``cudnn.benchmark`` on, as ``benchmark.py --amp``)
   and infercast's protocol on its ``torch-cuda-amp`` backend (interleaved rounds, CUDA events, the
   fastest round's median), with NVML energy per inference where the board has the counter.
2. The timm-method times as a timm benchmark CSV, ``db import``-ed as this GPU, and
   ``adapt --k K`` from the shipped GPU settings; scored on the other models, beside
   ``rtx4090/torch-amp`` unadapted.

Everything is bounded by ``--budget-s``: models the timing stages have no time for are left out
and named. Writes ``gpu_check.json`` and ``gpu_check.md`` (the lines for RESULTS.md) into ``--out``.

    python3 benchmarks/gpu_check.py --out OUT [--models 40 --batch 256 --k 10 --budget-s 480]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

SOURCE = "rtx4090/torch-amp"
TIMM_WARMUP, TIMM_STEPS = 10, 40


def pick_models(n: int, side: int = 224) -> list[str]:
    """``n`` CNNs of the source table at ``side``, one family after another (families in name
    order, each family's models in name order), so that few families do not fill the list."""
    from infercast.predictors.devices import timm_bench

    rows = timm_bench.measured(SOURCE)
    attention = (rows["gflops_attention"] + rows["gflops_softmax"]) > 0
    rows = rows[~attention & (rows["side"] == side)].sort_values(["family", "model"])
    queues = [list(group["model"]) for _, group in rows.groupby("family", sort=True)]
    picked: list[str] = []
    while len(picked) < n and any(queues):
        for queue in queues:
            if queue and len(picked) < n:
                picked.append(queue.pop(0))
    return picked


def timm_step_ms(name: str, batch: int, side: int) -> float:
    """Milliseconds per step as timm's benchmark measures them under ``--amp``."""
    import timm
    import torch

    torch.backends.cudnn.benchmark = True
    model = timm.create_model(name, pretrained=False).cuda().eval()
    x = torch.randn(batch, 3, side, side, device="cuda")
    steps = []
    with torch.inference_mode():
        for i in range(TIMM_WARMUP + TIMM_STEPS):
            start = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.float16):
                model(x)
            torch.cuda.synchronize()
            if i >= TIMM_WARMUP:
                steps.append(time.perf_counter() - start)
    del model, x
    torch.cuda.empty_cache()
    return 1e3 * float(np.mean(steps))


def timm_table(times: dict[str, float], batch: int, side: int) -> pd.DataFrame:
    """Times as a timm benchmark CSV (the columns ``db import`` recognises it by)."""
    return pd.DataFrame(
        {
            "model": list(times),
            "infer_img_size": side,
            "infer_batch_size": batch,
            "infer_step_time": list(times.values()),
            "infer_samples_per_sec": [batch / (t / 1e3) for t in times.values()],
        }
    )


def protocol_results(models: list[str], batch: int, side: int, db: Path, budget_s: float) -> list[dict]:
    """infercast's protocol on ``torch-cuda-amp``, with NVML energy, each model capped so that
    the whole stays inside ``budget_s``."""
    from infercast.api.measuring import measure
    from infercast.measurement import Protocol

    cap = max(1.5, min(4.0, budget_s / max(len(models), 1) - 2.0))
    protocol = Protocol(warmup_s=0.5, round_s=0.2, min_rounds=5, cap_s=cap, timeout_s=120.0)
    results = measure(
        [f"timm:{m}" for m in models],
        backend="torch-cuda-amp",
        input_shape=(batch, 3, side, side),
        db=str(db),
        campaign="gpu-check",
        protocol=protocol,
        energy=True,
    )
    return results if isinstance(results, list) else [results]


def score(truth: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    ratio = predicted / truth
    return {
        "n": len(truth),
        "median_abs_error_pct": 100 * float(np.median(np.abs(ratio - 1))),
        "within_10pct": float(np.mean(np.abs(ratio - 1) <= 0.10)),
    }


def adapt_and_score(table: pd.DataFrame, work: Path, k: int, device: str) -> dict[str, Any]:
    """``db import`` + ``adapt --k`` of the timm-method table; its held-out score, and the shipped
    source setting on the same held-out models, unadapted."""
    import infercast
    from infercast.api.adapting import adapt_device
    from infercast.api.importing import import_measurements

    csv = work / "timm-method.csv"
    table.to_csv(csv, index=False)
    db = work / "imported.db"
    import_measurements(db, csv, device=device, backend="torch-cuda-amp")
    adapted = adapt_device(db, work / "adapted", k=k)
    picked = set(adapted["measured_configs"])
    rest = table[~("timm:" + table["model"]).isin(picked)]
    shape = (int(table["infer_batch_size"].iloc[0]), 3, *(int(table["infer_img_size"].iloc[0]),) * 2)
    models = [f"timm:{m}" for m in rest["model"]]
    truth = rest["infer_step_time"].to_numpy(dtype=np.float64)
    by_source = infercast.predict(models, device=SOURCE, input_shape=shape)
    by_adapted = infercast.predict(models, predictor=str(work / "adapted"), input_shape=shape)
    return {
        "k": k,
        "adapted_from": adapted["sources"],
        "measured_configs": sorted(picked),
        "adapted": score(truth, np.array([r["latency_ms"] for r in by_adapted])),
        "unadapted": score(truth, np.array([r["latency_ms"] for r in by_source])),
    }


def summary(report: dict[str, Any]) -> list[str]:
    methods, adapted = report["methods"], report.get("adaptation")
    lines = [
        f"## GPU check on {report['gpu']} ({report['date']})",
        "",
        f"`bash benchmarks/gpu_check.sh` ({report['torch']}, timm {report['timm']}): "
        f"{report['n_timed']} timm CNNs at batch {report['batch']}, 224², fp16 autocast"
        + (f"; left out for time: {', '.join(report['left_out'])}" if report["left_out"] else "")
        + (f"; failed: {', '.join(report['failed'])}" if report["failed"] else "")
        + ".",
        "",
        f"- infercast's protocol / timm's method, per model: median {methods['median_ratio']:.3f}, "
        f"{methods['within_5pct']:.0%} within ±5 %.",
        f"- NVML energy per inference: {report['energy']}.",
    ]
    if adapted:
        a, u = adapted["adapted"], adapted["unadapted"]
        lines += [
            f"- `adapt --k {adapted['k']}` from {adapted['adapted_from']}, on the other {a['n']} models: "
            f"median |error| {a['median_abs_error_pct']:.1f} %, {a['within_10pct']:.0%} within ±10 % "
            f"(`{SOURCE}` unadapted: {u['median_abs_error_pct']:.1f} %, {u['within_10pct']:.0%}).",
        ]
    return lines


def _energy_line(results: list[dict]) -> str:
    joules = [(r.get("model"), r.get("energy_j")) for r in results if r.get("energy_j") is not None]
    if not joules:
        reasons = {r.get("energy_reason") or r.get("failure") for r in results}
        return f"none ({'; '.join(sorted(str(x) for x in reasons))})"
    per = np.array([j for _, j in joules], dtype=np.float64)
    spread = f"{per.min():.3g}–{per.max():.3g}"
    return f"{len(per)} models, median {np.median(per):.3g} J per inference, one batch (range {spread})"


def run(out: Path, n: int, batch: int, k: int, budget_s: float, device: str) -> dict[str, Any]:
    import timm
    import torch

    start = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    models = pick_models(n)
    times: dict[str, float] = {}
    failed: dict[str, str] = {}
    for name in models:
        if time.monotonic() - start > 0.4 * budget_s:
            break
        try:
            times[name] = timm_step_ms(name, batch, 224)
        except Exception as error:  # a model this timm cannot build or this GPU cannot hold
            failed[name] = f"{type(error).__name__}: {error}"
        print(f"{name}: {failed.get(name) or f'{times[name]:.1f} ms per step'} (timm's method)", flush=True)
    left = 0.85 * budget_s - (time.monotonic() - start)
    results = protocol_results(list(times), batch, 224, out / "measured.db", left)
    ours = {r["model"].removeprefix("timm:"): r.get("low_ms") for r in results}
    ratios = np.array([ours[m] / times[m] for m in times if ours.get(m)], dtype=np.float64)
    report: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "torch": f"PyTorch {torch.__version__}",
        "timm": timm.__version__,
        "batch": batch,
        "n_timed": len(times),
        "failed": failed,
        "left_out": [m for m in models if m not in times and m not in failed],
        "timm_method_ms": times,
        "protocol_low_ms": ours,
        "methods": {
            "median_ratio": float(np.median(ratios)) if len(ratios) else math.nan,
            "within_5pct": float(np.mean(np.abs(ratios - 1) <= 0.05)) if len(ratios) else math.nan,
        },
        "energy": _energy_line(results),
    }
    if len(times) > k + 2:
        report["adaptation"] = adapt_and_score(timm_table(times, batch, 224), out, k, device)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "gpu_check.md").write_text("\n".join(summary(report)) + "\n")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", type=int, default=40)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--budget-s", type=float, default=480.0)
    parser.add_argument("--device", default="this-gpu/torch-amp", help="the name the import gives this GPU")
    args = parser.parse_args()
    report = run(args.out, args.models, args.batch, args.k, args.budget_s, args.device)
    print("\n".join(summary(report)))


if __name__ == "__main__":
    main()
