"""Build the device tables shipped in ``infercast/predictors/devices/data`` from the public data.

    python tools/device_tables.py --usc ../shared/data/usc-mobile \\
        --nb201 ../shared/data/nb201-latency/nb201_latency.csv
    python tools/device_tables.py --host-db runs.db --host-name epyc-2core/ort-cpu \\
        --host-campaign resnets224 --host-campaign mobile224 --host-kernels kernels-v4 \\
        --host-kernels kernels-grouped
    python tools/device_tables.py --add --host-db more.db --host-name epyc-2core/ort-cpu \\
        --host-kernels kernels-nchw

usc-mobile: captures each of the 102 pytorchcv networks here (``pretrained=False``, 224×224; about
30 s), computes its device features and keeps its family and the mean latency of each of the 90
settings (µs there, ms here), and its GPU op rows (``tflite_gpu.op_rows``), on which the six GPU
settings' op-wise routes are trained and shipped zipped (``tflite_gpu.ship``). NB201: a random
1,000 cells (seed 0) with their 27 latencies, and their ``nb201`` space features at the three
batch sizes the devices ran (1, 32, 256). A host this project measured (``hosts``): from a store,
the named design-space campaigns' configs (predictor features, device features of their captured
graphs, latency, op rows) and the named kernel campaigns' op rows — never a zoo network's
measurement — and its blend and op-wise routes trained on them. ``--add`` adds kernel campaigns
measured later on a machine of that host's kind to its shipped tables instead (every machine of
its kind is a data point), and trains its routes again. No raw file is copied; the tables
are derived and carry the sources' attribution (``data/ATTRIBUTION.md``). A workflow over
``models``, ``space`` and ``predictors``, outside the package: the predictors only read the tables.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.predictors.devices import hosts, nb201, tflite_gpu, usc
from infercast.predictors.devices.common import data_file
from infercast.predictors.devices.features import DEVICE_FEATURES, device_feature_frame, device_features

NB201_CELLS = 1000


def usc_row(model: str) -> dict[str, float | str]:
    """The shipped row of one usc-mobile network: family, size and device features."""
    from infercast.models.guarded import capture_model

    graph, _ = capture_model(f"pytorchcv:{model}", (1, 3, usc.INPUT_SIDE, usc.INPUT_SIDE))
    return {
        "model": model,
        "family": usc.family(model),
        "gflops": graph.flops / 1e9,
        "mparams": graph.params / 1e6,
        **device_features(graph),
    }


def usc_table(folder: Path) -> pd.DataFrame:
    from rich.progress import track

    raw = pd.read_csv(folder / "tflite_cnn_e2e.csv").set_index("model")
    rows = [usc_row(str(m)) for m in track(list(raw.index), description="capturing usc-mobile networks")]
    table = pd.DataFrame(rows).set_index("model")
    means = [c for c in raw.columns if c.endswith("|mean")]
    latency = raw[means] / 1e3
    latency.columns = [usc.LATENCY_PREFIX + usc.device_name(c.removesuffix("|mean")) for c in means]
    return table.join(latency.astype(np.float32))


def nb201_table(csv: Path, seed: int = 0) -> pd.DataFrame:
    raw = pd.read_csv(csv)
    pick = np.sort(np.random.default_rng(seed).choice(len(raw), NB201_CELLS, replace=False))
    devices = [c for c in raw.columns if c not in ("arch_index", "arch")]
    return (
        raw.iloc[pick][["arch", *devices]].reset_index(drop=True).astype(dict.fromkeys(devices, np.float32))
    )


def nb201_features(cells: list[str], batch: int) -> pd.DataFrame:
    """The ``nb201`` space's feature vectors of ``cells`` at ``batch`` (``FEATURE_NAMES``)."""
    from infercast import space
    from infercast.features import FEATURE_NAMES

    configs = pd.DataFrame({"cell": np.asarray(cells, dtype=object), "batch": batch})
    return space.get("nb201").features(configs)[list(FEATURE_NAMES)]


def nb201_feature_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Features of the shipped cells at every batch size a device ran (``arch`` beside them)."""
    batches = sorted({nb201.batch_of(name.removeprefix(nb201.PREFIX)) for name in nb201.names(cells)})
    frames = [
        nb201_features(cells["arch"].tolist(), b).assign(arch=cells["arch"].to_numpy()) for b in batches
    ]
    return pd.concat(frames, ignore_index=True)


def _kernel_networks(
    store: Any, platform_id: str, kernel_campaigns: list[str], latency_stat: str
) -> tuple[set[str], pd.DataFrame]:
    """The config ids of a platform's networks in ``kernel_campaigns`` and one row each: ``model``
    (string), ``latency_ms`` and the device features of its captured graph."""
    from rich.progress import track

    from infercast.datasets import kernel_campaign_configs, kernel_network_latencies
    from infercast.models.guarded import capture_model
    from infercast.predictors.errors import PredictorError

    if not kernel_campaigns:
        return set(), pd.DataFrame(columns=["model", "latency_ms", *DEVICE_FEATURES])
    ids = kernel_campaign_configs(store, platform_id, kernel_campaigns)
    if not ids:
        raise PredictorError(f"{store.path}: no kernel networks in campaigns {kernel_campaigns}")
    latencies = kernel_network_latencies(store, platform_id, latency_stat, kernel_campaigns)
    graphs = [
        capture_model(m, None)[0]
        for m in track(latencies["model"].tolist(), description="capturing the kernel networks")
    ]
    return ids, pd.concat([latencies.reset_index(drop=True), device_feature_frame(graphs)], axis=1)


def host_tables(
    db: Path, campaigns: list[str], kernel_campaigns: list[str], latency_stat: str = "steady_ms"
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """One measured host's shipped rows: its design-space configs (``model`` = config id, its
    ``space``, predictor features, device features, ``latency_ms``), their op rows and the kernel
    networks' (``kernel_campaign``), the kernel networks themselves (``model`` string,
    ``latency_ms``, device features), and what describes the host. Refuses any config that is
    not a design-space one."""
    from rich.progress import track

    from infercast.datasets import store_tables, training_data
    from infercast.models.guarded import capture_model
    from infercast.predictors.errors import PredictorError
    from infercast.store import Store

    with Store(db, readonly=True) as store:
        data = training_data(store, None, latency_stat, campaigns)
        ops, _ = store_tables(store, data.platform["id"], latency_stat)
        kernel_networks, kernel_rows = _kernel_networks(
            store, data.platform["id"], kernel_campaigns, latency_stat
        )
    foreign = [str(m) for m in data.models if not str(m).startswith("space:")]
    if foreign:
        raise PredictorError(
            f"campaigns {campaigns} hold networks outside the design spaces ({foreign[0]}, …): a host's "
            "shipped predictor learns from design-space profiles and kernel campaigns only"
        )
    graphs = [
        capture_model(str(m), None)[0]
        for m in track(list(data.models), description="capturing the configs' graphs")
    ]
    configs = data.x.assign(
        model=data.config_ids,
        space=[str(m).split("?")[0] for m in data.models],
        latency_ms=data.y["latency_ms"].to_numpy(),
    )
    configs[list(DEVICE_FEATURES)] = device_feature_frame(graphs).to_numpy()
    design = set(data.config_ids)
    ops = ops[ops["model"].isin(design | kernel_networks)]
    ops = ops.assign(kernel_campaign=ops["model"].isin(kernel_networks)).reset_index(drop=True)
    platform = data.platform
    fingerprint = platform["fingerprint"]
    cores = f"{fingerprint['cores']} cores" if fingerprint.get("cores") else None
    host = {
        "device": ", ".join(filter(None, (fingerprint.get("cpu"), cores, fingerprint.get("machine")))),
        "backend": platform["backend"],
        "settings": platform["settings"],
        "onnxruntime": fingerprint.get("libraries", {}).get("onnxruntime", "unknown"),
        # which convolutions ran in the blocked layout there: a user's graph is laid out alike
        "nchwc_block": int(fingerprint.get("nchwc_block") or 0),
        "source": f"infercast's own profiles on that host ({latency_stat}): {len(configs)} design-space "
        f"configs ({', '.join(sorted(set(configs['space'])))}), "
        f"{len(kernel_networks)} kernel networks",
        "campaigns": campaigns,
        "kernel_campaigns": kernel_campaigns,
        "n_configs": len(configs),
        "n_kernel_networks": len(kernel_networks),
        "latency_stat": latency_stat,
        # the machine, for predictions elsewhere to say they are elsewhere (its runtime alone of
        # its libraries: the others do not run its kernels)
        "fingerprint": {
            "processor": fingerprint.get("processor") or {},
            "libraries": {"onnxruntime": fingerprint.get("libraries", {}).get("onnxruntime", "unknown")},
        },
    }
    return configs, ops, kernel_rows, host


def added_kernels(
    db: Path, name: str, kernel_campaigns: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Kernel campaigns measured on a machine of shipped host ``name``'s kind, as rows to add to
    its tables (in the latency statistic they hold): the campaigns' op rows (``kernel_campaign``
    true), their kernel networks (but those the host holds), and the host's description counting
    them. Refuses another kind of machine (``_unlike``), a campaign the host already holds, and
    campaigns measured on more than one platform of the store."""
    from infercast.datasets import store_tables
    from infercast.predictors.errors import PredictorError
    from infercast.store import Store

    host = hosts.hosts()[name]
    held = sorted(set(kernel_campaigns) & set(host.get("kernel_campaigns", [])))
    if held:
        raise PredictorError(f"{name} already holds {held}: rebuild it from its store to replace them")
    latency_stat = host.get("latency_stat", "steady_ms")
    with Store(db, readonly=True) as store:
        measured = store.measurements()
        platform_ids = measured.loc[measured["campaign"].isin(kernel_campaigns), "platform_id"].unique()
        if len(platform_ids) != 1:
            where = f"on {len(platform_ids)} platforms, not one" if len(platform_ids) else "nowhere in it"
            raise PredictorError(f"{db}: campaigns {kernel_campaigns} were measured {where}")
        unlike = _unlike(name, host, store.platforms().set_index("id").loc[platform_ids[0]])
        if unlike:
            raise PredictorError(
                f"{db} was not measured on a machine of {name}'s kind (here: {name}'s, there: the "
                f"store's): {'; '.join(unlike)}"
            )
        ids, kernel_rows = _kernel_networks(store, platform_ids[0], kernel_campaigns, latency_stat)
        ops, _ = store_tables(store, platform_ids[0], latency_stat)
    # a network the host already holds is not counted twice
    kernel_rows = kernel_rows[~kernel_rows["model"].isin(hosts.kernel_networks(name)["model"])]
    shipped = pd.read_parquet(data_file(hosts.OPS_FILE), columns=["model", "device"])
    ids -= set(shipped.loc[shipped["device"] == name, "model"])
    ops = ops[ops["model"].isin(ids)].assign(kernel_campaign=True).reset_index(drop=True)
    n_kernel_networks = int(host.get("n_kernel_networks", 0)) + len(kernel_rows)
    described = {
        **host,
        "kernel_campaigns": [*host.get("kernel_campaigns", []), *kernel_campaigns],
        "n_kernel_networks": n_kernel_networks,
        "source": host["source"].rsplit(", ", 1)[0] + f", {n_kernel_networks} kernel networks",
    }
    return ops, kernel_rows.reset_index(drop=True), described


def _unlike(name: str, host: dict[str, Any], platform: pd.Series) -> list[str]:
    """What differs, in words, between a store's platform ("there") and the machine, runtime and
    settings shipped host ``name`` was measured with ("here"): empty when the platform is of its kind."""
    from infercast.machine import differences

    recorded = host.get("fingerprint") or {}
    fingerprint = platform["fingerprint"]
    found = differences(fingerprint.get("processor") or {}, recorded.get("processor") or {})
    checks = (
        (
            "ONNX Runtime",
            fingerprint.get("libraries", {}).get("onnxruntime"),
            recorded.get("libraries", {}).get("onnxruntime"),
        ),
        ("backend", platform["backend"], host["backend"]),
        ("settings", platform["settings"], host["settings"]),
        ("channel block", int(fingerprint.get("nchwc_block") or 0), int(host.get("nchwc_block", 0))),
    )
    found += [f"{what} {theirs} there, {ours} here" for what, theirs, ours in checks if theirs != ours]
    return found


def add_to_host(name: str, ops: pd.DataFrame, kernel_networks: pd.DataFrame, host: dict[str, Any]) -> None:
    """Add ``added_kernels``' rows to shipped host ``name``'s tables and its new description."""
    for file, rows in ((hosts.OPS_FILE, ops), (hosts.KERNEL_NETWORKS_FILE, kernel_networks)):
        path = data_file(file)
        table = pd.concat([pd.read_parquet(path), rows.assign(device=name)], ignore_index=True)
        table.to_parquet(path, index=False)
    meta = data_file(hosts.META_FILE)
    devices = json.loads(meta.read_text())["devices"]
    meta.write_text(json.dumps({"devices": {**devices, name: host}}, indent=1) + "\n")
    hosts.forget_tables()


def write_host(
    name: str, configs: pd.DataFrame, ops: pd.DataFrame, kernel_networks: pd.DataFrame, host: dict[str, Any]
) -> None:
    """Put one host's rows into the shipped tables, replacing its earlier rows."""
    tables = []
    shipped = (
        (hosts.CONFIGS_FILE, configs),
        (hosts.OPS_FILE, ops),
        (hosts.KERNEL_NETWORKS_FILE, kernel_networks),
    )
    for file, rows in shipped:
        path = data_file(file)
        kept = pd.read_parquet(path) if path.is_file() else rows.head(0).assign(device="")
        tables.append((path, pd.concat([kept[kept["device"] != name], rows.assign(device=name)])))
    meta = data_file(hosts.META_FILE)
    devices = json.loads(meta.read_text())["devices"] if meta.is_file() else {}
    # the route benchmarks/host_card.py chose stays until it chooses again on the new tables
    chosen = {"route": devices[name]["route"]} if "route" in devices.get(name, {}) else {}
    for path, table in tables:
        table.reset_index(drop=True).to_parquet(path, index=False)
    meta.write_text(json.dumps({"devices": {**devices, name: {**host, **chosen}}}, indent=1) + "\n")
    hosts.forget_tables()


def ship_gpu_routes() -> list[Path]:
    """The op-wise route of every usc-mobile GPU setting, trained on the shipped tables and zipped
    beside them (``tflite_gpu.ship``)."""
    usc.table.cache_clear()
    tflite_gpu.table.cache_clear()
    networks = usc.table()
    return [
        tflite_gpu.ship(name, networks[usc.LATENCY_PREFIX + name], networks["family"])
        for name in usc.names()
        if name.endswith("/gpu")
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--usc", type=Path, help="the usc-mobile folder")
    parser.add_argument("--nb201", type=Path, help="nb201_latency.csv")
    parser.add_argument("--host-db", type=Path, help="a store with a host's design-space profiles")
    parser.add_argument("--host-name", default="epyc-2core/ort-cpu", help="the device name it ships as")
    parser.add_argument("--host-campaign", action="append", default=[], help="a design-space campaign")
    parser.add_argument("--host-kernels", action="append", default=[], help="a kernel campaign")
    parser.add_argument(
        "--host-latency-stat",
        default="steady_ms",
        help="what the host's rows hold (steady_ms: low_ms at the host's usual speed, as train learns)",
    )
    parser.add_argument(
        "--add",
        action="store_true",
        help="add --host-kernels measured on a machine of --host-name's kind to its shipped tables",
    )
    args = parser.parse_args()
    if args.add:
        if not (args.host_db and args.host_kernels) or args.host_campaign:
            parser.error("--add takes --host-db, --host-name and --host-kernels (no --host-campaign)")
        add_to_host(args.host_name, *added_kernels(args.host_db, args.host_name, args.host_kernels))
        hosts.ship(args.host_name)
    elif args.host_db:
        if not args.host_campaign:
            parser.error("--host-db needs at least one --host-campaign (design-space profiles)")
        write_host(
            args.host_name,
            *host_tables(args.host_db, args.host_campaign, args.host_kernels, args.host_latency_stat),
        )
        hosts.ship(args.host_name)
    if args.usc:
        usc_table(args.usc).to_parquet(data_file(usc.TABLE))
        tflite_gpu.op_rows(args.usc).to_parquet(data_file(tflite_gpu.TABLE), index=False)
        ship_gpu_routes()
    if args.nb201:
        cells = nb201_table(args.nb201)
        cells.to_parquet(data_file(nb201.TABLE), index=False)
        nb201_feature_table(cells).to_parquet(data_file(nb201.FEATURES), index=False)


if __name__ == "__main__":
    main()
