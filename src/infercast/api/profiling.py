"""``profile``: the one entry point that runs a profiling campaign (``measurement.CampaignSpec``)
on any executor — here, with the local engine (``local``); a kernel campaign planned in two
halves around the kernels the regressors predict worst (``adaptive``); the nodes of a Ray
cluster (``ray``). The CLI's ``infercast profile`` builds the spec and calls this.

A new executor is one function ``(spec, db, backend, progress, **options) -> summary`` and one
line in ``EXECUTORS``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infercast.errors import InfercastError, install_hint
from infercast.measurement.spec import CampaignSpec

# executor → "module:function", imported when chosen (Ray is an optional dependency)
EXECUTORS: dict[str, str] = {
    "local": "infercast.measurement.profiling:profile",
    "adaptive": "infercast.api.kernel_campaigns:profile_adaptive",
    "ray": "infercast.distributed.campaign:profile_on_ray",
}


def executor(name: str) -> Callable[..., dict[str, Any]]:
    """The function of executor ``name``."""
    if name not in EXECUTORS:
        raise InfercastError(f"executor {name!r}: choose among {', '.join(EXECUTORS)}")
    module, _, function = EXECUTORS[name].partition(":")
    try:
        return getattr(importlib.import_module(module), function)
    except ImportError as error:
        missing = error.name or "a dependency"
        hint = install_hint("ray", repr("ray>=2.40")) if missing == "ray" else f"install {missing}"
        raise InfercastError(f"the {name} executor needs {missing}: {hint}") from None


def profile(
    spec: CampaignSpec,
    db: str | Path,
    backend: str = "ort-cpu",
    run_on: str = "local",
    progress: Callable[[str, dict[str, Any]], None] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Run ``spec`` into the store ``db`` with ``backend`` on the executor ``run_on``; rerunning
    resumes. ``options``: the backend's settings (``threads``, ``opt_level``) and the executor's
    own (``adaptive``: ``first_share``, ``hard_share``; ``ray``: ``kinds``, ``address``,
    ``chunk``, ``max_retries``, ``idle_timeout_s``). Returns the campaign's summary."""
    return executor(run_on)(spec, db, backend, progress, **options)
