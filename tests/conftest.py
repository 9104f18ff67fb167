from __future__ import annotations

# first: importing infercast tunes libgomp's spinning, which torch's import fixes for the process
import infercast  # noqa: F401

# isort: split
import importlib.util
import os
import shutil
import tempfile

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


# Longest files first (seconds measured here, four workers on two cores, 2026-12-03 18:44 UTC,
# the sum of each file's tests among the 80 slowest): `make test` runs six workers that each
# take whole files (`-n 6 --dist loadfile --no-loadscope-reorder`: xdist keeps this order instead
# of its own by number of tests), and a long file started last leaves one worker running minutes
# after the others have finished. (`make test` runs test_distributed.py beside them, at a higher
# priority.)
LONGEST_FIRST = (
    "test_readme.py",  # ~375 s
    "test_predict.py",  # ~285 s
    "test_profile.py",  # ~285 s
    "test_devices.py",  # ~235 s
    "test_demo.py",  # ~135 s
    "test_transfer.py",  # ~95 s
    "test_capture_paths.py",  # ~80 s
    "test_screen.py",  # ~55 s
    "test_hostile.py",  # ~50 s
    "test_overhead.py",  # ~50 s
    "test_measure.py",  # ~50 s
    "test_readme_without_profiling.py",  # ~30 s
    "test_drift.py",  # ~25 s
    "test_store.py",  # ~25 s
    "test_report.py",  # ~25 s
    "test_space_carb_resnet.py",  # ~20 s
    "test_intervals.py",  # ~15 s
    "test_graph_zoo.py",  # ~15 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
