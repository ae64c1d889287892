"""ONNX version adapters for the pool kernels."""

from __future__ import annotations

import functools

from ...ops.pool import max_pool_values
from ..opset import adapter


@adapter("MaxPool", 1, 8, 10, 11, 12, 22)
def _max_pool_outputs(ctx):
    """A MaxPool node without the Indices output (absent or written as "") skips computing them."""
    fn = ctx.bind()  # validates the attributes
    if ctx.n_outputs >= 2 and ctx.output_present[1]:
        return fn
    return functools.partial(max_pool_values, **ctx.attrs)


@adapter("RoiAlign", 10)
def _roi_align_10(ctx):
    """RoiAlign-10 had no coordinate_transformation_mode: it behaved as 'output_half_pixel'."""
    if "coordinate_transformation_mode" in ctx.attrs:
        raise ctx.error("coordinate_transformation_mode is not an attribute of RoiAlign-10")
    return ctx.bind(coordinate_transformation_mode="output_half_pixel")
