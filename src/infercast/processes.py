"""Child processes that never run the caller's script again, and that take what user code
started with them when they go.

``multiprocessing``'s spawn and forkserver start methods import the parent's main module in every
child, so that the child can unpickle functions defined there. infercast's children (measurement
workers, the guarded capture of user code) run infercast functions on model strings and files
and need nothing of it; importing it again re-ran a user's script without an
``if __name__ == "__main__":`` guard in each child — whose own ``infercast.measure`` then failed
("An attempt has been made to start a new process before the current process has finished its
bootstrapping phase") — and imported the ``infercast`` console script's CLI in each worker.

Both kinds of child fork from one server process (``start_method``) that imported PyTorch and ONNX
Runtime once: spawning each from scratch imported them again, seconds of CPU per child.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

# two threads starting children at once would otherwise restore each other's hidden values
_STARTING = threading.RLock()
# what the children run and the libraries they import, imported once by the fork server
_PRELOAD = ("infercast.measurement.worker", "infercast.models.guarded", "torch", "onnxruntime")


@cache
def start_method() -> Any:
    """The ``multiprocessing`` context infercast's children start with: forked from a server
    that preloaded what they import, or spawned where there is no fork server (Windows). A child
    forked so starts in the server's folder and environment, not the caller's: one that depends
    on them is given them (``models.guarded``)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(_PRELOAD))
    return context


@contextmanager
def main_module_hidden() -> Iterator[None]:
    """While a child process starts: the main module shows neither its spec nor its file, which
    is how ``multiprocessing`` finds what to import in the child (``spawn.get_preparation_data``);
    both are put back after."""
    main = sys.modules["__main__"]
    with _STARTING:
        spec, file = main.__spec__, main.__dict__.pop("__file__", None)
        main.__spec__ = None
        try:
            yield
        finally:
            main.__spec__ = spec
            if file is not None:
                main.__file__ = file


def lead_own_group() -> None:
    """In a child that runs user code: become the leader of a new process group, so that what the
    code forks (and what those fork) is killed with it (``kill_group``) instead of outliving the
    command while holding its output pipes; and send what the code prints to stderr, so a
    ``print()`` in a factory never mixes into ``--json`` output."""
    if hasattr(os, "setpgid"):
        os.setpgid(0, 0)
    os.dup2(2, 1)


def kill_group(pid: int | None) -> None:
    """Kill the process group ``lead_own_group`` made (the child and all it started); nothing
    when it is gone already."""
    if pid is None or not hasattr(os, "killpg"):
        return
    try:
        if os.getpgid(pid) != pid:
            return  # not (or no longer) a group leader of ours: never signal another group
    except ProcessLookupError:
        pass
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
