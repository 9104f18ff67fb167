"""The screening flow ``infercast screen`` runs, as one function: where the candidates come from
(a space sample, a table of configs, model strings, or a Ray cluster), the two stages and the
shortlist, validation on this machine, a refit on what validation measured, the shortlist file."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from infercast.errors import install_hint
from infercast.paths import check_output_file


def _device_predictor(device: str, space: str | None) -> tuple[Any, dict[str, list[Any]], Any]:
    """A shipped device's screening predictor, the parameters its measurements fix, and the
    features it reads (None: the space's own). NB201 devices learned from NB201 cells' own
    features at one batch size; the phone settings and a host this project measured read device
    features, at batch 1 in fp32."""
    from infercast.predictors.devices import device_info, get_device, nb201
    from infercast.screen.device import DeviceScreener
    from infercast.space import get as get_space

    info = device_info(device)  # an unknown name fails here, with the nearest names
    if space is None:
        raise ValueError(f"--device {device} screens a sample of --space")
    candidates = get_space(space)
    cells = candidates.string_name == "nb201"
    if device in nb201.names():
        if not cells:
            raise ValueError(
                f"--device {device} predicts NAS-Bench-201 cells: screen --space nb201 (or a restriction)"
            )
        return get_device(device).blend, {"batch": [info.batch]}, None
    if cells:
        raise ValueError(
            f"--device {device} learned from ImageNet-sized networks (128–224²); NAS-Bench-201 cells "
            "(32×32 CIFAR networks) lie far outside them: screen them on an nb201/* device "
            "(infercast devices list nb201)"
        )
    names = {p.name for p in candidates.params}
    fixed = {name: [value] for name, value in (("batch", 1), ("precision", "fp32")) if name in names}
    screener = DeviceScreener(device, candidates)
    return screener, fixed, screener.featurize


def screen(
    predictor: str | Path | None,
    budgets: Any,
    objectives: Sequence[str] | str = ("latency", "memory"),
    space: str | None = None,
    n: int = 1_000_000,
    seed: int = 0,
    configs: str | Path | None = None,
    models: Sequence[Any] | None = None,
    predictor_b: str | Path | None = None,
    weights: dict[str, float] | None = None,
    shortlist: int = 10,
    risk: float = 0.05,
    platform: str | None = None,
    validate: bool = False,
    probe_rejected: int = 3,
    refit: bool = False,
    db: str | Path = "runs.db",
    protocol: Any = None,
    out: str | Path | None = None,
    ray_address: str | None = None,
    shards: int | None = None,
    timeout_s: float | None = 180.0,
    progress: Callable[[str, int, int], None] | None = None,
    status: Callable[[str], None] | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """Screen candidates against ``budgets`` with the predictor directory ``predictor``.

    Candidates: ``space`` (``n`` sampled with ``seed``), ``space`` + ``configs`` (a Parquet / CSV of
    its configs) or ``models`` (model strings or objects). ``budgets``: a ``screen.Budgets`` or a
    dict such as ``{"latency": 10, "memory": 40}`` (``max_latency_ms`` … spelled out works too).
    ``predictor_b`` re-scores the survivors (another platform); ``validate`` measures the shortlist
    (and ``probe_rejected`` near rejects) into ``db``, timed by ``protocol`` (a
    ``measure.Protocol``; default: the standard one); ``refit`` then retrains the predictor into
    ``<predictor>-refit``; ``out`` writes the shortlist; ``ray_address`` runs stage 1 on a cluster.
    ``progress(stage, done, total)`` follows the stages, ``status(message)`` the slow steps.
    ``device`` instead of ``predictor``: a shipped device (``infercast devices list``): NB201 ones
    screen the ``nb201`` space at the device's batch size, phone settings ``mobile-nas`` and
    ``carb-resnet`` at batch 1 in fp32 (latency only, ``screen.device``).
    Returns the result as plain data (``ScreenResult.to_dict``)."""
    from infercast import screen as screening

    _check_request(space, configs, models, ray_address, predictor, device, validate)
    if out is not None:
        check_output_file(out, (".parquet", ".csv"))
    chosen_budgets, chosen = _goals(budgets, objectives, weights)
    model_a, model_b, fixed, featurize = _models(predictor, predictor_b, device, space)
    options = {"shortlist": shortlist, "risk": risk, "predictor_b": model_b, "weights": weights}
    options.update(platform=platform, progress=progress)
    if ray_address is not None:
        result, candidates = _screen_on_ray(
            predictor, space, n, chosen_budgets, chosen, ray_address, seed, shards, options
        )
    else:
        if models:
            candidates = screening.from_models(list(models), timeout_s)
        elif configs is not None:
            candidates = screening.from_configs(configs, space or "")
        else:
            candidates = screening.from_space(space or "", n, seed, fixed, featurize)
        result = screening.screen(model_a, candidates, chosen_budgets, chosen, **options)
    if validate and not result.shortlist.empty:
        refit_to = Path(f"{predictor_b or predictor}-refit") if refit else None
        _validate(result, model_b or model_a, candidates, db, protocol, probe_rejected, refit_to, status)
    if out is not None and not result.shortlist.empty:
        _write_shortlist(result.shortlist, out)
    data = result.to_dict()
    if device is not None:
        data["device"] = _device_summary(device, model_a)
    return data


def _goals(
    budgets: Any, objectives: Sequence[str] | str, weights: dict[str, float] | None
) -> tuple[Any, list[str]]:
    """The budgets and objectives asked for, refused when there are none or a weight is not a
    finite number, 0 or more."""
    from infercast.screen import Budgets
    from infercast.screen.request import OBJECTIVES, weight_vector

    chosen_budgets = Budgets.of(budgets)
    if not chosen_budgets.active():
        raise ValueError("give at least one budget: --max-latency-ms, --max-memory-mb or --max-energy-j")
    listed = objectives.split(",") if isinstance(objectives, str) else list(objectives)
    chosen = [o.strip() for o in listed if o.strip()]
    if not chosen:
        raise ValueError(
            f"--objectives {objectives!r} names no objective: choose among {', '.join(OBJECTIVES)}"
        )
    weight_vector(weights, chosen)  # refused here, before a million candidates are drawn
    return chosen_budgets, chosen


def _check_request(
    space: str | None,
    configs: Any,
    models: Any,
    ray_address: str | None,
    predictor: Any,
    device: str | None,
    validate: bool,
) -> None:
    """Options that cannot go together, each refused with what to give instead."""
    sources = (configs is not None) + bool(models) + (space is not None and configs is None)
    if sources != 1:
        raise ValueError("give exactly one of --space, --space with --configs, or --model")
    if configs is not None and space is None:
        raise ValueError("--configs needs --space: the design space its columns belong to")
    if ray_address is not None and (models or configs is not None):
        raise ValueError("--ray screens a sample of --space (not --configs or --model)")
    if (predictor is None) == (device is None):
        raise ValueError("give --predictor DIR or --device NAME (a shipped device)")
    if device is not None and (validate or ray_address is not None or models or configs is not None):
        raise ValueError(
            f"--device {device}: screens a sample of --space here; --validate would measure on "
            "this machine, not on the device"
        )


def _models(
    predictor: Any, predictor_b: Any, device: str | None, space: str | None
) -> tuple[Any, Any, dict[str, list[Any]], Any]:
    """The screening predictor (a directory's blend, or a shipped device's), the re-scoring one,
    the parameters the device's measurements fix, and the features it reads (None: the space's)."""
    from infercast.predictors import CascadeBlend

    fixed: dict[str, list[Any]] = {}
    featurize = None
    if device is not None:
        model_a, fixed, featurize = _device_predictor(device, space)
    else:
        model_a = CascadeBlend.load(predictor)
    model_b = CascadeBlend.load(predictor_b) if predictor_b is not None else None
    return model_a, model_b, fixed, featurize


def _screen_on_ray(
    predictor: Any,
    space: str | None,
    n: int,
    budgets: Any,
    objectives: list[str],
    address: str,
    seed: int,
    shards: int | None,
    options: dict[str, Any],
) -> tuple[Any, Any]:
    """Stage 1 on a Ray cluster; the candidates validation builds the shortlist from."""
    from infercast import screen as screening
    from infercast.space import get as get_space

    try:
        from infercast.distributed import screen_on_ray
    except ImportError:
        raise ValueError(f"--ray needs Ray: {install_hint('ray', repr('ray>=2.40'))}") from None
    result = screen_on_ray(predictor, space or "", n, budgets, objectives, address, seed, shards, **options)
    return result, screening.Candidates(pd.DataFrame(), get_space(space or ""))


def _write_shortlist(shortlist: pd.DataFrame, out: str | Path) -> None:
    from infercast.tables import write_table

    write_table(shortlist.drop(columns=[c for c in shortlist.columns if c.startswith("_")]), out)


def _validate(
    result: Any,
    model: Any,
    candidates: Any,
    db: str | Path,
    protocol: Any,
    probe_rejected: int,
    refit_to: Path | None,
    status: Callable[[str], None] | None,
) -> None:
    """Measure the shortlist (and near rejects) into ``db``; with ``refit_to``, retrain the
    predictor there on the store with those measurements in it."""
    from infercast import screen as screening

    tell = status or (lambda message: None)
    tell("measuring the shortlist")
    result.validation = screening.validate(result, model, candidates, db, protocol, probe_rejected)
    if refit_to is not None:
        from infercast.api.training import train

        tell("refitting the predictor")
        summary = train(db, refit_to, platform=model.info.platform.id)
        result.validation["refit"] = {"predictor": str(refit_to), "test_metrics": summary["test_metrics"]}


def _device_summary(device: str, model: Any) -> dict[str, Any]:
    """Which route screened for a shipped device, and its card's figures."""
    own = getattr(model, "summary", None)
    if own is not None:
        return own()
    from infercast.predictors.devices import device_info

    card = device_info(device).card
    figures = {k: card.get(k) for k in ("within_10pct", "median_abs_error_pct", "spearman", "coverage")}
    return {"device": device, "route": card.get("route", ""), **figures, "note": ""}
