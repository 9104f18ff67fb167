"""``nb201``: the NAS-Bench-201 cell space on its standard macro network (CIFAR, 32×32 input).

A cell is a 4-node DAG; each of its 6 edges carries one of ``none`` (multiply by 0, as the
benchmark's ``Zero`` op), ``skip_connect``, ``nor_conv_1x1``, ``nor_conv_3x3`` (ReLU-Conv-BN) or
``avg_pool_3x3``; a node sums its incoming edges. The network: a 3×3 conv stem to 16 channels +
BN, three stages of 5 identical cells at 16/32/64 channels joined by residual reduction blocks,
BN + ReLU, global pooling and a 10-way linear head. 5⁶ = 15,625 cells.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from infercast.space.base import Param, Space, SpaceError
from infercast.space.vector import Accumulator, Block, as_columns, scale_rows

if TYPE_CHECKING:
    from torch import nn

EDGE_OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
EDGES = ((1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2))  # (to node, from node), in string order
STAGE_CHANNELS = (16, 32, 64)
CELLS_PER_STAGE = 5
NUM_CLASSES = 10
SIDE = 32
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def cell_string(ops: Sequence[str]) -> str:
    """Six edge ops in ``EDGES`` order → ``|op~0|+|op~0|op~1|+|op~0|op~1|op~2|``."""
    parts = [f"{ops[0]}~0"], [f"{ops[1]}~0", f"{ops[2]}~1"], [f"{ops[3]}~0", f"{ops[4]}~1", f"{ops[5]}~2"]
    return "+".join("|" + "|".join(node) + "|" for node in parts)


def parse_cell(text: str) -> tuple[str, ...]:
    """The inverse of :func:`cell_string`, with errors that say what is wrong."""
    nodes = text.strip().split("+")
    ops: list[str] = []
    if len(nodes) != 3:
        raise SpaceError(f"cell={text!r}: a NAS-Bench-201 cell has 3 nodes separated by '+'")
    for target, node in enumerate(nodes, start=1):
        edges = [e for e in node.strip("|").split("|") if e]
        if len(edges) != target:
            raise SpaceError(
                f"cell={text!r}: node {target} needs {target} incoming edge(s), got {len(edges)}"
            )
        for source, edge in enumerate(edges):
            op, _, origin = edge.partition("~")
            if op not in EDGE_OPS or origin != str(source):
                raise SpaceError(
                    f"cell={text!r}: edge {edge!r} should be OP~{source} with OP in {', '.join(EDGE_OPS)}"
                )
            ops.append(op)
    return tuple(ops)


ALL_CELLS = tuple(cell_string(ops) for ops in itertools.product(EDGE_OPS, repeat=len(EDGES)))


class NB201(Space):
    name = "nb201"
    description = "NAS-Bench-201 cells on the standard CIFAR macro network (32x32 input)"
    params = (
        Param(
            "cell",
            ALL_CELLS,
            "cell string, e.g. |nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|…|",
            "a NAS-Bench-201 cell string over none, skip_connect, nor_conv_1x1, nor_conv_3x3, avg_pool_3x3",
            default=cell_string(["nor_conv_3x3"] * 6),
        ),
        Param("batch", BATCHES, "batch size"),
    )

    def validate(self, config: dict[str, Any]) -> dict[str, Any]:
        if "cell" in config:
            parse_cell(str(config["cell"]))  # a precise message before the generic "outside the space"
        return super().validate(config)

    def build(self, config: dict[str, Any], device: str = "cpu") -> nn.Module:
        from infercast.space.nets.nb201 import build

        ops = parse_cell(self.validate(config)["cell"])
        edges = [(target, source, op) for op, (target, source) in zip(ops, EDGES, strict=True)]
        return build(edges, STAGE_CHANNELS, CELLS_PER_STAGE, NUM_CLASSES, device)

    def input_shape(self, config: dict[str, Any]) -> tuple[int, ...]:
        return (self.validate(config)["batch"], 3, SIDE, SIDE)

    def features(self, configs: pd.DataFrame | dict[str, Sequence[Any]]) -> pd.DataFrame:
        if "cell" not in configs:
            raise SpaceError("configs lack the column(s) cell")
        # the column as given, not as_columns' array: a sampled one is categorical, and turning
        # a screening chunk's rows into strings was a tenth of the whole featurisation
        cell_index = _cell_indices(configs["cell"])
        batch = as_columns(configs, ["batch"])["batch"].astype(np.float64)
        if not np.isin(batch, BATCHES).all():
            raise SpaceError(
                f"batch={batch[~np.isin(batch, BATCHES)][0]:g} is outside the space; "
                f"allowed: {self.param('batch').allowed}"
            )
        distinct, inverse = np.unique(cell_index, return_inverse=True)
        unit = _UNIT_FEATURES(distinct)
        # every size below is per sample in elements: scale by batch and 4-byte floats
        columns = scale_rows(unit, inverse, batch, np.full(len(batch), 4.0))
        return pd.DataFrame(columns, index=getattr(configs, "index", None), copy=False)


def _cell_indices(cells: Any) -> np.ndarray:
    """Each cell's position in ``ALL_CELLS``; a sampled (categorical) column maps its categories
    once instead of its million rows."""
    index = {cell: i for i, cell in enumerate(ALL_CELLS)}
    categorical = isinstance(getattr(cells, "dtype", None), pd.CategoricalDtype)
    values = list(cells.cat.categories) if categorical else np.asarray(cells)
    try:
        looked_up = np.fromiter((index[c] for c in values), dtype=np.int64, count=len(values))
    except KeyError as error:
        parse_cell(str(error.args[0]))
        raise SpaceError(f"cell={error.args[0]!r} is not a NAS-Bench-201 cell") from None
    return looked_up[cells.cat.codes.to_numpy()] if categorical else looked_up


class _UnitFeatures:
    """Features of cells at batch 1 by position in ``ALL_CELLS``, each cell featurised once per
    process: the chunks of a screening draw the same 15,625 cells again and again (a million
    candidates spent 3.6 s featurising them chunk after chunk)."""

    def __init__(self) -> None:
        self.known = np.zeros(len(ALL_CELLS), dtype=bool)
        self.rows: np.ndarray | None = None

    def __call__(self, cells: np.ndarray) -> np.ndarray:
        missing = cells[~self.known[cells]]
        if len(missing) or self.rows is None:
            ops = np.array(
                [[EDGE_OPS.index(op) for op in parse_cell(ALL_CELLS[i])] for i in missing]
            ).reshape(-1, 6)
            unit = _featurize(ops)
            if self.rows is None:
                self.rows = np.empty((len(ALL_CELLS), unit.shape[1]))
            self.rows[missing] = unit
            self.known[missing] = True
        assert self.rows is not None
        return self.rows[cells]


_UNIT_FEATURES = _UnitFeatures()


def _featurize(op_index: np.ndarray) -> np.ndarray:
    rows = len(op_index)
    acc = Accumulator(rows)
    image = np.full(rows, 3.0 * SIDE * SIDE)
    c0 = STAGE_CHANNELS[0]
    stem = Block(rows, image)
    out = np.full(rows, float(c0 * SIDE * SIDE))
    x = stem.conv(
        stem.input, out, macs=out * 3 * 9, params=np.full(rows, c0 * 27.0), channels=np.full(rows, c0)
    )
    stem_out = stem.bn(x, out, np.full(rows, float(c0)))
    stem.close(acc, [stem_out])

    side = SIDE
    for stage, channels in enumerate(STAGE_CHANNELS):
        c = np.full(rows, float(channels))
        if stage > 0:
            cin = STAGE_CHANNELS[stage - 1]
            _reduction(acc, rows, cin, channels, side)
            side //= 2
        _cell(acc, op_index, c, float(channels * side * side))

    final = np.full(rows, float(STAGE_CHANNELS[-1] * side * side))
    head = Block(rows, final)
    last = head.bn(head.input, final, np.full(rows, float(STAGE_CHANNELS[-1])))
    last = head.act(last, final)
    pooled = np.full(rows, float(STAGE_CHANNELS[-1]))
    pooled_t = head.op("global_pool", [last], pooled, final)
    flat = head.op(None, [pooled_t], pooled, alias=True)
    logits = np.full(rows, float(NUM_CLASSES))
    macs = pooled * NUM_CLASSES
    params = np.full(rows, float(STAGE_CHANNELS[-1] * NUM_CLASSES + NUM_CLASSES))
    result = head.op("linear", [flat], logits, 2 * macs, macs=macs, params=params, channels=logits)
    head.close(acc, [result])
    return acc.matrix(
        batch=np.ones(rows),
        in_channels=3,
        side=np.full(rows, float(SIDE)),
        input_elements=image,
        itemsize=1.0,
    )


def _reduction(acc: Accumulator, rows: int, cin: int, cout: int, side: int) -> None:
    x_size = np.full(rows, float(cin * side * side))
    o = np.full(rows, float(cout * (side // 2) ** 2))
    ch = np.full(rows, float(cout))
    block = Block(rows, x_size)
    r = block.act(block.input, x_size)
    a = block.conv(r, o, macs=o * cin * 9, params=np.full(rows, cout * cin * 9.0), channels=ch)
    a = block.bn(a, o, ch)
    r = block.act(a, o)
    b = block.conv(r, o, macs=o * cout * 9, params=np.full(rows, cout * cout * 9.0), channels=ch)
    b = block.bn(b, o, ch)
    pooled = np.full(rows, float(cin * (side // 2) ** 2))
    p = block.op("pool_avg", [block.input], pooled, pooled * 4)
    d = block.conv(p, o, macs=o * cin, params=np.full(rows, float(cout * cin)), channels=ch)
    out = block.op("add", [d, b], o, o)
    block.close(acc, [out])


def _cell(acc: Accumulator, op_index: np.ndarray, channels: np.ndarray, size: float) -> None:
    rows = len(op_index)
    x = np.full(rows, size)
    block = Block(rows, x)
    nodes: list[list[int]] = [[block.input]]  # a node's tensor: one per alternative op upstream
    for target in (1, 2, 3):
        terms: list[list[int]] = []
        for edge, (t, source) in enumerate(EDGES):
            if t != target:
                continue
            op = op_index[:, edge]
            alternatives = []
            for src in nodes[source]:
                alternatives += _edge(block, src, op, channels, x)
            terms.append(alternatives)
        total = terms[0]
        for term in terms[1:]:
            total = [block.op("add", total + term, x, x)]
        nodes.append(total)
    block.close(acc, nodes[3], mult=float(CELLS_PER_STAGE))


def _edge(block: Block, source: int, op: np.ndarray, channels: np.ndarray, x: np.ndarray) -> list[int]:
    """The edge's output under each op (only the present one is allocated in a given row)."""
    upstream = block.present[source]  # the source is itself one alternative of the node before
    is_op = {name: (op == EDGE_OPS.index(name)) * upstream for name in EDGE_OPS}
    outputs = [block.op("mul", [source], x, x, is_op["none"])]
    outputs.append(block.op(None, [source], x, present=is_op["skip_connect"], alias=True))
    for name, kernel in (("nor_conv_1x1", 1), ("nor_conv_3x3", 3)):
        present = is_op[name]
        r = block.act(source, x, present)
        c = block.conv(
            r,
            x,
            macs=x * channels * kernel * kernel,
            params=channels * channels * kernel * kernel,
            channels=channels,
            present=present,
        )
        outputs.append(block.bn(c, x, channels, present))
    outputs.append(block.op("pool_avg", [source], x, x * 9, is_op["avg_pool_3x3"]))
    return outputs
