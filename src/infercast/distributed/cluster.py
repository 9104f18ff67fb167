"""The driver's connection to a Ray cluster."""

from __future__ import annotations

import contextlib
import socket
import sys
from collections.abc import Iterator

from infercast.errors import InfercastError


class ClusterError(InfercastError):
    """No Ray cluster where one was named, or one that cannot do what was asked."""


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    # ray.init retries an address nobody listens on for minutes; a plain connect answers at once
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterError(f"--ray {address!r}: give the head node as HOST:PORT, e.g. 10.0.0.1:6379")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise ClusterError(
            f"no Ray cluster answers at {address} ({error.strerror or error}); start its head with "
            f"`ray start --head --port {port}` there"
        ) from None


@contextlib.contextmanager
def connected(address: str) -> Iterator[None]:
    """Connected to the cluster at ``address`` for the block (disconnected after, unless the
    caller was connected already). Ray's own messages — a node's raylet dying, say — go to
    stderr: stdout stays what the program prints (``--json``)."""
    import ray

    owned = not ray.is_initialized()
    with contextlib.redirect_stdout(sys.stderr):
        if owned:
            _reachable(address)
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        try:
            yield
        finally:
            if owned:
                ray.shutdown()
