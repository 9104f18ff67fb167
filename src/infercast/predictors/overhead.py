"""The op-wise route's overhead model: how a network's end-to-end time relates to the sum of its
kernels. Runtimes spend that time differently — a GPU delegate pays a dispatch cost per kernel
and a constant per inference, a CPU runtime a share that grows with the op mix — so several
forms compete, and grouped cross-validation over the training networks weighs them
(``StackedOverhead``) or picks one (``choose``):

- ``ratio``: ridge regression of ``log(e2e / Σ)`` on the graph's mix (a multiplicative overhead);
- ``factor``: ``e2e = a·Σ``;
- ``affine``: ``e2e = a·Σ + c`` (a constant per inference);
- ``per_kernel``: ``e2e = a·Σ + b·n_kernels + c`` (a dispatch cost per kernel);
- ``per_kernel_type``: ``e2e = a·Σ + Σ_t b_t·n_kernels_t + c`` (a dispatch cost per kernel type);
- ``signed_per_kernel``: ``per_kernel`` with ``b`` of either sign. Kernel rows timed by a
  profiler can carry a cost per node (its event records, the caches they disturb) that a run
  without it does not pay: on this project's Zen 4 VM the end-to-end time of the ONNX Runtime
  training networks sat a few µs per kernel *below* their profiled kernels' sum, so a network
  of many small kernels read slow by every non-negative form. A saving never takes away more of
  ``a·Σ`` than it did on a training network;
- ``floor``: ``e2e = a·Σ_k max(t_k, d) + c`` (no kernel takes less than ``d`` end to end: a
  dispatch cost the device hides behind a long kernel but not behind a short one).

- ``stack`` (the default of ``OpWise``, ``predictors.overhead_choice``): a weighted mean of the
  forms' log predictions, the weights non-negative and summing to one, fitted by least squares on
  the forms' out-of-fold log predictions over the training networks (stacked regression, Breiman
  1996). ``overhead_choice.choose`` keeps one form instead: of the forms within one standard
  error of the best cross-validated one, the simplest.

The additive forms and ``floor`` are fitted on *relative* error (least squares of
``(pred − e2e) / e2e``) with non-negative coefficients, so a large network does not outweigh a
small one and no cost is negative. Every form is saved as plain numbers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from infercast.graph import OP_GROUPS
from infercast.predictors.errors import PredictorError

RATIO_COLUMNS = (
    "log_kernel_ms",
    "log_n_kernels",
    "log_mean_kernel_ms",
    "absorbed_share",
    "log_flops",
    "log_bytes",
    *(f"share_{group}" for group in OP_GROUPS),
)
ADDITIVE_TERMS: dict[str, tuple[str, ...]] = {
    "factor": ("kernel_ms",),
    "affine": ("kernel_ms", "one"),
    "per_kernel": ("kernel_ms", "n_kernels", "one"),
    "per_kernel_type": ("kernel_ms", *(f"n_kernels_{group}" for group in OP_GROUPS), "one"),
    "signed_per_kernel": ("kernel_ms", "n_kernels", "one"),
}
# the terms whose weight may be negative, per form (the rest are costs: non-negative)
SIGNED_TERMS = {"signed_per_kernel": frozenset({"n_kernels"})}
FORMS = ("ratio", *ADDITIVE_TERMS, "floor")
STACK = "stack"
# how simple a form is: the numbers it fits (the ridge of the ratio form one per mix column too)
FITTED_NUMBERS = {
    **{form: len(terms) for form, terms in ADDITIVE_TERMS.items()},
    "floor": 3,
    "ratio": len(RATIO_COLUMNS) + 1,
}
# where ``floor`` looks for d: the kernel times of the training networks between these quantiles
_FLOOR_QUANTILES = (0.01, 0.9)
_FLOOR_CANDIDATES = 40


def overhead_features(table: pd.DataFrame, kernel_ms: np.ndarray) -> pd.DataFrame:
    """Per model: the sum of its kernels' times and what decides how far the end-to-end time sits
    above it (kernel counts, overall and per type; the share of ops fused away; the op mix), and
    its kernels' times themselves (``kernel_times_ms``, an array a model, for ``floor``)."""
    work = table.assign(_pred=kernel_ms)
    grouped = work.groupby("model", sort=False)
    total = grouped["_pred"].sum()
    times = pd.Series(
        [np.asarray(group, dtype=np.float64) for _, group in grouped["_pred"]], index=total.index
    )
    n_kernels = grouped.size()
    n_ops = grouped["n_ops"].sum()
    frame = pd.DataFrame(
        {
            "kernel_ms": total,
            "n_kernels": n_kernels.astype(np.float64),
            "one": 1.0,
            "log_kernel_ms": np.log(total),
            "log_n_kernels": np.log(n_kernels),
            "log_mean_kernel_ms": np.log(total / n_kernels),
            "absorbed_share": 1 - n_kernels / n_ops,
            "log_flops": np.log1p(grouped["flops"].sum()),
            "log_bytes": np.log1p(grouped["bytes"].sum().fillna(0)),
            "kernel_times_ms": times,
        }
    )
    counts = pd.crosstab(work["model"], work["op_type"]).reindex(frame.index, fill_value=0)
    for group in OP_GROUPS:
        column = counts[group] if group in counts else pd.Series(0, index=frame.index)
        frame[f"n_kernels_{group}"] = column.to_numpy(dtype=np.float64)
        frame[f"share_{group}"] = frame[f"n_kernels_{group}"] / n_kernels
    return frame


class Overhead(ABC):
    """One overhead form: ``predict`` gives log end-to-end latency from the per-model features of
    ``overhead_features``."""

    form = ""

    @abstractmethod
    def fit(self, x: pd.DataFrame, e2e_ms: np.ndarray) -> Overhead: ...

    @abstractmethod
    def predict(self, x: pd.DataFrame) -> np.ndarray: ...

    @abstractmethod
    def to_dict(self) -> dict[str, Any]: ...


class RatioOverhead(Overhead):
    """Standardised ridge regression of ``log(e2e / Σ kernels)`` on ``RATIO_COLUMNS``."""

    form = "ratio"

    def __init__(self) -> None:
        self.names: list[str] = list(RATIO_COLUMNS)
        self.mean = np.zeros(0)
        self.scale = np.ones(0)
        self.coef = np.zeros(0)
        self.intercept = 0.0
        self.alpha = 1.0

    def fit(self, x: pd.DataFrame, e2e_ms: np.ndarray) -> RatioOverhead:
        # SciPy and scikit-learn load when a form is fitted: listing the devices imports this module
        from sklearn.linear_model import RidgeCV

        matrix = x[self.names].to_numpy(dtype=np.float64)
        gap = np.log(e2e_ms) - x["log_kernel_ms"].to_numpy(dtype=np.float64)
        self.mean = matrix.mean(axis=0)
        spread = matrix.std(axis=0)
        self.scale = np.where(spread > 0, spread, 1.0)
        model = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit((matrix - self.mean) / self.scale, gap)
        self.coef, self.intercept, self.alpha = model.coef_, float(model.intercept_), float(model.alpha_)
        return self

    def predict(self, x: pd.DataFrame) -> np.ndarray:
        matrix = x[self.names].to_numpy(dtype=np.float64)
        gap = (matrix - self.mean) / self.scale @ self.coef + self.intercept
        return x["log_kernel_ms"].to_numpy(dtype=np.float64) + gap

    def to_dict(self) -> dict[str, Any]:
        return {
            "form": self.form,
            "names": self.names,
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "coef": self.coef.tolist(),
            "intercept": self.intercept,
            "alpha": self.alpha,
        }

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> RatioOverhead:
        ridge = cls()
        ridge.names = list(saved["names"])
        ridge.mean = np.asarray(saved["mean"], dtype=np.float64)
        ridge.scale = np.asarray(saved["scale"], dtype=np.float64)
        ridge.coef = np.asarray(saved["coef"], dtype=np.float64)
        ridge.intercept = float(saved["intercept"])
        ridge.alpha = float(saved.get("alpha", 1.0))
        return ridge


class AdditiveOverhead(Overhead):
    """``e2e = Σ_j w_j · term_j`` with ``w ≥ 0`` (but for the form's ``SIGNED_TERMS``), least
    squares on relative error. Terms: the kernel sum (its weight is the factor ``a``), kernel
    counts (costs per kernel, in ms) and ``one`` (the constant per inference, in ms)."""

    def __init__(self, form: str = "per_kernel") -> None:
        if form not in ADDITIVE_TERMS:
            raise PredictorError(f"additive overhead form {form!r} is not one of {', '.join(ADDITIVE_TERMS)}")
        self.form = form
        self.terms = list(ADDITIVE_TERMS[form])
        self.coef = np.zeros(len(self.terms))
        self.largest_saving = 0.0

    def fit(self, x: pd.DataFrame, e2e_ms: np.ndarray) -> AdditiveOverhead:
        e2e_ms = np.asarray(e2e_ms, dtype=np.float64)
        matrix = x[self.terms].to_numpy(dtype=np.float64)
        signed = np.array([t in SIGNED_TERMS.get(self.form, ()) for t in self.terms])
        self.coef, _ = _relative_nnls(matrix, e2e_ms, signed)
        if not (self.coef > 0).any():
            raise PredictorError(
                "the additive overhead fit found no positive cost; the end-to-end table is degenerate"
            )
        saving, base = self._saving(matrix), matrix[:, 0] * self.coef[0]
        shares = np.divide(saving, base, out=np.zeros(len(matrix)), where=base > 0)
        self.largest_saving = float(shares.max(initial=0.0))
        return self

    def _saving(self, matrix: np.ndarray) -> np.ndarray:
        """Per network, what the negative terms take away (ms)."""
        return -(matrix @ np.minimum(self.coef, 0.0))

    def predict(self, x: pd.DataFrame) -> np.ndarray:
        matrix = x[self.terms].to_numpy(dtype=np.float64)
        cap = self.largest_saving * matrix[:, 0] * self.coef[0]
        total = matrix @ np.maximum(self.coef, 0.0) - np.minimum(self._saving(matrix), cap)
        # a network with no kernel sum and no cost term in the fit would predict zero
        return np.log(np.clip(total, 1e-9, None))

    def costs(self) -> dict[str, float]:
        """The fitted coefficients by term (``kernel_ms`` is the factor, the rest milliseconds)."""
        return {term: float(w) for term, w in zip(self.terms, self.coef, strict=True)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "form": self.form,
            "terms": self.terms,
            "coef": self.coef.tolist(),
            "largest_saving": self.largest_saving,
        }

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> AdditiveOverhead:
        additive = cls(saved["form"])
        if list(saved["terms"]) != additive.terms:
            raise PredictorError(
                f"overhead terms {saved['terms']} differ from this infercast's {additive.terms}"
            )
        additive.coef = np.asarray(saved["coef"], dtype=np.float64)
        additive.largest_saving = float(saved.get("largest_saving", 0.0))
        return additive


def _relative_nnls(
    matrix: np.ndarray, e2e_ms: np.ndarray, signed: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """Weights of ``matrix``'s columns minimising the squared relative error against ``e2e_ms``,
    non-negative but where ``signed`` says otherwise, and that error's sum."""
    from scipy.optimize import lsq_linear, nnls

    # columns scaled to unit size so that the solver's tolerance treats ms and counts alike
    scale = np.abs(matrix / e2e_ms[:, None]).max(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    scaled, ones = matrix / e2e_ms[:, None] / scale, np.ones(len(e2e_ms))
    if signed is None or not signed.any():
        solution, residual = nnls(scaled, ones, maxiter=50 * matrix.shape[1])
        return solution / scale, float(residual**2)
    lower = np.where(signed, -np.inf, 0.0)
    solution = lsq_linear(scaled, ones, bounds=(lower, np.inf)).x
    return solution / scale, float(np.sum((scaled @ solution - ones) ** 2))


class FloorOverhead(Overhead):
    """``e2e = a·Σ_k max(t_k, d) + c``: each kernel costs at least ``d`` end to end. ``d`` is the
    candidate (the training kernels' times between two quantiles, and none) with the smallest
    relative error; ``a`` and ``c`` non-negative least squares on relative error. On usc-mobile's
    TFLite GPU rows (measured kernel times, families held out) the a03s GPU's d came out at
    0.18–0.19 ms in every fold and ±10 % rose from 86.3 % (``affine``) to 93.1 %."""

    form = "floor"

    def __init__(self) -> None:
        self.floor_ms = 0.0
        self.coef = np.zeros(2)

    @staticmethod
    def _floored(x: pd.DataFrame) -> Callable[[float], np.ndarray]:
        """Per model, Σ_k max(t_k, d) as a function of d."""
        times = list(x["kernel_times_ms"])
        every = np.concatenate([*times, np.empty(0)])
        owner = np.repeat(np.arange(len(times)), [len(t) for t in times])
        return lambda floor_ms: np.bincount(owner, weights=np.maximum(every, floor_ms), minlength=len(times))

    def fit(self, x: pd.DataFrame, e2e_ms: np.ndarray) -> FloorOverhead:
        e2e_ms = np.asarray(e2e_ms, dtype=np.float64)
        floored = self._floored(x)
        low, high = np.quantile(np.concatenate(list(x["kernel_times_ms"])), _FLOOR_QUANTILES)
        candidates = np.r_[0.0, np.geomspace(max(low, 1e-9), max(high, 2e-9), _FLOOR_CANDIDATES)]
        smallest = np.inf
        for floor_ms in candidates:
            matrix = np.column_stack([floored(floor_ms), np.ones(len(e2e_ms))])
            coef, error = _relative_nnls(matrix, e2e_ms)
            if error < smallest:
                smallest, self.floor_ms, self.coef = error, float(floor_ms), coef
        if not (self.coef > 0).any():
            raise PredictorError(
                "the floor overhead fit found no positive cost; the end-to-end table is degenerate"
            )
        return self

    def predict(self, x: pd.DataFrame) -> np.ndarray:
        total = self.coef[0] * self._floored(x)(self.floor_ms) + self.coef[1]
        return np.log(np.clip(total, 1e-9, None))

    def costs(self) -> dict[str, float]:
        """The factor ``a`` (``kernel_ms``), the floor ``d`` and the constant ``c`` (ms)."""
        return {"kernel_ms": float(self.coef[0]), "floor_ms": self.floor_ms, "one": float(self.coef[1])}

    def to_dict(self) -> dict[str, Any]:
        return {"form": self.form, "floor_ms": self.floor_ms, "coef": self.coef.tolist()}

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> FloorOverhead:
        floor = cls()
        floor.floor_ms = float(saved["floor_ms"])
        floor.coef = np.asarray(saved["coef"], dtype=np.float64)
        return floor


def make_form(form: str) -> Overhead:
    """An unfitted overhead of one of ``FORMS``."""
    if form == "ratio":
        return RatioOverhead()
    if form in ADDITIVE_TERMS:
        return AdditiveOverhead(form)
    if form == "floor":
        return FloorOverhead()
    raise PredictorError(f"overhead form {form!r} is not one of {', '.join((*FORMS, STACK))}")


def form_from_dict(saved: dict[str, Any]) -> Overhead:
    """A saved overhead of one of ``FORMS``."""
    # predictors written before the additive forms existed hold the ridge without a form
    form = saved.get("form", "ratio")
    if form == "ratio":
        return RatioOverhead.from_dict(saved)
    if form == "floor":
        return FloorOverhead.from_dict(saved)
    if form not in ADDITIVE_TERMS:
        raise PredictorError(f"overhead form {form!r} is not one of {', '.join((*FORMS, STACK))}")
    return AdditiveOverhead.from_dict(saved)
