"""Compiled direct convolution for network stems (numba, the optional ``fast`` extra): group-1 float32 2-D
convolutions with a short sum per output (C kh kw up to ``STEM_MAX_K``: 3 input channels, 3 x 3 or 7 x 7; deeper
sums on the maps and strides of ``DEEP``) on maps of any size, stride 1 or 2, undilated.

The im2col path (ops/_fast_windows.py's blocks + OpenBLAS) multiplies a GEMM of 16..64 rows by a depth of 27..147:
a shape OpenBLAS runs at a fraction of its speed, after copying the columns out (9-49 values per output). Here
instead the padded input is split once into its column phases (ops/_fast_windows.py's layout: phase a holds padded
columns a, a + sw, ...; a few channels, so the copy is small), and then every tap of an output row reads ONE
contiguous run of a phase row. The outputs are computed in register tiles of ``_MB`` output channels x ``_NV``
vectors of 16 output columns (24 AVX-512 accumulators, :func:`_tile`: an LLVM intrinsic, as ops/_fast_conv.py's,
since numba's own loops keep such accumulators in memory): per term, the ``_NV`` input vectors are loaded once and
each of the ``_MB`` weights is broadcast from a packed block that stays in L1. The bias, the clip and the masked
store of a row's last, partial vector are the tile's epilogue, straight into Y (N, M, oh, ow): no other pass over
the output. Measured (one AVX-512 core, 1 thread, the layer inside its model, medians of alternating runs against
the path it replaces; onnxruntime's own layer from its profiler): ResNet-18's 7x7/2 3->64 @224 2.76 -> 1.50 ms
(onnxruntime 1.30), MobileNetV3's 3x3/2 3->16 0.45 -> 0.18 (0.134), MobileNetV2's 3->32 0.55 -> 0.28, the ncnn
ResNet-style fixture's 7x7/2 3->16 0.98 -> 0.40. The kernel alone reaches 190-205 GFLOP/s on 7 x 7 stems (numpy's
GEMM ~195 on this core) and 150-160 on 3 x 3 ones (its epilogue weighs on 27 terms).

Each output sums its C kh kw products in the order of (c, ky, kx), one fused multiply-add each, then adds the bias
and clips (NaN stays NaN). Tiles past the last output channel or vector re-compute the last one (the same sum,
written twice), so that every tile is whole. AVX-512, or AVX2 + FMA with a tile of its own (4 channels x 3
vectors of 8 lanes: 16 ymm registers; ``TILES_OK``); elsewhere the callers keep the im2col path. The tile's shape
changes which outputs a tile holds, never an output's sum. Reference: the NumPy im2col GEMM of conv.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import cast

import numpy as np

from ._blas import run_parts
from ._fast import _clip_args, enabled, numba
from ._fast_conv import AVX2, AVX512

#: 2 parts (over output rows) from this many FLOPs where the caller has 2 threads, below ops/_blas.py's
#: _KERNEL_SPLIT_FLOPS since the helpers spin (a hand-off ~5-15 us). Alone, 1 -> 2 threads (AMD Zen 4, medians):
#: 3 -> 32 at 224 stride 2 (21.7 M) 429 -> 191 us, 3 -> 16 with HardSwish 322 -> 181
_SPLIT_FLOPS = 1 << 23

#: the register tile: _MB output channels x _NV vectors of _VL output columns (measured on 7x7/2 3->64 and 3x3/2
#: 3->16/32 @224 against 6x4, 4x6, 8x2, 12x2, 16x1: 8 x 3 first or within 5% on each)
_MB, _NV, _VL = 8, 3, 16
if not AVX512:
    # AVX2 + FMA (AMD Zen 3, 16 ymm registers): 4 channels x 3 vectors of 8 columns, 12 accumulators beside 3 input
    # vectors and a broadcast. Measured through conv_forward against the path it replaces (alternating, 1 thread,
    # CPU time, medians of 40 rounds): 7x7/2 3->64 @224 0.68x its time, 3->16 0.50x; 3x3/2 3->32 @224 0.51x, 3->16
    # 0.47x, 3->24 0.52x; 3x3 K 144 @56 0.79x. 6 x 2 of 8 lanes: within 5% of it (M 16 and 32 off its blocks);
    # 6 x 1 of 16 lanes (two ymm a vector) 0.47-0.69x; 4 x 1 0.52-0.76x; 7 x 2 spills: 0.65-1.26x
    _MB, _NV, _VL = 4, 3, 8
#: the path's gate: AVX-512, or AVX2 + FMA with the tile above
TILES_OK = AVX512 or AVX2
#: AVX2: tiles of whole vectors store by plain stores (a masked store costs many on AMD Zen 3)
_PLAIN_STORES = not AVX512
#: the largest sum per output (C kh kw) this path takes on any map (measured against the path conv.py takes
#: otherwise, one thread: 3x3 stride 1 K 144-180 @56 0.9x, K 216-576 @56 1.1-1.6x Winograd's time; 5x5 K 200 0.4x
#: im2col + GEMM's)
STEM_MAX_K = 160
#: ... and deeper sums where the alternatives do worse: (strides, at most this many outputs (None: any), at most
#: this K). Measured (3x3, 1 thread): stride 1 @28 K 288 0.7x, 432 0.9x, 576 1.2x; @14 K 576 0.75x, 1152 0.95x;
#: stride 2 K 288-576 0.8-0.86x (outputs 14 x 14 to 28 x 28, against im2col), 1152 0.93-1.17x; above 196 outputs
#: the packed direct kernel takes them (conv_paths.py _PACKED_MAX_OUT_S2: ResNet-18 0.5% faster). In the ResNet-style
#: ncnn fixture (its 32@28 and 64@14 3x3 layers, 32->64 /2): the model 0.91x its time with STEM_MAX_K only;
#: ResNet-18 0.99x
DEEP = (((1, 1), 196, 576), ((1, 1), 784, 432), ((2, 2), 196, 576))
if not AVX512:
    # AVX2 (the AVX2 tile; no packed kernel there): @28 stride 1 K 288 1.11-1.13x, K 432 1.05-1.29x the time of the
    # path conv.py takes otherwise; @14 K 576 0.62-0.68x, stride 2 @28 K 288 0.67-0.72x, K 576 0.70-0.76x
    # (conv_forward, alternating, 1 thread, CPU time, medians): stride 2 K 288 -> 28 x 28 0.87-0.91x, K 432 0.91x,
    # K 576 0.84x, K 1152 -> 14 x 14 0.86-0.92x; stride 1 K 1152 @14 1.07x
    DEEP = (((1, 1), 196, 576), ((2, 2), 784, 1152))
    # any map up to K 288 (no packed Winograd on AVX2): @56 K 180 0.72-0.76x, K 216 0.44-0.47x, K 288 0.62-0.64x;
    # @28 K 216 0.75x, K 288 1.00-1.01x; 5 x 5 K 200 @28 0.44-0.57x; K 360 @56 1.20x, K 576 @56 1.34-1.44x
    STEM_MAX_K = 288
#: the path on (the tests and benchmarks/bench_conv.py --old-stem turn it off to reach the paths it replaces)
USE = True
#: rows narrower than this fill less than 3/4 of their one vector: from the packed kernel's depth on (conv.py's
#: _PACKED_MIN_K) it takes such small maps faster (measured: 7 x 7 outputs, K 144 and 147, 1.2x slower here; 10 x 10
#: 1.1x; 14 x 14 0.8x)
_MIN_WIDTH, _PACKED_DEPTH = 12, 64
if not AVX512:
    # AVX2: no packed kernel, and 8-lane vectors (7 x 7 outputs fill 7/8 of theirs): any width. Measured against
    # the path conv.py takes otherwise (as above): 3x3 K 576 @7 0.56x, K 144 @7 0.43x, K 27 @7 0.40x, K 72 @10 0.48x
    _MIN_WIDTH = 1

if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._llvm_lanes import Lanes, data

    _LANES = functools.partial(Lanes, width=_VL)

    @intrinsic
    def _tile(typingctx, xf, xb, offs, kn, wp, woff, yf, yb, nl, yo, bb, has_b, lo, hi):  # pragma: no cover
        """For i < _MB, v < _NV: yf[yo[i] + yb[v] + l] = clip(bb[i] (if has_b) + sum_{k < kn} wp[woff + _MB k + i]
        * xf[xb[v] + offs[k] + l]) for the lanes l < nl[v] of vector v (a masked store): the accumulators in
        registers, one fused multiply-add per term in the order of k."""
        sig = types.void(xf, xb, offs, types.intp, wp, types.intp, yf, yb, nl, yo, bb, types.boolean, lo, hi)

        def codegen(context, builder, signature, args):
            xf_, xb_, offs_, kn_, wp_, woff_, yf_, yb_, nl_, yo_, bb_, hasb_, lo_, hi_ = args
            lanes = _LANES(builder)
            i32, i64, vec, vptr, fma, store = lanes.i32, lanes.i64, lanes.vec, lanes.vptr, lanes.fma, lanes.mstore
            lvec = ir.VectorType(i64, _VL)

            def item(ptr, i):
                return builder.load(builder.gep(ptr, [ir.Constant(i64, i)]))

            def splat_i64(s):
                u = ir.Constant(lvec, ir.Undefined)
                zeros = ir.Constant(ir.VectorType(i32, _VL), [0] * _VL)
                return builder.shuffle_vector(builder.insert_element(u, s, ir.Constant(i32, 0)), u, zeros)

            xd, xbd, od, wd, yd, ybd, nld, yod, bd = (
                data(context, builder, signature, args, i) for i in (0, 1, 2, 4, 6, 7, 8, 9, 10)
            )
            slots = [[cgutils.alloca_once(builder, vec) for _ in range(_NV)] for _ in range(_MB)]
            for row in slots:
                for s in row:
                    builder.store(ir.Constant(vec, None), s)
            xptrs = [builder.gep(xd, [item(xbd, v)]) for v in range(_NV)]
            wbase = builder.gep(wd, [woff_])
            with cgutils.for_range(builder, kn_) as loop:
                k = loop.index
                off = builder.load(builder.gep(od, [k]))
                xs = [builder.load(builder.bitcast(builder.gep(p, [off]), vptr), align=4) for p in xptrs]
                wk = builder.gep(wbase, [builder.mul(k, ir.Constant(k.type, _MB))])
                for i in range(_MB):
                    w = lanes.splat(item(wk, i))
                    for v in range(_NV):
                        builder.store(builder.call(fma, [w, xs[v], builder.load(slots[i][v])]), slots[i][v])
            # the epilogue: + bias, clip (lo/hi are -inf/inf when there is none; a NaN compares false and stays)
            lov, hiv = lanes.splat(lo_), lanes.splat(hi_)
            lane = ir.Constant(lvec, list(range(_VL)))
            masks = [builder.icmp_signed("<", lane, splat_i64(item(nld, v))) for v in range(_NV)]
            ybs = [item(ybd, v) for v in range(_NV)]
            hasb = builder.icmp_unsigned("!=", hasb_, ir.Constant(hasb_.type, 0))

            def finished(slot, bias):  # + bias (where given), clipped
                val = builder.load(slot)
                val = builder.select(hasb, builder.fadd(val, bias), val)
                val = builder.select(builder.fcmp_ordered("<", val, lov), lov, val)
                return builder.select(builder.fcmp_ordered(">", val, hiv), hiv, val)

            if _PLAIN_STORES:  # AVX2: a masked store costs many plain ones (AMD Zen 3), whole vectors take those
                outs = []
                for i in range(_MB):
                    bias = lanes.splat(item(bd, i))
                    ybase = builder.gep(yd, [item(yod, i)])
                    for v in range(_NV):
                        val = finished(slots[i][v], bias)
                        outs.append((val, builder.bitcast(builder.gep(ybase, [ybs[v]]), vptr), v))
                whole = builder.icmp_signed("==", item(nld, 0), ir.Constant(i64, _VL))
                for v in range(1, _NV):
                    whole = builder.and_(whole, builder.icmp_signed("==", item(nld, v), ir.Constant(i64, _VL)))
                with builder.if_else(whole, likely=True) as (then, otherwise):
                    with then:
                        for val, ptr, _ in outs:
                            builder.store(val, ptr, align=4)
                    with otherwise:
                        for val, ptr, v in outs:
                            builder.call(store, [val, ptr, lanes.align, masks[v]])
                return context.get_dummy_value()
            for i in range(_MB):
                bias = lanes.splat(item(bd, i))
                ybase = builder.gep(yd, [item(yod, i)])
                for v in range(_NV):
                    val = finished(slots[i][v], bias)
                    ptr = builder.bitcast(builder.gep(ybase, [ybs[v]]), vptr)
                    builder.call(store, [val, ptr, lanes.align, masks[v]])
            return context.get_dummy_value()

        return sig, codegen

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _phases2(x, pt, pl, Hp, Wq, xp):  # pragma: no cover - compiled
        # column stride 2: xp (C, 2, Hp, Wq) flat (+ slack), phase a of channel c holding the zero-padded plane's
        # columns a, a + 2, ... (padded row r = input row r - pt); everything outside the input zero, the slack too
        C, H, W = x.shape
        n_lay = C * 2 * Hp * Wq
        for q in range(n_lay, xp.shape[0]):
            xp[q] = 0
        xp4 = xp[:n_lay].reshape((C, 2, Hp, Wq))
        pa = pl % 2  # the phase of the even input columns
        n0 = min((W + 1) // 2, Wq - pl // 2)  # even input columns in a row of phase pa
        n1 = min(W // 2, Wq - (pl + 1) // 2)  # odd ones in phase 1 - pa
        n = min(n0, n1)
        for c in range(C):
            for a in range(2):
                q0 = pl // 2 if a == pa else (pl + 1) // 2
                cnt = n0 if a == pa else n1
                for r in range(Hp):  # the padding (explicit loops on rows: measured faster than slices)
                    row = xp4[c, a, r]
                    if r < pt or r >= pt + H:
                        for q in range(Wq):
                            row[q] = 0
                    else:
                        for q in range(q0):
                            row[q] = 0
                        for q in range(q0 + cnt, Wq):
                            row[q] = 0
            for iy in range(max(0, -pt), min(H, Hp - pt)):  # both phases in one loop: LLVM vectorizes the pairs
                src = x[c, iy]
                e0 = xp4[c, pa, iy + pt, pl // 2 :]
                e1 = xp4[c, 1 - pa, iy + pt, (pl + 1) // 2 :]
                for i in range(n):
                    e0[i] = src[2 * i]
                    e1[i] = src[2 * i + 1]
                for i in range(n, n0):
                    e0[i] = src[2 * i]
                for i in range(n, n1):
                    e1[i] = src[2 * i + 1]


def _phases1(x, pt, pl, Hp, Wq, xp) -> None:
    """Column stride 1: xp (C, Hp, Wq) flat (+ slack), all zero (np.zeros: the padding, the same places every
    sample) = x zero-padded (``pt`` rows, ``pl`` columns before, as many after as the layout holds), by one NumPy copy
    (measured 2-2.5x faster than a compiled loop: 16 x 56 x 56 0.026 -> 0.011 ms; and the zeros from np.zeros rather
    than a copy per side, the allocation included: 16 x 56 x 56 17.9 -> 15.3 us, 32 x 28 x 28 16.1 -> 8.3, 64 x 7 x 7
    7.2 -> 4.2)."""
    C, H, W = x.shape
    h, w = min(H, Hp - pt), min(W, Wq - pl)
    xp[: C * Hp * Wq].reshape(C, Hp, Wq)[:, pt : pt + h, pl : pl + w] = x[:, :h, :w]


if numba is not None:

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _stem_rows(xf, offs, wp, b, lo, hi, M, oh, ow, wrow, yf, r0, r1):  # pragma: no cover - compiled
        # output rows r0 .. r1 of one sample: per block of _MB channels (clamped at M - 1), the rows' vectors in
        # tiles of _NV; vector j of the rows: row r0 + j // nvr, columns 16 (j % nvr) ..., its input at row * wrow
        # (sh padded rows of the phase width) + column. The vectors' offsets are tabled once (no divisions per tile),
        # the table padded to whole tiles with the last vector (re-computed: the same sum, written twice).
        K = offs.shape[0]
        nvr = (ow + _VL - 1) // _VL
        nmb = wp.shape[0] // (K * _MB)
        has_b = b.shape[0] == M
        total = (r1 - r0) * nvr
        padded = (total + _NV - 1) // _NV * _NV
        xb = np.empty(padded, np.intp)
        yb = np.empty(padded, np.intp)
        nl = np.empty(padded, np.intp)
        j = 0
        for row in range(r0, r1):
            for col in range(0, nvr * _VL, _VL):
                xb[j] = row * wrow + col
                yb[j] = row * ow + col
                nl[j] = min(_VL, ow - col)
                j += 1
        for j in range(total, padded):
            xb[j], yb[j], nl[j] = xb[total - 1], yb[total - 1], nl[total - 1]
        yo = np.empty(nmb * _MB, np.intp)
        bb = np.zeros(nmb * _MB, np.float32)
        for i in range(nmb * _MB):
            m = min(i, M - 1)
            yo[i] = m * (oh * ow)
            if has_b:
                bb[i] = b[m]
        for mb in range(nmb):
            ym, bm = yo[mb * _MB :], bb[mb * _MB :]
            for j0 in range(0, padded, _NV):
                _tile(xf, xb[j0:], offs, K, wp, mb * K * _MB, yf, yb[j0:], nl[j0:], ym, bm, has_b, lo, hi)


if numba is not None:

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _stem_groups(xf, offs, wp, b, lo, hi, M, oh, ow, wrow, yf, G, r0, r1):  # pragma: no cover - compiled
        # a grouped convolution (G groups, RegNet's 8-channel ones): _stem_rows per group on the phases of every
        # input channel, the group's taps a run of offs ((c, ky, kx) order, c outermost), its packed weights a run of
        # wp, its outputs a run of yf's channels
        K, Mg = offs.shape[0] // G, M // G
        span = (Mg + _MB - 1) // _MB * K * _MB
        has_b = b.shape[0] == M
        plane = oh * ow
        for g in range(G):
            bg = b[g * Mg : (g + 1) * Mg] if has_b else b
            og, wg = offs[g * K : (g + 1) * K], wp[g * span : (g + 1) * span]
            _stem_rows(xf, og, wg, bg, lo, hi, Mg, oh, ow, wrow, yf[g * Mg * plane : (g + 1) * Mg * plane], r0, r1)


def takes(cw, n: int, out, strides, dilations) -> bool:
    """Whether a convolution (ops/conv.py's ConvWeight ``cw``, spatial rank n, output map ``out``) takes this path:
    float32, 2-D, not 1 x 1, C kh kw <= STEM_MAX_K per group (or within DEEP's limits), strides 1 or 2, undilated,
    on an AVX-512 or AVX2 machine with the compiled extra on; rows narrower than _MIN_WIDTH only below the packed
    kernel's depth (_PACKED_DEPTH) or grouped (no other compiled path: :func:`_stem_groups`). Depthwise layers (one
    channel a group) have kernels of their own."""
    grouped = cw.group > 1
    if not (USE and n == 2 and TILES_OK and cw.dtype == np.float32 and enabled()) or (grouped and cw.Cg == 1):
        return False
    K = cw.Cg * cw.kernel[0] * cw.kernel[1]
    strides = tuple(strides)
    if K > STEM_MAX_K:
        P = out[0] * out[1]
        if not any(s == strides and (p is None or P <= p) and K <= k for s, p, k in DEEP):
            return False
    return (
        cw.kernel != (1, 1)  # a 1 x 1 is a GEMM on the input itself (conv.py)
        and all(s in (1, 2) for s in strides)
        and tuple(dilations) == (1, 1)
        and (out[1] >= _MIN_WIDTH or K < _PACKED_DEPTH or grouped)
    )


def pack_weight(wmat: np.ndarray) -> np.ndarray:
    """wmat (M, K) float32 as conv2d_stem takes it: flat (ceil(M / _MB), K, _MB), each block's _MB channels
    innermost (channels past M repeat channel M - 1: the tile re-computes it); wmat (G, M / G, K) of a grouped
    convolution: each group's so, one after the other."""
    if wmat.ndim == 3:
        return np.concatenate([pack_weight(g) for g in wmat])
    M, K = wmat.shape
    nmb = -(-M // _MB)
    rows = np.minimum(np.arange(nmb * _MB), M - 1)
    return np.ascontiguousarray(wmat[rows].reshape(nmb, _MB, K).transpose(0, 2, 1), dtype=np.float32).reshape(-1)


@functools.lru_cache(maxsize=64)
def _layout(C: int, H: int, W: int, kernel, strides, begin, out):
    """(Hp, Wq, offsets, size) of a shape's phase layout: Hp padded rows (those the windows reach), phases of Wq
    columns, the offset of tap (c, ky, kx) of output (0, 0) (phase kx % sw of channel c, padded row ky, column
    kx // sw; output (oy, ox) adds oy sh Wq + ox) in the order of K = (c, ky, kx), and the buffer's size (the
    layout, then the slack a row's last vector reads past the phase width, masked off in the store)."""
    (kh, kw), (sh, sw), (oh, ow) = kernel, strides, out
    Hp = (oh - 1) * sh + kh
    Wq = max(-(-(W + begin[1]) // sw), ow + (kw - 1) // sw)
    c, ky, kx = np.meshgrid(np.arange(C), np.arange(kh), np.arange(kw), indexing="ij")
    offs = (((c * sw + kx % sw) * Hp + ky) * Wq + kx // sw).reshape(-1).astype(np.intp)
    offs.flags.writeable = False  # shared by every call of the shape
    return Hp, Wq, offs, C * sw * Hp * Wq + _VL


_NO_BIAS = np.zeros((0,), np.float32)
_Kernel = Callable[..., None]
_F32 = np.dtype(np.float32)


def conv2d_stem(x, wp, M, kernel, strides, begin, out, b=None, clip=None, groups=1) -> np.ndarray:
    """y (N, M, oh, ow) of the 2-D convolution (undilated, ``groups`` groups) of x (N, C, H, W) float32 with the
    packed weights ``wp`` (:func:`pack_weight` of W (M, C kh kw), or (G, M / G, C / G kh kw)), + b (M,) or None,
    clipped to ``clip`` (either bound may be None): the padded input split into column phases per sample, then
    register tiles straight into Y. Layers of at least _SPLIT_FLOPS run in 2 parts over output rows (ops/_blas.py's
    helpers; each output the same sum either way)."""
    return stem_call(x.shape, wp, M, kernel, strides, begin, out, b, clip, groups)(x)


def stem_call(
    shape, wp, M, kernel, strides, begin, out, b=None, clip=None, groups=1
) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`conv2d_stem` for inputs of ``shape``, everything but the input computed now: ``fn(x) -> y`` (a
    convolution that runs again and again pays only for its copies and its kernel; the per-call layout look-up,
    clip and split arithmetic cost ~2 us)."""
    N, C, H, W = shape
    oh, ow = out
    Hp, Wq, offs, size = _layout(C, H, W, tuple(kernel), tuple(strides), tuple(begin), tuple(out))
    sh, sw = strides
    pt, pl = begin
    zeros = np.zeros if sw == 1 else np.empty  # _phases1 writes the input only, _phases2 every value
    bb = _NO_BIAS if b is None else np.ascontiguousarray(b, dtype=np.float32)
    _, lo, hi = _clip_args(clip, _F32)
    parts = 2 if oh >= 2 and 2 * M * offs.shape[0] // groups * oh * ow >= _SPLIT_FLOPS else 1
    wrow = sh * Wq
    yshape = (N, M, oh, ow)

    def stem(x: np.ndarray) -> np.ndarray:
        xp = zeros(size, np.float32)
        y = np.empty(yshape, np.float32)
        if not (x.dtype == _F32 and x.flags.c_contiguous):
            x = np.ascontiguousarray(x, dtype=np.float32)
        for n in range(N):
            (_phases1 if sw == 1 else _phases2)(x[n], pt, pl, Hp, Wq, xp)
            yf = y[n].reshape(-1)
            args = (xp, offs, wp, bb, lo, hi, M, oh, ow, wrow, yf) + (() if groups == 1 else (groups,))
            kernel = cast(_Kernel, _stem_rows if groups == 1 else _stem_groups)  # numba dispatchers
            if parts == 1:
                kernel(*args, 0, oh)
                continue
            run_parts([functools.partial(kernel, *args, oh * i // 2, oh * (i + 1) // 2) for i in range(2)])
        return y

    return stem
