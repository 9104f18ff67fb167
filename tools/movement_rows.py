"""Bring a store's ONNX Runtime op profiles made by an earlier infercast to what a profile now
records: a layout reorder (``ReorderInput`` / ``ReorderOutput``) or a Split was kept as an
``other`` row without shapes, which the op-wise route could not price, and a max or average
pool that ran in the plain layout was not named so (``algorithm``). For each such profile the
model is exported and optimised again (not run: the same export and ONNX Runtime version name
their nodes alike), and those rows take the op type, shapes, bytes and algorithm that
``measurement.ops`` now reads, their measured latency kept. A profile whose kernels the
optimised graph does not all name is left as it was and counted.

    python tools/movement_rows.py --db DB [--platform ID]

Rewrites the rows in place: run it on a copy of a store you keep.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import onnx

from infercast.graph.ops import MOVEMENT_TYPES
from infercast.measurement.backends.ort_cpu import OrtCpuBackend, nchwc_block
from infercast.measurement.ops import kernel_rows
from infercast.models import load_model
from infercast.predictors.optable import ALGORITHM

MOVING = ("ReorderInput", "ReorderOutput", "Split", "Slice")
# the op types of windowed pools, whose layout a profile names now
POOLS = ("pool_max", "pool_avg")


def optimised(backend: OrtCpuBackend, model: str) -> tuple[onnx.ModelProto, onnx.ModelProto, tuple[int, ...]]:
    """The exported model, the graph ONNX Runtime optimised it into, and its input shape."""
    import onnxruntime as ort

    loaded = load_model(model, None)
    exported = backend.prepare(loaded)
    with tempfile.TemporaryDirectory() as folder:
        options = backend.session_options()
        options.optimized_model_filepath = str(Path(folder) / "optimized.onnx")
        ort.InferenceSession(exported, options, providers=backend.providers)
        graph = onnx.load(options.optimized_model_filepath, load_external_data=False)
    return onnx.ModelProto.FromString(exported), graph, tuple(loaded.input_shape)


def named_rows(connection: sqlite3.Connection, platform: str | None) -> dict[int, list[tuple[int, dict]]]:
    """Per measurement, its stored op rows that moved data and have no movement type yet, and its
    windowed pools that name no layout."""
    query = (
        "SELECT o.id, o.measurement_id, o.row FROM op_measurements o JOIN measurements m "
        "ON m.id = o.measurement_id" + (" WHERE m.platform_id = ?" if platform else "")
    )
    rows: dict[int, list[tuple[int, dict]]] = defaultdict(list)
    for row_id, measurement, text in connection.execute(query, (platform,) if platform else ()):
        row = json.loads(text)
        unnamed = row.get("executed_op") in MOVING and row.get("op_type") not in MOVEMENT_TYPES
        if unnamed or (row.get("op_type") in POOLS and not row.get(ALGORITHM)):
            rows[measurement].append((row_id, row))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--platform", help="one platform's profiles (default: every platform's)")
    args = parser.parse_args()
    backend = OrtCpuBackend()
    blocked = nchwc_block() > 0
    connection = sqlite3.connect(args.db)
    pending = named_rows(connection, args.platform)
    models = dict(
        connection.execute("SELECT m.id, c.model FROM measurements m JOIN configs c ON c.id = m.config_id")
    )
    counts: dict[str, int] = defaultdict(int)
    for number, (measurement, stored) in enumerate(sorted(pending.items()), 1):
        original, graph, shape = optimised(backend, models[measurement])
        durations = {row["kernel"]: [row["latency_ms"]] for _, row in stored}
        named = {row["kernel"]: row for row in kernel_rows(original, graph, durations, shape, blocked)}
        if set(durations) - set(named):
            counts["profiles left as they were"] += 1
            continue
        for row_id, row in stored:
            new: dict[str, Any] = named[row["kernel"]]
            if new.get("op_type") in MOVEMENT_TYPES or new.get(ALGORITHM):
                row.update({k: v for k, v in new.items() if k not in ("latency_ms", "node_index")})
                connection.execute(
                    "UPDATE op_measurements SET row = ? WHERE id = ?", (json.dumps(row), row_id)
                )
                counts[new["op_type"] + (f".{new[ALGORITHM]}" if new.get(ALGORITHM) else "")] += 1
        connection.commit()
        print(f"\r{number}/{len(pending)} profiles", end="", flush=True)
    print()
    for what, count in sorted(counts.items()):
        print(f"{what}: {count}")


if __name__ == "__main__":
    main()
