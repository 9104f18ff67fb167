"""The local executor of a profiling campaign: a ``CampaignSpec``'s configs measured here, in
worker processes, into a store (``api.profiling`` runs a spec on any executor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infercast.measurement import backends
from infercast.measurement.backends.base import Backend
from infercast.measurement.campaign import Progress, run_campaign
from infercast.measurement.spec import CampaignSpec


def profile(
    spec: CampaignSpec,
    db: str | Path,
    backend: str | Backend = "ort-cpu",
    progress: Progress | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """Measure ``spec``'s configs into the store ``db`` with ``backend`` (a name and its
    ``settings``, or a ``Backend``); rerunning resumes.

    ``progress(event, summary)`` is called with ``"start"`` (after planning: ``summary["todo"]``
    is known), ``"done"``, ``"failed"``, ``"round"`` and ``"sentinels"``. Returns the summary:
    done, failed, skipped, median CI half-width, and (``spec.sentinels``) the sentinel passes and
    the platform's drift (``run_campaign``)."""
    chosen = backend if isinstance(backend, Backend) else backends.get(backend, **settings)
    rows, name = spec.rows(chosen.precisions)
    summary = run_campaign(
        rows, db, chosen, name, spec.protocol, spec.energy, spec.op_runs, progress, sentinels=spec.sentinels
    )
    restricted = restriction_note(spec.space, chosen)
    return {**summary, "restricted": restricted} if restricted else summary


def restriction_note(space: str, backend: Backend) -> str | None:
    """What a campaign of ``space`` on ``backend`` leaves out: the precisions it cannot run."""
    from infercast.space import get

    param = next((p for p in get(space).params if p.name == "precision"), None)
    if param is None or backend.precisions is None:
        return None
    left_out = [v for v in param.choices if v not in backend.precisions]
    if not left_out:
        return None
    return (
        f"sampled precision {', '.join(backend.precisions)} only: {backend.name} cannot run "
        f"{', '.join(left_out)}"
    )
