"""ncnn pooling and padding layers (ncnn-operators.txt): Pooling, Pooling1D, Pooling3D, SPP,
StatisticsPooling, Padding, on the shared MaxPool / AveragePool / GlobalPool / ReduceMean / Pad kernels.

Layout: Pooling1D pools the w axis of an (H, W) blob (each row a channel), Pooling a (C, H, W) blob,
Pooling3D a (C, D, H, W) blob. ncnn's pad modes: 0 "full" (the given pads, plus a tail at the end so that
the last partial window is kept: output ceil((size + pads - k) / s) + 1), 1 "valid" (the given pads,
floor), 2 / 3 SAME_UPPER / SAME_LOWER (total = k + (size - 1) // s * s - size). Max pooling pads with
-FLT_MAX (a window wholly in the padding yields -FLT_MAX, as in ncnn), average pooling with 0; an average
without ``avgpool_count_include_pad`` divides by the taps outside the *given* pads (so a SAME padding
computed by modes 2 / 3 counts as data, as in ncnn). Global pooling gives a 1d (C,) blob. Adaptive
pooling uses the windows [floor(i * n / o), ceil((i + 1) * n / o)).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from ...errors import KernelError
from ...limits import check_elements
from ...ops import elementwise, reduce, shape_pad
from ...ops import pool as pooling
from ..spec import P, Ref, W, layer
from .conv_geometry import crop_negative, same_pads

_FLT_MAX = float(np.finfo(np.float32).max)


# ----------------------------------------------------------------------------- pooling
def _pool_params(nd: int) -> list[P]:
    ps = [
        P(0, "pooling_type", 0),
        P(1, "kernel_w", 0),
        P(2, "stride_w", 1),
        P(3, "pad_left", 0),
        P(4, "global_pooling", 0),
        P(5, "pad_mode", 0),
        P(6, "avgpool_count_include_pad", 0),
        P(7, "adaptive_pooling", 0),
        P(8, "out_w", 0),
    ]
    if nd >= 2:
        ps += [
            P(11, "kernel_h", Ref("kernel_w")),
            P(12, "stride_h", Ref("stride_w")),
            P(13, "pad_top", Ref("pad_left")),
        ]
    ps.append(P(14, "pad_right", Ref("pad_left")))
    if nd >= 2:
        ps += [P(15, "pad_bottom", Ref("pad_top")), P(18, "out_h", Ref("out_w"))]
    if nd == 3:
        ps += [
            P(21, "kernel_d", Ref("kernel_w")),
            P(22, "stride_d", Ref("stride_w")),
            P(23, "pad_front", Ref("pad_left")),
            P(16, "pad_behind", Ref("pad_front")),
            P(28, "out_d", Ref("out_w")),
        ]
    return ps


def _outer_first(p, names) -> tuple[int, ...]:
    return tuple(int(getattr(p, n)) for n in reversed(names))


def _pad_value_for(x: np.ndarray, is_max: bool):
    if not is_max:
        return 0
    return -128 if x.dtype == np.int8 else -_FLT_MAX


def _pad(x: np.ndarray, begin, end, value) -> np.ndarray:
    """x (C, *sp) padded on its spatial axes with a constant (the shared Pad kernel)."""
    if not any(begin) and not any(end):
        return x
    pads = np.array([0, *begin, 0, *end], np.int64)
    return shape_pad.pad(x, pads, np.asarray(value, dtype=x.dtype), mode="constant")


def _max_pool_flt_max_pads(x: np.ndarray, begin, end, kernel, strides) -> np.ndarray:
    """Max pooling of x (C, *sp) float32 as over x padded with -FLT_MAX (ncnn's pad value), without the padded
    copy (measured: 16 x 112 x 112, 3x3/2, 0.10 ms -> 0.05): the kernel pads with -inf, then every window that
    reaches the padding is raised to -FLT_MAX, the one value the two paddings can tell apart (real taps all -inf,
    or none)."""
    y = pooling.max_pool_values(x[None], kernel_shape=kernel, strides=strides, pads=[*begin, *end])[0]
    for edge in _edges(x.shape, y.shape, tuple(begin), tuple(kernel), tuple(strides)):
        np.maximum(y[edge], -_FLT_MAX, out=y[edge])  # NaN stays NaN
    return y


@functools.lru_cache(maxsize=256)
def _edges(shape, out_shape, begin, kernel, strides) -> tuple:
    """The index tuples of the windows that reach the padding, per axis, for an input and output shape (kept per
    shape: recomputing them cost ~2 us a call)."""
    edges = []
    for ax in range(len(kernel)):
        n, o, k, s = shape[1 + ax], out_shape[1 + ax], kernel[ax], strides[ax]
        first = min(o, -(-begin[ax] // s))  # windows 0 .. first - 1 start in the leading padding
        last = max(first, min(o, (n + begin[ax] - k) // s + 1))  # windows from last on end in the trailing padding
        for lo, hi in ((0, first), (last, o)):
            if lo < hi:
                edges.append((slice(None),) * (1 + ax) + (slice(lo, hi),))
    return tuple(edges)


def _adaptive(x: np.ndarray, out: tuple[int, ...], is_max: bool) -> np.ndarray:
    """Adaptive max / average pooling of x (C, *sp) to ``out``: a loop over the taps of the largest
    window, each tap one gather covering every output position."""
    sp = x.shape[1:]
    nd = len(sp)
    check_elements((x.shape[0],) + tuple(out), "adaptive Pooling output")
    starts, ends, lens = [], [], []
    for n, o in zip(sp, out):
        j = np.arange(o)
        s = (n * j) // o
        e = (n * (j + 1) + o - 1) // o
        starts.append(s)
        ends.append(e)
        lens.append(int((e - s).max()))
    y: np.ndarray | None = None
    ok: np.ndarray | None = None
    for tap in itertools.product(*[range(L) for L in lens]):
        idx = []
        ok = None
        for ax, t in enumerate(tap):
            pos = starts[ax] + t
            valid = pos < ends[ax]
            shape = [1] * nd
            shape[ax] = out[ax]
            idx.append(np.minimum(pos, ends[ax] - 1).reshape(shape))
            v = valid.reshape(shape)
            ok = v if ok is None else ok & v
        vals = x[(slice(None),) + tuple(idx)]
        if is_max:
            y = vals.copy() if y is None else np.maximum(y, vals)
        else:
            vals = np.where(ok, vals, np.float32(0))  # type: ignore[arg-type]  # ok is set by the first axis
            y = vals.astype(np.float32) if y is None else y + vals
    assert y is not None  # at least one tap
    if not is_max:
        for ax in range(nd):  # ncnn divides by each window length in turn
            shape = [1] * nd
            shape[ax] = out[ax]
            y = y / (ends[ax] - starts[ax]).astype(np.float32).reshape(shape)
    return y.astype(x.dtype, copy=False)


def _build_pool(p, nd: int, type_name: str):
    ptype = int(p.pooling_type)
    if ptype not in (0, 1):
        raise KernelError(f"{type_name}: pooling_type {ptype} is not 0 (max) or 1 (avg)")
    is_max = ptype == 0
    names_k = ["kernel_w", "kernel_h", "kernel_d"][:nd]
    names_s = ["stride_w", "stride_h", "stride_d"][:nd]
    names_b = ["pad_left", "pad_top", "pad_front"][:nd]
    names_e = ["pad_right", "pad_bottom", "pad_behind"][:nd]
    names_o = ["out_w", "out_h", "out_d"][:nd]
    kernel = _outer_first(p, names_k)
    strides = _outer_first(p, names_s)
    pb = _outer_first(p, names_b)
    pe = _outer_first(p, names_e)
    outs = _outer_first(p, names_o)
    mode = int(p.pad_mode)
    include_pad = int(p.avgpool_count_include_pad)
    want = nd + 1

    def check(x):
        if x.ndim == want - 1 and nd < 3:  # ncnn reads a 1d / 2d blob one rank short as a single channel
            return x[None]
        if x.ndim != want:
            raise KernelError(f"{type_name} takes a {want}d blob, got shape {x.shape}")
        return x

    if p.global_pooling:
        fn = pooling.global_max_pool if is_max else pooling.global_average_pool

        def run_global(x):
            x = check(x)
            return fn(x[None])[0].reshape(x.shape[0])

        if nd == 2:  # for the ncnn plan's fusions (stdops/ncnn/fuse.py)
            run_global.pool_form = "global_max" if is_max else "global_average"  # type: ignore[attr-defined]
        return run_global

    if p.adaptive_pooling:
        if any(o <= 0 and o != -233 for o in outs):
            raise KernelError(f"{type_name}: adaptive output size {list(outs)} must be >= 1 (or -233: keep)")

        def run_adaptive(x):
            xc = check(x)
            o = tuple(n if v == -233 else v for n, v in zip(xc.shape[1:], outs))
            if o == xc.shape[1:]:
                # Pooling passes the bottom itself through (in its own rank); Pooling1D and Pooling3D
                # always write a new (h, w) / (c, d, h, w) blob (pooling1d.cpp, pooling3d.cpp)
                return x if nd == 2 else xc.copy()
            return _adaptive(xc, o, is_max)

        return run_adaptive

    if min(kernel) <= 0 or min(strides) <= 0:
        raise KernelError(f"{type_name}: kernel {list(kernel)} and stride {list(strides)} must be >= 1")
    if mode not in (0, 1, 2, 3):
        raise KernelError(f"{type_name}: pad_mode {mode} is not 0..3")
    if mode in (0, 1) and (min(pb) < 0 or min(pe) < 0):
        raise KernelError(f"{type_name}: pads {list(pb + pe)} must be >= 0")
    avg_kernel = pooling.average_pool

    def avg(*args, **kw):
        with np.errstate(divide="ignore", invalid="ignore"):  # a window with no counted tap is 0/0, as in ncnn
            return avg_kernel(*args, **kw)

    #: modes 0 and 1: input shape -> its checked pads (the same every call of the shape)
    known: dict = {}

    def given_pads(shape):
        channels, sp = shape[0], shape[1:]
        b, e = list(pb), list(pe)
        if mode == 0:
            for ax in range(nd):
                span = sp[ax] + b[ax] + e[ax] - kernel[ax]
                if span < 0:
                    raise KernelError(
                        f"{type_name}: kernel {kernel[ax]} is larger than the padded input {sp[ax] + b[ax] + e[ax]}"
                    )
                tail = span % strides[ax]
                if tail:
                    e[ax] += strides[ax] - tail
        for ax in range(nd):
            if sp[ax] + b[ax] + e[ax] < kernel[ax]:
                raise KernelError(
                    f"{type_name}: kernel {kernel[ax]} is larger than the padded input {sp[ax] + b[ax] + e[ax]}"
                )
        # pads are int32 params: a hostile 2^31 - 1 would pad the map to terabytes (make fuzz, seed 20261202)
        check_elements((channels,) + tuple(n + lo + hi for n, lo, hi in zip(sp, b, e)), f"{type_name} padded input", 4)
        if len(known) > 64:
            known.clear()
        known[shape] = b, e, any(b) or any(e)
        return known[shape]

    def run(x):
        x = check(x)
        sp = x.shape[1:]
        if mode in (0, 1):
            b, e, padded = known.get(x.shape) or given_pads(x.shape)
            if is_max:
                if padded and x.dtype == np.float32:
                    return _max_pool_flt_max_pads(x, b, e, kernel, strides)
                xp = _pad(x, b, e, _pad_value_for(x, True))
                return pooling.max_pool_values(xp[None], kernel_shape=kernel, strides=strides)[0]
        else:
            totals = [k + (n - 1) // s * s - n for n, k, s in zip(sp, kernel, strides)]
            be = same_pads(totals, "upper" if mode == 2 else "lower", depth_upper=nd == 3)
            if be is None:
                b, e = [0] * nd, [0] * nd
            else:
                x, b, e = crop_negative(x, *be)
                b, e = list(b), list(e)
                sp = x.shape[1:]
        for ax in range(nd):
            if sp[ax] + b[ax] + e[ax] < kernel[ax]:
                raise KernelError(
                    f"{type_name}: kernel {kernel[ax]} is larger than the padded input {sp[ax] + b[ax] + e[ax]}"
                )
        if is_max:
            if x.dtype == np.float32 and (any(b) or any(e)):
                return _max_pool_flt_max_pads(x, b, e, kernel, strides)
            xp = _pad(x, b, e, _pad_value_for(x, True))
            return pooling.max_pool_values(xp[None], kernel_shape=kernel, strides=strides)[0]
        xf = x.astype(np.float32, copy=False)
        if include_pad:
            return avg(_pad(xf, b, e, 0)[None], kernel_shape=kernel, strides=strides, count_include_pad=1)[0]
        if mode in (0, 1):  # the counted region is the input itself
            return avg(xf[None], kernel_shape=kernel, strides=strides, pads=list(b) + list(e), count_include_pad=0)[0]
        # SAME modes: ncnn sums and counts only the taps inside the SAME-padded input less the pad params
        xp = _pad(xf, b, e, 0)
        region = []
        for ax in range(nd):
            full = xp.shape[1 + ax]
            if pb[ax] + pe[ax] >= full:  # no tap is counted: every window is 0 / 0 (pooling.cpp)
                out = [(xp.shape[1 + a] - kernel[a]) // strides[a] + 1 for a in range(nd)]
                return np.full([xp.shape[0], *out], np.nan, np.float32)
            region.append(slice(pb[ax], full - pe[ax]))
        inner = xp[(slice(None),) + tuple(region)]
        return avg(inner[None], kernel_shape=kernel, strides=strides, pads=list(pb) + list(pe), count_include_pad=0)[0]

    return run


def _declare_pool(type_name: str, nd: int) -> None:
    def build(p, w):
        return _build_pool(p, nd, type_name)

    build.__doc__ = (
        f"{nd}D max / average pooling (ncnn pad modes 0..3, count_include_pad, global, adaptive) on "
        "the shared MaxPool / AveragePool / Global*Pool kernels."
    )
    kernels = (
        pooling.max_pool_values,
        pooling.average_pool,
        pooling.global_max_pool,
        pooling.global_average_pool,
        shape_pad.pad,
    )
    layer(type_name, params=_pool_params(nd), kernels=kernels)(build)


_declare_pool("Pooling1D", 1)
_declare_pool("Pooling", 2)
_declare_pool("Pooling3D", 3)


# ----------------------------------------------------------------------------- SPP
@layer(
    "SPP",
    params=[P(0, "pooling_type", 0), P(1, "pyramid_height", 1)],
    kernels=(pooling.average_pool, pooling.max_pool_values, shape_pad.pad),
)
def spp(p, w):
    """Spatial pyramid pooling of (C, H, W): for level l < pyramid_height, 2^l x 2^l bins of size
    ceil(H / 2^l) x ceil(W / 2^l) over the input zero-padded by ceil(rem / 2) on each side (rem = bins x
    size - extent; zeros also for max pooling, as in ncnn), max or average (/ bin size). Output: a 1d
    blob, level after level, each (C, bins, bins) flattened: C x (4^L - 1) / 3 values."""
    ptype = int(p.pooling_type)
    levels = int(p.pyramid_height)
    if ptype not in (0, 1):
        raise KernelError(f"SPP: pooling_type {ptype} is not 0 (max) or 1 (avg)")
    if levels < 1 or levels > 16:
        raise KernelError(f"SPP: pyramid_height {levels} must be 1..16")
    avg = pooling.average_pool

    def run(x):
        if x.ndim != 3:
            raise KernelError(f"SPP takes a 3d blob (C, H, W), got shape {x.shape}")
        C, H, Wd = x.shape
        parts = []
        for lv in range(levels):
            bins = 1 << lv
            kh, kw = -(-H // bins), -(-Wd // bins)
            ph, pw = (kh * bins - H + 1) // 2, (kw * bins - Wd + 1) // 2
            xp = _pad(x.astype(np.float32, copy=False), (ph, pw), (ph, pw), 0)
            if ptype == 0:
                y = pooling.max_pool_values(xp[None], kernel_shape=(kh, kw), strides=(kh, kw))[0]
            else:
                y = avg(xp[None], kernel_shape=(kh, kw), strides=(kh, kw), count_include_pad=1)[0]
            parts.append(y[:, :bins, :bins].reshape(-1))
        return np.concatenate(parts)

    return run


# ----------------------------------------------------------------------------- StatisticsPooling
@layer("StatisticsPooling", params=[P(0, "include_stddev", 0)], kernels=(reduce.reduce_mean, elementwise.sqrt))
def statistics_pooling(p, w):
    """Per channel of a (C, H, W) / (C, D, H, W) blob: mean, and with include_stddev the population
    standard deviation after it: a 1d blob of C or 2C values."""
    mean = reduce.reduce_mean
    std = bool(p.include_stddev)

    def run(x):
        if x.ndim not in (2, 3, 4):
            raise KernelError(f"StatisticsPooling takes a 3d or 4d blob, got shape {x.shape}")
        xs = (x if x.ndim > 2 else x[None]).astype(np.float32, copy=False)
        flat = xs.reshape(xs.shape[0], -1)
        axes = np.array([1], np.int64)
        m = mean(flat, axes, keepdims=1)
        if not std:
            return m.reshape(-1)
        d = flat - m
        s = elementwise.sqrt(mean(d * d, axes, keepdims=1))
        return np.concatenate([m.reshape(-1), s.reshape(-1)])

    return run


# ----------------------------------------------------------------------------- Padding
@layer(
    "Padding",
    params=[
        P(0, "top", 0),
        P(1, "bottom", 0),
        P(2, "left", 0),
        P(3, "right", 0),
        P(4, "type", 0),
        P(5, "value", 0.0),
        P(6, "per_channel_pad_data_size", 0),
        P(7, "front", 0),
        P(8, "behind", 0),
    ],
    weights=lambda p: [W("per_channel_pad_data", p.per_channel_pad_data_size)] if p.per_channel_pad_data_size else [],
    kernels=(shape_pad.pad,),
)
def padding(p, w):
    """Pad a blob: 1d (w) by left/right; 2d (h, w) by top/bottom, left/right; 3d (c, h, w) also the channels
    by front/behind; 4d (c, d, h, w) the depth by front/behind. type 0 constant (``value``, or per channel
    ``per_channel_pad_data``: one per output channel for 3d, per channel for 4d), 1 replicate (edge),
    2 reflect (mirror without the edge); replicate/reflect also apply along the channel (3d) or depth (4d)
    axis. On the shared Pad kernel."""
    top, bottom, left, right = int(p.top), int(p.bottom), int(p.left), int(p.right)
    front, behind = int(p.front), int(p.behind)
    ptype = int(p.type)
    if ptype not in (0, 1, 2):
        raise KernelError(f"Padding: type {ptype} is not 0 (constant), 1 (replicate) or 2 (reflect)")
    if min(top, bottom, left, right, front, behind) < 0:
        raise KernelError(
            f"Padding: negative pads (top {top} bottom {bottom} left {left} right {right} "
            f"front {front} behind {behind})"
        )
    per_channel = w.get("per_channel_pad_data")
    value = float(p.value)
    pad = shape_pad.pad
    mode = {0: "constant", 1: "edge", 2: "reflect"}[ptype]
    nothing = not any((top, bottom, left, right, front, behind))

    def pads_for(ndim):
        if ndim == 1:
            return [left], [right]
        if ndim == 2:
            return [top, left], [bottom, right]
        if ndim == 3:
            return [front, top, left], [behind, bottom, right]
        return [0, front, top, left], [0, behind, bottom, right]

    def run(x):
        if x.ndim < 1 or x.ndim > 4:
            raise KernelError(f"Padding takes a 1d..4d blob, got shape {x.shape}")
        if nothing:
            return x
        b, e = pads_for(x.ndim)
        if ptype == 2:
            for n, bb, ee in zip(x.shape, b, e):
                if (bb or ee) and (bb >= n or ee >= n):
                    raise KernelError(f"Padding: reflect pads {bb}, {ee} need an axis longer than them, got {n}")
        if ptype != 0 or per_channel is None or x.ndim < 3:
            if ptype == 0:
                return pad(x, np.array(b + e, np.int64), np.asarray(value, dtype=x.dtype), mode="constant")
            return pad(x, np.array(b + e, np.int64), mode=mode)
        # constant with a value per channel (3d: per output channel; 4d: per channel)
        outshape = tuple(n + bb + ee for n, bb, ee in zip(x.shape, b, e))
        nc = outshape[0]
        if per_channel.size < nc:
            raise KernelError(
                f"Padding: per_channel_pad_data has {per_channel.size} values, the padded blob has {nc} channels"
            )
        vals = per_channel[:nc].astype(x.dtype)
        check_elements(outshape, "Padding output")
        out = np.empty(outshape, x.dtype)
        out[...] = vals.reshape((nc,) + (1,) * (x.ndim - 1))
        out[tuple(slice(bb, bb + n) for bb, n in zip(b, x.shape))] = x
        return out

    return run
