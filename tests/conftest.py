from __future__ import annotations

import importlib.util

import pytest
import torch

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
