"""Compiled planar depthwise kernels (numba, the optional ``fast`` extra): one channel per group (any channel
multiplier in :func:`depthwise2d`), with the bias and a following clip. Reference: the NumPy path of
ops/depthwise.py (tests/ops/test_fast.py). On AVX-512 the float32 3 x 3 and 5 x 5 layers at strides 1 and 2 take
the register tiles of ops/_fast_dwtiles.py instead; these kernels run the rest (float64, other kernels, dilations,
channel multipliers) and everything on machines without AVX-512. What each gains (one AVX-512 core):

- :func:`depthwise2d`: any kernel, stride, dilation, channel multiplier, one plane at a time in cache: the plane
  is scattered into its zero-padded stride phases, each tap is one long contiguous multiply-add into the plane's
  accumulator, and the accumulator is clipped into Y. One pass over X and one over Y; the NumPy path gathers the
  taps into columns first (2-4 passes over 2-9x the input). MobileNetV2's 3x3 144@56: 0.47 ms against 1.8 ms;
  3 x 3 stride 1 takes ``_dw3x3s1`` (the nine taps in one expression per output): 0.24 ms.
- :func:`depthwise2d_small`: small maps channels-last (each output position sums its taps over a contiguous run
  of channels): 7 x 7 x 960 0.07 ms against 0.19 planar.
- :func:`depthwise_taps`: undilated, 3 or 5 taps per row, strides 1 or 2 (MobileNetV2's and EfficientNet's
  stride-2 3 x 3 layers, the 5 x 5 layers of EfficientNet and MobileNetV3). Each plane is scattered once into its
  zero-padded stride phases (phase (a, c) holds padded rows a + i sh and columns c + j sw, width Wq), so that every
  tap reads ONE contiguous run of a phase for all outputs (computed at the phase width, the columns past ow
  dropped in the copy to Y). Then, where ``_dw2d`` makes one multiply-add pass over an accumulator per tap, these
  sum the taps in registers: 3 x 3 all nine in one expression per output, 5-tap rows one row (five terms) per pass
  over a chunk of the accumulator that stays in L1.

Strict IEEE arithmetic except fused multiply-add (numba's ``contract``): each output sums its terms in a fixed
order, padding included as zeros (0 * inf is NaN, as the definition says).
"""

from __future__ import annotations

import sys

import numpy as np

from ._fast import _clip_args, numba

#: 5-tap rows with at most this many outputs per channel take the channels-last kernel instead (one AVX-512
#: core: 576@7 0.078 ms against 0.155 here; 240@14 0.116 here against 0.144, 480@14 0.227 against 0.287)
SMALL_MAP_5 = 64
_WIDE_ROW = 48  # 3 x 3 output rows from this width on go straight into Y (as _dw3x3s1)
_CHUNK = 2048  # accumulator values per round of the 5-tap rows (8 KiB with float32: in L1 with its runs)
_DW_CHUNK = 4096  # accumulator values per pass of _dw2d's taps (16 KiB: stays in L1 with its runs)
_DW_WIDE_ROW = 48  # 3 x 3 stride-1 depthwise rows from this width on go straight into Y (measured: 56 and 112 gain)

if numba is not None:
    from ._fast import _rows_out

    @numba.njit(cache=True, nogil=True, fastmath={"contract"})
    def _dw2d(x, w, b, mg, sh, sw, dh, dw, pt, pl, clip, lo, hi, y):  # pragma: no cover - compiled
        N, C, H, W = x.shape
        M, kh, kw = w.shape
        oh, ow = y.shape[2], y.shape[3]
        has_b = b.shape[0] == M
        # the padded plane split into stride phases, phase (a, c) holding padded rows a + i sh and columns
        # c + j sw: tap (ky, kx) then reads ONE contiguous run of a phase for all outputs (computed at the
        # phase width Wq, the columns past ow dropped at the end); one spare row for the last tap's run
        Hq = max((H - 1 + pt) // sh + 1, oh + ((kh - 1) * dh) // sh + 1)
        Wq = max((W - 1 + pl) // sw + 1, ow + ((kw - 1) * dw) // sw)
        # the runs are computed over L rounded up to whole vector iterations (64 values): the loops below then
        # never fall into their scalar remainder, which dominated small maps (7 x 7: 63 values, all scalar)
        L = -(-(oh * Wq) // 64) * 64
        ph = np.zeros((sh * sw, Hq * Wq + L), x.dtype)
        acc = np.empty(L, x.dtype)
        for n in range(N):
            for c in range(C):
                plane = x[n, c]
                for iy in range(H):  # scatter the plane into its phases (the rest stays zero)
                    py = iy + pt
                    base = (py // sh) * Wq
                    prow = (py % sh) * sw
                    if sw == 2:  # both column phases in one loop: LLVM vectorizes the pair of stride-2 loads
                        src = plane[iy]
                        half, odd = W // 2, W % 2
                        pa = pl % 2  # the phase of the even input columns
                        e0 = ph[prow + pa, base + pl // 2 : base + pl // 2 + half + odd]
                        e1 = ph[prow + 1 - pa, base + (1 + pl) // 2 : base + (1 + pl) // 2 + half]
                        for i in range(half):
                            e0[i] = src[2 * i]
                            e1[i] = src[2 * i + 1]
                        if odd:
                            e0[half] = src[W - 1]
                        continue
                    for a in range(sw):  # input columns ix0, ix0 + sw, ... land in phase column a
                        ix0 = (a - pl) % sw
                        k = base + (ix0 + pl) // sw
                        dst = ph[prow + a, k : k + (W - ix0 + sw - 1) // sw]
                        src = plane[iy]
                        if sw == 1:  # explicit loops (numba's slice assignment copies through a temporary);
                            for i in range(dst.shape[0]):  # constant strides vectorize
                                dst[i] = src[ix0 + i]
                        elif sw == 2:
                            for i in range(dst.shape[0]):
                                dst[i] = src[ix0 + 2 * i]
                        else:
                            for i in range(dst.shape[0]):
                                dst[i] = src[ix0 + i * sw]
                for j in range(mg):
                    m = c * mg + j
                    bias = b[m] if has_b else x.dtype.type(0)
                    for q0 in range(0, L, _DW_CHUNK):  # every tap over a chunk of the accumulator (in L1)
                        q1 = min(L, q0 + _DW_CHUNK)
                        a = acc[q0:q1]
                        for q in range(q1 - q0):
                            a[q] = bias
                        for ky in range(kh):
                            ry = ky * dh
                            for kx in range(kw):
                                rx = kx * dw
                                off = (ry // sh) * Wq + rx // sw + q0
                                run = ph[(ry % sh) * sw + rx % sw, off : off + q1 - q0]  # slices vectorize best
                                wv = w[m, ky, kx]
                                for q in range(q1 - q0):
                                    a[q] += wv * run[q]
                    if clip:
                        for q in range(L):
                            v = acc[q]
                            acc[q] = lo if v < lo else (hi if v > hi else v)  # NaN stays NaN
                    _rows_out(acc, Wq, y[n, m])

    @numba.njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy")
    def _dw3x3s1(x, w, b, pt, pl, clip, lo, hi, y):  # pragma: no cover - compiled
        # 3 x 3 stride-1 undilated depthwise (one channel per group): each plane copied into a zero-padded plane
        # of width Wp = ow + 2, then every output is b + w0 r0 + ... + w8 r8 in _dw2d's tap order (the same sum)
        # in one expression: 9 loads and one store per output, where _dw2d makes 9 passes over an accumulator.
        # Wide rows go straight into Y row by row; narrow ones as one run over the plane at width Wp (the two
        # junk columns per row dropped in the copy to Y)
        N, C, H, W = x.shape
        oh, ow = y.shape[2], y.shape[3]
        Wp, Hp = ow + 2, oh + 2
        L = oh * Wp
        p = np.zeros(Hp * Wp + 2, x.dtype)
        acc = np.empty(L, x.dtype)
        has_b = b.shape[0] == C
        for n in range(N):
            for c in range(C):
                plane = x[n, c]
                for iy in range(min(H, Hp - pt)):
                    row = p[(iy + pt) * Wp + pl :]
                    src = plane[iy]
                    for i in range(min(W, Wp - pl)):
                        row[i] = src[i]
                w0, w1, w2 = w[c, 0, 0], w[c, 0, 1], w[c, 0, 2]
                w3, w4, w5 = w[c, 1, 0], w[c, 1, 1], w[c, 1, 2]
                w6, w7, w8 = w[c, 2, 0], w[c, 2, 1], w[c, 2, 2]
                bias = b[c] if has_b else x.dtype.type(0)
                out = y[n, c]
                if ow >= _DW_WIDE_ROW:
                    for oy in range(oh):
                        o = oy * Wp
                        r0, r1, r2 = p[o : o + ow], p[o + 1 : o + 1 + ow], p[o + 2 : o + 2 + ow]
                        o += Wp
                        r3, r4, r5 = p[o : o + ow], p[o + 1 : o + 1 + ow], p[o + 2 : o + 2 + ow]
                        o += Wp
                        r6, r7, r8 = p[o : o + ow], p[o + 1 : o + 1 + ow], p[o + 2 : o + 2 + ow]
                        orow = out[oy]
                        for q in range(ow):
                            t = bias + w0 * r0[q] + w1 * r1[q] + w2 * r2[q] + w3 * r3[q] + w4 * r4[q]
                            t = t + w5 * r5[q] + w6 * r6[q] + w7 * r7[q] + w8 * r8[q]
                            if clip:
                                t = lo if t < lo else (hi if t > hi else t)  # NaN stays NaN
                            orow[q] = t
                    continue
                r0, r1, r2 = p[0:L], p[1 : L + 1], p[2 : L + 2]
                r3, r4, r5 = p[Wp : Wp + L], p[Wp + 1 : Wp + L + 1], p[Wp + 2 : Wp + L + 2]
                r6, r7, r8 = p[2 * Wp : 2 * Wp + L], p[2 * Wp + 1 : 2 * Wp + L + 1], p[2 * Wp + 2 : 2 * Wp + L + 2]
                for q in range(L):
                    t = bias + w0 * r0[q] + w1 * r1[q] + w2 * r2[q] + w3 * r3[q] + w4 * r4[q]
                    t = t + w5 * r5[q] + w6 * r6[q] + w7 * r7[q] + w8 * r8[q]
                    if clip:
                        t = lo if t < lo else (hi if t > hi else t)
                    acc[q] = t
                _rows_out(acc, Wp, out)


if numba is not None:

    @numba.njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy")
    def _dw2d_cl(xt, wt, b, sh, sw, dh, dw, clip, lo, hi, yt):  # pragma: no cover - compiled
        # small maps, channels innermost: xt (N, Hp, Wp, C) zero-padded, wt (kh, kw, C), yt (N, oh, ow, C); each
        # output position sums its taps over a contiguous run of channels (3 x 3 undilated: the nine products
        # of one channel summed in registers, in the order of the planar kernel's taps)
        N, oh, ow, C = yt.shape
        kh, kw = wt.shape[0], wt.shape[1]
        has_b = b.shape[0] == C
        zero = xt.dtype.type(0)
        for n in range(N):
            for oy in range(oh):
                for ox in range(ow):
                    iy, ix = oy * sh, ox * sw
                    acc = yt[n, oy, ox]
                    if kh == 3 and kw == 3 and dh == 1 and dw == 1:
                        r0, r1, r2 = xt[n, iy, ix], xt[n, iy, ix + 1], xt[n, iy, ix + 2]
                        r3, r4, r5 = xt[n, iy + 1, ix], xt[n, iy + 1, ix + 1], xt[n, iy + 1, ix + 2]
                        r6, r7, r8 = xt[n, iy + 2, ix], xt[n, iy + 2, ix + 1], xt[n, iy + 2, ix + 2]
                        w0, w1, w2 = wt[0, 0], wt[0, 1], wt[0, 2]
                        w3, w4, w5 = wt[1, 0], wt[1, 1], wt[1, 2]
                        w6, w7, w8 = wt[2, 0], wt[2, 1], wt[2, 2]
                        for m in range(C):
                            t = b[m] if has_b else zero
                            t += w0[m] * r0[m]
                            t += w1[m] * r1[m]
                            t += w2[m] * r2[m]
                            t += w3[m] * r3[m]
                            t += w4[m] * r4[m]
                            t += w5[m] * r5[m]
                            t += w6[m] * r6[m]
                            t += w7[m] * r7[m]
                            t += w8[m] * r8[m]
                            acc[m] = t
                    elif kh == 5 and kw == 5 and dh == 1 and dw == 1:
                        # a row of five taps per pass, summed in registers, in the general loop's order (below):
                        # the running sum loaded and stored once per row instead of once per tap
                        for ky in range(5):
                            rw = xt[n, iy + ky]
                            r0, r1, r2, r3, r4 = rw[ix], rw[ix + 1], rw[ix + 2], rw[ix + 3], rw[ix + 4]
                            w0, w1, w2, w3, w4 = wt[ky, 0], wt[ky, 1], wt[ky, 2], wt[ky, 3], wt[ky, 4]
                            for m in range(C):
                                if ky == 0:
                                    t = b[m] if has_b else zero
                                else:
                                    t = acc[m]
                                t += w0[m] * r0[m]
                                t += w1[m] * r1[m]
                                t += w2[m] * r2[m]
                                t += w3[m] * r3[m]
                                t += w4[m] * r4[m]
                                acc[m] = t
                    else:
                        for m in range(C):
                            acc[m] = b[m] if has_b else zero
                        for ky in range(kh):
                            for kx in range(kw):
                                row = xt[n, iy + ky * dh, ix + kx * dw]
                                wr = wt[ky, kx]
                                for m in range(C):
                                    acc[m] += wr[m] * row[m]
                    if clip:
                        for m in range(C):
                            t = acc[m]
                            t = lo if t < lo else t
                            acc[m] = hi if t > hi else t


#: maps of at most this many outputs per channel take the channels-last kernel (measured on one AVX-512 core:
#: 7 x 7 x 960 0.07 ms against 0.19 planar, 14 x 14 x 576 0.11 against 0.25; 28 x 28 loses)
SMALL_MAP = 256
#: ... for 3 x 3 stride 1, whose planar kernel sums the taps in registers (_dw3x3s1; 14 x 14 x 384: 0.065 ms against
#: 0.15 channels-last; 7 x 7 x 960: 0.12 against 0.08)
SMALL_MAP_3X3 = 64


def depthwise2d_small(x, wt, b, strides, dilations, begin, out, clip=None) -> np.ndarray:
    """depthwise2d for one channel per group on small maps, channels innermost: x is transposed to (N, H', W', C)
    zero-padded (numpy's transposing copy), each output position sums its taps over a contiguous run of
    channels, and the result is transposed back. ``wt`` (kh, kw, C); the other arguments as depthwise2d."""
    dt = wt.dtype
    N, C, H, W = x.shape
    kh, kw = wt.shape[:2]
    oh, ow = out
    Hp = max(H + begin[0], (oh - 1) * strides[0] + (kh - 1) * dilations[0] + 1)
    Wp = max(W + begin[1], (ow - 1) * strides[1] + (kw - 1) * dilations[1] + 1)
    xt = np.zeros((N, Hp, Wp, C), dt)
    np.copyto(xt[:, begin[0] : begin[0] + H, begin[1] : begin[1] + W], x.transpose(0, 2, 3, 1))
    yt = np.empty((N, oh, ow, C), dt)
    bb = np.zeros((0,), dt) if b is None else b
    on, lo, hi = _clip_args(clip, dt)
    _dw2d_cl(xt, wt, bb, strides[0], strides[1], dilations[0], dilations[1], on, lo, hi, yt)
    y = np.empty((N, C, oh, ow), dt)
    np.copyto(y, yt.transpose(0, 3, 1, 2))
    return y


def depthwise2d(x, w, b, mult, strides, dilations, begin, out, clip=None) -> np.ndarray:
    """y (N, M, *out): y[n, m] = b[m] + sum_{ky, kx} w[m, ky, kx] xpad[n, m // mult, o s + k d] (xpad: x with
    ``begin`` zeros before each axis and as many after as the windows need), then clipped to ``clip=(lo, hi)``
    (either may be None). x (N, C, H, W) C-contiguous, w (M, kh, kw), b (M,) or None, all of one float dtype."""
    dt = w.dtype
    N = x.shape[0]
    M = w.shape[0]
    y = np.empty((N, M) + tuple(out), dt)
    bb = np.zeros((0,), dt) if b is None else b
    if mult == 1 and w.shape[1:] == (3, 3) and tuple(strides) == (1, 1) and tuple(dilations) == (1, 1):
        on, lo, hi = _clip_args(clip, dt)
        _dw3x3s1(x, w, bb, begin[0], begin[1], on, lo, hi, y)
        return y
    on, lo, hi = _clip_args(clip, dt)
    _dw2d(x, w, bb, mult, strides[0], strides[1], dilations[0], dilations[1], begin[0], begin[1], on, lo, hi, y)
    return y


if numba is not None:

    @numba.njit(cache=True, nogil=True)
    def _scatter(plane, pairs, ph, pu, S, sh, sw, pt, pl, Wq):  # pragma: no cover - compiled
        # the plane's values into its phases (phase r at ph[r S:], flat: 1-D slices of a 1-D array keep their
        # unit stride known, which vectorizes); the padding positions are never written (they stay zero).
        # ``pairs`` (sw == 2, float32, W even): the plane as (H, W / 2) uint64, each the bits of an even and the
        # following odd column (little-endian: the even one low); split by truncation and shift, which
        # vectorizes where the two stride-2 loads do not (96@112: 0.18 ms against 0.36)
        H, W = plane.shape
        for iy in range(H):
            py = iy + pt
            prow = (py % sh) * sw
            base = (py // sh) * Wq + prow * S
            src = plane[iy]
            if sw == 1:
                dst = ph[base + pl : base + pl + W]
                for i in range(W):
                    dst[i] = src[i]
                continue
            half, odd = W // 2, W % 2  # sw == 2: the even and odd input columns into their phases
            pa = pl % 2  # the phase of the even input columns
            k0, k1 = base + pa * S + pl // 2, base + (1 - pa) * S + (1 + pl) // 2
            if pairs.shape[0] == H:
                pr = pairs[iy]
                u0, u1 = pu[k0 : k0 + half], pu[k1 : k1 + half]
                for i in range(half):
                    u = pr[i]
                    u0[i] = np.uint32(u & np.uint64(0xFFFFFFFF))
                    u1[i] = np.uint32(u >> np.uint64(32))
                continue
            e0, e1 = ph[k0 : k0 + half + odd], ph[k1 : k1 + half]
            for i in range(half):
                e0[i] = src[2 * i]
                e1[i] = src[2 * i + 1]
            if odd:
                e0[half] = src[W - 1]

    @numba.njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy")
    def _dw_taps(x, xpairs, w, b, sh, sw, pt, pl, clip, lo, hi, y):  # pragma: no cover - compiled
        # y[n, c] = b[c] + sum over (ky, kx) of w[c, ky, kx] xpad[n, c, oy sh + ky, ox sw + kx] (kx < 3 or 5), the
        # terms in _dw2d's tap order (row by row), then clipped (NaN stays NaN)
        N, C, H, W = x.shape
        kh, kw = w.shape[1], w.shape[2]
        oh, ow = y.shape[2], y.shape[3]
        Hq = max((H - 1 + pt) // sh + 1, oh + (kh - 1) // sh + 1)
        Wq = max((W - 1 + pl) // sw + 1, ow + (kw - 1) // sw)
        # the runs cover L = oh Wq rounded up to whole vector iterations (32 values): loops of a few rows otherwise
        # run mostly in their scalar remainder (the values past oh Wq are junk, never copied to Y; the buffer has
        # that much slack at its end)
        L = -(-(oh * Wq) // 32) * 32
        S = Hq * Wq
        ph = np.zeros(sh * sw * S + L - oh * Wq + 1, x.dtype)  # (+1: a uint32 view of float64 is never empty)
        pu = ph.view(np.uint32)
        acc = np.empty(L, x.dtype)
        has_b = b.shape[0] == C
        for n in range(N):
            for c in range(C):
                _scatter(x[n, c], xpairs[n, c], ph, pu, S, sh, sw, pt, pl, Wq)
                bias = b[c] if has_b else x.dtype.type(0)
                wc = w[c]
                if kh == 3 and kw == 3:
                    # the nine runs: tap (ky, kx) reads phase (ky % sh, kx % sw) from (ky // sh) Wq + kx // sw
                    a1, b1, b2 = (1 % sw) * S + 1 // sw, 2 // sw, (1 % sh) * sw * S + (1 // sh) * Wq
                    d2 = (2 // sh) * Wq
                    w0, w1, w2 = wc[0, 0], wc[0, 1], wc[0, 2]
                    w3, w4, w5 = wc[1, 0], wc[1, 1], wc[1, 2]
                    w6, w7, w8 = wc[2, 0], wc[2, 1], wc[2, 2]
                    out = y[n, c]
                    if ow < _WIDE_ROW:  # narrow rows: one run over the plane at width Wq, copied to Y below
                        o00, o01, o02 = ph[0:L], ph[a1 : a1 + L], ph[b1 : b1 + L]
                        o10, o11, o12 = ph[b2 : b2 + L], ph[b2 + a1 : b2 + a1 + L], ph[b2 + b1 : b2 + b1 + L]
                        o20, o21, o22 = ph[d2 : d2 + L], ph[d2 + a1 : d2 + a1 + L], ph[d2 + b1 : d2 + b1 + L]
                        for q in range(L):
                            t = bias + w0 * o00[q] + w1 * o01[q] + w2 * o02[q] + w3 * o10[q] + w4 * o11[q]
                            t = t + w5 * o12[q] + w6 * o20[q] + w7 * o21[q] + w8 * o22[q]
                            if clip:
                                t = lo if t < lo else (hi if t > hi else t)
                            acc[q] = t
                        _rows_out(acc, Wq, out)
                        continue
                    for oy in range(oh):
                        o = oy * Wq
                        o00, o01, o02 = ph[o : o + ow], ph[o + a1 : o + a1 + ow], ph[o + b1 : o + b1 + ow]
                        o10, o11 = ph[o + b2 : o + b2 + ow], ph[o + b2 + a1 : o + b2 + a1 + ow]
                        o12 = ph[o + b2 + b1 : o + b2 + b1 + ow]
                        o20, o21 = ph[o + d2 : o + d2 + ow], ph[o + d2 + a1 : o + d2 + a1 + ow]
                        o22 = ph[o + d2 + b1 : o + d2 + b1 + ow]
                        orow = out[oy]
                        for q in range(ow):
                            t = bias + w0 * o00[q] + w1 * o01[q] + w2 * o02[q] + w3 * o10[q] + w4 * o11[q]
                            t = t + w5 * o12[q] + w6 * o20[q] + w7 * o21[q] + w8 * o22[q]
                            if clip:
                                t = lo if t < lo else (hi if t > hi else t)
                            orow[q] = t
                    continue
                else:  # rows of kw (3 or 5) taps, one row per pass over a chunk
                    for q0 in range(0, L, _CHUNK):
                        n_ = min(L, q0 + _CHUNK) - q0
                        a = acc[q0 : q0 + n_]
                        for q in range(n_):
                            a[q] = bias
                        for ky in range(kh):
                            d = (ky % sh) * sw * S + (ky // sh) * Wq + q0
                            e1, e2 = d + (1 % sw) * S + 1 // sw, d + 2 // sw
                            p0, p1, p2 = ph[d : d + n_], ph[e1 : e1 + n_], ph[e2 : e2 + n_]
                            v0, v1, v2 = wc[ky, 0], wc[ky, 1], wc[ky, 2]
                            if kw == 3:
                                for q in range(n_):
                                    a[q] = a[q] + v0 * p0[q] + v1 * p1[q] + v2 * p2[q]
                            else:
                                e3, e4 = d + (3 % sw) * S + 3 // sw, d + 4 // sw
                                p3, p4 = ph[e3 : e3 + n_], ph[e4 : e4 + n_]
                                v3, v4 = wc[ky, 3], wc[ky, 4]
                                for q in range(n_):
                                    a[q] = a[q] + v0 * p0[q] + v1 * p1[q] + v2 * p2[q] + v3 * p3[q] + v4 * p4[q]
                        if clip:
                            for q in range(n_):
                                t = a[q]
                                a[q] = lo if t < lo else (hi if t > hi else t)
                _rows_out(acc, Wq, y[n, c])


def applies(mult: int, kernel, strides, dilations) -> bool:
    """Whether :func:`depthwise_taps` computes this depthwise layer."""
    return (
        mult == 1
        and len(kernel) == 2
        and kernel[1] in (3, 5)
        and kernel[0] <= 7
        and tuple(dilations) == (1, 1)
        and all(s in (1, 2) for s in strides)
    )


def depthwise_taps(x, w, b, strides, begin, out, clip_args) -> np.ndarray:
    """y (N, C, *out) of the depthwise convolution of x (N, C, H, W) C-contiguous by w (C, kh, kw) (see
    :func:`applies`), + b (C,) or None, clipped per ``clip_args`` (ops/_fast.py ``_clip_args``)."""
    dt = w.dtype
    y = np.empty((x.shape[0], w.shape[0]) + tuple(out), dt)
    bb = np.zeros((0,), dt) if b is None else b
    N, C, H, W = x.shape
    if strides[1] == 2 and dt == np.float32 and W % 2 == 0 and sys.byteorder == "little":
        xpairs = x.view(np.uint64)
    else:
        xpairs = np.zeros((N, C, 0, 0), np.uint64)
    clip, lo, hi = clip_args
    _dw_taps(x, xpairs, w, bb, strides[0], strides[1], begin[0], begin[1], clip, lo, hi, y)
    return y
