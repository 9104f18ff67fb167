"""The blend's learners: the threads they get change their speed, never the model, and a saved
model predicts what the fitted one did."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from infercast.predictors import learners
from infercast.predictors.learners import LEARNERS, ROWS_PER_FIT_THREAD, fit_threads


def test_small_tables_train_on_one_thread_and_large_ones_on_up_to_n_jobs() -> None:
    assert fit_threads(300, 8) == 1
    assert fit_threads(ROWS_PER_FIT_THREAD - 1, 8) == 1
    assert fit_threads(3 * ROWS_PER_FIT_THREAD, 8) == 3
    assert fit_threads(100 * ROWS_PER_FIT_THREAD, 4) == 4


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_threads_do_not_change_the_model(name: str, tmp_path: Path, monkeypatch) -> None:
    # 100 rows a thread: the n_jobs=2 learner trains on two threads, the other on one
    monkeypatch.setattr(learners, "ROWS_PER_FIT_THREAD", 100)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 6))
    y = x[:, 0] * 2 + np.sin(x[:, 1]) + rng.normal(scale=0.1, size=300)
    learner = LEARNERS[name]
    one = learner(n_estimators=60, n_jobs=1).fit(x, y).predict(x)
    fitted = learner(n_estimators=60, n_jobs=2).fit(x, y)
    np.testing.assert_allclose(fitted.predict(x), one, rtol=1e-6)
    assert np.corrcoef(one, y)[0, 1] > 0.9
    path = tmp_path / f"model{learner.suffix}"
    fitted.save(path)
    np.testing.assert_allclose(learner.load(path).predict(x), one, rtol=1e-6)
