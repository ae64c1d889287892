"""Compiled 1 x 1 convolution (numba, the optional ``fast`` extra): y[n, m, p] = clip(b[m] + sum_k W[m, k] x[n, k, p])
for the pointwise layers of MobileNet-style networks on large maps (few input channels, many positions), where
OpenBLAS's GEMM (W (M, K) @ X (K, P)) runs far from the machine's rate: its kernels are tuned for large K.

The register tile (:func:`_make_tile`, an LLVM intrinsic as ops/_fast_conv.py's: numba's own loops keep such
accumulators in memory) is _MR output channels x up to _NV vectors of 16 positions, _MR * _NV AVX-512 accumulators
started from the bias. Per input channel k it loads the _NV vectors of X's row k once and broadcasts the _MR weights
W[m, k] (packed (M / _MR, K, _MR) so that they are contiguous), one fused multiply-add per term in the order of k;
then the clip, and the tile is stored into Y (a masked last vector for a partial column block, masked rows for a
partial channel block). The column block of X (K x 16 _NV values) stays in L1 while every channel block uses it, so
X is read from memory once and Y written once. Every output sums its terms in the same order whichever block,
thread or lane computes it. Measured: see :data:`MAX_K` and benchmarks/bench_conv.py. Reference: conv.py's 1 x 1
GEMM with the compiled path off (tests/ops/test_fast_pointwise.py).

On AVX2 + FMA (:data:`TILES_OK`; 16 ymm registers) the same column blocks run through a tile of one vector
(:data:`_VECTOR_TILES`), with thresholds of their own. Whole networks there (AMD Zen 3, 1 thread, two plans of each
alternating in one process, the tiles on against off (OpenBLAS's GEMM), 50 rounds, thread_time medians, a loaded
machine): ONNX MobileNetV2 28.60 -> 23.90 ms, ShuffleNetV2 19.09 -> 15.09, RegNetY-400MF 49.48 -> 46.12; ncnn
MobileNetV2 27.23 -> 23.93, ShuffleNetV2 22.69 -> 17.53, RegNetY-400MF 48.92 -> 45.48. The fused expansion +
depthwise block also needs ops/_fast_dwtiles.py's tiles (AVX-512 only so far).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import cast

import numpy as np

from . import _blas
from ._blas import run_parts
from ._fast import numba
from ._fast_conv import AVX2, AVX512
from ._fast_dwtiles import TILES_OK as _DW_OK
from ._fast_epilogue import ACT_NONE

#: 2 parts (over positions) from this many FLOPs where the caller has 2 threads, below ops/_blas.py's
#: _KERNEL_SPLIT_FLOPS since the helpers spin (a hand-off ~5-15 us). Alone, 1 -> 2 threads (AMD Zen 4, medians):
#: 16 -> 96 at 112 479 -> 260 us, 32 -> 16 at 112 159 -> 109, 24 -> 144 at 56 245 -> 175, 144 -> 24 at 56
#: 202 -> 133, 96 -> 576 at 14 235 -> 158; maps of fewer than 2 _COLS positions stay whole (576 -> 160 at 7)
_SPLIT_FLOPS = 1 << 23

#: this module's kernels run: AVX-512, or AVX2 + FMA with the tile of _VECTOR_TILES
TILES_OK = AVX512 or AVX2
#: the tile: _MR output channels x _NV vectors of _VL float32 positions (24 of AVX-512's 32 registers)
_MR, _NV, _VL = 6, 4, 16
_COLS = _NV * _VL
#: a following activation (ops/_fast_epilogue.py's) runs on every row of this many column blocks at a time
_ACT_BLOCKS = 4
#: AVX2 (a 16-lane vector is two of the 16 ymm registers): the tile is _MR channels x ONE vector (12 ymm accumulators
#: + X's vector + the broadcast weight), called for each of a column block's _NV vectors, the whole ones without a
#: mask (a masked tile's two lane masks spill its loop). The column block stays 64 positions wide (every row of X
#: and Y read and written in 256-byte runs: with one vector per column block, 16 -> 96 @ 112 ran 9 GFLOPS against
#: 33). Measured on an AMD Zen 3 (1 thread, alternating against OpenBLAS's GEMM): 5 or 4 channels x 1 vector about
#: as fast or slower, 3 x 2 vectors (17 ymm: spills) 1.0-1.5x OpenBLAS's time. False: the tile covers the whole
#: column block (AVX-512)
_VECTOR_TILES = AVX2 and not AVX512
#: AVX2: a column block's last vector of at most this many lanes runs through a tile of 12 channels x 8 (or 4)
#: lanes instead (7 x 7 maps: 49 = 3 x 16 + 1)
_NARROW_MAX = 8
#: ... and (AVX2 and AVX-512) a last vector of at most this many (1 or 2) lanes through a tile with the channels in
#: the lanes (ops/_fast_pwtail.py), the block's whole vectors through the tile of one vector fewer. AVX-512, AMD Zen 4,
#: 1 thread, the inverted-residual block alone (min / median us of 300 alternating rounds): 160 -> 960 @ 7 -> 160
#: 388 / 436 -> 322 / 362, 96 -> 576 @ 14 / 2 -> 160 393 / 398 -> 336 / 402
_LANES_TILE_MAX = 2

#: the compiled kernel takes 1 x 1 layers of at least MIN_P positions per sample and at most MAX_K input channels,
#: MAX_K_SMALL on maps of at most SMALL_P positions (measured on one AVX-512 core against the current path, 1 thread:
#: 16 -> 96 @ 112 0.30 ms against 0.73 by OpenBLAS, 24 -> 144 @ 56 0.14 against 0.29, 144 -> 24 @ 56 0.145 against
#: 0.21; 576 -> 96 @ 14 0.126 against 0.151 by ops/_fast_conv.py's direct kernel, 960 -> 160 @ 14 0.365 against
#: 0.380; but 512 -> 128 @ 28 0.76 against 0.69 by OpenBLAS (the column block of X no longer in L1), and at 7 x 7
#: (a masked vector in every 4) 320 -> 1280 0.30 against 0.28 by the direct kernel)
MIN_P = 100
MAX_K = 256
if AVX512:
    # with a last vector of 1-2 lanes in the lanes tile (ops/_fast_pwtail.py), 7 x 7 maps too (AMD Zen 4, 1 thread,
    # alternating against conv_forward's direct kernel, 300 rounds, min / median us): 320 -> 1280 368 / 393 against
    # 420 / 490, 160 -> 960 138 / 147 against 170 / 197, 960 -> 320 273 / 284 against 305 / 340, 96 -> 576 52 / 52
    # against 75 / 77
    MIN_P = 49
SMALL_P, MAX_K_SMALL = 256, 1024
if TILES_OK and not AVX512:
    # AVX2 (AMD Zen 3, 1 thread, conv_forward against OpenBLAS's GEMM: the direct kernel is AVX-512 only;
    # alternating 61-101 rounds, thread_time medians, a loaded machine): 7 x 7 maps (with the narrow tail tile) win
    # up to K = 672 (160 -> 960 304 against 366 us, 320 -> 1280 1221 / 1382, 440 -> 440 501 / 586, 576 -> 96 171 /
    # 195, 672 -> 112 235 / 240) but not at 960 (960 -> 160 1.01x, 960 -> 320 1.12x); 14 x 14 up to 672 as well
    # (576 -> 96 419 / 483, 672 -> 112 670 / 738; 768 -> 128 1.02x, 1024 -> 256 1.27x)
    MIN_P, MAX_K_SMALL = 49, 672

if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._fast_epilogue import _act_chunk
    from ._llvm_lanes import Lanes, data

    def _make_tile(nv: int, bias_last: bool = False, masked: bool = True):
        """The intrinsic of a tile of _MR channels x ``nv`` vectors of positions (``nv`` fixed at compile time);
        ``bias_last``: the sum started from zero and the bias added to it after the last term (ops/_fast_conv.py's
        direct kernel's order, which the fused block reproduces on the small maps that kernel takes); ``masked``
        False: every vector whole (``lanes`` ignored: on AVX2 the masks would take two of the 16 registers)."""

        @intrinsic
        def tile(typingctx, wp, woff, x, xoff, ldx, kn, bp, boff, y, yoff, ldy, rows, lanes, clip, lo, hi):
            """y[yoff + i ldy + j] = clip(bp[boff + i] + sum_{k < kn} wp[woff + _MR k + i] x[xoff + k ldx + j]) for
            i < rows, j < 16 (nv - 1) + lanes: the accumulators in registers, one fused multiply-add per term in
            the order of k; clipped (``clip``) to [lo, hi] (NaN stays NaN)."""
            sig = types.void(
                wp, types.intp, x, types.intp, types.intp, types.intp, bp, types.intp, y, types.intp, types.intp,
                types.intp, types.intp, types.boolean, types.float32, types.float32,
            )  # fmt: skip

            def codegen(context, builder, signature, args):
                wp_, woff_, x_, xoff_, ldx_, kn_, bp_, boff_, y_, yoff_, ldy_, rows_, lanes_, clip_, lo_, hi_ = args
                lanes = Lanes(builder)
                i64, vec, vptr, fma, mload, mstore = (
                    lanes.i64,
                    lanes.vec,
                    lanes.vptr,
                    lanes.fma,
                    lanes.mload,
                    lanes.mstore,
                )
                zero, align, splat = lanes.zero, lanes.align, lanes.splat
                wdata, xdata, bdata, ydata = (data(context, builder, signature, args, i) for i in (0, 2, 6, 8))
                mask = lanes.mask(lanes_)  # the last vector's lanes

                slots = [[cgutils.alloca_once(builder, vec) for _ in range(nv)] for _ in range(_MR)]
                bbase = builder.gep(bdata, [boff_])
                bvs = [splat(builder.load(builder.gep(bbase, [ir.Constant(i64, i)]))) for i in range(_MR)]
                for i in range(_MR):
                    for s in slots[i]:
                        builder.store(zero if bias_last else bvs[i], s)
                wbase = builder.gep(wdata, [woff_])
                xbase = builder.gep(xdata, [xoff_])
                with cgutils.for_range(builder, kn_) as loop:
                    k = loop.index
                    xk = builder.gep(xbase, [builder.mul(k, ldx_)])
                    xs = []
                    for v in range(nv):
                        p = builder.bitcast(builder.gep(xk, [ir.Constant(i64, v * _VL)]), vptr)
                        if masked and v == nv - 1:
                            xs.append(builder.call(mload, [p, align, mask, zero]))
                        else:
                            xs.append(builder.load(p, align=4))
                    wk = builder.gep(wbase, [builder.mul(k, ir.Constant(i64, _MR))])
                    for i in range(_MR):
                        wb = splat(builder.load(builder.gep(wk, [ir.Constant(i64, i)])))
                        for v in range(nv):
                            builder.store(builder.call(fma, [wb, xs[v], builder.load(slots[i][v])]), slots[i][v])
                if bias_last:  # (0 + the terms) + b: a sum of -0 becomes +0, as there
                    for i in range(_MR):
                        for s in slots[i]:
                            builder.store(builder.fadd(builder.load(s), bvs[i]), s)
                with builder.if_then(builder.icmp_unsigned("!=", clip_, ir.Constant(clip_.type, 0))):
                    lov, hiv = splat(lo_), splat(hi_)
                    for row in slots:
                        for s in row:
                            builder.store(lanes.clamp(builder.load(s), lov, hiv), s)
                ybase = builder.gep(ydata, [yoff_])
                for i in range(_MR):
                    live = builder.icmp_signed(">", rows_, ir.Constant(i64, i))
                    with builder.if_then(live, likely=True):
                        yrow = builder.gep(ybase, [builder.mul(ir.Constant(i64, i), ldy_)])
                        for v in range(nv):
                            p = builder.bitcast(builder.gep(yrow, [ir.Constant(i64, v * _VL)]), vptr)
                            val = builder.load(slots[i][v])
                            if masked and v == nv - 1:
                                builder.call(mstore, [val, p, align, mask])
                            else:
                                builder.store(val, p, align=4)
                return context.get_dummy_value()

            return sig, codegen

        return tile

    _tile1, _tile2, _tile3, _tile4 = (_make_tile(v) for v in range(1, 5))
    _late1, _late2, _late3, _late4 = (_make_tile(v, True) for v in range(1, 5))
    assert _NV == 4
    # AVX2's tile of one whole vector (no mask) beside the masked _tile1 / _late1
    _whole1, _wholelate1 = _make_tile(1, False, False), _make_tile(1, True, False)

    from ._fast_pwtail import LANES_GROUP, make_lanes_tile, make_narrow_tile

    _lanes1, _lanes2 = make_lanes_tile(1, False, _MR), make_lanes_tile(2, False, _MR)
    _laneslate1, _laneslate2 = make_lanes_tile(1, True, _MR), make_lanes_tile(2, True, _MR)
    _narrow8, _narrow4 = make_narrow_tile(8, False, _MR), make_narrow_tile(4, False, _MR)
    _narrowlate8, _narrowlate4 = make_narrow_tile(8, True, _MR), make_narrow_tile(4, True, _MR)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _pointwise(wp, x, bp, clip, lo, hi, act, ap, aq, y, c0, c1):  # pragma: no cover - compiled
        # y[n, :, c0:c1] for every sample n: x (N, K, P), wp (M / _MR, K, _MR), bp (M / _MR * _MR), y (N, M, P)
        span = _ACT_BLOCKS * _COLS
        e, e2, kb = np.empty(span, np.float32), np.empty(span, np.float32), np.empty(span, np.int32)
        _pointwise_cols(wp, x, bp, clip, lo, hi, act, ap, aq, y, c0, c1, e, e2, kb, False)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _pointwise_cols(
        wp, x, bp, clip, lo, hi, act, ap, aq, y, c0, c1, e, e2, kb, late
    ):  # pragma: no cover - compiled
        # _pointwise with the activation's scratch given (e e2 kb, _ACT_BLOCKS _COLS each): per column block of
        # 16 _NV positions, every channel block (the block's X stays in L1 between them), then the activation
        # ``act`` (ops/_fast_epilogue.py's codes, 0: none) over the block while it is in L1
        N, K, P = x.shape
        M = y.shape[1]
        MB = wp.shape[0]
        wf, bf, xf, yf = wp.reshape(-1), bp.reshape(-1), x.reshape(-1), y.reshape(-1)
        for n in range(N):
            for p0 in range(c0, c1, _COLS):
                cnt = min(_COLS, c1 - p0)
                nv = (cnt + _VL - 1) // _VL
                lanes = cnt - (nv - 1) * _VL
                xo = n * K * P + p0
                for mb in range(MB):
                    m0 = mb * _MR
                    rows = min(_MR, M - m0)
                    wo, yo = mb * K * _MR, (n * M + m0) * P + p0
                    if _VECTOR_TILES:  # AVX2: the block a vector at a time, the whole ones without a mask
                        for v in range(nv if lanes == _VL else nv - 1):
                            xv, yv = xo + v * _VL, yo + v * _VL
                            if late:
                                _wholelate1(wf, wo, xf, xv, P, K, bf, m0, yf, yv, P, rows, _VL, clip, lo, hi)
                            else:
                                _whole1(wf, wo, xf, xv, P, K, bf, m0, yf, yv, P, rows, _VL, clip, lo, hi)
                        if _NARROW_MAX < lanes < _VL:  # a last vector of more than 8 lanes: masked
                            xv, yv = xo + (nv - 1) * _VL, yo + (nv - 1) * _VL
                            if late:
                                _late1(wf, wo, xf, xv, P, K, bf, m0, yf, yv, P, rows, lanes, clip, lo, hi)
                            else:
                                _tile1(wf, wo, xf, xv, P, K, bf, m0, yf, yv, P, rows, lanes, clip, lo, hi)
                    else:
                        # AVX-512: a last vector of 1 or 2 lanes goes to the lanes tile below, the whole ones here
                        nt, lt = (nv - 1, _VL) if lanes <= _LANES_TILE_MAX else (nv, lanes)
                        if late:
                            if nt == 4:
                                _late4(wf, wo, xf, xo, P, K, bf, m0, yf, yo, P, rows, lt, clip, lo, hi)
                            elif nt == 3:
                                _late3(wf, wo, xf, xo, P, K, bf, m0, yf, yo, P, rows, lt, clip, lo, hi)
                            elif nt == 2:
                                _late2(wf, wo, xf, xo, P, K, bf, m0, yf, yo, P, rows, lt, clip, lo, hi)
                            elif nt == 1:
                                _late1(wf, wo, xf, xo, P, K, bf, m0, yf, yo, P, rows, lt, clip, lo, hi)
                        elif nt == 4:
                            _tile4(wf, wo, xf, xo, P, K, bf, m0, yf, yo, P, rows, lt, clip, lo, hi)
                        elif nt == 3:
                            _tile3(wf, wo, xf, xo, P, K, bf, m0, yf, yo, P, rows, lt, clip, lo, hi)
                        elif nt == 2:
                            _tile2(wf, wo, xf, xo, P, K, bf, m0, yf, yo, P, rows, lt, clip, lo, hi)
                        elif nt == 1:
                            _tile1(wf, wo, xf, xo, P, K, bf, m0, yf, yo, P, rows, lt, clip, lo, hi)
                    if lanes <= _LANES_TILE_MAX:
                        G = LANES_GROUP[lanes]
                        if mb % G == G - 1 or mb == MB - 1:  # the last positions of these G channel blocks
                            mg = mb - mb % G
                            mt = mg * _MR
                            a = (wf, mg * K * _MR, K * _MR, mb - mg + 1, xf, xo + (nv - 1) * _VL, P, K, bf, mt, yf)
                            b = ((n * M + mt) * P + p0 + (nv - 1) * _VL, P, min(G * _MR, M - mt), clip, lo, hi)
                            if lanes == 1:
                                if late:
                                    _laneslate1(*a, *b)
                                else:
                                    _lanes1(*a, *b)
                            elif late:
                                _laneslate2(*a, *b)
                            else:
                                _lanes2(*a, *b)
                    elif _VECTOR_TILES and lanes <= _NARROW_MAX and (mb % 2 == 1 or mb == MB - 1):
                        # the last few positions of this pair of channel blocks, two blocks a tile, while the pair's
                        # weights are in cache (after every block, they streamed from L3 again: 160 -> 960 @ 7 x 7
                        # 150 us at 48 positions, 190 at 49)
                        mt = (mb - mb % 2) * _MR
                        rt = min(2 * _MR, M - mt)
                        wt, yt = (mb - mb % 2) * K * _MR, (n * M + mt) * P + p0 + (nv - 1) * _VL
                        ws = K * _MR if mb % 2 == 1 else 0  # (one block left: its weights twice, rows masked)
                        xv = xo + (nv - 1) * _VL
                        if lanes <= 4:
                            if late:
                                _narrowlate4(wf, wt, ws, xf, xv, P, K, bf, mt, yf, yt, P, rt, lanes, clip, lo, hi)
                            else:
                                _narrow4(wf, wt, ws, xf, xv, P, K, bf, mt, yf, yt, P, rt, lanes, clip, lo, hi)
                        elif late:
                            _narrowlate8(wf, wt, ws, xf, xv, P, K, bf, mt, yf, yt, P, rt, lanes, clip, lo, hi)
                        else:
                            _narrow8(wf, wt, ws, xf, xv, P, K, bf, mt, yf, yt, P, rt, lanes, clip, lo, hi)
                if act != 0 and (p0 + _COLS >= c1 or (p0 - c0) // _COLS % _ACT_BLOCKS == _ACT_BLOCKS - 1):
                    g0 = c0 + (p0 - c0) // (_ACT_BLOCKS * _COLS) * (_ACT_BLOCKS * _COLS)
                    for m in range(M):  # the last column blocks of every row, while they are in cache
                        q = (n * M + m) * P
                        _act_chunk(yf[q + g0 : q + p0 + cnt], act, ap, aq, e, kb, e2)


def applies(M: int, K: int, P: int) -> bool:
    """Whether :func:`pointwise` computes a float32 1 x 1 layer of M outputs, K inputs and P positions."""
    return TILES_OK and P >= MIN_P and (K <= MAX_K or (P <= SMALL_P and K <= MAX_K_SMALL))


def pack_weight(wmat: np.ndarray) -> np.ndarray:
    """W (M, K) float32 as the tile reads it: (ceil(M / _MR), K, _MR), the channels past M zero."""
    M, K = wmat.shape
    MB = -(-M // _MR)
    wp = np.zeros((MB * _MR, K), np.float32)
    wp[:M] = wmat
    return np.ascontiguousarray(wp.reshape(MB, _MR, K).transpose(0, 2, 1))


def pointwise(
    x: np.ndarray, wp: np.ndarray, M: int, b=None, clip_args=(False, 0.0, 0.0), act=(ACT_NONE, 0.0, 0.0)
) -> np.ndarray:
    """y (N, M, P) float32 = act(W x + b), clipped per ``clip_args`` (ops/_fast.py ``_clip_args``) before ``act``
    ((code, p, q) of ops/_fast_epilogue.py: what its epilogue would apply), of x (N, K, P) C-contiguous float32 and
    the packed weights ``wp`` (:func:`pack_weight` of W (M, K)); b (M,) or None. In 2 parts from _SPLIT_FLOPS, over
    the positions (over the channel blocks for one sample of fewer than 2 _COLS positions): a rule on the shape alone,
    and any split gives the same bits."""
    return pointwise_call(x.shape, wp, M, b, clip_args, act)(x)


def pointwise_call(shape, wp: np.ndarray, M: int, b=None, clip_args=(False, 0.0, 0.0), act=(ACT_NONE, 0.0, 0.0)):
    """:func:`pointwise` for inputs of ``shape`` (N, K, P), its bias, clip and split computed now: ``fn(x) -> y``
    (a layer run again and again pays only for its kernel: ~2 us a call less)."""
    N, K, P = shape
    MB = wp.shape[0]
    bp = np.zeros(MB * _MR, np.float32)
    if b is not None:
        bp[:M] = b
    on, lo, hi = clip_args
    lo, hi = np.float32(lo), np.float32(hi)
    n = 2 if 2 * N * M * K * P >= _SPLIT_FLOPS and P >= 2 * _COLS else 1
    cuts = [min(P, -(-(P * i // n) // _COLS) * _COLS) for i in range(n)] + [P]
    a, ap, aq = int(act[0]), np.float32(act[1]), np.float32(act[2])
    spans = list(zip(cuts, cuts[1:]))
    yshape = (N, M, P)
    # a small map (fewer than 2 _COLS positions) of one sample: 2 parts over the channel blocks instead (each block
    # the same kernel and sums; the sample's channel slices stay C-contiguous). Alone, 1 -> 2 threads (AMD Zen 4,
    # medians): 320 -> 1280 at 7 x 7 420 -> 276 us, 160 -> 960 141 -> 85, 576 -> 160 86 -> 58
    half = MB // 2 if n == 1 and N == 1 and MB >= 2 and 2 * M * K * P >= _SPLIT_FLOPS else 0
    blocks = [(wp[:half], bp[: half * _MR], 0, half * _MR), (wp[half:], bp[half * _MR :], half * _MR, M)]

    def run(x: np.ndarray) -> np.ndarray:
        y = np.empty(yshape, np.float32)
        if half and _blas.threads() > 1:
            run_parts(
                [
                    functools.partial(_pointwise, w, x, c, on, lo, hi, a, ap, aq, y[:, m0:m1], 0, P)
                    for w, c, m0, m1 in blocks
                ]
            )
        elif len(spans) == 1:
            _pointwise(wp, x, bp, on, lo, hi, a, ap, aq, y, 0, P)
        else:
            run_parts([functools.partial(_pointwise, wp, x, bp, on, lo, hi, a, ap, aq, y, c0, c1) for c0, c1 in spans])
        return y

    return run


# --------------------------------------------------------------------------- 1 x 1 expansion + depthwise

#: expanded values per round of :func:`pointwise_depthwise`: a round computes as many expanded channels (a multiple
#: of the tile's _MR) as fill this many float32 of scratch (640 KB: they stay in L2 until the depthwise tiles read
#: them), at most all of them. Measured on one AVX-512 core, the block alone (kernel time, median; channels a round:
#: us): 16 -> 96 @ 112 stride 2 12: 495, 24: 544, 48: 636; 24 -> 144 @ 56 12: 314, 24: 325, 96: 350; 32 -> 192 @ 28
#: 24: 129, 96: 123, 192: 128; 64 -> 384 @ 14 24: 119, 96: 104, 384: 95; 96 -> 576 @ 14 24: 210, 384: 185; 160 -> 960
#: @ 7 24: 184, 192: 159, 960: 157 (each round pays for its calls: small maps want few, large ones a scratch in L2).
#: With L2 flushed before each call (as in a network): 24 -> 144 @ 56 24: 389, 48: 395; 32 -> 192 @ 28 24: 166, 192:
#: 146; 96 -> 576 @ 14 24: 234, 576: 208; 160 -> 960 @ 7 24: 185, 960: 179. The whole network (ncnn MobileNetV2,
#: 1 thread): within noise (an alternating order that favoured the second of two identical runs by 4% first showed
#: 8.24 ms against 8.51; balanced, A B peer B A, 1.04 with the same code measuring 1.02)
ROUND_FLOATS = 160 * 1024
#: :class:`PointwiseDepthwise` runs in 2 parts (over its rounds) from this many FLOPs of its expansion, below
#: ops/_blas.py's _KERNEL_SPLIT_FLOPS: AMD Zen 2, 2 threads against 1, whole networks (ncnn, min of 6 rounds of 60
#: runs, alternating the thread count; the default 2^26 first): MobileNetV2 1.02 / 0.99 -> 0.96 / 0.96,
#: EfficientNet-B0 0.98 -> 0.86, ShuffleNetV2 1.02 / 0.99 -> 1.02 / 1.01, the others unaffected (no block that
#: large); 2^23 more for MobileNetV2 (0.90) and EfficientNet (0.77) but ShuffleNetV2 1.06 / 1.07 (its 8.7 MFLOP block
#: at 56 x 56, stride 2), with the helpers sleeping between parts (session 8). With them spinning (AMD Zen 4, 2 threads,
#: A/B medians of whole networks, 2^24 -> 2^23): EfficientNet-B0 0.988, ShuffleNetV2 0.986, MobileNetV3-small 0.987
_BLOCK_SPLIT_FLOPS = 1 << 23
#: ... its (sample, round) units then claimed one at a time by the two threads (a thread late or slowed by the host
#: takes fewer; the caller never waits for more than the unit in progress), at least this many rounds a sample
_SHARED_ROUNDS = 4
_NO_SYNC = np.zeros(0, np.int64)


def round_channels(M: int, P: int, parts: int = 1) -> int:
    """Expanded channels per round of :func:`pointwise_depthwise` for M channels of P positions, in ``parts``
    parts (each part gets at least one round)."""
    whole = -(-M // (_MR * parts)) * _MR
    return max(_MR, min(whole, ROUND_FLOATS // max(P, 1) // _MR * _MR))


if numba is not None and TILES_OK and _DW_OK:  # the depthwise tiles of ops/_fast_dwtiles.py (AVX-512 or AVX2)
    from ._fast_dwtiles import _ACT_SPAN, _dw_masks, _dw_planes
    from ._llvm_sync import _relax, fetch_add, load_acquire

    #: rounds of the spin (pause, from ops/_llvm_sync.py's _SPINS on sched_yield) in which the lead thread waits for
    #: the other thread's unit in progress before it leaves that wait to ops/_blas.run_parts (a unit is ~20-150 us)
    _LEAD_SPINS = 100_000

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _pointwise_depthwise(
        x,
        wp,
        bp,
        on1,
        lo1,
        hi1,
        a1,
        p1,
        q1,
        wd,
        bd,
        s,
        pt,
        pl,
        on2,
        lo2,
        hi2,
        a2,
        p2,
        q2,
        y,
        rb,
        late,
        first,
        last,
        sync,
        lead,
    ):  # pragma: no cover
        # rounds first..last (of rb expanded channels, a multiple of _MR) of every sample: the round's 1 x 1 output
        # into the scratch, then the depthwise tiles of the scratch into Y. sync empty: every one of them here; sync
        # (2,) int64: the (sample, round) units claimed one at a time from sync[0], each counted done in sync[1]
        # (the threads of one call share them, see :class:`PointwiseDepthwise`), and the ``lead`` thread then waits
        # for the others' units in progress: False where it gave up waiting (the caller then waits for their parts)
        # (1-D slices of the flat arrays: numba keeps them contiguous, which the kernels' reshapes need)
        N, K, H, W = x.shape
        M, oh, ow = y.shape[1], y.shape[2], y.shape[3]
        k = wd.shape[1]
        P, Q = H * W, oh * ow
        e = np.empty(rb * P, np.float32)
        # the scratch of both kernels and the depthwise's column masks, once for every round
        span = max(_ACT_BLOCKS * _COLS, _ACT_SPAN)
        ea, ea2, kb = np.empty(span, np.float32), np.empty(span, np.float32), np.empty(span, np.int32)
        cms, inner = _dw_masks(W, ow, k, s, pl)
        zr = np.zeros(W + 6 * _VL, np.float32)
        wpf, wdf, yf = wp.reshape(-1), wd.reshape(-1), y.reshape(-1)
        shared = sync.shape[0] > 0
        per = last - first
        total = N * per
        u = fetch_add(sync, 0, 1) if shared else 0
        while u < total:
            n, r = u // per, first + u % per
            xr = x[n].reshape(1, K, P)
            m0, m1 = r * rb, min(M, (r + 1) * rb)
            c = m1 - m0
            b0, b1 = m0 // _MR, (m1 + _MR - 1) // _MR
            wb = wpf[b0 * K * _MR : b1 * K * _MR].reshape(b1 - b0, K, _MR)
            eb = e[: c * P].reshape(1, c, P)
            _pointwise_cols(wb, xr, bp[m0:], on1, lo1, hi1, a1, p1, q1, eb, 0, P, ea, ea2, kb, late)
            bb = bd[m0:m1] if bd.shape[0] else bd
            wdb = wdf[m0 * k * k : m1 * k * k].reshape(c, k, k)
            yb = yf[(n * M + m0) * Q : (n * M + m1) * Q].reshape(1, c, oh, ow)
            eb4 = e[: c * P].reshape(1, c, H, W)
            _dw_planes(eb4, wdb, bb, s, pt, pl, on2, lo2, hi2, a2, p2, q2, yb, cms, inner, zr, ea, ea2, kb)
            if shared:
                fetch_add(sync, 1, 1)
                u = fetch_add(sync, 0, 1)
            else:
                u += 1
        if shared and lead:
            waited = 0
            while load_acquire(sync, 1) < total:
                _relax(waited)
                waited += 1
                if waited >= _LEAD_SPINS:
                    return False
        return True


_Kernel = Callable[..., None]  # (built once: a subscripted Callable costs microseconds per call)


class PointwiseDepthwise:
    """:func:`pointwise_depthwise` with its constant arguments converted once (the fused step's load time) and each
    input shape's rounds and parts worked out at its first call: a call then costs the output's allocation and one
    compiled call (per-step overhead weighs on 14 x 14 and 7 x 7 blocks of a tenth of a millisecond)."""

    def __init__(self, wp, M, b1, clip1, wd, b2, strides, clip2, act1=(ACT_NONE, 0.0, 0.0), act2=(ACT_NONE, 0.0, 0.0)):
        f = np.float32
        bp = np.zeros(wp.shape[0] * _MR, f)
        if b1 is not None:
            bp[:M] = b1
        bd = np.zeros((0,), f) if b2 is None else np.ascontiguousarray(b2, f)
        self.M, self.stride = M, int(strides[0])
        self._pw = (wp, bp, bool(clip1[0]), f(clip1[1]), f(clip1[2]), int(act1[0]), f(act1[1]), f(act1[2]))
        self._dw = (np.ascontiguousarray(wd, f), bd)
        self._after = (bool(clip2[0]), f(clip2[1]), f(clip2[2]), int(act2[0]), f(act2[1]), f(act2[2]))
        self._plans: dict = {}

    def _plan(self, shape: tuple, begin: tuple, out: tuple) -> tuple:
        N, K, H, W = shape
        M = self.M
        shared = 2 * N * M * K * H * W >= _BLOCK_SPLIT_FLOPS and M > _MR
        rb = round_channels(M, H * W, _SHARED_ROUNDS if shared else 1)
        return (N, M) + tuple(out), rb, int(begin[0]), int(begin[1]), -(-M // rb), shared

    def __call__(self, x: np.ndarray, begin: tuple, out: tuple, bias_last: bool = False) -> np.ndarray:
        """y (N, M, *out) of x (N, K, H, W) C-contiguous float32, the depthwise's padding starting at ``begin``;
        ``bias_last``: each expanded value summed as ops/_fast_conv.py's direct kernel sums it, (0 + the terms in
        the order of k) + b, instead of b + the terms (:func:`pointwise`'s order)."""
        key = (x.shape, begin, out)
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) > 16:
                self._plans.clear()
            plan = self._plans[key] = self._plan(x.shape, begin, out)
        yshape, rb, pt, pl, rounds, shared = plan
        y = np.empty(yshape, np.float32)
        args = (x, *self._pw, *self._dw, self.stride, pt, pl, *self._after, y, rb, bool(bias_last), 0, rounds)
        kernel = cast(_Kernel, _pointwise_depthwise)  # a numba dispatcher
        if shared and _blas.threads() > 1:
            sync = np.zeros(2, np.int64)
            parts = [functools.partial(kernel, *args, sync, lead) for lead in (True, False)]
            run_parts(parts, first_completes=True)
        else:
            kernel(*args, _NO_SYNC, False)
        return y


def pointwise_depthwise(
    x, wp, M, b1, clip1, wd, b2, strides, begin, out, clip2, act1=(ACT_NONE, 0.0, 0.0), act2=(ACT_NONE, 0.0, 0.0)
) -> np.ndarray:
    """y (N, M, *out) float32 = the depthwise convolution (ops/_fast_dwtiles.py ``depthwise_tiles``: wd (M, k, k),
    b2, ``strides``, ``begin``, clipped per ``clip2``) of the 1 x 1 convolution of x (N, K, H, W) C-contiguous
    float32 (:func:`pointwise`: the packed ``wp``, b1, clipped per ``clip1``; ``act1`` / ``act2``: the activations
    of either after its clip, as :func:`pointwise` takes them), computed a round of expanded channels
    (:func:`round_channels`) at a time: every value the two kernels give apart, bit for bit, without the expanded
    tensor leaving the cache. On two threads from _BLOCK_SPLIT_FLOPS (the rounds shared, :data:`_SHARED_ROUNDS`). A
    step calling it again and again prepares a :class:`PointwiseDepthwise` instead."""
    block = PointwiseDepthwise(wp, M, b1, clip1, wd, b2, strides, clip2, act1, act2)
    return block(x, tuple(begin), tuple(out))
