"""Why a calibration from one-kernel networks misses on a machine (issue 46): one-kernel
networks, design-space configs and real networks measured interleaved in one campaign, so that a
VM's drift moves all three alike, against each shipped host's tables and predictions.

    .venv/bin/python benchmarks/kernel_gap.py --plan > mix.txt
    infercast measure $(cat mix.txt) --db DB --campaign mix --round-s 0.15 --min-rounds 5 --cap-s 4
    PYTHONPATH=. .venv/bin/python benchmarks/kernel_gap.py --db DB --campaign mix --truth real-a real-b

Per host: here / there of the kernel networks and of the design-space configs (the hosts'
training configs, ``resnets224`` and ``mobile224`` of benchmarks/history/kernel_campaign.md),
and real networks here / the host's prediction; the kernel networks' ratio by op; the per-kind
factors the campaign's kernel networks give (as ``infercast calibrate`` fits them) beside those
that fit the real networks best — fitted on their truth, an oracle: what scaling the host per
kind could reach if a calibration measured the right thing, in sample and leave-one-out; and how
far each host's per-op profiles overshoot its networks' measured latency. The truth of a real
network is its fastest run over the campaign and ``--truth``. Records its result in RESULTS.md.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from benchmarks.results import machine, record, stamp
from scipy.optimize import nnls

SPACES = {
    "resnets224": "family: carb-resnet\nparams:\n  depth: {min: 8, max: 50}\n  width: {min: 0.25, max: 1.0}\n"
    "  input_size: [128, 160, 192, 224]\n  batch: [1]\n  precision: [fp32]\n",
    "mobile224": "family: mobile-nas\nparams:\n  width: {min: 0.35, max: 1.25}\n"
    "  resolution: [160, 192, 224]\n  batch: [1]\n",
}
REAL = Path(__file__).with_name("real_networks.txt")


def design_configs() -> pd.DataFrame:
    """The hosts' training configs (``model``, ``id``): 60 drawn of each space, seed 0, stratified
    (119 distinct: carb-resnet drew one twice)."""
    from infercast import space

    frames = []
    with tempfile.TemporaryDirectory() as folder:
        for name, text in SPACES.items():
            path = Path(folder) / f"{name}.yaml"
            path.write_text(f"name: {name}\n{text}")
            frames.append(space.get(str(path)).sample(60, seed=0, stratified=True)[["model", "id"]])
    return pd.concat(frames, ignore_index=True)


def plan(source: str, n_configs: int = 36, n_kernels: int = 80) -> list[str]:
    """Real networks, configs and kernel networks of ``source``, interleaved four by four (the
    measuring group): each group a real network, a config and two kernel networks."""
    from infercast.predictors.devices import hosts

    real = [line.strip() for line in REAL.read_text().splitlines() if line.strip() and line[0] != "#"]
    configs = design_configs()
    there = hosts.training_tables(source)[1].set_index("model")["latency_ms"]
    configs = configs.assign(there=configs["id"].map(there)).dropna().sort_values("there")
    configs = configs.iloc[np.linspace(0, len(configs) - 1, n_configs).round().astype(int)]
    kernels = hosts.kernel_networks(source).sort_values("latency_ms")
    kernels = kernels.iloc[np.linspace(0, len(kernels) - 1, n_kernels).round().astype(int)]
    rng = np.random.default_rng(0)
    real, configs, kernels = (
        list(rng.permutation(names)) for names in (real, configs["model"].tolist(), kernels["model"].tolist())
    )
    out: list[str] = []
    for i in range(max(len(real), len(configs), (len(kernels) + 1) // 2)):
        group = ((real, i), (configs, i), (kernels, 2 * i), (kernels, 2 * i + 1))
        out += [names[j] for names, j in group if j < len(names)]
    return out


def measured(db: str, campaigns: list[str]) -> tuple[pd.DataFrame, str]:
    """``model``, ``low_ms`` and ``campaign`` of those campaigns' measurements, and the processor
    of the first campaign's platform."""
    from infercast.store import Store

    with Store(db, readonly=True) as store:
        frame, platforms = store.measurements(), store.platforms().set_index("id")
    frame = frame[frame["campaign"].isin(campaigns)]
    mine = frame[frame["campaign"] == campaigns[0]]
    processor = platforms.loc[mine["platform_id"].iloc[0], "fingerprint"].get("processor", {})
    described = ", ".join(
        f"{key} {processor.get(key)}" for key in ("model_name", "family", "model", "stepping", "l3_kib")
    )
    return frame[["model", "low_ms", "campaign"]], described


def spread(ratio: pd.Series) -> str:
    return f"{ratio.median():.3f} ({ratio.quantile(0.25):.3f}–{ratio.quantile(0.75):.3f}, n {len(ratio)})"


def errors(predicted: np.ndarray, truth: np.ndarray) -> str:
    error = np.abs(predicted / truth - 1)
    return f"{np.median(error):.1%} median, {np.mean(error <= 0.1):.0%} within ±10 %"


def oracle_lines(source: str, rows: pd.DataFrame, real: pd.Series, graphs: list, block: int) -> list[str]:
    from infercast.predictors.devices import local, local_networks

    kernels = rows[rows["model"].str.startswith("space:kernels")].rename(columns={"low_ms": "here_ms"})
    calibration = local.fit(kernels[["model", "here_ms"]], source, 1, 0.0, block)
    frame = local_networks.kind_parts(calibration, graphs)
    kinds = [kind or "no kind measured" for kind in frame.columns]
    parts, truth = frame.to_numpy(), real.to_numpy()
    scaled = parts / truth[:, None]
    fitted, _ = nnls(scaled, np.ones(len(truth)))
    loo = np.empty(len(truth))
    for i in range(len(truth)):
        keep = np.arange(len(truth)) != i
        loo[i] = parts[i] @ nnls(scaled[keep], np.ones(keep.sum()))[0]
    from_kernels = parts @ np.array([calibration.kind_factor(kind or None) for kind in frame.columns])
    shares = np.median(parts / parts.sum(axis=1, keepdims=True), axis=0)
    return [
        f"- from its kernel networks measured here ({len(kernels)}; as `calibrate` fits them): "
        + ", ".join(f"{k} ×{calibration.kind_factor(k):.2f}" for k in calibration.kinds)
        + f" → the real networks {errors(from_kernels, truth)}",
        "- the factors that fit the real networks best (on their truth): "
        + ", ".join(f"{k} ×{f:.2f}" for k, f in zip(kinds, fitted, strict=True))
        + f" → {errors(parts @ fitted, truth)}; leave-one-out {errors(loo, truth)}",
        "- median share of a real network's predicted time: "
        + ", ".join(f"{k} {s:.0%}" for k, s in zip(kinds, shares, strict=True) if s >= 0.005),
    ]


def ratio_lines(host: str, rows: pd.DataFrame, real: pd.Series, graphs: list, ids: pd.Series) -> list[str]:
    """``ids``: each design-space config's id in the hosts' tables, by its model string."""
    from infercast.predictors.devices import hosts

    kernels = rows[rows["model"].str.startswith("space:kernels")].set_index("model")["low_ms"]
    there_k = hosts.kernel_networks(host).set_index("model")["latency_ms"]
    kernel_ratio = (kernels / there_k.reindex(kernels.index)).dropna()
    configs = rows[rows["model"].str.startswith("space:") & ~rows["model"].str.startswith("space:kernels")]
    there_c = hosts.training_tables(host)[1].set_index("model")["latency_ms"]
    configs = configs.set_index(configs["model"].map(ids))["low_ms"]
    config_ratio = (configs / there_c.reindex(configs.index)).dropna()
    predicted = hosts.load(host).predict_graphs(graphs)["latency_ms"].to_numpy()
    real_ratio = pd.Series(real.to_numpy() / predicted)
    by_op = kernel_ratio.groupby(kernel_ratio.index.str.extract(r"op=([a-z_]+)", expand=False).to_numpy())
    return [
        f"- here / there: one-kernel networks {spread(kernel_ratio)}; design-space configs "
        f"{spread(config_ratio)}; real networks here / its prediction {spread(real_ratio)}",
        "- one-kernel networks by op: " + ", ".join(f"{op} {r:.2f}" for op, r in by_op.median().items()),
    ]


def overshoot_lines() -> list[str]:
    """How far each host's per-op profile sums exceed its configs' measured latency."""
    from infercast.predictors.devices import hosts

    lines = []
    for host in hosts.names():
        _, e2e, ops, _ = hosts.training_tables(host)
        total = ops.groupby("model")["latency_ms"].sum()
        over = (total / e2e.set_index("model")["latency_ms"]).dropna()
        lines.append(f"- `{host}`: Σ op latencies / network latency {spread(over)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", action="store_true", help="print the networks to measure and stop")
    parser.add_argument("--source", help="the host whose kernel networks --plan takes (default: nearest)")
    parser.add_argument("--db")
    parser.add_argument("--campaign", help="the interleaved campaign")
    parser.add_argument("--truth", nargs="*", default=[], help="more campaigns of the real networks")
    args = parser.parse_args()
    from infercast.measurement import backends
    from infercast.models.guarded import capture_model
    from infercast.predictors.devices import hosts, local

    if args.plan:
        print("\n".join(plan(args.source or local.nearest_host())))
        return
    if not (args.db and args.campaign):
        parser.error("--db and --campaign (or --plan)")
    started = time.perf_counter()
    rows, processor = measured(args.db, [args.campaign, *args.truth])
    mix = rows[rows["campaign"] == args.campaign].drop_duplicates("model", keep="last")
    real = rows[rows["model"].isin(REAL.read_text().split())].groupby("model")["low_ms"].min()
    real = real[real.index.isin(mix["model"])]
    graphs = [capture_model(m)[0] for m in real.index]
    block = int(backends.get("ort-cpu", threads=1, opt_level="all").machine_facts().get("nchwc_block", 0))
    ids = design_configs().drop_duplicates("model").set_index("model")["id"]
    body: list[str] = []
    for host in hosts.names():
        body += ["", f"From `{host}`:", *ratio_lines(host, mix, real, graphs, ids)]
        body += oracle_lines(host, mix, real, graphs, block)
    body += ["", "Per-op profiles against the networks they were taken from (the hosts' tables):"]
    lines = [
        f"## kernel_gap: one-kernel networks, configs and real networks in one campaign ({stamp()})",
        "",
        f"`PYTHONPATH=. .venv/bin/python benchmarks/kernel_gap.py --db DB --campaign {args.campaign}"
        + "".join(f" {t}" for t in ["--truth", *args.truth] if args.truth)
        + f"` ({machine()}; {time.perf_counter() - started:.0f} s). {len(mix)} networks measured "
        f"interleaved on {processor} (ONNX Runtime CPU, 1 thread, `low_ms`), {len(real)} of them real; each "
        "line: median (quartiles, count).",
    ]
    record([*lines, *body, *overshoot_lines()])


if __name__ == "__main__":
    main()
