"""The learners a blend is made of, each saved in its library's own code-free format.

A new learner is one class here with ``fit / predict / save / load`` and one entry in ``LEARNERS``.
Each declares ``size_param``: the blend hyper-parameter that sets its number of trees (boosting
rounds and forests differ by an order of magnitude in what a good size is).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np


class Learner(Protocol):
    name: ClassVar[str]
    suffix: ClassVar[str]
    size_param: ClassVar[str]

    def fit(self, x: np.ndarray, y: np.ndarray) -> Learner: ...

    def predict(self, x: np.ndarray) -> np.ndarray: ...

    def save(self, path: Path) -> None: ...


class XGBoostLearner:
    name: ClassVar[str] = "xgboost"
    suffix: ClassVar[str] = ".xgb.json"
    size_param: ClassVar[str] = "n_estimators"

    def __init__(self, n_estimators: int = 600, seed: int = 0, n_jobs: int = 2, **params: Any) -> None:
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
        self.booster: Any = None

    def fit(self, x: np.ndarray, y: np.ndarray) -> XGBoostLearner:
        import xgboost

        model = xgboost.XGBRegressor(**self.params)
        model.fit(x, y)
        self.booster = model.get_booster()
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.booster.inplace_predict(np.asarray(x, dtype=np.float32)).astype(np.float64)

    def save(self, path: Path) -> None:
        self.booster.save_model(str(path))

    @classmethod
    def load(cls, path: Path) -> XGBoostLearner:
        import xgboost

        learner = cls()
        learner.booster = xgboost.Booster()
        learner.booster.load_model(str(path))
        return learner


class LightGBMLearner:
    name: ClassVar[str] = "lightgbm"
    suffix: ClassVar[str] = ".lgb.txt"
    size_param: ClassVar[str] = "n_estimators"

    def __init__(self, n_estimators: int = 600, seed: int = 0, n_jobs: int = 2, **params: Any) -> None:
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
        self.booster: Any = None

    def fit(self, x: np.ndarray, y: np.ndarray) -> LightGBMLearner:
        import lightgbm

        self.booster = lightgbm.train(self.params, lightgbm.Dataset(x, y), num_boost_round=self.rounds)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self.booster.predict(np.asarray(x, dtype=np.float64)), dtype=np.float64)

    def save(self, path: Path) -> None:
        self.booster.save_model(str(path))

    @classmethod
    def load(cls, path: Path) -> LightGBMLearner:
        import lightgbm

        learner = cls()
        learner.booster = lightgbm.Booster(model_file=str(path))
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

        from infercast.predict.forest import ArrayForest

        self.forest = ArrayForest.from_sklearn(ExtraTreesRegressor(**self.params).fit(x, y))
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.forest.predict(x)

    def save(self, path: Path) -> None:
        self.forest.save(path)

    @classmethod
    def load(cls, path: Path) -> ExtraTreesLearner:
        from infercast.predict.forest import ArrayForest

        learner = cls()
        learner.forest = ArrayForest.load(path)
        return learner


LEARNERS: dict[str, type[XGBoostLearner] | type[LightGBMLearner] | type[ExtraTreesLearner]] = {
    cls.name: cls for cls in (XGBoostLearner, LightGBMLearner, ExtraTreesLearner)
}
