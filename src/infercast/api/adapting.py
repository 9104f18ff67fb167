"""Adaptation: a predictor for a platform measured a few times, from predictors already trained
(``adapt``: ``predictors.adapted``) or from the nearest shipped device (``adapt_device``:
``predictors.devices.recalibrated``), and which configs to measure first (``suggest``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from infercast.datasets import resolve_platform, training_data
from infercast.files import check_replaceable
from infercast.paths import check_output_dir
from infercast.predictors.adapted import Adapted, load_sources
from infercast.predictors.artifact import PlatformInfo
from infercast.predictors.blend import CascadeBlend
from infercast.predictors.data import feature_frame
from infercast.predictors.errors import PredictorError
from infercast.predictors.sources import SELECTIONS, select_configs
from infercast.store import Store


def _target_platform(store: Store, platform: str | None, sources: list[CascadeBlend]) -> dict[str, Any]:
    """The platform to adapt to: the one named, else the only one no source was trained on."""
    own = {s.info.platform.id for s in sources}
    if platform is None:
        others = store.platforms()
        others = others[~others["id"].isin(own)]
        if len(others) == 1:
            platform = str(others.iloc[0]["id"])
    chosen = resolve_platform(store, platform)
    if chosen["id"] in own:
        raise PredictorError(
            f"platform {chosen['id']} is a source predictor's own platform: adapt builds a predictor for "
            "another one (name it with --platform)"
        )
    return chosen


def adapt(
    sources: list[str | Path],
    db: str | Path,
    out: str | Path,
    k: int = 10,
    platform: str | None = None,
    selection: str = "spread",
    seed: int = 0,
    campaigns: list[str] | None = None,
) -> dict[str, Any]:
    """Few-shot adaptation: choose ``k`` of the target platform's measured configs (``selection``),
    fit an ``Adapted`` predictor on them, score it on the rest next to the unadapted sources, and
    write it to ``out`` (self-contained: the sources are copied in)."""
    _check_selection(selection, k)
    check_replaceable(check_output_dir(out), reads=tuple(Path(s) for s in sources))
    blends, _ = load_sources(sources)
    model = Adapted(blends, seed=seed)
    stat = blends[0].info.latency_stat
    with Store(db, readonly=True) as store:
        chosen = _target_platform(store, platform, blends)
        data = training_data(store, chosen["id"], stat, campaigns)
    if len(data.x) < k:
        raise PredictorError(
            f"{db} holds {len(data.x)} measured configs on platform {chosen['id']}; --k {k} needs that many"
        )
    picked = select_configs(blends, data.x, k, selection, seed)
    model.fit(data.x.iloc[picked], data.y.iloc[picked])
    rest = np.setdiff1d(np.arange(len(data.x)), picked)
    scores = model.evaluate(data.x.iloc[rest], data.y.iloc[rest]) if len(rest) else {}
    metadata = {
        "platform": PlatformInfo.from_row(chosen).to_meta(),
        "training": {
            "db": str(db),
            "latency_stat": stat,
            "campaigns": campaigns,
            "k": k,
            "selection": selection,
            "train_config_ids": sorted(data.config_ids[picked].tolist()),
            "n_test": len(rest),
            "test_metrics": scores,
        },
    }
    model.save(out, metadata)
    return {
        "predictor": str(out),
        "platform": chosen["id"],
        "sources": [str(s) for s in sources],
        "k": k,
        "selection": selection,
        "measured_configs": data.models[picked].tolist(),
        "n_test": len(rest),
        "test_metrics": scores,
        "fit": model.describe(),
        "unavailable": model.unavailable_,
    }


def adapt_device(
    db: str | Path,
    out: str | Path,
    k: int = 10,
    platform: str | None = None,
    selection: str = "spread",
    seed: int = 0,
    campaigns: list[str] | None = None,
    latency_stat: str = "steady_ms",
) -> dict[str, Any]:
    """Few-shot adaptation from the shipped devices: ``k`` of the platform's measured networks
    (``db import`` or a campaign) choose the nearest shipped device — among the hosts of the
    platform's runtime when there are any (``devices.recalibrated.same_runtime``) — and
    recalibrate it (``DeviceAdapted``); scored on the platform's other measurements next to that device
    unadapted; written to ``out`` (``infercast predict --predictor`` takes it)."""

    from infercast.predictors.devices.recalibrated import DeviceAdapted, graph_features

    _check_selection(selection, k)
    check_replaceable(check_output_dir(out))
    with Store(db, readonly=True) as store:
        chosen = resolve_platform(store, platform)
        data = training_data(store, chosen["id"], latency_stat, campaigns)
    if len(data.x) < max(k, 3):
        raise PredictorError(
            f"{db} holds {len(data.x)} measured networks on platform {chosen['id']}; --k {k} needs that many"
        )
    sources, said = _sources_for(chosen)
    x, per_graph = graph_features(next(iter(sources)), _graphs(data))
    # a timm setting predicts one sample: it is adapted on the time per sample
    y = data.y["latency_ms"].to_numpy(dtype=np.float64) / per_graph
    logs = {name: np.log(s.predict(x)["latency_ms"].to_numpy())[:, None] for name, s in sources.items()}
    if selection == "random":
        picked = np.sort(np.random.default_rng(seed).choice(len(x), k, replace=False))
    else:  # k-centre over every shipped device's log prediction: the k cover the range
        matrix = np.hstack(list(logs.values()))
        picked = select_configs([], x, k, "spread", seed, source_log=matrix)
    model = DeviceAdapted(sources).fit(x.iloc[picked], y[picked], {n: v[picked] for n, v in logs.items()})
    rest = np.setdiff1d(np.arange(len(x)), picked)
    scores = model.evaluate(x.iloc[rest], y[rest]) if len(rest) else {}
    metadata = {
        "platform": PlatformInfo.from_row(chosen).to_meta(),
        "training": {
            "db": str(db),
            "latency_stat": latency_stat,
            "k": k,
            "selection": selection,
            "measured": data.models[picked].tolist(),
        },
    }
    model.save(out, metadata)
    return {
        "predictor": str(out),
        "platform": chosen["id"],
        "k": k,
        "selection": selection,
        "measured_configs": data.models[picked].tolist(),
        "sources": said,
        "n_test": len(rest),
        "test_metrics": {"latency": scores} if scores else {},
        "fit": model.describe(),
    }


def _sources_for(platform: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The shipped devices a platform adapts from, and how to say which: a timm benchmark table
    from timm's settings of its kind of processor (a GPU from the GPUs, a CPU from the CPU); a
    runtime a shipped host ran from those hosts; anything else from every phone setting and host."""
    from infercast.api.timm_csv import FORMAT
    from infercast.predictors.devices.recalibrated import same_runtime, shipped_sources, timm_sources

    backend = str(platform["backend"]).lower()
    if platform["fingerprint"].get("format") == FORMAT:
        processor = "gpu" if "cuda" in backend or "gpu" in backend else "cpu" if "cpu" in backend else None
        sources = timm_sources(processor)
        kind = f"{processor.upper()} " if processor else ""
        return sources, f"timm's {kind}settings ({len(sources)})"
    hosts = same_runtime(platform["backend"])
    if hosts:
        return shipped_sources(hosts), f"the shipped hosts measured with {platform['backend']}"
    sources = shipped_sources()
    return sources, f"every shipped device ({len(sources)})"


def _graphs(data: Any) -> list[Any]:
    """Every measured network, captured at the input it was measured at."""
    from infercast.models.capturing import capture_model

    shape_columns = ["batch", "in_channels", "in_h", "in_w"]
    shapes = [tuple(int(d) for d in data.x.loc[i, shape_columns]) for i in data.x.index]
    return [capture_model(str(m), shape)[0] for m, shape in zip(data.models, shapes, strict=True)]


def _check_selection(selection: str, k: int) -> None:
    if selection not in SELECTIONS:
        raise PredictorError(f"--selection {selection!r}: choose among {', '.join(SELECTIONS)}")
    if k < 1:
        raise PredictorError(f"--k {k}: adapt from at least one measured config")


def suggest(
    sources: list[str | Path],
    space_name: str,
    k: int = 10,
    pool: int = 5000,
    seed: int = 0,
    selection: str = "spread",
) -> list[str]:
    """The ``k`` configs of a design space worth measuring on a new device before ``adapt``:
    spread over the sources' predictions among ``pool`` sampled ones (or drawn at random)."""
    _check_selection(selection, k)
    from infercast.space import get as get_space

    blends, _ = load_sources(sources)
    chosen = get_space(space_name)
    configs = chosen.sample(pool, seed=seed)
    x = feature_frame(chosen.features(configs), blends[0].info.platform.settings)
    picked = select_configs(blends, x, k, selection, seed)
    return configs["model"].iloc[picked].tolist()
