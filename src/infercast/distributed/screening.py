"""Stage 1 of screening sharded across a Ray cluster: only the survivors come back.

Each shard task samples its own slice of the space (seed derived from the run's seed and the
shard's index), featurises it in closed form, applies the fast models and the budget margins,
and returns the survivors and its nearest rejects. The predictor travels as its files' bytes
(``ray.put`` once; nodes need no shared file system) and is loaded once per worker process.
Stage 2 — the full blend on the survivors, the budgets, the Pareto shortlist — runs on the
driver, exactly as in a local run. A user space (YAML file) travels as its text.

The candidates are a different uniform sample than a local run with the same seed draws (each
shard draws its own); the same ``--seed`` and ``--shards`` give the same candidates again.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.distributed.cluster import connected
from infercast.screen import Budgets, Candidates, ScreenError, ScreenResult, screen, stage_one
from infercast.screen.candidates import chunk_seed as shard_seed

_LOADED: dict[str, Any] = {}


def _predictor_files(folder: str | Path) -> dict[str, bytes]:
    folder = Path(folder)
    files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    if "meta.json" not in files:
        raise ScreenError(f"{folder}: not a predictor directory (no meta.json)")
    return files


def _load(files: dict[str, bytes]) -> Any:
    """The predictor from its files, written once per content into a temp folder of this node."""
    from infercast.predictors import CascadeBlend

    digest = hashlib.sha1(b"".join(k.encode() + v for k, v in sorted(files.items()))).hexdigest()[:16]
    if digest not in _LOADED:
        folder = Path(tempfile.gettempdir()) / f"infercast-predictor-{digest}"
        for name, data in files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        _LOADED[digest] = CascadeBlend.load(folder)
    return _LOADED[digest]


def _space(name: str, text: str | None) -> str:
    """A built-in space's name as is; a user space's YAML text written on this node."""
    if text is None:
        return name
    digest = hashlib.sha1(text.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"infercast-space-{digest}.yaml"
    if not path.is_file():
        path.write_text(text)
    return str(path)


def _shard(
    files: dict[str, bytes],
    space: tuple[str, str | None],
    n: int,
    seed: int,
    offset: int,
    budgets: dict[str, float | None],
    risk: float,
    keep_closest: int,
) -> tuple[pd.DataFrame, dict[str, Any], pd.DataFrame]:
    from infercast.screen import from_space

    predictor = _load(files)
    candidates = from_space(_space(*space), n, seed)
    kept, report, closest = stage_one(
        predictor, candidates, Budgets(**budgets), risk, keep_closest=keep_closest
    )
    for frame in (kept, closest):
        if "_index" in frame.columns:
            frame["_index"] += offset
    return kept, report, closest


def screen_on_ray(
    predictor: str | Path,
    space: str,
    n: int,
    budgets: Budgets,
    objectives: list[str],
    address: str,
    seed: int = 0,
    shards: int | None = None,
    keep_closest: int = 10,
    **options: Any,
) -> ScreenResult:
    """``screen`` with stage 1 sharded over the Ray cluster at ``address`` (``shards`` tasks, by
    default two per CPU of the cluster and at most 250,000 candidates each). ``options`` go to
    ``screen`` (shortlist, risk, predictor_b, weights, platform, progress)."""
    import ray

    from infercast.predictors import CascadeBlend
    from infercast.space import get as get_space

    if n < 1:
        raise ScreenError(f"--n={n} must be at least 1")
    chosen = get_space(space)
    text = Path(space).read_text() if space.endswith((".yaml", ".yml")) else None
    model = CascadeBlend.load(predictor)
    with connected(address):
        cpus = int(ray.cluster_resources().get("CPU", 1))
        shards = shards or max(2 * cpus, -(-n // 250_000))
        if shards < 1 or shards > n:
            raise ScreenError(f"--shards={shards}: between 1 and the number of candidates ({n})")
        sizes = [n // shards + (i < n % shards) for i in range(shards)]
        candidates = Candidates(
            pd.DataFrame(), chosen, source=f"{chosen.name} (n={n}, seed={seed}, {shards} Ray shards)", count=n
        )

        files = ray.put(_predictor_files(predictor))
        shard_space = (chosen.name if text is None else space, text)
        runner = _StageOneOnRay(files, shard_space, sizes, seed, keep_closest, chosen)
        return screen(model, candidates, budgets, objectives, stage_one_runner=runner, **options)


class _StageOneOnRay:
    """``screen``'s stage 1 over the cluster: each shard samples and filters its candidates on a
    node, and only the survivors and the nearest misses come back to be merged."""

    def __init__(
        self,
        files: Any,
        space: tuple[str, str | None],
        sizes: list[int],
        seed: int,
        keep_closest: int,
        chosen: Any,
    ) -> None:
        self.files, self.space, self.sizes = files, space, sizes
        self.seed, self.keep_closest, self.chosen = seed, keep_closest, chosen

    def __call__(
        self, model: Any, candidates: Candidates, budgets: Budgets, risk: float, progress: Any
    ) -> tuple[pd.DataFrame, dict[str, Any], pd.DataFrame]:
        import ray

        started = time.perf_counter()
        task = ray.remote(_shard)
        refs, offset, n = {}, 0, sum(self.sizes)
        for i, size in enumerate(self.sizes):
            shard = (size, shard_seed(self.seed, i), offset, asdict(budgets), risk, self.keep_closest)
            refs[task.options(num_cpus=1).remote(self.files, self.space, *shard)] = size
            offset += size
        kept, closest, reports, done = [], [], [], 0
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            shard_kept, report, shard_closest = ray.get(ready[0])
            kept.append(shard_kept)
            closest.append(shard_closest)
            reports.append(report)
            done += refs[ready[0]]
            if progress is not None:
                progress("stage 1 (Ray)", done, n)
        return self._merged(kept, reports, closest, time.perf_counter() - started)

    def _merged(
        self,
        kept: list[pd.DataFrame],
        reports: list[dict[str, Any]],
        closest: list[pd.DataFrame],
        seconds: float,
    ) -> tuple[pd.DataFrame, dict[str, Any], pd.DataFrame]:
        """The shards' survivors (each config once), their stage-1 report summed, the nearest misses."""
        n = sum(self.sizes)
        merged = pd.concat(kept, ignore_index=True).drop_duplicates(
            [p.name for p in self.chosen.params], ignore_index=True
        )
        count = sum(r["survivors"] for r in reports)
        nearest = pd.concat(closest, ignore_index=True)
        report = {
            "seconds": seconds,
            "removed_by": {t: sum(r["removed_by"][t] for r in reports) for t in reports[0]["removed_by"]},
            "margins_pct": reports[0]["margins_pct"],
            "survivors": count,
            "distinct_survivors": len(merged),
            "elimination_rate": 1 - count / n,
            "shards": len(self.sizes),
            "shard_seconds_median": float(np.median([r["seconds"] for r in reports])),
        }
        return merged, report, nearest.nsmallest(self.keep_closest, "_violation") if len(nearest) else nearest


__all__ = ["screen_on_ray", "shard_seed"]
