"""Compiled direct convolution for network stems (numba, the optional ``fast`` extra): group-1 float32 2-D
convolutions with a short sum per output (C kh kw up to ``STEM_MAX_K``: 3 input channels, 3 x 3 or 7 x 7) on
maps of any size, stride 1 or 2, undilated.

The im2col path (ops/_fast_windows.py's blocks + OpenBLAS) multiplies a GEMM of 16..64 rows by a depth of 27..147:
a shape OpenBLAS runs at a fraction of its speed, after copying the columns out (9-49 values per output). Here
instead the padded input is split once into its column phases (ops/_fast_windows.py's layout: phase a holds padded
columns a, a + sw, ...; a few channels, so the copy is small), and then every tap of an output row reads ONE
contiguous run of a phase row. The outputs are computed in register tiles of ``_MB`` output channels x ``_NV``
vectors of 16 output columns (24 AVX-512 accumulators, :func:`_tile`: an LLVM intrinsic, as ops/_fast_conv.py's,
since numba's own loops keep such accumulators in memory): per term, the ``_NV`` input vectors are loaded once and
each of the ``_MB`` weights is broadcast from a packed block that stays in L1. The bias, the clip and the masked
store of a row's last, partial vector are the tile's epilogue, straight into Y (N, M, oh, ow): no other pass over
the output. Measured (one AVX-512 core, 1 thread, kernel against the previous path in one process; see
benchmarks/bench_conv.py): ResNet-18's 7x7/2 3->64 @224 ~1.1 ms against 2.2 (onnxruntime ~1.2-1.5 ms), 3x3/2
3->16 @224 ~0.07 ms against 0.37 (onnxruntime ~0.16).

Each output sums its C kh kw products in the order of (c, ky, kx), one fused multiply-add each, then adds the bias
and clips (NaN stays NaN). Tiles past the last output channel or vector re-compute the last one (the same sum,
written twice), so that every tile is whole. AVX-512 only (``_fast_conv.PACKED_OK``); elsewhere the callers keep
the im2col path. Reference: the NumPy im2col GEMM of conv.py.
"""

from __future__ import annotations

import functools

import numpy as np

from ._blas import _SPLIT_FLOPS, run_parts
from ._fast import _clip_args, enabled, numba
from ._fast_conv import PACKED_OK

#: the register tile: _MB output channels x _NV vectors of _VL output columns (measured on 7x7/2 3->64 and 3x3/2
#: 3->16/32 @224 against 6x4, 4x6, 8x2, 12x2, 16x1: 8 x 3 first or within 5% on each)
_MB, _NV, _VL = 8, 3, 16
#: the largest sum per output (C kh kw) this path takes: above it the packed kernel (small maps) or im2col + GEMM
#: win (measured, see takes())
STEM_MAX_K = 160
#: rows narrower than this fill less than 3/4 of their one vector: from the packed kernel's depth on (conv.py's
#: _PACKED_MIN_K) it takes such small maps faster (measured: 7 x 7 outputs, K 144 and 147, 1.2x slower here; 10 x 10
#: 1.1x; 14 x 14 0.8x)
_MIN_WIDTH, _PACKED_DEPTH = 12, 64

if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def _tile(typingctx, xf, xb, offs, kn, wp, woff, yf, yb, nl, yo, bb, has_b, lo, hi):  # pragma: no cover
        """For i < _MB, v < _NV: yf[yo[i] + yb[v] + l] = clip(bb[i] (if has_b) + sum_{k < kn} wp[woff + _MB k + i]
        * xf[xb[v] + offs[k] + l]) for the lanes l < nl[v] of vector v (a masked store): the accumulators in
        registers, one fused multiply-add per term in the order of k."""
        sig = types.void(xf, xb, offs, types.intp, wp, types.intp, yf, yb, nl, yo, bb, types.boolean, lo, hi)

        def codegen(context, builder, signature, args):
            xf_, xb_, offs_, kn_, wp_, woff_, yf_, yb_, nl_, yo_, bb_, hasb_, lo_, hi_ = args
            f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
            vec, lvec = ir.VectorType(f32, _VL), ir.VectorType(i64, _VL)
            vptr = vec.as_pointer()

            def data(i, value):
                return context.make_array(signature.args[i])(context, builder, value).data

            def item(ptr, i):
                return builder.load(builder.gep(ptr, [ir.Constant(i64, i)]))

            def splat(s, vt):
                u = ir.Constant(vt, ir.Undefined)
                zeros = ir.Constant(ir.VectorType(i32, _VL), [0] * _VL)
                return builder.shuffle_vector(builder.insert_element(u, s, ir.Constant(i32, 0)), u, zeros)

            xd, xbd, od, wd = data(0, xf_), data(1, xb_), data(2, offs_), data(4, wp_)
            yd, ybd, nld, yod, bd = data(6, yf_), data(7, yb_), data(8, nl_), data(9, yo_), data(10, bb_)
            fma = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(vec, [vec, vec, vec]), "llvm.fma.v16f32"
            )
            mask_t = ir.VectorType(ir.IntType(1), _VL)
            store = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [vec, vptr, i32, mask_t]), "llvm.masked.store.v16f32.p0"
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
                    w = splat(item(wk, i), vec)
                    for v in range(_NV):
                        builder.store(builder.call(fma, [w, xs[v], builder.load(slots[i][v])]), slots[i][v])
            # the epilogue: + bias, clip (lo/hi are -inf/inf when there is none; a NaN compares false and stays)
            lov, hiv = splat(lo_, vec), splat(hi_, vec)
            lanes = ir.Constant(lvec, list(range(_VL)))
            masks = [builder.icmp_signed("<", lanes, splat(item(nld, v), lvec)) for v in range(_NV)]
            ybs = [item(ybd, v) for v in range(_NV)]
            hasb = builder.icmp_unsigned("!=", hasb_, ir.Constant(hasb_.type, 0))
            for i in range(_MB):
                bias = splat(item(bd, i), vec)
                ybase = builder.gep(yd, [item(yod, i)])
                for v in range(_NV):
                    val = builder.load(slots[i][v])
                    val = builder.select(hasb, builder.fadd(val, bias), val)
                    val = builder.select(builder.fcmp_ordered("<", val, lov), lov, val)
                    val = builder.select(builder.fcmp_ordered(">", val, hiv), hiv, val)
                    ptr = builder.bitcast(builder.gep(ybase, [ybs[v]]), vptr)
                    builder.call(store, [val, ptr, ir.Constant(i32, 4), masks[v]])
            return context.get_dummy_value()

        return sig, codegen

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _phases(x, pt, pl, sw, Hp, Wq, xp):  # pragma: no cover - compiled
        # xp (C, sw, Hp, Wq) flat (+ slack): phase a of channel c holds the zero-padded plane's columns a, a + sw, ...
        # (padded row r = input row r - pt); everything outside the input zero, the slack too
        C, H, W = x.shape
        xp[C * sw * Hp * Wq :] = 0
        plane = Hp * Wq
        for c in range(C):
            for a in range(sw):
                ix0 = (a - pl) % sw  # the first input column of phase a
                q0 = (ix0 + pl) // sw
                cnt = min(max(0, (W - ix0 + sw - 1) // sw), Wq - q0)
                for r in range(Hp):
                    row = xp[(c * sw + a) * plane + r * Wq : (c * sw + a) * plane + (r + 1) * Wq]
                    iy = r - pt
                    if iy < 0 or iy >= H:
                        row[:] = 0
                    else:
                        row[:q0] = 0
                        row[q0 + cnt :] = 0
            for iy in range(max(0, -pt), min(H, Hp - pt)):
                src = x[c, iy]
                r = iy + pt
                if sw == 1:
                    cnt = min(W, Wq - pl)
                    dst = xp[c * plane + r * Wq + pl : c * plane + r * Wq + pl + cnt]
                    for q in range(cnt):  # explicit loops: numba's slice assignment copies through a temporary
                        dst[q] = src[q]
                elif sw == 2:  # both phases in one loop: LLVM vectorizes the pair of stride-2 loads
                    pa = pl % 2  # the phase of the even input columns
                    n0 = min((W + 1) // 2, Wq - pl // 2)
                    n1 = min(W // 2, Wq - (pl + 1) // 2)
                    e0 = xp[(2 * c + pa) * plane + r * Wq + pl // 2 :]
                    e1 = xp[(2 * c + 1 - pa) * plane + r * Wq + (pl + 1) // 2 :]
                    n = min(n0, n1)
                    for i in range(n):
                        e0[i] = src[2 * i]
                        e1[i] = src[2 * i + 1]
                    for i in range(n, n0):
                        e0[i] = src[2 * i]
                    for i in range(n, n1):
                        e1[i] = src[2 * i + 1]
                else:
                    for a in range(sw):
                        ix0 = (a - pl) % sw
                        q0 = (ix0 + pl) // sw
                        cnt = min(max(0, (W - ix0 + sw - 1) // sw), Wq - q0)
                        dst = xp[(c * sw + a) * plane + r * Wq + q0 :]
                        for q in range(cnt):
                            dst[q] = src[ix0 + q * sw]

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _stem_rows(xf, offs, wp, b, lo, hi, M, oh, ow, wrow, yf, r0, r1):  # pragma: no cover - compiled
        # output rows r0 .. r1 of one sample: per block of _MB channels (clamped at M - 1), the rows' vectors in
        # tiles of _NV (the last tile clamped at the last vector); vector j of the rows: row r0 + j // nvr, columns
        # 16 (j % nvr) ..., its input at row * wrow (sh padded rows of the phase width) + column
        K = offs.shape[0]
        nvr = (ow + _VL - 1) // _VL
        nmb = wp.shape[0] // (K * _MB)
        has_b = b.shape[0] == M
        xb = np.empty(_NV, np.intp)
        yb = np.empty(_NV, np.intp)
        nl = np.empty(_NV, np.intp)
        yo = np.empty(_MB, np.intp)
        bb = np.zeros(_MB, np.float32)
        total = (r1 - r0) * nvr
        for mb in range(nmb):
            for i in range(_MB):
                m = min(mb * _MB + i, M - 1)
                yo[i] = m * (oh * ow)
                if has_b:
                    bb[i] = b[m]
            for j0 in range(0, total, _NV):
                for v in range(_NV):
                    j = min(j0 + v, total - 1)
                    row = r0 + j // nvr
                    col = (j % nvr) * _VL
                    xb[v] = row * wrow + col
                    yb[v] = row * ow + col
                    nl[v] = min(_VL, ow - col)
                _tile(xf, xb, offs, K, wp, mb * K * _MB, yf, yb, nl, yo, bb, has_b, lo, hi)


def takes(cw, n: int, out, strides, dilations) -> bool:
    """Whether a convolution (ops/conv.py's ConvWeight ``cw``, spatial rank n, output map ``out``) takes this path:
    group 1, float32, 2-D, not 1 x 1, C kh kw <= STEM_MAX_K, strides 1 or 2, undilated, on an AVX-512 machine with
    the compiled extra on; rows narrower than _MIN_WIDTH only below the packed kernel's depth (_PACKED_DEPTH)."""
    if not (n == 2 and PACKED_OK and cw.group == 1 and cw.dtype == np.float32 and enabled()):
        return False
    K = cw.Cg * cw.kernel[0] * cw.kernel[1]
    return (
        K <= STEM_MAX_K
        and cw.kernel != (1, 1)  # a 1 x 1 is a GEMM on the input itself (conv.py)
        and all(s in (1, 2) for s in strides)
        and tuple(dilations) == (1, 1)
        and (out[1] >= _MIN_WIDTH or K < _PACKED_DEPTH)
    )


def pack_weight(wmat: np.ndarray) -> np.ndarray:
    """wmat (M, K) float32 as conv2d_stem takes it: flat (ceil(M / _MB), K, _MB), each block's _MB channels
    innermost (channels past M repeat channel M - 1: the tile re-computes it)."""
    M, K = wmat.shape
    nmb = -(-M // _MB)
    rows = np.minimum(np.arange(nmb * _MB), M - 1)
    return np.ascontiguousarray(wmat[rows].reshape(nmb, _MB, K).transpose(0, 2, 1), dtype=np.float32).reshape(-1)


@functools.lru_cache(maxsize=64)
def _tap_offsets(C: int, kh: int, kw: int, sw: int, Hp: int, Wq: int) -> np.ndarray:
    """Where tap (c, ky, kx) of output (0, 0) lies in the phase layout (C, sw, Hp, Wq): phase kx % sw of channel
    c, padded row ky, column kx // sw (output (oy, ox) adds oy sh Wq + ox), in the order of K = (c, ky, kx)."""
    c, ky, kx = np.meshgrid(np.arange(C), np.arange(kh), np.arange(kw), indexing="ij")
    offs = (((c * sw + kx % sw) * Hp + ky) * Wq + kx // sw).reshape(-1).astype(np.intp)
    offs.flags.writeable = False  # shared by every call of the shape
    return offs


def conv2d_stem(x, wp, M, kernel, strides, begin, out, b=None, clip=None) -> np.ndarray:
    """y (N, M, oh, ow) of the 2-D convolution (group 1, undilated) of x (N, C, H, W) float32 with the packed
    weights ``wp`` (:func:`pack_weight` of W (M, C kh kw)), + b (M,) or None, clipped to ``clip`` (either bound
    may be None): the padded input split into column phases per sample, then register tiles straight into Y.
    Layers of at least _SPLIT_FLOPS run in 2 parts over output rows (ops/_blas.py's helpers; each output the same
    sum either way)."""
    N, C, H, W = x.shape
    (kh, kw), (sh, sw) = kernel, strides
    oh, ow = out
    pt, pl = begin
    Hp = (oh - 1) * sh + kh  # the padded rows the windows reach (more input rows are never read)
    Wq = max(-(-(W + pl) // sw), ow + (kw - 1) // sw)
    offs = _tap_offsets(C, kh, kw, sw, Hp, Wq)
    # slack: a row's last vector reads up to 15 columns past the phase width (masked off in the store)
    xp = np.empty(C * sw * Hp * Wq + _VL, np.float32)
    y = np.empty((N, M, oh, ow), np.float32)
    bb = np.zeros((0,), np.float32) if b is None else np.ascontiguousarray(b, dtype=np.float32)
    _, lo, hi = _clip_args(clip, np.dtype(np.float32))
    x = np.ascontiguousarray(x, dtype=np.float32)
    K = C * kh * kw
    parts = 2 if oh >= 2 and 2 * M * K * oh * ow >= _SPLIT_FLOPS else 1
    cuts = [oh * i // parts for i in range(parts + 1)]
    for n in range(N):
        _phases(x[n], pt, pl, sw, Hp, Wq, xp)
        yf = y[n].reshape(-1)
        run_parts(
            [
                functools.partial(_stem_rows, xp, offs, wp, bb, lo, hi, M, oh, ow, sh * Wq, yf, r0, r1)
                for r0, r1 in zip(cuts, cuts[1:])
            ]
        )
    return y
