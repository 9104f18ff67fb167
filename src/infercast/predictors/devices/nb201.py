"""NAS-Bench-201 cells on 27 device settings (desktop GPUs at batch 1 / 32 / 256, Xeon CPUs,
phones, a Raspberry Pi 4, an ASIC and an FPGA), for ``space:nb201`` models.

Data: HELP (Lee et al., NeurIPS 2021, HayeonLee/HELP, MIT licence), whose pixel3, raspi4, eyeriss
and fpga columns come from HW-NAS-Bench (Li et al., ICLR 2021). What ships
(``data/nb201_cells.parquet`` and ``nb201_features.parquet``, built by
``python tools/device_tables.py``) is a random 1,000 of the 15,625 cells with each
device's latency (ms) and their ``nb201`` space features. A device's predictor is the cascade
blend (latency only) on those features, trained on first use (in seconds) and kept in the user
cache (``common.cache_root``) as a normal predictor directory.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from infercast.features import featurize
from infercast.graph import Graph
from infercast.predictors.data import feature_frame
from infercast.predictors.devices.common import DeviceInfo, cards, data_file, trained_once
from infercast.predictors.errors import PredictorError
from infercast.predictors.routes import BLEND

if TYPE_CHECKING:
    from infercast.predictors.blend import CascadeBlend

TABLE = "nb201_cells.parquet"
FEATURES = "nb201_features.parquet"
PREFIX = "nb201/"
SOURCE = "NAS-Bench-201 latency of HELP (HayeonLee/HELP, MIT) and HW-NAS-Bench"
SETTINGS = {"threads": 1}
# trained on first use, so sized for it: 100 boosted / 50 randomized trees and 3 folds train in
# half the time of 200 / 100 and 5 folds, and the 27 cards did not move (benchmarks/history/
# device_cards.md)
BLEND_PARAMS = {"n_estimators": 100, "forest_estimators": 50, "n_folds": 3}
_GPUS = ("1080ti", "2080ti", "titan_rtx", "titanx", "titanxp")
_CPUS = ("gold", "silver")
_PHONES = ("pixel2", "pixel3", "samsung_a50", "samsung_s7", "essential_ph_1")


@cache
def table() -> pd.DataFrame:
    return pd.read_parquet(data_file(TABLE))


@cache
def feature_table() -> pd.DataFrame:
    return pd.read_parquet(data_file(FEATURES))


def training_features(batch: int) -> pd.DataFrame:
    """The predictors' input rows of the shipped cells at ``batch``, in ``table()``'s order."""
    rows = feature_table()
    rows = rows[rows["batch"] == batch].set_index("arch").loc[table()["arch"]]
    return feature_frame(rows.reset_index(drop=True), SETTINGS)


def names(cells: pd.DataFrame | None = None) -> list[str]:
    """The device names of the shipped table (or of ``cells``, a table like it)."""
    return [PREFIX + c for c in (table() if cells is None else cells).columns if c != "arch"]


def batch_of(column: str) -> int:
    suffix = column.rsplit("_", 1)[-1]
    return int(suffix) if column.startswith(_GPUS) and suffix.isdigit() else 1


def _kind(column: str) -> str:
    if column.startswith(_GPUS):
        return "desktop GPU"
    if column.startswith(_CPUS):
        return "Xeon CPU"
    if column.startswith(_PHONES):
        return "phone"
    return {"raspi4": "Raspberry Pi 4", "eyeriss": "ASIC (Eyeriss)", "fpga": "FPGA"}.get(column, column)


def _info(name: str) -> DeviceInfo:
    column = name.removeprefix(PREFIX)
    batch = batch_of(column)
    return DeviceInfo(
        name=name,
        device=column.rsplit("_", 1)[0] if batch > 1 or column.endswith("_1") else column,
        runtime=_kind(column),
        setting=f"batch {batch}",
        dtype="fp32",
        source=SOURCE,
        n_train=len(table()),
        accepts="space:nb201 cells (CIFAR 32×32)",
        batch=batch,
        trained_on="cells",
        space="nb201",
        card=cards().get(name, {}),
    )


def infos() -> list[DeviceInfo]:
    return [_info(name) for name in names()]


class Nb201Device:
    """One NB201 device setting: a latency-only cascade blend, trained once and cached."""

    def __init__(self, name: str) -> None:
        # the blend's module imports pandas and the blend's machinery: listing the devices or a
        # phone CPU's prediction never loads it (``infercast.predictors``)
        from infercast.predictors.blend import CascadeBlend

        self.info = _info(name)
        self.blend = trained_once(
            name,
            (TABLE, FEATURES),
            self._train,
            lambda blend, folder: blend.save(folder, {"device": name, "source": SOURCE}),
            CascadeBlend.load,
        )

    def _train(self) -> CascadeBlend:
        from infercast.predictors.blend import CascadeBlend

        x = training_features(self.info.batch)
        y = pd.DataFrame(
            {"latency_ms": table()[self.info.name.removeprefix(PREFIX)].to_numpy(dtype=np.float64)}
        )
        return CascadeBlend(order=("latency",), seed=0, **BLEND_PARAMS).fit(x, y)

    def predict_graphs(self, graphs: list[Graph]) -> pd.DataFrame:
        foreign = [g.name for g in graphs if not g.name.startswith("space:nb201")]
        if foreign:
            raise PredictorError(
                f"{self.info.name} predicts NAS-Bench-201 cells (space:nb201?cell=…) only, not {foreign[0]}"
            )
        return self.predict_features(pd.DataFrame([featurize(g) for g in graphs]))

    def predict_features(self, rows: pd.DataFrame) -> pd.DataFrame:
        """The same from cells' feature rows (``featurize(graph)``, or the nb201 space's closed form
        of them: ``infercast.space.get("nb201").features(configs)``)."""
        self._check_batch(rows["batch"])
        predicted = self.blend.predict(feature_frame(rows, SETTINGS)).reset_index(drop=True)
        out = predicted[["latency_ms", "latency_ms_low", "latency_ms_high", "ood", "ood_reason"]].copy()
        out["route"] = BLEND
        return out

    def _check_batch(self, batches: pd.Series) -> None:
        """Cells at the one batch size the device was measured at: the data say nothing of
        another, and the blend's trend, fitted where FLOPs and parameters rise and fall together,
        read 10¹⁹ ms for a batch-1 phone's cell at batch 64."""
        other = sorted({int(b) for b in batches} - {self.info.batch})
        if not other:
            return
        siblings = [
            n
            for n in names()
            if _info(n).device == self.info.device and batch_of(n.removeprefix(PREFIX)) == other[0]
        ]
        hint = f"; {siblings[0]} was measured at batch {other[0]}" if siblings else ""
        raise PredictorError(
            f"{self.info.name} was measured at batch {self.info.batch} and predicts cells at that "
            f"batch only, not at batch {other[0]}{hint}"
        )


def load(name: str) -> Nb201Device:
    return Nb201Device(name)
