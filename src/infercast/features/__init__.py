"""The flat, versioned feature vector the predictors learn from.

``featurize(graph)`` returns one value per name in ``FEATURE_NAMES`` (schema ``FEATURE_SCHEMA_VERSION``).
Column meanings are documented in ``FEATURE_DOCS`` (docs/graph.md describes the costs behind them).
The vectorised design-space path must produce the same columns; a test holds the two equal.
"""

from __future__ import annotations

from typing import Any

from infercast.graph import OP_GROUPS, Graph, Node, op_group, ops

FEATURE_SCHEMA_VERSION = 1

_BASE_DOCS: dict[str, str] = {
    "batch": "input batch size (first input dimension)",
    "in_channels": "input channels",
    "in_h": "input height (1 for inputs of rank < 3)",
    "in_w": "input width (1 for inputs of rank < 4)",
    "flops": "total FLOPs (2 per MAC for conv/linear, see docs/graph.md for other ops)",
    "macs": "multiply-accumulates of conv / linear / matmul",
    "params": "number of parameters (distinct, BN running statistics excluded)",
    "weight_bytes": "bytes of distinct parameters and buffers",
    "activation_bytes": "bytes of all activation tensors allocated (input excluded, views free)",
    "peak_activation_bytes": "largest sum of live activation bytes at any node (input included)",
    "input_bytes": "bytes of the input tensor",
    "arithmetic_intensity": "flops / (weight_bytes + activation_bytes), as in CARB",
    "depth": "number of weighted layers (conv, dwconv, gconv, deconv, linear, matmul)",
    "n_ops": "number of operator nodes that allocate an output (views excluded)",
    "max_channels": "largest output channel count of a conv / linear",
    "conv_flops_share": "share of FLOPs in conv / linear / matmul",
}
FEATURE_DOCS: dict[str, str] = {
    **_BASE_DOCS,
    **{f"count_{g}": f"number of '{g}' nodes" for g in OP_GROUPS},
    **{f"flops_share_{g}": f"share of total FLOPs in '{g}' nodes" for g in OP_GROUPS},
}
FEATURE_NAMES: tuple[str, ...] = tuple(FEATURE_DOCS)


def featurize(graph: Graph) -> dict[str, float]:
    """The feature vector of a captured graph, keyed by ``FEATURE_NAMES`` in that order."""
    shape = (*graph.input_shape, 1, 1, 1, 1)
    flops = graph.flops
    weighted = [n for n in graph.nodes if n.kind in ops.CONV_KINDS | ops.MATMUL_KINDS]
    counts = dict.fromkeys(OP_GROUPS, 0)
    group_flops = dict.fromkeys(OP_GROUPS, 0)
    for node in graph.nodes:
        if node.is_alias:
            continue
        # a pointwise product over a map is a 1×1 convolution, as in the kernel tables
        pointwise = ops.as_pointwise_conv(
            node.kind,
            node.input_shapes[0] if node.input_shapes else None,
            node.output_shapes[0] if node.output_shapes else None,
        )
        group = "conv" if pointwise else op_group(node.kind)
        counts[group] += 1
        group_flops[group] += node.flops
    moved = graph.weight_bytes + graph.activation_bytes
    values: dict[str, float] = {
        "batch": shape[0],
        "in_channels": shape[1] if len(graph.input_shape) > 1 else 1,
        "in_h": shape[2] if len(graph.input_shape) > 2 else 1,
        "in_w": shape[3] if len(graph.input_shape) > 3 else 1,
        "flops": flops,
        "macs": graph.macs,
        "params": graph.params,
        "weight_bytes": graph.weight_bytes,
        "activation_bytes": graph.activation_bytes,
        "peak_activation_bytes": graph.peak_activation_bytes,
        "input_bytes": graph.input_bytes,
        "arithmetic_intensity": flops / moved if moved else 0.0,
        "depth": len(weighted),
        "n_ops": sum(counts.values()),
        "max_channels": max((_out_channels(n) for n in weighted), default=0),
        "conv_flops_share": sum(n.flops for n in weighted) / flops if flops else 0.0,
    }
    for group in OP_GROUPS:
        values[f"count_{group}"] = counts[group]
    for group in OP_GROUPS:
        values[f"flops_share_{group}"] = group_flops[group] / flops if flops else 0.0
    return {name: float(values[name]) for name in FEATURE_NAMES}


def _out_channels(node: Node) -> int:
    shape = node.output_shapes[0]
    return shape[1] if node.kind in ops.CONV_KINDS else shape[-1]


JSON_SCHEMA_VERSION = 1


def describe(graph: Graph, source: str = "") -> dict[str, Any]:
    """The stable JSON document of ``infercast inspect --json`` (documented in docs/graph.md)."""
    return {
        "schema": JSON_SCHEMA_VERSION,
        "model": graph.name,
        "source": source,
        "capture": graph.capture,
        "input_shape": list(graph.input_shape),
        "dtype": graph.dtype,
        **graph.totals(),
        "features": featurize(graph),
        "feature_schema": FEATURE_SCHEMA_VERSION,
        "nodes": [node.to_dict() for node in graph.nodes],
    }
