"""The README's CPU install, resolved by pip in a new environment: PyTorch and torchvision stay the
pinned pair and no CUDA package lands (an unpinned install replaced a CPU torch with PyPI's CUDA
build and 15 nvidia-* packages)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CUDA = re.compile(r"^(nvidia-|triton$|cuda-)", re.IGNORECASE)


def _readme_install_line() -> list[str]:
    """The ``pip install`` line of the README's Install block, as words."""
    install = ROOT.joinpath("README.md").read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    [line] = [line for line in install.splitlines() if line.startswith("pip install")]
    return shlex.split(line)


def _pins() -> dict[str, str]:
    lines = ROOT.joinpath("constraints.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if "==" in line and not line.startswith("#"))


def test_the_readme_install_keeps_the_pinned_cpu_torch_and_pulls_no_cuda(tmp_path: Path) -> None:
    words = _readme_install_line()
    assert words[:4] == ["pip", "install", "-c", "constraints.txt"], words
    # PyTorch's CPU index is where a user's machine finds the +cpu builds; the machines this runs
    # on reach only the package registries, and their pip configuration holds the CPU wheel
    index = words.index("--extra-index-url")
    arguments = words[2:index] + words[index + 2 :]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    report = tmp_path / "report.json"
    pip = [str(venv / "bin" / "pip"), "install", "--dry-run", "--ignore-installed", "--quiet"]
    resolved = subprocess.run(
        [*pip, "--report", str(report), *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    versions = {
        item["metadata"]["name"].lower(): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    assert not [name for name in versions if CUDA.match(name)], sorted(versions)
    pins = _pins()
    for package in ("torch", "torchvision"):
        assert versions[package].split("+")[0] == pins[package], (package, versions[package])
