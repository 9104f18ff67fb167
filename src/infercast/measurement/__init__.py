"""Measurement: backends × sensors × protocol, run in isolated worker processes.

- ``CampaignSpec``: one profiling campaign (which configs of a design space, measured how);
  ``profile(spec, db, backend)`` runs it here (``api.profiling`` runs it on any executor);
- ``measure_model_strings(models, backend)``: measure a few model strings now, or into a store;
- ``run_campaign(rows, db, backend, campaign, …)``: the engine both use, with sentinel passes.

Backends live in ``measurement.backends`` (one file each), energy sensors in
``measurement.sensors``, the latency protocol in ``measurement.protocol``. The names below are
imported on first use: the CLI lists the backends without loading the engine and the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infercast.lazy import lazy_exports

if TYPE_CHECKING:
    from infercast.measurement.backends.base import Backend, MeasureError
    from infercast.measurement.campaign import Campaign, energy_sensor, platform_of, run_campaign
    from infercast.measurement.engine import Engine, Item
    from infercast.measurement.profiling import profile
    from infercast.measurement.protocol import Protocol
    from infercast.measurement.spec import CampaignSpec
    from infercast.measurement.strings import measure_model_strings, model_configs

_MODULES = {
    **dict.fromkeys(("Backend", "MeasureError"), "backends.base"),
    **dict.fromkeys(("Campaign", "energy_sensor", "platform_of", "run_campaign"), "campaign"),
    **dict.fromkeys(("Engine", "Item"), "engine"),
    "profile": "profiling",
    "Protocol": "protocol",
    "CampaignSpec": "spec",
    **dict.fromkeys(("measure_model_strings", "model_configs"), "strings"),
}
__getattr__ = lazy_exports(__name__, _MODULES)

__all__ = [
    "Backend",
    "Campaign",
    "CampaignSpec",
    "Engine",
    "Item",
    "MeasureError",
    "Protocol",
    "energy_sensor",
    "measure_model_strings",
    "model_configs",
    "platform_of",
    "profile",
    "run_campaign",
]
