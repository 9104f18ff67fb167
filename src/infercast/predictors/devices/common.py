"""What every shipped device predictor is: a name, what it was measured with, and a way to
predict captured graphs."""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import pandas as pd

from infercast.errors import InfercastError
from infercast.graph import Graph
from infercast.paths import cache_root
from infercast.version import __version__

Saved = TypeVar("Saved")


def data_file(name: str) -> Path:
    """A file shipped in ``infercast/predictors/devices/data``."""
    return Path(str(resources.files("infercast.predictors.devices") / "data" / name))


@cache
def data_digest(*names: str) -> str:
    """A short digest of shipped data files (``data_file``)."""
    digest = hashlib.sha256()
    for name in names:
        digest.update(data_file(name).read_bytes())
    return digest.hexdigest()[:12]


def trained_once(
    name: str,
    sources: tuple[str, ...],
    train: Callable[[], Saved],
    save: Callable[[Saved, Path], Any],
    load: Callable[[Path], Saved],
) -> Saved:
    """A predictor from the user cache, or trained now from the shipped data files ``sources`` and
    stored there, under the infercast version and those files' digest: an upgrade, or tables
    rebuilt within a version, retrain. ``save`` writes a predictor directory whole or not at all
    (``files.replaced_directory``): two processes training at once each swap in an identical copy,
    and a process killed while saving leaves no half-written one. A read-only cache only costs
    time."""
    folder = cache_root() / f"devices-{__version__}" / f"{name.replace('/', '-')}-{data_digest(*sources)}"
    if (folder / "meta.json").is_file():
        try:
            return load(folder)
        except InfercastError as error:
            raise InfercastError(
                f"{error} (a cached predictor: delete {folder} and it is trained again)"
            ) from None
    model = train()
    with contextlib.suppress(OSError):
        save(model, folder)
    return model


ROUTES = "routes"


def routes_archive(name: str) -> Path:
    """Where the trained predictor directory of shipped device ``name`` ships, zipped."""
    return data_file(ROUTES) / f"{name.replace('/', '-')}.zip"


def pack(folder: Path, archive: Path) -> Path:
    """Zip the predictor directory ``folder`` into ``archive`` (deflated: the JSON trees shrink
    about 4×, which keeps every trained route inside the package's size budget)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            out.write(path, path.relative_to(folder).as_posix())
    return archive


def ship(save: Callable[[Path], object], archive: Path) -> Path:
    """Zip what ``save`` writes into a new folder (a trained predictor directory) into ``archive``."""
    with tempfile.TemporaryDirectory() as folder:
        save(Path(folder))
        return pack(Path(folder), archive)


def load_packed(archive: Path, load: Callable[[Path], Saved]) -> Saved:
    """The predictor ``load`` reads from the directory zipped in ``archive``: unpacked into a
    temporary folder that is gone once loaded (the learners hold their trees in memory)."""
    with tempfile.TemporaryDirectory(prefix="infercast-") as folder, zipfile.ZipFile(archive) as zipped:
        zipped.extractall(folder)
        return load(Path(folder))


@cache
def cards() -> dict[str, dict[str, Any]]:
    """The accuracy card of each shipped device (``benchmarks/device_cards.py`` writes them)."""
    path = data_file("cards.json")
    return json.loads(path.read_text())["cards"] if path.is_file() else {}


@dataclass(frozen=True)
class DeviceInfo:
    """A shipped device predictor, as ``infercast devices`` lists it."""

    name: str
    device: str
    runtime: str
    setting: str
    dtype: str
    source: str
    n_train: int
    accepts: str  # which models it predicts
    # the batch a model is captured at: the one it was measured at, or with ``any_batch`` only
    # where the user gives no input shape (it predicts a step at the input's batch)
    batch: int = 1
    any_batch: bool = False
    trained_on: str = "networks"  # what n_train counts
    # the design space whose configs it predicts from the space's own closed-form features
    # (``predict_features``), without capturing them; None: it reads graphs only
    space: str | None = None
    card: dict[str, Any] = field(default_factory=dict)
    # the machine a host was measured on (``platform.fingerprint``'s ``processor`` and the runtime's
    # version): a prediction on another machine says so. Empty for devices measured with their own
    # tools elsewhere (phones, NB201's devices), where this machine is never the device
    fingerprint: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class DevicePredictor(Protocol):
    info: DeviceInfo

    def predict_graphs(self, graphs: list[Graph]) -> pd.DataFrame:
        """``latency_ms``, ``latency_ms_low``, ``latency_ms_high``, ``ood``, ``ood_reason`` per graph."""
        ...


@runtime_checkable
class DeviceSource(Protocol):
    """A source of shipped device predictors: one module beside ``usc.py``, ``nb201.py`` and
    ``hosts.py``, added to ``devices.SOURCES``. Its derived tables live in ``devices/data`` with
    their attribution (built by ``tools/device_tables.py``), its cards in ``cards.json``."""

    def names(self) -> list[str]:
        """Every device setting it ships (``phone/setting``)."""
        ...

    def infos(self) -> list[DeviceInfo]:
        """The facts and card of each."""
        ...

    def load(self, name: str) -> DevicePredictor:
        """The predictor of one, fitted or loaded on first use."""
        ...


@runtime_checkable
class ScreenableSource(DeviceSource, Protocol):
    """A source whose devices screen design spaces (``screen.device``): a Σ cost × work route per
    device, and the one input side its devices learned from (None: any)."""

    INPUT_SIDE: int | None

    def physical(self, name: str) -> Any:
        """The device's fitted ``PhysicalLatency``."""
        ...
