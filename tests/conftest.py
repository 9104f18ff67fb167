from __future__ import annotations

# first: importing infercast tunes libgomp's spinning, which torch's import fixes for the process
import infercast  # noqa: F401

# isort: split
import importlib.util
import os

import pytest
import torch

# tests/helpers.py runs the CLI in the test process: its tables as wide as in the subprocesses,
# whose terminal width the tests set (rich reads it when infercast.cli is imported)
os.environ["COLUMNS"] = "200"

requires_pytorchcv = pytest.mark.skipif(
    importlib.util.find_spec("pytorchcv") is None,
    reason="pytorchcv is not installed (pip install -e '.[zoo]' in this checkout)",
)


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


# Longest files first (seconds measured here, three workers on two cores): `make test` runs three
# workers that each take whole files (`-n 3 --dist loadfile --no-loadscope-reorder`: xdist keeps
# this order instead of its own by number of tests), and a long file started last leaves one
# worker running minutes after the others have finished. (`make test` runs test_distributed.py
# alone first: ~100 s, against 300–700 s beside busy workers.)
LONGEST_FIRST = (
    "test_readme.py",  # ~230 s
    "test_predict.py",  # ~190 s
    "test_devices.py",  # ~140 s
    "test_profile.py",  # ~120 s
    "test_demo.py",  # ~110 s
    "test_transfer.py",  # ~100 s
    "test_screen.py",  # ~75 s
    "test_hostile.py",  # ~60 s
    "test_drift.py",  # ~50 s
    "test_store.py",  # ~35 s
    "test_measure.py",  # ~35 s
    "test_space_carb_resnet.py",  # ~30 s
    "test_overhead.py",  # ~25 s
    "test_space_mobile_nas.py",  # ~20 s
    "test_cli.py",  # ~20 s
    "test_intervals.py",  # ~15 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
