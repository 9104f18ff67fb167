"""Energy sensors, exercised by replaying counter traces through the code that reads a device."""

from __future__ import annotations

import csv
import itertools
import time
from pathlib import Path

import pytest

from infercast.measurement.sensors import NoSensor, NvmlSensor, RaplSensor, detect
from infercast.measurement.sensors.nvml import NvmlUnavailable

TRACES = Path(__file__).with_name("traces")
WRAP = 262143328850


def read_trace(name: str) -> list[tuple[float, int]]:
    with (TRACES / name).open() as handle:
        rows = list(csv.reader(handle))[1:]
    return [(float(t), int(v)) for t, v in rows]


def powercap_tree(root: Path, value: int) -> Path:
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text(f"{WRAP}\n")
    (zone / "energy_uj").write_text(f"{value}\n")
    psys = root / "intel-rapl:1"  # platform zone: a superset of the package, never added to it
    psys.mkdir()
    (psys / "name").write_text("psys\n")
    (psys / "max_energy_range_uj").write_text(f"{WRAP}\n")
    (psys / "energy_uj").write_text("5\n")
    sub = root / "intel-rapl:0:0"  # a sub-zone (core) inside package-0: counted by the package
    sub.mkdir()
    return zone / "energy_uj"


def test_rapl_replay_across_the_wrap(tmp_path) -> None:
    trace = read_trace("rapl_wrap.csv")
    counter = powercap_tree(tmp_path, trace[0][1])
    sensor = RaplSensor(tmp_path)
    assert sensor.name == "rapl" and len(sensor.zones) == 1
    energy, previous = 0.0, sensor.snapshot()
    for _, value in trace[1:]:
        counter.write_text(f"{value}\n")
        current = sensor.snapshot()
        energy += sensor.joules_between(previous, current)
        previous = current
    assert any(b < a for (_, a), (_, b) in itertools.pairwise(trace)), "the trace must wrap"
    duration = trace[-1][0] - trace[0][0]
    assert energy == pytest.approx(65.0 * duration, abs=1e-5)
    reading = sensor.measure(sensor.snapshot(), sensor.snapshot(), seconds=duration)
    assert reading.joules == 0.0 and reading.reason is None


def test_rapl_too_short_window_gives_no_figure(tmp_path) -> None:
    powercap_tree(tmp_path, 1000)
    sensor = RaplSensor(tmp_path)
    reading = sensor.measure(sensor.snapshot(), sensor.snapshot(), seconds=0.01)
    assert reading.joules is None and "shorter than" in reading.reason


def test_missing_or_unreadable_rapl_says_so(tmp_path) -> None:
    sensor = detect("cpu", powercap=tmp_path / "absent")
    assert isinstance(sensor, NoSensor)
    reading = sensor.measure(sensor.snapshot(), sensor.snapshot(), 5.0)
    assert reading.joules is None and reading.reason.startswith("no energy sensor on this host")
    assert reading.per_inference(100) is None


class ReplayNvml:
    """pynvml's API over a trace; the counter only changes when the trace says it was refreshed."""

    class NVMLError_NotSupported(Exception):
        pass

    def __init__(self, trace: list[tuple[float, int]] | None, watts: float = 0.0) -> None:
        self.trace, self.watts, self.clock, self.shut = trace, watts, 0.0, False

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        if self.trace is None:
            raise self.NVMLError_NotSupported()
        return [v for t, v in self.trace if t <= self.clock + 1e-9][-1]

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return int(self.watts * 1000)


def test_nvml_counter_replay() -> None:
    nvml = ReplayNvml(read_trace("nvml_counter.csv"))
    sensor = NvmlSensor(0, nvml=nvml)
    assert sensor.name == "nvml" and sensor.counter
    nvml.clock = 0.25
    start = sensor.snapshot()
    nvml.clock = 2.25
    reading = sensor.measure(start, sensor.snapshot(), seconds=2.0)
    assert reading.joules == pytest.approx(250.0 * 2.0)
    nvml.clock = 2.30
    short = sensor.measure(start, sensor.snapshot(), seconds=0.05)  # one 100 ms update at most
    assert short.joules is None and "1 s" in short.reason
    sensor.close()
    assert nvml.shut


def test_nvml_without_energy_counter_integrates_power() -> None:
    nvml = ReplayNvml(None, watts=150.0)
    sensor = NvmlSensor(0, nvml=nvml, sample_period_s=0.005)
    assert sensor.name == "nvml-power" and not sensor.counter
    start = sensor.snapshot()
    time.sleep(1.2)
    end = sensor.snapshot()
    reading = sensor.measure(start, end, seconds=end - start)
    sensor.close()
    # trapezoids cover the sampled span, which ends up to one period short of the window
    assert reading.joules == pytest.approx(150.0 * (end - start), rel=0.03)


def test_detect_opens_nvml_for_a_gpu_when_nvml_answers(monkeypatch) -> None:
    from infercast.measurement.sensors import nvml

    monkeypatch.setattr(nvml, "_load_nvml", lambda: ReplayNvml(read_trace("nvml_counter.csv")))
    sensor = detect("cuda:1")
    assert isinstance(sensor, NvmlSensor) and sensor.name == "nvml" and sensor.handle == 1
    sensor.close()


def test_detect_says_why_when_nvml_cannot_open_the_gpu(monkeypatch) -> None:
    class Broken(ReplayNvml):
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    from infercast.measurement.sensors import nvml

    monkeypatch.setattr(nvml, "_load_nvml", lambda: Broken(None))
    sensor = detect("cuda:0")
    assert isinstance(sensor, NoSensor)
    assert sensor.reason == (
        "no energy sensor on this host: NVML could not open GPU 0: NVML Shared Library Not Found"
    )


def test_detect_reads_rapl_for_the_host(tmp_path) -> None:
    powercap_tree(tmp_path, 1000)
    sensor = detect("cpu", powercap=tmp_path)
    assert isinstance(sensor, RaplSensor) and [z.name for z, _ in sensor.zones] == ["energy_uj"]


def test_nvml_unavailable_is_reported() -> None:
    class Broken(ReplayNvml):
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    with pytest.raises(NvmlUnavailable, match="NVML could not open GPU 0"):
        NvmlSensor(0, nvml=Broken(None))
