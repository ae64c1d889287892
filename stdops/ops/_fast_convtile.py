"""The register tiles of ops/_fast_conv.py's packed convolution kernel, as LLVM code (numba ``@intrinsic``, the pieces
of ops/_llvm_lanes.py): a tile is one or two segments of _TILE_P output positions x _TILE_M output channels, every
product summed in registers (AVX-512's zmm, or AVX2's ymm: tile shapes of their own) over a chunk of K in the order
of k, the accumulators started from zero or from a buffer and left in it, or (the in-place tiles' last chunk) + bias,
clipped and stored transposed into Y. Why LLVM and what each choice measured: ops/_fast_conv.py's module doc.
Imported by it alone. numba's on-disk cache of ops/_fast_conv.py's compiled drivers does not notice edits here:
delete stdops/ops/__pycache__/_fast_conv.* after editing this file.
"""

from __future__ import annotations

from ._fast import cpu_has, numba

#: the AVX-512 tile shapes (32 zmm registers) where the host has AVX-512, else AVX2's (16 ymm registers)
_WIDE = numba is None or cpu_has("avx512f")  # as ops/_fast_conv.py AVX512 (which imports this module)
#: a segment of the register tile: _TILE_P output positions x _TILE_M output channels, the weights packed
#: (M / _TILE_M, K, _TILE_M), the columns (P / _TILE_P, K, _XS), so that both stream contiguously through the
#: tile's loop over K. AVX-512: 32 channels (two 16-float vectors), 14 vector accumulators, segments in pairs
#: (_SEGS: 28 accumulators). AVX2: 16 channels (one vector: two ymm halves), 7 positions, one segment: 14 ymm
#: accumulators, a broadcast, the weights read as the multiply-adds' memory operands (see _SEGS)
_TILE_P, _VL = 7, 16
_TILE_M = 32 if _WIDE else 16
#: segments a tile runs at once (the drivers' step over position tiles): a pair on AVX-512, one on AVX2 (two
#: would need 28 ymm accumulators of 16)
_SEGS = 2 if _WIDE else 1
#: the columns' stride per K step: a tile's 7 inputs padded to 8 (one 32-byte run, copied as one vector)
_XS = 8
#: the K loop in chunks of _K_CHUNK (32 KiB of packed weights: in L1 for the _TILE_P-position tiles that share them)
_K_CHUNK = 256
#: software prefetch (into L2) of the packed weights this many K steps ahead: one chunk, so that the next chunk's
#: weights come from memory while every position tile works on this one (OpenBLAS packs its operands first, then
#: multiplies). Measured in ResNet-18 (layer4's 512 x 4608 x 49 products): 1.48 ms a layer against 1.70 prefetching
#: 32 steps ahead into L1, 2.0 by OpenBLAS
_PREFETCH = _K_CHUNK
#: the tiles reading 1 x 1 stride 2 from x's planes prefetch their own inputs this many terms ahead (into L1; each
#: term a plane of its own, too far apart for the hardware's stride prefetcher): see ops/_fast_conv.py conv2d_packed
_PFX_AHEAD = 16

if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._llvm_lanes import Lanes, data

    class _VolatileLoad(ir.instructions.LoadInstr):
        """A volatile load: LLVM neither merges two of them nor keeps one in a register for several uses, so each
        folds into its one multiply-add as a memory operand (AVX2's tile: the registers go to the accumulators)."""

        def descr(self, buf):
            text: list[str] = []
            super().descr(text)
            buf.append("".join(text).replace("load ", "load volatile ", 1))

    def _volatile_load(builder, ptr):
        ld = _VolatileLoad(builder.block, ptr)
        ld.align = 4
        builder._insert(ld)
        return ld

    # AVX2 (16 ymm registers): a single segment's 7 x 16 tile holds 14 ymm accumulators; with the step's weights (two
    # ymm) and a broadcast that is 17 and LLVM spilled accumulators every step (two steps unrolled: 13 spill stores a
    # step). So only the weights' low half stays in a register and the high half is read again by each of its 7
    # multiply-adds (a volatile load: LLVM neither merges them nor hoists one into a register; each folds into its
    # vfmadd231ps as a memory operand): 16 registers, no spill, 8 vector loads and 7 broadcasts a step for 14 FMAs.
    # Alternating, 1 thread, Zen 3, x the portable paths' time (OpenBLAS im2col; NumPy Winograd): 3x3 512@7 1.13
    # (spilling) -> 0.93 (all 14 weight reads as memory operands: 21 loads a step, over two 256-bit loads a cycle) ->
    # 0.69 (this); 3x3/2 128@28 -> 256 1.19 -> 1.20 -> 0.77; F(2,3) 256@14 0.96 -> 0.86 -> 0.77
    def _mask_bits(builder, lanes, n, shift: int, on):
        """The lane mask of lanes shift .. shift + n - 1 (n an i64 value, 0..8) where ``on`` (an i1), else none."""
        i64 = lanes.i64
        bits = builder.sub(builder.shl(ir.Constant(i64, 1), n), ir.Constant(i64, 1))
        bits = builder.select(on, builder.shl(bits, ir.Constant(i64, shift)), ir.Constant(i64, 0))
        return builder.bitcast(builder.trunc(bits, ir.IntType(_VL)), lanes.mvec)

    def _shuffle(builder, a, b, idx):
        return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(ir.IntType(32), len(idx)), list(idx)))

    def _store_transposed(builder, lanes, vals, ydata, yoff, ystride, nm, q, n, full: bool = False):
        """One segment's outputs (vals[i][h]: position i, channels 16 h ..) into y[yoff + (16 h + c) ystride + q + i]
        for i < n, channels c < nm: 8 x 16 transposes by shuffles (unpack pairs, then 64-bit pairs, then 128-bit
        halves: two channels of 8 positions a vector), two masked stores a vector; ``full`` (7 positions, 32
        channels): the masks constants."""
        i64, vec = lanes.i64, lanes.vec
        zero = ir.Constant(vec, None)
        for h in range(len(vals[0])):
            r = [vals[i][h] for i in range(_TILE_P)] + [zero]
            lo4 = (0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29)  # unpacklo, per 128-bit lane
            hi4 = tuple(v + 2 for v in lo4)  # unpackhi
            t = []
            for a in range(0, 8, 2):
                t += [_shuffle(builder, r[a], r[a + 1], lo4), _shuffle(builder, r[a], r[a + 1], hi4)]
            # t[2 g + 0]: rows 2g, 2g+1 of channels 4L + 0, 1 (lane L); t[2 g + 1]: of channels 4L + 2, 3
            lo2 = (0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29)
            hi2 = tuple(v + 2 for v in lo2)
            u = []  # u[4 half + j]: rows 4 half .. 4 half + 3 of channel 4L + j in lane L
            for half in range(2):
                ta, tb = t[4 * half], t[4 * half + 2]
                tc, td = t[4 * half + 1], t[4 * half + 3]
                u += [
                    _shuffle(builder, ta, tb, lo2),
                    _shuffle(builder, ta, tb, hi2),
                    _shuffle(builder, tc, td, lo2),
                    _shuffle(builder, tc, td, hi2),
                ]
            for jj in range(4):
                ua, ub = u[jj], u[4 + jj]
                for lanes_ in ((0, 1), (2, 3)):  # channels (jj + 4 l0, jj + 4 l1), 8 rows each
                    l0, l1 = lanes_
                    idx = [4 * l0 + e for e in range(4)] + [16 + 4 * l0 + e for e in range(4)]
                    idx += [4 * l1 + e for e in range(4)] + [16 + 4 * l1 + e for e in range(4)]
                    w = _shuffle(builder, ua, ub, idx)
                    c0, c1 = jj + 4 * l0, jj + 4 * l1
                    for c, shift in ((c0, 0), (c1, 8)):
                        ch = 16 * h + c
                        on = builder.icmp_signed("<", ir.Constant(i64, ch), nm)
                        row = builder.add(yoff, builder.mul(ir.Constant(i64, ch), ystride))
                        at = builder.sub(builder.add(row, q), ir.Constant(i64, shift))
                        ptr = builder.bitcast(builder.gep(ydata, [at]), lanes.vptr)
                        if full:
                            mask = ir.Constant(lanes.mvec, [int(shift <= j < shift + _TILE_P) for j in range(_VL)])
                        else:
                            mask = _mask_bits(builder, lanes, n, shift, on)
                        builder.call(lanes.mstore, [w, ptr, lanes.align, mask])

    def _tile_codegen(taps: bool, step: int = 1, ahead: bool = True, segs: int = 1, pfx: bool = False):
        """The code of the register tile: ``segs`` segments of _TILE_P positions (the second's inputs from xoff2),
        their accumulators consecutive in acc; ``taps``: the inputs read in place, xp[xoff + offs[k] + step i] (a
        table of tap offsets), instead of from packed columns, xp[xoff + _XS k + i], and where ``out`` (the last
        chunk) the sums + bias, clipped, stored into y (_store_transposed) instead of acc; ``ahead``: prefetch the
        weights _PREFETCH steps ahead; ``pfx`` (two segments in place): prefetch the tile's inputs _PFX_AHEAD terms
        ahead too (the offset table then holds _PFX_AHEAD entries past K)."""

        def codegen(context, builder, signature, args):
            xoff2_ = None
            if taps:
                (wp_, woff_, xp_, xoff_, xoff2_, offs_, koff_, kn_, acc_, aoff_, first_, out_, y_, yoff_, ystride_,
                 nm_, q0_, n0_, q1_, n1_, b_, boff_, hasb_, clip_, lo_, hi_) = args  # fmt: skip
                ai = 8
            elif segs == 2:
                wp_, woff_, xp_, xoff_, xoff2_, kn_, acc_, aoff_, first_ = args
                ai = 6
            else:
                wp_, woff_, xp_, xoff_, kn_, acc_, aoff_, first_ = args
                ai = 5
            lanes = Lanes(builder)
            i32, i64, vec, vptr, fma = lanes.i32, lanes.i64, lanes.vec, lanes.vptr, lanes.fma
            i8p = ir.IntType(8).as_pointer()
            nv = _TILE_M // _VL
            npos = segs * _TILE_P
            wdata, xdata, adata = (data(context, builder, signature, args, i) for i in (0, 2, ai))
            odata = data(context, builder, signature, args, 5) if taps else None
            prefetch = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0i8"
            )
            slots = [[cgutils.alloca_once(builder, vec) for _ in range(nv)] for _ in range(npos)]
            abase = builder.gep(adata, [aoff_])
            aptrs = [
                [
                    builder.bitcast(builder.gep(abase, [ir.Constant(i64, i * _TILE_M + h * _VL)]), vptr)
                    for h in range(nv)
                ]
                for i in range(npos)
            ]
            with builder.if_else(builder.icmp_unsigned("!=", first_, ir.Constant(first_.type, 0))) as (zero, carry):
                with zero:
                    for row in slots:
                        for s in row:
                            builder.store(ir.Constant(vec, None), s)
                with carry:
                    for row, ptrs in zip(slots, aptrs):
                        for s, p in zip(row, ptrs):
                            builder.store(builder.load(p, align=4), s)
            wbase = builder.gep(wdata, [woff_])
            xbases = [builder.gep(xdata, [xoff_])] + ([builder.gep(xdata, [xoff2_])] if segs == 2 else [])
            obase = builder.gep(odata, [koff_]) if taps else None
            with cgutils.for_range(builder, kn_) as loop:
                k = loop.index
                wk = builder.gep(wbase, [builder.mul(k, ir.Constant(k.type, _TILE_M))])
                for h in range(nv if ahead else 0):
                    pf = builder.bitcast(builder.gep(wk, [ir.Constant(k.type, _PREFETCH * _TILE_M + h * _VL)]), i8p)
                    # read, locality 2 (L2), data
                    builder.call(prefetch, [pf, ir.Constant(i32, 0), ir.Constant(i32, 2), ir.Constant(i32, 1)])
                wptrs = [builder.bitcast(builder.gep(wk, [ir.Constant(k.type, h * _VL)]), vptr) for h in range(nv)]
                # AVX-512: the weights loaded once a step, in registers; AVX2 (one vector: two ymm halves): the low
                # half in a register, the high half read again by every multiply-add (see _half_weights)
                ws = [builder.load(p, align=4) for p in wptrs] if _WIDE else None
                if not _WIDE:
                    h8 = ir.VectorType(lanes.f32, _VL // 2)
                    w_lo = builder.load(builder.bitcast(wk, h8.as_pointer()), align=4)
                    hi_ptr = builder.bitcast(builder.gep(wk, [ir.Constant(k.type, _VL // 2)]), h8.as_pointer())
                if taps:
                    ko = builder.load(builder.gep(obase, [k]))
                else:
                    ko = builder.mul(k, ir.Constant(k.type, _XS))
                if pfx:  # this tile's own inputs _PFX_AHEAD terms ahead (the table padded past K), into L1
                    ka = builder.load(builder.gep(obase, [builder.add(k, ir.Constant(k.type, _PFX_AHEAD))]))
                    for xbase in xbases:
                        for e in (0, 12):
                            pf = builder.bitcast(builder.gep(xbase, [builder.add(ka, ir.Constant(k.type, e))]), i8p)
                            builder.call(prefetch, [pf, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
                for g, xbase in enumerate(xbases):
                    xk = builder.gep(xbase, [ko])
                    for i in range(_TILE_P):
                        s = builder.load(builder.gep(xk, [ir.Constant(k.type, step * i if taps else i)]))
                        bc = lanes.splat(s)
                        for h in range(nv):
                            slot = slots[g * _TILE_P + i][h]
                            if ws is not None:
                                wv = ws[h]
                            else:
                                wv = _shuffle(builder, w_lo, _volatile_load(builder, hi_ptr), range(_VL))
                            builder.store(builder.call(fma, [bc, wv, builder.load(slot)]), slot)
            if taps:
                with builder.if_else(builder.icmp_unsigned("!=", out_, ir.Constant(out_.type, 0))) as (to_y, to_acc):
                    with to_y:
                        ydata, bdata = (
                            data(context, builder, signature, args, 12),
                            data(context, builder, signature, args, 20),
                        )
                        bmask = [
                            lanes.mask(
                                builder.select(
                                    builder.icmp_unsigned("!=", hasb_, ir.Constant(hasb_.type, 0)),
                                    builder.select(
                                        builder.icmp_signed("<", nm_, ir.Constant(i64, _VL * (h + 1))),
                                        builder.select(
                                            builder.icmp_signed(">", nm_, ir.Constant(i64, _VL * h)),
                                            builder.sub(nm_, ir.Constant(i64, _VL * h)),
                                            ir.Constant(i64, 0),
                                        ),
                                        ir.Constant(i64, _VL),
                                    ),
                                    ir.Constant(i64, 0),
                                )
                            )
                            for h in range(nv)
                        ]
                        bias = [
                            builder.call(
                                lanes.mload,
                                [
                                    builder.bitcast(
                                        builder.gep(bdata, [builder.add(boff_, ir.Constant(i64, _VL * h))]), vptr
                                    ),
                                    lanes.align,
                                    bmask[h],
                                    lanes.zero,
                                ],
                            )
                            for h in range(nv)
                        ]
                        # + bias and the clip on the accumulators themselves (channels in lanes: one vector of
                        # biases each), the same additions and comparisons as a scalar loop, so the same bits
                        for row in slots:
                            for h, sl in enumerate(row):
                                builder.store(builder.fadd(builder.load(sl), bias[h]), sl)
                        clip = builder.icmp_unsigned("!=", clip_, ir.Constant(clip_.type, 0))
                        with builder.if_then(clip):
                            lo_v, hi_v = lanes.splat(lo_), lanes.splat(hi_)
                            for row in slots:
                                for sl in row:
                                    v = builder.load(sl)
                                    hv = builder.select(builder.fcmp_ordered(">", v, hi_v), hi_v, v)
                                    builder.store(builder.select(builder.fcmp_ordered("<", v, lo_v), lo_v, hv), sl)
                        # whole segments of a whole channel block (nearly every tile): constant lane masks
                        full = builder.icmp_signed("==", nm_, ir.Constant(i64, _TILE_M))
                        for n_ in (n0_, n1_)[:segs]:
                            full = builder.and_(full, builder.icmp_signed("==", n_, ir.Constant(i64, _TILE_P)))
                        with builder.if_else(full) as (whole, part):
                            for branch, is_full in ((whole, True), (part, False)):
                                with branch:
                                    for g, (q_, n_) in enumerate(((q0_, n0_), (q1_, n1_))[:segs]):
                                        vals = [
                                            [builder.load(slots[g * _TILE_P + i][h]) for h in range(nv)]
                                            for i in range(_TILE_P)
                                        ]
                                        _store_transposed(
                                            builder, lanes, vals, ydata, yoff_, ystride_, nm_, q_, n_, is_full
                                        )
                    with to_acc:
                        for row, ptrs in zip(slots, aptrs):
                            for s, p in zip(row, ptrs):
                                builder.store(builder.load(s), p, align=4)
            else:
                for row, ptrs in zip(slots, aptrs):
                    for s, p in zip(row, ptrs):
                        builder.store(builder.load(s), p, align=4)
            return context.get_dummy_value()

        return codegen

    @intrinsic
    def _tile(typingctx, wp, woff, xp, xoff, kn, acc, aoff, first):  # pragma: no cover - compiled
        """acc[aoff + i * 32 + j] (+)= sum_{k < kn} xp[xoff + 8 k + i] * wp[woff + 32 k + j] for i < 7, j < 32: the
        14 accumulators in registers (stack slots promoted), one fused multiply-add per term in the order of k
        (``first``: start from zero, else from acc)."""
        sig = types.void(wp, types.intp, xp, types.intp, types.intp, acc, types.intp, types.boolean)
        return sig, _tile_codegen(False)

    @intrinsic
    def _tile_pair(typingctx, wp, woff, xp, xoff, xoff2, kn, acc, aoff, first):  # pragma: no cover - compiled
        """_tile for two segments of 7 positions at once (the second's columns from xoff2, its accumulators at
        aoff + 7 * 32): 28 accumulators, the weights loaded once for both (alternating, in registers alone: 195
        GFLOP/s against 175 for one segment, the machine's peak 224)."""
        sig = types.void(wp, types.intp, xp, types.intp, types.intp, types.intp, acc, types.intp, types.boolean)
        return sig, _tile_codegen(False, 1, True, 2)

    def _taps_intrinsic(step: int, ahead: bool, segs: int, pfx: bool = False):
        """The in-place tile: term k of position i of segment g at xp[xoff_g + offs[koff + k] + step i] (one segment:
        xoff2, q1 and n1 unused); ``out``: the sums stored into y (see _tile_codegen)."""

        def typer(typingctx, wp, woff, xp, xoff, xoff2, offs, koff, kn, acc, aoff, first, out, y, yoff, ystride, nm,
                  q0, n0, q1, n1, b, boff, has_b, clip, lo, hi):  # fmt: skip
            ip, bl, f4 = types.intp, types.boolean, types.float32
            sig = types.void(
                wp, ip, xp, ip, ip, offs, ip, ip, acc, ip, bl, bl, y, ip, ip, ip, ip, ip, ip, ip, b, ip, bl, bl, f4, f4
            )
            return sig, _tile_codegen(True, step, ahead, segs, pfx)

        return intrinsic(typer)

    # in-place tiles by stride (1, 2), with the weights' prefetch (the first tile of a chunk) or without, of one
    # segment or two
    _taps1, _taps1n, _taps2, _taps2n = (_taps_intrinsic(s, a, 1) for s in (1, 2) for a in (True, False))
    _taps1p, _taps1np, _taps2p, _taps2np = (_taps_intrinsic(s, a, 2) for s in (1, 2) for a in (True, False))
    # stride 2 with the inputs prefetched _PFX_AHEAD terms ahead (1 x 1 stride 2 from x's planes)
    _taps2px, _taps2npx = (_taps_intrinsic(2, a, 2, True) for a in (True, False))
    # ... and of one segment (AVX2's tiles: _SEGS 1)
    _taps2x, _taps2nx = (_taps_intrinsic(2, a, 1, True) for a in (True, False))
