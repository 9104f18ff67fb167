"""Build tests/saved/: a predictor directory of every kind and the predictions made with it.

`tests/test_saved_predictions.py` loads what this wrote and predicts again: a refactoring that
changes a prediction, a file layout or a route's name fails it. The predictors are trained on
synthetic tables (real analytic features of carb-resnet configs, their real kernels as ONNX
Runtime fuses them, a known cost law), so nothing is measured. Run it only when a prediction is
meant to change, and say why in the commit:

    .venv/bin/python tests/saved/build.py
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.saved.inputs import (  # noqa: E402
    ADAPT_ROWS,
    DEVICE_MODELS,
    DEVICES,
    MODELS,
    PLATFORM,
    device_inputs,
    tables,
)


def build() -> dict:
    from scipy.stats import gmean

    from infercast.api import predict_devices, predict_models
    from infercast.api.training import _fit_combined, _fit_physical, _rank, _Run
    from infercast.datasets import TrainingData
    from infercast.predictors import Adapted, CascadeBlend, OpWise
    from infercast.predictors.devices.recalibrated import DeviceAdapted, shipped_sources
    from infercast.predictors.routes import BLEND, MEAN, OPWISE, PHYSICAL

    out = HERE / "predictor"
    shutil.rmtree(out, ignore_errors=True)
    x, y, ids, models, ops, e2e = tables()
    test_rows = np.arange(len(x)) % 5 == 0
    train_rows, test_rows = np.flatnonzero(~test_rows), np.flatnonzero(test_rows)
    meta = {"platform": PLATFORM, "training": {"train_config_ids": sorted(ids[train_rows].tolist())}}
    blend = CascadeBlend(n_estimators=30, forest_estimators=15, n_folds=4, fast_estimators=20)
    blend.fit(x.iloc[train_rows], y.iloc[train_rows]).save(out, meta)
    train_ids = set(ids[train_rows])
    opwise = OpWise(n_estimators=30, n_folds=4, kernel_learner="xgboost")
    opwise.fit(ops[ops["model"].isin(train_ids)], e2e[e2e["model"].isin(train_ids)])
    opwise.save(out / "opwise", meta)
    data = TrainingData(x, y, ids, models, {"id": PLATFORM["id"]})
    run = _Run(data, train_rows, test_rows, out, meta, print, blend=blend)
    held = {BLEND: blend.predict(x.iloc[test_rows], ood="none")["latency_ms"].to_numpy()}
    held.update(_fit_combined(run, opwise))
    no_kernels = pd.DataFrame({"model": pd.Series(dtype=str), "latency_ms": pd.Series(dtype=float)})
    held.update(_fit_physical(run, no_kernels))
    held[MEAN] = gmean([held[BLEND], held[OPWISE], held[PHYSICAL]], axis=0)
    _rank(run, held)

    target = y.iloc[:ADAPT_ROWS].assign(latency_ms=y["latency_ms"].iloc[:ADAPT_ROWS] ** 0.9 * 1.7)
    adapted = Adapted([out], min_residual=5)
    adapted.fit(x.iloc[:ADAPT_ROWS], target).save(HERE / "adapted")
    features, latency = device_inputs()
    device = DeviceAdapted(shipped_sources()).fit(features, latency)
    device.save(HERE / "device-adapted")

    return {
        "predict_models": predict_models(out, MODELS),
        "adapted": predict_models(HERE / "adapted", MODELS),
        "device_adapted": predict_models(HERE / "device-adapted", MODELS),
        "predict_devices": predict_devices(DEVICE_MODELS, DEVICES),
    }


if __name__ == "__main__":
    for folder in ("adapted", "device-adapted"):
        shutil.rmtree(HERE / folder, ignore_errors=True)
    expected = build()
    # the folders' paths in messages, as the test sees them from any checkout
    text = json.dumps(expected, indent=1, sort_keys=True).replace(str(HERE), "tests/saved")
    (HERE / "expected.json").write_text(text + "\n")
    print(f"wrote {HERE}")
