"""Models in groups (architecture families, say) held out whole, so that what is fitted on the
other groups is judged on a group it never saw."""

from __future__ import annotations

import numpy as np
import pandas as pd

from infercast.predictors.errors import PredictorError


def model_groups(models: list[str], groups: pd.Series | None) -> pd.Series:
    """The group of each model (indexed by model): ``groups``' values, each model its own group
    by default."""
    if groups is None:
        return pd.Series(models, index=models)
    groups = pd.Series(groups)
    groups.index = groups.index.astype(str)
    missing = [m for m in models if m not in groups.index or pd.isna(groups.get(m))]
    if missing:
        raise PredictorError(f"groups name no group for the model(s) {', '.join(missing[:5])}")
    return groups.loc[models].astype(str)


def group_folds(models: list[str], group_of: pd.Series, n_folds: int) -> np.ndarray:
    """Each model's fold when whole groups are held out (group k-fold, at most ``n_folds``)."""
    # scikit-learn loads when a model is fitted: listing the devices imports the op-wise module
    from sklearn.model_selection import GroupKFold

    folds = np.empty(len(models), dtype=np.int64)
    splitter = GroupKFold(n_splits=min(n_folds, group_of.nunique()))
    for fold, (_, held) in enumerate(splitter.split(models, groups=group_of)):
        folds[held] = fold
    return folds
