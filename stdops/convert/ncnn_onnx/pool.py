"""Pooling ncnn layers -> ONNX: Pooling1D / Pooling / Pooling3D (ncnn's pad modes, global, adaptive), SPP,
StatisticsPooling.

The pads of every mode are resolved on the measured input size as the front end does
(stdops/ncnn/layers/pool.py): max pooling pads with -FLT_MAX (an explicit Pad, so that a window wholly in
the padding gives -FLT_MAX as in ncnn), average pooling counts or excludes the pads with AveragePool's own
count_include_pad. Adaptive pooling is separable: per axis, max over the taps of each window (Gather) or
a mean as a product with a constant averaging matrix.
"""

from __future__ import annotations

import numpy as np

from ...ncnn.layers.conv_geometry import same_pads
from ..onnx_build import Attrs
from .base import F32, FLT_MAX, LayerCtx, emits
from .conv import _crop_box


def _outer_first(p, names) -> tuple[int, ...]:
    return tuple(int(getattr(p, n)) for n in reversed(names))


def _pad(ctx: LayerCtx, x: str, begin, end, value: float) -> str:
    if not any(begin) and not any(end):
        return x
    g = ctx.g
    return g.op("Pad", [x, g.ints([0, 0, *begin, 0, 0, *end], "pads"), g.scalar(value)])


def _adaptive(ctx: LayerCtx, x: str, sp: tuple[int, ...], out: tuple[int, ...], is_max: bool) -> str:
    g = ctx.g
    for ax, (n, o) in enumerate(zip(sp, out)):
        if n == o:
            continue
        axis = 2 + ax
        j = np.arange(o)
        s = (n * j) // o
        e = (n * (j + 1) + o - 1) // o
        if is_max:
            taps = [
                g.op("Gather", [x, g.const(np.minimum(s + t, e - 1).astype(np.int64), stem="taps")], axis=axis)
                for t in range(int((e - s).max()))
            ]
            x = taps[0] if len(taps) == 1 else g.op("Max", taps)
            continue
        avg = np.zeros((n, o), F32)
        for i in range(o):
            avg[s[i] : e[i], i] = F32(1) / F32(e[i] - s[i])
        # move the axis last, contract it with the averaging matrix, move it back
        rank = 2 + len(sp)
        perm = [a for a in range(rank) if a != axis] + [axis]
        back = list(np.argsort(perm))
        t = g.op("Transpose", [x], perm=perm)
        t = g.op("MatMul", [t, g.const(avg, stem="average")])
        x = g.op("Transpose", [t], perm=[int(b) for b in back])
    return x


def _pooling(ctx: LayerCtx, nd: int) -> None:
    g, p = ctx.g, ctx.p
    is_max = int(p.pooling_type) == 0
    shape = ctx.in_shapes[0]
    x = ctx.x()
    if len(shape) == nd:  # one rank short: a single channel, as in ncnn
        shape = (1, *shape)
        x = g.reshape(x, (1, *shape))
    if p.global_pooling:
        y = g.op("GlobalMaxPool" if is_max else "GlobalAveragePool", [x])
        ctx.put(0, g.reshape(y, (1, shape[0])))
        return
    kernel = _outer_first(p, ["kernel_w", "kernel_h", "kernel_d"][:nd])
    strides = _outer_first(p, ["stride_w", "stride_h", "stride_d"][:nd])
    pb = _outer_first(p, ["pad_left", "pad_top", "pad_front"][:nd])
    pe = _outer_first(p, ["pad_right", "pad_bottom", "pad_behind"][:nd])
    if p.adaptive_pooling:
        outs = _outer_first(p, ["out_w", "out_h", "out_d"][:nd])
        out = tuple(n if v == -233 else v for n, v in zip(shape[1:], outs))
        ctx.put(0, _adaptive(ctx, x, shape[1:], out, is_max))
        return
    sp = shape[1:]
    mode = int(p.pad_mode)
    if mode == 0:
        b, e = list(pb), list(pe)
        for ax in range(nd):
            tail = (sp[ax] + b[ax] + e[ax] - kernel[ax]) % strides[ax]
            if tail:
                e[ax] += strides[ax] - tail
    elif mode == 1:
        b, e = list(pb), list(pe)
    else:
        totals = [k + (n - 1) // s * s - n for n, k, s in zip(sp, kernel, strides)]
        be = same_pads(totals, "upper" if mode == 2 else "lower", depth_upper=nd == 3)
        if be is None:
            b, e = [0] * nd, [0] * nd
        else:
            b, e = list(be[0]), list(be[1])
            if min(b) < 0 or min(e) < 0:
                starts, ends, bb, ee = _crop_box(shape, b, e)
                x = g.slice(x, starts, ends, list(range(2, 2 + nd)))
                b, e = list(bb), list(ee)
    attrs: Attrs = dict(kernel_shape=list(kernel), strides=list(strides))
    if is_max:
        ctx.put(0, g.op("MaxPool", [_pad(ctx, x, b, e, -FLT_MAX)], **attrs))
        return
    if p.avgpool_count_include_pad:
        ctx.put(0, g.op("AveragePool", [_pad(ctx, x, b, e, 0.0)], **attrs))
        return
    if mode in (0, 1):
        ctx.put(0, _average_excluding_pads(ctx, x, sp, b, e, kernel, strides))
        return
    # SAME modes: the SAME-padded blob less the pad params is the counted region (the front end's rule)
    xp = _pad(ctx, x, b, e, 0.0)
    full = [n + bb + ee for n, bb, ee in zip(sp, b, e)]
    inner = [full[a] - pb[a] - pe[a] for a in range(nd)]
    if any(pb[a] or pe[a] for a in range(nd)):
        xp = g.slice(xp, list(pb), [full[a] - pe[a] for a in range(nd)], list(range(2, 2 + nd)))
    ctx.put(0, _average_excluding_pads(ctx, xp, tuple(inner), list(pb), list(pe), kernel, strides))


def _average_excluding_pads(ctx: LayerCtx, x: str, sp, b, e, kernel, strides) -> str:
    """Average pooling whose divisor counts only the taps inside ``x`` (pads b, e excluded). AveragePool
    does it itself when every pad is smaller than the kernel (onnxruntime's limit); otherwise the sum over
    the zero-padded input is scaled by kernel size / count, the counts computed here."""
    g = ctx.g
    attrs: Attrs = dict(kernel_shape=list(kernel), strides=list(strides))
    if all(v < k for v, k in zip(b, kernel)) and all(v < k for v, k in zip(e, kernel)):
        return g.op("AveragePool", [x], pads=list(b) + list(e), count_include_pad=0, **attrs)
    ones = np.pad(np.ones(sp, F32), [(bb, ee) for bb, ee in zip(b, e)])
    counts = ones
    for ax, (k, s) in enumerate(zip(kernel, strides)):  # windowed sums of the 0/1 mask, axis by axis
        n_out = (counts.shape[ax] - k) // s + 1
        c = np.cumsum(np.concatenate([np.zeros_like(np.take(counts, [0], axis=ax)), counts], axis=ax), axis=ax)
        starts = np.arange(n_out) * s
        counts = np.take(c, starts + k, axis=ax) - np.take(c, starts, axis=ax)
    kp = float(np.prod(kernel))
    with np.errstate(divide="ignore"):
        factor = (F32(kp) / counts.astype(F32)).astype(F32)  # a window with no counted tap: 0 / 0, as in ncnn
    y = g.op("AveragePool", [_pad(ctx, x, b, e, 0.0)], **attrs)
    return g.op("Mul", [y, g.const(factor[None, None], stem="count_scale")])


def _declare(type_name: str, nd: int) -> None:
    emits(type_name)(lambda ctx: _pooling(ctx, nd))


_declare("Pooling1D", 1)
_declare("Pooling", 2)
_declare("Pooling3D", 3)


@emits("SPP")
def spp(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    C, H, W = ctx.in_shapes[0]
    parts = []
    for lv in range(int(p.pyramid_height)):
        bins = 1 << lv
        kh, kw = -(-H // bins), -(-W // bins)
        ph, pw = (kh * bins - H + 1) // 2, (kw * bins - W + 1) // 2
        xp = _pad(ctx, ctx.x(), (ph, pw), (ph, pw), 0.0)  # zeros for max pooling too, as in ncnn
        op = "MaxPool" if int(p.pooling_type) == 0 else "AveragePool"
        y = g.op(op, [xp], kernel_shape=[kh, kw], strides=[kh, kw])
        y = g.slice(y, [0, 0], [bins, bins], [2, 3])
        parts.append(g.reshape(y, (1, -1)))
    ctx.put(0, parts[0] if len(parts) == 1 else g.op("Concat", parts, axis=1))


@emits("StatisticsPooling")
def statistics_pooling(ctx: LayerCtx) -> None:
    g = ctx.g
    shape = ctx.in_shapes[0]
    c = shape[0] if len(shape) > 2 else 1
    flat = g.reshape(ctx.x(), (1, c, -1))
    axes = g.ints([2], "axes")
    m = g.op("ReduceMean", [flat, axes], keepdims=1)
    if not ctx.p.include_stddev:
        ctx.put(0, g.reshape(m, (1, c)))
        return
    d = g.op("Sub", [flat, m])
    s = g.op("Sqrt", [g.op("ReduceMean", [g.op("Mul", [d, d]), axes], keepdims=1)])
    ctx.put(0, g.reshape(g.op("Concat", [m, s], axis=1), (1, 2 * c)))
