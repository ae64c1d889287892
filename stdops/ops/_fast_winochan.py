"""Winograd F(4x4, 3x3) with channels in the vector lanes (numba + LLVM code, AVX-512) for 3x3 stride-1 convolutions
of 16..128 channels on maps of at least 4 tiles (:func:`takes`), where the blocked kernel of ops/_fast_winoblock.py
(tiles in the lanes) computes junk lanes (a 14 x 14 map has 16 tiles: two blocks of 16 lanes over 20 tile slots), the
direct kernels do 2.25x the multiplications and the NumPy Winograd writes V and P over the whole map.

The layout: each sample's input is first copied, zero-padded, into channels-last order, xt[y, x, c] (16 channels of
16 columns a step: 16 vector loads, an in-register transpose of 64 shuffles, 16 stores). Then, per block of tiles:

- the input transform B^T d B of a tile and 16 channels is 36 vector loads of xt (one per tile position, 16
  consecutive channels each) and the two 6 x 6 stages in registers, into V[s, t, c] (s the 36 positions);
- the products, per position s, P[s, t, m] = sum_c V[s, t, c] U[s, c, m]: ops/_fast_rowtiles.py's register tiles
  of tiles x NR vectors of 16 output channels, each sum over c in order from zero;
- the output transform A^T p A of a tile and 16 output channels, + bias, clipped, transposed in registers (16
  positions x 16 channels) and stored straight into Y (N, M, oh, ow), 4 values a row of the tile (masked at the
  map's edges).

The transforms' constants are winograd.TILES[4]'s B^T and A^T (their zero coefficients skipped, the sums in the
order of the matrices' columns). Each output is the same sum whichever block, lane or register tile holds it.
Reference: winograd.Tile.conv (NumPy; the same matrices, sums in another order: bits within F(4,3)'s error, tests/
ops/test_fast_winochan.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ._blas import _KERNEL_SPLIT_FLOPS as _SPLIT_FLOPS  # a compiled kernel's parts (see ops/_blas.py)
from ._blas import run_parts
from ._fast import _clip_args, enabled, numba
from ._fast_conv import PACKED_OK
from ._fast_rowtiles import row_tiles

_VL = 16
#: a block of tiles keeps V and P (36 x tiles x (Cp + Mp) floats) within this many floats (384 kB: L2)
_BLOCK_FLOATS = 96 * 1024

if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._llvm_lanes import Lanes, data
    from .winograd import TILES

    _BT = [[float(np.float32(v)) for v in row] for row in TILES[4].bt]
    _AT = [[float(np.float32(v)) for v in row] for row in TILES[4].at]

    def _lin(builder, lanes, coefs, vals):
        """[sum_k coefs[j][k] vals[k] for each row j]: the first nonzero term, then one fused multiply-add per
        nonzero coefficient in the order of k (a coefficient 1 as the value itself, exact either way)."""
        out = []
        for row in coefs:
            acc = None
            for c, v in zip(row, vals):
                if c == 0.0:
                    continue
                cv = ir.Constant(lanes.vec, [c] * _VL)
                if acc is None:
                    acc = v if c == 1.0 else builder.fmul(cv, v)
                else:
                    acc = builder.call(lanes.fma, [cv, v, acc])
            out.append(lanes.zero if acc is None else acc)
        return out

    def _transpose(builder, lanes, rows):
        """The 16 x 16 transpose of 16 vectors: four stages, each swapping one bit of the row index with the same
        bit of the lane index (two-operand shuffles with constant masks)."""
        i32v = ir.VectorType(lanes.i32, _VL)
        for k in range(4):
            bit = 1 << k
            lo = ir.Constant(i32v, [j if not j & bit else _VL + (j ^ bit) for j in range(_VL)])
            hi = ir.Constant(i32v, [(j ^ bit) if not j & bit else _VL + j for j in range(_VL)])
            new = list(rows)
            for i in range(_VL):
                if not i & bit:
                    new[i] = builder.shuffle_vector(rows[i], rows[i | bit], lo)
                    new[i | bit] = builder.shuffle_vector(rows[i], rows[i | bit], hi)
            rows = new
        return rows

    def _vload(builder, lanes, base, off):
        return builder.load(builder.bitcast(builder.gep(base, [off]), lanes.vptr), align=4)

    def _vstore(builder, lanes, v, base, off):
        builder.store(v, builder.bitcast(builder.gep(base, [off]), lanes.vptr), align=4)

    def _pack_codegen(context, builder, signature, args):
        x_, xoff, plane, nc, nx, t_, toff, cstride = args
        lanes = Lanes(builder)
        i64 = lanes.i64
        xd, td = data(context, builder, signature, args, 0), data(context, builder, signature, args, 5)
        m = lanes.mask(nx)
        none = ir.Constant(lanes.mvec, None)
        rows = []
        for i in range(_VL):
            ci = ir.Constant(i64, i)
            mi = builder.select(builder.icmp_signed("<", ci, nc), m, none)  # channels past C: zero, not read
            ptr = builder.bitcast(builder.gep(xd, [builder.add(xoff, builder.mul(ci, plane))]), lanes.vptr)
            rows.append(builder.call(lanes.mload, [ptr, lanes.align, mi, lanes.zero]))
        for j, v in enumerate(_transpose(builder, lanes, rows)):
            _vstore(builder, lanes, v, td, builder.add(toff, builder.mul(ir.Constant(i64, j), cstride)))
        return context.get_dummy_value()

    @intrinsic
    def _pack(typingctx, x, xoff, plane, nc, nx, t, toff, cstride):  # pragma: no cover - compiled
        """t[toff + j cstride + i] = x[xoff + i plane + j] for channels i < nc and columns j < nx, zero elsewhere
        (i, j < 16): 16 channels of 16 columns into channels-last order."""
        ip = types.intp
        return types.void(x, ip, ip, ip, ip, t, ip, ip), _pack_codegen

    def _in_codegen(context, builder, signature, args):
        t_, off, rs, cs, v_, voff, vs = args
        lanes = Lanes(builder)
        i64 = lanes.i64
        td, vd = data(context, builder, signature, args, 0), data(context, builder, signature, args, 4)
        d = [
            [_vload(builder, lanes, td, builder.add(off, builder.add(builder.mul(ir.Constant(i64, a), rs),
                                                                     builder.mul(ir.Constant(i64, b), cs))))
             for b in range(6)]
            for a in range(6)
        ]  # fmt: skip
        cols = [_lin(builder, lanes, _BT, [d[a][b] for a in range(6)]) for b in range(6)]  # cols[b][a']
        for a in range(6):
            for b, w in enumerate(_lin(builder, lanes, _BT, [cols[bb][a] for bb in range(6)])):
                _vstore(builder, lanes, w, vd, builder.add(voff, builder.mul(ir.Constant(i64, 6 * a + b), vs)))
        return context.get_dummy_value()

    @intrinsic
    def _tr_in(typingctx, t, off, rs, cs, v, voff, vs):  # pragma: no cover - compiled
        """V[voff + (6 a' + b') vs ..] (16 lanes) = (B^T d B)[a', b'] for the 6 x 6 tile d[a][b] = t[off + a rs + b cs
        ..]: the stage over a (rows) first, then over b."""
        ip = types.intp
        return types.void(t, ip, ip, ip, v, ip, ip), _in_codegen

    def _out_codegen(context, builder, signature, args):
        p_, poff, ps, b_, boff, lo, hi, y_, yoff, plane, row, nm, nrows, ncols = args
        lanes = Lanes(builder)
        i64, i32 = lanes.i64, lanes.i32
        pd, bd, yd = (data(context, builder, signature, args, i) for i in (0, 3, 7))
        p = [[_vload(builder, lanes, pd, builder.add(poff, builder.mul(ir.Constant(i64, 6 * i + j), ps)))
              for j in range(6)] for i in range(6)]  # fmt: skip
        cols = [_lin(builder, lanes, _AT, [p[i][j] for i in range(6)]) for j in range(6)]  # cols[j][r]
        bias = _vload(builder, lanes, bd, boff)
        lo_v, hi_v = lanes.splat(lo), lanes.splat(hi)
        outs = []
        for r in range(4):
            for o in _lin(builder, lanes, _AT, [cols[j][r] for j in range(6)]):  # o: position (r, q)
                outs.append(lanes.clamp(builder.fadd(o, bias), lo_v, hi_v))
        per_m = _transpose(builder, lanes, outs)  # per_m[mm] lane 4 r + q
        v4 = ir.VectorType(lanes.f32, 4)
        m4 = ir.VectorType(ir.IntType(1), 4)
        store4 = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [v4, v4.as_pointer(), i32, m4]),
            "llvm.masked.store.v4f32.p0v4f32",
        )
        bits = builder.sub(builder.shl(ir.Constant(i64, 1), ncols), ir.Constant(i64, 1))
        cmask = builder.bitcast(builder.trunc(bits, ir.IntType(4)), m4)
        none = ir.Constant(m4, None)
        for r in range(4):
            rmask = builder.select(builder.icmp_signed("<", ir.Constant(i64, r), nrows), cmask, none)
            sel = ir.Constant(ir.VectorType(i32, 4), [4 * r + q for q in range(4)])
            for mm in range(_VL):
                mask = builder.select(builder.icmp_signed("<", ir.Constant(i64, mm), nm), rmask, none)
                at = builder.add(yoff, builder.add(builder.mul(ir.Constant(i64, mm), plane),
                                                   builder.mul(ir.Constant(i64, r), row)))  # fmt: skip
                ptr = builder.bitcast(builder.gep(yd, [at]), v4.as_pointer())
                builder.call(store4, [builder.shuffle_vector(per_m[mm], lanes.undef, sel), ptr, lanes.align, mask])
        return context.get_dummy_value()

    @intrinsic
    def _tr_out(typingctx, p, poff, ps, b, boff, lo, hi, y, yoff, plane, row, nm, nrows, ncols):  # pragma: no cover
        """y[yoff + mm plane + r row + q] = clip((A^T p A)[r, q] + b[boff + mm]) for the tile p[i][j] = P[poff + (6 i +
        j) ps ..] (16 output channels in the lanes), for channels mm < nm, rows r < nrows and columns q < ncols."""
        ip, f4 = types.intp, types.float32
        return types.void(p, ip, ip, b, ip, f4, f4, y, ip, ip, ip, ip, ip, ip), _out_codegen

    # the stages are compiled functions of their own: inlined into one, the products' register tiles ran at half
    # speed (NR 3, 48 channels @20: 150 us against 53, the register allocation of one large function)

    @numba.njit(cache=True, nogil=True)
    def _to_channels_last(x, n, pt, pl, hh, ww, xt):  # pragma: no cover - compiled
        """xt (Hp, Wp, Cp) = sample n of x, zero-padded, channels last."""
        _, C, H, W = x.shape
        Hp, Wp, Cp = xt.shape
        XB = -(-ww // _VL)
        xt[:pt] = 0
        xt[pt + hh :] = 0
        xt[:, :pl] = 0
        xt[:, pl + _VL * XB :] = 0
        xf, xtf = x.reshape(-1), xt.reshape(-1)
        for cb in range(Cp // _VL):
            nc = min(_VL, C - _VL * cb)
            for yy in range(hh):
                for xb in range(XB):
                    _pack(xf, ((n * C + _VL * cb) * H + yy) * W + _VL * xb, H * W, nc, min(_VL, ww - _VL * xb),
                          xtf, ((pt + yy) * Wp + pl + _VL * xb) * Cp + _VL * cb, Cp)  # fmt: skip

    @numba.njit(cache=True, nogil=True)
    def _inputs(xt, TW, t0, nt, V):  # pragma: no cover - compiled
        """V[:, t, :] = the input transform of tile t0 + t (t < nt)."""
        _, Wp, Cp = xt.shape
        TB = V.shape[1]
        xtf, vf = xt.reshape(-1), V.reshape(-1)
        for t in range(nt):
            th, tw = (t0 + t) // TW, (t0 + t) % TW
            for cb in range(Cp // _VL):
                _tr_in(xtf, (4 * th * Wp + 4 * tw) * Cp + _VL * cb, Wp * Cp, Cp, vf, t * Cp + _VL * cb, TB * Cp)

    @numba.njit(cache=True, nogil=True)
    def _products(up, V, nt, NR, P):  # pragma: no cover - compiled
        """P[s, t] = V[s, t] @ up[s] for t < nt (ops/_fast_rowtiles.py's register tiles of NR vectors)."""
        _, Cp, Mp = up.shape
        TB = V.shape[1]
        upf, vf, pf = up.reshape(-1), V.reshape(-1), P.reshape(-1)
        for s in range(36):
            for mb in range(0, Mp, _VL * NR):
                row_tiles(upf, s * Cp * Mp + mb, Mp, vf, s * TB * Cp, Cp, Cp, pf, s * TB * Mp + mb, Mp, nt, NR)

    @numba.njit(cache=True, nogil=True)
    def _outputs(P, b, lo, hi, n, TW, t0, nt, y):  # pragma: no cover - compiled
        """Y's tiles t0 .. t0 + nt of sample n from P: the output transform, + b, clipped."""
        M, oh, ow = y.shape[1], y.shape[2], y.shape[3]
        TB, Mp = P.shape[1], P.shape[2]
        pf, yf = P.reshape(-1), y.reshape(-1)
        for t in range(nt):
            th, tw = (t0 + t) // TW, (t0 + t) % TW
            nrows, ncols = min(4, oh - 4 * th), min(4, ow - 4 * tw)
            for mb in range(Mp // _VL):
                _tr_out(pf, t * Mp + _VL * mb, TB * Mp, b, _VL * mb, lo, hi, yf,
                        ((n * M + _VL * mb) * oh + 4 * th) * ow + 4 * tw, oh * ow, ow,
                        min(_VL, M - _VL * mb), nrows, ncols)  # fmt: skip

    @numba.njit(cache=True, nogil=True)
    def _tiles(xt, up, TW, t_begin, t_end, NR, b, lo, hi, n, V, P, y):  # pragma: no cover - compiled
        """Tiles t_begin .. t_end of sample n (xt: its channels-last copy), block by block (V, P: the scratch)."""
        TB = V.shape[1]
        for t0 in range(t_begin, t_end, TB):
            nt = min(TB, t_end - t0)
            _inputs(xt, TW, t0, nt, V)
            _products(up, V, nt, NR, P)
            _outputs(P, b, lo, hi, n, TW, t0, nt, y)

    @numba.njit(cache=True, nogil=True)
    def _winochan(x, up, pt, pl, hh, ww, TW, NR, b, lo, hi, xt, V, P, y):  # pragma: no cover - compiled
        """Every sample, all its tiles in this thread."""
        T = (xt.shape[0] - 2) // 4 * TW
        for n in range(x.shape[0]):
            _to_channels_last(x, n, pt, pl, hh, ww, xt)
            _tiles(xt, up, TW, 0, T, NR, b, lo, hi, n, V, P, y)


def _vectors(Mp: int, T: int) -> int:
    """The register tile's vector count NR for Mp output channels (Mp / 16 divisible by it) and T tiles a sample.
    Measured (one AVX-512 core, ms, NR 1 / 2 / 4): 64 @14 0.080 / 0.110 / 0.088, 128 @14 0.340 / 0.301 / 0.247, 64 @56
    1.02 / 1.51 / 0.86, 128 @7 (4 tiles) 0.090 / 0.091 / 0.106, 32 @28 0.087 / 0.107; 96 @14 NR 3 0.164 against 0.215:
    12 tiles x 2 vectors runs at half speed (its 12 broadcasts a term; NR 1 folds its broadcast into the multiply-add),
    so not used, and maps of fewer tiles than a 6 x 4 tile take NR 1 (its 4-tile variant)."""
    if T < 6:
        return 1
    return 4 if Mp % 64 == 0 else 3 if Mp % 48 == 0 else 1


def pack(U: np.ndarray) -> np.ndarray:
    """U (36, M, C) as the products read it: (36, Cp, Mp) float32, C and M padded with zeros to multiples of 16."""
    S, M, C = U.shape
    Cp, Mp = -(-C // _VL) * _VL, -(-M // _VL) * _VL
    up = np.zeros((S, Cp, Mp), np.float32)
    up[:, :C, :M] = U.transpose(0, 2, 1)
    return up


def winochan(x: np.ndarray, up: np.ndarray, M: int, b, begin, out, clip=None) -> np.ndarray:
    """y (N, M, *out) float32 of the 3x3 stride-1 convolution of x (N, C, H, W) with padding ``begin`` before each
    axis (zeros after as needed), by F(4x4, 3x3) from :func:`pack` of the transformed weights, + b (M,) (or None),
    clipped to ``clip``. Layers of at least _SPLIT_FLOPS (as direct sums) run in 2 parts when the caller has 2
    threads."""
    return winochan_call(x.shape, up, M, b, begin, out, clip)(x)


def winochan_call(shape, up: np.ndarray, M: int, b, begin, out, clip=None) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`winochan` for inputs of ``shape``, everything but the input and the scratch computed now (the padded
    bias, the clip bounds, the tiles' geometry and blocks, the register tile, the split): ``fn(x) -> y``."""
    N, C, H, W = shape
    oh, ow = out
    pt, pl = int(begin[0]), int(begin[1])
    Cp, Mp = up.shape[1], up.shape[2]
    bb = np.zeros(Mp, np.float32)
    if b is not None:
        bb[:M] = b
    _, lo, hi = _clip_args(clip, np.dtype(np.float32))  # no clip: -inf, inf (the same bits)
    TH, TW = -(-oh // 4), -(-ow // 4)
    hh, ww = min(H, 4 * TH + 2 - pt), min(W, 4 * TW + 2 - pl)  # the rows and columns the tiles read
    xt_shape = (4 * TH + 2, max(4 * TW + 2, pl + -(-ww // _VL) * _VL), Cp)
    T = TH * TW
    TB = min(T, max(8, _BLOCK_FLOATS // (36 * (Cp + Mp))))
    NR = _vectors(Mp, T)
    split = T >= 2 and 18 * N * C * M * oh * ow >= _SPLIT_FLOPS
    bounds = (0, T // 2, T)

    def run(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.empty((N, M, oh, ow), np.float32)
        xt = np.empty(xt_shape, np.float32)
        V, P = np.empty((36, TB, Cp), np.float32), np.empty((36, TB, Mp), np.float32)
        if not split:
            _winochan(x, up, pt, pl, hh, ww, TW, NR, bb, lo, hi, xt, V, P, y)
            return y
        # 2 parts over each sample's tiles (ops/_blas.py's helpers; every output the same sum either way)
        scratch = ((V, P), (np.empty_like(V), np.empty_like(P)))
        for n in range(N):
            _to_channels_last(x, n, pt, pl, hh, ww, xt)
            run_parts(
                [
                    functools.partial(_tiles, xt, up, TW, bounds[i], bounds[i + 1], NR, bb, lo, hi, n, *scratch[i], y)
                    for i in range(2)
                ]
            )
        return y

    return run


#: the path on (tests turn it off to reach the paths it replaces)
USE = True
#: the channel counts it takes (C and M), and the least share of real channel pairs in the 16-padded C x M. Measured
#: through conv.py's routes against the paths they took before (one AVX-512 core, 1 thread, CPU time, min of 100
#: alternating calls, 3x3 + bias + ReLU, C -> M @ map, ms): 16 -> 16 @56 0.089 against 0.162, 32 @28 0.083 / 0.110,
#: 64 @14 0.090 / 0.176, 64 @7 0.026 / 0.045, 64 @56 0.90 / 1.43, 128 @28 1.07 / 1.59, 128 @14 0.29 / 0.46, 128 @56
#: 4.9 / 7.2, 96 @28 0.54 / 0.89, 16 -> 32 @112 0.84 / 1.19; 256 @14 3.97 / 1.68 and 512 @7 5.65 / 2.40 (U, 36 C M
#: floats, past L2: not taken); 24 @56 0.358 / 0.312 (a quarter of each vector padding: MIN_FILL). At 2 threads
#: (wall time): 64 @56 0.54 / 0.71, 128 @28 0.58 / 1.04, 64 @14 0.076 / 0.165
MIN_CH, MAX_CH = 16, 128
MIN_FILL = 0.75
#: ... and maps of at least this many 4 x 4 tiles a sample: U is 4x the direct kernel's weights, and on a map of one
#: tile reading it costs more than the products save (the ncnn ResNet-style fixture at 64 x 64, 64 -> 64 @4 and @2:
#: the model 1.22x its time with them, 32 @8 (4 tiles) 15.8 us against 52.8)
MIN_TILES = 4


def takes(cw, n: int, out, strides, dilations) -> bool:
    """Whether a convolution (ops/conv.py's ConvWeight ``cw``) takes this path: dense 3x3 stride-1 undilated float32
    2-D with MIN_CH <= C, M <= MAX_CH filling MIN_FILL of their padding, on a map of at least MIN_TILES tiles, on an
    AVX-512 machine with the compiled extra on."""
    if not (USE and n == 2 and cw.kernel == (3, 3) and cw.dtype == np.float32 and cw.group == 1):
        return False
    C, M = cw.Cg, cw.M
    if not (MIN_CH <= min(C, M) and max(C, M) <= MAX_CH and enabled() and PACKED_OK):
        return False
    fill = C * M / (-(-C // _VL) * -(-M // _VL) * _VL * _VL)
    if fill < MIN_FILL or -(-out[0] // 4) * -(-out[1] // 4) < MIN_TILES:
        return False
    return not cw.exact and tuple(strides) == (1, 1) and tuple(dilations) == (1, 1)


def packed(cw) -> np.ndarray:
    """cw's transformed weights packed for the products, kept in cw (computed at the first use)."""
    up = cw._wino.get("chan")
    if up is None:
        up = cw._wino["chan"] = pack(cw.wino(4))
    return up


def conv(x: np.ndarray, cw, b, begin, out, clip=None) -> np.ndarray:
    """The convolution by :func:`winochan` (conv.py's general way; its routes bind :func:`conv_call` instead)."""
    return winochan(x, packed(cw), cw.M, b, begin, out, clip)


def conv_call(shape, cw, b, begin, out, clip=None) -> Callable[[np.ndarray], np.ndarray]:
    """:func:`winochan_call` of cw for inputs of ``shape`` (conv.py's ConvRoutes, once per input shape)."""
    return winochan_call(shape, packed(cw), cw.M, b, begin, out, clip)
