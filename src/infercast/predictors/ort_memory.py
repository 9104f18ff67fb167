"""Where ONNX Runtime's CPU memory goes, worked out from a captured graph without running it.

The heap a session holds after its runs (``measurement.backends.ort_cpu``) departs from weights +
live activations in three ways, each read from ONNX Runtime (1.x, CPU provider, level ``all``):

- **Weights as held.** The NCHWc transformer re-lays a blocked convolution's weights with output
  (and, from a block's width of input channels on, input) channels padded to whole blocks; a
  Gemm's weights are pre-packed with columns padded to 16; folded BatchNorm leaves a bias.
- **The arena.** Activations come from a BFC arena that never returns memory. It grows by regions:
  the first as large as the first request rounded up to a power of two from 1 MiB, each later one
  twice the last (or a larger power of two). A region's free chunk is split only when it is at
  least twice the request, so a 3.1 MiB tensor takes a whole 4 MiB region. The first run
  allocates tensor by tensor in execution order; from the second, one block of the memory
  pattern (each tensor at the lowest-waste gap of the first run's offsets) holds them all, and
  takes a new region when no free chunk is large enough. So the arena is a sum of powers of two,
  decided by the order and sizes of the tensors, not by their live total.
- **Per kernel.** Each kernel's own state (its pre-packed or reordered buffers, its objects) and
  the session's fixed cost: not worked out here, but fitted on measured networks
  (``host_memory.HostMemory``).

The tensors are the graph's as ONNX Runtime plans them: the ops of one fused kernel share it
(``fusion``), a reshape is free but a split or slice copies, an element-wise op writes over an
input that dies with it (its ``MayInplace``), and a tensor moves between the blocked and the plain
layout where an op needs the other one (``ReorderInput`` / ``ReorderOutput``), which copies it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from infercast.graph import Graph
from infercast.graph.ops import CONV_KINDS
from infercast.predictors.fusion import FusionRules, kernels_of, ort_blocks

MIB = 1 << 20
# BFC arena: every request rounded up to this; a new region at least this large
ARENA_ROUND = 256
FIRST_REGION = MIB
# the allocation planner aligns every tensor's size
TENSOR_ALIGN = 64
# ops the NCHWc transformer runs on a blocked tensor (a BatchNorm no convolution absorbed runs as a
# blocked convolution); any other op reads a plain copy
BLOCKED_UNARY = frozenset(
    {"relu", "relu6", "clip", "sigmoid", "tanh", "leaky_relu", "hardsigmoid", "swish", "bn"}
)
# pools run blocked whenever their channels fill whole blocks, reordering a plain input to do so
POOLS = frozenset({"max_pool", "avg_pool", "global_pool"})
# ops whose ONNX Runtime kernel may write its output over an input that dies with it
IN_PLACE = frozenset({"relu", "relu6", "clip", "sigmoid", "tanh", "leaky_relu", "add", "mul", "sub", "div"})
# alias kinds that still copy in ONNX (a split's outputs are tensors of their own)
COPYING_ALIASES = frozenset({"split", "slice"})


@dataclass(frozen=True)
class Step:
    """One kernel as ONNX Runtime runs it: the tensors it reads, those it writes (name, bytes),
    whether it may write over a dying input of the same size, and whether it is a layout reorder
    (a copy of its one read in the other layout, of ``shape``: as the reader sees it)."""

    reads: tuple[str, ...]
    writes: tuple[tuple[str, int], ...]
    in_place: bool
    reorder: bool = False
    shape: tuple[int, ...] = ()


def _round(size: int, unit: int) -> int:
    return -(-size // unit) * unit


def tensor_bytes(shape: tuple[int, ...], itemsize: int, block: int) -> int:
    """A tensor's allocation: channels padded to whole blocks in the blocked layout (``block``
    > 0), aligned as the planner aligns it."""
    count = itemsize
    for axis, size in enumerate(shape):
        count *= _round(int(size), block) if block and axis == 1 else int(size)
    return _round(count, TENSOR_ALIGN)


class _Layouts:
    """Which tensors are blocked, and the reorder copies made so far (each made once)."""

    def __init__(self, graph: Graph, block: int) -> None:
        self.graph, self.block = graph, block
        self.blocked: dict[str, bool] = {}
        self.copies: dict[tuple[str, bool], str] = {}
        self.steps: list[Step] = []

    def read(self, tensor: str, blocked: bool, seen: dict[str, tuple[int, ...]] | None = None) -> str:
        """``tensor`` in the layout asked for: itself, or its reorder copy. ``seen``: the shape a
        reader sees a tensor in through a view (a channel shuffle's 5-D transpose, read back as
        4-D by the convolution after it, is reordered into the blocked layout as that)."""
        info = self.graph.tensors[tensor]
        shape = (seen or {}).get(tensor, info.shape)
        if self.blocked.get(tensor, False) == blocked or len(shape) != 4:
            return tensor
        key = (tensor, blocked)
        if key not in self.copies:
            copy = f"{tensor}@{'nchwc' if blocked else 'nchw'}"
            self.copies[key] = copy
            self.blocked[copy] = blocked
            size = tensor_bytes(shape, info.itemsize, self.block if blocked else 0)
            self.steps.append(Step((tensor,), ((copy, size),), False, reorder=True, shape=tuple(shape)))
        return self.copies[key]

    def run_blocked(
        self, head: Any, reads: list[str], seen: dict[str, tuple[int, ...]] | None = None
    ) -> tuple[list[str], bool]:
        """The reads of a kernel headed by ``head`` in the layout it runs in (``seen``: as
        ``read``), and whether it writes blocked."""
        graph, block = self.graph, self.block
        shapes = (
            head.input_shapes[0] if head.input_shapes else (),
            head.output_shapes[0] if head.output_shapes else (),
        )
        if block and head.kind in CONV_KINDS and head.kind != "deconv" and len(shapes[0]) == 4:
            c_in, c_out = int(shapes[0][1]), int(shapes[1][1])
            if ort_blocks(c_in, c_out, int(head.attrs.get("groups", 1)), block):
                # a convolution of fewer input channels than a block reads the plain input as it is
                first = (
                    reads[0]
                    if c_in < block and not self.blocked.get(reads[0])
                    else self.read(reads[0], True, seen)
                )
                return [first, *(self.read(t, True, seen) for t in reads[1:])], True
        if block and head.kind in POOLS and len(shapes[0]) == 4 and int(shapes[0][1]) % block == 0:
            return [self.read(reads[0], True, seen)], True
        all_blocked = bool(reads) and all(self.blocked.get(t) for t in reads)
        if (
            block
            and all_blocked
            and (
                (head.kind in BLOCKED_UNARY and len(reads) == 1)
                or (head.kind == "add" and len(reads) == 2)
                # a channel concat stays blocked when every input fills whole blocks
                or (head.kind == "concat" and all(graph.tensors[t].shape[1] % block == 0 for t in reads))
            )
        ):
            return reads, True
        return [self.read(t, False) for t in reads], False


def _with_blocked_hardswish(
    nodes: list[Any], kernel_of: dict[int, int], root: Any, outputs: set[str], block: int
) -> dict[int, int]:
    """``kernel_of`` with each HardSwish that ONNX Runtime's NCHWc transformer runs inside the
    blocked convolution before it (the convolution's output read by it alone) in that kernel.
    ``fusion`` keeps it a kernel of its own, as the latency routes were trained; elsewhere
    ONNX Runtime runs it as HardSigmoid and Mul, two tensors like one op of its own."""
    if not block:
        return kernel_of
    kernel_of = dict(kernel_of)
    heads = {n.index: n for n in nodes}
    made = {root(t): kernel_of.get(n.index, n.index) for n in nodes for t in n.outputs}
    readers: dict[str, int] = defaultdict(int)
    for node in nodes:
        for tensor in node.inputs:
            readers[root(tensor)] += 1
    for node in nodes:
        if node.kind != "hardswish" or not node.inputs:
            continue
        tensor = root(node.inputs[0])
        head = heads.get(made.get(tensor, -1))
        if (
            head is None
            or head.kind not in CONV_KINDS
            or head.kind == "deconv"
            or len(head.input_shapes[0]) != 4
        ):
            continue
        c_in, c_out = int(head.input_shapes[0][1]), int(head.output_shapes[0][1])
        if (
            readers[tensor] == 1
            and tensor not in outputs
            and ort_blocks(c_in, c_out, int(head.attrs.get("groups", 1)), block)
        ):
            kernel_of[node.index] = head.index
    return kernel_of


def steps(graph: Graph, rules: FusionRules) -> tuple[list[Step], set[str]]:
    """The kernels of ``graph`` as ONNX Runtime runs them under ``rules`` (reorder copies as
    steps of their own), and the graph's output tensors as they leave it (in the plain layout)."""
    nodes = [n for n in graph.nodes if not n.is_alias or n.kind in COPYING_ALIASES]
    copied = {t for n in nodes if n.kind in COPYING_ALIASES for t in n.outputs}

    def root(tensor: str) -> str:
        while tensor in graph.views and tensor not in copied:
            tensor = graph.views[tensor]
        return tensor

    outputs = {root(t) for t in graph.outputs}
    kernel_of = _with_blocked_hardswish(nodes, kernels_of(graph, rules), root, outputs, rules.nchwc_block)
    members: dict[int, list[Any]] = defaultdict(list)
    for node in nodes:
        members[kernel_of.get(node.index, node.index)].append(node)
    kernel_reads: dict[str, set[int]] = defaultdict(set)
    for node in nodes:
        for tensor in node.inputs:
            kernel_reads[root(tensor)].add(kernel_of.get(node.index, node.index))
    layouts = _Layouts(graph, rules.nchwc_block)
    for tensor in graph.inputs:
        layouts.blocked[root(tensor)] = False
    for kernel in sorted(members):
        ops = members[kernel]
        made = [root(t) for n in ops for t in n.outputs]
        reads = list(dict.fromkeys(root(t) for n in ops for t in n.inputs if root(t) not in made))
        seen = {root(t): graph.tensors[t].shape for n in ops for t in n.inputs}
        reads, blocked = layouts.run_blocked(ops[0], reads, seen)
        writes = []
        for tensor in dict.fromkeys(made):
            if tensor in outputs or kernel_reads[tensor] - {kernel}:  # leaves the kernel
                info = graph.tensors[tensor]
                layouts.blocked[tensor] = blocked and len(info.shape) == 4
                size = tensor_bytes(
                    info.shape, info.itemsize, rules.nchwc_block if layouts.blocked[tensor] else 0
                )
                writes.append((tensor, size))
        kinds = {n.kind for n in ops}
        in_place = ops[0].kind in IN_PLACE or (ops[0].kind in CONV_KINDS and "add" in kinds)
        layouts.steps.append(Step(tuple(reads), tuple(writes), in_place))
    # a graph output leaves in the plain layout: a blocked one is reordered into it (ReorderOutput)
    plain = {layouts.read(t, False) if layouts.blocked.get(t) else t for t in outputs}
    return layouts.steps, plain


def allocations(plan: list[Step], outputs: set[str]) -> list[tuple[str, int, int]]:
    """The first run's arena requests and returns, in order: ("alloc" | "free" | "output",
    buffer, bytes). A tensor freed by its last reader; an in-place write keeps the dying input's
    buffer; a graph output has a buffer of its own, which the caller frees."""
    last = {t: i for i, step in enumerate(plan) for t in step.reads}
    buffer_of: dict[str, int] = {}
    size_of: dict[int, int] = {}
    events: list[tuple[str, int, int]] = []
    for i, step in enumerate(plan):
        dying = [t for t in step.reads if last[t] == i and t in buffer_of and t not in outputs]
        for tensor, size in step.writes:
            taken = next(
                (
                    d
                    for d in dying
                    if step.in_place and tensor not in outputs and size_of[buffer_of[d]] == size
                ),
                None,
            )
            if taken is not None:
                buffer_of[tensor] = buffer_of[taken]
                dying.remove(taken)
                continue
            buffer_of[tensor] = len(size_of)
            size_of[buffer_of[tensor]] = size
            events.append(("output" if tensor in outputs else "alloc", buffer_of[tensor], size))
            if tensor not in last and tensor not in outputs:  # written, never read
                events.append(("free", buffer_of[tensor], size))
        for tensor in dying:
            events.append(("free", buffer_of[tensor], size_of[buffer_of[tensor]]))
    return events


def pattern_bytes(events: list[tuple[str, int, int]]) -> int:
    """The memory pattern's block: each buffer at the gap between live buffers that wastes least
    (after the last one when none fits), as ONNX Runtime's pattern planner lays out a run."""
    placed: list[tuple[int, int, int]] = []  # (offset, size, buffer), by offset
    peak = 0
    for event, buffer, size in events:
        if event == "output":  # outputs are allocated apart from the pattern
            continue
        if event == "free":
            placed = [block for block in placed if block[2] != buffer]
            continue
        offset = placed[-1][0] + placed[-1][1] if placed else 0
        position, waste, cursor = len(placed), None, 0
        for index, (start, length, _) in enumerate(placed):
            gap = start - cursor
            if gap >= size and (waste is None or gap - size < waste):
                position, waste, offset = index, gap - size, cursor
            cursor = start + length
        placed.insert(position, (offset, size, buffer))
        peak = max(peak, offset + size)
    return peak


class Arena:
    """ONNX Runtime's BFC arena (``bfc_arena.cc``, default settings): best-fit chunks, split when
    at least twice the request, merged with free neighbours of their region; regions that grow
    as the module docstring says. ``regions`` is what it holds."""

    def __init__(self) -> None:
        self.regions: list[int] = []
        self.next_region = FIRST_REGION
        self.free: list[tuple[int, int, int]] = []  # (region, start, size)
        self.used: dict[Any, tuple[int, int, int]] = {}

    def _extend(self, size: int) -> None:
        grew = False
        while size > self.next_region:
            self.next_region *= 2
            grew = True
        self.regions.append(self.next_region)
        self.free.append((len(self.regions) - 1, 0, self.next_region))
        if not grew:
            self.next_region *= 2

    def alloc(self, key: Any, size: int) -> None:
        size = _round(max(size, 1), ARENA_ROUND)
        if not any(chunk[2] >= size for chunk in self.free):
            self._extend(size)
        chunk = min((c for c in self.free if c[2] >= size), key=lambda c: (c[2], c[0], c[1]))
        self.free.remove(chunk)
        region, start, length = chunk
        if length >= 2 * size:
            self.free.append((region, start + size, length - size))
            length = size
        self.used[key] = (region, start, length)

    def release(self, key: Any) -> None:
        region, start, length = self.used.pop(key)
        for other in [c for c in self.free if c[0] == region]:
            if other[1] + other[2] == start or start + length == other[1]:
                self.free.remove(other)
                start, length = min(start, other[1]), length + other[2]
        self.free.append((region, start, length))


def arena_bytes(graph: Graph, rules: FusionRules) -> int:
    """What ONNX Runtime's CPU arena holds after a session's runs of ``graph``: its first run
    tensor by tensor, then the memory pattern's block and the outputs beside it."""
    plan, outputs = steps(graph, rules)
    events = allocations(plan, outputs)
    arena = Arena()
    for event, buffer, size in events:
        if event == "free":
            arena.release(buffer)
        else:
            arena.alloc(buffer, size)
    for buffer in list(arena.used):  # outputs, handed to the caller and dropped
        arena.release(buffer)
    arena.alloc("pattern", pattern_bytes(events))
    for event, buffer, size in events:
        if event == "output":
            arena.alloc(buffer, size)
    return sum(arena.regions)


def weight_bytes(graph: Graph, rules: FusionRules) -> int:
    """The weights as a session holds them (module docstring): blocked convolutions' padded,
    a folded BatchNorm's bias, Gemm columns padded to 16."""
    block, total = rules.nchwc_block, 0
    for node in graph.nodes:
        if node.kind in CONV_KINDS and node.kind != "deconv" and len(node.input_shapes[0]) == 4:
            c_in, c_out = int(node.input_shapes[0][1]), int(node.output_shapes[0][1])
            groups = int(node.attrs.get("groups", 1))
            taps = 1
            for size in node.attrs.get("kernel", (1, 1)):
                taps *= int(size)
            if block and ort_blocks(c_in, c_out, groups, block):
                outs = _round(c_out, block)
                ins = (
                    1
                    if c_in == groups
                    else (c_in // groups if groups > 1 or c_in < block else _round(c_in, block))
                )
            else:
                outs, ins = c_out, c_in // groups
            total += (outs * ins * taps + outs) * 4
        elif node.kind == "linear" and node.input_shapes and node.output_shapes:
            k, n = int(node.input_shapes[0][-1]), int(node.output_shapes[0][-1])
            total += (k * _round(n, 16) + n) * 4
        elif node.kind not in CONV_KINDS and node.kind != "bn":
            total += node.weight_bytes
    return total


def memory_terms(graph: Graph, rules: FusionRules) -> dict[str, int]:
    """The parts of an ONNX Runtime CPU session's heap ``graph`` decides: ``weights`` and
    ``arena`` bytes, and ``kernels`` (how many it runs)."""
    return {
        "weights": weight_bytes(graph, rules),
        "arena": arena_bytes(graph, rules),
        "kernels": len(set(kernels_of(graph, rules).values())),
    }
