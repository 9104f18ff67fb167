"""``infercast demo`` end to end in a reduced mode: every stage runs for real on this CPU."""

from __future__ import annotations

import json
from pathlib import Path

from infercast.predictors.routes import BLEND, COMBINED, MEAN, OPWISE, PHYSICAL

from .helpers import infercast


def test_demo_reduced_runs_every_stage(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    result = infercast(
        "demo",
        "--dir",
        str(folder),
        "--minutes",
        "0.5",
        "--configs",
        "20",
        "--zoo",
        "1",
        "--candidates",
        "50000",
        "--shortlist",
        "2",
        "--kernels",
        "4",
        "--quick",
        "--json",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(result.stdout)
    assert data["profile"]["in_store"] >= 12
    # the budget is the whole demo's: half a minute is less than its least, and it says so
    assert data["budget_s"] == 30 and data["seconds"] > 30
    assert data["train"]["unavailable"]["energy"].startswith("no rows of energy_j")
    assert set(data["evaluate"]["test_metrics"]) == {"latency", "memory"}
    [network] = data["networks"]
    assert (
        network["model"] == "torchvision:resnet18"
        and network["measured_ms"] > 0
        and network["predicted_ms"] > 0
    )
    # the kernel campaign ran and taught the op-wise route; the networks' errors are per route
    assert data["kernels"]["in_store"] >= 1 and "kernel networks" in data["train"]["kernel_campaign"]
    assert set(network["routes_ms"]) == {BLEND, COMBINED, OPWISE, PHYSICAL, MEAN}
    assert network["route"] == data["train"]["routes"]["order"][0]
    assert network["predicted_ms"] == network["routes_ms"][network["route"]]
    errors = data["network_errors"]
    assert errors["n"] == 1 and errors["median_abs_error"][network["route"]] == abs(
        network["predicted_ms"] / network["measured_ms"] - 1
    )
    assert data["screen"]["candidates"] == 50000 and 0 <= data["screen"]["stage1"]["elimination_rate"] <= 1
    # the budgets are the measured configs' lower quartile of latency and median memory: some of
    # the space fits them, so a shortlist exists and every member of it is measured
    shortlist = data["screen"]["shortlist"]
    assert shortlist and not data["screen"]["message"]
    rows = data["validate"]["rows"]
    assert [r["role"] for r in rows].count("accepted") == len(shortlist)
    assert sum(data["validate"]["counts"].values()) == sum(1 for r in rows if "verdict" in r) >= 1
    report = Path(data["report"]["path"])
    assert report.is_file() and report.read_text().count("data:image/png;base64,") >= 4
    assert (folder / "predictor" / "meta.json").is_file() and (
        folder / "predictor" / "opwise" / "meta.json"
    ).is_file()
