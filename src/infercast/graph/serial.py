"""A captured graph as plain JSON and back, exactly: what a capture cache keeps on disk.

Shapes and attribute values that capture writes as tuples come back as tuples; JSON has no
tuples, and no attribute value is a list, so every JSON list of a graph is a tuple."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from infercast.graph.types import Graph, Node, TensorInfo, Weight

FORMAT = 1


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "name": graph.name,
        "capture": graph.capture,
        "input_shape": list(graph.input_shape),
        "nodes": [asdict(node) for node in graph.nodes],
        "tensors": [asdict(tensor) for tensor in graph.tensors.values()],
        "inputs": graph.inputs,
        "outputs": graph.outputs,
        "views": graph.views,
        "weights": [asdict(weight) for weight in graph.weights.values()],
    }


def graph_from_dict(saved: dict[str, Any]) -> Graph:
    """The graph ``graph_to_dict`` wrote; KeyError / TypeError / ValueError on anything else."""
    if saved.get("format") != FORMAT:
        raise ValueError(f"graph format {saved.get('format')!r}, expected {FORMAT}")
    nodes = []
    for node in saved["nodes"]:
        fields = dict(node)
        fields["input_shapes"] = [tuple(s) for s in node["input_shapes"]]
        fields["output_shapes"] = [tuple(s) for s in node["output_shapes"]]
        fields["attrs"] = {k: _tuples(v) for k, v in node["attrs"].items()}
        nodes.append(Node(**fields))
    tensors = [TensorInfo(**{**t, "shape": tuple(t["shape"])}) for t in saved["tensors"]]
    weights = [Weight(**{**w, "shape": tuple(w["shape"])}) for w in saved["weights"]]
    return Graph(
        name=saved["name"],
        capture=saved["capture"],
        input_shape=tuple(saved["input_shape"]),
        nodes=nodes,
        tensors={t.name: t for t in tensors},
        inputs=list(saved["inputs"]),
        outputs=list(saved["outputs"]),
        views=dict(saved["views"]),
        weights={w.key: w for w in weights},
    )
