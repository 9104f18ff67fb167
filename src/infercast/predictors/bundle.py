"""A predictor directory as ``infercast train`` / ``adapt`` writes it, with its latency routes.

    FOLDER/             the main predictor: CascadeBlend (train), Adapted or DeviceAdapted (adapt)
    FOLDER/opwise/      OpWise: kernels + overhead                          (route "opwise")
    FOLDER/combined/    CascadeBlend given the op-wise estimate             (route "combined")
    FOLDER/physical/    PhysicalLatency: Σ cost × work on device features   (route "physical")
    FOLDER/routes.json  the routes ranked on held-out configs, by key; the geometric mean of blend,
                        op-wise and Σ cost × work is a route of its own ("mean"), computed from theirs

``PredictorBundle`` is the one place that knows this layout: training writes each route with
``save_route`` and the ranking with ``save_ranking``; prediction loads the whole bundle and asks
``predict_graphs`` for every route's predictions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from infercast.features import featurize
from infercast.files import FileError, read_json
from infercast.graph import Graph
from infercast.predictors.base import Predictor, load
from infercast.predictors.data import feature_frame
from infercast.predictors.devices.features import device_feature_frame
from infercast.predictors.errors import PredictorError
from infercast.predictors.ood import either_ood
from infercast.predictors.routes import (
    BLEND,
    COMBINED,
    MEAN,
    OPWISE,
    OPWISE_ESTIMATE,
    PHYSICAL,
    geometric_mean,
    route_key,
)

# the routes a bundle may hold beside the main predictor, each in a directory of its own
ROUTE_DIRS: dict[str, str] = {OPWISE: "opwise", COMBINED: "combined", PHYSICAL: "physical"}
RANKING_FILE = "routes.json"


@dataclass
class PredictorBundle:
    """A loaded predictor directory: ``main`` and the routes present beside it (route name →
    predictor), with ``order``, the ranking ``train`` saved (best first; empty if none)."""

    folder: Path
    main: Predictor
    routes: dict[str, Predictor] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, folder: str | Path) -> PredictorBundle:
        folder = Path(folder)
        main = load(folder)
        if main.kind == "opwise":
            raise PredictorError(
                f"{folder}: an op-wise predictor of tables; use `infercast predict-ops` with it, or a "
                "predictor directory from `infercast train`"
            )
        routes = {
            route: load(folder / sub)
            for route, sub in ROUTE_DIRS.items()
            if (folder / sub / "meta.json").is_file()
        }
        return cls(folder, main, routes, read_ranking(folder))

    @staticmethod
    def route_folder(folder: str | Path, route: str) -> Path:
        """Where ``route``'s predictor lives in the directory ``folder``."""
        if route not in ROUTE_DIRS:
            raise PredictorError(f"route {route!r} has no directory; routes: {', '.join(ROUTE_DIRS)}")
        return Path(folder) / ROUTE_DIRS[route]

    @classmethod
    def save_route(
        cls, folder: str | Path, route: str, predictor: Predictor, metadata: dict[str, Any] | None = None
    ) -> Path:
        return predictor.save(cls.route_folder(folder, route), metadata)

    @staticmethod
    def save_ranking(folder: str | Path, ranking: dict[str, Any]) -> Path:
        path = Path(folder) / RANKING_FILE
        path.write_text(json.dumps(ranking, indent=2))
        return path

    @property
    def is_device_adapted(self) -> bool:
        return self.main.kind == "device-adapted"

    def predict_graphs(self, graphs: list[Graph]) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
        """The main predictor's predictions of the captured ``graphs`` (one row each, in order),
        and every latency route's, ranked: ``order`` first, then the rest."""
        if self.is_device_adapted:
            return self.main.predict_graphs(graphs), {}
        platform = self.main.info.platform
        x = feature_frame([featurize(g) for g in graphs], platform.settings)
        predicted = self.main.predict(x)
        routes: dict[str, pd.DataFrame] = {}
        if "latency" in getattr(self.main, "targets_", {}):
            routes[BLEND] = predicted
        opwise = self.routes.get(OPWISE)
        if opwise is not None:
            routes[OPWISE] = opwise.predict_graphs(
                graphs, platform.backend, platform.settings, platform.fingerprint
            )
            combined = self.routes.get(COMBINED)
            if combined is not None:
                estimate = np.log(routes[OPWISE]["latency_ms"].to_numpy())
                both = combined.predict(x.assign(**{OPWISE_ESTIMATE: estimate}))
                # the op-wise estimate is an input: its doubts are the combined route's too
                both["ood"], both["ood_reason"] = either_ood(both, routes[OPWISE])
                routes[COMBINED] = both
        physical = self.routes.get(PHYSICAL)
        if physical is not None:
            routes[PHYSICAL] = physical.predict(device_feature_frame(graphs)).reset_index(drop=True)
            if BLEND in routes and OPWISE in routes:
                routes[MEAN] = geometric_mean(
                    routes[BLEND].reset_index(drop=True),
                    routes[OPWISE].reset_index(drop=True),
                    routes[PHYSICAL],
                )
        ranked = [r for r in self.order if r in routes] + [r for r in routes if r not in self.order]
        return predicted, {route: routes[route] for route in ranked}


def read_ranking(folder: str | Path) -> list[str]:
    """The routes' order ``train`` saved in ``routes.json``, by key (empty if it saved none); a
    name no route has is refused."""
    path = Path(folder) / RANKING_FILE
    if not path.exists():
        return []
    try:
        order = read_json(path, RANKING_FILE)["order"]
    except (FileError, KeyError, TypeError) as error:
        raise PredictorError(f"{path}: damaged ({error}); retrain with `infercast train`") from None
    if not isinstance(order, list):
        raise PredictorError(f"{path}: damaged ('order' is not a list); retrain with `infercast train`")
    try:
        return [route_key(str(name)) for name in order]
    except PredictorError as error:
        raise PredictorError(f"{path}: {error}") from None
