"""Normalization and reduction ncnn layers -> ONNX: LayerNorm, RMSNorm, GroupNorm, InstanceNorm, LRN, MVN,
Normalize, Reduction, ArgMax, CumulativeSum (semantics: stdops/ncnn/layers/norm.py, reduce.py)."""

from __future__ import annotations

import numpy as np

from ..onnx_build import Attrs
from .base import F32, LayerCtx, emits


def _trailing_axes(shape: tuple[int, ...], affine_size: int) -> int:
    """How many trailing axes one LayerNorm/RMSNorm part spans (the front end's rule)."""
    nd = len(shape)
    if nd <= 2 or affine_size == shape[-1]:
        return 1
    if nd == 4 and affine_size == shape[-1] * shape[-2]:
        return 2
    return nd - 1


def _affine(ctx: LayerCtx, name: str, k: int, default: float) -> np.ndarray:
    part = ctx.in_shapes[0][ctx.rank() - k :]
    v = ctx.w.get(name)
    return np.full(part, default, F32) if v is None else np.asarray(v, F32).reshape(part)


@emits("LayerNorm")
def layer_norm(ctx: LayerCtx) -> None:
    g = ctx.g
    k = _trailing_axes(ctx.in_shapes[0], int(ctx.p.affine_size))
    ins = [
        ctx.x(),
        g.const(_affine(ctx, "gamma", k, 1.0), stem="gamma"),
        g.const(_affine(ctx, "beta", k, 0.0), stem="beta"),
    ]
    ctx.put(0, g.op("LayerNormalization", ins, axis=-k, epsilon=float(ctx.p.eps)))


@emits("RMSNorm")
def rms_norm(ctx: LayerCtx) -> None:
    g = ctx.g
    k = _trailing_axes(ctx.in_shapes[0], int(ctx.p.affine_size))
    x = ctx.x()
    axes = g.ints(list(range(-k, 0)), "axes")
    ms = g.op("ReduceMean", [g.op("Mul", [x, x]), axes], keepdims=1)
    inv = g.op("Reciprocal", [g.op("Sqrt", [g.op("Add", [ms, g.scalar(ctx.p.eps)])])])
    ctx.put(0, g.op("Mul", [g.op("Mul", [x, inv]), g.const(_affine(ctx, "gamma", k, 1.0), stem="gamma")]))


@emits("GroupNorm")
def group_norm(ctx: LayerCtx) -> None:
    g = ctx.g
    shape = ctx.in_shapes[0]
    groups = int(ctx.p.group)
    c = shape[0]
    one, zero = g.const(np.ones(groups, F32), stem="ones"), g.const(np.zeros(groups, F32), stem="zeros")
    xg = g.reshape(ctx.x(), (1, groups, -1))
    y = g.reshape(g.op("InstanceNormalization", [xg, one, zero], epsilon=float(ctx.p.eps)), (1, *shape))
    r = len(shape)
    gamma = ctx.w.get("gamma", np.ones(c, F32))
    beta = ctx.w.get("beta", np.zeros(c, F32))
    y = g.op("Mul", [y, g.const(ctx.per_axis0(gamma, r), stem="gamma")])
    ctx.put(0, g.op("Add", [y, g.const(ctx.per_axis0(beta, r), stem="beta")]))


@emits("InstanceNorm")
def instance_norm(ctx: LayerCtx) -> None:
    g = ctx.g
    c = ctx.in_shapes[0][0]
    gamma = np.asarray(ctx.w.get("gamma", np.ones(c, F32)), F32)
    beta = np.asarray(ctx.w.get("beta", np.zeros(c, F32)), F32)
    ins = [ctx.x(), g.const(gamma, stem="gamma"), g.const(beta, stem="beta")]
    ctx.put(0, g.op("InstanceNormalization", ins, epsilon=float(ctx.p.eps)))


@emits("LRN")
def lrn(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    size = int(p.local_size)
    if p.region_type == 0:
        if size % 2:
            attrs: Attrs = dict(size=size, alpha=float(p.alpha), beta=float(p.beta), bias=float(p.bias))
            ctx.put(0, g.op("LRN", [ctx.x()], **attrs))
            return
        # an even size (onnxruntime's LRN takes odd ones): the window [c - size/2, c - size/2 + size - 1]
        # as an average over the zero-padded channel axis
        c, h, w = ctx.in_shapes[0]
        x = ctx.x()
        sq = g.reshape(g.op("Mul", [x, x]), (1, 1, c, h * w))
        sq = g.op("Pad", [sq, g.ints([0, 0, size // 2, 0, 0, 0, size - 1 - size // 2, 0], "pads")])
        mean_sq = g.reshape(g.op("AveragePool", [sq], kernel_shape=[size, 1]), (1, c, h, w))
        base = g.op("Add", [g.op("Mul", [mean_sq, g.scalar(p.alpha)]), g.scalar(p.bias)])
        ctx.put(0, g.op("Mul", [x, g.op("Pow", [base, g.scalar(-p.beta)])]))
        return
    pad = size // 2
    x = ctx.x()
    mean_sq = g.op(
        "AveragePool",
        [g.op("Mul", [x, x])],
        kernel_shape=[size, size],
        pads=[pad, pad, size - pad - 1, size - pad - 1],
        count_include_pad=1,
    )
    base = g.op("Add", [g.op("Mul", [mean_sq, g.scalar(p.alpha)]), g.scalar(p.bias)])
    ctx.put(0, g.op("Mul", [x, g.op("Pow", [base, g.scalar(-p.beta)])]))


@emits("MVN")
def mvn(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    r = ctx.rank()
    axes = g.ints(list(range(1, r + 1)) if p.across_channels else list(range(2, r + 1)), "axes")
    x = ctx.x()
    y = g.op("Sub", [x, g.op("ReduceMean", [x, axes], keepdims=1)])
    if p.normalize_variance:
        sd = g.op("Sqrt", [g.op("ReduceMean", [g.op("Mul", [y, y]), axes], keepdims=1)])
        y = g.op("Mul", [y, g.op("Reciprocal", [g.op("Add", [sd, g.scalar(p.eps)])])])
    ctx.put(0, y)


@emits("Normalize")
def normalize(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    spatial, channel = bool(p.across_spatial), bool(p.across_channel)
    if not (spatial or channel):
        ctx.put(0, ctx.x())
        return
    shape = ctx.in_shapes[0]
    r, c = len(shape), shape[0]
    scale = ctx.w["scale"]
    s = scale[:1].reshape((1,) * (r + 1)) if p.channel_shared else ctx.per_axis0(scale[:c], r)
    if spatial and channel:
        axes = list(range(1, r + 1))
    elif spatial:
        axes = list(range(2, r + 1))
    else:
        axes = [1]
    x = ctx.x()
    ss = g.op("ReduceSum", [g.op("Mul", [x, x]), g.ints(axes, "axes")], keepdims=1)
    eps = g.scalar(p.eps)
    if p.eps_mode == 0:
        den = g.op("Sqrt", [g.op("Add", [ss, eps])])
    elif p.eps_mode == 1:
        den = g.op("Max", [g.op("Sqrt", [ss]), eps])
    else:
        den = g.op("Sqrt", [g.op("Max", [ss, eps])])
    a = g.op("Reciprocal", [den])
    ctx.put(0, g.op("Mul", [x, g.op("Mul", [a, g.const(np.asarray(s, F32), stem="scale")])]))


# --------------------------------------------------------------------------------------------- reductions
_REDUCE = {
    0: "ReduceSum",
    1: "ReduceL1",
    2: "ReduceSumSquare",
    3: "ReduceMean",
    4: "ReduceMax",
    5: "ReduceMin",
    6: "ReduceProd",
    7: "ReduceL1",
    8: "ReduceL2",
    9: "ReduceLogSum",
    10: "ReduceLogSumExp",
}


@emits("Reduction")
def reduction(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    r = ctx.rank()
    if p.reduce_all or r == 1:
        axes = list(range(r))
    else:
        axes = sorted({a + r if a < 0 else a for a in p.axes})
    x = ctx.x()
    if axes:
        y = g.op(_REDUCE[p.operation], [x, g.ints([a + 1 for a in axes], "axes")], keepdims=1)
    else:  # nothing to reduce: the elementwise part alone, as a reduction over a new size-1 axis
        y = g.op(_REDUCE[p.operation], [g.op("Unsqueeze", [x, g.ints([-1], "axes")]), g.ints([-1], "axes")], keepdims=0)
    if p.coeff != 1.0:
        y = g.op("Mul", [y, g.scalar(p.coeff)])
    ctx.put(0, g.reshape(y, (1, *ctx.out_shapes[0])))


@emits("ArgMax")
def argmax(ctx: LayerCtx) -> None:
    """TopK of the flattened blob; equal values give the higher index first (TopK keeps the lower one, so it
    runs on the reversed blob)."""
    g, p = ctx.g, ctx.p
    n = int(np.prod(ctx.in_shapes[0]))
    k = int(p.topk)
    flat = g.reshape(ctx.x(), (n,))
    rev = g.slice(flat, [-1], [-(2**63)], [0], [-1])
    vals, idx = g.op("TopK", [rev, g.ints([k], "k")], 2, largest=1, sorted=1)
    idx = g.cast(g.op("Sub", [g.scalar(n - 1, np.int64), idx]), np.float32)
    if p.out_max_val:
        y = g.op("Concat", [g.reshape(vals, (1, k)), g.reshape(idx, (1, k))], axis=0)
    else:
        y = idx
    ctx.put(0, y, raw=True)


@emits("CumulativeSum")
def cumulative_sum(ctx: LayerCtx) -> None:
    ax = 1 if ctx.rank() == 1 else ctx.axis(ctx.p.axis)
    ctx.put(0, ctx.g.op("CumSum", [ctx.x(), ctx.g.scalar(ax, np.int64)]))
