"""Pooling kernels: MaxPool, AveragePool, LpPool, Global*Pool, MaxUnpool (RoI pooling in roi.py).

Windowed max/sum pools are separable over the box: one spatial axis at a time, a loop over that
axis' taps (strided views, vectorized over elements): sum(k) passes instead of prod(k). MaxPool
with Indices loops over all taps on the input laid out by stride phase (``_window.FlatTaps``),
each tap ONE contiguous run per (n, c) plane.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from . import _fast, _fast_windows
from ._registry import op
from ._window import FlatTaps, check_float, check_rank, geometry, ints, pad_pairs, prod
from .dtypes import compute_dtype


def _setup(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode):
    n = check_rank(x)
    if kernel_shape is None or len(kernel_shape) == 0:
        raise KernelError("kernel_shape is required")
    kernel = ints(kernel_shape, n, 1, "kernel_shape")
    strides = ints(strides, n, 1, "strides")
    dilations = ints(dilations, n, 1, "dilations")
    geo = geometry(x.shape[2:], kernel, strides, dilations, pads, auto_pad, ceil_mode)
    return n, kernel, strides, dilations, geo


def _lowest(dt: np.dtype):
    if dt.kind in "iu":
        return np.iinfo(dt).min
    if dt.kind == "b":
        return False
    return -np.inf


def _separable(x, kernel, strides, dilations, geo, fill, ufunc):
    """Reduce the windows one spatial axis at a time (max and sum are separable over a box):
    sum(k_i) passes over shrinking arrays instead of prod(k_i) passes over the output. No padded
    copy: each tap reduces only the outputs whose input lies inside X (padding is ``fill``, the
    ufunc's identity), so a pass reads shifted views of the previous result directly."""
    a = x
    for i in range(len(kernel)):
        a = _axis_reduce(a, 2 + i, kernel[i], strides[i], dilations[i], geo.begin[i], geo.out[i], fill, ufunc)
    return a.copy() if a is x else a


def _axis_reduce(a, ax, k, s, d, begin, o, fill, ufunc):
    """y[..., j, ...] = ufunc-reduce over taps t of a[..., j * s + t * d - begin, ...] along axis ``ax``
    (taps outside a count as ``fill``)."""
    D = a.shape[ax]
    if k == 1 and s == 1 and begin == 0 and D == o:
        return a
    if ax == a.ndim - 1 and D == s * o and a.flags.c_contiguous and D > (k - 1) * d and a.size:
        return _last_axis_flat(a, k, s, d, begin, o, fill, ufunc)
    pre = (slice(None),) * ax
    taps = []  # (output range lo..hi whose input is inside a, the view of a it reads)
    for t in range(k):
        lo = max(0, -(-(begin - t * d) // s))
        hi = min(o, (D - 1 - t * d + begin) // s + 1)
        if hi > lo:
            start = lo * s + t * d - begin
            taps.append((lo, hi, a[pre + (slice(start, start + (hi - lo - 1) * s + 1, s),)]))
    shape = a.shape[:ax] + (o,) + a.shape[ax + 1 :]
    taps.sort(key=lambda r: r[0] - r[1])  # widest ranges first
    if not taps or taps[0][1] - taps[0][0] < o:  # no tap sees every output: start from the fill value
        y = np.full(shape, fill, a.dtype)
        rest = taps
    else:
        v0 = taps[0][2]
        y = np.empty(shape, a.dtype)
        if len(taps) == 1:
            np.copyto(y, v0)
        else:  # the first two taps in one pass, the edges the second one misses copied from the first
            lo, hi, v1 = taps[1]
            ufunc(v0[pre + (slice(lo, hi),)], v1, out=y[pre + (slice(lo, hi),)])
            if lo:
                y[pre + (slice(0, lo),)] = v0[pre + (slice(0, lo),)]
            if hi < o:
                y[pre + (slice(hi, o),)] = v0[pre + (slice(hi, o),)]
        rest = taps[2:]
    for lo, hi, v in rest:
        yv = y[pre + (slice(lo, hi),)]
        ufunc(yv, v, out=yv)
    return y


def _last_axis_flat(a, k, s, d, begin, o, fill, ufunc):
    """_axis_reduce along the last, contiguous axis when it holds exactly s * o inputs: output q of
    the flattened result then reads input s * q + t * d - begin of the flattened array, so each tap
    is ONE (strided) view over all rows (long loops instead of one per row); the few edge columns
    where a tap wraps into the neighbouring row are recomputed from their valid taps."""
    D = a.shape[-1]
    af = a.reshape(-1)
    y = np.empty(a.shape[:-1] + (o,), a.dtype)
    yf = y.reshape(-1)
    q0 = -(-begin // s)  # flat outputs q0..q1 have every tap inside the flattened input
    q1 = (af.size - 1 - (k - 1) * d + begin) // s + 1
    if q1 > q0:
        taps = [af[s * q0 + t * d - begin : s * (q1 - 1) + t * d - begin + 1 : s] for t in range(k)]
        if k == 1:
            np.copyto(yf[q0:q1], taps[0])
        else:
            ufunc(taps[0], taps[1], out=yf[q0:q1])
        for v in taps[2:]:
            ufunc(yf[q0:q1], v, out=yf[q0:q1])
    # columns where some tap leaves the row: j * s < begin or j * s + (k - 1) * d - begin >= D
    edge = sorted(set(range(min(q0, o))) | set(range(max(0, -(-(D - (k - 1) * d + begin) // s)), o)))
    for j in edge:
        cols = [j * s + t * d - begin for t in range(k) if 0 <= j * s + t * d - begin < D]
        if not cols:
            y[..., j] = fill
            continue
        if len(cols) == 1:
            y[..., j] = a[..., cols[0]]
        else:
            ufunc(a[..., cols[0]], a[..., cols[1]], out=y[..., j])
        for c in cols[2:]:
            ufunc(y[..., j], a[..., c], out=y[..., j])
    return y


def _max_pool(
    x,
    with_indices,
    *,
    auto_pad="NOTSET",
    ceil_mode=0,
    dilations=(),
    kernel_shape=(),
    pads=(),
    storage_order=0,
    strides=(),
):
    n, kernel, strides, dilations, geo = _setup(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    if x.dtype.kind not in "fiu" and x.dtype.name != "bfloat16":
        raise KernelError(f"MaxPool does not accept {x.dtype} input")
    out = geo.out
    src = x
    if with_indices and x.dtype.kind in "iu" and x.dtype.itemsize < 8 and any(geo.begin + geo.end):
        # widen so that padding is strictly below every real value (a pad never wins a tie)
        src = x.astype(np.int64)
        fill = np.iinfo(np.int64).min
    else:
        fill = _lowest(x.dtype)
    if not with_indices:
        # one compiled pass (ops/_fast_windows.py); its buffer holds strides[0] * strides[1] phases: small strides
        if n == 2 and x.dtype == np.float32 and _fast.enabled() and strides[0] * strides[1] <= 16:
            return _fast_windows.max_pool2d(x, kernel, strides, dilations, geo.begin, out)
        return _separable(x, kernel, strides, dilations, geo, fill, np.maximum)
    ft = FlatTaps(src, geo, kernel, strides, dilations, fill)
    N, C = x.shape[:2]
    sp = x.shape[2:]
    if with_indices:
        # flat index in X = base(output position) + delta(tap); track the winning tap's delta
        if storage_order:
            mult = [prod(sp[:i]) for i in range(n)]
        else:
            mult = [prod(sp[i + 1 :]) for i in range(n)]
        deltas = [sum(k * d * m for k, d, m in zip(tap, dilations, mult)) for tap in np.ndindex(*kernel)]
    y = ft.run(0).copy()
    if with_indices:
        # masked writes are slow on irregular masks: update by arithmetic, arg += m * (delta - arg)
        adt = np.int32 if prod(sp) * max(1, N * C) < 2**31 else np.int64
        arg = np.full(y.shape, deltas[0], adt)
        m = np.empty(y.shape, bool)
        tmp = np.empty(y.shape, adt)
    for t in range(1, len(ft.runs)):
        v = ft.run(t)
        if with_indices:
            np.greater(v, y, out=m)
            np.maximum(y, v, out=y)
            np.subtract(adt(deltas[t]), arg, out=tmp)
            np.multiply(tmp, m, out=tmp)
            arg += tmp
        else:
            np.maximum(y, v, out=y)
    y = ft.crop(y, (N, C))
    if y.dtype != x.dtype:
        y = y.astype(x.dtype)
    if not with_indices:
        return y
    idx = ft.crop(arg, (N, C)).astype(np.int64)
    idx += (np.arange(N * C, dtype=np.int64) * prod(sp)).reshape((N, C) + (1,) * n)
    for i in range(n):
        shp = [1] * (n + 2)
        shp[2 + i] = out[i]
        idx += ((np.arange(out[i], dtype=np.int64) * strides[i] - geo.begin[i]) * mult[i]).reshape(shp)
    return y, idx


@op("onnx:MaxPool-1")
def max_pool(x, /, *, auto_pad="NOTSET", ceil_mode=0, dilations=(), kernel_shape, pads=(), storage_order=0, strides=()):
    """Y[n, c, o] = max_k Xpad[n, c, o * strides + k * dilations] (padding never wins).

    Returns (Y, Indices): Indices (int64) is the flat index of each max in X, row-major over
    (N, C, D1..Dn) (storage_order=1: column-major over the spatial axes). Output spatial shape:
    floor or (ceil_mode) ceil of (D + pads - ((k - 1) * dilation + 1)) / stride + 1, a window
    starting in the end padding dropped; auto_pad SAME_*: ceil(D / stride). Y has X's dtype.
    """
    return _max_pool(
        x,
        True,
        auto_pad=auto_pad,
        ceil_mode=ceil_mode,
        dilations=dilations,
        kernel_shape=kernel_shape,
        pads=pads,
        storage_order=storage_order,
        strides=strides,
    )


@op()
def max_pool_values(
    x, /, *, auto_pad="NOTSET", ceil_mode=0, dilations=(), kernel_shape, pads=(), storage_order=0, strides=()
):
    """Y of MaxPool without its Indices output (what a MaxPool node that does not ask for them, and
    ncnn's max Pooling, run on): Y[n, c, o] = max_k Xpad[n, c, o * strides + k * dilations], shapes and
    attributes as MaxPool's; storage_order only matters for the indices. Y has X's dtype."""
    return _max_pool(
        x,
        False,
        auto_pad=auto_pad,
        ceil_mode=ceil_mode,
        dilations=dilations,
        kernel_shape=kernel_shape,
        pads=pads,
        storage_order=storage_order,
        strides=strides,
    )


def _axis_counts(n, in_sp, kernel, strides, dilations, geo, include_pad):
    """Number of taps of each window inside the counted region, as an array broadcastable to Y."""
    cnt = None
    for i in range(n):
        lo, hi = (
            (0, in_sp[i] + geo.begin[i] + geo.inner_end[i]) if include_pad else (geo.begin[i], geo.begin[i] + in_sp[i])
        )
        pos = np.arange(geo.out[i])[:, None] * strides[i] + np.arange(kernel[i])[None, :] * dilations[i]
        c = ((pos >= lo) & (pos < hi)).sum(axis=1)
        shp = [1] * n
        shp[i] = geo.out[i]
        c = c.reshape(shp)
        cnt = c if cnt is None else cnt * c
    return cnt


def _sum_pool(x, kernel, strides, dilations, geo, power=None):
    dt = compute_dtype(x.dtype)
    xc = x if x.dtype == dt else x.astype(dt)
    if power is not None:
        xc = np.abs(xc)
        if power == 2:
            xc = xc * xc
        elif power != 1:
            xc = np.power(xc, dt.type(power))
    s = _separable(xc, kernel, strides, dilations, geo, 0, np.add)
    if s is xc or not s.flags.writeable:
        s = s.copy()
    return s, dt


@op("onnx:AveragePool-1")
def average_pool(
    x, /, *, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=(), kernel_shape, pads=(), strides=()
):
    """Y[n, c, o] = sum_k Xpad[n, c, o * strides + k * dilations] / count(o).

    count(o) = the window's taps inside X (count_include_pad=0) or inside the padded X
    (count_include_pad=1; the extra room of ceil_mode is never counted). Output shape as MaxPool.
    Float dtypes; Y has X's dtype (float16/bfloat16 accumulated in float32).
    """
    check_float(x, "X")
    n, kernel, strides, dilations, geo = _setup(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    s, dt = _sum_pool(x, kernel, strides, dilations, geo)
    cnt = _axis_counts(n, x.shape[2:], kernel, strides, dilations, geo, bool(count_include_pad))
    if np.all(cnt == cnt.flat[0]):
        s *= dt.type(1.0 / cnt.flat[0]) if dt == np.float64 else dt.type(1.0) / dt.type(cnt.flat[0])
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            s /= cnt.astype(dt)
    return s if s.dtype == x.dtype else s.astype(x.dtype)


@op("onnx:LpPool-1")
def lp_pool(x, /, *, auto_pad="NOTSET", ceil_mode=0, dilations=(), kernel_shape, p=2, pads=(), strides=()):
    """Y[n, c, o] = (sum_k |Xpad[n, c, o * strides + k * dilations]|^p)^(1/p) (padding counts as 0).

    Output shape as MaxPool. Float dtypes; Y has X's dtype. (LpPool-1 had a float p; it is the
    same formula.)
    """
    check_float(x, "X")
    n, kernel, strides, dilations, geo = _setup(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    if p <= 0:
        raise KernelError(f"p must be > 0, got {p}")
    s, dt = _sum_pool(x, kernel, strides, dilations, geo, power=p)
    if p == 2:
        np.sqrt(s, out=s)
    elif p != 1:
        np.power(s, dt.type(1.0 / p), out=s)
    return s if s.dtype == x.dtype else s.astype(x.dtype)


def _spatial_axes(x):
    n = check_rank(x)
    return tuple(range(2, 2 + n))


#: the 1/P vectors of GlobalAveragePool's GEMV, per (P, dtype): made once, read-only (shared by every call)
_MEAN_VECTORS: dict = {}
_F32 = np.dtype(np.float32)


def _mean_vector(P: int, dt: np.dtype) -> np.ndarray:
    v = _MEAN_VECTORS.get((P, dt))
    if v is None:
        if len(_MEAN_VECTORS) > 64:
            _MEAN_VECTORS.clear()
        v = np.full(P, 1.0 / P, dt)
        v.flags.writeable = False
        _MEAN_VECTORS[(P, dt)] = v
    return v


@op("onnx:GlobalAveragePool-1")
def global_average_pool(x, /):
    """Y[n, c, 1, ..., 1] = mean over the spatial axes of X[n, c]. Float dtypes; Y has X's dtype."""
    n = check_rank(x)
    N, C = x.shape[:2]
    P = prod(x.shape[2:])
    # float32 (a network's last feature map) in as few calls as possible: the step runs right after the largest
    # layers, with the caches cold, where every numpy call costs several microseconds (measured, ResNet-18's
    # 512 x 7 x 7: 0.072 ms inside the model against 0.009 warm)
    dt = _F32 if x.dtype == _F32 else None
    if dt is None:
        check_float(x, "X")
        dt = compute_dtype(x.dtype)
    if P == 0:
        raise KernelError(f"GlobalAveragePool of an empty spatial extent {x.shape}")
    # a GEMV with a 1/P vector: one BLAS pass instead of a strided reduction per channel
    xm = x.reshape(N * C, P)
    y = np.matmul(xm if xm.dtype == dt else xm.astype(dt), _mean_vector(P, dt))
    y = y.reshape((N, C) + (1,) * n)
    return y if y.dtype == x.dtype else y.astype(x.dtype)


@op("onnx:GlobalMaxPool-1")
def global_max_pool(x, /):
    """Y[n, c, 1, ..., 1] = max over the spatial axes of X[n, c]. Float dtypes; Y has X's dtype."""
    check_float(x, "X")
    axes = _spatial_axes(x)
    if prod(x.shape[2:]) == 0:
        raise KernelError(f"GlobalMaxPool of an empty spatial extent {x.shape}")
    return np.max(x, axis=axes, keepdims=True)


@op("onnx:GlobalLpPool-1")
def global_lp_pool(x, /, *, p=2):
    """Y[n, c, 1, ..., 1] = (sum over the spatial axes of |X[n, c]|^p)^(1/p).

    Float dtypes; Y has X's dtype. (GlobalLpPool-1 had a float p; same formula.)
    """
    check_float(x, "X")
    axes = _spatial_axes(x)
    if p <= 0:
        raise KernelError(f"p must be > 0, got {p}")
    dt = compute_dtype(x.dtype)
    a = np.abs(x.astype(dt, copy=False))
    if p == 2:
        y = np.sqrt(np.sum(a * a, axis=axes, keepdims=True))
    elif p == 1:
        y = np.sum(a, axis=axes, keepdims=True)
    else:
        y = np.power(np.sum(np.power(a, dt.type(p)), axis=axes, keepdims=True), dt.type(1.0 / p))
    return y if y.dtype == x.dtype else y.astype(x.dtype)


@op("onnx:MaxUnpool-9")
def max_unpool(x, i, output_shape=None, /, *, kernel_shape, pads=(), strides=()):
    """Y = zeros(inferred); Y.flat[I] = X: the partial inverse of MaxPool.

    inferred = (N, C) + (in - 1) * strides + kernel_shape - pad_begin - pad_end; I (int64, X's
    shape) holds flat indices into it. With output_shape (the full (N, C, D1..Dn)), the result is
    that shape: the inferred tensor placed at its origin, zeros elsewhere (cropped where smaller),
    as the ONNX reference and node tests do. Y has X's dtype.
    """
    n = check_rank(x)
    kernel = ints(kernel_shape, n, 1, "kernel_shape")
    strides = ints(strides, n, 1, "strides")
    begin, end = pad_pairs(pads, n)
    i = np.asarray(i)
    if i.shape != x.shape:
        raise KernelError(f"I has shape {i.shape}, X has shape {x.shape}; they must be equal")
    if i.dtype.kind not in "iu":
        raise KernelError(f"I must be an integer tensor, got {i.dtype}")
    inferred = x.shape[:2] + tuple(
        (d - 1) * s + k - b - e for d, s, k, b, e in zip(x.shape[2:], strides, kernel, begin, end)
    )
    if any(d < 0 for d in inferred):
        raise KernelError(f"kernel_shape/strides/pads give a negative output shape {inferred}")
    check_elements(inferred, "MaxUnpool output")
    y = np.zeros(inferred, x.dtype)
    flat = i.reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() >= y.size):
        raise KernelError(f"I holds indices outside [0, {y.size}) for the unpooled shape {inferred}")
    y.reshape(-1)[flat] = x.reshape(-1)
    if output_shape is None:
        return y
    shape = tuple(int(d) for d in np.asarray(output_shape).reshape(-1))
    if len(shape) != x.ndim:
        raise KernelError(f"output_shape {list(shape)} must have {x.ndim} entries (N, C and spatial)")
    if shape[:2] != x.shape[:2]:
        raise KernelError(f"output_shape {list(shape)} must keep X's N and C {x.shape[:2]}")
    if shape == inferred:
        return y
    check_elements(shape, "MaxUnpool output")
    res = np.zeros(shape, x.dtype)
    region = tuple(slice(0, min(a, b)) for a, b in zip(shape, inferred))
    res[region] = y[region]
    return res
