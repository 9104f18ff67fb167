"""infercast: predict what a CNN costs to run (latency, energy, peak memory) before deploying it.

The two calls most programs need::

    import infercast

    infercast.predict(model, predictor="predictors/cpu")   # a model string, nn.Module or ModelProto
    infercast.measure(model, input_shape=(1, 3, 224, 224))  # measured here, in a worker process

``infercast.predict`` and ``infercast.measure`` are also the packages of those stages
(``infercast.predict.CascadeBlend``, ``infercast.measure.profile``…): calling the package runs
``infercast.api.predict`` / ``infercast.api.measure``. Both are imported on first use, so
``import infercast`` stays light.
"""

import importlib
import os
import types
from collections.abc import Callable
from typing import Any

# Before torch loads libgomp (XGBoost and LightGBM share that copy): its threads spin for 300,000
# iterations at every barrier by default, and two trainings side by side on a 2-core host then
# took 85 s each instead of 2.5 s; at 1,000 they took 8 s, and one alone as long as before
# (measured, docs/predict.md "Threads"). A value the user set is kept.
os.environ.setdefault("GOMP_SPINCOUNT", "1000")

from infercast.errors import InfercastError
from infercast.features import features
from infercast.graph import Graph, capture
from infercast.models import LoadedModel, load_model

__version__ = "0.1.0"

_CALLABLE_STAGES = ("measure", "predict")


class CallableStage(types.ModuleType):
    """A stage's package that is also its one-line entry point (``infercast.predict(model, …)``);
    the package sets it as its own class when it is imported."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from infercast import api

        return getattr(api, self.__name__.rpartition(".")[2])(*args, **kwargs)


def lazy_exports(package: str, modules: dict[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` (PEP 562) that imports each name of ``modules`` from its
    submodule on first use: a package whose submodules import heavy libraries stays light."""

    def exported(name: str) -> Any:
        if name in modules:
            return getattr(importlib.import_module(f"{package}.{modules[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return exported


def __getattr__(name: str) -> Any:
    if name in _CALLABLE_STAGES:
        return importlib.import_module(f"infercast.{name}")
    raise AttributeError(f"module 'infercast' has no attribute {name!r}")


__all__ = [
    "CallableStage",
    "Graph",
    "InfercastError",
    "LoadedModel",
    "__version__",
    "capture",
    "features",
    "load_model",
    "measure",
    "predict",
]
