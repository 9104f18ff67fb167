"""The HTML report: what it contains (sections, decodable figures, numbers that match the store) and
what it refuses. The store is real SQLite, filled with real analytic features of design-space
configs and latencies from a known law, so every figure the report prints can be checked."""

from __future__ import annotations

import base64
import re
import struct

import pytest

from infercast import api
from infercast.predictors import CascadeBlend
from infercast.report import ReportError, build_report
from infercast.store import Store

from .helpers import NO_SENSOR, SMALL, synthetic_store


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("report")
    return {"folder": folder, **synthetic_store(folder / "runs.db")}


def _sections(page: str) -> list[str]:
    return re.findall(r"<h2>(.*?)</h2>", page)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_report_sections_figures_and_numbers_match_the_store(store) -> None:
    out = build_report(store["db"], store["folder"] / "report.html", transfer=False)
    page = out.read_text()
    assert _sections(page) == ["How the costs scale", "Depth", "Memory composition", "Measurement noise"]
    embedded = [base64.b64decode(b) for b in re.findall(r'src="data:image/png;base64,([^"]+)"', page)]
    on_disk = sorted((store["folder"] / "report_figures").glob("*.png"))
    assert [p.name[:3] for p in on_disk] == ["01-", "02-", "03-", "04-"]
    assert embedded == [p.read_bytes() for p in on_disk]
    assert all(w > 300 and h > 200 for w, h in map(_png_size, embedded))
    n = store["n_configs"] + 5
    assert (
        f"<th>measurements</th><td>{n:,} ({store['n_configs']:,} configs, 1 platform(s), 2 campaign(s))"
        in (page)
    )
    low, high = min(store["latencies"]), max(store["latencies"])
    assert f"<td>{low:.3g} – {high:.3g} ms</td>" in page
    assert f"<th>energy</th><td>{NO_SENSOR}</td>" in page
    assert "Energy vs latency" not in page  # no energy was measured: no energy figure


def test_report_with_a_predictor_scores_only_configs_it_never_saw(store) -> None:
    predictor = store["folder"] / "predictor"
    trained = api.train(store["db"], predictor, opwise=False, blend=CascadeBlend(**SMALL), test_size=0.25)
    out = build_report(store["db"], store["folder"] / "with-predictor.html", predictor, transfer=False)
    page = out.read_text()
    assert _sections(page)[-1] == "Predictor accuracy"
    assert f"{trained['n_test']:,} configs the predictor never trained on" in page
    r2 = trained["test_metrics"]["latency"]["r2"]
    assert f"<th>latency</th><td>R² {r2:.4f}," in page


def test_report_needs_measurements_and_an_html_path(tmp_path) -> None:
    db = tmp_path / "empty.db"
    Store(db).close()
    with pytest.raises(ReportError, match="no measurements"):
        build_report(db, tmp_path / "report.html")
    with pytest.raises(ReportError, match=r"\.html"):
        build_report(db, tmp_path / "report.pdf")
