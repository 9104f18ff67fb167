"""Backends, one file each: ``get(name, **settings)`` builds one."""

from __future__ import annotations

from typing import Any

from infercast.measurement.backends.base import Backend, MeasureError, Session
from infercast.measurement.backends.ort_cpu import OrtCpuBackend
from infercast.measurement.backends.ort_cuda import OrtCudaBackend
from infercast.measurement.backends.torch_cpu import TorchCpuBackend
from infercast.measurement.backends.torch_cuda import TorchCudaBackend

BACKENDS: dict[str, type[Backend]] = {
    cls.name: cls for cls in (OrtCpuBackend, TorchCpuBackend, TorchCudaBackend, OrtCudaBackend)
}

__all__ = ["BACKENDS", "Backend", "MeasureError", "Session", "get"]


def get(name: str, **settings: Any) -> Backend:
    if name not in BACKENDS:
        raise MeasureError(f"unknown backend {name!r}; backends: {', '.join(BACKENDS)}")
    try:
        backend = BACKENDS[name](**settings)
    except TypeError as error:
        raise MeasureError(f"backend {name}: {error}") from None
    reason = backend.available()
    if reason is not None:
        raise MeasureError(f"backend {name} cannot run here: {reason}")
    return backend
