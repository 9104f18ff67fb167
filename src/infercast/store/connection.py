"""Opening a store file: how long to wait for another process writing it, and how a new store
gets its name — built beside it and given the name only when its schema is complete, so a first
write that fails (disk full, a file size limit, a kill) leaves no schema-less file that a rerun
would refuse."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from infercast.errors import InfercastError
from infercast.store.schema import write_schema


class StoreError(InfercastError):
    """A store file that cannot be used (not SQLite, not ours, a newer schema)."""


def wait_s() -> float:
    """How long a command waits for a store another process is writing: ``INFERCAST_STORE_WAIT_S``
    seconds, 30 by default; then it stops with a one-line error."""
    value = os.environ.get("INFERCAST_STORE_WAIT_S", "30")
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < 1e6:
        raise StoreError(f"INFERCAST_STORE_WAIT_S={value!r}: give a number of seconds (0 or more)")
    return seconds


def connect(path: Path) -> sqlite3.Connection:
    """A writing connection in WAL mode, waiting ``wait_s()`` for other writers."""
    db = sqlite3.connect(path, timeout=wait_s(), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at each commit point
    db.execute("PRAGMA foreign_keys=ON")
    return db


def create(path: Path, replace: bool) -> None:
    """Write a new store's schema beside ``path``, then give it the name: replacing what is there
    when ``replace`` (a schema-less file), else only if no other process created it meanwhile."""
    partial = path.with_name(f".{path.name}.creating-{os.getpid()}")
    try:
        db = connect(partial)
        try:
            write_schema(db)
        finally:
            db.close()
        if replace:
            partial.replace(path)
        else:
            _publish(partial, path)
    finally:
        for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
            leftover.unlink(missing_ok=True)


def _publish(partial: Path, path: Path) -> None:
    """Link ``partial`` to ``path`` unless ``path`` exists: two processes creating one store at
    once both end up using the first one's, and neither loses rows it wrote."""
    try:
        os.link(partial, path)
    except FileExistsError:
        return
    except OSError:
        # a file system without hard links: a rename, which only a simultaneous creation can race
        if not path.exists():
            partial.replace(path)
