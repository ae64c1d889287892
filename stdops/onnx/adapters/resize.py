"""ONNX version adapters for the resize kernels.

Resize-10 and Upsample-7/9 (deprecated at 10) have only ``mode`` (nearest/linear; Upsample-1's
name "bilinear" accepted) and ``scales``; they map output to input coordinates asymmetrically
(x / scale) and take the nearest sample "simply": floor when upsampling, ceil when downsampling.
They bind onto the Resize kernel.
"""

from __future__ import annotations

import numpy as np

from ...ops import resize as resizing
from ...ops._registry import kernel_of
from ..opset import adapter

_MODES = {"nearest": "nearest", "linear": "linear", "bilinear": "linear"}


def _scales_resize(ctx, scales_attr=None):
    mode = ctx.attrs.pop("mode", "nearest")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if mode not in _MODES:
        raise ctx.error(f"unknown mode {mode!r} (nearest or linear)")
    mode = _MODES[mode]
    kernel = kernel_of(resizing.resize)
    if mode != "nearest":
        fn = ctx.bind(kernel, mode=mode, coordinate_transformation_mode="asymmetric")
        if scales_attr is not None:
            return lambda x: fn(x, None, scales_attr)
        return lambda x, scales: fn(x, None, scales)
    up = ctx.bind(kernel, mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    down = ctx.bind(kernel, mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="ceil")

    def run(x, scales):
        sc = np.asarray(scales, dtype=np.float32).ravel()
        shrink = sc < 1
        if not shrink.any():
            return up(x, None, sc)
        if shrink.all():
            return down(x, None, sc)
        # mixed: nearest resizing is separable, so resize the two groups of axes in turn
        y = up(x, None, np.where(shrink, np.float32(1), sc))
        return down(y, None, np.where(shrink, sc, np.float32(1)))

    if scales_attr is not None:
        return lambda x: run(x, scales_attr)
    return run


@adapter("Resize", 10)
def _resize_10(ctx):
    return _scales_resize(ctx)


@adapter("Upsample", 9)
def _upsample_9(ctx):
    return _scales_resize(ctx)


@adapter("Upsample", 7)
def _upsample_7(ctx):
    scales = ctx.attrs.pop("scales", None)
    if scales is None:
        raise ctx.error("missing required attribute scales")
    return _scales_resize(ctx, np.asarray(scales, dtype=np.float32))
