"""The isolated worker process: one backend, one model at a time, driven over a pipe.

The parent sends commands and waits with a timeout; a model that hangs, crashes the process or
exhausts memory costs only its worker, which the parent kills and replaces.
"""

from __future__ import annotations

import ctypes
import gc
import re
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from infercast.errors import InfercastError

# the failure kind of a model that cannot load as given (a user error, not a failure to run)
USER_ERROR = "input"
RSS_DEFINITION = "process peak RSS increase over the session (weights, arena, activations, workspace)"


def failure_kind(error: InfercastError) -> str:
    """``USER_ERROR`` when infercast refused the model as given (no input shape, a missing
    function); "error" when the model's own code raised (the refusal then carries its cause)."""
    return "error" if error.__cause__ is not None else USER_ERROR


def _status(key: str) -> int:
    match = re.search(rf"{key}:\s+(\d+) kB", Path("/proc/self/status").read_text())
    return int(match.group(1)) * 1024 if match else 0


def _return_free_heap() -> None:
    """Hand freed heap pages back to the OS (glibc ``malloc_trim``). Without it a session reuses
    what building and exporting the model freed, and its peak shows no RSS increase at all."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return


def _reset_peak_rss() -> bool:
    """Linux resets VmHWM to the current RSS when 5 is written to clear_refs."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def serve(conn: Connection, backend_spec: dict[str, Any], warmup_s: float) -> None:
    from infercast.measurement import backends
    from infercast.models import load_model
    from infercast.processes import lead_own_group

    lead_own_group()

    spec = dict(backend_spec)
    backend = backends.get(spec.pop("name"), **spec)
    # The collections between models (what the last one left must not count in the next one's
    # peak) each walked every object PyTorch, ONNX and ONNX Runtime created on import, a good part
    # of every config's time. Frozen, those objects are never scanned again.
    gc.collect()
    gc.freeze()
    session = None
    baseline: int | None = None
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone: nothing left to measure for
        command, args = message[0], message[1:]
        try:
            if command == "stop":
                return
            if command == "load":
                model, input_shape, batch = args
                if session is not None:
                    session.close()
                    session = None
                gc.collect()
                _return_free_heap()
                baseline = _status("VmRSS") if backend.memory_from_load and _reset_peak_rss() else None
                loaded = load_model(model, input_shape, batch)
                shape = loaded.input_shape
                prepared = backend.prepare(loaded)
                if not backend.memory_from_load:
                    del loaded
                    gc.collect()
                    _return_free_heap()
                    baseline = _status("VmRSS") if _reset_peak_rss() else None
                session = backend.open(prepared, shape)
                del prepared
                session.reset_peak_memory()
                session.time_iterations(warmup_s)
                conn.send(("ready", list(shape)))
            elif command == "round":
                conn.send(("samples", session.time_iterations(args[0])))
            elif command == "ops":
                conn.send(("ops", session.profile_ops(args[0])))
            elif command == "window":
                conn.send(("window", len(session.time_iterations(args[0]))))
            elif command == "memory":
                own = session.session_peak_memory()
                if own is not None:
                    conn.send(("memory", own[0], own[1]))
                elif baseline is None:
                    conn.send(("memory", None, "peak RSS cannot be reset on this kernel"))
                else:
                    conn.send(("memory", _status("VmHWM") - baseline, RSS_DEFINITION))
            elif command == "release":
                if session is not None:
                    session.close()
                    session = None
                gc.collect()
                conn.send(("released",))
        except MemoryError:
            session = None
            gc.collect()
            conn.send(("error", "out-of-memory", "MemoryError"))
        except InfercastError as error:
            conn.send(("error", failure_kind(error), " ".join(str(error).split())[:2000]))
        except Exception as error:
            text = str(error).strip().splitlines()[0] if str(error).strip() else ""
            conn.send(("error", "error", f"{type(error).__name__}: {text}"[:2000]))
