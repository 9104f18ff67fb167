"""What makes a new thing one file plus one registry line: every registry names what its entry
really is, help strings list the registries, and one campaign spec means one campaign whichever
way it is built (CLI, API) or run."""

from __future__ import annotations

import inspect
import json
from dataclasses import FrozenInstanceError, replace

import numpy as np
import pytest

from infercast import space
from infercast.api.profiling import EXECUTORS, executor
from infercast.api.profiling import profile as run_profile
from infercast.measurement import CampaignSpec, MeasureError, Protocol
from infercast.measurement.backends import BACKENDS, backend_class
from infercast.predictors import devices
from infercast.predictors.devices.common import DeviceSource, ScreenableSource
from infercast.space.base import Space
from infercast.store import Store

from .helpers import E2E_SPACE, FAST, infercast


def test_each_backend_of_the_registry_is_named_as_users_type_it() -> None:
    for name in BACKENDS:
        assert backend_class(name).name == name


def test_the_help_lists_the_backend_and_space_registries() -> None:
    shown = infercast("profile", "--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.replace("│", " ").split())
    for name in [*BACKENDS, *space.names()]:
        assert name in text, name


def test_every_executor_takes_the_spec_first() -> None:
    for name in EXECUTORS:
        if name == "ray" and not _has_ray():
            continue
        parameters = list(inspect.signature(executor(name)).parameters)
        assert parameters[:4] == ["spec", "db", "backend", "progress"], name


def _has_ray() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def test_every_shipped_device_source_follows_the_protocol() -> None:
    for source in devices.SOURCES:
        assert isinstance(source, DeviceSource), source.__name__
    # the sources whose devices screen design spaces: the phones' and the hosts'
    assert isinstance(devices.usc, ScreenableSource) and isinstance(devices.hosts, ScreenableSource)


def test_every_builtin_space_follows_the_protocol() -> None:
    for name in space.names():
        assert isinstance(space.get(name), Space) and space.get(name).name == name
    assert space.get("carb-resnet").has_device_features and not space.get("nb201").has_device_features


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"n": 0}, "n=0"),
        ({"seed": -1}, "seed=-1"),
        ({"op_runs": -1}, "op_runs=-1"),
        ({"limit": 0}, "limit=0"),
        ({"space": ""}, "space=''"),
        ({"protocol": {"warmup_s": 1}}, "protocol="),
    ],
)
def test_a_campaign_spec_names_a_bad_value(change, message) -> None:
    with pytest.raises(MeasureError, match=message):
        CampaignSpec(**{"space": "carb-resnet", **change})


def test_a_campaign_spec_is_frozen_and_draws_the_same_rows_every_time() -> None:
    spec = CampaignSpec("carb-resnet", n=20, seed=3)
    with pytest.raises(FrozenInstanceError):
        spec.n = 30  # type: ignore[misc]
    rows, name = spec.rows()
    again, same = CampaignSpec("carb-resnet", n=20, seed=3).rows()
    assert [r["id"] for r in rows] == [r["id"] for r in again] and name == same
    assert name == "carb-resnet:n=20:seed=3:stratified"
    assert replace(spec, campaign="mine").rows()[1] == "mine"
    assert len(replace(spec, limit=5).rows()[0]) == 5
    assert CampaignSpec("carb-resnet", n=np.int64(20)).n == 20  # a NumPy integer is a whole number
    with pytest.raises(MeasureError, match="n=0"):
        replace(spec, n=0)  # a changed spec is checked again


def test_the_cli_and_the_api_run_the_same_campaign(tmp_path) -> None:
    space_file = tmp_path / "tiny.yaml"
    space_file.write_text(E2E_SPACE)
    by_cli, by_api = tmp_path / "cli.db", tmp_path / "api.db"
    ran = infercast(
        "profile", "--space", str(space_file), "--n", "3", "--seed", "1", "--db", str(by_cli), *FAST
    )
    assert ran.returncode == 0, ran.stderr
    protocol = Protocol(warmup_s=0.1, round_s=0.05, min_rounds=3, cap_s=0.5, group=2)
    spec = CampaignSpec(str(space_file), n=3, seed=1, protocol=protocol, energy=False, sentinels=False)
    summary = run_profile(spec, by_api)
    assert json.loads(json.dumps(summary))["campaign"] == spec.rows()[1]

    def campaign(db):
        with Store(db) as store:
            frame = store.measurements()
        return sorted(frame["campaign"].unique()), sorted(frame["config_id"])

    assert campaign(by_cli) == campaign(by_api)
