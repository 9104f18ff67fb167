"""The kernels a runtime adds to a captured graph that only move data, as op-table rows
(``graph.ops.MOVEMENT_TYPES``): ONNX Runtime copies a tensor between its blocked NCHWc layout and
the plain one wherever an op needs the other layout (``ReorderInput`` / ``ReorderOutput``; where,
``ort_memory.steps`` works out), and its Split and Slice kernels copy their parts out where
PyTorch would take views. Between blocked convolutions a split → … → concat block pays both:
on this project's AVX-512 VM a tenth of a ShuffleNetV2-like network's time went to them, which an
op-wise route that only adds up the graph's own ops missed."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pandas as pd

from infercast.graph import Graph
from infercast.graph.ops import REORDER, SPLIT, movement_row
from infercast.predictors.fusion import KERNEL_TABLE_COLUMNS, FusionRules, kernel_table
from infercast.predictors.ort_memory import COPYING_ALIASES, steps


def movement_table(graph: Graph, rules: FusionRules, model: str = "") -> pd.DataFrame:
    """One row per data-movement kernel ``rules``' backend runs for ``graph`` (none where it
    moves no data): a reorder per layout copy, a split per tensor that splits or slices copy
    parts out of (ONNX Runtime fuses the slices of one tensor into one Split). Kernel numbers
    follow the graph's own ops'."""
    rows: list[dict[str, Any]] = []
    if rules.moves_data:
        parts: dict[str, list[Any]] = defaultdict(list)
        for node in graph.nodes:
            if node.kind in COPYING_ALIASES and node.inputs:
                parts[node.inputs[0]].append(node)
        for tensor, nodes in parts.items():
            source = graph.tensors[tensor]
            targets = [shape for node in nodes for shape in node.output_shapes]
            rows.append(movement_row(SPLIT, source.shape, targets, source.itemsize))
        for step in steps(graph, rules)[0]:
            if step.reorder:
                itemsize = graph.tensors[step.reads[0]].itemsize
                rows.append(movement_row(REORDER, step.shape, [step.shape], itemsize))
    first = max((n.index for n in graph.nodes), default=-1) + 1
    for number, row in enumerate(rows):
        row.update(model=model or graph.name, kernel=first + number, n_ops=1)
    return pd.DataFrame(rows, columns=KERNEL_TABLE_COLUMNS)


def executed_kernels(graph: Graph, rules: FusionRules, model: str = "") -> pd.DataFrame:
    """``fusion.kernel_table`` with the data-movement kernels after the graph's own."""
    table = kernel_table(graph, rules, model)
    moved = movement_table(graph, rules, model)
    return pd.concat([table, moved], ignore_index=True) if len(moved) else table
