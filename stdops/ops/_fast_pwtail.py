"""The tail tiles of ops/_fast_pointwise.py's 1 x 1 convolution (numba ``@intrinsic`` codegen, the pieces of
ops/_llvm_lanes.py): a column block's last positions, where its 16-lane tile would compute 16 lanes for a few.
:func:`make_narrow_tile`: 2 channel blocks x one vector of 8 or 4 positions; :func:`make_lanes_tile`: 1 or 2
positions with the channels in the lanes, several channel blocks at once (AVX2 and AVX-512: 8-lane vectors). ``mr``:
the channels of a packed block (ops/_fast_pointwise.py's). Imported by that module alone, where numba is installed;
numba's on-disk cache of its compiled drivers does not notice edits here: delete
stdops/ops/__pycache__/_fast_pointwise.* after editing this file.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from ._llvm_lanes import Lanes, data

#: channel blocks per :func:`make_lanes_tile` tile, by its positions (1: 8 accumulators, 2: 12)
LANES_GROUP = (0, 8, 6)


def make_narrow_tile(width: int, bias_last: bool, mr: int):
    """AVX2's tile for a column block's last few positions: 2 mr channels (two packed channel blocks, the
    second ``wstep`` floats after the first) x one vector of ``width`` (8 or 4) lanes, the first ``lanes``
    live: 12 accumulators in 12 ymm (xmm) registers, where a 16-lane tile would compute 16 lanes for them.
    The same sums in the same order as ops/_fast_pointwise.py's ``_make_tile``'s."""

    @intrinsic
    def tile(typingctx, wp, woff, wstep, x, xoff, ldx, kn, bp, boff, y, yoff, ldy, rows, lanes, clip, lo, hi):
        sig = types.void(
            wp, types.intp, types.intp, x, types.intp, types.intp, types.intp, bp, types.intp, y, types.intp,
            types.intp, types.intp, types.intp, types.boolean, types.float32, types.float32,
        )  # fmt: skip

        def codegen(context, builder, signature, args):
            _, woff_, wstep_, _, xoff_, ldx_, kn_, _, boff_, _, yoff_, ldy_, rows_, lanes_, clip_, lo_, hi_ = args
            lanes = Lanes(builder, width)
            i64, vec, vptr, fma, mload, mstore = lanes.i64, lanes.vec, lanes.vptr, lanes.fma, lanes.mload, lanes.mstore
            zero, align, splat = lanes.zero, lanes.align, lanes.splat
            mask = lanes.mask(lanes_)
            wdata, xdata, bdata, ydata = (data(context, builder, signature, args, i) for i in (0, 3, 7, 9))
            R = 2 * mr
            slots = [cgutils.alloca_once(builder, vec) for _ in range(R)]
            # the second block's bias (one block left, wstep 0: the first's again, as its weights)
            lone = builder.icmp_signed("==", wstep_, ir.Constant(i64, 0))
            boffs = [boff_, builder.select(lone, boff_, builder.add(boff_, ir.Constant(i64, mr)))]
            bvs = [
                splat(builder.load(builder.gep(bdata, [builder.add(boffs[i // mr], ir.Constant(i64, i % mr))])))
                for i in range(R)
            ]
            for i in range(R):
                builder.store(zero if bias_last else bvs[i], slots[i])
            wbases = [builder.gep(wdata, [woff_]), builder.gep(wdata, [builder.add(woff_, wstep_)])]
            xbase = builder.gep(xdata, [xoff_])
            with cgutils.for_range(builder, kn_) as loop:
                k = loop.index
                p = builder.bitcast(builder.gep(xbase, [builder.mul(k, ldx_)]), vptr)
                xv = builder.call(mload, [p, align, mask, zero])
                for i in range(R):
                    wk = builder.gep(wbases[i // mr], [builder.mul(k, ir.Constant(i64, mr))])
                    wb = splat(builder.load(builder.gep(wk, [ir.Constant(i64, i % mr)])))
                    builder.store(builder.call(fma, [wb, xv, builder.load(slots[i])]), slots[i])
            if bias_last:
                for i in range(R):
                    builder.store(builder.fadd(builder.load(slots[i]), bvs[i]), slots[i])
            with builder.if_then(builder.icmp_unsigned("!=", clip_, ir.Constant(clip_.type, 0))):
                lov, hiv = splat(lo_), splat(hi_)
                for s in slots:
                    builder.store(lanes.clamp(builder.load(s), lov, hiv), s)
            ybase = builder.gep(ydata, [yoff_])
            for i in range(R):
                with builder.if_then(builder.icmp_signed(">", rows_, ir.Constant(i64, i)), likely=True):
                    yrow = builder.gep(ybase, [builder.mul(ir.Constant(i64, i), ldy_)])
                    builder.call(mstore, [builder.load(slots[i]), builder.bitcast(yrow, vptr), align, mask])
            return context.get_dummy_value()

        return sig, codegen

    return tile


def make_lanes_tile(npos: int, bias_last: bool, mr: int):
    """The tile for a column block's last ``npos`` (1 or 2) positions, the channels in the lanes instead:
    LANES_GROUP[npos] packed channel blocks of mr channels (block g ``wstep`` g floats after the first; the
    ``nblk`` first live, the others repeat the last), each one 8-lane vector (the first mr lanes live) per
    position, a step the blocks' weights for one k and a broadcast of each position's input. That many blocks
    at once: each accumulator is one dependent chain of fused multiply-adds over K, and two (one position, two
    blocks) left the tile waiting on the FMA's latency. :func:`make_narrow_tile` would compute 4 lanes for
    them, a broadcast weight per channel and step. The same sums in the same order (fma(w, x, acc) over k
    from the bias, or bias last)."""
    width, G = 8, LANES_GROUP[npos]

    @intrinsic
    def tile(typingctx, wp, woff, wstep, nblk, x, xoff, ldx, kn, bp, boff, y, yoff, ldy, rows, clip, lo, hi):
        sig = types.void(
            wp, types.intp, types.intp, types.intp, x, types.intp, types.intp, types.intp, bp, types.intp, y,
            types.intp, types.intp, types.intp, types.boolean, types.float32, types.float32,
        )  # fmt: skip

        def codegen(context, builder, signature, args):
            _, woff_, wstep_, nblk_, _, xoff_, ldx_, kn_, _, boff_, _, yoff_, ldy_, rows_, clip_, lo_, hi_ = args
            lanes = Lanes(builder, width)
            i64, vptr, fma, mload, splat = lanes.i64, lanes.vptr, lanes.fma, lanes.mload, lanes.splat
            live = lanes.mask(ir.Constant(i64, mr))
            wdata, xdata, bdata, ydata = (data(context, builder, signature, args, i) for i in (0, 4, 8, 10))
            last = builder.sub(nblk_, ir.Constant(i64, 1))
            gs = [builder.select(builder.icmp_signed("<", ir.Constant(i64, g), nblk_), ir.Constant(i64, g), last)
                  for g in range(G)]  # fmt: skip
            boffs = [builder.add(boff_, builder.mul(g, ir.Constant(i64, mr))) for g in gs]
            bias = [
                builder.call(mload, [builder.bitcast(builder.gep(bdata, [bo]), vptr), lanes.align, live, lanes.zero])
                for bo in boffs
            ]
            slots = [[cgutils.alloca_once(builder, lanes.vec) for _ in range(npos)] for _ in range(G)]
            for g in range(G):
                for sl in slots[g]:
                    builder.store(lanes.zero if bias_last else bias[g], sl)
            wbases = [builder.gep(wdata, [builder.add(woff_, builder.mul(g, wstep_))]) for g in gs]
            xbase = builder.gep(xdata, [xoff_])
            with cgutils.for_range(builder, kn_) as loop:
                k = loop.index
                ko = builder.mul(k, ir.Constant(i64, mr))
                wv = [
                    builder.call(
                        mload,
                        [builder.bitcast(builder.gep(wb, [ko]), vptr), lanes.align, live, lanes.zero],
                    )
                    for wb in wbases
                ]
                xk = builder.gep(xbase, [builder.mul(k, ldx_)])
                for i in range(npos):
                    xb = splat(builder.load(builder.gep(xk, [ir.Constant(i64, i)])))
                    for g in range(G):
                        sl = slots[g][i]
                        builder.store(builder.call(fma, [wv[g], xb, builder.load(sl)]), sl)
            on = builder.icmp_unsigned("!=", clip_, ir.Constant(clip_.type, 0))
            lov, hiv = splat(lo_), splat(hi_)
            ybase = builder.gep(ydata, [yoff_])
            for g in range(G):
                for i in range(npos):
                    t = builder.load(slots[g][i])
                    if bias_last:
                        t = builder.fadd(t, bias[g])
                    t = builder.select(on, lanes.clamp(t, lov, hiv), t)
                    for j in range(mr):
                        ch = g * mr + j
                        with builder.if_then(builder.icmp_signed(">", rows_, ir.Constant(i64, ch)), likely=True):
                            at = builder.add(builder.mul(ir.Constant(i64, ch), ldy_), ir.Constant(i64, i))
                            builder.store(
                                builder.extract_element(t, ir.Constant(lanes.i32, j)), builder.gep(ybase, [at])
                            )
            return context.get_dummy_value()

        return sig, codegen

    return tile
