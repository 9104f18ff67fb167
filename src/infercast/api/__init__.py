"""The workflows behind the CLI's commands, as functions a program calls: each takes paths and
plain values and returns plain data (dicts / lists). They sit above the stages (store → learners →
predictor directories; models → graphs → predictions; candidates → shortlist), so ``predict``
itself learns from tables only.

- ``train``, ``evaluate``, ``train_ops``, ``predict_ops``, ``adapt``, ``adapt_device``, ``suggest``:
  ``api.training``;
- ``predict``, ``predict_models``, ``predict_devices``, ``measure``: ``api.predicting`` (model
  strings, ``nn.Module``, ``onnx.ModelProto``, ONNX paths);
- ``screen``: ``api.screening``, the whole flow ``infercast screen`` runs.
- ``profile_kernels_adaptive``: ``api.kernel_campaigns``, what ``infercast profile --kernels
  --adaptive`` runs (it plans its second half with the op-wise kernel regressors).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infercast.lazy import lazy_exports

if TYPE_CHECKING:
    from infercast.api.measuring import measure
    from infercast.api.predicting import load_predictor, predict, predict_devices, predict_models
    from infercast.api.screening import screen
    from infercast.api.training import adapt, adapt_device, evaluate, predict_ops, suggest, train, train_ops

# Each workflow's module is imported on first use: predicting for a shipped phone needs neither
# training's learners nor screening's samplers (see ``infercast.predictors``).
_MODULES = {
    **dict.fromkeys(("load_predictor", "predict", "predict_devices", "predict_models"), "predicting"),
    "measure": "measuring",
    "screen": "screening",
    **dict.fromkeys(
        ("adapt", "adapt_device", "evaluate", "predict_ops", "suggest", "train", "train_ops"), "training"
    ),
}
__getattr__ = lazy_exports(__name__, _MODULES)


__all__ = [
    "adapt",
    "adapt_device",
    "evaluate",
    "load_predictor",
    "measure",
    "predict",
    "predict_devices",
    "predict_models",
    "predict_ops",
    "screen",
    "suggest",
    "train",
    "train_ops",
]
