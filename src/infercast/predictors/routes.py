"""Latency routes: the ways a predictor predicts latency, each a key code uses and a label people
read, and the geometric mean of several routes' predictions of the same models.

Routes whose errors have different causes (the blend follows networks like its training configs,
the op-wise route adds up kernels seen in other networks, Σ cost × work adds up a network's work
at fitted rates) fail on different networks, and in log space their mean cancels part of each
one's error. Which route a shipped host shows is chosen on its training configs alone
(benchmarks/host_card.py, RESULTS.md "Host CPU"): with a whole design space held out, the lowest
worst-case median error among the routes whose interval held — the mean of the three for the
first host, the blend given the op-wise estimate (``combined``) for the Zen 4 one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infercast.predictors.errors import PredictorError

if TYPE_CHECKING:  # the labels are read by command lines that never predict
    import pandas as pd

BLEND, OPWISE, COMBINED, PHYSICAL, MEAN = "blend", "opwise", "combined", "physical", "mean"
# the column the combined route reads the op-wise route's log estimate from
OPWISE_ESTIMATE = "log_opwise_ms"
# a figure of the op-wise route on the phones' own measured op rows (a card's, not a user's route)
OPWISE_OWN_OPS = "opwise-own-ops"
# route → what a table, a card or a report shows
LABELS: dict[str, str] = {
    BLEND: "blend",
    OPWISE: "op-wise",
    COMBINED: "blend + op-wise",
    PHYSICAL: "Σ cost × work (device features)",
    MEAN: "geometric mean of blend, op-wise and Σ cost × work",
    OPWISE_OWN_OPS: "op-wise on usc-mobile's own op rows (not a user's path)",
}
# the names predictor directories (routes.json) and shipped cards used before routes had keys
_BEFORE_KEYS = {
    **{text: route for route, text in LABELS.items()},
    "cascade blend (nb201 features)": BLEND,
    "op-wise (TFLite GPU kernels + overhead)": OPWISE,
}


def route_key(name: str) -> str:
    """The route ``name`` is: a key, or the label an earlier infercast wrote for it."""
    if name in LABELS:
        return name
    if name in _BEFORE_KEYS:
        return _BEFORE_KEYS[name]
    raise PredictorError(f"unknown latency route {name!r}; routes: {', '.join(LABELS)}")


def label(route: str) -> str:
    """What people read for ``route``."""
    return LABELS[route_key(route)]


def geometric_mean(*predictions: pd.DataFrame) -> pd.DataFrame:
    """Row by row, the geometric mean of the predictions' ``latency_ms``; the 90 % interval spans
    theirs (wider than it needs: a calibrated interval of the mean is not fitted), ``ood`` if any
    route doubts the model, with every reason."""
    import numpy as np
    import pandas as pd

    from infercast.predictors.ood import either_ood

    ood, reasons = either_ood(*predictions)
    return pd.DataFrame(
        {
            "latency_ms": np.exp(
                np.mean([np.log(p["latency_ms"].to_numpy(dtype=np.float64)) for p in predictions], axis=0)
            ),
            "latency_ms_low": np.min([p["latency_ms_low"].to_numpy() for p in predictions], axis=0),
            "latency_ms_high": np.max([p["latency_ms_high"].to_numpy() for p in predictions], axis=0),
            "ood": ood,
            "ood_reason": reasons,
        },
        index=predictions[0].index,
    )
