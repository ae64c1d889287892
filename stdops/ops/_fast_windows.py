"""Compiled window kernels (numba, the optional ``fast`` extra): the im2col of a 2-D convolution built block by
block into a buffer that stays in cache (its GEMM then reads it from there), and 2-D max pooling in one pass.

- :func:`conv2d_blocked`: the columns of a block of output rows copied from the input's column phases (the
  padded input split once into ``stride`` interleaved phases, so that every tap row is one contiguous run),
  then one GEMM per block into the output's columns. The NumPy im2col (conv.py) copies a strided window view of the
  whole padded input, 9-49x the input's size through memory. Reference: conv.py's im2col path.
- :func:`max_pool2d`: as the compiled depthwise kernel (ops/_fast.py), each plane scattered into its stride
  phases, every tap one contiguous run, the running maximum over the runs; windows 3 wide at column stride 2
  (undilated) separably instead, the rows' maximum then 3 neighbours' (on AVX-512, windows of up to 3 rows: both
  passes in 16-lane vectors, :func:`_maxpool_w3s2_lanes`). Reference: pool.py's NumPy max pooling (a separable
  maximum).

Same arithmetic as the references: the GEMM sums what the reference's GEMM sums (its blocks are whole output
rows, a rule on the shape alone, see ops/_blas.py); the maximum is exact.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from . import _blas
from ._blas import matmul, run_parts
from ._fast import numba
from ._fast_conv import PACKED_OK

_VL = 16  # float32 lanes of an AVX-512 vector (the 3-wide stride-2 max pool's compiled rows)

#: a layer's columns up to _ONE_BLOCK values (4 MiB of float32) are built at once (its GEMM is then one call, split
#: by ops/_blas.py's rule); above, in blocks of _BLOCK_VALUES (1 MiB: the GEMM reads them from L2; a 7 x 7 stem)
_ONE_BLOCK = 1 << 20
_BLOCK_VALUES = 1 << 18


if numba is not None:
    from ._fast import _rows_out

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _cols(xp, kh, kw, sh, sw, dh, dw, r0, r1, ow, cols):  # pragma: no cover - compiled
        # cols (C kh kw, (r1 - r0) ow): row (c, ky, kx), column (oy - r0) ow + ox holds
        # xpad[c, oy sh + ky dh, ox sw + kx dw]
        C = xp.shape[0]
        for c in range(C):
            for ky in range(kh):
                for kx in range(kw):
                    dst = cols[(c * kh + ky) * kw + kx]
                    rx = kx * dw
                    ph, q0 = rx % sw, rx // sw
                    for oy in range(r0, r1):
                        src = xp[c, ph, oy * sh + ky * dh, q0 : q0 + ow]
                        d = dst[(oy - r0) * ow : (oy - r0 + 1) * ow]
                        for i in range(ow):
                            d[i] = src[i]

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _maxpool(x, kh, kw, sh, sw, dh, dw, pt, pl, y):  # pragma: no cover - compiled
        # y (P, oh, ow) = max over the window of the planes x (P, H, W) padded with -inf. As the depthwise kernel
        # (ops/_fast.py): each plane scattered into its sh x sw stride phases (padding -inf), every tap is then ONE
        # contiguous run of a phase for all outputs (rows at the phase width Wq, the junk columns dropped at the end)
        P, H, W = x.shape
        oh, ow = y.shape[1], y.shape[2]
        Hq = max((H - 1 + pt) // sh + 1, oh + ((kh - 1) * dh) // sh + 1)
        Wq = max((W - 1 + pl) // sw + 1, ow + ((kw - 1) * dw) // sw)
        L = -(-(oh * Wq) // 64) * 64
        ph = np.full((sh * sw, Hq * Wq + L), -np.inf, x.dtype)
        acc = np.empty(L, x.dtype)
        for p in range(P):
            plane = x[p]
            for iy in range(H):
                py = iy + pt
                base = (py // sh) * Wq
                prow = (py % sh) * sw
                src = plane[iy]
                if sw == 2:
                    half, odd = W // 2, W % 2
                    pa = pl % 2
                    e0 = ph[prow + pa, base + pl // 2 : base + pl // 2 + half + odd]
                    e1 = ph[prow + 1 - pa, base + (1 + pl) // 2 : base + (1 + pl) // 2 + half]
                    for i in range(half):
                        e0[i] = src[2 * i]
                        e1[i] = src[2 * i + 1]
                    if odd:
                        e0[half] = src[W - 1]
                else:
                    for a in range(sw):
                        ix0 = (a - pl) % sw
                        k = base + (ix0 + pl) // sw
                        dst = ph[prow + a, k : k + (W - ix0 + sw - 1) // sw]
                        for i in range(dst.shape[0]):
                            dst[i] = src[ix0 + i * sw]
            first = True
            for ky in range(kh):
                ry = ky * dh
                for kx in range(kw):
                    rx = kx * dw
                    off = (ry // sh) * Wq + rx // sw
                    run = ph[(ry % sh) * sw + rx % sw, off : off + L]
                    if first:
                        for q in range(L):
                            acc[q] = run[q]
                        first = False
                    else:
                        for q in range(L):
                            v = run[q]
                            a_ = acc[q]
                            acc[q] = v if (v > a_ or v != v) else a_  # NaN propagates as in numpy.maximum
            _rows_out(acc, Wq, y[p])


if numba is not None:

    @numba.njit(inline="always")
    def _max_nan(a, v):  # pragma: no cover - compiled
        return v if (v > a) | (v != v) else a  # NaN propagates as in numpy.maximum; no branch: vectorizes


if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._llvm_lanes import Lanes, data

    def _vmax_nan(builder, a, v):
        """_max_nan on 16 lanes: v where v > a or v is NaN, else a (the same select, lane by lane)."""
        take = builder.or_(builder.fcmp_ordered(">", v, a), builder.fcmp_unordered("uno", v, v))
        return builder.select(take, v, a)

    @intrinsic
    def _rows3(typingctx, x, ia, ib, ic, n, buf, boff):  # pragma: no cover - compiled
        """buf[boff + i] = _max_nan(_max_nan(a[i], b[i]), c[i]) for i < n, the rows a, b, c at the element offsets
        ia, ib, ic of x's data (unit stride; no array views made: each costs reference counts): 16 lanes a vector,
        the last one masked."""
        sig = types.void(x, types.intp, types.intp, types.intp, types.intp, buf, types.intp)

        def codegen(context, builder, signature, args):
            lanes = Lanes(builder)
            px, pbuf = data(context, builder, signature, args, 0), data(context, builder, signature, args, 5)
            rows = [builder.gep(px, [args[i]]) for i in (1, 2, 3)]
            n_, boff_ = args[4], args[6]
            out = builder.gep(pbuf, [boff_])
            step = ir.Constant(n_.type, _VL)
            with cgutils.for_range_slice(builder, ir.Constant(n_.type, 0), n_, step) as (j, _):
                left = builder.sub(n_, j)
                m = lanes.mask(builder.select(builder.icmp_signed("<", left, step), left, step))
                ld = [
                    builder.call(
                        lanes.mload, [builder.bitcast(builder.gep(r, [j]), lanes.vptr), lanes.align, m, lanes.zero]
                    )
                    for r in rows
                ]
                v = _vmax_nan(builder, _vmax_nan(builder, ld[0], ld[1]), ld[2])
                builder.call(lanes.mstore, [v, builder.bitcast(builder.gep(out, [j]), lanes.vptr), lanes.align, m])
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def _cols3s2(typingctx, buf, y, yoff, ow):  # pragma: no cover - compiled
        """y[yoff + o] = _max_nan(_max_nan(buf[2 o], buf[2 o + 1]), buf[2 o + 2]) for o < ow (the element offset yoff
        of y's data, unit stride; buf holds 2 ow + 34 values): each 16 outputs from the even and odd lanes of
        2 x 2 loaded vectors, the last store masked."""
        sig = types.void(buf, y, types.intp, types.intp)

        def codegen(context, builder, signature, args):
            lanes = Lanes(builder)
            pbuf, py = data(context, builder, signature, args, 0), data(context, builder, signature, args, 1)
            py = builder.gep(py, [args[2]])
            ow_ = args[3]
            i32 = lanes.i32
            even = ir.Constant(ir.VectorType(i32, _VL), [2 * i for i in range(_VL)])
            odd = ir.Constant(ir.VectorType(i32, _VL), [2 * i + 1 for i in range(_VL)])
            step = ir.Constant(ow_.type, _VL)

            def load(off):
                return builder.load(builder.bitcast(builder.gep(pbuf, [off]), lanes.vptr), align=4)

            with cgutils.for_range_slice(builder, ir.Constant(ow_.type, 0), ow_, step) as (o, _):
                j = builder.add(o, o)
                v0, v1 = load(j), load(builder.add(j, step))
                j2 = builder.add(j, ir.Constant(j.type, 2))
                v2, v3 = load(j2), load(builder.add(j2, step))
                e, od = builder.shuffle_vector(v0, v1, even), builder.shuffle_vector(v0, v1, odd)
                e2 = builder.shuffle_vector(v2, v3, even)
                v = _vmax_nan(builder, _vmax_nan(builder, e, od), e2)
                left = builder.sub(ow_, o)
                m = lanes.mask(builder.select(builder.icmp_signed("<", left, step), left, step))
                builder.call(lanes.mstore, [v, builder.bitcast(builder.gep(py, [o]), lanes.vptr), lanes.align, m])
            return context.get_dummy_value()

        return sig, codegen

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _maxpool_w3s2(x, kh, sh, pt, pl, y):  # pragma: no cover - compiled
        # windows 3 wide at column stride 2, undilated (ResNet's 3 x 3 / 2), separably: per output row the maximum
        # of its kh input rows into a -inf-padded row buffer (contiguous loops), then of 3 neighbours at stride 2
        P, H, W = x.shape
        oh, ow = y.shape[1], y.shape[2]
        buf = np.full(max(W + pl, 2 * ow + 1), -np.inf, x.dtype)
        seg = buf[pl : pl + W]
        for p in range(P):
            plane = x[p]
            for oy in range(oh):
                y0 = oy * sh - pt
                r0, r1 = max(y0, 0), min(y0 + kh, H)
                if r0 >= r1:  # the window's rows all in the padding
                    for i in range(W):
                        seg[i] = -np.inf
                elif r1 - r0 == 3:  # 3 rows (ResNet's windows off the border) in one pass, the same maximum
                    a, b, c = plane[r0], plane[r0 + 1], plane[r0 + 2]
                    for i in range(W):
                        seg[i] = _max_nan(_max_nan(a[i], b[i]), c[i])
                elif r1 - r0 == 2:
                    a, b = plane[r0], plane[r0 + 1]
                    for i in range(W):
                        seg[i] = _max_nan(a[i], b[i])
                else:
                    src = plane[r0]
                    for i in range(W):
                        seg[i] = src[i]
                    for r in range(r0 + 1, r1):
                        src = plane[r]
                        for i in range(W):
                            seg[i] = _max_nan(seg[i], src[i])
                orow = y[p, oy]
                for ox in range(ow):
                    orow[ox] = _max_nan(_max_nan(buf[2 * ox], buf[2 * ox + 1]), buf[2 * ox + 2])


if numba is not None:

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _maxpool_w3s2_lanes(x, kh, sh, pt, pl, y):  # pragma: no cover - compiled
        # _maxpool_w3s2 with both passes of an output row in 16-lane vectors (_rows3, _cols3s2: the same maxima in
        # the same order), for windows of at most 3 rows; float32 rows of x and y of unit stride. A window's 1 or 2 rows
        # take a row twice: _max_nan(_max_nan(a, b), b) is _max_nan(a, b), bit for bit (NaN payloads included)
        P, H, W = x.shape
        oh, ow = y.shape[1], y.shape[2]
        buf = np.full(max(W + pl, 2 * ow + 2) + 2 * _VL + 2, -np.inf, x.dtype)
        xs0, xs1 = x.strides[0] // 4, x.strides[1] // 4  # float32 elements
        ys0, ys1 = y.strides[0] // 4, y.strides[1] // 4
        for p in range(P):
            for oy in range(oh):
                y0 = oy * sh - pt
                r0, r1 = max(y0, 0), min(y0 + kh, H)
                if r0 >= r1:  # the window's rows all in the padding
                    for i in range(W):
                        buf[pl + i] = -np.inf
                else:
                    base = p * xs0
                    _rows3(x, base + r0 * xs1, base + min(r0 + 1, r1 - 1) * xs1, base + (r1 - 1) * xs1, W, buf, pl)
                _cols3s2(buf, y, p * ys0 + oy * ys1, ow)


def _phase_layout(x, kernel, strides, dilations, begin, out, fill):
    """x (C, H, W) zero- (or ``fill``-) padded and split into column phases: xp (C, sw, Hp, Wq), phase a holding
    the padded columns a, a + sw, ... (one strided copy per phase: numpy's copy is the fastest measured)."""
    C, H, W = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    oh, ow = out
    pt, pl = begin
    Hp = max(H + pt, (oh - 1) * sh + (kh - 1) * dh + 1)
    Wq = max(-(-(W + pl) // sw), ow + ((kw - 1) * dw) // sw)
    # only the padding is filled: the interior is written once, by the copies (a stem's input is the largest)
    xp = np.empty((C, sw, Hp, Wq), x.dtype)
    xp[:, :, :pt] = fill
    xp[:, :, pt + H :] = fill
    for a in range(sw):
        ix0 = (a - pl) % sw  # the first input column of phase a
        n = len(range(ix0, W, sw))
        q0 = (ix0 + pl) // sw
        xp[:, a, pt : pt + H, :q0] = fill
        xp[:, a, pt : pt + H, q0 + n :] = fill
        xp[:, a, pt : pt + H, q0 : q0 + n] = x[:, :, ix0::sw]
    return xp


def conv2d_blocked(x: np.ndarray, wmat: np.ndarray, kernel, strides, dilations, begin, out) -> np.ndarray:
    """y (1, M, oh, ow) = wmat (M, C kh kw) @ im2col(x) for x (1, C, H, W) float32, group 1: the columns built
    and multiplied in blocks of whole output rows (the blocks are parts that helper threads may take)."""
    _, C, H, W = x.shape
    M, K = wmat.shape
    oh, ow = out
    xp = _phase_layout(x[0], kernel, strides, dilations, begin, out, 0)
    rows = oh if K * oh * ow <= _ONE_BLOCK else max(1, min(oh, _BLOCK_VALUES // max(1, K * ow)))
    y = np.empty((M, oh * ow), x.dtype)
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    blocks = [(r0, min(oh, r0 + rows)) for r0 in range(0, oh, rows)]
    if len(blocks) == 1:
        cols = np.empty((K, oh * ow), x.dtype)
        _cols(xp, kh, kw, sh, sw, dh, dw, 0, oh, ow, cols)
        return matmul(wmat, cols, out=y).reshape(1, M, oh, ow)
    n_parts = min(len(blocks), 4)
    per = math.ceil(len(blocks) / n_parts)

    def part(i: int) -> None:
        cols = np.empty((K, rows * ow), x.dtype)
        for r0, r1 in blocks[i * per : (i + 1) * per]:
            n = (r1 - r0) * ow
            _cols(xp, kh, kw, sh, sw, dh, dw, r0, r1, ow, cols)
            np.matmul(wmat, cols[:, :n], out=y[:, r0 * ow : r1 * ow])  # a part already: not split again

    run_parts([functools.partial(part, i) for i in range(n_parts)])
    return y.reshape(1, M, oh, ow)


#: max pooling of at least this many input values (all planes) runs in 2 parts over output rows at 2 threads: after
#: a step split over output rows (ops/_fast_stem.py), each part then reads the rows its core wrote; the caller takes
#: the top half (measured, ResNet-18's 64 x 112 x 112 after its stem: 0.196 ms at 1 thread, 0.395 unsplit at 2);
#: from 2^19, not 2^18: ShuffleNetV2's 24 x 112 x 112 (0.09 ms at 1 thread) measured 0.25 ms split at 2 on a Zen 4
#: guest, where a hand-off costs ~24 us (ops/_blas.py _KERNEL_SPLIT_FLOPS)
_POOL_SPLIT_VALUES = 1 << 19


def max_pool2d(x: np.ndarray, kernel, strides, dilations, begin, out) -> np.ndarray:
    """y (N, C, oh, ow) = max over the window of x (N, C, H, W) padded with -inf (``begin`` before each axis)."""
    N, C = x.shape[:2]
    xs = np.ascontiguousarray(x).reshape((N * C,) + x.shape[2:])
    y = np.empty((N * C,) + tuple(out), x.dtype)
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    # measured: ResNet's 64 x 112 x 112 0.19 ms against 0.43; in 16-lane vectors 0.16-0.175 against 0.20-0.23
    # (alternating, 1 thread: the 3.2 MB map read from L3 bounds it; from L2, in ops/_fast_stem.py's blocks, 0.08)
    if kw == 3 and sw == 2 and dh == dw == 1:
        pool = _maxpool_w3s2_lanes if PACKED_OK and kh <= 3 else _maxpool_w3s2
        oh = out[0]
        if oh < 2 or xs.size < _POOL_SPLIT_VALUES or _blas.threads() < 2:
            pool(xs, kh, sh, begin[0], begin[1], y)
        else:  # output rows [r0, r1): the window of row oy starts at padded row (oy + r0) sh, the same maxima
            run_parts(
                [
                    functools.partial(pool, xs, kh, sh, begin[0] - r0 * sh, begin[1], y[:, r0:r1])
                    for r0, r1 in ((0, oh // 2), (oh // 2, oh))
                ]
            )
    else:
        _maxpool(xs, kh, kw, sh, sw, dh, dw, begin[0], begin[1], y)
    return y.reshape((N, C) + tuple(out))
