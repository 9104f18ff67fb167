"""Every code block of the README runs as written, in order, in one fresh folder
(``helpers.run_readme_blocks``). Its first section, predicting without profiling, runs on its own
(tests/test_readme_without_profiling.py), as a new user runs it, and beside the rest. ``text``
blocks are instructions that cannot run here as written (installing into a new environment,
starting Ray on other machines) and are only checked to exist."""

from __future__ import annotations

import sys

import pytest

from .helpers import FENCE, README, readme_sections, run_readme_blocks

WITHOUT_PROFILING = "Predict without profiling"


def test_every_block_is_of_a_known_kind() -> None:
    sections = readme_sections()
    blocks = [block for section in sections.values() for block in section]
    assert len(blocks) == len(FENCE.findall(README.read_text()))  # none outside a ``## `` section
    kinds = {kind for kind, _ in blocks}
    assert kinds <= {"yaml", "bash", "python", "console", "text"}, kinds
    assert {"yaml", "bash", "python", "console"} <= kinds


@pytest.mark.skipif(sys.platform != "linux", reason="the README's commands are checked on Linux")
def test_readme_blocks_run_as_written(tmp_path) -> None:
    rest = [
        block
        for heading, blocks in readme_sections().items()
        if heading != WITHOUT_PROFILING
        for block in blocks
    ]
    assert run_readme_blocks(rest, tmp_path) >= 10
