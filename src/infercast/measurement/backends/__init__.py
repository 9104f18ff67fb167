"""Backends, one file each: ``get(name, **settings)`` builds one.

A new backend is one file here with a ``Backend`` subclass (``base.py``) and one line in
``BACKENDS``; the CLI's help lists ``BACKENDS``. Its module is imported when the backend is built
(the backends import PyTorch or ONNX Runtime), so listing the names costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

from infercast.measurement.backends.base import Backend, MeasureError, Session

# name (what users type) → "module:class"
BACKENDS: dict[str, str] = {
    "ort-cpu": "infercast.measurement.backends.ort_cpu:OrtCpuBackend",
    "torch-cpu": "infercast.measurement.backends.torch_cpu:TorchCpuBackend",
    "torch-cuda": "infercast.measurement.backends.torch_cuda:TorchCudaBackend",
    "torch-cuda-amp": "infercast.measurement.backends.torch_cuda_amp:TorchCudaAmpBackend",
    "ort-cuda": "infercast.measurement.backends.ort_cuda:OrtCudaBackend",
}

__all__ = ["BACKENDS", "Backend", "MeasureError", "Session", "backend_class", "get"]


def backend_class(name: str) -> type[Backend]:
    """The class of the backend users call ``name``."""
    if name not in BACKENDS:
        raise MeasureError(f"unknown backend {name!r}; backends: {', '.join(BACKENDS)}")
    module, _, cls = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def get(name: str, **settings: Any) -> Backend:
    chosen = backend_class(name)
    try:
        backend = chosen(**settings)
    except TypeError as error:
        raise MeasureError(f"backend {name}: {error}") from None
    reason = backend.available()
    if reason is not None:
        raise MeasureError(f"backend {name} cannot run here: {reason}")
    return backend
