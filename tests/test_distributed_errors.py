"""``--ray`` errors a user can fix, each one line before any cluster is touched. No cluster runs
here: these run with the other tests, not beside them as the Ray tests do (``make test``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .helpers import infercast

if os.environ.get("CI"):
    import ray  # noqa: F401  (under CI Ray must be there: `make test` installs the extra)
else:
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'infercast[ray]'")

HOST = "127.0.0.2"  # loopback, as the Ray tests' cluster; nothing listens on port 1


def test_clear_errors_before_any_cluster_is_touched(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.db")
    base = ["profile", "--space", "carb-resnet", "--n", "2", "--db", db]
    nobody = infercast(*base, "--ray", f"{HOST}:1", "--device", "kind-a", isolated=True)
    assert nobody.returncode == 2 and f"no Ray cluster answers at {HOST}:1" in nobody.stderr
    unnamed = infercast(*base, "--ray", f"{HOST}:1")
    assert unnamed.returncode == 2 and "at least one device kind" in unnamed.stderr
    local = infercast(*base, "--device", "kind-a")
    assert local.returncode == 2 and "needs --ray ADDRESS" in local.stderr
    bad = infercast(*base, "--ray", f"{HOST}:1", "--device", "device:kind-a")
    assert bad.returncode == 2 and "not device:rtx3080" in bad.stderr
