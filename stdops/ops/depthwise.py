"""Depthwise convolution (one input channel per group, any channel multiplier), the paths conv_forward
takes when C/group == 1.

- with the optional compiled kernels (ops/_fast_depthwise.py): one pass per plane, bias and clip fused; float32
  3 x 3 and 5 x 5 layers at stride 1 or 2 on AVX-512 by register tiles that read the input in place
  (ops/_fast_dwtiles.py);
- in NumPy (the reference): the taps of each channel gathered as contiguous runs over the stride phases
  and reduced by a small batched GEMM in cache blocks, B riding in it as a row of ones; wide 2-D maps at
  row stride 1 compute 4 output rows per GEMM column (6 input rows x kw taps), gathering 4.5 instead of 9
  values per output.

``cw`` is a conv.ConvWeight: its ``_dwrows`` dict caches the rearranged weights per layout.
"""

from __future__ import annotations

import numpy as np

from . import _fast, _fast_depthwise, _fast_dwtiles
from ._blas import matmul
from ._window import FlatTaps, Geometry, prod

_DW_BLOCK = 1 << 18  # elements of the depthwise column block (1 MiB of float32)


def bias_array(b, dt):
    """B as a contiguous array of the compute dtype (None stays None)."""
    return None if b is None else np.ascontiguousarray(b, dtype=dt)


_DW_ROWS = 4  # output rows per depthwise row block (measured: 4 beats 3, 5, 6, 8, 12)
_DW_ROWS_MIN_RUN = 96  # the row-block GEMM needs this many columns per plane to beat the per-channel GEMV


def _dw_weight(cw, m: int, strides, dilations, b) -> np.ndarray:
    """The depthwise GEMM weights, (group, M/group * m, K), with B as one more column when given.

    m == 0: the per-tap layout (taps, K = prod(kernel)). m >= 1 (2-D): m output rows per column;
    row (j, i) (multiplier j, output row i of the block) holds w[j, ky, kx] at column
    (i * sh + ky * dh) * kw + kx of K = nD * kw, zeros elsewhere. Cached on ``cw`` (with B only
    when B is the constant the adapter prepared)."""
    key = (m, tuple(strides), tuple(dilations), b is not None)
    cache = b is None or b is cw.bias_src
    wm = cw._dwrows.get(key) if cache else None
    if wm is not None:
        return wm
    g, mg = cw.group, cw.M // cw.group
    if b is not None:
        wm = _dw_weight(cw, m, strides, dilations, None)
        bc = np.repeat(b.astype(cw.dtype).reshape(g, mg), max(m, 1), axis=1).reshape(g, -1, 1)
        wm = np.ascontiguousarray(np.concatenate([wm, bc], axis=2))
    elif m == 0:
        wm = cw.mat
    else:
        (kh, kw), (sh, _), (dh, _) = cw.kernel, strides, dilations
        nD = (m - 1) * sh + (kh - 1) * dh + 1
        w = cw.w.reshape(g, mg, kh, kw).astype(cw.dtype)
        wm = np.zeros((g, mg, m, nD, kw), cw.dtype)
        for i in range(m):
            for ky in range(kh):
                wm[:, :, i, i * sh + ky * dh] = w[:, :, ky]
        wm = wm.reshape(g, mg * m, nD * kw)
    if cache:
        cw._dwrows[key] = wm
    return wm


def _dw_rows_plan(xshape, geo, kernel, strides):
    """(m, G): G blocks of m output rows for the row-block depthwise path, or None when the
    per-tap path is faster (strided rows; short planes, where per-plane GEMM calls dominate)."""
    if len(kernel) != 2 or strides[0] != 1:
        return None
    m = _DW_ROWS
    G = -(-geo.out[0] // m)  # the last block may be partial
    Qw = -(-(xshape[3] + geo.begin[1] + geo.end[1]) // strides[1])
    if G * Qw < _DW_ROWS_MIN_RUN or m < 2:
        return None
    return m, G


_ZEROS: dict = {}


def _zeros(n: int, dt) -> np.ndarray:
    """A shared read-only zero vector of at least n elements (dot(x, zeros) is 0 iff x is finite)."""
    z = _ZEROS.get(np.dtype(dt))
    if z is None or z.size < n:
        z = np.zeros(max(n, 1 << 16), dt)
        z.flags.writeable = False
        _ZEROS[np.dtype(dt)] = z
    return z[:n]


def _dw_reduce(runs, wall, NG, rows, K, L, bias, dt):
    """y (NG, rows, L) = wall (NG, rows, K [+1]) @ cols (NG, K [+1], L) in cache-sized channel blocks;
    ``runs`` fills cols[:, :K] of a block; a bias adds a row of ones (set once)."""
    y = np.empty((NG, rows, L), dt)
    Kb = K + bool(bias)
    block = max(1, _DW_BLOCK // (Kb * L))
    cols = np.empty((min(block, NG), Kb, L), dt)
    if bias:
        cols[:, K] = 1
    for c0 in range(0, NG, block):
        c1 = min(NG, c0 + block)
        cb = cols[: c1 - c0]
        runs(cb[:, :K], c0, c1)
        matmul(wall[c0:c1], cb, out=y[c0:c1])
    return y


def depthwise(xc: np.ndarray, cw, geo, strides, dilations, b=None, clip=None) -> np.ndarray:
    """C/group == 1: y[n, c, j] = b[c, j] + sum over taps of w[c, j, tap] * x[n, c, window(tap)].

    The padded input is split into stride phases laid out flat per channel, so that every tap
    reads one contiguous run per channel (output rows computed at the phase width, cropped at
    the end); the runs are gathered into columns per channel and reduced with one batched GEMM
    (faster than a multiply-add pass per tap, which is memory bound), B riding in it as a row of
    ones. Wide 2-D maps at row stride 1 compute m output rows per column (:func:`_depthwise_rows`).
    """
    N, C = xc.shape[:2]
    g, mg, kernel, dt = cw.group, cw.M // cw.group, cw.kernel, cw.dtype
    M, out, NG = g * mg, geo.out, N * g
    if len(kernel) == 2 and _fast.enabled() and dt.type in (np.float32, np.float64) and strides[0] * strides[1] <= 16:
        # (the compiled buffers hold one plane per stride phase: small strides only)
        # compiled (ops/_fast.py); the NumPy path below is their reference
        xc = np.ascontiguousarray(xc)
        if _fast_dwtiles.tiles_apply(dt, mg, kernel, strides, dilations):  # float32 on AVX-512: register tiles
            clip_args = _fast._clip_args(clip, dt)
            return _fast_dwtiles.depthwise_tiles(
                xc, cw.dw_taps(), bias_array(b, dt), strides, geo.begin, out, clip_args
            )
        s1 = kernel == (3, 3) and tuple(strides) == (1, 1) and tuple(dilations) == (1, 1)
        taps = not s1 and _fast_depthwise.applies(mg, kernel, strides, dilations)
        small = (
            _fast_depthwise.SMALL_MAP_3X3
            if s1
            else (_fast_depthwise.SMALL_MAP_5 if taps and kernel[1] == 5 else _fast_depthwise.SMALL_MAP)
        )
        if mg == 1 and out[0] * out[1] <= small:
            return _fast_depthwise.depthwise2d_small(
                xc, cw.dw_taps_last(), bias_array(b, dt), strides, dilations, geo.begin, out, clip
            )
        if taps:
            return _fast_depthwise.depthwise_taps(
                xc, cw.dw_taps(), bias_array(b, dt), strides, geo.begin, out, _fast._clip_args(clip, dt)
            )
        return _fast_depthwise.depthwise2d(
            xc, cw.dw_taps(), bias_array(b, dt), mg, strides, dilations, geo.begin, out, clip
        )
    rows = _dw_rows_plan(xc.shape, geo, kernel, strides)
    yr = None if rows is None else _depthwise_rows(xc, cw, geo, strides, dilations, rows[0], rows[1], b)
    if yr is not None:
        m = rows[0]
        yr = yr[..., : out[1]]  # (N, g, mg, m, G, OW)
        y = np.empty((N, M) + out, dt)
        Gf, rem = divmod(out[0], m)  # full row blocks, rows of the last partial one
        # un-block the rows and drop the junk columns in one copy (clipping on the way)
        _copy_clip(
            y[:, :, : Gf * m].reshape(N, g, mg, Gf, m, out[1]), yr[:, :, :, :, :Gf].transpose(0, 1, 2, 4, 3, 5), clip
        )
        if rem:
            _copy_clip(y[:, :, Gf * m :].reshape(N, g, mg, rem, out[1]), yr[:, :, :, :rem, Gf], clip)
        return y
    ft = FlatTaps(xc, geo, kernel, strides, dilations)
    L, kp = ft.L, prod(kernel)
    wm = _dw_weight(cw, 0, strides, dilations, b)
    wall = wm if N == 1 else np.tile(wm, (N, 1, 1))  # weights of row n * g + c
    view = ft.all_runs()

    def runs(cb, c0, c1):  # cb[c, tap, :] = the contiguous run of plane c0 + c that tap reads
        if view is not None:
            np.copyto(cb.reshape((c1 - c0,) + kernel + (L,)), view[c0:c1])
        else:
            for t in range(kp):
                np.copyto(cb[:, t], ft.run(t, slice(c0, c1)))

    y = _dw_reduce(runs, wall, NG, mg, kp, L, b is not None, dt)
    y = y.reshape((N, M, out[0]) + ft.tail)
    if len(out) > 1 and ft.tail != tuple(out[1:]):  # drop the junk columns (clipping on the way)
        src = y[(Ellipsis,) + tuple(slice(0, o) for o in out[1:])]
        y = np.empty((N, M) + out, dt)
        _copy_clip(y, src, clip)
    elif clip is not None:
        np.clip(y, *clip, out=y)
    return y


def _copy_clip(dst, src, clip):
    if clip is None:
        np.copyto(dst, src)
    else:
        np.clip(src, *clip, out=dst)


def _depthwise_rows(xc: np.ndarray, cw, geo, strides, dilations, m: int, G: int, b=None):
    """Depthwise 2-D convolution at row stride 1, m output rows per GEMM column: output row
    g * m + i of a plane reads padded rows g * m + D with D = i + ky * dh < nD. The padded input is
    split into m row phases (and sw column phases) laid out flat, so that each (D, kx) reads ONE
    contiguous run per plane for all g; the runs form (nD * kw, G * Qw) columns that one small GEMM
    (M/g * m, nD * kw) per plane reduces. Gathers nD * kw / m values per output instead of kh * kw,
    and the GEMM runs at BLAS speed instead of a GEMV's. Returns (N, g, M/g, m, G, Qw) rows, or None
    when X holds an inf or NaN (the per-tap path then keeps them inside their windows)."""
    N, C = xc.shape[:2]
    (kh, kw), (sh, sw), (dh, dw) = cw.kernel, strides, dilations
    g, mg, dt = cw.group, cw.M // cw.group, cw.dtype
    P = m * sh
    nD = (m - 1) * sh + (kh - 1) * dh + 1
    Gr = G + (nD - 1) // P  # phase rows the runs read (plus FlatTaps' spare row)
    OW = geo.out[1]
    end_h = max(0, Gr * P - xc.shape[2] - geo.begin[0])
    pgeo = Geometry(geo.begin, (end_h, geo.end[1]), (G, OW), (1, 1), (end_h, geo.end[1]))
    ft = FlatTaps(xc, pgeo, (1, 1), (P, sw), (1, 1))
    flat = ft.flat  # (P * sw, N * C, Q0 * Qw): phase (p, a) = padded rows p + q * P, cols a + qc * sw
    fl = flat.reshape(-1)
    with np.errstate(invalid="ignore"):
        finite = np.dot(fl, _zeros(fl.size, dt)) == 0
    if not finite:
        return None  # an inf/NaN input: its zero weights for the block's other rows would give 0 * inf = NaN
    Qw = ft.row[0]
    GQ, K, NG, isz = G * Qw, nD * kw, N * g, flat.itemsize
    wm = _dw_weight(cw, m, strides, dilations, b)
    wall = wm if N == 1 else np.tile(wm, (N, 1, 1))
    # one strided view per (D range sharing a row offset r0, kx): consecutive row phases; at
    # column stride 1 all kx at once (runs at off + kx * dw). Built once, sliced per block.
    views = []
    for r0 in range((nD - 1) // P + 1):
        d0, d1 = r0 * P, min(nD, (r0 + 1) * P)
        for kx in [slice(None)] if sw == 1 else range(kw):
            off = r0 * Qw + (0 if sw == 1 else (kx * dw) // sw)
            base = flat[(d0 % P) * sw + (0 if sw == 1 else (kx * dw) % sw), :, off:]
            shape, st = (NG, d1 - d0), (base.strides[0], sw * flat.strides[0])
            if sw == 1:
                shape, st = shape + (kw,), st + (dw * isz,)
            src = np.lib.stride_tricks.as_strided(base, shape + (GQ,), st + (isz,), writeable=False)
            views.append(((slice(None), slice(d0, d1), kx), src))

    def runs(cb, c0, c1):
        c4 = cb.reshape(c1 - c0, nD, kw, GQ)
        for idx, src in views:
            np.copyto(c4[idx], src[c0:c1])

    y = _dw_reduce(runs, wall, NG, mg * m, K, GQ, b is not None, dt)
    return y.reshape(N, g, mg, m, G, Qw)
