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
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# two threads starting children at once would otherwise restore each other's hidden values
_STARTING = threading.RLock()


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
