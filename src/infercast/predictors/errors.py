"""Errors of the predictors (bad hyper-parameters, missing data, a foreign predictor file)."""

from infercast.errors import InfercastError


class PredictorError(InfercastError):
    """A predictor that cannot be trained, loaded or applied as asked; the message says why."""
