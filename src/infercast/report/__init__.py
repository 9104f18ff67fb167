"""The HTML report of a store (and a predictor): one self-contained file, PNG figures beside it.

``build_report(db, out, predictor=None)`` writes ``out`` (plots embedded as base64 PNG, no script,
no network at view time) and ``<out stem>_figures/*.png``. Sections: how the costs scale
(FLOPs, batch, input size, depth), memory composition, energy vs latency (or why there is none),
measurement noise, platform pairs and the transfer matrix (``report.transfer``), and — with a
predictor — its accuracy on configs it never trained on (predicted vs measured, error histogram,
interval coverage).
"""

from __future__ import annotations

import base64
import html
import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from infercast.errors import InfercastError
from infercast.features import FEATURE_NAMES
from infercast.paths import check_output_file
from infercast.store import Store
from infercast.units import bytes_to_mb


class ReportError(InfercastError):
    """A report that cannot be made from what the store holds."""


@dataclass
class Section:
    """One part of the report: a heading, a caption, and a figure and/or a table (HTML)."""

    title: str
    caption: str
    figure: Any = None
    table: str = ""

    def html(self, folder: Path, number: int) -> str:
        """The section's HTML; its figure is also written to ``folder`` as a numbered PNG."""
        parts = [f"<h2>{html.escape(self.title)}</h2>"]
        if self.caption:
            parts.append(f"<p>{html.escape(self.caption)}</p>")
        if self.figure is not None:
            png = _png(self.figure)
            (folder / f"{number:02d}-{self.title.lower().replace(' ', '-')}.png").write_bytes(png)
            parts.append(
                f'<img class="figure" alt="{html.escape(self.title)}" '
                f'src="data:image/png;base64,{base64.b64encode(png).decode()}">'
            )
        parts.append(self.table)
        return "".join(parts)


def measurements_frame(db: str | Path) -> pd.DataFrame:
    """Every measurement with its features as columns and the targets in report units."""
    with Store(db, readonly=True) as store:
        frame = store.measurements()
    if frame.empty:
        raise ReportError(f"{db}: no measurements to report on")
    frame = frame[frame["features"].notna()].reset_index(drop=True)
    features = pd.DataFrame([json.loads(f) for f in frame["features"]])[list(FEATURE_NAMES)]
    frame = pd.concat([frame.drop(columns=[c for c in FEATURE_NAMES if c in frame]), features], axis=1)
    frame["latency_ms"] = frame["low_ms"]
    memory = bytes_to_mb(frame["peak_memory_bytes"])
    frame["peak_memory_mb"] = memory.where(memory > 0)
    frame["energy_j"] = pd.to_numeric(frame["energy_j"], errors="coerce")
    return frame


def _png(figure: Any) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    return buffer.getvalue()


def _table(rows: list[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


def _accuracy_frame(frame: pd.DataFrame, predictor: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    from infercast.predictors import TARGETS, OpWise, load
    from infercast.predictors.data import feature_frame

    blend = load(predictor)
    if isinstance(blend, OpWise):
        raise ReportError(
            f"--predictor {predictor}: an op-wise table predictor; give one from train or adapt"
        )
    info = blend.info
    unseen = ~frame["config_id"].isin(info.train_config_ids)
    data = frame[(frame["platform_id"] == info.platform.id) & unseen].drop_duplicates("config_id")
    if data.empty:
        return data, {}
    x = feature_frame(data, info.platform.settings)
    predicted = blend.predict(x)
    out = data.reset_index(drop=True)
    # scored on the statistic it learned (train's default: steady_ms, low_ms at the usual speed)
    out["latency_ms"] = out[info.latency_stat].to_numpy(dtype=float)
    # an adapted predictor's intervals have one width: nothing to explain
    out["interval_note"] = predicted["interval_note"].to_numpy() if "interval_note" in predicted else ""
    scores = blend.evaluate(x, out[[TARGETS[t] for t in blend.targets_]])
    for target in blend.targets_:
        column = TARGETS[target]
        out[f"{column}_predicted"] = predicted[column].to_numpy()
        out[f"{column}_low"] = predicted[f"{column}_low"].to_numpy()
        out[f"{column}_high"] = predicted[f"{column}_high"].to_numpy()
    return out, scores


def _transfer_table(matrix: pd.DataFrame) -> str:
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "target",
            "trained on",
            "scored on",
            "n",
            "R²",
            "Spearman",
            "MAPE %",
            "slope",
            "B / A",
            "slope measured",
        )
    )
    cells = []
    for r in matrix.itertuples():
        values = (
            r.target,
            r.source,
            r.target_platform,
            str(r.n),
            f"{r.r2:.3f}",
            f"{r.spearman:.3f}",
            f"{r.mape:.1f}",
            f"{r.slope:.2f}",
            f"{r.median_ratio:.2f}",
            f"{r.slope_measured:.2f}",
        )
        cells.append("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in values) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(cells)}</table>"


def _accuracy_section(frame: pd.DataFrame, predictor: str | Path) -> Section:
    """Predicted vs measured on the configs of the predictor's platform it never trained on."""
    from infercast.report import figures

    data, scores = _accuracy_frame(frame, predictor)
    if data.empty:
        return Section(
            "Predictor accuracy",
            "",
            table="<p>The store holds no configs of the predictor's platform that it did not train on.</p>",
        )
    rows = []
    for target, m in scores.items():
        if "baselines" in m:
            versus = f"FLOPs baseline MAPE {m['baselines']['flops']['mape']:.1f} %"
        else:  # an adapted predictor: next to its sources as they were
            versus = "unadapted source MAPE " + ", ".join(
                f"{s['mape']:.1f} %" for s in m.get("sources_unadapted", [])
            )
        rows.append(
            (
                target,
                f"R² {m['r2']:.4f}, MAPE {m['mape']:.2f} %, ±10 % {m['within_10pct']:.1%}, "
                f"Spearman {m['spearman']:.3f}, interval coverage {m['coverage']:.1%}; {versus}",
            )
        )
    wide = data[data["interval_note"] != ""]
    if len(wide) and "latency_ms_high" in wide.columns:
        widest = wide.assign(_w=wide["latency_ms_high"] / wide["latency_ms_low"]).nlargest(5, "_w")
        for r in widest.itertuples():
            rows.append((f"wide interval: {r.model}", r.interval_note))
    return Section(
        "Predictor accuracy",
        f"{len(data):,} configs the predictor never trained on; bars are 90 % intervals, wider where "
        f"a config extrapolates beyond the training configs ({len(wide):,} here, the widest listed).",
        figures.accuracy(data),
        _table(rows),
    )


def build_report(
    db: str | Path,
    out: str | Path,
    predictor: str | Path | None = None,
    transfer: bool = True,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Write the report; ``transfer`` trains one light predictor per platform for the transfer
    matrix when the store holds platforms that share configs (``progress`` hears about it)."""
    out = Path(out)
    if out.suffix != ".html":
        raise ReportError(f"--out {out}: the report is an .html file")
    check_output_file(out, reads=(db,))
    frame = measurements_frame(db)
    folder = out.parent / f"{out.stem}_figures"
    folder.mkdir(parents=True, exist_ok=True)
    sections = _characterization(db, frame)
    sections += _platform_sections(db, frame, folder, transfer, progress)
    if predictor is not None:
        sections.append(_accuracy_section(frame, predictor))
    body = [
        f"<h1>infercast report</h1><p>{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}</p>",
        _table(_summary_rows(db, frame)),
        *(section.html(folder, number) for number, section in enumerate(sections, start=1)),
    ]
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
        "table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}"
        "img.figure{max-width:100%}"
    )
    out.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>infercast report</title>"
        f"<style>{style}</style></head><body>{''.join(body)}</body></html>"
    )
    return out


def _characterization(db: str | Path, frame: pd.DataFrame) -> list[Section]:
    """How latency, memory and energy scale on one platform at a time: the one measured most
    (peak memory means different things on different backends, and their latencies would mix
    into one cloud)."""
    from infercast.report import figures
    from infercast.report.transfer import platform_label

    main_id = frame["platform_id"].value_counts().index[0]
    main = frame[frame["platform_id"] == main_id]
    with Store(db, readonly=True) as store:
        named = {r["id"]: platform_label(r) for r in store.platforms().to_dict("records")}
    on = f" Platform {named.get(main_id, main_id)}" + (
        " (the one measured most)." if frame["platform_id"].nunique() > 1 else "."
    )
    sections = [
        Section(
            "How the costs scale",
            "Measured latency (low_ms) and peak memory against the analytic FLOPs; "
            "throughput against batch and input size." + on,
            figures.scaling(main),
        ),
        Section(
            "Depth",
            "Latency and memory against the number of weighted layers." + on,
            figures.depth_width(main),
        ),
        Section(
            "Memory composition",
            "The measured peak split into what the graph explains (weights, peak live "
            "activations) and the rest." + on,
            figures.memory_composition(main),
        ),
    ]
    if main["energy_j"].notna().any():
        sections.append(
            Section(
                "Energy vs latency",
                "Mean power per inference against arithmetic intensity." + on,
                figures.energy_vs_latency(main),
            )
        )
    sections.append(
        Section(
            "Measurement noise",
            "Within-campaign CI of each median; change between campaigns of configs measured twice "
            "on the same platform.",
            figures.noise(frame),
        )
    )
    return sections


def _platform_sections(
    db: str | Path, frame: pd.DataFrame, folder: Path, transfer: bool, progress: Callable[[str], None] | None
) -> list[Section]:
    """What the platforms a store holds share, and (``transfer``) how a predictor of one carries
    to another."""
    from infercast.report import figures
    from infercast.report.transfer import transfer_matrix

    if frame["platform_id"].nunique() < 2:
        return []
    sections = [Section("Platforms", "Latency of the configs two platforms share.", figures.transfer(frame))]
    matrix = transfer_matrix(db, progress=progress) if transfer else pd.DataFrame()
    if not matrix.empty:
        matrix.to_csv(folder / "transfer_matrix.csv", index=False)
        sections.append(
            Section(
                "Transfer matrix",
                "A predictor trained on one platform (rows) scored on another's measurements (columns), "
                "on held-out configs; the diagonal is the same-platform accuracy. Slope: log-log slope of "
                "the target platform's measurements on the predictions; B / A: their median ratio.",
                figures.transfer_matrix(matrix),
                _transfer_table(matrix),
            )
        )
    return sections


def _summary_rows(db: str | Path, frame: pd.DataFrame) -> list[tuple[str, str]]:
    if frame["energy_j"].notna().any():
        energy = "measured"
    elif frame["energy_reason"].notna().any():
        energy = str(frame["energy_reason"].dropna().iloc[0])
    else:
        energy = "not measured"
    half_width = ((frame["ci_high_ms"] - frame["ci_low_ms"]) / 2 / frame["median_ms"]).median()
    return [
        ("store", str(db)),
        (
            "measurements",
            f"{len(frame):,} ({frame['config_id'].nunique():,} configs, "
            f"{frame['platform_id'].nunique()} platform(s), {frame['campaign'].nunique()} campaign(s))",
        ),
        ("latency (low_ms)", f"{frame['latency_ms'].min():.3g} – {frame['latency_ms'].max():.3g} ms"),
        ("median 95 % CI half-width", f"{half_width:.2%}"),
        ("energy", energy),
    ]


__all__ = ["ReportError", "Section", "build_report", "measurements_frame"]
