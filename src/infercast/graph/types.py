"""The operator graph: nodes in execution order, the tensors between them, and their costs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from infercast.graph import ops
from infercast.graph.ops import Shape


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: Shape
    dtype: str
    itemsize: int

    @property
    def nbytes(self) -> int:
        return ops.numel(self.shape) * self.itemsize


@dataclass(frozen=True)
class Weight:
    """A parameter or buffer read by a node. ``key`` identifies it so shared weights count once."""

    key: str
    shape: Shape
    itemsize: int
    is_param: bool

    @property
    def nbytes(self) -> int:
        return ops.numel(self.shape) * self.itemsize


@dataclass
class Node:
    """One operator as executed. ``inputs`` / ``outputs`` are activation tensor names."""

    index: int
    name: str
    kind: str
    op: str
    inputs: list[str]
    outputs: list[str]
    input_shapes: list[Shape]
    output_shapes: list[Shape]
    attrs: dict[str, Any] = field(default_factory=dict)
    params: int = 0  # parameters first read here (a shared weight counts at its first use)
    weight_bytes: int = 0  # bytes of the parameters and buffers this node reads
    macs: int = 0
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0

    @property
    def is_alias(self) -> bool:
        return ops.is_alias(self.kind)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["input_shapes"] = [list(s) for s in self.input_shapes]
        out["output_shapes"] = [list(s) for s in self.output_shapes]
        out["attrs"] = {k: list(v) if isinstance(v, tuple) else v for k, v in self.attrs.items()}
        return out


@dataclass
class Graph:
    """A captured network. Totals are sums over nodes; peak memory comes from tensor liveness."""

    name: str
    capture: str
    input_shape: Shape
    nodes: list[Node]
    tensors: dict[str, TensorInfo]
    inputs: list[str]
    outputs: list[str]
    # tensor name -> the allocated tensor it is a view of (only for tensors made by alias nodes)
    views: dict[str, str] = field(default_factory=dict)
    # every distinct parameter / buffer read by some node, by key
    weights: dict[str, Weight] = field(default_factory=dict)

    @property
    def flops(self) -> int:
        return sum(n.flops for n in self.nodes)

    @property
    def macs(self) -> int:
        return sum(n.macs for n in self.nodes)

    @property
    def params(self) -> int:
        return sum(ops.numel(w.shape) for w in self.weights.values() if w.is_param)

    @property
    def weight_bytes(self) -> int:
        """Bytes of distinct parameters and buffers (BN running statistics included)."""
        return sum(w.nbytes for w in self.weights.values())

    @property
    def activation_bytes(self) -> int:
        """Bytes of every activation tensor the network allocates (graph input excluded)."""
        return sum(n.bytes_written for n in self.nodes)

    @property
    def input_bytes(self) -> int:
        return sum(self.tensors[t].nbytes for t in self.inputs)

    @property
    def dtype(self) -> str:
        return self.tensors[self.inputs[0]].dtype if self.inputs else "float32"

    def root(self, tensor: str) -> str:
        while tensor in self.views:
            tensor = self.views[tensor]
        return tensor

    def live_bytes(self) -> list[int]:
        """Activation bytes alive while each node runs (its inputs and its outputs included).

        A tensor lives from the node that writes it (the graph input: from the start) to the last
        node that reads it or any view of it; graph outputs live to the end. Views allocate
        nothing. In-place execution is not assumed: every non-view output is a new buffer.
        """
        last = len(self.nodes) - 1
        start: dict[str, int] = {t: 0 for t in self.inputs}
        end: dict[str, int] = {t: 0 for t in self.inputs}
        for node in self.nodes:
            for t in node.outputs:
                root = self.root(t)
                start.setdefault(root, node.index)
                end[root] = max(end.get(root, node.index), node.index)
            for t in node.inputs:
                root = self.root(t)
                end[root] = max(end.get(root, node.index), node.index)
        for t in self.outputs:
            end[self.root(t)] = last
        delta = [0] * (len(self.nodes) + 1)
        for root, s in start.items():
            size = self.tensors[root].nbytes
            delta[s] += size
            delta[end[root] + 1] -= size
        live, running = [], 0
        for d in delta[:-1]:
            running += d
            live.append(running)
        return live

    @property
    def peak_activation_bytes(self) -> int:
        return max(self.live_bytes(), default=self.input_bytes)

    def totals(self) -> dict[str, int]:
        return {
            "flops": self.flops,
            "macs": self.macs,
            "params": self.params,
            "weight_bytes": self.weight_bytes,
            "activation_bytes": self.activation_bytes,
            "peak_activation_bytes": self.peak_activation_bytes,
            "input_bytes": self.input_bytes,
            "n_ops": sum(not n.is_alias for n in self.nodes),
        }


_SPATIAL_ATTRS = ("kernel", "stride", "padding", "dilation")


class GraphBuilder:
    """Shared by every capture path: turns (kind, shapes, weights) into costed nodes."""

    def __init__(self, name: str, capture: str) -> None:
        self.name = name
        self.capture = capture
        self.nodes: list[Node] = []
        self.tensors: dict[str, TensorInfo] = {}
        self.inputs: list[str] = []
        self.views: dict[str, str] = {}
        self.weights: dict[str, Weight] = {}

    def add_input(self, name: str, shape: Shape, dtype: str, itemsize: int) -> None:
        self.tensors[name] = TensorInfo(name, tuple(shape), dtype, itemsize)
        self.inputs.append(name)

    def add_node(
        self,
        name: str,
        op: str,
        kind: str,
        inputs: list[str],
        outputs: list[TensorInfo],
        weights: list[Weight],
        attrs: dict[str, Any] | None = None,
    ) -> Node:
        in_shapes = [self.tensors[t].shape for t in inputs]
        spatial_rank = max(len(in_shapes[0]) - 2, 1) if in_shapes else 1
        attrs = {
            k: (v,) * spatial_rank if k in _SPATIAL_ATTRS and isinstance(v, int) else v
            for k, v in (attrs or {}).items()
        }
        out_shapes = [t.shape for t in outputs]
        for t in outputs:
            self.tensors[t.name] = t
        alias = ops.is_alias(kind) and bool(inputs)
        if alias:
            for t in outputs:
                self.views[t.name] = inputs[0]

        # only a convolution's MACs and kernel attribute read a weight's shape
        weight_shape = (
            ops.kernel_shape([w.shape for w in weights], in_shapes) if kind in ops.CONV_KINDS else None
        )
        if weight_shape is not None:
            attrs.setdefault("kernel", tuple(weight_shape[2:]))
        # an argument left at its default is often absent (torch.export records aten.conv2d
        # without stride 1, ONNX may omit strides): the defaults of F.conv2d / F.*_pool2d and of
        # ONNX, a pool's stride being its window
        if kind in ops.CONV_KINDS:
            for key, default in (("stride", 1), ("padding", 0), ("dilation", 1)):
                attrs.setdefault(key, (default,) * spatial_rank)
        elif kind in ("max_pool", "avg_pool") and "kernel" in attrs:
            attrs.setdefault("stride", attrs["kernel"])
            attrs.setdefault("padding", (0,) * spatial_rank)
        in_shape = in_shapes[0] if in_shapes else None
        out_shape = out_shapes[0] if out_shapes else ()
        reduce_dim = in_shape[-1] if (kind in ops.MATMUL_KINDS and in_shape) else None
        windowed = kind in ("max_pool", "avg_pool")
        window = ops.pool_window(attrs.get("kernel"), in_shape or (), out_shape) if windowed else None
        macs = (
            ops.attention_macs(in_shapes, out_shape)
            if kind == "attention"
            else ops.macs_of(kind, in_shape, out_shape, weight_shape, reduce_dim)
        )

        params = 0
        for w in weights:
            if w.key not in self.weights:
                self.weights[w.key] = w
                params += ops.numel(w.shape) if w.is_param else 0
        weight_bytes = sum(w.nbytes for w in weights)
        act_in = sum(self.tensors[t].nbytes for t in inputs)
        node = Node(
            index=len(self.nodes),
            name=name,
            kind=kind,
            op=op,
            inputs=list(inputs),
            outputs=[t.name for t in outputs],
            input_shapes=in_shapes,
            output_shapes=out_shapes,
            attrs=attrs,
            params=params,
            weight_bytes=weight_bytes,
            macs=macs,
            flops=ops.flops_of(kind, macs, in_shapes, out_shape, window),
            bytes_read=0 if alias else act_in + weight_bytes,
            bytes_written=0 if alias else sum(t.nbytes for t in outputs),
        )
        self.nodes.append(node)
        return node

    def _fuse_swish(self, graph_outputs: list[str]) -> None:
        """Read ``x · sigmoid(x)`` as one swish node.

        PyTorch code writes SiLU either as one op or as a sigmoid and a multiply, and exporters
        write ``nn.SiLU`` as ONNX Sigmoid + Mul; fusing the pair everywhere keeps the same network
        equal to itself across capture paths.
        """
        producer = {t: n for n in self.nodes for t in n.outputs}
        readers: dict[str, int] = {t: 1 for t in graph_outputs}
        for node in self.nodes:
            for t in node.inputs:
                readers[t] = readers.get(t, 0) + 1
        dropped: set[int] = set()
        for i, node in enumerate(self.nodes):
            if node.kind != "mul" or node.weight_bytes or len(node.inputs) != 2:
                continue
            for gate, x in (node.inputs, node.inputs[::-1]):
                sigmoid = producer.get(gate)
                if (
                    sigmoid is not None
                    and sigmoid.kind == "sigmoid"
                    and sigmoid.inputs == [x]
                    and readers[gate] == 1
                ):
                    self.nodes[i] = replace(
                        node,
                        kind="swish",
                        op=f"{sigmoid.op}*{node.op}",
                        inputs=[x],
                        input_shapes=[self.tensors[x].shape],
                        flops=ops.numel(node.output_shapes[0]),
                        bytes_read=self.tensors[x].nbytes,
                    )
                    dropped.add(sigmoid.index)
                    del self.tensors[gate]
                    break
        self.nodes = [n for n in self.nodes if n.index not in dropped]
        for index, node in enumerate(self.nodes):
            node.index = index

    def build(self, outputs: list[str], input_shape: Shape) -> Graph:
        self._fuse_swish(outputs)
        return Graph(
            name=self.name,
            capture=self.capture,
            input_shape=tuple(input_shape),
            nodes=self.nodes,
            tensors=self.tensors,
            inputs=self.inputs,
            outputs=[t for t in outputs if t in self.tensors],
            views=self.views,
            weights=self.weights,
        )
