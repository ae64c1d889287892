"""Cache-blocked Winograd F(4x4, 3x3) (numba + LLVM register tiles, AVX-512) for 3x3 stride-1 convolutions with few
channels: per block of 16 tiles, the input transform into a (36, C, 16) block, the 36 products of that block
((M, C) @ (C, 16) each, in registers), and the output transform + bias + clip straight into Y. Nothing map-sized but a
phase-split copy of the padded input exists (ops/_fast.py's ``winograd`` writes V (36, C, tiles) and P (36, M,
tiles) over the whole map: 9x the input and the output, out of L1/L2 inside a network).

Layout: the padded input split into its 4 x 4 phases, S[c, ry, rx, i TWs + j] = xpad[c, 4 i + ry, 4 j + rx], TWs =
TW + 1 tile columns (the last a junk tile: every one of a tile's 36 inputs is then S[c, a % 4, b % 4, q + (a // 4)
TWs + b // 4] for tile q = th TWs + tw, so that 16 consecutive tiles are 16 consecutive values: vector loads, no
gathers). The blocks are 16 consecutive tiles q (one vector of lanes; junk tiles computed and dropped).

The products: register tiles of 16 output channels x 16 tiles (16 accumulators, one vector of V and 16 broadcast
weights per input channel), summed over c in order from zero: each output the same sum whichever block holds its
tile and at any thread count. The transforms: 16-lane LLVM code with winograd.TILES[4]'s B^T and A^T as constants
(numba's own loops over 3-D buffers ran scalar: 16@56's input transform 170 us, output 310, against 21 and 48 now).
Reference: winograd.Tile.conv (NumPy; the same matrices, the sums in another order: the bits differ within the
F(4,3) error, tests/ops/test_fast_winoblock.py).

Where the time goes (one core, warm, the stages cut off one by one): 16 -> 16 @56, 0.135 ms: phase copy 29 us, input
transform 21, products 37, output transform 48; 64 -> 64 @56, 1.10 ms: 107, 145, 587 (near the FMA peak), 258.
"""

from __future__ import annotations

import numpy as np

from ._fast import _clip_args, enabled, numba
from ._fast_conv import PACKED_OK

#: tiles per block (the lanes of one vector) and output channels per register tile
_Q, _NM = 16, 16

if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._llvm_lanes import Lanes, data

    def _prod_codegen(context, builder, signature, args):
        up_, uoff_, v_, voff_, kn_, p_, poff_ = args
        lanes = Lanes(builder)
        vec, vptr, fma, i64 = lanes.vec, lanes.vptr, lanes.fma, lanes.i64
        udata, vdata, pdata = (data(context, builder, signature, args, i) for i in (0, 2, 5))
        slots = [cgutils.alloca_once(builder, vec) for _ in range(_NM)]
        for s in slots:
            builder.store(lanes.zero, s)
        ubase = builder.gep(udata, [uoff_])
        vbase = builder.gep(vdata, [voff_])
        with cgutils.for_range(builder, kn_) as loop:
            k = loop.index
            vv = builder.load(
                builder.bitcast(builder.gep(vbase, [builder.mul(k, ir.Constant(i64, _Q))]), vptr), align=4
            )
            uk = builder.gep(ubase, [builder.mul(k, ir.Constant(i64, _NM))])
            for i, s in enumerate(slots):
                bc = lanes.splat(builder.load(builder.gep(uk, [ir.Constant(i64, i)])))
                builder.store(builder.call(fma, [bc, vv, builder.load(s)]), s)
        pbase = builder.gep(pdata, [poff_])
        for i, s in enumerate(slots):
            ptr = builder.bitcast(builder.gep(pbase, [ir.Constant(i64, i * _Q)]), vptr)
            builder.store(builder.load(s), ptr, align=4)
        return context.get_dummy_value()

    @intrinsic
    def _prod(typingctx, up, uoff, v, voff, kn, p, poff):  # pragma: no cover - compiled
        """p[poff + 16 i + l] = sum_{k < kn} up[uoff + 16 k + i] * v[voff + 16 k + l] for i, l < 16: 16 accumulators
        in registers, one fused multiply-add per term in the order of k, from zero."""
        ip = types.intp
        return types.void(up, ip, v, ip, ip, p, ip), _prod_codegen

    from .winograd import TILES

    def _lin_codegen(coefs: np.ndarray, bias: bool):
        """out_j = sum_k coefs[j, k] d_k over 16 lanes (d_k = src[soff_k ..], out_j at dst[doff + j dstride ..]): the
        first product then one fused multiply-add per k in order, the coefficients constants of the code; ``bias``:
        + bias (a scalar) after the sum."""
        cf = [[float(np.float32(v)) for v in row] for row in coefs]

        def codegen(context, builder, signature, args):
            src_, o0, o1, o2, o3, o4, o5, dst_, doff_, dstride_ = args[:10]
            lanes = Lanes(builder)
            vec, vptr, fma, i64 = lanes.vec, lanes.vptr, lanes.fma, lanes.i64
            sdata, ddata = data(context, builder, signature, args, 0), data(context, builder, signature, args, 7)
            d = [
                builder.load(builder.bitcast(builder.gep(sdata, [o]), vptr), align=4) for o in (o0, o1, o2, o3, o4, o5)
            ]
            if bias:
                bv, lo_v, hi_v = (lanes.splat(a) for a in args[10:13])
            for j, row in enumerate(cf):
                acc = builder.fmul(ir.Constant(vec, [row[0]] * 16), d[0])
                for k in range(1, 6):
                    acc = builder.call(fma, [ir.Constant(vec, [row[k]] * 16), d[k], acc])
                if bias:  # + bias, then clipped to [lo, hi] (-inf, inf: no clip; NaN stays NaN)
                    acc = builder.fadd(bv, acc)
                    acc = builder.select(builder.fcmp_ordered(">", acc, hi_v), hi_v, acc)
                    acc = builder.select(builder.fcmp_ordered("<", acc, lo_v), lo_v, acc)
                at = builder.add(doff_, builder.mul(ir.Constant(i64, j), dstride_))
                builder.store(acc, builder.bitcast(builder.gep(ddata, [at]), vptr), align=4)
            return context.get_dummy_value()

        return codegen

    def _lin_intrinsic(coefs, bias: bool):
        ip = types.intp
        if bias:

            def typer_b(typingctx, src, o0, o1, o2, o3, o4, o5, dst, doff, dstride, bv, lo, hi):
                f4 = types.float32
                return types.void(src, ip, ip, ip, ip, ip, ip, dst, ip, ip, f4, f4, f4), _lin_codegen(coefs, True)

            return intrinsic(typer_b)

        def typer(typingctx, src, o0, o1, o2, o3, o4, o5, dst, doff, dstride):
            return types.void(src, ip, ip, ip, ip, ip, ip, dst, ip, ip), _lin_codegen(coefs, False)

        return intrinsic(typer)

    _bt_lin = _lin_intrinsic(TILES[4].bt, False)  # 6 from 6: the input transform's stages
    _at_lin = _lin_intrinsic(TILES[4].at, False)  # 4 from 6: the output transform's row stage
    _at_lin_b = _lin_intrinsic(TILES[4].at, True)  # ... and its column stage, + bias

    @numba.njit(cache=True, nogil=True)
    def _winoblock(x, up, pt, pl, TH, TW, b, lo, hi, y):  # pragma: no cover - compiled
        N, C, H, W = x.shape
        M, oh, ow = y.shape[1], y.shape[2], y.shape[3]
        MB = up.shape[1]
        M16 = MB * _NM
        TWs = TW + 1
        nq = TH * TWs
        LS = (TH + 1) * TWs + _Q + 1  # the last block's lanes read past the tiles (junk, never stored)
        NI = -(-LS // TWs)
        S = np.empty((C, 4, 4, NI * TWs), np.float32)
        Vb = np.empty((36, C, _Q), np.float32)
        Pb = np.empty((36, M16, _Q), np.float32)
        R = np.empty(6 * 6 * _Q, np.float32)
        Q = np.empty(4 * 6 * _Q, np.float32)
        Z = np.empty((4, 4, _Q), np.float32)
        Xp = np.zeros((4, NI, 4 * TWs), np.float32)  # the padded plane, rows grouped by row phase (padding: zero)
        T = np.empty(4 * _Q, np.float32)
        has_b = b.shape[0] == M
        upf, vf, pf, sf, zf = up.reshape(-1), Vb.reshape(-1), Pb.reshape(-1), S.reshape(-1), Z.reshape(-1)
        LSp = NI * TWs
        z = np.float32(0)
        w = min(W, 4 * TWs - pl)
        for n in range(N):
            # the phases of the zero-padded planes: each padded row split into its 4 column phases by one loop reading
            # 4 consecutive values a step (vector loads and shuffles, not gathers)
            for c in range(C):
                plane = x[n, c]
                for Y in range(H):
                    P_ = Y + pt
                    if P_ >= 4 * NI:
                        break
                    src, dst = plane[Y], Xp[P_ % 4, P_ // 4, pl : pl + w]
                    for k in range(w):
                        dst[k] = src[k]
                for ry in range(4):
                    flat = Xp[ry].reshape(-1)
                    d0, d1, d2, d3 = S[c, ry, 0], S[c, ry, 1], S[c, ry, 2], S[c, ry, 3]
                    for j in range(LSp):
                        d0[j] = flat[4 * j]
                        d1[j] = flat[4 * j + 1]
                        d2[j] = flat[4 * j + 2]
                        d3[j] = flat[4 * j + 3]
            for q0 in range(0, nq, _Q):
                for c in range(C):  # the input transform of 16 tiles: rows (a) then columns (b)
                    for bb in range(6):
                        base = ((c * 4) * 4 + bb % 4) * LSp + q0 + bb // 4
                        ph = 4 * LSp  # one row phase further
                        _bt_lin(sf, base, base + ph, base + 2 * ph, base + 3 * ph, base + TWs, base + ph + TWs,
                                R, bb * _Q, 6 * _Q)  # fmt: skip
                    for a in range(6):
                        r0 = a * 6 * _Q
                        _bt_lin(R, r0, r0 + _Q, r0 + 2 * _Q, r0 + 3 * _Q, r0 + 4 * _Q, r0 + 5 * _Q,
                                vf, (6 * a * C + c) * _Q, C * _Q)  # fmt: skip
                for s in range(36):  # the products: Pb[s, m, l] = sum_c U[s, m, c] Vb[s, c, l]
                    for mb in range(MB):
                        _prod(upf, (s * MB + mb) * C * _NM, vf, s * C * _Q, C, pf, (s * M16 + mb * _NM) * _Q)
                for m in range(M):  # the output transform: rows (r) then columns (t), + bias, clipped
                    for bb in range(6):
                        p0 = (bb * M16 + m) * _Q
                        pa = 6 * M16 * _Q
                        _at_lin(pf, p0, p0 + pa, p0 + 2 * pa, p0 + 3 * pa, p0 + 4 * pa, p0 + 5 * pa, Q, bb * _Q, 6 * _Q)
                    bias = b[m] if has_b else z
                    for r in range(4):
                        r0 = r * 6 * _Q
                        _at_lin_b(Q, r0, r0 + _Q, r0 + 2 * _Q, r0 + 3 * _Q, r0 + 4 * _Q, r0 + 5 * _Q,
                                  zf, r * 4 * _Q, _Q, bias, lo, hi)  # fmt: skip
                    out = y[n, m]
                    th, tw = q0 // TWs, q0 % TWs
                    for r in range(4):
                        z0, z1, z2, z3 = Z[r, 0], Z[r, 1], Z[r, 2], Z[r, 3]
                        for l in range(_Q):  # the tiles' 4 columns interleaved (vector shuffles)
                            T[4 * l] = z0[l]
                            T[4 * l + 1] = z1[l]
                            T[4 * l + 2] = z2[l]
                            T[4 * l + 3] = z3[l]
                        l, h, u = 0, th, tw
                        while l < _Q and h < TH:  # runs of one tile row's tiles: contiguous output columns
                            k = min(_Q - l, TW - u)
                            oy = 4 * h + r
                            if k > 0 and oy < oh:
                                x0 = 4 * u
                                orow, src = out[oy, x0 : min(ow, 4 * (u + k))], T[4 * l :]
                                for e in range(orow.shape[0]):
                                    orow[e] = src[e]
                            l += k + 1  # past the row's junk tile
                            h, u = h + 1, 0


def pack(U: np.ndarray) -> np.ndarray:
    """U (36, M, C) as the products read it: (36, ceil(M / 16), C, 16) float32, channels past M zero."""
    S, M, C = U.shape
    MB = -(-M // _NM)
    up = np.zeros((S, MB * _NM, C), np.float32)
    up[:, :M] = U
    return np.ascontiguousarray(up.reshape(S, MB, _NM, C).transpose(0, 1, 3, 2))


def winoblock(x: np.ndarray, up: np.ndarray, M: int, b, begin, out, clip=None) -> np.ndarray:
    """y (N, M, *out) float32 of the 3x3 stride-1 convolution of x (N, C, H, W) with padding ``begin`` before each
    axis, by F(4x4, 3x3) (winograd.TILES[4]'s matrices) in blocks of 16 tiles, from :func:`pack` of the transformed
    weights, + b (M,) (or an empty array), clipped to ``clip``."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    oh, ow = out
    y = np.empty((x.shape[0], M, oh, ow), np.float32)
    bb = np.zeros((0,), np.float32) if b is None else np.ascontiguousarray(b, dtype=np.float32)
    _, lo, hi = _clip_args(clip, np.dtype(np.float32))  # no clip: -inf, inf (the same bits)
    _winoblock(x, up, begin[0], begin[1], -(-oh // 4), -(-ow // 4), bb, lo, hi, y)
    return y


#: the shapes this path takes: C, M <= MAX_CH and output maps of MIN_TILES .. MAX_TILES tiles of 4 x 4. Measured in the
#: ncnn resnet_small at 224 x 224 (1 thread, one core, each convolution timed inside the network, the path on and off
#: alternating, medians of 300 runs, 4 runs): 32 -> 32 @28 (49 tiles) 0.158-0.184 ms against 0.186-0.196 (the path
#: it replaces: ops/_fast_stem.py's DEEP); 16 -> 16 @56 (196 tiles) 0.196-0.223 against 0.185-0.200 (the phase copy
#: S and Y push the block's working set out of L2 there; alone, warm, 0.14-0.15 against 0.17-0.18), so not taken; in
#: ResNet-18 (ONNX) 64 -> 64 @56 and 128 -> 128 @28 no gain either (1.46-1.58 against 1.47-1.52, 1.18-1.25 against
#: 1.17-1.22). Alone (warm / caches flushed, ms): 16@28 0.058/0.116 against 0.059/0.162, 32@32 0.177/0.284 against
#: 0.222/0.563; 64@28 0.331/0.467 against 0.334/0.664 and 48@40 0.454/0.538 against 0.391/0.868 (a tie or worse
#: warm: above 32 channels not taken)
MAX_CH = 32
MIN_TILES, MAX_TILES = 49, 195
#: the path on (tests turn it off to reach the paths it replaces)
USE = True


def takes(cw, n: int, out, strides, dilations) -> bool:
    """Whether a convolution (ops/conv.py's ConvWeight ``cw``, spatial rank n, output map ``out``) takes this path:
    a dense 3x3 stride-1 undilated float32 2-D one (winograd_tile's conditions) with C, M <= MAX_CH on a map of
    MIN_TILES .. MAX_TILES tiles, on an AVX-512 machine with the compiled extra on."""
    if not (USE and n == 2 and cw.kernel == (3, 3) and cw.dtype == np.float32 and max(cw.Cg, cw.M) <= MAX_CH):
        return False
    tiles = -(-out[0] // 4) * -(-out[1] // 4)
    if not (MIN_TILES <= tiles <= MAX_TILES and enabled() and PACKED_OK):
        return False
    return cw.winograd_tile(strides, dilations, out) == 4


def conv(x: np.ndarray, cw, b, begin, out, clip=None) -> np.ndarray:
    """The convolution by :func:`winoblock`, the packed weights kept in cw (computed at the first run)."""
    up = cw._wino.get("block")
    if up is None:
        up = cw._wino["block"] = pack(cw.wino(4))
    return winoblock(x, up, cw.M, b, begin, out, clip)
