"""Errors a user can act on. The CLI prints their message on one line and exits with code 2."""

from __future__ import annotations

import errno
import sqlite3


def install_hint(extra: str, packages: str) -> str:
    """How to add an optional extra, in a form that works from PyPI's packages and from a checkout."""
    return f"pip install {packages} (or, in an infercast checkout, pip install -e '.[{extra}]')"


class InfercastError(Exception):
    """Base class: the message says what was wrong and, where possible, what to do."""


class MachineMismatchWarning(UserWarning):
    """A prediction for a host measured on another machine than this one: it may be off by a
    factor here (the message says what differs and what to run)."""


class ModelLoadError(InfercastError):
    """A model string that names nothing loadable (unknown zoo name, bad file, failing factory)."""


class InputShapeError(InfercastError):
    """An input shape that cannot be parsed or does not fit the model."""


class CaptureError(InfercastError):
    """A model that could not be turned into an operator graph."""


class TableImportError(InfercastError):
    """A table that cannot be imported (``db import``); the message names the column or row."""


_OS_ADVICE = {
    errno.ENOSPC: "the disk is full: free space or write elsewhere",
    errno.EDQUOT: "the disk quota is used up: free space or write elsewhere",
    errno.EFBIG: "the file grew past this process's file size limit (ulimit -f): raise it or write elsewhere",
    errno.EROFS: "the file system is read-only: write elsewhere",
    errno.EACCES: "permission denied: check the file's and its directory's permissions",
    errno.EPERM: "the operation is not permitted (an immutable or protected file?): write elsewhere",
}

_LOCKED = "the store is locked by another process writing it: wait for it to finish, then run again"
_SQLITE_ADVICE = (
    ("locked", _LOCKED),
    ("busy", _LOCKED),
    ("readonly", "the store cannot be written (a read-only file or directory): copy it somewhere writable"),
    ("disk is full", "the disk is full: free space or write elsewhere"),
    ("disk i/o error", "the store could not be written (disk full, file size limit or a failing disk)"),
    ("unable to open", "the store cannot be opened for writing (its directory is read-only?)"),
)


def explain(error: BaseException) -> str:
    """One line for an error the machine raised while a command read or wrote a file: what
    happened and what to do. Other errors are their own message."""
    if isinstance(error, OSError) and error.errno in _OS_ADVICE:
        where = f" ({error.filename})" if error.filename else ""
        return f"{_OS_ADVICE[error.errno]}{where}; {error.strerror or error}"
    if isinstance(error, sqlite3.Error):
        text = str(error)
        for fragment, advice in _SQLITE_ADVICE:
            if fragment in text.lower():
                return f"{advice} (SQLite: {text})"
        return f"the store could not be used (SQLite: {text})"
    return str(error)
