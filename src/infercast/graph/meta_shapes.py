"""Shape propagation on meta tensors (a module built on the meta device: no weight memory) that
computes the output of the commonest shape-simple ops itself instead of running them through
PyTorch's Python decompositions — so a first capture needs no TorchDynamo."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import torch
from torch.fx.passes.shape_prop import ShapeProp

from infercast.graph import ops

# Activations and normalisations give a tensor of their input's shape and dtype; on meta tensors
# PyTorch would run each through a Python decomposition of it.
_SHAPE_KEEPING_KINDS = ops.ACTIVATION_KINDS | ops.NORM_KINDS


class MetaShapeProp(ShapeProp):
    """ShapeProp on meta tensors that computes the output of the commonest shape-simple ops itself
    instead of running them: activations and normalisations keep their input's shape, arithmetic
    broadcasts, concatenation sums one axis, a linear layer replaces the last and an adaptive
    average pool the spatial ones. PyTorch runs these ops on meta tensors through Python
    decompositions (``torch._refs``): slower, and the first such call imports TorchDynamo, which
    a first capture should not wait for. The graphs are identical with and without the rules (a
    test holds zoo and design-space graphs equal; ``benchmarks/first_prediction.py`` the time)."""

    def call_module(self, target: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        module = self.fetch_attr(target)
        out = _module_shape_only(module, args, kwargs)
        return out if out is not None else super().call_module(target, args, kwargs)

    def call_function(self, target: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        out = _shape_only(callable_name(target), args, kwargs)
        return out if out is not None else super().call_function(target, args, kwargs)

    def call_method(self, target: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        out = _shape_only(target, args, kwargs)
        return out if out is not None else super().call_method(target, args, kwargs)


def _module_shape_only(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> torch.Tensor | None:
    """`_shape_only` for a call of a module: the layers whose output shape needs their settings."""
    one_input = len(args) == 1 and not kwargs
    if isinstance(module, torch.nn.Linear) and one_input:
        return _linear(args[0], module.weight)
    adaptive = (torch.nn.AdaptiveAvgPool1d, torch.nn.AdaptiveAvgPool2d, torch.nn.AdaptiveAvgPool3d)
    if isinstance(module, adaptive) and one_input:
        return _adaptive_pooled(type(module).__name__, args[0], module.output_size)
    return _shape_only(type(module).__name__, args, kwargs)


def _shape_only(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """An empty meta tensor shaped as the op's output, for ops whose output shape and dtype follow
    from their inputs' alone; None for any other op or call (run it)."""
    if not args:
        return None
    kind = ops.kind_of(op)
    if kind in _SHAPE_KEEPING_KINDS:
        return _shape_kept(kind, args, kwargs)
    if kind in ops.ELEMENTWISE_KINDS:
        return _broadcast(op, args, kwargs)
    if kind == "concat":
        return _concatenated(args, kwargs)
    if kind == "linear" and len(args) >= 2 and not kwargs:
        return _linear(args[0], args[1])
    if kind == "adaptive_avg_pool" and len(args) == 2 and not kwargs:
        return _adaptive_pooled(op, args[0], args[1])
    return None


def _shape_kept(kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    if not isinstance(args[0], torch.Tensor):
        return None
    if kind == "clip" and any(isinstance(a, torch.Tensor) for a in (*args[1:], *kwargs.values())):
        return None  # a clamp to tensor bounds may broadcast beyond its input
    return torch.empty_like(args[0])


def _broadcast(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """``a ∘ b`` of two operands, at least one a tensor, whose result is floating point: integer
    arithmetic (rounding, true division's promotion) and extra options are left to PyTorch."""
    if len(args) != 2 or set(kwargs) - {"alpha"}:
        return None
    if not all(isinstance(a, torch.Tensor | int | float) for a in args):
        return None
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if not tensors or any(t.device.type != "meta" for t in tensors):
        return None
    dtype = torch.result_type(*args)
    if not dtype.is_floating_point:
        return None
    try:
        shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    except RuntimeError:
        return None  # PyTorch raises the error a user should see
    # operator.iadd / isub / imul / itruediv, or a tensor method such as add_ (of the element-wise
    # names, only the in-place operators start with an i)
    in_place = op.startswith("i") or (op.endswith("_") and not op.startswith("_"))
    if in_place:
        first = args[0]
        return (
            first
            if isinstance(first, torch.Tensor) and first.shape == shape and first.dtype == dtype
            else None
        )
    return torch.empty(shape, dtype=dtype, device="meta")


def _linear(x: Any, weight: Any) -> torch.Tensor | None:
    """``x @ weightᵀ (+ bias)``: the last axis becomes the weight's rows."""
    if not (isinstance(x, torch.Tensor) and isinstance(weight, torch.Tensor)):
        return None
    if x.device.type != "meta" or x.dim() < 1 or weight.dim() != 2 or x.dtype != weight.dtype:
        return None
    if x.shape[-1] != weight.shape[1]:
        return None  # PyTorch raises the error a user should see
    return torch.empty((*x.shape[:-1], weight.shape[0]), dtype=x.dtype, device="meta")


def _adaptive_pooled(op: str, x: Any, output_size: Any) -> torch.Tensor | None:
    """An adaptive average pool to ``output_size`` over the last 1, 2 or 3 axes (the op's name
    ends in 1d, 2d or 3d); an axis sized None keeps its input's size."""
    rank = re.search(r"([123])d$", op)
    if rank is None or not isinstance(x, torch.Tensor) or not x.is_meta:
        return None
    spatial = int(rank[1])
    sizes = (output_size,) * spatial if isinstance(output_size, int) else tuple(output_size)
    if x.dim() <= spatial or len(sizes) != spatial:
        return None
    kept = x.shape[x.dim() - spatial :]
    if not all(s is None or (isinstance(s, int) and s > 0) for s in sizes):
        return None
    out = [k if s is None else s for s, k in zip(sizes, kept, strict=True)]
    return torch.empty((*x.shape[: x.dim() - spatial], *out), dtype=x.dtype, device="meta")


def _concatenated(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """``torch.cat`` of same-rank, same-dtype meta tensors: the sizes along ``dim`` add up."""
    if len(args) > 2 or set(kwargs) - {"dim"} or not isinstance(args[0], list | tuple):
        return None
    tensors, dim = args[0], args[1] if len(args) == 2 else kwargs.get("dim", 0)
    if not tensors or not isinstance(dim, int):
        return None
    if not all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in tensors):
        return None
    first = tensors[0]
    if (
        any(t.dim() != first.dim() or t.dtype != first.dtype for t in tensors)
        or not -first.dim() <= dim < first.dim()
    ):
        return None
    dim %= first.dim()
    others = [s for axis, s in enumerate(first.shape) if axis != dim]
    if any([s for axis, s in enumerate(t.shape) if axis != dim] != others for t in tensors):
        return None
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    return torch.empty(shape, dtype=first.dtype, device="meta")


def callable_name(target: Callable[..., Any] | str) -> str:
    if isinstance(target, str):
        return target  # call_method
    packet = getattr(target, "overloadpacket", None)  # ATen OpOverload
    if packet is not None:
        return f"aten.{packet.__name__}"
    return getattr(target, "__name__", str(target))
