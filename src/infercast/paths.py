"""Where output goes, checked before any work: a command that would fail to write its result after
minutes of profiling or screening is refused up front, with one line naming the path and the fix."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from infercast.errors import InfercastError

SQLITE_HEADER = b"SQLite format 3\x00"


class PathError(InfercastError):
    """An output path that cannot be written as asked."""


def check_name_length(path: Path) -> None:
    """Every component of ``path`` fits the file system's name limit."""
    limit = os.pathconf("/", "PC_NAME_MAX") if hasattr(os, "pathconf") else 255
    for part in path.parts:
        if len(os.fsencode(part)) > limit:
            raise PathError(
                f"the file name {part[:40]}… is too long ({len(os.fsencode(part)):,} bytes; this file "
                f"system allows {limit})"
            )


def _writable_parent(path: Path) -> None:
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise PathError(f"cannot write {path}: {parent} is a file, not a directory")
    if not parent.is_dir():
        raise PathError(f"cannot write {path}: the directory {parent} does not exist (create it first)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PathError(f"cannot write {path}: the directory {parent} is not writable by this user")


def _writable_file(path: Path, example: str) -> Path:
    check_name_length(path)
    if path.is_dir():
        raise PathError(
            f"cannot write {path}: it is a directory; name a file inside it, e.g. {path / example}"
        )
    _writable_parent(path)
    if path.exists() and not os.access(path, os.W_OK):
        raise PathError(f"cannot write {path}: the file is read-only")
    return path


def check_output_file(
    path: str | Path, suffixes: Sequence[str] = (), reads: Sequence[str | Path] = ()
) -> Path:
    """An output file this process can create or replace, with one of ``suffixes`` (if given):
    never one of the files the command ``reads`` (by any name or link), and never a SQLite
    database (a store overwritten by a table or a report is measurements lost)."""
    path = Path(path)
    if suffixes and path.suffix not in suffixes:
        raise PathError(f"cannot write {path}: use a {' or '.join(suffixes)} file")
    for source in reads:
        if path.exists() and Path(source).exists() and os.path.samefile(path, source):
            raise PathError(f"cannot write {path}: it is {source}, which this command reads; write elsewhere")
    if path.is_file():
        with path.open("rb") as handle:
            if handle.read(16) == SQLITE_HEADER:
                raise PathError(
                    f"cannot write {path}: it is a SQLite database (a store?), which this would overwrite; "
                    "write elsewhere"
                )
    return _writable_file(path, f"out{suffixes[0] if suffixes else ''}")


def check_output_dir(path: str | Path) -> Path:
    """A directory to write into: an existing one, or one that can be created (parents too)."""
    path = Path(path)
    check_name_length(path)
    if path.exists() and not path.is_dir():
        raise PathError(f"cannot write into {path}: it is a file, not a directory; name a directory")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise PathError(f"cannot create {path}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PathError(f"cannot write into {path}: {existing} is not writable by this user")
    return path


def check_store_file(path: str | Path) -> Path:
    """A store a command will write to: an existing writable file, or one its directory can hold."""
    return _writable_file(Path(path), "runs.db")


def cache_root() -> Path:
    """Where infercast keeps what it computes once (predictors trained on first use, captured
    graphs): ``INFERCAST_CACHE``, else ``$XDG_CACHE_HOME/infercast`` or ``~/.cache/infercast``."""
    if os.environ.get("INFERCAST_CACHE"):
        return Path(os.environ["INFERCAST_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "infercast"
