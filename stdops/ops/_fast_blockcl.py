"""Compiled inverted-residual block in channels-last order (numba + LLVM code, AVX-512) for small maps: the 1 x 1
expansion, the 3 x 3 depthwise convolution (stride 1 or 2) and the 1 x 1 projection of MobileNetV2's blocks at 28 x 28
and below, where the planar kernels (ops/_fast_blocks.py) put a 14- or 7-wide row in 16 lanes and so compute the
depthwise at half its rate or less (the depthwise alone, 384 @14: 37 us against 19 here; 576 @14: 52 against 27).

Per sample: the input goes channels-last, xt[q, c] (16 channels of 16 positions a step: winochan's in-register
transpose); then per chunk of 64 expanded channels:

- the expansion, P1[q, e] = sum_c xt[q, c] W1[c, e]: ops/_fast_rowtiles.py's register tiles with the positions as rows
  (each sum over c in order from zero), then + b1, clipped, into a zero-bordered chunk buffer (the depthwise's padding);
- the depthwise, a register tile of up to 14 outputs of a row x 16 channels: each input vector loaded once and used
  by the (up to 3) outputs it reaches, each output summing from its bias the taps in the order (ky, kx) (the planar
  tiles' order: ops/_fast_dwtiles.py), clipped, into D[q, e];

then the projection, P3[q, m] = sum_e D[q, e] W3[e, m] (the row tiles again), + b3, clipped, transposed in registers
(16 positions x 16 channels) and stored into z (N, M, oh, ow) with the residual added.

The expansion and the projection sum in order over their inputs from zero and add the bias last; the steps' kernels
order their sums otherwise, so the block's values differ from theirs by float32 rounding (tests/ops/test_fast_blockcl.py
against the NumPy steps and the planar block). The same bits at any thread count: at two, a batch goes in two parts
over its samples and one sample in two parts over its output rows (each expanding the input rows its outputs read).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from . import _blas
from ._blas import run_parts
from ._fast import enabled, numba
from ._fast_conv import PACKED_OK

_VL = 16
#: expanded channels a chunk: the width of the expansion's column block and the chunk buffer's position stride
_CB = 64
#: output columns per depthwise tile, widest first (a row of 28 is two tiles of 14, one of 10 is 7 + 2 + 1)
_WIDTHS = (14, 7, 4, 2, 1)
#: the path on, read when a block is prepared (tests turn it off to reach the planar block)
USE = True
#: the largest input map (positions a sample) it takes: at 28 x 28 x 192 the chunk buffers and D fill L2. Larger maps
#: stay planar: a version in bands of output rows (every expanded channel of a band's rows in L2) ran MobileNetV2's
#: 56 x 56 blocks slower than the planar block (24 -> 144 -> 24 @56 0.85 ms against 0.56; 16 -> 96 -> 24 @112
#: stride 2 0.99 against 0.73): their 16 and 24 channels make short sums and, as the row tiles' columns, pad 24 to 32
MAX_POSITIONS = 28 * 28
#: 2 parts from this much work where the caller has 2 threads (MobileNetV2's blocks here are 20-31 MFLOP, 0.2-0.45 ms
#: on one core), below ops/_blas.py's _KERNEL_SPLIT_FLOPS: a hand-off costs ~5-15 us now that the helpers spin, and
#: each half reads a small input (at most 28 x 28 positions) and writes rows of the output of its own
SPLIT_FLOPS = 1 << 23

if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._fast_rowtiles import row_tiles
    from ._fast_winochan import _pack, _transpose
    from ._llvm_lanes import Lanes, data
    from ._llvm_sync import ring

    def _dw_tile(tw: int, k: int):
        def codegen(context, builder, signature, args):
            _, yoff, yrs, yps, _, woff, ws, _, boff, lo, hi, _, doff, dps, rows, dstep, stride = args
            lanes = Lanes(builder)
            i64 = lanes.i64
            yd, wd, bd, dd = (data(context, builder, signature, args, i) for i in (0, 4, 7, 11))

            def at(base, off):
                return builder.bitcast(builder.gep(base, [off]), lanes.vptr)

            def c(v):
                return ir.Constant(i64, v)

            # the weights and the bias stay in registers over the rows (9 + 1 beside 14 sums: no spills)
            wv = [
                [builder.load(at(wd, builder.add(woff, builder.mul(c(ky * k + kx), ws))), align=4) for kx in range(k)]
                for ky in range(k)
            ]
            bias = builder.load(at(bd, boff), align=4)
            lo_v, hi_v = lanes.splat(lo), lanes.splat(hi)

            def rows_at(s: int):
                with cgutils.for_range(builder, rows) as loop:
                    y0 = builder.add(yoff, builder.mul(loop.index, builder.mul(c(s), yrs)))
                    d0 = builder.add(doff, builder.mul(loop.index, dstep))
                    acc = [bias] * tw
                    for ky in range(k):
                        row = builder.add(y0, builder.mul(c(ky), yrs))
                        for ix in range((tw - 1) * s + k):
                            v = builder.load(at(yd, builder.add(row, builder.mul(c(ix), yps))), align=4)
                            for kx in range(k):
                                j, r = divmod(ix - kx, s)
                                if r == 0 and 0 <= j < tw:  # output j's tap (ky, kx): in (ky, kx) order for each
                                    acc[j] = builder.call(lanes.fma, [v, wv[ky][kx], acc[j]])
                    for j in range(tw):
                        out = at(dd, builder.add(d0, builder.mul(c(j), dps)))
                        builder.store(lanes.clamp(acc[j], lo_v, hi_v), out, align=4)

            with builder.if_else(builder.icmp_signed("==", stride, c(1))) as (one, two):
                with one:
                    rows_at(1)
                with two:
                    rows_at(2)
            return context.get_dummy_value()

        def typer(
            typingctx, y, yoff, yrs, yps, w, woff, ws, b, boff, lo, hi, d, doff, dps, n, st, s
        ):  # pragma: no cover
            ip, f4 = types.intp, types.float32
            return types.void(y, ip, ip, ip, w, ip, ip, b, ip, f4, f4, d, ip, ip, ip, ip, ip), codegen

        return intrinsic(typer)

    # for each output row i < rows: d[doff + i dstep + j dps + l] = clip(b[boff + l] + sum_{ky, kx} y[yoff + (s i +
    # ky) yrs + (s j + kx) yps + l] w[woff + (3 ky + kx) ws + l]) for the tile's columns j and lanes l < 16, at
    # stride s (1 or 2; the code for both in each tile)
    _d14, _d7, _d4, _d2, _d1 = (_dw_tile(tw, 3) for tw in _WIDTHS)

    @numba.njit(cache=True, nogil=True)
    def _dw_columns(yf, yoff, yrs, yps, wf, woff, ws, bf, lo, hi, df, doff, dps, oh, ow, s):  # pragma: no cover
        """All oh output rows of ow columns and 16 channels: column tiles of 14, then 7, 4, 2, 1, each over the rows."""
        x = 0
        dstep = ow * dps
        while x < ow:
            rem = ow - x
            yo, do = yoff + x * s * yps, doff + x * dps
            if rem >= 14:
                _d14(yf, yo, yrs, yps, wf, woff, ws, bf, woff, lo, hi, df, do, dps, oh, dstep, s)
                x += 14
            elif rem >= 7:
                _d7(yf, yo, yrs, yps, wf, woff, ws, bf, woff, lo, hi, df, do, dps, oh, dstep, s)
                x += 7
            elif rem >= 4:
                _d4(yf, yo, yrs, yps, wf, woff, ws, bf, woff, lo, hi, df, do, dps, oh, dstep, s)
                x += 4
            elif rem >= 2:
                _d2(yf, yo, yrs, yps, wf, woff, ws, bf, woff, lo, hi, df, do, dps, oh, dstep, s)
                x += 2
            else:
                _d1(yf, yo, yrs, yps, wf, woff, ws, bf, woff, lo, hi, df, do, dps, oh, dstep, s)
                x += 1

    def _fill_for(nr: int):
        def codegen(context, builder, signature, args):
            _, src, sps, _, boff, lo, hi, _, dst, dps, count = args
            lanes = Lanes(builder)
            i64 = lanes.i64
            pd, bd, yd = (data(context, builder, signature, args, i) for i in (0, 3, 7))

            def at(base, off):
                return builder.bitcast(builder.gep(base, [off]), lanes.vptr)

            bias = [builder.load(at(bd, builder.add(boff, ir.Constant(i64, _VL * g))), align=4) for g in range(nr)]
            lo_v, hi_v = lanes.splat(lo), lanes.splat(hi)
            with cgutils.for_range(builder, count) as loop:
                i = loop.index
                so, do = builder.add(src, builder.mul(i, sps)), builder.add(dst, builder.mul(i, dps))
                for g in range(nr):
                    v = builder.load(at(pd, builder.add(so, ir.Constant(i64, _VL * g))), align=4)
                    v = lanes.clamp(builder.fadd(v, bias[g]), lo_v, hi_v)
                    builder.store(v, at(yd, builder.add(do, ir.Constant(i64, _VL * g))), align=4)
            return context.get_dummy_value()

        def typer(typingctx, p, src, sps, b, boff, lo, hi, y, dst, dps, count):  # pragma: no cover
            ip, f4 = types.intp, types.float32
            return types.void(p, ip, ip, b, ip, f4, f4, y, ip, ip, ip), codegen

        return intrinsic(typer)

    # y[dst + i dps + c] = clip(p[src + i sps + c] + b[boff + c]) for i < count and the 16 nr channels c
    _fill4, _fill3, _fill1 = (_fill_for(nr) for nr in (4, 3, 1))

    def _store_codegen(context, builder, signature, args):
        _, poff, ps, _, boff, lo, hi, _, _, zoff, plane, nm, nq, hasr = args
        lanes = Lanes(builder)
        i64, i32 = lanes.i64, lanes.i32
        pd, bd, rd, zd = (data(context, builder, signature, args, i) for i in (0, 3, 7, 8))

        def at(base, off):
            return builder.bitcast(builder.gep(base, [off]), lanes.vptr)

        rows = [builder.load(at(pd, builder.add(poff, builder.mul(ir.Constant(i64, j), ps))), align=4)
                for j in range(_VL)]  # fmt: skip
        cols = _transpose(builder, lanes, rows)  # cols[mm] lane j: P[q0 + j, m0 + mm]
        bias = builder.load(at(bd, boff), align=4)
        lo_v, hi_v = lanes.splat(lo), lanes.splat(hi)
        qmask, none = lanes.mask(nq), ir.Constant(lanes.mvec, None)
        with_r = builder.icmp_signed("!=", hasr, ir.Constant(i64, 0))
        for mm in range(_VL):
            t = builder.fadd(cols[mm], lanes.splat(builder.extract_element(bias, ir.Constant(i32, mm))))
            t = lanes.clamp(t, lo_v, hi_v)
            mask = builder.select(builder.icmp_signed("<", ir.Constant(i64, mm), nm), qmask, none)
            off = builder.add(zoff, builder.mul(ir.Constant(i64, mm), plane))
            rv = builder.call(lanes.mload, [at(rd, off), lanes.align, builder.select(with_r, mask, none), lanes.zero])
            t = builder.select(with_r, builder.fadd(t, rv), t)
            builder.call(lanes.mstore, [t, at(zd, off), lanes.align, mask])
        return context.get_dummy_value()

    @intrinsic
    def _store(typingctx, p, poff, ps, b, boff, lo, hi, r, z, zoff, plane, nm, nq, hasr):  # pragma: no cover
        """z[zoff + mm plane + j] = clip(P[poff + j ps + mm] + b[boff + mm]) (+ r at the same place when hasr) for
        channels mm < nm and positions j < nq (both < 16): a 16 x 16 block of P transposed into planes."""
        ip, f4 = types.intp, types.float32
        return types.void(p, ip, ip, b, ip, f4, f4, r, z, ip, ip, ip, ip, ip), _store_codegen

    # the stages are compiled functions of their own (as ops/_fast_winochan.py's: one large function ran the register
    # tiles at half speed)

    @numba.njit(cache=True, nogil=True)
    def _vectors(rem):  # pragma: no cover - compiled
        """The register tile's vector count for the next column block of ``rem`` (a multiple of 16) columns: blocks of
        64, or of 48 where the rest is one (96 as 48 + 48, 160 as 64 + 48 + 48, not 64 + 16 + 16: the 16-column tile
        runs slower)."""
        if rem % 64 == 0:
            return 4
        if rem % 48 == 0:
            return 3
        return 4 if rem >= 64 else 3 if rem >= 48 else 1

    @numba.njit(cache=True, nogil=True)
    def _to_channels_last(x, n, q0, q1, xt):  # pragma: no cover - compiled
        """xt (rows, Cp) = positions q0 .. q1 of sample n of x (N, C, Q), channels last (channels past C zero)."""
        _, C, Q = x.shape
        Cp = xt.shape[1]
        xf, xtf = x.reshape(-1), xt.reshape(-1)
        for cb in range(Cp // _VL):
            for qb in range(-(-(q1 - q0) // _VL)):
                q = q0 + _VL * qb
                _pack(xf, (n * C + _VL * cb) * Q + q, Q, min(_VL, C - _VL * cb), min(_VL, q1 - q),
                      xtf, _VL * qb * Cp + _VL * cb, Cp)  # fmt: skip

    @numba.njit(cache=True, nogil=True)
    def _expand(xt, C, W, rows, w1, e0, NR, b1, lo, hi, p1, yc, at, ps, ww, rs):  # pragma: no cover - compiled
        """Expanded channels e0 .. e0 + 16 NR of the rows x W positions of xt: P1 by the row tiles, then + b1, clipped,
        into yc (the first ww columns of each row, the first at yc[at], positions ps and rows rs apart)."""
        Cp = xt.shape[1]
        cw = _VL * NR
        row_tiles(w1, C * e0, cw, xt.reshape(-1), 0, Cp, C, p1, 0, cw, rows * W, NR)
        for yy in range(rows):
            src, dst = yy * W * cw, at + yy * rs
            if NR == 4:
                _fill4(p1, src, cw, b1, e0, lo, hi, yc, dst, ps, ww)
            elif NR == 3:
                _fill3(p1, src, cw, b1, e0, lo, hi, yc, dst, ps, ww)
            else:
                _fill1(p1, src, cw, b1, e0, lo, hi, yc, dst, ps, ww)

    @numba.njit(cache=True, nogil=True)
    def _depthwise(yc, ps, rs, col, w2, b2, e0, NR, lo, hi, d, oh, ow, s):  # pragma: no cover - compiled
        """D[q, e0 .. e0 + 16 NR] for oh x ow outputs of yc (those channels from yc[col], positions ps and rows rs
        apart)."""
        Ep = d.shape[1]
        df, wf = d.reshape(-1), w2.reshape(-1)
        for g in range(NR):
            e = e0 + _VL * g
            _dw_columns(yc, col + _VL * g, rs, ps, wf, e, Ep, b2, lo, hi, df, e, Ep, oh, ow, s)

    @numba.njit(cache=True, nogil=True)
    def _project(d, nq, E, w3, p3):  # pragma: no cover - compiled
        """P3[:nq] = D[:nq] @ W3 (the row tiles over column blocks of 64, 48 or 16; w3 as :func:`panels` lays it
        out)."""
        Ep = d.shape[1]
        Mp = p3.shape[1]
        df, pf = d.reshape(-1), p3.reshape(-1)
        m = 0
        while m < Mp:
            NR = _vectors(Mp - m)
            row_tiles(w3, E * m, _VL * NR, df, 0, Ep, E, pf, m, Mp, nq, NR)
            m += _VL * NR

    @numba.njit(cache=True, nogil=True)
    def _outputs(p3, q0, nq, b3, lo, hi, r, hasr, z, n):  # pragma: no cover - compiled
        """z[n] (M, Q) at positions q0 .. q0 + nq = clip(P3[:nq]^T + b3) (+ r[n])."""
        M, Q = z.shape[1], z.shape[2] * z.shape[3]
        Mp = p3.shape[1]
        pf, zf = p3.reshape(-1), z.reshape(-1)
        for mb in range(Mp // _VL):
            for qb in range(-(-nq // _VL)):
                at = (n * M + _VL * mb) * Q + q0 + _VL * qb
                _store(pf, _VL * qb * Mp + _VL * mb, Mp, b3, _VL * mb, lo, hi, r, zf, at, Q, min(_VL, M - _VL * mb),
                       min(_VL, nq - _VL * qb), hasr)  # fmt: skip

    @numba.njit(cache=True, nogil=True)
    def _zero_border(yc, Wp, Hp, pt, pl, hh, ww):  # pragma: no cover - compiled
        """The chunk buffer's padding (the positions no chunk writes) zero."""
        rs = Wp * _CB
        yc[: pt * rs] = 0
        yc[(pt + hh) * rs : Hp * rs] = 0
        for yy in range(pt, pt + hh):
            yc[yy * rs : (yy * Wp + pl) * _CB] = 0
            yc[(yy * Wp + pl + ww) * _CB : (yy + 1) * rs] = 0

    @numba.njit(cache=True, nogil=True)
    def _block(
        x, xt, w1, b1, lo1, hi1, p1, yc, geo, w2, b2, lo2, hi2, d, w3, b3, lo3, hi3, p3, r, hasr, z, n0, n1, bell, rings
    ):  # pragma: no cover
        """Samples n0 .. n1 of the block, a chunk of expanded channels at a time (geo: W, pt, pl, hh, ww, Wp, oh, ow,
        s, q0, qz: the input rows read start at position q0 of a plane, the oh output rows at qz; yc: the chunk
        buffer, positions _CB floats apart). First ``ring(bell, rings)`` (ops/_blas.run_parts' ``first_rings``)."""
        ring(bell, rings)
        C = x.shape[1]
        W, pt, pl, hh, ww, Wp, oh, ow, s, q0, qz = geo
        Ep, E = d.shape[1], w3.shape[0] // p3.shape[1]
        _zero_border(yc, Wp, (oh - 1) * s + 3, pt, pl, hh, ww)
        for n in range(n0, n1):
            _to_channels_last(x, n, q0, q0 + hh * W, xt)
            e0 = 0
            while e0 < Ep:
                NR = _vectors(Ep - e0)
                _expand(xt, C, W, hh, w1, e0, NR, b1, lo1, hi1, p1, yc, (pt * Wp + pl) * _CB, _CB, ww, Wp * _CB)
                _depthwise(yc, _CB, Wp * _CB, 0, w2, b2, e0, NR, lo2, hi2, d, oh, ow, s)
                e0 += _VL * NR
            _project(d, oh * ow, E, w3, p3)
            _outputs(p3, qz, oh * ow, b3, lo3, hi3, r, hasr, z, n)


def panels(w: np.ndarray) -> np.ndarray:
    """W (K, Np) (Np a multiple of 16) as the row tiles read it here: its column blocks (of :func:`_vectors`' widths)
    one after another, each K x width row major, so that a block's rows are read in order (a weight matrix read from
    L3 by rows 256 bytes apart in a matrix 4 kB wide ran the 7 x 7 blocks 10-20% slower inside MobileNetV2)."""
    K, Np = w.shape
    parts, c = [], 0
    while c < Np:
        width = _VL * int(_vectors(Np - c))
        parts.append(w[:, c : c + width].reshape(-1))
        c += width
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


def _padded(n: int) -> int:
    return -(-n // _VL) * _VL


def _bounds(clip) -> tuple:
    """(lo, hi) float32 of a kernel clip (on, lo, hi) (ops/fused_blocks.py's _kernel_act): -inf, inf when off."""
    on, lo, hi = clip
    f = np.float32
    return (f(lo), f(hi)) if on else (f(-np.inf), f(np.inf))


class ChannelsLastBlock:
    """The block's channels-last form: W1 (E, C), W2 (E, 3, 3), W3 (M, E) float32, their biases (or None) and clips
    ((on, lo, hi)); the depthwise's ``stride`` (1 or 2, both axes). The weights laid out once: W1^T (C, Ep) and W3^T
    (E, Mp) in :func:`panels`' column blocks, the depthwise taps (9, Ep), the channel counts padded with zeros to
    multiples of 16."""

    def __init__(self, w1, b1, clip1, w2, b2, clip2, stride: int, w3, b3, clip3):
        f = np.float32
        E, C = w1.shape
        M = w3.shape[0]
        Ep, Mp = _padded(E), _padded(M)
        self.C, self.E, self.M, self.stride = C, E, M, int(stride)
        w1t, w3t = np.zeros((C, Ep), f), np.zeros((E, Mp), f)
        w1t[:, :E], w3t[:, :M] = w1.T, w3.T
        self.w1, self.w3 = panels(w1t), panels(w3t)
        self.w2 = np.zeros((9, Ep), f)
        self.w2[:, :E] = w2.reshape(E, 9).T
        self.Ep, self.Mp = Ep, Mp
        self.b1, self.b2, self.b3 = (np.zeros(n, f) for n in (Ep, Ep, Mp))
        for dst, b, n in ((self.b1, b1, E), (self.b2, b2, E), (self.b3, b3, M)):
            if b is not None:
                dst[:n] = b
        self.clips = _bounds(clip1), _bounds(clip2), _bounds(clip3)
        self._calls: dict = {}

    def takes(self, shape: tuple, out: tuple) -> bool:
        """Whether an input of ``shape`` (N, C, H, W) with the depthwise output map ``out`` takes this path."""
        return enabled() and PACKED_OK and shape[2] * shape[3] <= MAX_POSITIONS and min(out) >= 1

    def __call__(self, x: np.ndarray, begin, out, residual=None) -> np.ndarray:
        """z (N, M, *out) of x (N, C, H, W) C-contiguous float32, the depthwise padded by ``begin`` before each axis
        (zeros after as needed); residual None or C-contiguous float32 of z's shape."""
        key = (x.shape, tuple(begin), tuple(out), _blas.threads() > 1)
        call = self._calls.get(key)
        if call is None:
            if len(self._calls) > 16:
                self._calls.clear()
            call = self._calls[key] = self._call(x.shape, begin, out, key[-1])
        return call(x, residual)

    def _call(self, shape, begin, out, threads: bool) -> Callable:
        N, C, H, W = shape
        oh, ow = int(out[0]), int(out[1])
        s, pt, pl = self.stride, int(begin[0]), int(begin[1])
        Wp = (ow - 1) * s + 3
        ww = min(W, Wp - pl)  # the input columns the depthwise reads
        Q, Qo = H * W, oh * ow
        Ep, Mp, M = self.Ep, self.Mp, self.M
        f = np.float32

        def rows(o0: int, o1: int) -> tuple:
            """geo of output rows o0 .. o1: the input rows they read (from i0, hh of them) with the padding above."""
            top = o0 * s - pt  # the first padded row's input row
            i0 = max(0, top)
            hh = min(H, top + (o1 - o0 - 1) * s + 3) - i0
            return (W, i0 - top, pl, hh, ww, Wp, o1 - o0, ow, s, i0 * W, o0 * ow)

        # 2 parts where the caller has 2 threads and the work pays the hand-off: over the samples (N >= 2) or over the
        # output rows, each part expanding the input rows its outputs read (the rows between read twice). Each output
        # has the same sums either way.
        flops = 2.0 * N * (Q * C * self.E + Qo * self.E * (9 + M))
        whole = (0, N, rows(0, oh))
        if not (threads and flops >= SPLIT_FLOPS and (N >= 2 or oh >= 2)):
            parts: tuple = (whole,)
        elif N >= 2:
            parts = ((0, N // 2, whole[2]), (N // 2, N, whole[2]))
        else:
            parts = ((0, 1, rows(0, oh // 2)), (0, 1, rows(oh // 2, oh)))
            if min(g[3] for _, _, g in parts) < 1:  # a half that reads only padding: no split
                parts = (whole,)
        (lo1, hi1), (lo2, hi2), (lo3, hi3) = self.clips
        none = np.zeros(0, f)
        consts = (self.w1, self.b1, lo1, hi1, self.w2, self.b2, lo2, hi2, self.w3, self.b3, lo3, hi3)
        Hp, bell = (oh - 1) * s + 3, _blas.bell
        shapes = ((_padded(Q), _padded(C)), (Q * _CB,), (Hp * Wp * _CB,), (Qo, Ep), (_padded(Qo), Mp))

        def part(x3, r, hasr, z, n0, n1, g, rings=0):
            # fresh scratch each call: the allocator hands back what the steps before just freed, still in cache (one
            # arena shared by every block ran MobileNetV2 8.6% slower, ab_flag; a set kept per block showed 60-120 us
            # a block more inside the network than alone: written into lines long evicted, read from memory first)
            sc = [np.empty(sh, f) for sh in shapes]
            (w1, b1, l1, h1, w2, b2, l2, h2, w3, b3, l3, h3), (xt, p1, yc, d, p3) = consts, sc
            tail = (p3, r, hasr, z, n0, n1, bell, rings)
            _block(x3, xt, w1, b1, l1, h1, p1, yc, g, w2, b2, l2, h2, d, w3, b3, l3, h3, *tail)

        def run(x, residual):
            z = np.empty((N, M, oh, ow), f)
            r = none if residual is None else residual.reshape(-1)
            x3, hasr = x.reshape(N, C, Q), int(residual is not None)
            if len(parts) == 1:
                part(x3, r, hasr, z, *whole)
            else:
                run_parts([functools.partial(part, x3, r, hasr, z, *p) for p in parts], first_rings=True)
            return z

        return run
