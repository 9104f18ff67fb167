"""The learners a blend is made of, each saved in its library's own code-free format.

A new learner is one class here with ``fit / predict / save / load`` and one entry in ``LEARNERS``.
Each declares ``size_param``: the blend hyper-parameter that sets its number of trees (boosting
rounds and forests differ by an order of magnitude in what a good size is).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from infercast.predictors.errors import PredictorError

if TYPE_CHECKING:
    from infercast.predictors.tree_walk import TreeWalk


@contextmanager
def native_load(path: Path, kind: str, suffix: str) -> Iterator[None]:
    """Load one model file: a wrong kind of file, or the library's own error (and whatever its
    C++ core prints on stderr meanwhile), becomes one ``PredictorError`` naming the file."""
    if not path.name.endswith(suffix):
        raise PredictorError(
            f"{path}: a {kind} model is a {suffix} file; predictor files are never pickles "
            "(nothing is executed to load one)"
        )
    saved, quiet = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 2)
    try:
        yield
    except PredictorError:
        raise
    except Exception as error:
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        text = text.split("Check failed: ", 1)[-1]
        raise PredictorError(f"{path}: not a readable {kind} model ({text[:200]})") from None
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(quiet)


# Rows per training thread. Boosting and forest fits on the tables infercast learns from (tens to
# tens of thousands of rows) spend more on waking threads than the threads save: on two cores one
# thread fitted XGBoost and LightGBM faster up to a hundred thousand rows (docs/predict.md,
# "Threads"). Prediction keeps ``n_jobs`` threads: a million rows is where two threads pay off.
ROWS_PER_FIT_THREAD = 100_000
# Node visits (rows × trees × depth) up to which a loaded boosted model is walked in numpy
# (``tree_walk``: the library's numbers) rather than by its library, whose import (it imports
# scikit-learn and SciPy's statistics) costs as much as walking tens of millions; a call above it
# (a screen's million rows) loads the library once.
WALK_STEPS = 2_000_000


def fit_threads(n_rows: int, n_jobs: int) -> int:
    """Threads to train on ``n_rows`` rows with at most ``n_jobs``: one per ``ROWS_PER_FIT_THREAD``."""
    return max(1, min(n_jobs, n_rows // ROWS_PER_FIT_THREAD))


class Learner(Protocol):
    name: ClassVar[str]
    suffix: ClassVar[str]
    size_param: ClassVar[str]

    def fit(self, x: np.ndarray, y: np.ndarray) -> Learner: ...

    def predict(self, x: np.ndarray) -> np.ndarray: ...

    def save(self, path: Path) -> None: ...


class BoostedLearner:
    """What a boosting library's learner shares: a model loaded from its file (``load``) keeps the
    file's bytes and their numpy walk (``tree_walk``), which predicts up to ``WALK_STEPS`` node
    visits; the library loads the bytes on the first call that needs more."""

    name: ClassVar[str]
    suffix: ClassVar[str]
    kind: ClassVar[str]

    def __init__(self) -> None:
        self.booster: Any = None
        self.path = Path()
        self.text = b""
        self.walk: TreeWalk | None = None

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self.booster is None and self.walk is not None and self.walk.visits(len(x)) <= WALK_STEPS:
            return self.walk.predict(x)
        if self.booster is None:
            with native_load(self.path, self.kind, self.suffix):
                self.booster = self._native(self.text)
        return self._native_predict(x)

    def save(self, path: Path) -> None:
        if self.booster is None:  # loaded, never refitted: the file it came from is the model
            path.write_bytes(self.text)
        else:
            self.booster.save_model(str(path))

    def _native(self, text: bytes) -> Any:
        raise NotImplementedError

    def _native_predict(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class XGBoostLearner(BoostedLearner):
    name: ClassVar[str] = "xgboost"
    suffix: ClassVar[str] = ".xgb.json"
    kind: ClassVar[str] = "XGBoost"
    size_param: ClassVar[str] = "n_estimators"

    def __init__(self, n_estimators: int = 600, seed: int = 0, n_jobs: int = 2, **params: Any) -> None:
        super().__init__()
        self.params = {
            "n_estimators": n_estimators,
            "max_depth": 6,
            "learning_rate": 0.05,
            "subsample": 0.8,
            "colsample_bytree": 0.8,
            "min_child_weight": 1.0,
            "random_state": seed,
            "n_jobs": n_jobs,
            **params,
        }

    def fit(self, x: np.ndarray, y: np.ndarray) -> XGBoostLearner:
        import xgboost

        model = xgboost.XGBRegressor(**{**self.params, "n_jobs": fit_threads(len(x), self.params["n_jobs"])})
        model.fit(x, y)
        self.booster = model.get_booster()
        self.booster.set_param({"nthread": self.params["n_jobs"]})
        return self

    def _native(self, text: bytes) -> Any:
        import xgboost

        booster = xgboost.Booster()
        booster.load_model(bytearray(text))
        return booster

    def _native_predict(self, x: np.ndarray) -> np.ndarray:
        return self.booster.inplace_predict(np.asarray(x, dtype=np.float32)).astype(np.float64)

    @classmethod
    def load(cls, path: Path) -> XGBoostLearner:
        """A model file, checked (``read_model_json``)."""
        from infercast.predictors.xgboost_json import read_model_json, xgboost_walk

        learner = cls()
        with native_load(path, cls.kind, cls.suffix):
            data, learner.text = read_model_json(path)
            learner.walk, learner.path = xgboost_walk(data), path
        return learner


class LightGBMLearner(BoostedLearner):
    name: ClassVar[str] = "lightgbm"
    suffix: ClassVar[str] = ".lgb.txt"
    kind: ClassVar[str] = "LightGBM"
    size_param: ClassVar[str] = "n_estimators"

    def __init__(self, n_estimators: int = 600, seed: int = 0, n_jobs: int = 2, **params: Any) -> None:
        super().__init__()
        self.params = {
            "objective": "regression",
            "num_leaves": 31,
            "learning_rate": 0.05,
            "min_child_samples": 10,
            "subsample": 0.8,
            "subsample_freq": 1,
            "colsample_bytree": 0.8,
            "seed": seed,
            "num_threads": n_jobs,
            "verbosity": -1,
            **params,
        }
        self.rounds = n_estimators

    def fit(self, x: np.ndarray, y: np.ndarray) -> LightGBMLearner:
        import lightgbm

        params = {**self.params, "num_threads": fit_threads(len(x), self.params["num_threads"])}
        self.booster = lightgbm.train(params, lightgbm.Dataset(x, y), num_boost_round=self.rounds)
        return self

    def _native(self, text: bytes) -> Any:
        import lightgbm

        return lightgbm.Booster(model_str=text.decode())

    def _native_predict(self, x: np.ndarray) -> np.ndarray:
        rows = np.asarray(x, dtype=np.float64)
        return np.asarray(
            self.booster.predict(rows, num_threads=self.params["num_threads"]), dtype=np.float64
        )

    @classmethod
    def load(cls, path: Path) -> LightGBMLearner:
        """A model file, checked (``read_model_text``)."""
        from infercast.predictors.lightgbm_text import read_model_text

        learner = cls()
        with native_load(path, cls.kind, cls.suffix):
            learner.walk, learner.text = read_model_text(path)
            learner.path = path
        return learner


class ExtraTreesLearner:
    name: ClassVar[str] = "extratrees"
    suffix: ClassVar[str] = ".forest.json"
    size_param: ClassVar[str] = "forest_estimators"

    def __init__(self, n_estimators: int = 300, seed: int = 0, n_jobs: int = 2, **params: Any) -> None:
        self.params = {
            "n_estimators": n_estimators,
            "max_features": 0.7,
            "min_samples_leaf": 1,
            "random_state": seed,
            "n_jobs": n_jobs,
            **params,
        }
        self.forest: Any = None

    def fit(self, x: np.ndarray, y: np.ndarray) -> ExtraTreesLearner:
        from sklearn.ensemble import ExtraTreesRegressor

        from infercast.predictors.forest import ArrayForest

        params = {**self.params, "n_jobs": fit_threads(len(x), self.params["n_jobs"])}
        self.forest = ArrayForest.from_sklearn(ExtraTreesRegressor(**params).fit(x, y))
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.forest.predict(x)

    def save(self, path: Path) -> None:
        self.forest.save(path)

    @classmethod
    def load(cls, path: Path) -> ExtraTreesLearner:
        from infercast.predictors.forest import ArrayForest

        learner = cls()
        with native_load(path, "extremely-randomized-trees", cls.suffix):
            learner.forest = ArrayForest.load(path)
        return learner


LEARNERS: dict[str, type[XGBoostLearner] | type[LightGBMLearner] | type[ExtraTreesLearner]] = {
    cls.name: cls for cls in (XGBoostLearner, LightGBMLearner, ExtraTreesLearner)
}
