"""The one place where infercast works around broken third-party installs.

torchvision wheels from PyPI carry compiled ops built against CUDA libraries. On a CPU-only
torch build they fail to load and ``import torchvision`` stops with
"operator torchvision::nms does not exist", because torchvision's Python side registers fake
(meta) kernels for ``nms`` / ``qnms`` whose schemas the compiled library should have defined.
Defining the two schemas ourselves and importing again lets the import go through;
classification models never call these detection ops. pytorchcv's ``model_provider`` imports
torchvision, so it needs this too: import zoo packages through this module.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_library = None  # the torch.library.Library must stay alive for the schemas to stay defined


def import_torchvision() -> ModuleType:
    """Import torchvision, defining the missing op schemas when its compiled ops did not load."""
    global _library
    try:
        return importlib.import_module("torchvision")
    except RuntimeError as error:
        if "torchvision::nms" not in str(error) or _library is not None:
            raise
    import torch

    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    _library = torch.library.Library("torchvision", "DEF")
    for schema in _SCHEMAS:
        _library.define(schema)
    return importlib.import_module("torchvision")
