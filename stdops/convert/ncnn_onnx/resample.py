"""Resampling ncnn layers -> ONNX: Interp, GridSample.

ncnn's Interp source coordinates (the ratio in / out when the size was given, 1 / scale when it came from a
scale; align-corner) are not among ONNX Resize's coordinate modes, and its nearest index rule
(min(trunc(x * ws), w - 1) in float32) is not Resize's rounding. With static sizes both are constants:
nearest is a Gather with ncnn's indices, bilinear / bicubic a product with the interpolation matrix of
each axis (the shared Resize kernel's taps, stdops.ops.resize, cubic a = -0.75). GridSample's bilinear and
bicubic modes are ONNX GridSample; its nearest mode rounds ncnn's way (half up), written out here.
"""

from __future__ import annotations

import numpy as np

from ...ops.resize import interpolation_matrix
from .base import F32, LayerCtx, emits


def _nearest_index(in_len: int, out_len: int, ws: np.float32) -> np.ndarray:
    """ncnn's nearest source index: min(trunc(float32(x) * ws), in_len - 1)."""
    with np.errstate(all="ignore"):
        f = np.arange(out_len, dtype=F32) * F32(ws)
    idx = np.trunc(np.nan_to_num(f, nan=0.0, posinf=in_len, neginf=0.0)).astype(np.int64)
    return np.clip(idx, 0, in_len - 1)


@emits("Interp")
def interp(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    shape, out = ctx.in_shapes[0], ctx.out_shapes[0]
    x = ctx.x()
    if len(shape) == 1:
        ctx.put(0, g.op("Expand", [g.reshape(x, (1, shape[0], 1, 1)), g.ints((1, *out), "shape")]))
        return
    if out == shape:
        ctx.put(0, x)
        return
    from_size = bool(p.size_expr) or p.dynamic_target_size == 1 or len(ctx.ins) > 1
    rt = int(p.resize_type)
    axes = [(len(shape), shape[-1], out[-1], p.output_width != 0, F32(p.width_scale))]
    if len(shape) == 3:
        axes.insert(0, (2, shape[1], out[1], p.output_height != 0, F32(p.height_scale)))
    for axis, n, o, explicit, scale in axes:
        if n == o:
            continue
        if rt == 1:
            with np.errstate(all="ignore"):
                ws = F32(n) / F32(o) if (explicit or from_size) else F32(1) / scale
            x = g.op("Gather", [x, g.const(_nearest_index(n, o, ws), stem="nearest")], axis=axis)
            continue
        if rt not in (2, 3):
            raise ctx.fail(f"resize_type {rt} does not resize")
        xo = np.arange(o, dtype=np.float64)
        if p.align_corner:
            xo = xo * ((n - 1) / (o - 1)) if o > 1 else np.zeros(o)
        else:
            s = n / o if (explicit or from_size) else 1.0 / float(scale)
            xo = (xo + 0.5) * s - 0.5
        W = interpolation_matrix(xo, n, "linear" if rt == 2 else "cubic", cubic_coeff_a=-0.75).astype(F32)
        if axis == len(shape):  # the last axis: x @ W^T
            x = g.op("MatMul", [x, g.const(np.ascontiguousarray(W.T), stem="interp_w")])
        else:  # the h axis of (1, c, h, w): W @ x
            x = g.op("MatMul", [g.const(W, stem="interp_h"), x])
    ctx.put(0, x)


_SAMPLE = {1: "linear", 2: "nearest", 3: "cubic"}
_PADDING = {1: "zeros", 2: "border", 3: "reflection"}


@emits("GridSample")
def grid_sample(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    r = ctx.rank(0)
    k = r - 1
    grid = ctx.x(1)
    if p.permute_fusion:
        grid = g.op("Transpose", [grid], perm=[0] + list(range(2, r + 1)) + [1])
    mode, pad, ac = _SAMPLE[int(p.sample_type)], _PADDING[int(p.padding_mode)], int(bool(p.align_corner))
    if mode != "nearest":
        ctx.put(0, g.op("GridSample", [ctx.x(0), grid], mode=mode, padding_mode=pad, align_corners=ac))
        return
    # nearest, ncnn's way: unnormalize, clamp or reflect once, round half up; outside -> 0
    sp = ctx.in_shapes[0][1:]
    out_sp = ctx.out_shapes[0][1:]
    one, half, two = g.scalar(1.0), g.scalar(0.5), g.scalar(2.0)
    flat, valid = None, None
    for d in range(k):
        L = sp[d]
        v = g.reshape(g.slice(grid, [k - 1 - d], [k - d], [r]), (1, *out_sp))
        if ac:
            c = g.op("Mul", [g.op("Div", [g.op("Add", [v, one]), two]), g.scalar(L - 1)])
        else:
            c = g.op("Div", [g.op("Sub", [g.op("Mul", [g.op("Add", [v, one]), g.scalar(L)]), one]), two])
        if pad == "border":
            c = g.op("Clip", [c, g.scalar(0.0), g.scalar(L - 1)])
        elif pad == "reflection":
            if ac:
                hi = g.scalar(L - 1)
                c = g.op("Sub", [hi, g.op("Abs", [g.op("Sub", [g.op("Abs", [c]), hi])])])
            else:
                hi = g.scalar(L)
                c = g.op("Abs", [g.op("Add", [c, half])])
                c = g.op("Sub", [g.op("Sub", [hi, g.op("Abs", [g.op("Sub", [c, hi])])]), half])
                c = g.op("Clip", [c, g.scalar(0.0), g.scalar(L - 1)])
        i = g.op("Floor", [g.op("Add", [c, half])])
        ok = g.op("And", [g.op("GreaterOrEqual", [i, g.scalar(0.0)]), g.op("LessOrEqual", [i, g.scalar(L - 1)])])
        i64 = g.cast(g.op("Where", [ok, i, g.scalar(0.0)]), np.int64)
        flat = i64 if flat is None else g.op("Add", [g.op("Mul", [flat, g.scalar(L, np.int64)]), i64])
        valid = ok if valid is None else g.op("And", [valid, ok])
    if flat is None or valid is None:  # k >= 2: the layer takes 3d and 4d bottoms only (stdops.ncnn.layers)
        raise ctx.fail(f"GridSample on a {r}d bottom")
    C = ctx.in_shapes[0][0]
    data = g.reshape(ctx.x(0), (C, -1))
    vals = g.op("Gather", [data, g.reshape(flat, (-1,))], axis=1)  # [C, points]
    vals = g.reshape(vals, (1, C, *out_sp))
    ctx.put(0, g.op("Where", [valid, vals, g.const(np.zeros((), np.dtype(ctx.in_dtypes[0])), stem="zero")]))
