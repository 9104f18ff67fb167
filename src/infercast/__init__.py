"""infercast: predict what a CNN costs to run (latency, energy, peak memory) before deploying it.

The calls most programs need are plain functions here::

    import infercast

    infercast.predict(model, predictor="predictors/cpu")   # a model string, nn.Module or ModelProto
    infercast.predict(model, device="pixel4/gpu")          # a shipped device predictor
    infercast.measure(model, input_shape=(1, 3, 224, 224))  # measured here, in a worker process
    infercast.calibrate()                                  # this machine as device="local"
    graph = infercast.capture(infercast.load_model("pytorchcv:resnet18"))
    infercast.featurize(graph)                             # the predictors' feature vector

The stages are packages (``infercast.predictors``, ``infercast.measurement``, ``infercast.screen``,
…; docs/design.md); the workflows behind the CLI are ``infercast.api``. ``predict`` and ``measure``
import what they need on first call, so ``import infercast`` stays light.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

# Before torch loads libgomp (XGBoost and LightGBM share that copy): its threads spin for 300,000
# iterations at every barrier by default, and two trainings side by side on a 2-core host then ran
# many times slower than one alone (docs/predict.md "Threads"). A value the user set is kept.
os.environ.setdefault("GOMP_SPINCOUNT", "1000")

from infercast.errors import InfercastError
from infercast.features import featurize
from infercast.graph import Graph, capture
from infercast.lazy import lazy_exports
from infercast.models import LoadedModel, load_model
from infercast.version import __version__

if TYPE_CHECKING:
    from infercast.api.calibrating import calibrate
    from infercast.api.measuring import measure
    from infercast.api.predicting import predict

# the workflows' functions themselves, imported on first use: their modules import pandas and the
# predictors, which `import infercast` alone does not need
__getattr__ = lazy_exports(
    __name__, {"predict": "api.predicting", "measure": "api.measuring", "calibrate": "api.calibrating"}
)


__all__ = [
    "Graph",
    "InfercastError",
    "LoadedModel",
    "__version__",
    "calibrate",
    "capture",
    "featurize",
    "load_model",
    "measure",
    "predict",
]
