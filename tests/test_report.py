"""The HTML report: refuses what it cannot make; embeds its figures (the demo test builds one)."""

from __future__ import annotations

import pytest

from infercast.report import ReportError, build_report
from infercast.store import Store


def test_report_needs_measurements_and_an_html_path(tmp_path) -> None:
    db = tmp_path / "empty.db"
    Store(db).close()
    with pytest.raises(ReportError, match="no measurements"):
        build_report(db, tmp_path / "report.html")
    with pytest.raises(ReportError, match=r"\.html"):
        build_report(db, tmp_path / "report.pdf")
