"""Options several commands share, declared once: the backend and its settings, the measurement
protocol, a campaign's switches. Help strings that list choices are built from the registries."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from infercast.measurement.backends import BACKENDS
from infercast.space import names as space_names


def choices(names: list[str] | tuple[str, ...]) -> str:
    """``a, b or c``."""
    return " or ".join(", ".join(names).rsplit(", ", 1))


Backend = Annotated[str, typer.Option("--backend", help=choices(list(BACKENDS)))]
# the built-in design spaces, for the options that take one
SPACES = choices(space_names())
Threads = Annotated[int, typer.Option("--threads", help="intra-op threads")]
OptLevel = Annotated[str, typer.Option("--opt-level", help="ONNX Runtime graph optimisation level")]
WarmupS = Annotated[float, typer.Option("--warmup-s", help="seconds of untimed inferences after loading")]
RoundS = Annotated[float, typer.Option("--round-s", help="seconds per timing round")]
MinRounds = Annotated[int, typer.Option("--min-rounds", help="rounds before the CI may stop a model")]
CapS = Annotated[float, typer.Option("--cap-s", help="timing seconds per model at most")]
Group = Annotated[int, typer.Option("--group", help="models whose rounds are interleaved")]
TimeoutS = Annotated[float, typer.Option("--timeout-s", help="a worker step taking longer fails its model")]
Energy = Annotated[bool, typer.Option("--energy/--no-energy", help="read the energy sensor, if any")]
Sentinels = Annotated[
    bool,
    typer.Option(
        "--sentinels/--no-sentinels",
        help="re-measure the backend's sentinel models at the start, at intervals and at the end",
    ),
]
SentinelEveryS = Annotated[
    float,
    typer.Option(
        "--sentinel-every-s", help="seconds between sentinel passes (0: only at the start and the end)"
    ),
]
Ops = Annotated[bool, typer.Option("--ops", help="also profile every executed kernel / op")]
OpRuns = Annotated[int, typer.Option("--op-runs", help="runs profiled per model with --ops")]
Json = Annotated[bool, typer.Option("--json", help="print JSON")]


def backend_settings(name: str, threads: int, opt_level: str) -> dict[str, Any]:
    """The settings ``--threads`` and ``--opt-level`` give backend ``name`` (ONNX Runtime's only
    take an optimisation level)."""
    settings: dict[str, Any] = {"threads": threads}
    if name.startswith("ort-"):
        settings["opt_level"] = opt_level
    return settings


def protocol_of(
    warmup_s: float,
    round_s: float,
    min_rounds: int,
    cap_s: float,
    group: int,
    timeout_s: float,
    sentinel_every_s: float = 600.0,
) -> Any:
    """The measurement protocol the options ask for (``MeasureError`` names a bad value)."""
    from infercast.measurement import Protocol

    return Protocol(
        warmup_s=warmup_s,
        round_s=round_s,
        min_rounds=min_rounds,
        cap_s=cap_s,
        group=group,
        timeout_s=timeout_s,
        sentinel_every_s=sentinel_every_s,
    )
