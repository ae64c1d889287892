"""ONNX version adapters for the conv kernels.

Conv (every version): when W is an initializer, the GEMM-ready weight layout is computed once at
load time and each run calls the convolution core with it.
"""
from __future__ import annotations

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

    def conv_prepared(x, w_, b=None):
        if w_ is not w or x.dtype != wdt:
            return fn(x, w_, b)  # W overridden by a feed, or a dtype mismatch: the plain kernel decides
        y = conv_forward(x, cw, b, **attrs)
        return y if y.dtype == wdt else y.astype(wdt)

    return conv_prepared
