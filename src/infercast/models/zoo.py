"""Model zoos: pytorchcv, timm and torchvision, always built without pretrained weights."""

from __future__ import annotations

import ast
import contextlib
import difflib
import functools
import importlib
import importlib.metadata
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from infercast.compat import import_torchvision
from infercast.errors import ModelLoadError, install_hint
from infercast.files import write_cached
from infercast.models import DEFAULT_IMAGE_SHAPE, LoadedModel
from infercast.paths import cache_root

if TYPE_CHECKING:
    import torch

_PACKAGES = {"pytorchcv": "pytorchcv", "timm": "timm", "torchvision": "torchvision"}


def available(zoo: str) -> bool:
    return importlib.util.find_spec(_PACKAGES[zoo]) is not None


@functools.cache
def names(zoo: str) -> list[str]:
    """Every model name the zoo can build. Listing timm's or torchvision's imports the zoo and
    PyTorch (seconds): the list is kept in the cache, under the zoo's version, and read once a
    process."""
    _require(zoo)
    if zoo == "pytorchcv" and _pytorchcv_builders() is not None:
        return sorted(_pytorchcv_builders())  # type: ignore[arg-type]
    kept = cache_root() / "zoo-names" / f"{zoo}-{importlib.metadata.version(_PACKAGES[zoo])}.json"
    with contextlib.suppress(OSError, ValueError):
        listed = json.loads(kept.read_bytes())
        if isinstance(listed, list) and listed and all(isinstance(n, str) for n in listed):
            return listed
    listed = _listed(zoo)
    write_cached(kept, json.dumps(listed))
    return listed


def check_name(zoo: str, name: str) -> None:
    """Refuse a name the zoo cannot build, with the nearest ones it can."""
    if not name:
        raise ModelLoadError(f"model string {zoo}: needs a model name, e.g. {zoo}:resnet18")
    known = names(zoo)
    if name not in known:
        close = difflib.get_close_matches(name, known, n=5, cutoff=0.6)
        hint = (
            f"; did you mean {', '.join(close)}?" if close else f" ({len(known)} names; see the zoo's docs)"
        )
        raise ModelLoadError(f"unknown {zoo} model {name!r}{hint}")


def _listed(zoo: str) -> list[str]:
    if zoo == "pytorchcv":
        import_torchvision()
        from pytorchcv.model_provider import _models

        return sorted(_models)
    if zoo == "timm":
        import_torchvision()
        import timm

        return sorted(timm.list_models())
    return sorted(import_torchvision().models.list_models(module=import_torchvision().models))


def load(zoo: str, name: str, input_shape: tuple[int, ...] | None) -> LoadedModel:
    check_name(zoo, name)
    builder: Callable[[str], tuple[torch.nn.Module, tuple[int, ...]]] = {
        "pytorchcv": _pytorchcv,
        "timm": _timm,
        "torchvision": _torchvision,
    }[zoo]
    try:
        module, default_shape = builder(name)
    except Exception as error:
        raise ModelLoadError(f"{zoo}:{name} failed to build: {type(error).__name__}: {error}") from error
    return LoadedModel(f"{zoo}:{name}", zoo, input_shape or default_shape, module=module.eval())


def _require(zoo: str) -> None:
    if not available(zoo):
        package = {"pytorchcv": "pytorchcv==0.0.74"}.get(zoo, zoo)
        raise ModelLoadError(f"{zoo} is not installed: {install_hint('zoo', package)}")


@functools.cache
def _pytorchcv_builders() -> dict[str, tuple[str, str]] | None:
    """Each pytorchcv model name's (module, function), read from the source of pytorchcv's
    ``model_provider`` without running it: importing it imports all of its 150 model modules,
    torchvision and TorchDynamo among them, which one model never needs. None
    when that file is not laid out as in the pinned release (a name table ``_models`` of
    functions imported ``from .models.X``); the caller imports it then."""
    spec = importlib.util.find_spec("pytorchcv.model_provider")
    if spec is None or spec.origin is None:
        return None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    defined_in = {
        alias.asname or alias.name: f"pytorchcv.{node.module}"
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        for alias in node.names
    }
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["_models"]
            and isinstance(node.value, ast.Dict)
        ):
            pairs = list(zip(node.value.keys, node.value.values, strict=True))
            if all(
                isinstance(k, ast.Constant) and isinstance(v, ast.Name) and v.id in defined_in
                for k, v in pairs
            ):
                return {k.value: (defined_in[v.id], v.id) for k, v in pairs}  # type: ignore[union-attr]
    return None


def _pytorchcv(name: str) -> tuple[torch.nn.Module, tuple[int, ...]]:
    builders = _pytorchcv_builders()
    if builders is None:
        import_torchvision()
        from pytorchcv.model_provider import get_model

        module = get_model(name, pretrained=False)
    else:
        module_name, function = builders[name]
        spec = importlib.util.find_spec(module_name)
        if (
            spec is not None
            and spec.origin
            and "torchvision" in Path(spec.origin).read_text(encoding="utf-8")
        ):
            import_torchvision()  # through the shim, before the model's module imports it
        module = getattr(importlib.import_module(module_name), function)(pretrained=False)
    size = tuple(getattr(module, "in_size", DEFAULT_IMAGE_SHAPE[2:]))
    return module, (1, int(getattr(module, "in_channels", 3)), *size)


def _timm(name: str) -> tuple[torch.nn.Module, tuple[int, ...]]:
    import_torchvision()  # timm imports torchvision: through the shim first
    import timm

    module = timm.create_model(name, pretrained=False)
    size = tuple(module.pretrained_cfg.get("input_size", DEFAULT_IMAGE_SHAPE[1:]))
    return module, (1, *size)


def _torchvision(name: str) -> tuple[torch.nn.Module, tuple[int, ...]]:
    models = import_torchvision().models
    module = models.get_model(name, weights=None)
    # torchvision's classification builders take 224 px except the Inception family
    side = 299 if name.startswith("inception") else 224
    return module, (1, 3, side, side)
