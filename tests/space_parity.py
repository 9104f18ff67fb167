"""The closed form of a space held equal to build + capture (shared by the per-space tests)."""

from __future__ import annotations

import numpy as np
import pytest

from infercast import capture, featurize
from infercast.features import FEATURE_NAMES
from infercast.space import Space


def assert_closed_form_matches_capture(space: Space, n: int, seed: int) -> None:
    """Params and FLOPs exactly, memory within 1 %, every other column to rounding. The sample is
    stratified (each parameter's values cycled evenly), so ``n`` configs cover every value of the
    parameters with up to ``n`` choices, where a uniform sample of the same size would not."""
    frame = space.sample(n, seed=seed, stratified=True)
    vectorised = space.features(frame)
    names = [p.name for p in space.params]
    for index, row in frame.iterrows():
        config = {k: row[k] for k in names}
        graph = capture(space.build(config, device="meta"), space.input_shape(config))
        reference = featurize(graph)
        assert vectorised.loc[index, "params"] == graph.params, row["model"]
        assert vectorised.loc[index, "flops"] == graph.flops, row["model"]
        for name in ("activation_bytes", "peak_activation_bytes"):
            assert vectorised.loc[index, name] == pytest.approx(reference[name], rel=0.01), (
                row["model"],
                name,
            )
        got = vectorised.loc[index, list(FEATURE_NAMES)].to_numpy(dtype=float)
        want = np.array([reference[n] for n in FEATURE_NAMES])
        np.testing.assert_allclose(got, want, rtol=1e-9, err_msg=row["model"])
