"""Capturing a model whose loading runs the user's own code (``file.py:factory``) under a deadline.

A factory may sleep, spin or wait on a lock forever; in the caller's process that would hang the
command with no output. Such a model is loaded and captured in a child process
(``processes.start_method``, in the caller's folder, import path and environment) that is killed
when ``timeout_s`` runs out; the caller gets one clear error instead. Zoo builders, ONNX files and
design-space strings run no user code and are captured in-process (no start-up cost).
"""

from __future__ import annotations

import math
import os
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from infercast.errors import InfercastError, ModelLoadError
from infercast.graph import Graph, capture
from infercast.models import USER_CODE, ZOOS, load_model
from infercast.processes import kill_group, lead_own_group, main_module_hidden, start_method

_EXIT_WAIT_S = 3.0


class LoadTimeout(ModelLoadError):
    """Loading a model took longer than its deadline; the process that ran it was killed."""


# Random in-place fills and the initialisers that call them (which PyTorch dispatches to a mode
# before they reach the fill)
_RANDOM_FILLS = frozenset(
    [
        *(
            getattr(torch.Tensor, name)
            for name in ("normal_", "uniform_", "erfinv_", "exponential_", "log_normal_", "cauchy_")
        ),
        *(
            getattr(torch.nn.init, name)
            for name in (
                "normal_",
                "uniform_",
                "trunc_normal_",
                "kaiming_normal_",
                "kaiming_uniform_",
                "xavier_normal_",
                "xavier_uniform_",
                "orthogonal_",
            )
        ),
    ]
)


class _RandomFillsSkipped(TorchFunctionMode):
    """Builds a model on the meta device without running the random fills of its weight
    initialisation: on meta tensors they fill nothing, yet PyTorch runs them through Python
    decompositions whose first call imports TorchDynamo (pytorchcv's MobileNets, GhostNet and
    DiCENet call ``kaiming_normal_``)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in _RANDOM_FILLS:
            # the initialisers hand their arguments to a mode by keyword
            tensor = args[0] if args else kwargs.get("tensor")
            if isinstance(tensor, torch.Tensor) and tensor.is_meta:
                return tensor
        return func(*args, **kwargs)


def runs_user_code(model: Any) -> bool:
    """Whether loading ``model`` executes code from the user's files."""
    return isinstance(model, str) and bool(USER_CODE.match(model.strip()))


def builds_without_weights(model: Any) -> bool:
    """Whether ``model`` is a zoo or design-space string: one the loader builds with code of this
    package or a zoo's, which can build it on the meta device."""
    if not isinstance(model, str):
        return False
    prefix, _, rest = model.strip().partition(":")
    return bool(rest) and (prefix == "space" or prefix in ZOOS)


def capture_model(
    model: Any,
    input_shape: tuple[int, ...] | str | None = None,
    batch_size: int | None = None,
    timeout_s: float | None = None,
) -> tuple[Graph, str]:
    """Load and capture ``model`` (any the loader takes): its graph and its source (zoo, onnx, …).

    With ``timeout_s``, a model that runs user code is loaded in a separate process and refused
    with :class:`LoadTimeout` when it is not captured in time.

    A graph depends on the architecture, not on the weights: zoo and design-space strings are
    built on the meta device, which allocates and initialises no weights and propagates shapes
    without fake tensors (the same graphs, several times faster). A model whose code makes tensors
    of its own on the CPU cannot run on meta; it is built again with weights, which also gives any
    error its usual message."""
    if timeout_s is not None and not 0 < timeout_s < math.inf:
        raise ValueError(f"--timeout-s={timeout_s!r} must be a positive number of seconds")
    if builds_without_weights(model):
        try:
            with torch.device("meta"), _RandomFillsSkipped():
                loaded = load_model(model, input_shape, batch_size)
            return capture(loaded), loaded.source
        except Exception:  # the build with weights below raises what a user should see
            pass
    if timeout_s is None or not runs_user_code(model):
        loaded = load_model(model, input_shape, batch_size)
        return capture(loaded), loaded.source
    context = start_method()
    receiver, sender = context.Pipe(duplex=False)
    where = (os.getcwd(), list(sys.path), dict(os.environ))
    process = context.Process(
        target=_capture_in_child, args=(sender, model, input_shape, batch_size, where), daemon=True
    )
    with main_module_hidden():
        process.start()
    sender.close()
    try:
        if not receiver.poll(timeout_s):
            raise LoadTimeout(
                f"{model}: loading and capturing did not finish within {timeout_s:g} s (--timeout-s); "
                "the process running it was stopped"
            )
        try:
            reply = receiver.recv()
            # a child that exits on its own releases what it holds (a child killed holding a
            # semaphore makes Python warn of a leak at exit); one that lingers is killed below
            process.join(timeout=_EXIT_WAIT_S)
        except EOFError:
            process.join(timeout=5)
            raise ModelLoadError(
                f"{model}: the process loading it died (exit code {process.exitcode})"
            ) from None
    finally:
        kill_group(process.pid)  # the child and whatever the user's code forked
        if process.is_alive():
            process.kill()
        process.join(timeout=5)
        receiver.close()
    status, *rest = reply
    if status == "ok":
        return rest[0], rest[1]
    message, details = rest
    if status == "user":
        raise ModelLoadError(message)
    raise RuntimeError(f"{message}\n{details}")


def _capture_in_child(
    conn: Connection,
    model: str,
    input_shape: Any,
    batch_size: int | None,
    where: tuple[str, list[str], dict[str, str]],
) -> None:
    lead_own_group()
    try:
        folder, path, environment = where
        os.chdir(folder)
        sys.path[:] = path
        os.environ.clear()
        os.environ.update(environment)
        loaded = load_model(model, input_shape, batch_size)
        conn.send(("ok", capture(loaded), loaded.source))
    except (InfercastError, ValueError) as error:
        conn.send(("user", str(error), ""))
    except Exception as error:
        conn.send(("bug", f"{model}: {type(error).__name__}: {error}", traceback.format_exc()))
    finally:
        conn.close()
