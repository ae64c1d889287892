"""ONNX version adapters for the conv kernels.

Conv (every version): when W is an initializer, the GEMM-ready weight layout is computed once at
load time and each run calls the convolution core with it. The callable returned then has a
``fuse_clip(lo, hi)`` method: the same Conv with a following Clip/ReLU applied inside it (for a
graph-level Conv+Clip fusion; the depthwise paths clip in a copy they make anyway).
"""

from __future__ import annotations

import functools

import numpy as np

from ...errors import KernelError
from ...ops.conv import conv_forward, prepare_conv_weight
from ..opset import adapter


@adapter("Conv", 1, 11, 22)
def _conv_prepared_weight(ctx):
    fn = ctx.bind()  # validates the attributes; the fallback when W is not a constant
    w = ctx.constant(1)
    if not isinstance(w, np.ndarray) or w.dtype.kind != "f" or w.ndim < 3:
        return fn
    attrs = dict(ctx.attrs)
    group = attrs.pop("group", 1)
    try:
        cw = prepare_conv_weight(w, group, attrs.get("strides", ()), attrs.get("dilations", ()))
    except KernelError:
        return fn  # the kernel reports the problem when the node runs
    b0 = ctx.constant(2)
    if isinstance(b0, np.ndarray) and b0.dtype == w.dtype:
        cw.fold_bias(b0)  # a constant bias rides in the GEMM (conv_forward checks it is this array)
    wdt = w.dtype

    def conv_prepared(x, w_, b=None, *, clip=None):
        if w_ is not w or x.dtype != wdt:  # W overridden by a feed, or a dtype mismatch: the plain kernel decides
            y = fn(x, w_, b)
            return y if clip is None else np.clip(y, *clip, out=y)
        y = conv_forward(x, cw, b, clip=clip, **attrs)
        return y if y.dtype == wdt else y.astype(wdt)

    def fuse_clip(lo=None, hi=None):
        """This Conv followed by Clip(lo, hi) (ReLU: lo=0; ReLU6: 0, 6), as one step: for a graph pass
        that fuses a Conv whose only consumer is a Clip/Relu with constant bounds."""
        lo = None if lo is None else np.asarray(lo, wdt).reshape(()).item()
        hi = None if hi is None else np.asarray(hi, wdt).reshape(()).item()
        return functools.partial(conv_prepared, clip=(lo, hi))

    conv_prepared.fuse_clip = fuse_clip
    return conv_prepared
