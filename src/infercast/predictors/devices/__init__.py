"""Predictors shipped with infercast for devices you do not own.

``list_devices()`` names them (``pixel4/gpu``, ``s10/1large/int8``, ``nb201/pixel3``, …) with
their accuracy cards; ``get_device(name)`` returns one, ready to ``predict_graphs``. Each source of
measurements is one module beside this one (``usc.py``, ``nb201.py``, ``hosts.py``) following the
``common.DeviceSource`` protocol (``names()``, ``infos()``, ``load(name)``): a new one is a new
file and one entry in ``SOURCES`` (``timm_bench.py``: desktop GPUs and a laptop CPU). One whose
devices screen design spaces (``screen.device``) follows ``common.ScreenableSource`` too
(``physical(name)``, its Σ cost × work route, and ``INPUT_SIDE``); a device whose
``DeviceInfo.space`` names a design space also has ``predict_features(rows)``, for that space's
closed-form features.
"""

from __future__ import annotations

import difflib
from functools import cache

from infercast.predictors.devices import hosts, local, nb201, timm_bench, usc
from infercast.predictors.devices.common import DeviceInfo, DevicePredictor, DeviceSource, cards
from infercast.predictors.errors import PredictorError

SOURCES: tuple[DeviceSource, ...] = (usc, nb201, hosts, timm_bench)


class UnknownDeviceError(PredictorError):
    """A device name no shipped predictor has; the message lists the nearest names."""


def list_devices() -> list[DeviceInfo]:
    """Every shipped device predictor, with its card."""
    return [info for source in SOURCES for info in source.infos()]


def source_of(name: str) -> DeviceSource:
    """The module of ``SOURCES`` that ships ``name`` (``UnknownDeviceError`` names the nearest)."""
    for source in SOURCES:
        if name in source.names():
            return source
    every = [n for source in SOURCES for n in source.names()]
    nearest = (
        difflib.get_close_matches(name, every, n=5, cutoff=0.5)
        or sorted(n for n in every if n.split("/")[0] == name.split("/")[0])[:5]
    )
    hint = f"nearest: {', '.join(nearest)}" if nearest else "`infercast devices list` shows them"
    raise UnknownDeviceError(f"no shipped predictor for device {name!r}; {hint}")


def device_info(name: str) -> DeviceInfo:
    """The card and facts of one shipped device, or of ``local`` (this machine, calibrated by
    ``infercast calibrate``); ``UnknownDeviceError`` names the nearest."""
    if name == local.NAME:
        return local.info()
    return next(info for info in source_of(name).infos() if info.name == name)


def get_device(name: str) -> DevicePredictor:
    """The predictor of a shipped device, fitted (or loaded) on first use; ``local``: this
    machine's calibration as it is now (a calibration run since is read again)."""
    return local.load() if name == local.NAME else _shipped(name)


@cache
def _shipped(name: str) -> DevicePredictor:
    return source_of(name).load(name)


__all__ = [
    "DeviceInfo",
    "DevicePredictor",
    "UnknownDeviceError",
    "cards",
    "device_info",
    "get_device",
    "list_devices",
]
