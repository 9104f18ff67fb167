from __future__ import annotations

# first: importing infercast tunes libgomp's spinning, which torch's import fixes for the process
import infercast  # noqa: F401

# isort: split
import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest
import torch

# tests/helpers.py runs the CLI in the test process: its tables as wide as in the subprocesses,
# whose terminal width the tests set (rich reads it when infercast.cli is imported)
os.environ["COLUMNS"] = "200"
# predictors trained on first use (a phone's Σ cost × work, an NB201 blend) go to a cache of the
# test run, never the user's; the tests' subprocesses inherit it
TEST_CACHE = tempfile.mkdtemp(prefix="infercast-test-cache-")
os.environ["INFERCAST_CACHE"] = TEST_CACHE

requires_pytorchcv = pytest.mark.skipif(
    importlib.util.find_spec("pytorchcv") is None,
    reason="pytorchcv is not installed (pip install -e '.[zoo]' in this checkout)",
)


def pytest_sessionfinish() -> None:
    shutil.rmtree(TEST_CACHE, ignore_errors=True)


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A module's predictors trained on first use go to a cache of their own (the CLI's
    subprocesses share it)."""
    before = os.environ.get("INFERCAST_CACHE")
    os.environ["INFERCAST_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        del os.environ["INFERCAST_CACHE"]
    else:
        os.environ["INFERCAST_CACHE"] = before


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def onnx_export(module: torch.nn.Module, shape: tuple[int, ...], path: str, dynamo: bool = False) -> str:
    """Export without folding BatchNorm into Conv, so the file holds the same network."""
    example = (torch.randn(shape),)
    if dynamo:
        torch.onnx.export(module, example, path, dynamo=True, optimize=False, verbose=False)
    else:
        torch.onnx.export(module, example, path, dynamo=False, do_constant_folding=False)
    return path


# Longest files first (by the sum of their tests' durations, `pytest --durations`): `make test`
# runs workers that each take whole files (`--dist loadfile --no-loadscope-reorder`: xdist keeps
# this order instead of its own by number of tests), and a long file started last leaves one
# worker running minutes after the others have finished. (`make test` runs test_distributed.py
# beside them, at a higher priority.)
LONGEST_FIRST = (
    "test_readme.py",
    "test_predict.py",
    "test_profile.py",
    "test_devices.py",
    "test_demo.py",
    "test_hostile.py",
    "test_transfer.py",
    "test_hostile_processes.py",
    "test_measure.py",
    "test_capture_paths.py",
    "test_overhead.py",
    "test_graph_zoo.py",
    "test_screen.py",
    "test_install.py",
    "test_timm_devices.py",
    "test_capture_cache.py",
    "test_calibrate.py",
    "test_readme_without_profiling.py",
    "test_drift.py",
    "test_gpu_check.py",
    "test_store.py",
    "test_report.py",
    "test_movement.py",
    "test_intervals.py",
    "test_timm_adapt.py",
    "test_space_carb_resnet.py",
    "test_predictor_contract.py",
    "test_space_mobile_nas.py",
    "test_space_nb201.py",
    "test_registries.py",
    "test_models.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
