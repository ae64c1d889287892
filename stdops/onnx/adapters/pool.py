"""ONNX version adapters for the pool kernels."""

from __future__ import annotations

from ...ops._registry import kernel_of, record_use
from ...ops.pool import max_pool_values
from ..opset import adapter

_MAX_POOL_VERSIONS = (1, 8, 10, 11, 12, 22)


@adapter("MaxPool", *_MAX_POOL_VERSIONS)
def _max_pool_outputs(ctx):
    """A MaxPool node without the Indices output (absent or written as "") runs on the kernel that
    skips computing them."""
    if ctx.n_outputs >= 2 and ctx.output_present[1]:
        return ctx.bind()
    return ctx.bind(kernel_of(max_pool_values))


for _v in _MAX_POOL_VERSIONS:
    record_use(max_pool_values, "onnx", f"MaxPool-{_v}")


@adapter("RoiAlign", 10)
def _roi_align_10(ctx):
    """RoiAlign-10 had no coordinate_transformation_mode: it behaved as 'output_half_pixel'."""
    if "coordinate_transformation_mode" in ctx.attrs:
        raise ctx.error("coordinate_transformation_mode is not an attribute of RoiAlign-10")
    return ctx.bind(coordinate_transformation_mode="output_half_pixel")
