"""ONNX Runtime on the CPU. A PyTorch model is exported to ONNX first (BatchNorm folded, as a
deployment export would); the graph optimisation level is part of the platform."""

from __future__ import annotations

import ctypes
import tempfile
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from infercast.measurement.backends.base import Backend, MeasureError, Session, tflite_refused
from infercast.models import LoadedModel

OPT_LEVELS = ("disabled", "basic", "extended", "all")


def onnx_bytes(model: LoadedModel) -> bytes:
    """The model as ONNX: the file it came from, or an export of its module at its input shape."""
    if model.onnx is not None:
        return model.onnx.SerializeToString()
    if model.tflite is not None:
        raise tflite_refused(model.name)
    import torch

    module = model.module
    assert module is not None
    first = next(iter(module.parameters()), None)
    if first is not None and first.dtype != torch.float32:
        raise MeasureError(
            f"{model.name} is {first.dtype}; ONNX Runtime's CPU kernels are measured in float32"
        )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        torch.onnx.export(
            module, (torch.zeros(model.input_shape),), str(path), dynamo=False, input_names=["input"]
        )
        return path.read_bytes()


@cache
def nchwc_block() -> int:
    """The channel block of ONNX Runtime's NCHWc convolutions on this CPU (MLAS: 16 with AVX-512,
    8 with AVX2), 0 where it runs none. The optimiser blocks a grouped convolution only when each
    group's channels fill whole blocks, so the narrowest group it blocks is the block."""
    for width in (4, 8, 16, 32):
        if optimiser_blocks(2 * width, 2 * width, groups=2):
            return width
    return 0


def optimiser_blocks(c_in: int, c_out: int, groups: int) -> bool:
    """Whether ONNX Runtime's optimiser, at level ``all`` on this CPU, moves a 3×3 convolution of
    these channels into its blocked NCHWc layout (a session of that one convolution, never run)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from infercast.measurement.ops import NCHWC_DOMAIN

    weights = numpy_helper.from_array(np.zeros((c_out, c_in // groups, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], group=groups, pads=[1, 1, 1, 1])],
        "nchwc-probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c_in, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c_out, 8, 8])],
        [weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    with tempfile.TemporaryDirectory() as folder:
        options.optimized_model_filepath = str(Path(folder) / "optimized.onnx")
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        optimized = onnx.load(options.optimized_model_filepath)
    return any(node.domain == NCHWC_DOMAIN for node in optimized.graph.node)


HEAP_DEFINITION = (
    "heap bytes the session holds after its runs (glibc mallinfo2, counted from just before session "
    "creation): weights, pre-packed weights, input, and ORT's arena, which keeps its high-water mark"
)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def heap_in_use() -> int | None:
    """Bytes in use from malloc (main arena + mmapped chunks); None off glibc >= 2.33.

    Unlike RSS this does not depend on what the process freed before: a session's arena that
    reuses freed pages still counts. Peak RSS varied 10–40 % between repeats of the same model."""
    try:
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return int(info.uordblks + info.hblkhd)


class OrtSession(Session):
    def __init__(
        self,
        session: Any,
        input_shape: tuple[int, ...],
        backend: OrtCpuBackend,
        model: bytes,
        heap_before: int | None = None,
    ) -> None:
        self.session = session
        self.backend = backend
        self.model = model
        self.heap_before = heap_before
        first = session.get_inputs()[0]
        dtype = np.float16 if "float16" in first.type else np.float32
        self.feed = {first.name: np.random.default_rng(0).standard_normal(input_shape).astype(dtype)}

    def session_peak_memory(self) -> tuple[int, str] | None:
        now = heap_in_use()
        if now is None or self.heap_before is None:
            return None
        return now - self.heap_before, HEAP_DEFINITION

    def run(self) -> None:
        self.session.run(None, self.feed)

    def profile_ops(self, runs: int) -> list[dict[str, Any]]:
        from infercast.measurement.ops import profile_ort

        options = self.backend.session_options()
        blocked = self.backend.machine_facts().get("nchwc_block", 0) > 0 and self.backend.opt_level == "all"
        return profile_ort(self.model, options, self.backend.providers, self.feed, runs, blocked)

    def close(self) -> None:
        del self.session, self.model


class OrtCpuBackend(Backend):
    name: ClassVar[str] = "ort-cpu"
    device: ClassVar[str] = "cpu"
    memory_from_load: ClassVar[bool] = False
    providers: ClassVar[list[str]] = ["CPUExecutionProvider"]
    # the CPU provider has no fp16 / bf16 convolution kernels: such a model fails to load
    precisions: ClassVar[tuple[str, ...] | None] = ("fp32",)
    # the heap is where the CPU provider's memory lives; a GPU provider's is elsewhere
    host_heap_memory: ClassVar[bool] = True

    def __init__(self, threads: int = 1, opt_level: str = "all") -> None:
        super().__init__(threads)
        if opt_level not in OPT_LEVELS:
            raise MeasureError(f"opt_level={opt_level!r}; allowed: {', '.join(OPT_LEVELS)}")
        self.opt_level = opt_level

    @property
    def settings(self) -> dict[str, Any]:
        return {**super().settings, "opt_level": self.opt_level}

    def machine_facts(self) -> dict[str, Any]:
        # at level ``all`` the CPU provider runs most convolutions in a blocked layout whose block
        # is the CPU's vector width: which ones decides their speed (op rows' ``algorithm``)
        return {"nchwc_block": nchwc_block()} if self.providers == ["CPUExecutionProvider"] else {}

    def session_options(self) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = {
            "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[self.opt_level]
        options.log_severity_level = 3
        return options

    def prepare(self, model: LoadedModel) -> bytes:
        return onnx_bytes(model)

    def open(self, prepared: bytes, input_shape: tuple[int, ...]) -> Session:
        import onnxruntime as ort

        before = heap_in_use() if self.host_heap_memory else None
        session = ort.InferenceSession(prepared, self.session_options(), providers=self.providers)
        return OrtSession(session, input_shape, self, prepared, before)
