"""The ``infercast`` command line: a thin layer over the Python API.

Every command has ``--json``. Errors a user can fix print one line on stderr and exit with code 2;
``--debug`` (before the command) shows the traceback instead.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from infercast.errors import InfercastError, explain
from infercast.tables import to_python

app = typer.Typer(
    name="infercast",
    help="Predict what a CNN costs to run (latency, energy, peak memory) before deploying it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# Outside a terminal rich would wrap tables at 80 columns; COLUMNS or 160 reads better in logs.
_width = shutil.get_terminal_size((160, 24)).columns
# markup off: model names, paths and messages are user text, where brackets are not styles.
# Progress bars and spinners go to stderr: stdout holds only results, so a pipe gets them alone.
console = Console(width=_width, markup=False)
err_console = Console(stderr=True, width=_width, markup=False)
_state = {"debug": False}
T = TypeVar("T")

MODEL_HELP = (
    "pytorchcv:NAME, timm:NAME, torchvision:NAME, path/to/model.onnx, path/to/model.tflite "
    "or path/to/file.py:factory"
)


def _print_version(asked: bool) -> None:
    if asked:
        from infercast.version import __version__

        console.print(f"infercast {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks instead of one-line errors."),
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    _state["debug"] = debug


def print_error(message: object) -> None:
    """One ``error:`` line on stderr; the message is printed as it is (brackets in a user's model
    name or path are text, never rich markup)."""
    text = " ".join(line.strip() for line in str(message).splitlines())
    err_console.print(Text.assemble(("error:", "bold red"), " ", text), highlight=False, soft_wrap=True)


def run_guarded(action: Callable[[], T]) -> T:
    """Run a command body; a user error — or the machine refusing a file (disk full, read-only,
    a store locked by another process) — becomes one line on stderr and exit code 2."""
    try:
        return action()
    except (InfercastError, ValueError, OSError, sqlite3.Error) as error:
        if _state["debug"]:
            raise
        print_error(explain(error))
        raise typer.Exit(2) from None


def _finite(value: Any) -> Any:
    """JSON has no NaN or infinity: a number that is not finite (a metric of one row, an unbounded
    margin) is written as null, never as the non-standard ``NaN`` / ``Infinity``."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def print_json(data: Any) -> None:
    """Standard JSON on stdout (``json.loads`` and ``jq`` read it)."""

    def plain(value: Any) -> Any:
        return _finite(to_python(value, strict=True))

    sys.stdout.write(json.dumps(_finite(data), indent=2, allow_nan=False, default=plain) + "\n")


def human_count(value: float, unit: str = "") -> str:
    for threshold, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= threshold:
            return f"{value / threshold:.2f} {suffix}{unit}"
    return f"{value:.0f} {unit}".rstrip()


def human_bytes(value: float) -> str:
    return human_count(value, "B")


# Commands register themselves on ``app`` when their module is imported, and ``--help`` lists
# them in that order: the pipeline's.
from infercast.cli import adapt as _adapt  # noqa: E402, F401
from infercast.cli import calibrate as _calibrate  # noqa: E402, F401
from infercast.cli import db as _db  # noqa: E402, F401
from infercast.cli import demo as _demo  # noqa: E402, F401
from infercast.cli import devices as _devices  # noqa: E402, F401
from infercast.cli import inspect as _inspect  # noqa: E402, F401
from infercast.cli import measure as _measure  # noqa: E402, F401
from infercast.cli import predict as _predict  # noqa: E402, F401
from infercast.cli import report as _report  # noqa: E402, F401
from infercast.cli import screen as _screen  # noqa: E402, F401
from infercast.cli import space as _space  # noqa: E402, F401
from infercast.cli import train as _train  # noqa: E402, F401


def main() -> None:
    app()


__all__ = [
    "Table",
    "Text",
    "app",
    "console",
    "err_console",
    "human_bytes",
    "human_count",
    "main",
    "print_error",
    "print_json",
    "run_guarded",
]
