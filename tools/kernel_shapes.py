"""Rebuild ``space/data/kernel_shapes.parquet``: the op and shape of every kernel a set of
torchvision networks executes at 1×3×224×224 (``pretrained=False``; shapes only, no timing), in
the ``kernels`` space's terms — the distribution a kernel campaign draws from.

    python tools/kernel_shapes.py

None of these networks is in the real-network test set (pytorchcv, benchmarks/real_networks.txt).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from typing import Any

import pandas as pd

from infercast.graph import Graph, capture
from infercast.graph.ops import CONV_KINDS
from infercast.models import load_model
from infercast.space.kernel_networks import SHAPE_COLUMNS, SHAPES_TABLE

MODELS = (
    "torchvision:resnet18",
    "torchvision:resnet50",
    "torchvision:resnext50_32x4d",
    "torchvision:wide_resnet50_2",
    "torchvision:mobilenet_v2",
    "torchvision:mobilenet_v3_small",
    "torchvision:mobilenet_v3_large",
    "torchvision:mnasnet1_0",
    "torchvision:shufflenet_v2_x1_0",
    "torchvision:squeezenet1_1",
    "torchvision:densenet121",
    "torchvision:efficientnet_b0",
    "torchvision:regnet_x_400mf",
    "torchvision:regnet_y_800mf",
    # groups 8 and 24 channels wide, and ShuffleNet halves of 122: convolutions ONNX Runtime's
    # blocked layout rejects (16-channel blocks on AVX-512), so the campaign learns that path too
    "torchvision:regnet_y_400mf",
    "torchvision:regnet_x_1_6gf",
    "torchvision:shufflenet_v2_x2_0",
    "torchvision:vgg11_bn",
    "torchvision:googlenet",
)
ACT_NAMES = {
    "relu": "relu",
    "relu6": "relu6",
    "hardswish": "hswish",
    "hardsigmoid": "hsigmoid",
    "sigmoid": "sigmoid",
    "swish": "swish",
    "silu": "swish",
}


def graph_kernels(graph: Graph, model: str) -> list[dict[str, Any]]:
    """The kernels of one captured graph as ``kernels`` configs (``SHAPE_COLUMNS`` + ``model``)."""
    nodes = [n for n in graph.nodes if not n.is_alias or n.kind == "split"]
    consumers: dict[str, list[Any]] = defaultdict(list)
    producer = {graph.root(t): n for n in nodes for t in n.outputs}
    for node in nodes:
        for tensor in node.inputs:
            consumers[graph.root(tensor)].append(node)

    def follower(node: Any) -> Any:
        users = consumers.get(graph.root(node.outputs[0]), []) if node.outputs else []
        return users[0] if len(users) == 1 else None

    def fused_act(node: Any) -> str:
        after = follower(node)
        if after is not None and after.kind == "bn":
            after = follower(after)
        return ACT_NAMES.get(after.kind, "none") if after is not None else "none"

    rows = []
    for node in nodes:
        shape = node.input_shapes[0] if node.input_shapes else ()
        out = node.output_shapes[0] if node.output_shapes else ()
        if len(shape) < 2:
            continue
        side = shape[2] if len(shape) == 4 else 1
        row = {
            "side": side,
            "cin": shape[1],
            "cout": shape[1],
            "kernel": 1,
            "stride": 1,
            "groups": 1,
            "act": "none",
        }
        source = producer.get(graph.root(node.inputs[0])) if node.inputs else None
        if node.kind in CONV_KINDS:
            if source is not None and source.kind == "global_pool":
                continue  # a squeeze-excitation's conv: measured inside op=se
            row.update(
                op=node.kind,
                cout=out[1],
                kernel=node.attrs["kernel"][0],
                stride=node.attrs.get("stride", (1,))[0],
                groups=node.attrs.get("groups", 1),
                act=fused_act(node),
            )
        elif node.kind == "linear":
            row.update(op="linear", cout=out[-1], act=fused_act(node))
        elif node.kind in ("max_pool", "avg_pool"):
            kernel = node.attrs.get("kernel", (1,))
            stride = node.attrs.get("stride", kernel)
            row.update(
                op="pool_max" if node.kind == "max_pool" else "pool_avg", kernel=kernel[0], stride=stride[0]
            )
        elif node.kind == "global_pool":
            squeeze = follower(node)
            if squeeze is not None and squeeze.kind in CONV_KINDS:
                expand = follower(follower(squeeze) or squeeze)
                gate = follower(expand) if expand is not None else None
                row.update(
                    op="se",
                    cout=squeeze.output_shapes[0][1],
                    act=ACT_NAMES.get(gate.kind, "sigmoid") if gate is not None else "sigmoid",
                )
            else:
                row.update(op="global_pool")
        elif node.kind == "add" and len(node.inputs) == 2 and len(shape) == 4:
            row.update(op="add", act=fused_act(node))
        elif node.kind == "concat" and len(shape) == 4:
            row.update(op="concat", cout=out[1] - shape[1])
        elif (
            node.kind in ACT_NAMES
            and source is not None
            and source.kind not in (*CONV_KINDS, "bn", "add", "linear")
        ):
            if source.kind == "global_pool" or len(shape) != 4:
                continue
            row.update(op="act", act=ACT_NAMES[node.kind])
        elif node.kind == "transpose" and len(shape) == 5:
            row.update(
                op="shuffle",
                side=shape[3],
                cin=shape[1] * shape[2],
                cout=shape[1] * shape[2],
                groups=shape[1],
            )
        elif node.kind == "split" and len(shape) == 4:
            row.update(op="split", groups=2)
        else:
            continue
        rows.append({**row, "model": model})
    return rows


def build(models: tuple[str, ...] = MODELS) -> pd.DataFrame:
    rows = []
    for name in models:
        loaded = load_model(name)
        rows += graph_kernels(capture(loaded.module, loaded.input_shape), name)
        print(f"{name}: {sum(r['model'] == name for r in rows)} kernels", flush=True)
    return pd.DataFrame(rows, columns=[*SHAPE_COLUMNS, "model"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    table = build()
    SHAPES_TABLE.parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(SHAPES_TABLE, index=False)
    print(f"{len(table)} kernels → {SHAPES_TABLE}")
    print(table["op"].value_counts().to_string())


if __name__ == "__main__":
    main()
