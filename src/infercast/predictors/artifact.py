"""Predictor directories: native model files + ``meta.json``; loading never executes code.

``meta.json`` carries the format and its version, the predictor kind, the feature schema it was
trained on, the platform (backend, settings, fingerprint), the library versions that wrote it and
the training metrics. A directory from another format version or feature schema is refused with
a message that says what to do, never half-loaded. docs/formats.md documents every field.
"""

from __future__ import annotations

import json
import platform as host
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np

from infercast.features import FEATURE_NAMES, FEATURE_SCHEMA_VERSION
from infercast.files import FileError, check_finished, read_json
from infercast.predictors.data import SETTING_FEATURES
from infercast.predictors.errors import PredictorError
from infercast.tables import to_python

FORMAT = "infercast-predictor"
FORMAT_VERSION = 1
_LIBRARIES = (
    "infercast",
    "xgboost-cpu",
    "xgboost",
    "lightgbm",
    "scikit-learn",
    "numpy",
    "onnxruntime",
    "torch",
)


def library_versions() -> dict[str, str]:
    versions = {"python": host.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return versions


def write_meta(folder: Path, kind: str, body: dict[str, Any], metadata: dict[str, Any] | None) -> Path:
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "feature_schema": FEATURE_SCHEMA_VERSION,
        "libraries": library_versions(),
        **(metadata or {}),
        **body,
    }
    path = folder / "meta.json"
    path.write_text(json.dumps(meta, indent=1, default=lambda v: to_python(v, strict=True)) + "\n")
    return path


def read_meta(
    folder: str | Path, kind: str | None = None, required: dict[str, type | tuple[type, ...]] | None = None
) -> dict[str, Any]:
    """meta.json of a predictor directory, checked: the format, its version, the kind, and the
    ``required`` keys with their types (a damaged or hand-edited file is refused by name)."""
    folder = Path(folder)
    path = folder / "meta.json"
    if not folder.is_dir():
        raise PredictorError(f"{folder}: no such predictor directory (no meta.json)")
    if not path.exists():
        raise PredictorError(f"{folder}: not a predictor directory (no meta.json)")
    try:
        check_finished(folder)
        meta = read_json(path, "meta.json")
    except FileError as error:
        raise PredictorError(str(error)) from None
    if not isinstance(meta, dict):
        raise PredictorError(
            f"{path}: not an infercast predictor (a JSON {type(meta).__name__}, not an object)"
        )
    if meta.get("format") != FORMAT:
        raise PredictorError(f"{path}: not an infercast predictor (format={meta.get('format')!r})")
    if meta.get("format_version") != FORMAT_VERSION:
        raise PredictorError(
            f"{path}: predictor format version {meta.get('format_version')!r}, this infercast reads "
            f"{FORMAT_VERSION}; retrain it with `infercast train`"
        )
    if kind is not None and meta.get("kind") != kind:
        raise PredictorError(f"{folder}: a {meta.get('kind')!r} predictor, not a {kind!r} one")
    for key, expected in (required or {}).items():
        if key not in meta:
            raise PredictorError(f"{path}: the key {key!r} is missing (a damaged or incomplete predictor)")
        if not isinstance(meta[key], expected):
            names = " or ".join(
                t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,))
            )
            raise PredictorError(f"{path}: {key!r} must be a JSON {names}, not {type(meta[key]).__name__}")
    return meta


@contextmanager
def damaged_as_error(folder: Path) -> Iterator[None]:
    """A meta.json whose parts do not have the shape this infercast wrote (checked key by key by
    ``read_meta``; deeper entries here) is refused with one message naming it."""
    try:
        yield
    except PredictorError:
        raise
    except KeyError as error:
        raise PredictorError(
            f"{folder / 'meta.json'}: the entry {error} is missing (a damaged predictor)"
        ) from None
    except (TypeError, ValueError, AttributeError, IndexError) as error:
        raise PredictorError(
            f"{folder / 'meta.json'}: damaged ({type(error).__name__}: {str(error)[:200]})"
        ) from None


def check_feature_schema(meta: dict[str, Any], folder: Path, names: list[str]) -> None:
    if meta.get("feature_schema") != FEATURE_SCHEMA_VERSION:
        raise PredictorError(
            f"{folder}: trained on feature schema {meta.get('feature_schema')!r}, this infercast computes "
            f"schema {FEATURE_SCHEMA_VERSION}; retrain it with `infercast train`"
        )
    unknown = [n for n in names if n not in (*FEATURE_NAMES, *SETTING_FEATURES) and not n.startswith("log_")]
    if unknown:
        raise PredictorError(
            f"{folder}: meta.json names features this infercast does not know: {unknown[:5]}"
        )


@dataclass(frozen=True)
class PlatformInfo:
    """The platform a predictor was trained on (meta.json's ``platform``)."""

    id: str | None = None
    backend: str = "ort-cpu"
    settings: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PlatformInfo:
        """A store's platform row (or meta.json's ``platform``); other keys are ignored."""
        return cls(
            row.get("id"),
            row.get("backend") or "ort-cpu",
            dict(row.get("settings") or {}),
            dict(row.get("fingerprint") or {}),
        )

    def to_meta(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PredictorInfo:
    """What a predictor's metadata says about where it came from, typed: the platform, the latency
    statistic it learned, the configs it trained on and the model families (``space:NAME``)."""

    platform: PlatformInfo = field(default_factory=PlatformInfo)
    latency_stat: str = "low_ms"
    train_config_ids: frozenset[str] = frozenset()
    trained_models: tuple[str, ...] = ()

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any]) -> PredictorInfo:
        training = metadata.get("training") or {}
        return cls(
            PlatformInfo.from_row(metadata.get("platform") or {}),
            training.get("latency_stat") or "low_ms",
            frozenset(training.get("train_config_ids") or ()),
            tuple(training.get("models") or ()),
        )


def checked_numbers(values: Any, where: str, lowest: float | None = None) -> np.ndarray:
    """Numbers read from a predictor file as an array, refused (naming ``where``) when one is not
    finite or is below ``lowest``: a damaged or hand-edited file never predicts NaN or nonsense."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise PredictorError(f"{where}: not a list of numbers") from None
    if not np.isfinite(array).all():
        raise PredictorError(f"{where}: holds a value that is not a finite number (a damaged predictor)")
    if lowest is not None and (array < lowest).any():
        raise PredictorError(f"{where}: holds a value below {lowest:g} (a damaged predictor)")
    return array


def inside_folder(folder: Path, filename: str) -> Path:
    """A file named by meta.json, refused if the name escapes the predictor directory."""
    path = (folder / filename).resolve()
    if folder.resolve() not in path.parents:
        raise PredictorError(f"{folder}: meta.json names a file outside the directory: {filename!r}")
    if not path.exists():
        raise PredictorError(f"{folder}: {filename} is missing (the predictor directory is incomplete)")
    if not path.is_file():
        raise PredictorError(f"{folder}: {filename} is not a regular file (a FIFO, device or directory)")
    return path
