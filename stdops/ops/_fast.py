"""Compiled kernels (numba, the optional ``fast`` extra) for the loops NumPy cannot run in one memory pass.

Each function here has a NumPy reference in the module that calls it and is differential-tested against
that reference (tests/ops/test_fast.py); the callers use it only when :func:`enabled` and fall back to
NumPy otherwise. What each one gains (benchmarks/bench_conv.py, ``--no-fast`` for the NumPy paths; one
AVX-512 core, fastest of alternating rounds):

- :func:`depthwise2d`: depthwise 2-D convolution (any kernel, stride, dilation, channel multiplier) with its
  bias and a following clip, one plane at a time in cache: the plane is scattered into its zero-padded
  stride phases, each tap is one long contiguous multiply-add into the plane's accumulator, and the
  accumulator is clipped into Y. One pass over X and one over Y; the NumPy path gathers the taps into
  columns first (2-4 passes over 2-9x the input). MobileNetV2's 3x3 144@56: 0.47 ms against 1.8 ms;
  3 x 3 stride 1 takes ``_dw3x3s1`` (the nine taps in one expression per output): 0.24 ms.
- :func:`winograd`: the input and output transforms of F(4x4, 3x3), each a 6-from-6 linear map per tile
  with the coefficients in registers over the 4 x 4 phases of a plane, bias and clip in the output one; the
  NumPy transforms (a gather copy and a Kronecker GEMM each way) cost 70% of the layer. 3x3 64@56:
  0.90 ms against 1.41 ms (onnxruntime 1.16 ms); 128@28: 0.85 against 0.97 (onnxruntime 1.10).
(The drift-diffusion walk, ``ddm_walk``, is in ops/_fast_ddm.py.)

Strict IEEE arithmetic except fused multiply-add (numba's ``contract``): each output sums its terms in a
fixed order, padding included as zeros (0 * inf is NaN, as the definition says). The first call of each
kernel compiles it (seconds; cached on disk by numba afterwards). ``STDOPS_NO_FAST=1`` in the environment
turns the compiled path off.
"""

from __future__ import annotations

import os

import numpy as np

from ._blas import matmul

try:  # the optional extra
    import numba
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None

_enabled = numba is not None and os.environ.get("STDOPS_NO_FAST", "") in ("", "0")
_DW_CHUNK = 4096  # accumulator values per pass of the depthwise taps (16 KiB: stays in L1 with its runs)
_DW_WIDE_ROW = 48  # 3 x 3 stride-1 depthwise rows from this width on go straight into Y (measured: 56 and 112 gain)


def enabled() -> bool:
    """Whether the compiled kernels are in use (numba importable, not turned off)."""
    return _enabled


def set_enabled(on: bool) -> bool:
    """Turn the compiled path on or off (tests compare both); returns the previous state."""
    global _enabled
    prev = _enabled
    _enabled = bool(on) and numba is not None
    return prev


if numba is not None:

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
                    out = y[n, m]
                    for oy in range(oh):
                        r = acc[oy * Wq : oy * Wq + ow]
                        orow = out[oy]
                        for ox in range(ow):
                            orow[ox] = r[ox]

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
                for oy in range(oh):
                    r = acc[oy * Wp : oy * Wp + ow]
                    orow = out[oy]
                    for ox in range(ow):
                        orow[ox] = r[ox]

    @numba.njit(inline="always")
    def _lin6(c, k, d0, d1, d2, d3, d4, d5):  # pragma: no cover - compiled
        return c[k] * d0 + c[k + 1] * d1 + c[k + 2] * d2 + c[k + 3] * d3 + c[k + 4] * d4 + c[k + 5] * d5

    @numba.njit(cache=True, nogil=True, fastmath={"contract"})
    def _wino4_in(x, bt, pt, pl, TH, TWp, V):  # pragma: no cover - compiled
        # F(4x4, 3x3) input transform: V[6 a + b, c, i L + q] = (B^T d B)[a, b] of tile q = th TWp + tw of
        # plane (i, c) (tw = TWp - 1: a junk column). Per plane: the zero-padded plane split into 4 x 4
        # phases (tiles start every 4 rows and columns), then the row and the column stage, each 6 outputs
        # from 6 inputs per tile with the coefficients (a tuple) in registers and every loop contiguous.
        N, C, H, W = x.shape
        THs = TH + 2
        L = TH * TWp
        S = np.zeros((4, 4, THs * TWp), x.dtype)
        R = np.zeros((6, 4, L + TWp), x.dtype)
        for i in range(N):
            base = i * L
            for c in range(C):
                plane = x[i, c]
                for iy in range(H):
                    Y = iy + pt
                    ty = Y // 4
                    if ty >= THs:
                        break
                    src = plane[iy]
                    for pc in range(4):  # input columns ix0, ix0 + 4, ... land in phase column pc
                        ix0 = (pc - pl) % 4
                        tx0 = (ix0 + pl) // 4
                        cnt = min((W - ix0 + 3) // 4, TWp - tx0)
                        dst = S[Y % 4, pc, ty * TWp + tx0 : ty * TWp + tx0 + max(cnt, 0)]
                        for k in range(dst.shape[0]):
                            dst[k] = src[ix0 + 4 * k]
                for pc in range(4):  # rows: tile row r of tile th is phase row r % 4, r // 4 rows further
                    s0, s1, s2, s3 = S[0, pc, :L], S[1, pc, :L], S[2, pc, :L], S[3, pc, :L]
                    s4, s5 = S[0, pc, TWp : TWp + L], S[1, pc, TWp : TWp + L]
                    r0, r1, r2, r3, r4, r5 = R[0, pc], R[1, pc], R[2, pc], R[3, pc], R[4, pc], R[5, pc]
                    for q in range(L):
                        d0, d1, d2, d3, d4, d5 = s0[q], s1[q], s2[q], s3[q], s4[q], s5[q]
                        r0[q] = _lin6(bt, 0, d0, d1, d2, d3, d4, d5)
                        r1[q] = _lin6(bt, 6, d0, d1, d2, d3, d4, d5)
                        r2[q] = _lin6(bt, 12, d0, d1, d2, d3, d4, d5)
                        r3[q] = _lin6(bt, 18, d0, d1, d2, d3, d4, d5)
                        r4[q] = _lin6(bt, 24, d0, d1, d2, d3, d4, d5)
                        r5[q] = _lin6(bt, 30, d0, d1, d2, d3, d4, d5)
                for a in range(6):  # columns: tile column s is phase column s % 4, s // 4 further
                    e0, e1, e2, e3 = R[a, 0, :L], R[a, 1, :L], R[a, 2, :L], R[a, 3, :L]
                    e4, e5 = R[a, 0, 1 : 1 + L], R[a, 1, 1 : 1 + L]
                    v0, v1, v2 = (
                        V[6 * a, c, base : base + L],
                        V[6 * a + 1, c, base : base + L],
                        V[6 * a + 2, c, base : base + L],
                    )
                    v3, v4, v5 = (
                        V[6 * a + 3, c, base : base + L],
                        V[6 * a + 4, c, base : base + L],
                        V[6 * a + 5, c, base : base + L],
                    )
                    for q in range(L):
                        d0, d1, d2, d3, d4, d5 = e0[q], e1[q], e2[q], e3[q], e4[q], e5[q]
                        v0[q] = _lin6(bt, 0, d0, d1, d2, d3, d4, d5)
                        v1[q] = _lin6(bt, 6, d0, d1, d2, d3, d4, d5)
                        v2[q] = _lin6(bt, 12, d0, d1, d2, d3, d4, d5)
                        v3[q] = _lin6(bt, 18, d0, d1, d2, d3, d4, d5)
                        v4[q] = _lin6(bt, 24, d0, d1, d2, d3, d4, d5)
                        v5[q] = _lin6(bt, 30, d0, d1, d2, d3, d4, d5)

    @numba.njit(cache=True, nogil=True, fastmath={"contract"})
    def _wino4_out(P, at, TH, TW, TWp, b, clip, lo, hi, y):  # pragma: no cover - compiled
        # F(4x4, 3x3) output transform: y[i, o, 4 th + r, 4 tw + s] = (A^T p A)[r, s] + b[o] (clipped) of
        # the 6 x 6 products p = P[:, o, i L + th TWp + tw]: the row stage (4 from 6) into Q, the column
        # stage (4 from 6) straight into Y's rows (columns past the output dropped)
        N, M, oh, ow = y.shape
        L = TH * TWp
        has_b = b.shape[0] == M
        Q = np.empty((4, 6, L), P.dtype)
        Z = np.empty((4, L), P.dtype)
        for i in range(N):
            base = i * L
            for o in range(M):
                for bb in range(6):
                    p0, p1, p2 = (
                        P[bb, o, base : base + L],
                        P[6 + bb, o, base : base + L],
                        P[12 + bb, o, base : base + L],
                    )
                    p3, p4, p5 = (
                        P[18 + bb, o, base : base + L],
                        P[24 + bb, o, base : base + L],
                        P[30 + bb, o, base : base + L],
                    )
                    q0, q1, q2, q3 = Q[0, bb], Q[1, bb], Q[2, bb], Q[3, bb]
                    for q in range(L):
                        d0, d1, d2, d3, d4, d5 = p0[q], p1[q], p2[q], p3[q], p4[q], p5[q]
                        q0[q] = _lin6(at, 0, d0, d1, d2, d3, d4, d5)
                        q1[q] = _lin6(at, 6, d0, d1, d2, d3, d4, d5)
                        q2[q] = _lin6(at, 12, d0, d1, d2, d3, d4, d5)
                        q3[q] = _lin6(at, 18, d0, d1, d2, d3, d4, d5)
                bias = b[o] if has_b else P.dtype.type(0)
                out = y[i, o]
                for r in range(4):
                    g0, g1, g2, g3, g4, g5 = Q[r, 0], Q[r, 1], Q[r, 2], Q[r, 3], Q[r, 4], Q[r, 5]
                    z0, z1, z2, z3 = Z[0], Z[1], Z[2], Z[3]
                    for q in range(L):
                        d0, d1, d2, d3, d4, d5 = g0[q], g1[q], g2[q], g3[q], g4[q], g5[q]
                        z0[q] = bias + _lin6(at, 0, d0, d1, d2, d3, d4, d5)
                        z1[q] = bias + _lin6(at, 6, d0, d1, d2, d3, d4, d5)
                        z2[q] = bias + _lin6(at, 12, d0, d1, d2, d3, d4, d5)
                        z3[q] = bias + _lin6(at, 18, d0, d1, d2, d3, d4, d5)
                    if clip:
                        for s_ in range(4):
                            zs = Z[s_]
                            for q in range(L):
                                v = zs[q]
                                zs[q] = lo if v < lo else (hi if v > hi else v)
                    for th in range(TH):
                        oy = 4 * th + r
                        if oy >= oh:
                            break
                        orow = out[oy]
                        q0 = th * TWp
                        full = min(TW, ow // 4)
                        for tw in range(full):  # whole tiles: 4 consecutive outputs each
                            orow[4 * tw] = z0[q0 + tw]
                            orow[4 * tw + 1] = z1[q0 + tw]
                            orow[4 * tw + 2] = z2[q0 + tw]
                            orow[4 * tw + 3] = z3[q0 + tw]
                        for ox in range(4 * full, ow):  # the last, partial tile
                            orow[ox] = Z[ox % 4, q0 + ox // 4]


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
    _dw2d_cl(xt, wt, bb, strides[0], strides[1], dilations[0], dilations[1], *_clip_args(clip, dt), yt)
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
        _dw3x3s1(x, w, bb, begin[0], begin[1], *_clip_args(clip, dt), y)
        return y
    _dw2d(
        x,
        w,
        bb,
        mult,
        strides[0],
        strides[1],
        dilations[0],
        dilations[1],
        begin[0],
        begin[1],
        *_clip_args(clip, dt),
        y,
    )
    return y


def _clip_args(clip, dt):
    lo = -np.inf if clip is None or clip[0] is None else clip[0]
    hi = np.inf if clip is None or clip[1] is None else clip[1]
    return clip is not None, dt.type(lo), dt.type(hi)


def winograd(tile, x, U, b, begin, out, clip=None) -> np.ndarray:
    """The 3x3 stride-1 convolution of x (N, C, H, W) by Winograd F(4x4, 3x3) (``tile``: winograd.TILES[4])
    with the transformed weights U (36, M, C), + b (M,) or None, clipped to ``clip``: the input and output
    transforms compiled (one pass over X, one over Y), the 36 products one batched GEMM. Tiles are computed
    one column wider than the map (a junk column per tile row keeps every transform loop contiguous).
    Reference: winograd.Tile.conv (NumPy)."""
    dt = U.dtype
    N, C = x.shape[:2]
    M = U.shape[1]
    TH, TW = -(-out[0] // 4), -(-out[1] // 4)
    TWp = TW + 1
    L = TH * TWp
    V = np.empty((36, C, N * L), dt)
    bt = tuple(dt.type(v) for v in tile.bt.reshape(-1))
    at = tuple(dt.type(v) for v in tile.at.reshape(-1))
    _wino4_in(np.ascontiguousarray(x, dtype=dt), bt, begin[0], begin[1], TH, TWp, V)
    P = matmul(U, V)  # (36, M, N L)
    y = np.empty((N, M) + tuple(out), dt)
    _wino4_out(P, at, TH, TW, TWp, np.zeros((0,), dt) if b is None else b, *_clip_args(clip, dt), y)
    return y
