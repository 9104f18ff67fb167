"""The package's layers point one way: no import cycle between packages or modules (the package
root included), no module that imports the root, and none of the arrows docs/design.md forbids.
Every import counts, also one inside a function: a lazy import hides a cycle from Python, not from
the design."""

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
    "graph": ("models", "space", "features", "measurement", "store", "predictors", "datasets", *WORKFLOWS),
    "features": ("models", "space", "measurement", "store", "predictors", "datasets", *WORKFLOWS),
    "space": ("models", "measurement", "store", "predictors", "datasets", *WORKFLOWS),
    "models": ("measurement", "store", "predictors", "datasets", *WORKFLOWS),
    "store": ("graph", "features", "models", "space", "measurement", "predictors", "datasets", *WORKFLOWS),
    "predictors": ("models", "space", "measurement", "store", "datasets", *WORKFLOWS),
    "measurement": ("predictors", "datasets", *WORKFLOWS),
    "datasets": ("measurement", *WORKFLOWS),
    "report": ("measurement", "screen", "distributed", "api", "demo"),
    "screen.candidates": ("measurement", "store"),
    "screen.stages": ("measurement", "store"),
    "screen.request": ("measurement", "store"),
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


def _entered(target: str, importer: str) -> list[str]:
    """The modules an import of ``target`` runs: ``target`` and each package above it that the
    importer is not inside already."""
    parts = target.split(".")
    inside = importer.split(".")
    return [
        ".".join(parts[:i]) for i in range(1, len(parts) + 1) if i == len(parts) or parts[:i] != inside[:i]
    ]


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
    # Importing a module runs its packages' __init__ first: an import of ``a.b.c`` from outside
    # ``a.b`` imports ``a.b`` too, and whatever that __init__ imports. A module naming its own
    # package (``from . import x``) finds it initialising: that is not a cycle.
    module_graph = {
        m: {t for target in targets for t in _entered(target, m) if t != m.rsplit(".", 1)[0]}
        for m, targets in modules.items()
    }
    problems += [f"module cycle: {' ↔ '.join(c)}" for c in cycles(module_graph)]
    units: dict[str, set[str]] = defaultdict(set)
    for module, targets in modules.items():
        for target in targets:
            a, b = _unit(module, package), _unit(target, package)
            if a and b and a != b:
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
            if target == package and module != package:
                problems.append(f"{module}:{line} imports the package root {package}: import the module")
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
PLANTED_ROOT_CYCLE = {
    "infercast/__init__.py": "def predict():\n    from infercast.api import predicting\n",
    "infercast/api/__init__.py": "",
    "infercast/api/predicting.py": "from infercast import lazy_exports\n",
}
PLANTED_PACKAGE_CYCLE = {
    "infercast/predictors/__init__.py": "",
    "infercast/predictors/physical.py": "from infercast.predictors.devices.features import BASE\n",
    "infercast/predictors/devices/__init__.py": "from infercast.predictors.devices import hosts\n",
    "infercast/predictors/devices/features.py": "BASE = ()\n",
    "infercast/predictors/devices/hosts.py": "from infercast.predictors.physical import Physical\n",
}
PLANTED_MODULE_CYCLE = {
    "infercast/predictors/__init__.py": "",
    "infercast/predictors/a.py": "from infercast.predictors import b\n",
    "infercast/predictors/b.py": "from . import a\nfrom ..measurement import engine\n",
    "infercast/measurement/__init__.py": "",
    "infercast/measurement/engine.py": "import ray\n",
    "infercast/store/__init__.py": "from infercast.cli import main\n",
    "infercast/cli/__init__.py": "",
}


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (PLANTED_LAYER_CYCLE, ["layer cycle: graph ↔ models ↔ space", "graph must never import models"]),
        (
            PLANTED_PACKAGE_CYCLE,
            [
                "module cycle: infercast.predictors.devices ↔ infercast.predictors.devices.hosts ↔ "
                "infercast.predictors.physical"
            ],
        ),
        (
            PLANTED_ROOT_CYCLE,
            ["layer cycle: api ↔ infercast", "predicting:1 imports the package root infercast"],
        ),
        (
            PLANTED_MODULE_CYCLE,
            [
                "module cycle: infercast.predictors.a ↔ infercast.predictors.b",
                "predictors must never import measurement",
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


MODULE_LINES, FUNCTION_LINES = 400, 80
# the one line a file gives to say why a function (on the line above its ``def`` or decorators)
# or the whole module (anywhere) is allowed to be longer
LONG = "# long: "


def size_problems(root: Path, package: str = "infercast") -> list[str]:
    """Modules over ``MODULE_LINES`` lines and functions over ``FUNCTION_LINES``, unless the file
    says why (``LONG``)."""
    problems = []
    for path in sorted((root / package).rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        name = path.relative_to(root)
        if len(lines) > MODULE_LINES and not any(line.startswith(LONG) for line in lines):
            problems.append(f"{name}: {len(lines)} lines (at most {MODULE_LINES})")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            length = node.end_lineno - node.lineno + 1
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            excused = first >= 2 and lines[first - 2].strip().startswith(LONG)
            if length > FUNCTION_LINES and not excused:
                problems.append(
                    f"{name}:{node.lineno} {node.name}: {length} lines (at most {FUNCTION_LINES})"
                )
    return problems


def test_no_module_or_function_is_longer_than_the_limit_without_saying_why() -> None:
    assert size_problems(SRC) == []


def test_a_long_function_is_found_unless_the_line_above_says_why(tmp_path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(FUNCTION_LINES))
    plain = f"def long():\n{body}"
    excused = f"# long: a table of constants\ndef long():\n{body}"
    root = _plant(tmp_path, {"infercast/__init__.py": "", "infercast/a.py": plain, "infercast/b.py": excused})
    assert size_problems(root) == [
        f"infercast/a.py:1 long: {FUNCTION_LINES + 1} lines (at most {FUNCTION_LINES})"
    ]
    many = "".join(f"x{i} = {i}\n" for i in range(MODULE_LINES + 1))
    root = _plant(tmp_path / "m", {"infercast/__init__.py": "", "infercast/c.py": many})
    assert size_problems(root) == [f"infercast/c.py: {MODULE_LINES + 1} lines (at most {MODULE_LINES})"]
