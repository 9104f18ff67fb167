"""Intel / AMD RAPL through the Linux powercap interface (``/sys/class/powercap``).

Each top-level zone (``intel-rapl:N``, named ``package-N``; ``psys`` where present is a superset
and is skipped to avoid counting twice) has a cumulative ``energy_uj`` counter that wraps at
``max_energy_range_uj``. The protocol snapshots at every round boundary (well under the wrap
period, minutes at full load), so at most one wrap lies between two snapshots.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infercast.measurement.sensors.base import EnergySensor, SensorUnavailable
from infercast.units import microjoules_to_joules

POWERCAP = Path("/sys/class/powercap")


class RaplUnavailable(SensorUnavailable):
    """No readable RAPL zone; the message says why."""


class RaplSensor(EnergySensor):
    name = "rapl"
    min_window_s = 0.05  # the counters update about every millisecond

    @classmethod
    def serves(cls, device: str) -> bool:
        return not device.startswith("cuda")  # the host's package energy

    @classmethod
    def for_device(cls, device: str, **options: Any) -> RaplSensor:
        return cls(options.get("powercap", POWERCAP))

    def __init__(self, root: Path | str = POWERCAP) -> None:
        root = Path(root)
        zones = (
            sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1) if root.is_dir() else []
        )
        self.zones: list[tuple[Path, int]] = []
        for zone in zones:
            name = (zone / "name").read_text().strip() if (zone / "name").exists() else zone.name
            if name == "psys":
                continue
            try:
                (zone / "energy_uj").read_text()
                wrap = int((zone / "max_energy_range_uj").read_text())
            except PermissionError:
                raise RaplUnavailable(
                    f"RAPL counters at {zone} are not readable by this user (root needed)"
                ) from None
            except (OSError, ValueError) as error:
                raise RaplUnavailable(f"RAPL zone {zone} is unreadable: {error}") from None
            self.zones.append((zone / "energy_uj", wrap))
        if not self.zones:
            raise RaplUnavailable(f"no RAPL package zone under {root}")

    def snapshot(self) -> list[int]:
        return [int(path.read_text()) for path, _ in self.zones]

    def joules_between(self, start: list[int], end: list[int]) -> float:
        total_uj = 0
        for (_, wrap), before, after in zip(self.zones, start, end, strict=True):
            total_uj += after - before if after >= before else after + (wrap - before) + 1
        return microjoules_to_joules(total_uj)
