"""Capturing a model, with captured graphs kept on disk: a model captured once is read back in
milliseconds, and a command that finds every model there never imports PyTorch (seconds).

Only models whose graph is fixed by what the key names are kept: zoo and design-space strings
(the string, the input shape and the batch, the versions of PyTorch and of the zoo, and the
source of infercast's capture code) and ONNX and TFLite files (their bytes). A ``file.py:factory`` runs code
that may change without its file changing, and a module object has no name to key it by: those
are captured every time. ``INFERCAST_GRAPH_CACHE=0`` turns the cache off.

Model strings are checked here before anything heavy is imported: a typo in a zoo name fails at
once, with the zoo's nearest names.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from infercast.files import write_cached
from infercast.graph import Graph
from infercast.graph.serial import graph_from_dict, graph_to_dict
from infercast.models import ZOOS, check_model_string, parse_input_shape
from infercast.paths import cache_root

# the code whose changes change a captured graph
_CAPTURE_CODE = ("graph", "models", "space")


def capture_model(
    model: Any,
    input_shape: tuple[int, ...] | str | None = None,
    batch_size: int | None = None,
    timeout_s: float | None = None,
) -> tuple[Graph, str]:
    """Load and capture ``model`` (any the loader takes): its graph and its source (zoo, onnx, …),
    from the graph cache when it is there. See ``infercast.models.guarded.capture_model``."""
    if isinstance(input_shape, str):
        input_shape = parse_input_shape(input_shape)
    check_model_string(model)
    path = _cache_path(model, input_shape, batch_size)
    if path is not None:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            saved = json.loads(path.read_bytes())
            return graph_from_dict(saved["graph"]), saved["source"]
    if isinstance(model, str) and model.strip().lower().endswith(".tflite"):
        from infercast.graph import capture
        from infercast.models import load_model

        loaded = load_model(model, input_shape, batch_size)
        graph, source = capture(loaded), loaded.source
    else:
        from infercast.models.guarded import capture_model as capture_fresh

        graph, source = capture_fresh(model, input_shape, batch_size, timeout_s)
    if path is not None:
        write_cached(path, json.dumps({"graph": graph_to_dict(graph), "source": source}))
    return graph, source


def _cache_path(model: Any, input_shape: tuple[int, ...] | None, batch_size: int | None) -> Path | None:
    if os.environ.get("INFERCAST_GRAPH_CACHE", "1") == "0" or not isinstance(model, str):
        return None
    spec = model.strip()
    prefix = spec.partition(":")[0]
    if prefix in ZOOS:
        versions = [_version("torch"), _version(prefix)]
    elif prefix == "space":
        versions = [_version("torch")]
    elif spec.lower().endswith(".onnx") and Path(spec).is_file():
        versions = [_version("onnx"), _file_digest(Path(spec))]
    elif spec.lower().endswith(".tflite") and Path(spec).is_file():
        versions = [_version("tflite"), _file_digest(Path(spec))]
    else:
        return None
    key = json.dumps([spec, input_shape, batch_size, versions, _code_digest()])
    return cache_root() / "graphs" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@cache
def _code_digest() -> str:
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for package in _CAPTURE_CODE:
        for file in sorted((root / package).rglob("*")):
            if file.is_file() and file.suffix in (".py", ".json", ".yaml", ".csv"):
                digest.update(str(file.relative_to(root)).encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()
