"""Child processes that never run the caller's script again.

``multiprocessing``'s spawn and forkserver start methods import the parent's main module in every
child, so that the child can unpickle functions defined there. infercast's children (measurement
workers, the guarded capture of user code) run infercast functions on model strings and files
and need nothing of it; importing it again re-ran a user's script without an
``if __name__ == "__main__":`` guard in each child — whose own ``infercast.measure`` then failed
("An attempt has been made to start a new process before the current process has finished its
bootstrapping phase") — and imported the ``infercast`` console script's CLI in each worker.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def main_module_hidden() -> Iterator[None]:
    """While a child process starts: the main module shows neither its spec nor its file, which
    is how ``multiprocessing`` finds what to import in the child (``spawn.get_preparation_data``);
    both are put back after."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    missing = object()
    saved: dict[str, Any] = {name: getattr(main, name, missing) for name in ("__spec__", "__file__")}
    main.__spec__ = None
    if saved["__file__"] is not missing:
        del main.__file__
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is missing:
                if hasattr(main, name):
                    delattr(main, name)
            else:
                setattr(main, name, value)
