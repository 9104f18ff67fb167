"""The workflows behind the CLI's commands, as functions a program calls: each takes paths and
plain values and returns plain data (dicts / lists). They sit above the steps (store → learners →
predictor directories; models → graphs → predictions; candidates → shortlist), so the predictors
themselves learn from tables only.

- ``train``, ``train_ops``: ``api.training``; ``evaluate``: ``api.evaluating``;
- ``adapt``, ``adapt_device``, ``suggest``: ``api.adapting``;
- ``predict``, ``predict_models``, ``predict_devices``, ``predict_ops``, ``load_predictor``:
  ``api.predicting`` (model strings, ``nn.Module``, ``onnx.ModelProto``, ONNX paths);
- ``calibrate``: ``api.calibrating`` (this machine as the ``local`` device);
- ``measure``: ``api.measuring``; ``profile``: ``api.profiling``, a ``CampaignSpec`` run on any
  executor (local, adaptive, ray);
- ``screen``: ``api.screening``, the whole flow ``infercast screen`` runs;
- ``import_measurements``: ``api.importing``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infercast.lazy import lazy_exports

if TYPE_CHECKING:
    from infercast.api.adapting import adapt, adapt_device, suggest
    from infercast.api.calibrating import calibrate
    from infercast.api.evaluating import evaluate
    from infercast.api.measuring import measure
    from infercast.api.predicting import load_predictor, predict, predict_devices, predict_models, predict_ops
    from infercast.api.profiling import profile
    from infercast.api.screening import screen
    from infercast.api.training import train, train_ops

# Each workflow's module is imported on first use: predicting for a shipped phone needs neither
# training's learners nor screening's samplers.
_MODULES = {
    **dict.fromkeys(
        ("load_predictor", "predict", "predict_devices", "predict_models", "predict_ops"), "predicting"
    ),
    **dict.fromkeys(("adapt", "adapt_device", "suggest"), "adapting"),
    "calibrate": "calibrating",
    "evaluate": "evaluating",
    "measure": "measuring",
    "profile": "profiling",
    "screen": "screening",
    **dict.fromkeys(("train", "train_ops"), "training"),
}
__getattr__ = lazy_exports(__name__, _MODULES)


__all__ = [
    "adapt",
    "adapt_device",
    "calibrate",
    "evaluate",
    "load_predictor",
    "measure",
    "predict",
    "predict_devices",
    "predict_models",
    "predict_ops",
    "profile",
    "screen",
    "suggest",
    "train",
    "train_ops",
]
