"""The README's first section, "Predict without profiling", runs as written in a fresh folder on
its own, as a new user runs it (tests/test_readme.py runs the rest)."""

from __future__ import annotations

import sys

import pytest

from .helpers import readme_sections, run_readme_blocks


@pytest.mark.skipif(sys.platform != "linux", reason="the README's commands are checked on Linux")
def test_predicting_without_profiling_runs_as_written(tmp_path) -> None:
    assert run_readme_blocks(readme_sections()["Predict without profiling"], tmp_path) == 4
