"""Files a user hands us, read without trusting them, and directories written whole or not at all.

``read_json`` reads only a regular file (a FIFO or ``/dev/zero`` named ``meta.json`` would block or
never end), of a bounded size, and turns every way a JSON text can be hostile (invalid, nested
deeper than Python's parser recurses, not UTF-8) into one error that names the file.

``replaced_directory`` writes a directory (a predictor) beside its destination, marked
unfinished, and swaps it in at the end: on Linux both names trade places in one system call
(``renameat2`` with ``RENAME_EXCHANGE``), so a process killed at any moment leaves the old
directory or the new one at the destination, never a mix and never neither. A directory still
marked unfinished is refused by ``check_finished``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from infercast.errors import InfercastError

JSON_LIMIT_BYTES = 1 << 30
UNFINISHED = ".infercast-unfinished"
_PARTIAL = ".partial-"


class FileError(InfercastError):
    """A file that cannot be read as what it claims to be, or a directory that cannot be written."""


def regular_file(path: Path, what: str = "file") -> Path:
    """``path`` if it is a regular file (after links): FIFOs, devices and sockets are refused."""
    try:
        mode = path.stat().st_mode
    except OSError:
        raise FileError(f"{path}: the {what} is missing") from None
    if not stat.S_ISREG(mode):
        raise FileError(f"{path}: the {what} is not a regular file (a FIFO, device or directory)")
    return path


def read_json(path: str | Path, what: str = "file", limit: int = JSON_LIMIT_BYTES) -> Any:
    """The JSON value in ``path``, or a ``FileError`` naming the file and what is wrong."""
    return read_json_text(path, what, limit)[0]


def read_json_text(path: str | Path, what: str = "file", limit: int = JSON_LIMIT_BYTES) -> tuple[Any, bytes]:
    """``read_json``'s value with the bytes it was parsed from."""
    path = regular_file(Path(path), what)
    size = path.stat().st_size
    if size > limit:
        raise FileError(f"{path}: the {what} is {size:,} bytes, more than the {limit:,} this reads")
    text = path.read_bytes()
    try:
        return json.loads(text), text
    except (ValueError, UnicodeDecodeError) as error:
        raise FileError(f"{path}: not valid JSON ({str(error)[:120]})") from None
    except RecursionError:
        raise FileError(f"{path}: not a file infercast wrote (JSON nested too deep to read)") from None


def check_finished(folder: Path) -> None:
    """Refuse a directory a writer never finished (killed before it was swapped into place)."""
    if (folder / UNFINISHED).exists():
        raise FileError(
            f"{folder}: a predictor that was being written and never finished (the process writing it "
            "stopped); write it again"
        )


def _exchange(first: Path, second: Path) -> bool:
    """Swap two existing paths atomically (Linux ``renameat2``); False where that is not there."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    libc = ctypes.CDLL(name, use_errno=True)
    if not hasattr(libc, "renameat2"):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = libc.renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange)
    if result != 0:
        error = ctypes.get_errno()
        if error in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: the file system cannot swap
            return False
        raise OSError(error, os.strerror(error), str(second))
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_leftovers(out: Path) -> None:
    """Temporary directories of writers of ``out`` that died before they could remove them."""
    for path in out.parent.glob(f".{out.name}{_PARTIAL}*"):
        pid = path.name.rsplit("-", 2)[-2]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def check_replaceable(out: Path, reads: tuple[Path, ...] = ()) -> Path:
    """``out`` can become a predictor directory: new, empty, or a predictor (replaced whole) —
    never one of the directories the command reads, nor a foreign directory it would wipe."""
    out = Path(out)
    for source in reads:
        if out.exists() and Path(source).exists() and out.resolve() == Path(source).resolve():
            raise FileError(
                f"{out} is the predictor this command reads: write the result to another directory"
            )
    if out.is_dir() and any(out.iterdir()) and not (out / "meta.json").is_file():
        raise FileError(
            f"{out} is a directory that holds other files and no predictor: name a new or empty directory "
            "(nothing was written)"
        )
    return out


@contextmanager
def replaced_directory(out: str | Path) -> Iterator[Path]:
    """Yield a new directory beside ``out`` to write into; when the block ends without an error it
    replaces ``out`` whole (``out`` must pass ``check_replaceable``)."""
    out = check_replaceable(Path(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(out)
    partial = out.parent / f".{out.name}{_PARTIAL}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    partial.mkdir()
    (partial / UNFINISHED).write_text("infercast is writing this directory\n")
    try:
        yield partial
        (partial / UNFINISHED).unlink()
        if out.is_dir() and _exchange(partial, out):
            shutil.rmtree(partial)
            return
        if out.is_dir():
            aside = out.parent / f".{out.name}{_PARTIAL}{os.getpid()}-old"
            out.rename(aside)
            partial.rename(out)
            shutil.rmtree(aside)
        else:
            partial.rename(out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def write_cached(path: Path, text: str) -> None:
    """Write a cache file whole or not at all (a reader never sees half of it); a cache that
    cannot be written only costs time, so a failure is ignored."""
    partial = path.with_name(f"{_PARTIAL}{uuid.uuid4().hex}-{path.name}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)
