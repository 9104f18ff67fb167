"""Names a package exports from its submodules, imported on first use (PEP 562): a package whose
submodules import heavy libraries stays light to import."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, modules: dict[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` that imports each name of ``modules`` (name → submodule)
    from its submodule on first use."""

    def exported(name: str) -> Any:
        if name in modules:
            return getattr(importlib.import_module(f"{package}.{modules[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return exported
