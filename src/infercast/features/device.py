"""The device features' vocabulary: each an amount of work a device spends time on — FLOPs of
dense, depthwise and grouped convolutions, bytes moved, kernels launched — so latency ≈ Σ cost_i ·
feature_i with non-negative costs (``predictors.physical``). ``predictors.devices.features``
counts them on a captured graph's kernels; a design space may count them in closed form
(``Space.device_features``)."""

from __future__ import annotations

DEVICE_FEATURE_DOCS: dict[str, str] = {
    "gflops_conv": "GFLOPs of dense convolutions (groups = 1) and of fully connected layers applied at "
    "every position of a map (1×1 convolutions in effect)",
    "gflops_dwconv": "GFLOPs of depthwise convolutions",
    "gflops_gconv": "GFLOPs of grouped (not depthwise) convolutions",
    "gflops_linear": "GFLOPs of fully connected layers and matrix products on one row (classifiers)",
    "mops_pool": "million output elements × window of max / average pooling",
    "melements_concat": "million output elements of concatenations",
    "melements_elementwise": "million output elements of element-wise ops, activations and other ops "
    "that run as kernels of their own (not fused into a convolution)",
    "mb_activations": "MB of activations read and written by the kernels (first op of each)",
    "mb_weights": "MB of weights read",
    "kernels": "number of kernels launched",
    "constant": "1: a per-inference cost",
}
BASE_FEATURES: tuple[str, ...] = tuple(DEVICE_FEATURE_DOCS)
# Small convolution kernels run below the device's peak rate (too little work to fill its cores
# or hide a launch); where "small" ends differs per device, so each threshold is a candidate
# column and the predictor keeps the one grouped cross-validation prefers (or none).
SMALL_KERNEL_MFLOPS = (5, 10, 20, 50)
SMALL_KERNEL_FEATURES: tuple[str, ...] = tuple(f"gflops_conv_kernels_under_{m}m" for m in SMALL_KERNEL_MFLOPS)
DEVICE_FEATURE_DOCS.update(
    {
        column: f"GFLOPs of convolution kernels (dense, depthwise, grouped) of fewer than {m} MFLOPs each"
        for column, m in zip(SMALL_KERNEL_FEATURES, SMALL_KERNEL_MFLOPS, strict=True)
    }
)
DEVICE_FEATURES: tuple[str, ...] = tuple(DEVICE_FEATURE_DOCS)
