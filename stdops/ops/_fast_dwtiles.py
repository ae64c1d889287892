"""Compiled depthwise register tiles (numba, the optional ``fast`` extra; AVX-512 or AVX2): one channel per group,
float32, 3 x 3 and 5 x 5 kernels at strides 1 and 2, undilated (MobileNetV2/V3's and EfficientNet's depthwise
layers), with the bias, a following clip and optionally an activation. Reference: the NumPy path of ops/depthwise.py
(tests/ops/test_fast.py); the planar kernels of ops/_fast_depthwise.py take every other layer.

A tile (an LLVM intrinsic, :func:`_make_tile`, as ops/_fast_conv.py's: numba's own loops keep such accumulators in
memory) is R output rows x 16 output columns in AVX-512 registers, read straight from the input plane: at stride 1
one unaligned load per input row and tap column; at stride 2 three loads per input row split into the even and odd
columns by permutes (and shifted by a lane for the taps past the second). The borders come from masked loads (the
padding's zeros), the rows outside the plane from a row of zeros; tiles wholly inside the plane skip both checks.
Every output sums its taps in the order of (ky, kx), as the planar kernels. Measured on one AVX-512 core against
them (kernel alone): 960@7 0.080 -> 0.035 ms, 576@14 0.097 -> 0.044, 192@28 stride 2 0.114 -> 0.026, 144@56 0.24 ->
0.15, 96@112 stride 2 0.33 -> 0.22, 5 x 5 672@14 0.29 -> 0.10.

On AVX2 + FMA (16 ymm registers) the same code builds tiles of 8 rows x 8 columns (``_VL``, ``_ROWS_S1/S2``) and
stores with plain stores wherever they stay in the plane (``_PLAIN_STORES``): every output the same sum in the same
order (ky, kx) as on AVX-512.
"""

from __future__ import annotations

import functools

import numpy as np

from . import _blas
from ._blas import run_parts
from ._fast import numba
from ._fast_conv import AVX2, AVX512

#: the tiles' gate: AVX-512, or AVX2 + FMA with the AVX2 shapes below
TILES_OK = AVX512 or AVX2
#: float32 lanes of a tile's vectors: one AVX-512 zmm register, or on AVX2 one ymm register (ops/_llvm_lanes.py's
#: Lanes of width 8: 16-lane vectors there take two registers each, and MobileNets' 14 and 7 wide maps fill 8 lanes
#: better)
_VL = 16 if AVX512 else 8

#: output rows per register tile of :func:`depthwise_tiles` (measured on one AVX-512 core, 3 x 3 stride 1 14 x 14:
#: 8 rows 94 cycles a tile, 4 rows 54 (of half the work); stride 2: 4 rows as fast as 8 at half the registers)
_ROWS_S1, _ROWS_S2 = 8, 4
#: one sample in 2 parts over its channels from this many outputs x taps (each channel the same sums wherever it runs)
#: where the caller has 2 threads. Alone, 1 -> 2 threads (AMD Zen 4, medians): 32 @ 112 (3.6 M) 150 -> 135 us, 96 @ 112
#: stride 2 246 -> 201 (the planes stream from L3: not twice as fast); ONNX MobileNetV2 at 2 threads 0.98x
SPLIT_TAPS = 1 << 21
if not AVX512:
    # AVX2 (AMD Zen 3, 16 ymm registers): 8 rows x 8 columns (stride 2 at first 4: see below), 8 accumulators beside the
    # 9 weights of a 3 x 3 (LLVM spills the weights it has no room for as the FMAs' memory operands; more independent
    # sums hide the FMA's latency: every output's 9 taps are one dependent chain). Measured through conv_forward against
    # the planar kernels (alternating, 1 thread, CPU time, medians of 40 rounds, the machine shared): stride 1 960@7
    # 0.55x their time, 576@14 0.73x, 192@28 0.79x, 58@28 0.85x, 232@7 0.87x, 144@56 0.94x; stride 2 192@28 0.53-0.55x,
    # 576@14 0.59-0.65x, 144@56 0.67-0.74x, but 96@112 1.25x (0.87-0.98x with 4 rows and masked stores); 5 x 5 stride 2
    # 288@14 0.76-0.78x, 96@28 0.89-0.96x. The kernel alone at 4 -> 8 rows (stride 1, min of 200 calls): 576@14 0.160 ->
    # 0.146 ms, 960@7 0.095 -> 0.079. 16 lanes (two ymm a vector) x 4 rows: 1.0-1.7x the planar kernels' time; 8 lanes x
    # 2 rows 1.0-1.9x
    # Since the clip went branch-free (_PLAIN_STORES), AMD Zen 2, the kernel alone: stride 2 at 8 rows instead of 4,
    # 576@14 69 -> 57 us, 192@28 75 -> 62, 96@112 328 -> 300, 144@56 the same, 5 x 5 288@14 59 -> 51, 672@14 130 -> 113,
    # 240@28 164 -> 147; and 5 x 5 at stride 1 (once 0.96-1.06x the planar kernels' time, so not taken) through
    # conv_forward against the planar kernels: 672@14 0.70x, 240@14 0.73x, 576@7 0.66x
    _ROWS_S2 = 8  # stride 1 keeps its 8 rows
#: AVX2: whole tiles store by plain stores, in one branch after every row is summed (a branch per row let LLVM sink
#: each row's sums into it: one dependent chain at a time), the others lane by lane (a masked store costs many on
#: AMD Zen 3; the kernel alone, 4 rows: 960@7 0.169 -> 0.096 ms, 576@14 0.202 -> 0.160). A part tile's rows store
#: by plain stores too wherever the 8 lanes end inside the plane: the lanes past the row's last output land on the
#: next rows' first outputs, which the driver stores later (it runs a row of tiles from its last column tile to its
#: first, the rows in order), so only a plane's last rows go lane by lane and no store crosses into another plane
#: (the other channels may be another thread's). AMD Zen 2, the kernel alone with a clip (medians of 100 calls,
#: lane by lane -> plain): stride 1 960@7 78.8 -> 68.1 us, 576@14 150.9 -> 126.7, 384@14 102.1 -> 86.3, 192@28
#: 160.5 -> 141.0, 144@56 the same; stride 2 576@14 77.6 -> 72.4, 192@28 82.6 -> 78.5. The lanes of a last row each
#: extracted and stored (a ladder of constant lanes) instead of copied through a vector on the stack: stride 2 576@14
#: 72.4 -> 68-70 us, 192@28 78.5 -> 74-76, stride 1 960@7 68 -> 65-67. Without a clip the bounds are -inf and inf
#: (the same selects, no branch per row: see the tile): 960@7 65 -> 57 us, 576@14 127 -> 109, 384@14 86 -> 74,
#: 192@28 141 -> 120, 144@56 290 -> 247, 32@112 235 -> 201, stride 2 144@56 165 -> 152 (with a clip or without)
_PLAIN_STORES = not AVX512
#: a following activation (ops/_fast_epilogue.py's) runs over spans of this many outputs (planes just computed)
_ACT_SPAN = 2048

if numba is not None and TILES_OK:
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    from ._fast_epilogue import _act_chunk
    from ._llvm_lanes import Lanes, data

    _LANES = functools.partial(Lanes, width=_VL)

    def _make_tile(k: int, s: int, R: int, rowcheck: bool, colmask: bool):
        """The intrinsic of one register tile: R output rows x 16 output columns of a k x k depthwise convolution
        at stride s, read straight from the (unpadded) input plane."""

        @intrinsic
        def tile(
            typingctx, x, xoff, W, iy0, H, zr, zoff, cm, w, woff, bias, clip, lo, hi, y, yoff, ldy, rows, lanes, yend
        ):
            """y[yoff + i ldy + l] = clip(bias + sum_{ky, kx} w[woff + k ky + kx] X(iy0 + i s + ky, c(l, kx))) for
            i < rows, l < lanes, in the order of (ky, kx): X(r, c) = x[xoff + r W + c] inside the plane (rows 0 <=
            r < H, checked when ``rowcheck``; the columns by the lane masks cm when ``colmask``), zero outside it.
            c(l, kx) = l + kx at stride 1; at stride 2, 2 l + kx (the even and odd columns of two vectors, shifted
            by kx // 2 lanes with a third vector)."""
            sig = types.void(
                x, types.intp, types.intp, types.intp, types.intp, zr, types.intp, cm, w, types.intp, types.float32,
                types.boolean, types.float32, types.float32, y, types.intp, types.intp, types.intp, types.intp,
                types.intp,
            )  # fmt: skip

            def codegen(context, builder, signature, args):
                (x_, xoff_, W_, iy0_, H_, zr_, zoff_, cm_, w_, woff_, bias_, clip_, lo_, hi_, y_, yoff_, ldy_,
                 rows_, lanes_, yend_) = args  # fmt: skip
                lanes = _LANES(builder)
                i32, i64, vptr, mvec = lanes.i32, lanes.i64, lanes.vptr, lanes.mvec
                fma, mload, mstore, zero, align, splat = (
                    lanes.fma, lanes.mload, lanes.mstore, lanes.zero, lanes.align, lanes.splat
                )  # fmt: skip
                ivec = ir.VectorType(i32, _VL)
                xdata, zdata, cdata, wdata, ydata = (
                    data(context, builder, signature, args, i) for i in (0, 5, 7, 8, 14)
                )
                none = ir.Constant(mvec, [0] * _VL)

                def c64(v):
                    return ir.Constant(i64, v)

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
                if _PLAIN_STORES:
                    fptr = lanes.f32.as_pointer()
                    # no clip: bounds of -inf and inf, so that every row takes the same branch-free selects (a select
                    # on ``on`` per row became a branch per row, and LLVM then summed one row's 9 taps at a time:
                    # one dependent chain of fused multiply-adds)
                    inf = ir.Constant(lanes.f32, float("inf"))
                    lov = builder.select(on, lov, splat(ir.Constant(lanes.f32, float("-inf"))))
                    hiv = builder.select(on, hiv, splat(inf))
                    outs = []
                    for i in range(R):
                        t = acc[i]
                        outs.append(lanes.clamp(t, lov, hiv))
                    ptrs = [builder.bitcast(builder.gep(ybase, [builder.mul(c64(i), ldy_)]), vptr) for i in range(R)]
                    whole = builder.and_(
                        builder.icmp_signed("==", rows_, c64(R)), builder.icmp_signed("==", lanes_, c64(_VL))
                    )
                    with builder.if_else(whole, likely=True) as (then, otherwise):
                        with then:  # every row whole: plain stores
                            for t, p in zip(outs, ptrs):
                                builder.store(t, p, align=4)
                        with otherwise:  # the rows in the plane: plain stores where the vector ends in the plane
                            # (its lanes past ``lanes`` then land on outputs stored later: see _dw_planes), else lane
                            # by lane
                            for i, (t, p) in enumerate(zip(outs, ptrs)):
                                with builder.if_then(builder.icmp_signed(">", rows_, c64(i))):
                                    at = builder.add(builder.add(yoff_, builder.mul(c64(i), ldy_)), c64(_VL))
                                    inside = builder.icmp_signed("<=", at, yend_)
                                    with builder.if_else(inside) as (plain, tail):
                                        with plain:
                                            builder.store(t, p, align=4)
                                        with tail:  # each live lane extracted and stored (constant lanes)
                                            dst = builder.bitcast(p, fptr)
                                            for j in range(_VL):
                                                live = builder.icmp_signed(">", lanes_, c64(j))
                                                with builder.if_then(live, likely=True):
                                                    v = builder.extract_element(t, ir.Constant(i32, j))
                                                    builder.store(v, builder.gep(dst, [c64(j)]))
                    return context.get_dummy_value()
                for i in range(R):
                    t = acc[i]
                    t = builder.select(on, lanes.clamp(t, lov, hiv), t)
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
    def _dw_masks(W, ow, k, s, pl):  # pragma: no cover - compiled
        # per column of tiles: the lanes of each load whose input column is inside [0, W) (cms), and whether
        # the tile's loads are wholly inside the row (inner)
        nq = (ow + _VL - 1) // _VL
        nl = k if s == 1 else 3  # the loads per input row (stride 2: three vectors, split into even and odd columns)
        span = _VL + k - 1 if s == 1 else 3 * _VL  # the input columns they cover
        cms = np.zeros((nq, nl), np.int64)
        inner = np.zeros(nq, np.bool_)
        for qi in range(nq):
            c0 = qi * _VL * s - pl
            for j in range(nl):
                first = c0 + (j if s == 1 else j * _VL)
                a, e = min(max(-first, 0), _VL), min(max(W - first, 0), _VL)
                cms[qi, j] = ((1 << e) - 1) ^ ((1 << a) - 1) if e > a else 0
            inner[qi] = c0 >= 0 and c0 + span <= W
        return cms, inner

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _dw_tiles(x, w, b, s, pt, pl, clip, lo, hi, act, ap, aq, y):  # pragma: no cover - compiled
        # every plane by tiles of R rows x 16 columns, k x k (3 or 5, from w) at stride s (1 or 2)
        cms, inner = _dw_masks(x.shape[3], y.shape[3], w.shape[1], s, pl)
        zr = np.zeros(x.shape[3] + 6 * _VL, np.float32)  # the rows outside the plane (from column -2 _VL)
        ea, ea2, kb = np.empty(_ACT_SPAN, np.float32), np.empty(_ACT_SPAN, np.float32), np.empty(_ACT_SPAN, np.int32)
        _dw_planes(x, w, b, s, pt, pl, clip, lo, hi, act, ap, aq, y, cms, inner, zr, ea, ea2, kb)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _dw_planes(
        x, w, b, s, pt, pl, clip, lo, hi, act, ap, aq, y, cms, inner, zr, ea, ea2, kb
    ):  # pragma: no cover - compiled
        # _dw_tiles with its masks (_dw_masks) and scratch given (the fused block calls it once per round): the
        # tiles wholly inside the plane skip the checks; zr a row of zeros of W + 6 _VL, ea ea2 kb _ACT_SPAN each
        N, C, H, W = x.shape
        k = w.shape[1]
        oh, ow = y.shape[2], y.shape[3]
        R = _ROWS_S1 if s == 1 else _ROWS_S2
        has_b = b.shape[0] == C
        xf, wf, yf = x.reshape(-1), w.reshape(-1), y.reshape(-1)
        nq = (ow + _VL - 1) // _VL
        back = ow % _VL != 0
        pend = 0  # the outputs from here on wait for the activation
        for n in range(N):
            for c in range(C):
                bias = b[c] if has_b else np.float32(0)
                xo, yo, wo = (n * C + c) * H * W, (n * C + c) * oh * ow, c * k * k
                yend = yo + oh * ow  # the plane's end: no store past it
                for oy0 in range(0, oh, R):
                    rows = min(R, oh - oy0)
                    iy0 = oy0 * s - pt
                    rows_in = iy0 >= 0 and iy0 + (R - 1) * s + k <= H
                    # where the last column tile is a part one, the tiles last to first: its plain stores (AVX2,
                    # _PLAIN_STORES) write past the row, on the next rows' first outputs, which the tiles after it
                    # then store (else first to last: reversed, 96@112 stride 2 ran 15% slower)
                    for t in range(nq):
                        qi = nq - 1 - t if back else t
                        q0 = qi * _VL
                        lanes = min(_VL, ow - q0)
                        xq, zq, yq = xo + q0 * s - pl, 2 * _VL + q0 * s - pl, yo + oy0 * ow + q0
                        a = (xf, xq, W, iy0, H, zr, zq, cms[qi], wf, wo, bias, clip, lo, hi, yf, yq, ow, rows, lanes)
                        if rows_in and not inner[qi]:
                            if k == 3 and s == 1:
                                _T3S1_COL(*a, yend)
                            elif k == 3:
                                _T3S2_COL(*a, yend)
                            elif s == 1:
                                _T5S1_COL(*a, yend)
                            else:
                                _T5S2_COL(*a, yend)
                        elif rows_in:
                            if k == 3 and s == 1:
                                _T3S1_IN(*a, yend)
                            elif k == 3:
                                _T3S2_IN(*a, yend)
                            elif s == 1:
                                _T5S1_IN(*a, yend)
                            else:
                                _T5S2_IN(*a, yend)
                        elif k == 3 and s == 1:
                            _T3S1(*a, yend)
                        elif k == 3:
                            _T3S2(*a, yend)
                        elif s == 1:
                            _T5S1(*a, yend)
                        else:
                            _T5S2(*a, yend)
                if act != 0:  # the activation over the last planes while they are in cache, _ACT_SPAN values a call
                    end = yo + oh * ow
                    if end - pend >= _ACT_SPAN or (n == N - 1 and c == C - 1):
                        for q in range(pend, end, _ACT_SPAN):
                            _act_chunk(yf[q : min(end, q + _ACT_SPAN)], act, ap, aq, ea, kb, ea2)
                        pend = end


def tiles_apply(dtype, mult: int, kernel, strides, dilations) -> bool:
    """Whether :func:`depthwise_tiles` computes this depthwise layer (float32, AVX-512 or AVX2)."""
    return (
        TILES_OK
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
    N, C = x.shape[0], w.shape[0]
    y = np.empty((N, C) + tuple(out), np.float32)
    bb = np.zeros((0,), np.float32) if b is None else b
    clip, lo, hi = clip_args
    a, ap, aq = int(act[0]), np.float32(act[1]), np.float32(act[2])
    geo = (strides[0], begin[0], begin[1], clip, np.float32(lo), np.float32(hi), a, ap, aq)
    if N > 1 or C < 2 or C * y.shape[2] * y.shape[3] * w.shape[1] * w.shape[2] < SPLIT_TAPS or _blas.threads() < 2:
        _dw_tiles(x, w, bb, *geo, y)
        return y
    h = C // 2  # (one sample: its channel slices stay C-contiguous)
    run_parts(
        [
            functools.partial(_dw_tiles, x[:, c0:c1], w[c0:c1], bb[c0:c1] if bb.size else bb, *geo, y[:, c0:c1])
            for c0, c1 in ((0, h), (h, C))
        ]
    )
    return y
