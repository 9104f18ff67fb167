"""Every code block of the README runs as written, in order, in one fresh folder: ``yaml`` blocks
are written to the file their first comment names, ``bash`` lines and the ``$`` commands of
``console`` transcripts run in a shell, ``python`` blocks in a fresh interpreter. ``text`` blocks
are instructions that cannot run here as written (installing into a new environment, starting
Ray on other machines) and are only checked to exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


def blocks() -> list[tuple[str, str]]:
    return [(kind, body) for kind, body in FENCE.findall(README.read_text())]


def _run(command: str, folder: Path, timeout: float = 420) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "COLUMNS": "200",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    return subprocess.run(
        command, shell=True, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_every_block_is_of_a_known_kind() -> None:
    kinds = {kind for kind, _ in blocks()}
    assert kinds <= {"yaml", "bash", "python", "console", "text"}, kinds
    assert {"yaml", "bash", "python", "console"} <= kinds


@pytest.mark.skipif(sys.platform != "linux", reason="the README's commands are checked on Linux")
def test_readme_blocks_run_as_written(tmp_path) -> None:
    ran = 0
    for kind, body in blocks():
        if kind == "yaml":
            name = body.splitlines()[0].lstrip("# ").split(":")[0].split()[0]
            (tmp_path / name).write_text(body)
        elif kind == "bash":
            for line in body.splitlines():
                if line.strip() and not line.lstrip().startswith("#"):
                    result = _run(line, tmp_path)
                    assert result.returncode == 0, f"{line}\n{result.stderr[-3000:]}"
                    ran += 1
        elif kind == "console":
            for line in body.splitlines():
                if line.startswith("$ "):
                    result = _run(line[2:], tmp_path)
                    assert result.returncode == 0, f"{line}\n{result.stderr[-3000:]}"
                    ran += 1
        elif kind == "python":
            result = subprocess.run(
                [sys.executable, "-c", body], cwd=tmp_path, capture_output=True, text=True, timeout=420
            )
            assert result.returncode == 0, f"{body}\n{result.stderr[-3000:]}"
            ran += 1
    assert ran >= 10
