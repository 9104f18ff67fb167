"""Predictions do not change by accident: the predictor directories in tests/saved/ (every kind:
the blend with its op-wise, combined and Σ cost × work routes and their ranking, an adapted
predictor, a shipped device recalibrated) and the shipped devices predict what they predicted
when tests/saved/build.py wrote them. A change meant to move predictions reruns that script and
says why in its commit."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from infercast import machine
from infercast.api import predict_devices, predict_models

from .saved.inputs import DEVICE_MODELS, DEVICES, MODELS

SAVED = Path(__file__).parent / "saved"
EXPECTED = json.loads((SAVED / "expected.json").read_text())


def differences(expected: Any, actual: Any, where: str = "") -> list[str]:
    """Where two JSON documents differ: numbers beyond a relative 1e-9, anything else at all."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        keys = sorted(set(expected) | set(actual))
        return [d for k in keys for d in differences(expected.get(k), actual.get(k), f"{where}.{k}")]
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        pairs = enumerate(zip(expected, actual, strict=True))
        return [d for i, (e, a) in pairs for d in differences(e, a, f"{where}[{i}]")]
    numbers = (int, float)
    if isinstance(expected, bool) or isinstance(actual, bool):
        same = type(expected) is type(actual) and expected == actual
    elif isinstance(expected, numbers) and isinstance(actual, numbers):
        same = math.isclose(expected, actual, rel_tol=1e-9, abs_tol=1e-12)
    else:
        same = type(expected) is type(actual) and expected == actual
    return [] if same else [f"{where}: {expected!r} → {actual!r}"]


@pytest.mark.parametrize(
    ("case", "predict"),
    [
        ("predict_models", lambda: predict_models(SAVED / "predictor", MODELS)),
        ("adapted", lambda: predict_models(SAVED / "adapted", MODELS)),
        ("device_adapted", lambda: predict_models(SAVED / "device-adapted", MODELS)),
        ("predict_devices", lambda: predict_devices(DEVICE_MODELS, DEVICES)),
    ],
)
def test_saved_predictors_predict_what_they_did(case, predict, monkeypatch, tmp_path) -> None:
    # the machine expected.json was written on (a host's result says whether this is another)
    monkeypatch.setattr(machine, "CPUINFO", Path(__file__).parent / "cpus" / "epyc-zen1-kvm.cpuinfo")
    monkeypatch.setattr(machine, "CACHES", tmp_path / "no-caches")
    actual = json.loads(json.dumps(predict()).replace(str(SAVED), "tests/saved"))
    assert differences(EXPECTED[case], actual) == []


def test_differences_finds_a_changed_number_a_renamed_key_and_a_new_route() -> None:
    before = {"routes": [{"route": "blend", "latency_ms": 1.0}], "ood": False}
    after = {"routes": [{"route": "mean", "latency_ms": 1.0 + 1e-6}, {}], "ood": False, "x": 1}
    assert differences(before, before) == []
    assert differences(before, {**before, "ood": 0}) == [".ood: False → 0"]
    assert len(differences(before, after)) == 2
    changed = {"routes": [{"route": "blend", "latency_ms": 1.0 + 1e-6}], "ood": False}
    assert differences(before, changed) == [".routes[0].latency_ms: 1.0 → 1.000001"]


def test_a_ranking_written_before_routes_had_keys_loads_and_an_unknown_route_is_refused(tmp_path) -> None:
    import shutil

    from infercast.predictors import PredictorError
    from infercast.predictors.bundle import PredictorBundle
    from infercast.predictors.routes import MEAN, PHYSICAL

    folder = shutil.copytree(SAVED / "predictor", tmp_path / "predictor")
    ranking = json.loads((folder / "routes.json").read_text())
    assert ranking["order"][0] == "Σ cost × work (device features)"  # as the earlier infercast wrote it
    assert PredictorBundle.load(folder).order[:2] == [PHYSICAL, MEAN]
    (folder / "routes.json").write_text(json.dumps({**ranking, "order": ["blend", "oracle"]}))
    with pytest.raises(PredictorError, match="unknown latency route 'oracle'"):
        PredictorBundle.load(folder)


def test_evaluate_refuses_a_recalibrated_device_with_what_scored_it(tmp_path) -> None:
    from infercast.api import evaluate
    from infercast.predictors import PredictorError

    with pytest.raises(PredictorError, match="`infercast adapt` scored it"):
        evaluate(SAVED / "device-adapted", tmp_path / "runs.db")
