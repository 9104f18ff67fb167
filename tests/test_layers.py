"""The package's layers point one way: no import cycle between packages or modules, and none of the
arrows docs/design.md forbids. Every import counts, also one inside a function: a lazy import hides
a cycle from Python, not from the design."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# (importer, imported): the importer's package must never import the other. Units are the
# sub-packages and top-level modules of ``infercast`` (``screen.candidates`` names one module).
# the workflows over every stage: nothing below them may call them
WORKFLOWS = ("api", "demo", "screen", "report", "distributed")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "graph": ("models", "space", "features", "measure", "store", "predict", "datasets", *WORKFLOWS),
    "features": ("models", "space", "measure", "store", "predict", "datasets", *WORKFLOWS),
    "space": ("models", "measure", "store", "predict", "datasets", *WORKFLOWS),
    "models": ("measure", "store", "predict", "datasets", *WORKFLOWS),
    "store": ("graph", "features", "models", "space", "measure", "predict", "datasets", *WORKFLOWS),
    "predict": ("models", "space", "measure", "store", "datasets", *WORKFLOWS),
    "measure": ("predict", "datasets", *WORKFLOWS),
    "datasets": ("measure", *WORKFLOWS),
    "report": ("measure", "screen", "distributed", "api", "demo"),
    "screen.candidates": ("measure", "store"),
    "screen.stages": ("measure", "store"),
    "screen.request": ("measure", "store"),
}
EVERYONE_BUT_THE_ENTRY_POINT = ("cli",)  # nothing imports the CLI but ``__main__``
RAY_ONLY_IN = "distributed"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(root: Path, package: str) -> dict[str, set[tuple[str, int]]]:
    """Every module of ``package`` under ``root`` → the absolute module names it imports (and the
    line), relative imports resolved; ``from pkg import name`` counts as ``pkg.name`` where that is
    a module of the package."""
    files = {_module_name(p, root): p for p in (root / package).rglob("*.py")}
    found: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if is_package else name.split(".")[:-1]
                    here = here[: len(here) - node.level + 1]
                    base = ".".join([*here, base] if base else here)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            else:
                continue
            for target in targets:
                found[name].add((target, node.lineno))
    return found


def _unit(module: str, package: str) -> str | None:
    """The layer a module belongs to: ``infercast.screen.stages`` → ``screen``; top-level modules
    are their own unit."""
    parts = module.split(".")
    if parts[0] != package:
        return None
    return parts[1] if len(parts) > 1 else package


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one node (Tarjan), as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_problems(root: Path, package: str = "infercast") -> list[str]:
    """Cycles between layers and between modules, forbidden arrows, Ray outside its package."""
    found = imports(root, package)
    problems: list[str] = []
    modules = {m: {t for t, _ in targets if t.startswith(package)} for m, targets in found.items()}
    # a package's __init__ re-exporting its own modules is not a cycle between modules
    module_graph = {
        m: {t for t in targets if not (m == t.rsplit(".", 1)[0] or t == m.rsplit(".", 1)[0])}
        for m, targets in modules.items()
    }
    problems += [f"module cycle: {' ↔ '.join(c)}" for c in cycles(module_graph)]
    units: dict[str, set[str]] = defaultdict(set)
    for module, targets in modules.items():
        for target in targets:
            a, b = _unit(module, package), _unit(target, package)
            if a and b and a != b and b != package:
                units[a].add(b)
    problems += [f"layer cycle: {' ↔ '.join(c)}" for c in cycles(units)]
    for module, targets in found.items():
        unit = _unit(module, package)
        sub = ".".join(module.split(".")[1:3])
        for target, line in targets:
            imported = _unit(target, package)
            for who in (unit, sub):
                if imported != unit and imported in FORBIDDEN.get(who or "", ()):
                    problems.append(f"{module}:{line} imports {target}: {who} must never import {imported}")
            if imported in EVERYONE_BUT_THE_ENTRY_POINT and unit not in (imported, "__main__"):
                problems.append(f"{module}:{line} imports {target}: nothing imports the CLI")
            if target.split(".")[0] == "ray" and unit != RAY_ONLY_IN:
                problems.append(f"{module}:{line} imports ray outside infercast.{RAY_ONLY_IN}")
    return sorted(set(problems))


def test_infercast_has_no_cycle_and_no_forbidden_arrow() -> None:
    assert layer_problems(SRC) == []


def _plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


PLANTED_LAYER_CYCLE = {
    "infercast/graph/__init__.py": "def capture():\n    from infercast.models import load\n",
    "infercast/models/__init__.py": "from infercast.space import get\n",
    "infercast/space/__init__.py": "from infercast import graph\n",
}
PLANTED_MODULE_CYCLE = {
    "infercast/predict/__init__.py": "",
    "infercast/predict/a.py": "from infercast.predict import b\n",
    "infercast/predict/b.py": "from . import a\nfrom ..measure import engine\n",
    "infercast/measure/__init__.py": "",
    "infercast/measure/engine.py": "import ray\n",
    "infercast/store/__init__.py": "from infercast.cli import main\n",
    "infercast/cli/__init__.py": "",
}


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (PLANTED_LAYER_CYCLE, ["layer cycle: graph ↔ models ↔ space", "graph must never import models"]),
        (
            PLANTED_MODULE_CYCLE,
            [
                "module cycle: infercast.predict.a ↔ infercast.predict.b",
                "predict must never import measure",
                "imports ray outside",
                "nothing imports the CLI",
            ],
        ),
    ],
)
def test_planted_cycles_and_forbidden_arrows_are_found(tmp_path, files, expected) -> None:
    problems = layer_problems(_plant(tmp_path, {"infercast/__init__.py": "", **files}))
    for phrase in expected:
        assert any(phrase in p for p in problems), (phrase, problems)


@pytest.mark.parametrize("clean", ["from infercast.graph import capture\n", "import numpy\n"])
def test_allowed_arrows_pass(tmp_path, clean) -> None:
    root = _plant(
        tmp_path,
        {
            "infercast/__init__.py": "",
            "infercast/graph/__init__.py": "",
            "infercast/features/__init__.py": clean,
        },
    )
    assert layer_problems(root) == []
