"""benchmarks/RESULTS.md holds the current figure of each benchmark: a benchmark run again replaces
its own section, leaves the others, and every run stays in its history file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _results(tmp_path: Path):
    spec = importlib.util.spec_from_file_location("benchmark_results", BENCHMARKS / "results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.RESULTS, module.HISTORY = tmp_path / "RESULTS.md", tmp_path / "history"
    return module


def test_a_benchmark_run_again_replaces_its_section_and_keeps_the_run_in_its_history(tmp_path) -> None:
    results = _results(tmp_path)
    results.record(["## Speed (2026-12-01 10:00 UTC)", "", "1.0 s"], name="speed")
    results.record(["## Accuracy (2026-12-01 11:00 UTC)", "", "4 %"], name="accuracy")
    results.record(["## Speed (2026-12-02 10:00 UTC)", "", "0.9 s"], name="speed")
    text = results.RESULTS.read_text()
    assert results.sections(text) == {
        "speed": "## Speed (2026-12-02 10:00 UTC)\n\n0.9 s",
        "accuracy": "## Accuracy (2026-12-01 11:00 UTC)\n\n4 %",
    }
    assert text.startswith(results.HEADER) and "1.0 s" not in text
    history = (tmp_path / "history" / "speed.md").read_text()
    assert history.index("1.0 s") < history.index("0.9 s")


def test_the_shipped_results_file_is_one_section_per_benchmark() -> None:
    spec = importlib.util.spec_from_file_location("benchmark_results", BENCHMARKS / "results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (BENCHMARKS / "RESULTS.md").read_text()
    current = module.sections(text)
    assert module.render(current) == text
    for name in current:
        assert (BENCHMARKS / "history" / f"{name}.md").is_file(), name
