"""Compiled depthwise kernels (numba, the optional ``fast`` extra) beyond ops/_fast.py's: one channel per group,
undilated, 3 or 5 taps per row, strides 1 or 2 (MobileNetV2's and EfficientNet's stride-2 3 x 3 layers, the 5 x 5
layers of EfficientNet and MobileNetV3). Reference: the NumPy path of ops/depthwise.py (tests/ops/test_fast.py).

Each plane is scattered once into its zero-padded stride phases (phase (a, c) holds padded rows a + i sh and
columns c + j sw, width Wq), so that every tap reads ONE contiguous run of a phase for all outputs (computed at the
phase width, the columns past ow dropped in the copy to Y). Then, where ops/_fast.py's ``_dw2d`` makes one
multiply-add pass over an accumulator per tap, these sum the taps in registers: 3 x 3 all nine in one
expression per output, 5-tap rows one row (five terms) per pass over a chunk of the accumulator that stays in
L1. MobileNetV2's 3 x 3 96@112 stride 2 and EfficientNet's 5 x 5 240@28 stride 2: see ``depthwise_taps``.
"""

from __future__ import annotations

import sys

import numpy as np

from ._fast import numba
from ._fast_conv import PACKED_OK

#: 5-tap rows with at most this many outputs per channel take ops/_fast.py's channels-last kernel instead (one AVX-512
#: core: 576@7 0.078 ms against 0.155 here; 240@14 0.116 here against 0.144, 480@14 0.227 against 0.287)
SMALL_MAP_5 = 64
_WIDE_ROW = 48  # 3 x 3 output rows from this width on go straight into Y (as ops/_fast.py's _dw3x3s1)
_VL = 16  # float32 lanes of an AVX-512 vector
_CHUNK = 2048  # accumulator values per round of the 5-tap rows (8 KiB with float32: in L1 with its runs)

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

    @numba.njit(inline="always")
    def _rows_out(acc, Wq, out):  # pragma: no cover - compiled
        # the plane's rows, computed at width Wq, into Y (the junk columns dropped)
        oh, ow = out.shape
        for oy in range(oh):
            rr = acc[oy * Wq : oy * Wq + ow]
            orow = out[oy]
            for ox in range(ow):
                orow[ox] = rr[ox]

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


# --------------------------------------------------------------------------- register tiles (AVX-512)

#: output rows per register tile of :func:`depthwise_tiles` (measured on one AVX-512 core, 3 x 3 stride 1 14 x 14:
#: 8 rows 94 cycles a tile, 4 rows 54 (of half the work); stride 2: 4 rows as fast as 8 at half the registers)
_ROWS_S1, _ROWS_S2 = 8, 4
#: a following activation (ops/_fast_epilogue.py's) runs over spans of this many outputs (planes just computed)
_ACT_SPAN = 2048

if numba is not None and PACKED_OK:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._fast_epilogue import _act_chunk

    def _make_tile(k: int, s: int, R: int, rowcheck: bool, colmask: bool):
        """The intrinsic of one register tile: R output rows x 16 output columns of a k x k depthwise convolution
        at stride s, read straight from the (unpadded) input plane."""

        @intrinsic
        def tile(typingctx, x, xoff, W, iy0, H, zr, zoff, cm, w, woff, bias, clip, lo, hi, y, yoff, ldy, rows, lanes):
            """y[yoff + i ldy + l] = clip(bias + sum_{ky, kx} w[woff + k ky + kx] X(iy0 + i s + ky, c(l, kx))) for
            i < rows, l < lanes, in the order of (ky, kx): X(r, c) = x[xoff + r W + c] inside the plane (rows 0 <=
            r < H, checked when ``rowcheck``; the columns by the lane masks cm when ``colmask``), zero outside it.
            c(l, kx) = l + kx at stride 1; at stride 2, 2 l + kx (the even and odd columns of two vectors, shifted
            by kx // 2 lanes with a third vector)."""
            sig = types.void(
                x, types.intp, types.intp, types.intp, types.intp, zr, types.intp, cm, w, types.intp, types.float32,
                types.boolean, types.float32, types.float32, y, types.intp, types.intp, types.intp, types.intp,
            )  # fmt: skip

            def codegen(context, builder, signature, args):
                (x_, xoff_, W_, iy0_, H_, zr_, zoff_, cm_, w_, woff_, bias_, clip_, lo_, hi_, y_, yoff_, ldy_,
                 rows_, lanes_) = args  # fmt: skip
                f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
                vec = ir.VectorType(f32, _VL)
                vptr = vec.as_pointer()
                mvec = ir.VectorType(ir.IntType(1), _VL)
                ivec = ir.VectorType(i32, _VL)
                xdata = context.make_array(signature.args[0])(context, builder, x_).data
                zdata = context.make_array(signature.args[5])(context, builder, zr_).data
                cdata = context.make_array(signature.args[7])(context, builder, cm_).data
                wdata = context.make_array(signature.args[8])(context, builder, w_).data
                ydata = context.make_array(signature.args[14])(context, builder, y_).data
                fma = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(vec, [vec, vec, vec]), "llvm.fma.v16f32"
                )
                mload = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(vec, [vptr, i32, mvec, vec]), "llvm.masked.load.v16f32.p0v16f32"
                )
                mstore = cgutils.get_or_insert_function(
                    builder.module,
                    ir.FunctionType(ir.VoidType(), [vec, vptr, i32, mvec]),
                    "llvm.masked.store.v16f32.p0v16f32",
                )
                undef, zero = ir.Constant(vec, ir.Undefined), ir.Constant(vec, None)
                align = ir.Constant(i32, 4)
                none = ir.Constant(mvec, [0] * _VL)

                def c64(v):
                    return ir.Constant(i64, v)

                def splat(v):
                    one = builder.insert_element(undef, v, ir.Constant(i32, 0))
                    return builder.shuffle_vector(one, undef, ir.Constant(ivec, [0] * _VL))

                def as_mask(bits):
                    return builder.bitcast(builder.trunc(bits, ir.IntType(_VL)), mvec)

                wbase = builder.gep(wdata, [woff_])
                wv = [
                    [splat(builder.load(builder.gep(wbase, [c64(ky * k + kx)]))) for kx in range(k)] for ky in range(k)
                ]
                acc = [splat(bias_) for _ in range(R)]
                xbase = builder.gep(xdata, [xoff_])
                zbase = builder.gep(zdata, [zoff_])  # a row of zeros at the same columns: the rows outside the plane
                nload = k if s == 1 else 3
                masks = [as_mask(builder.load(builder.gep(cdata, [c64(j)]))) if colmask else None for j in range(nload)]
                ev = ir.Constant(ivec, [2 * i for i in range(_VL)])
                od = ir.Constant(ivec, [2 * i + 1 for i in range(_VL)])
                for r in range((R - 1) * s + k):
                    users = [(i, r - i * s) for i in range(R) if 0 <= r - i * s < k]
                    iy = builder.add(iy0_, c64(r))
                    rowp = builder.gep(xbase, [builder.mul(iy, W_)])
                    if rowcheck:
                        valid = builder.and_(builder.icmp_signed(">=", iy, c64(0)), builder.icmp_signed("<", iy, H_))
                        rowp = builder.select(valid, rowp, zbase)
                    loads = []
                    for j in range(nload):
                        p = builder.bitcast(builder.gep(rowp, [c64(j if s == 1 else j * _VL)]), vptr)
                        m = masks[j]
                        if m is None:
                            loads.append(builder.load(p, align=4))
                        else:
                            loads.append(builder.call(mload, [p, align, m, zero]))
                    if s == 1:
                        taps = loads
                    else:  # the even and odd columns of A B, shifted by kx // 2 lanes with C's
                        a, b, c = loads
                        halves = (builder.shuffle_vector(a, b, ev), builder.shuffle_vector(a, b, od))
                        taps = []
                        for kx in range(k):
                            par, sh = kx % 2, kx // 2
                            if sh == 0:
                                taps.append(halves[par])
                                continue
                            idx = [i + sh if i + sh < _VL else _VL + 2 * (i + sh - _VL) + par for i in range(_VL)]
                            taps.append(builder.shuffle_vector(halves[par], c, ir.Constant(ivec, idx)))
                    for i, ky in users:
                        for kx in range(k):
                            acc[i] = builder.call(fma, [wv[ky][kx], taps[kx], acc[i]])
                on = builder.icmp_unsigned("!=", clip_, ir.Constant(clip_.type, 0))
                lov, hiv = splat(lo_), splat(hi_)
                one = c64(1)
                lm = as_mask(builder.sub(builder.shl(one, lanes_), one))
                ybase = builder.gep(ydata, [yoff_])
                for i in range(R):
                    t = acc[i]
                    u = builder.select(builder.fcmp_ordered("<", t, lov), lov, t)  # NaN stays NaN
                    u = builder.select(builder.fcmp_ordered(">", u, hiv), hiv, u)
                    t = builder.select(on, u, t)
                    m = builder.select(builder.icmp_signed(">", rows_, c64(i)), lm, none)
                    p = builder.bitcast(builder.gep(ybase, [builder.mul(c64(i), ldy_)]), vptr)
                    builder.call(mstore, [t, p, align, m])
                return context.get_dummy_value()

            return sig, codegen

        return tile

    # per (k, stride), three tiles: with both checks (rows outside the plane read a row of zeros, the columns through
    # lane masks), with the column masks only, and wholly inside the plane (plain loads). Measured, one AVX-512 core:
    # 5 x 5 672@14 0.10 ms against 0.13 with both checks everywhere; 3 x 3 144@56 0.14 against 0.15
    def _tiles(k, s, R):
        return _make_tile(k, s, R, True, True), _make_tile(k, s, R, False, True), _make_tile(k, s, R, False, False)

    _T3S1, _T3S1_COL, _T3S1_IN = _tiles(3, 1, _ROWS_S1)
    _T3S2, _T3S2_COL, _T3S2_IN = _tiles(3, 2, _ROWS_S2)
    _T5S1, _T5S1_COL, _T5S1_IN = _tiles(5, 1, _ROWS_S1)
    _T5S2, _T5S2_COL, _T5S2_IN = _tiles(5, 2, _ROWS_S2)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _dw_tiles(x, w, b, s, pt, pl, clip, lo, hi, act, ap, aq, y):  # pragma: no cover - compiled
        # every plane by tiles of R rows x 16 columns, k x k (3 or 5, from w) at stride s (1 or 2); the tiles
        # wholly inside the plane skip the checks
        N, C, H, W = x.shape
        k = w.shape[1]
        oh, ow = y.shape[2], y.shape[3]
        R = _ROWS_S1 if s == 1 else _ROWS_S2
        has_b = b.shape[0] == C
        xf, wf, yf = x.reshape(-1), w.reshape(-1), y.reshape(-1)
        nq = (ow + _VL - 1) // _VL
        nl = k if s == 1 else 3  # the loads per input row (stride 2: three vectors, split into even and odd columns)
        span = _VL + k - 1 if s == 1 else 3 * _VL  # the input columns they cover
        cms = np.zeros((nq, nl), np.int64)
        inner = np.zeros(nq, np.bool_)
        for qi in range(nq):  # per column of tiles: the lanes of each load whose input column is inside [0, W)
            c0 = qi * _VL * s - pl
            for j in range(nl):
                first = c0 + (j if s == 1 else j * _VL)
                a, e = min(max(-first, 0), _VL), min(max(W - first, 0), _VL)
                cms[qi, j] = ((1 << e) - 1) ^ ((1 << a) - 1) if e > a else 0
            inner[qi] = c0 >= 0 and c0 + span <= W
        zr = np.zeros(W + 6 * _VL, np.float32)  # the rows outside the plane (from column -2 _VL)
        ea, ea2, kb = np.empty(_ACT_SPAN, np.float32), np.empty(_ACT_SPAN, np.float32), np.empty(_ACT_SPAN, np.int32)
        pend = 0  # the outputs from here on wait for the activation
        for n in range(N):
            for c in range(C):
                bias = b[c] if has_b else np.float32(0)
                xo, yo, wo = (n * C + c) * H * W, (n * C + c) * oh * ow, c * k * k
                for oy0 in range(0, oh, R):
                    rows = min(R, oh - oy0)
                    iy0 = oy0 * s - pt
                    rows_in = iy0 >= 0 and iy0 + (R - 1) * s + k <= H
                    for qi in range(nq):
                        q0 = qi * _VL
                        lanes = min(_VL, ow - q0)
                        xq, zq, yq = xo + q0 * s - pl, 2 * _VL + q0 * s - pl, yo + oy0 * ow + q0
                        cm = cms[qi]
                        if rows_in and not inner[qi]:
                            if k == 3 and s == 1:
                                _T3S1_COL(
                                    xf, xq, W, iy0, H, zr, zq, cm, wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes
                                )
                            elif k == 3:
                                _T3S2_COL(
                                    xf, xq, W, iy0, H, zr, zq, cm, wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes
                                )
                            elif s == 1:
                                _T5S1_COL(
                                    xf, xq, W, iy0, H, zr, zq, cm, wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes
                                )
                            else:
                                _T5S2_COL(
                                    xf, xq, W, iy0, H, zr, zq, cm, wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes
                                )
                        elif rows_in:
                            if k == 3 and s == 1:
                                _T3S1_IN(
                                    xf, xq, W, iy0, H, zr, zq, cm, wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes
                                )
                            elif k == 3:
                                _T3S2_IN(
                                    xf, xq, W, iy0, H, zr, zq, cm, wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes
                                )
                            elif s == 1:
                                _T5S1_IN(
                                    xf, xq, W, iy0, H, zr, zq, cm, wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes
                                )
                            else:
                                _T5S2_IN(
                                    xf, xq, W, iy0, H, zr, zq, cm, wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes
                                )
                        elif k == 3 and s == 1:
                            _T3S1(xf, xq, W, iy0, H, zr, zq, cm, wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes)
                        elif k == 3:
                            _T3S2(xf, xq, W, iy0, H, zr, zq, cm, wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes)
                        elif s == 1:
                            _T5S1(xf, xq, W, iy0, H, zr, zq, cm, wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes)
                        else:
                            _T5S2(xf, xq, W, iy0, H, zr, zq, cm, wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes)
                if act != 0:  # the activation over the last planes while they are in cache, _ACT_SPAN values a call
                    end = yo + oh * ow
                    if end - pend >= _ACT_SPAN or (n == N - 1 and c == C - 1):
                        for q in range(pend, end, _ACT_SPAN):
                            _act_chunk(yf[q : min(end, q + _ACT_SPAN)], act, ap, aq, ea, kb, ea2)
                        pend = end


def tiles_apply(dtype, mult: int, kernel, strides, dilations) -> bool:
    """Whether :func:`depthwise_tiles` computes this depthwise layer (float32, AVX-512)."""
    return (
        PACKED_OK
        and dtype == np.float32
        and mult == 1
        and tuple(kernel) in ((3, 3), (5, 5))
        and tuple(strides) in ((1, 1), (2, 2))
        and tuple(dilations) == (1, 1)
    )


def depthwise_tiles(x, w, b, strides, begin, out, clip_args, act=(0, 0.0, 0.0)) -> np.ndarray:
    """y (N, C, *out) float32 of the depthwise convolution of x (N, C, H, W) C-contiguous float32 by w (C, k, k)
    (see :func:`tiles_apply`), + b (C,) or None, clipped per ``clip_args``, then ``act`` ((code, p, q) of
    ops/_fast_epilogue.py, what its epilogue would apply): register tiles of output rows x 16 columns read the input
    in place (masked loads at the borders give the padding's zeros), every output summing its taps in the order of
    (ky, kx) as the kernels above."""
    y = np.empty((x.shape[0], w.shape[0]) + tuple(out), np.float32)
    bb = np.zeros((0,), np.float32) if b is None else b
    clip, lo, hi = clip_args
    a, ap, aq = int(act[0]), np.float32(act[1]), np.float32(act[2])
    _dw_tiles(x, w, bb, strides[0], begin[0], begin[1], clip, np.float32(lo), np.float32(hi), a, ap, aq, y)
    return y
