"""Errors a user can act on. The CLI prints their message on one line and exits with code 2."""


def install_hint(extra: str, packages: str) -> str:
    """How to add an optional extra, in a form that works from PyPI's packages and from a checkout."""
    return f"pip install {packages} (or, in an infercast checkout, pip install -e '.[{extra}]')"


class InfercastError(Exception):
    """Base class: the message says what was wrong and, where possible, what to do."""


class ModelLoadError(InfercastError):
    """A model string that names nothing loadable (unknown zoo name, bad file, failing factory)."""


class InputShapeError(InfercastError):
    """An input shape that cannot be parsed or does not fit the model."""


class CaptureError(InfercastError):
    """A model that could not be turned into an operator graph."""
