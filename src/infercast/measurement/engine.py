"""Runs the protocol over many models: worker processes, interleaved rounds, energy, failures."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infercast.measurement.backends.base import Backend
from infercast.measurement.protocol import Protocol, ci_half_width, cpu_times, steal_share, summarize
from infercast.measurement.sensors import EnergySensor, NoSensor
from infercast.measurement.worker import serve
from infercast.processes import kill_group, main_module_hidden, start_method
from infercast.store import Measurement


@dataclass(frozen=True)
class Item:
    """One thing to measure: a config id and the model string that builds it."""

    key: str
    model: str
    input_shape: tuple[int, ...] | None = None
    batch: int | None = None


class WorkerFailure(Exception):
    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason


class Worker:
    """A process running ``worker.serve`` (``processes.start_method``); every call has a timeout."""

    def __init__(self, backend: Backend, protocol: Protocol) -> None:
        context = start_method()
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=serve,
            args=(child, backend.spec(), protocol.warmup_s),
            daemon=True,
            name="infercast-worker",
        )
        with main_module_hidden():
            self.process.start()
        child.close()
        self.timeout_s = protocol.timeout_s

    def call(self, *message: Any, timeout_s: float | None = None) -> tuple[Any, ...]:
        try:
            self.conn.send(message)
            if not self.conn.poll(timeout_s or self.timeout_s):
                self.kill()
                raise WorkerFailure(
                    "timeout", f"no answer to {message[0]!r} within {timeout_s or self.timeout_s:g} s"
                )
            reply = self.conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            self.process.join(timeout=5)
            code = self.process.exitcode
            kind = "out-of-memory" if code == -9 else "crash"
            raise WorkerFailure(
                kind, f"the worker process died (exit code {code}) during {message[0]!r}"
            ) from None
        if reply[0] == "error":
            raise WorkerFailure(reply[1], reply[2])
        return reply

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        kill_group(self.process.pid)  # the worker and whatever the user's code forked
        self.process.kill()
        self.process.join(timeout=5)

    def stop(self) -> None:
        if self.alive:
            try:
                self.conn.send(("stop",))
                self.process.join(timeout=5)
            except OSError:
                pass
        if self.alive:
            self.kill()
        kill_group(self.process.pid)


@dataclass
class _Active:
    item: Item
    worker: Worker
    rounds: list[list[float]] = field(default_factory=list)
    drifted: int = 0
    timed_s: float = 0.0
    cpu_start: tuple[int, int] | None = None
    converged: bool = False


class Engine:
    """``run(items, on_result, on_failure)``: every item measured or failed, none lost."""

    def __init__(
        self,
        backend: Backend,
        protocol: Protocol | None = None,
        sensor: EnergySensor | None = None,
        op_runs: int = 0,
    ) -> None:
        """``op_runs`` > 0 adds per-op profiling over that many runs to every measurement."""
        self.backend = backend
        self.op_runs = op_runs
        self.protocol = protocol or Protocol()
        self.sensor = sensor or NoSensor("no energy sensor was asked for")
        self.rng = np.random.default_rng(self.protocol.seed)
        self._idle: list[Worker] = []

    def _worker(self) -> Worker:
        while self._idle:
            worker = self._idle.pop()
            if worker.alive:
                return worker
        return Worker(self.backend, self.protocol)

    def _release(self, worker: Worker) -> None:
        try:
            worker.call("release")
            self._idle.append(worker)
        except WorkerFailure:
            worker.kill()

    def _drop(self, worker: Worker) -> None:
        """After a failed step: a worker that survived it is reused, a dead one forgotten."""
        if worker.alive:
            self._release(worker)

    def run(
        self,
        items: Iterable[Item],
        on_result: Callable[[Item, Measurement], None],
        on_failure: Callable[[Item, str, str], None],
        on_round: Callable[[], None] | None = None,
        deadline: float | None = None,
        timed_only: bool = False,
        keep_workers: bool = False,
        protocol: Protocol | None = None,
    ) -> None:
        """Measure ``items``; after ``deadline`` (a ``time.monotonic()`` value) no new item starts,
        the ones under way finish. ``timed_only`` reads neither energy nor per-op rows (for
        sentinels). With ``keep_workers`` the idle worker processes stay up for the next run
        (spawning one imports torch: seconds); ``close()`` stops them. ``protocol`` replaces the
        engine's rounds, stopping rule and caps for this run (a worker's warm-up is its own)."""
        engine_protocol = self.protocol
        self.protocol = protocol or engine_protocol
        try:
            self._run(items, on_result, on_failure, on_round, deadline, timed_only, keep_workers)
        finally:
            self.protocol = engine_protocol

    def _run(
        self,
        items: Iterable[Item],
        on_result: Callable[[Item, Measurement], None],
        on_failure: Callable[[Item, str, str], None],
        on_round: Callable[[], None] | None,
        deadline: float | None,
        timed_only: bool,
        keep_workers: bool,
    ) -> None:
        pending = deque(items)
        active: list[_Active] = []

        def open_more() -> bool:
            return bool(pending) and (deadline is None or time.monotonic() < deadline)

        try:
            while open_more() or active:
                while open_more() and len(active) < self.protocol.group:
                    item = pending.popleft()
                    worker = self._worker()
                    try:
                        worker.call("load", item.model, item.input_shape, item.batch)
                        active.append(_Active(item, worker, cpu_start=cpu_times()))
                    except WorkerFailure as failure:
                        self._drop(worker)
                        on_failure(item, failure.kind, failure.reason)
                self._round(active, on_failure)
                if on_round is not None:
                    on_round()
                for state in [s for s in active if self._finished(s)]:
                    active.remove(state)
                    self._finish(state, on_result, on_failure, timed_only)
        finally:
            for state in active:
                state.worker.kill()
            if not keep_workers:
                self.close()

    def close(self) -> None:
        """Stop the idle worker processes."""
        for worker in self._idle:
            worker.stop()
        self._idle.clear()

    def _round(self, active: list[_Active], on_failure: Callable[[Item, str, str], None]) -> None:
        ratios = []
        for state in list(active):
            try:
                samples = state.worker.call("round", self.protocol.round_s)[1]
            except WorkerFailure as failure:
                active.remove(state)
                self._drop(state.worker)
                on_failure(state.item, failure.kind, failure.reason)
                continue
            state.rounds.append(samples)
            state.timed_s += sum(samples) / 1000
            if len(state.rounds) > 1:
                best = min(float(np.median(r)) for r in state.rounds[:-1])
                ratios.append(float(np.median(samples)) / best)
        # drift: the whole group slower than its own best at once is the host, not the models
        if ratios and float(np.median(ratios)) > 1 + self.protocol.drift_tolerance:
            for state in active:
                state.drifted += 1

    def _finished(self, state: _Active) -> bool:
        p = self.protocol
        if len(state.rounds) >= p.min_rounds:
            state.converged = ci_half_width(state.rounds, p, self.rng) <= p.ci_target
        return state.converged or len(state.rounds) >= p.max_rounds or state.timed_s >= p.cap_s

    def _finish(
        self,
        state: _Active,
        on_result: Callable[[Item, Measurement], None],
        on_failure: Callable[[Item, str, str], None],
        timed_only: bool,
    ) -> None:
        steal = steal_share(state.cpu_start, cpu_times())
        stats = summarize(state.rounds, state.drifted, steal, self.protocol, cap_hit=not state.converged)
        try:
            _, peak, definition = state.worker.call("memory")
            energy, reason = (None, "timed only") if timed_only else self._energy(state.worker)
            ops = state.worker.call("ops", self.op_runs)[1] if self.op_runs and not timed_only else []
        except WorkerFailure as failure:
            self._drop(state.worker)
            on_failure(state.item, failure.kind, failure.reason)
            return
        measurement = Measurement(
            config_id=state.item.key,
            peak_memory_bytes=peak,
            peak_memory_definition=definition,
            energy_j=energy,
            energy_reason=reason,
            energy_sensor=self.sensor.name,
            ops=ops,
            **stats,
        )
        self._release(state.worker)
        on_result(state.item, measurement)

    def _energy(self, worker: Worker) -> tuple[float | None, str | None]:
        """Joules per inference over one contiguous window long enough for the counter."""
        if isinstance(self.sensor, NoSensor):
            return None, self.sensor.reason
        window = max(self.protocol.energy_window_s, 2 * self.sensor.min_window_s)
        start_time, start = time.perf_counter(), self.sensor.snapshot()
        iterations = worker.call("window", window, timeout_s=self.protocol.timeout_s + window)[1]
        end, seconds = self.sensor.snapshot(), time.perf_counter() - start_time
        reading = self.sensor.measure(start, end, seconds)
        return reading.per_inference(iterations), reading.reason
