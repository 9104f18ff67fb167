"""infercast: predict what a CNN costs to run (latency, energy, peak memory) before deploying it."""

from infercast.errors import InfercastError
from infercast.features import features
from infercast.graph import Graph, capture
from infercast.models import LoadedModel, load_model

__version__ = "0.1.0"

__all__ = ["Graph", "InfercastError", "LoadedModel", "__version__", "capture", "features", "load_model"]
