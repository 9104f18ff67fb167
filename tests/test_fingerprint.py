"""The host fingerprint: recorded ``/proc/cpuinfo`` and ``lscpu`` outputs of eight CPUs parsed
(tests/cpus/README.md says where each comes from), compared in words, kept with every stored
platform and shipped host, and the one-line warning when a host predictor is used elsewhere."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from infercast import machine as cpu
from infercast.errors import MachineMismatchWarning
from infercast.machine import cache_kib, cpu_fingerprint, differences, parse_cpuinfo, parse_lscpu
from infercast.measurement.platform import fingerprint
from infercast.predictors.devices import device_info
from tests.helpers import infercast as run_cli

CPUS = Path(__file__).parent / "cpus"
HOST = "epyc-2core/ort-cpu"


def recorded(name: str) -> str:
    return (CPUS / name).read_text()


def test_an_amd_zen_vm_from_its_cpuinfo_and_lscpu() -> None:
    info = cpu_fingerprint(recorded("epyc-zen1-kvm.cpuinfo"), recorded("epyc-zen1-kvm.lscpu"))
    assert {k: info[k] for k in ("vendor", "model_name", "family", "model", "stepping", "logical_cpus")} == {
        "vendor": "AuthenticAMD",
        "model_name": "AMD EPYC",
        "family": 23,
        "model": 1,
        "stepping": 2,
        "logical_cpus": 2,
    }
    assert info["isa"]["avx2"] and info["isa"]["fma"] and not info["isa"]["avx512f"]
    # lscpu's "1 MiB (2 instances)" is one core's 512 KiB
    assert (info["l2_kib"], info["l3_kib"]) == (512, 8192)


def test_amd_zen_2_has_no_avx512_and_zen_4_has_it() -> None:
    zen2 = parse_cpuinfo(recorded("epyc-7302p-zen2.cpuinfo"))
    zen4 = parse_cpuinfo(recorded("epyc-9754-zen4.cpuinfo"))
    assert (zen2["family"], zen2["model"], zen2["model_name"]) == (23, 49, "AMD EPYC 7302P 16-Core Processor")
    assert zen2["isa"]["avx2"] and not any(zen2["isa"][f] for f in ("avx512f", "avx512_vnni", "amx_tile"))
    assert (zen4["family"], zen4["model"], zen4["stepping"]) == (25, 160, 2)
    assert all(zen4["isa"][f] for f in ("avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"))
    assert not zen4["isa"]["amx_tile"] and not zen4["isa"]["avx512_fp16"]


def test_an_intel_xeon_with_amx_from_lscpu_alone() -> None:
    info = cpu_fingerprint(lscpu=recorded("xeon-8573c-amx.lscpu"))
    assert (info["vendor"], info["family"], info["model"], info["stepping"]) == ("GenuineIntel", 6, 207, 2)
    assert info["model_name"] == "INTEL(R) XEON(R) PLATINUM 8573C" and info["logical_cpus"] == 2
    assert all(info["isa"][f] for f in ("amx_tile", "amx_int8", "amx_bf16", "avx512_fp16", "avx_vnni"))
    assert (info["l2_kib"], info["l3_kib"]) == (2048, 260 * 1024)


def test_an_arm_neoverse_by_implementer_part_and_features() -> None:
    info = parse_cpuinfo(recorded("graviton3-neoverse-v1.cpuinfo"))
    assert (info["vendor"], info["part"], info["variant"], info["revision"]) == ("0x41", "0xd40", "0x1", 1)
    assert info["logical_cpus"] == 2 and "family" not in info
    assert info["isa"]["sve"] and info["isa"]["i8mm"] and info["isa"]["bf16"] and not info["isa"]["sve2"]
    assert "avx2" not in info["isa"]
    # lscpu names an Arm core; the tree layout of newer lscpu lists caches as "L2:" under a heading
    named = cpu_fingerprint(
        recorded("graviton3-neoverse-v1.cpuinfo"),
        "Vendor ID: ARM\nModel name: Neoverse-V1\nCaches (sum of all):\n  L2: 64 MiB (64 instances)\n",
    )
    assert named["model_name"] == "Neoverse-V1" and named["vendor"] == "0x41" and named["l2_kib"] == 1024


@pytest.mark.parametrize(
    ("text", "kib"),
    [("1 MiB (2 instances)", 512), ("512K", 512), ("260 MiB (1 instance)", 266240), ("32768 KB", 32768)],
)
def test_cache_sizes_in_every_spelling(text: str, kib: int) -> None:
    assert cache_kib(text) == kib


def test_unreadable_descriptions_give_no_fields() -> None:
    assert parse_cpuinfo("") == {} and parse_lscpu("garbage") == {} and cache_kib("lots") is None


def test_differences_in_words_over_what_both_record() -> None:
    zen1 = cpu_fingerprint(recorded("epyc-zen1-kvm.cpuinfo"), recorded("epyc-zen1-kvm.lscpu"))
    zen4 = parse_cpuinfo(recorded("epyc-9754-zen4.cpuinfo"))
    intel = parse_lscpu(recorded("xeon-8573c-amx.lscpu"))
    assert differences(zen1, zen1) == []
    found = differences(there=zen1, here=zen4)
    assert found[0] == "CPU family 25 model 160 here, family 23 model 1 there"
    assert found[1].startswith("avx512f, ")
    assert found[1].endswith("more here, not there")
    assert differences(there=intel, here=zen1)[0] == "CPU vendor AuthenticAMD here, GenuineIntel there"
    assert "amx_tile" in " ".join(differences(there=intel, here=zen1))
    # a host recorded before fingerprints held a generation compares on what it has, and says
    # what it cannot know
    partial = device_info(HOST).fingerprint["processor"]
    assert differences(there=partial, here=zen1) == ["CPU family 23 model 1 here, not recorded there"]
    assert differences(there=partial, here=zen4)[0] == "avx512f here, not there"
    # and the other way (a store of full fingerprints against that host: device_tables --add)
    assert differences(there=zen1, here=partial) == ["CPU family 23 model 1 there, not recorded here"]
    # a cache of the same size class is not a difference; one of another class is
    assert differences({"l3_kib": 8192}, {"l3_kib": 12288}) == []
    assert differences({"l2_kib": 512}, {"l2_kib": 2048}) == ["L2 2048 KiB here, 512 KiB there"]


def test_every_stored_platform_and_shipped_host_keeps_its_fingerprint() -> None:
    stored = fingerprint()
    assert stored["processor"] == cpu_fingerprint() and stored["processor"]["isa"]
    assert json.loads(json.dumps(stored)) == stored  # the store keeps it as JSON
    shipped = device_info(HOST).fingerprint
    assert shipped["processor"]["isa"] == {"avx2": True, "avx512f": False}
    assert shipped["libraries"] == {"onnxruntime": "1.32.0"}


def replay_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cpuinfo: str) -> None:
    """This process reads another machine's recorded /proc/cpuinfo (and no caches)."""
    monkeypatch.setattr(cpu, "CPUINFO", CPUS / cpuinfo)
    monkeypatch.setattr(cpu, "CACHES", tmp_path / "no-caches")


def test_a_host_prediction_elsewhere_warns_once_in_one_line(monkeypatch, tmp_path) -> None:
    import infercast

    model = "space:carb-resnet?depth=8"
    replay_machine(monkeypatch, tmp_path, "epyc-9754-zen4.cpuinfo")
    with pytest.warns(MachineMismatchWarning, match=r"avx512f here, not there.*infercast calibrate"):
        result = infercast.predict(model, device=HOST)
    assert "avx512f here, not there" in result["machine_warning"]
    shown = run_cli("predict", "--device", HOST, model, "--json")
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"warning: {HOST} was measured on another machine")
    assert json.loads(shown.stdout)[0]["machine_warning"] in lines[0]
    described = run_cli("devices", "show", HOST)
    assert "this machine: epyc-2core/ort-cpu was measured on another machine" in described.stdout


def test_a_machine_like_a_shipped_hosts_is_pointed_at_it(monkeypatch, tmp_path) -> None:
    import infercast
    from infercast.predictors.devices import local

    replay_machine(monkeypatch, tmp_path, "epyc-zen4-kvm.cpuinfo")
    zen4 = "epyc-zen4-2core/ort-cpu"
    with pytest.warns(MachineMismatchWarning, match=rf"`--device {zen4}` \(measured on a machine like this"):
        infercast.predict("space:carb-resnet?depth=8", device=HOST)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MachineMismatchWarning)
        assert infercast.predict("space:carb-resnet?depth=8", device=zen4)["machine_warning"] is None
    assert local.nearest_host() == zen4  # a calibration here starts from it
    replay_machine(monkeypatch, tmp_path, "epyc-zen1-kvm.cpuinfo")
    assert local.nearest_host() == HOST
    # a Zen 4c differs from the AVX2 host in AVX-512 alone and from the Zen 4 in its model alone:
    # the vector width decides
    replay_machine(monkeypatch, tmp_path, "epyc-9754-zen4.cpuinfo")
    assert local.nearest_host() == zen4


def test_an_intel_xeon_is_pointed_at_the_xeon_host(monkeypatch, tmp_path) -> None:
    import infercast
    from infercast.predictors.devices import local

    replay_machine(monkeypatch, tmp_path, "xeon-emr-kvm.cpuinfo")
    xeon = "xeon-emr-2core/ort-cpu"
    for elsewhere in (HOST, "epyc-zen4-2core/ort-cpu"):
        with pytest.warns(MachineMismatchWarning, match=r"CPU vendor GenuineIntel here, AuthenticAMD there"):
            result = infercast.predict("space:carb-resnet?depth=8", device=elsewhere)
        assert f"`--device {xeon}` (measured on a machine like this" in result["machine_warning"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", MachineMismatchWarning)
        assert infercast.predict("space:carb-resnet?depth=8", device=xeon)["machine_warning"] is None
    assert local.nearest_host() == xeon


def test_a_host_that_records_no_generation_cannot_vouch_for_a_machine(monkeypatch, tmp_path) -> None:
    import infercast
    from infercast.api import calibrating
    from infercast.predictors.devices import local

    # the AVX2 host was recorded before fingerprints held a CPU's generation: on a Zen 3, like it
    # in all it records, it predicted every real network about 2.4x too slow and said nothing
    zen3 = "epyc-zen3-2core/ort-cpu"
    replay_machine(monkeypatch, tmp_path, "epyc-zen3-kvm.cpuinfo")
    unknown = r"cannot tell from this one \(CPU family 25 model 1 here, not recorded there\)"
    with pytest.warns(MachineMismatchWarning, match=unknown):
        result = infercast.predict("space:carb-resnet?depth=8", device=HOST)
    # the host measured on a Zen 3 is named instead, and a calibration here starts from it
    assert f"`--device {zen3}` (measured on a machine like this one)" in result["machine_warning"]
    assert local.nearest_host() == zen3
    # on a Zen 1, which no host records, nothing is named, and a calibration from the AVX2 host
    # measures whole networks too, as on any machine unlike its host's
    replay_machine(monkeypatch, tmp_path, "epyc-zen1-kvm.cpuinfo")
    with pytest.warns(MachineMismatchWarning, match=r"\(CPU family 23 model 1 here, not recorded there\)"):
        result = infercast.predict("space:carb-resnet?depth=8", device=HOST)
    assert "measured on a machine like this one" not in result["machine_warning"]
    assert calibrating.configs_per_block(HOST) == calibrating.CONFIGS_PER_BLOCK


def test_a_host_prediction_on_its_own_kind_of_machine_says_nothing(monkeypatch, tmp_path) -> None:
    import infercast

    replay_machine(monkeypatch, tmp_path, "epyc-zen4-kvm.cpuinfo")
    with warnings.catch_warnings():
        warnings.simplefilter("error", MachineMismatchWarning)
        result = infercast.predict("space:carb-resnet?depth=8", device="epyc-zen4-2core/ort-cpu")
    assert result["machine_warning"] is None
    # a phone is never this machine: nothing to compare
    assert device_info("pixel4/gpu").fingerprint == {}
