"""Latency routes combined: the geometric mean of several routes' predictions of the same models.

Routes whose errors have different causes (the blend follows networks like its training configs,
the op-wise route adds up kernels seen in other networks, Σ cost × work adds up a network's work
at fitted rates) fail on different networks, and in log space their mean cancels part of each
one's error. Chosen on training configs alone (benchmarks/host_card.py, RESULTS.md "Host CPU"):
with a whole design space held out, the mean of the three had the lowest worst-case median error
of the routes whose interval held (op-wise and Σ cost × work alone had lower errors, but their
intervals covered 47 % and 38 % of a held-out design space; the mean's 98 %).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from infercast.predictors.ood import either_ood

MEAN_ROUTE = "geometric mean of blend, op-wise and Σ cost × work"


def geometric_mean(*predictions: pd.DataFrame) -> pd.DataFrame:
    """Row by row, the geometric mean of the predictions' ``latency_ms``; the 90 % interval spans
    theirs (wider than it needs: a calibrated interval of the mean is not fitted), ``ood`` if any
    route doubts the model, with every reason."""
    # SciPy's statistics load when this route is asked for (1.4 s): a phone's route never is
    from scipy.stats import gmean

    ood, reasons = either_ood(*predictions)
    return pd.DataFrame(
        {
            "latency_ms": gmean([p["latency_ms"].to_numpy(dtype=np.float64) for p in predictions], axis=0),
            "latency_ms_low": np.min([p["latency_ms_low"].to_numpy() for p in predictions], axis=0),
            "latency_ms_high": np.max([p["latency_ms_high"].to_numpy() for p in predictions], axis=0),
            "ood": ood,
            "ood_reason": reasons,
        },
        index=predictions[0].index,
    )
