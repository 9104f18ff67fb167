"""``CampaignSpec``: one profiling campaign — which configs of a design space, measured how — as
one frozen value. The CLI, the Python API and the Ray driver build it the same way, and every
executor (the local engine, an adaptive kernel campaign, a Ray cluster: ``api.profiling``) runs
the configs ``rows`` draws under the campaign name it gives, so two executors given one spec
measure the same configs into the same campaign."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

from infercast.measurement.backends.base import MeasureError
from infercast.measurement.protocol import Protocol
from infercast.resources import check_fits

# a campaign holds each config's row (parameters and features) until it is stored: its size at
# peak, measured with tracemalloc on carb-resnet rows
_ROW_BYTES = 3_500


@dataclass(frozen=True)
class CampaignSpec:
    """``n`` configs of ``space`` (a built-in name or a YAML file) drawn with ``seed``
    (``stratified``: every parameter's values equally often; else uniformly), each measured by
    ``protocol``; ``energy``: read the host's energy sensor; ``op_runs`` > 0: also profile every
    executed kernel over that many runs; ``limit``: measure only the first ``limit`` configs of
    the sample in this run (a later run without it completes the same campaign); ``sentinels``:
    take sentinel passes; ``campaign``: the campaign's name (by default from space, n, seed and
    sampling)."""

    space: str
    n: int = 500
    seed: int = 0
    stratified: bool = True
    protocol: Protocol = field(default_factory=Protocol)
    energy: bool = True
    op_runs: int = 0
    limit: int | None = None
    sentinels: bool = True
    campaign: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.space, str) or not self.space:
            raise MeasureError(f"space={self.space!r}: name a design space or a YAML file")
        for name in ("n", "seed", "op_runs"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, numbers.Integral)
                or value < (1 if name == "n" else 0)
            ):
                least = "1 or more" if name == "n" else "0 or more"
                raise MeasureError(f"{name}={value!r}: a whole number, {least}")
        if self.limit is not None and (not isinstance(self.limit, numbers.Integral) or self.limit < 1):
            raise MeasureError(f"limit={self.limit!r}: measure at least one config (or leave it out)")
        if not isinstance(self.protocol, Protocol):
            raise MeasureError(f"protocol={self.protocol!r}: a measurement.Protocol")

    def rows(self, precisions: tuple[str, ...] | None = None) -> tuple[list[dict[str, Any]], str]:
        """The config rows the campaign measures and its name. With ``precisions`` (what the
        backend can run) the sample is drawn from the configs of those precisions only."""
        from infercast.space import get, restrict

        chosen = get(self.space)
        if precisions is not None and any(p.name == "precision" for p in chosen.params):
            chosen = restrict(chosen, "precision", precisions)
        count = self.n if self.limit is None else min(self.n, self.limit)
        check_fits(f"profiling {chosen.name}", count, _ROW_BYTES, " configs")
        # a small space sampled with replacement repeats configs: each is measured once
        configs = chosen.sample(self.n, seed=self.seed, stratified=self.stratified)
        configs = configs.drop_duplicates("id", ignore_index=True)
        name = f"{chosen.name}:n={self.n}:seed={self.seed}:{'stratified' if self.stratified else 'uniform'}"
        return chosen.config_rows(configs.head(self.limit)), self.campaign or name
