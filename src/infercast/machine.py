"""The CPU a measurement ran on, as far as it decides kernel speed: vendor, family / model /
stepping (an Arm core's implementer, part and variant), the instruction-set features kernels
dispatch on, the cache sizes a core sees and how many logical CPUs there are. Read without
privileges from ``/proc/cpuinfo`` and ``/sys/devices/system/cpu``, or from ``lscpu``'s output;
kept in every platform's fingerprint (``measurement.platform.fingerprint``) and with every shipped host
predictor, so that a prediction for a host can say when this machine is not that host
(``differences``)."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path
from typing import Any

# the libraries whose kernels a latency depends on (infercast itself is not one of them)
LIBRARIES = ("torch", "onnxruntime", "onnxruntime-gpu", "numpy")
# the features that change which kernels ONNX Runtime's MLAS, oneDNN or XNNPACK run: vector width
# (AVX2, AVX-512, SVE), dot-product and matrix units (VNNI, AMX, I8MM), half and bfloat16 arithmetic
X86_FEATURES = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx_vnni",
    "avx512f",
    "avx512dq",
    "avx512cd",
    "avx512bw",
    "avx512vl",
    "avx512ifma",
    "avx512vbmi",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
    "amx_fp16",
)
ARM_FEATURES = (
    "asimd",
    "asimdhp",
    "asimddp",
    "fphp",
    "asimdfhm",
    "i8mm",
    "bf16",
    "sve",
    "sve2",
    "svei8mm",
    "svebf16",
    "sme",
    "sme2",
)
# the features that set the width of the vector or matrix unit: the ones a description names as absent
WIDTH_FEATURES = ("avx2", "avx512f", "amx_tile", "asimd", "sve", "sve2")
# a virtual machine is given a share of a cache, and that share varies between machines of one kind:
# only a cache of another size class (twice or half) is named as a difference
CACHE_RATIO = 2.0
# how a fact only one side's fingerprint records is said (``unrecorded``)
UNRECORDED = "not recorded"
_UNITS_KIB = {"": 1 / 1024, "b": 1 / 1024, "k": 1, "kb": 1, "kib": 1, "m": 1024, "mb": 1024, "mib": 1024}
_UNITS_KIB |= {"g": 1024**2, "gb": 1024**2, "gib": 1024**2}


def _fields(block: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in block.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    return fields


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def _isa(flags: set[str], arm: bool) -> dict[str, bool]:
    return {feature: feature in flags for feature in (ARM_FEATURES if arm else X86_FEATURES)}


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """The fingerprint fields that ``/proc/cpuinfo``'s text holds (its first processor's, and how
    many processors it lists); an empty dict where it describes none."""
    blocks = [_fields(block) for block in re.split(r"\n\s*\n", text) if block.strip()]
    processors = [block for block in blocks if _int(block.get("processor")) is not None]
    if not processors:
        return {}
    first = processors[0]
    info: dict[str, Any] = {"logical_cpus": len(processors)}
    if "vendor_id" in first:
        info |= {
            "vendor": first["vendor_id"],
            "model_name": first.get("model name"),
            "family": _int(first.get("cpu family")),
            "model": _int(first.get("model")),
            "stepping": _int(first.get("stepping")),
            "isa": _isa(set(first.get("flags", "").split()), arm=False),
        }
    elif "cpu implementer" in first:
        info |= {
            "vendor": first["cpu implementer"],
            "part": first.get("cpu part"),
            "variant": first.get("cpu variant"),
            "revision": _int(first.get("cpu revision")),
            "isa": _isa(set(first.get("features", "").split()), arm=True),
        }
    return {key: value for key, value in info.items() if value is not None}


def cache_kib(text: str) -> int | None:
    """One cache instance's size in KiB from lscpu's ``1 MiB (2 instances)`` or ``512K``, or from
    a ``/sys`` cache directory's ``size`` (``512K``)."""
    match = re.fullmatch(r"\s*([\d.]+)\s*([a-zA-Z]*)\s*(?:\((\d+) instances?\))?\s*", text)
    if not match or match.group(2).lower() not in _UNITS_KIB:
        return None
    total = float(match.group(1)) * _UNITS_KIB[match.group(2).lower()]
    return round(total / int(match.group(3) or 1))


def parse_lscpu(text: str) -> dict[str, Any]:
    """The fingerprint fields that ``lscpu``'s output holds: vendor and model name (the only place
    an Arm core's name is spelled out), family / model / stepping, features and cache sizes."""
    fields = _fields(text)
    flags = set(fields.get("flags", "").split())
    arm = bool(flags & {"asimd", "fp"}) and "sse2" not in flags
    info: dict[str, Any] = {
        "vendor": fields.get("vendor id"),
        "model_name": fields.get("model name"),
        "logical_cpus": _int(fields.get("cpu(s)")),
        "isa": _isa(flags, arm) if flags else None,
        # ``L2 cache:`` in lscpu's flat output, ``L2:`` under ``Caches (sum of all):`` in its tree
        "l2_kib": cache_kib(fields.get("l2 cache") or fields.get("l2", "")),
        "l3_kib": cache_kib(fields.get("l3 cache") or fields.get("l3", "")),
    }
    if not arm:
        info |= {
            "family": _int(fields.get("cpu family")),
            "model": _int(fields.get("model")),
            "stepping": _int(fields.get("stepping")),
        }
    return {key: value for key, value in info.items() if value is not None}


# where this machine's CPU is described (a test replays another machine's recorded files from here)
CPUINFO = Path("/proc/cpuinfo")
CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


def sys_caches(root: Path | None = None) -> dict[str, int]:
    """``l2_kib`` and ``l3_kib`` of the first CPU's data or unified caches, from ``/sys``."""
    root = CACHES if root is None else root
    caches: dict[str, int] = {}
    for index in sorted(root.glob("index*")) if root.is_dir() else []:
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = cache_kib((index / "size").read_text())
        except OSError:
            continue
        if level in ("2", "3") and kind in ("Data", "Unified") and size is not None:
            caches[f"l{level}_kib"] = size
    return caches


def cpu_fingerprint(cpuinfo: str | None = None, lscpu: str | None = None) -> dict[str, Any]:
    """This machine's CPU (or the one the given ``/proc/cpuinfo`` and ``lscpu`` texts describe):
    ``/proc/cpuinfo`` first, ``lscpu`` for what it lacks (an Arm core's name, the caches), and
    ``/sys`` for the caches when reading this machine."""
    here = cpuinfo is None and lscpu is None
    if here:
        cpuinfo = CPUINFO.read_text() if CPUINFO.is_file() else ""
    info = parse_lscpu(lscpu or "")
    info.update(parse_cpuinfo(cpuinfo or ""))
    if here:
        info |= sys_caches()
    return info


def _generation(info: dict[str, Any]) -> str | None:
    if "family" in info:
        return f"family {info['family']} model {info.get('model', '?')}"
    if "part" in info:
        return f"part {info['part']} variant {info.get('variant', '?')}"
    return None


def _features(names: list[str]) -> str:
    # the width-setting features first: the ones that tell most about speed are never cut
    names = sorted(names, key=lambda name: name not in WIDTH_FEATURES)
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def unrecorded(there: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """The CPU generation, when one side's fingerprint records it and the other's does not, in
    words (``there``: the CPU a predictor was measured on). A host recorded before fingerprints
    held a generation cannot tell a machine like its own from another of the same vendor and
    vector width, and such machines differ by a factor (docs/devices.md)."""
    if _generation(here) and not _generation(there):
        return [f"CPU {_generation(here)} here, {UNRECORDED} there"]
    if _generation(there) and not _generation(here):
        return [f"CPU {_generation(there)} there, {UNRECORDED} here"]
    return []


def differences(there: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """What differs between the CPU a predictor was measured on (``there``) and this one
    (``here``), in words: vendor, generation, instruction-set features and caches of another size
    class over the facts both record, and a generation only one side records (``unrecorded``):
    no one can know such CPUs alike. Empty when nothing differs."""
    found: list[str] = []
    if there.get("vendor") and here.get("vendor") and there["vendor"] != here["vendor"]:
        found.append(f"CPU vendor {here['vendor']} here, {there['vendor']} there")
    elif _generation(there) and _generation(here) and _generation(there) != _generation(here):
        found.append(f"CPU {_generation(here)} here, {_generation(there)} there")
    isa_there, isa_here = there.get("isa") or {}, here.get("isa") or {}
    shared = [feature for feature in isa_here if feature in isa_there]
    gained = [feature for feature in shared if isa_here[feature] and not isa_there[feature]]
    lost = [feature for feature in shared if isa_there[feature] and not isa_here[feature]]
    if gained:
        found.append(f"{_features(gained)} here, not there")
    if lost:
        found.append(f"{_features(lost)} there, not here")
    for key, label in (("l2_kib", "L2"), ("l3_kib", "L3")):
        if (
            there.get(key)
            and here.get(key)
            and max(there[key], here[key]) >= CACHE_RATIO * min(there[key], here[key])
        ):
            found.append(f"{label} {here[key]} KiB here, {there[key]} KiB there")
    return found + unrecorded(there, here)


def library_version(library: str) -> str | None:
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return None


def differences_here(there: dict[str, Any]) -> list[str]:
    """What differs, in words, between the machine of fingerprint ``there`` (``processor`` and the
    ``libraries`` it names) and this one; empty when nothing it records differs."""
    found = differences(there.get("processor") or {}, cpu_fingerprint())
    for library, version in (there.get("libraries") or {}).items():
        here = library_version(library)
        if here is not None and here != version:
            found.append(f"{library} {here} here, {version} there")
    return found


def width_differs(there: dict[str, Any], here: dict[str, Any]) -> bool:
    """Whether two CPUs differ in a feature that sets their kernels' vector width (AVX2, AVX-512,
    AMX; NEON, SVE), over the features both record."""
    isa_there, isa_here = there.get("isa") or {}, here.get("isa") or {}
    shared = [feature for feature in WIDTH_FEATURES if feature in isa_there and feature in isa_here]
    return any(bool(isa_there[feature]) != bool(isa_here[feature]) for feature in shared)


def distance_here(there: dict[str, Any]) -> tuple[bool, int]:
    """How far the machine of fingerprint ``there`` is from this one, to choose the nearest: another
    vector width first — ONNX Runtime lays convolutions out by it, and a calibration across it
    carried least (RESULTS.md, "Calibration on each machine") — then how many facts differ."""
    return width_differs(there.get("processor") or {}, cpu_fingerprint()), len(differences_here(there))
