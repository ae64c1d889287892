"""Register tiles of a product whose rows are broadcast (numba + LLVM code, AVX-512): P[i, n] = sum_k V[i, k] U[k, n]
for rows i of V (tiles of a Winograd position in ops/_fast_winochan.py, a matrix's rows in ops/_fast_gemm.py) and a
column block of NR vectors of 16 columns of U. A register tile holds MR rows x NR vectors (24 accumulators in the
full tiles: 24 x 1, 8 x 3, 6 x 4); per term, the NR vectors of U's row k are loaded once and each of the MR values
V[i, k] is broadcast (in the 24 x 1 tile as the multiply-add's memory operand). :func:`row_tiles` covers any number of
rows with the full tile and then smaller ones (MR 8 / 4 / 3 / 1), so that no row is computed twice.

Each output is one sum over k in order from zero, one fused multiply-add a term: the same bits whichever tile, tile
size or call holds its row. A tile of 12 rows x 2 vectors is not built: its 12 broadcasts a term ran it at half the
rate of the others (42-47 GFLOP/s against 94-111 on one Zen 4 core, the tile alone in L1).
"""

from __future__ import annotations

from ._fast import numba

_VL = 16
#: the register tiles per vector count NR: the full one, then the smaller ones a block's last rows take
VARIANTS = {1: (24, 8, 4, 1), 3: (8, 4, 1), 4: (6, 3, 1)}

if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._llvm_lanes import Lanes, data

    def _tile_for(mr: int, nr: int):
        def codegen(context, builder, signature, args):
            u_, uoff, ustride, v_, voff, vstride, kn, p_, poff, pstride = args
            lanes = Lanes(builder)
            i64 = lanes.i64
            ud, vd, pd = (data(context, builder, signature, args, i) for i in (0, 3, 7))

            def vptr(base, off):
                return builder.bitcast(builder.gep(base, [off]), lanes.vptr)

            slots = [[cgutils.alloca_once(builder, lanes.vec) for _ in range(nr)] for _ in range(mr)]
            for row in slots:
                for s in row:
                    builder.store(lanes.zero, s)
            with cgutils.for_range(builder, kn) as loop:
                k = loop.index
                uk = builder.add(uoff, builder.mul(k, ustride))
                uv = [builder.load(vptr(ud, builder.add(uk, ir.Constant(i64, _VL * r))), align=4) for r in range(nr)]
                vk = builder.add(voff, k)
                for i in range(mr):
                    at = builder.add(vk, builder.mul(ir.Constant(i64, i), vstride))
                    bc = lanes.splat(builder.load(builder.gep(vd, [at])))
                    for r in range(nr):
                        builder.store(builder.call(lanes.fma, [bc, uv[r], builder.load(slots[i][r])]), slots[i][r])
            for i in range(mr):
                row = builder.add(poff, builder.mul(ir.Constant(i64, i), pstride))
                for r in range(nr):
                    builder.store(
                        builder.load(slots[i][r]), vptr(pd, builder.add(row, ir.Constant(i64, _VL * r))), align=4
                    )
            return context.get_dummy_value()

        def typer(typingctx, u, uoff, ustride, v, voff, vstride, kn, p, poff, pstride):  # pragma: no cover
            ip = types.intp
            return types.void(u, ip, ip, v, ip, ip, ip, p, ip, ip), codegen

        return intrinsic(typer)

    # P[poff + i pstride + 16 r + l] = sum_{k < kn} V[voff + i vstride + k] U[uoff + k ustride + 16 r + l]
    _T = {(mr, nr): _tile_for(mr, nr) for nr, mrs in VARIANTS.items() for mr in mrs}
    _t1_24, _t1_8, _t1_4, _t1_1 = (_T[mr, 1] for mr in VARIANTS[1])
    _t3_8, _t3_4, _t3_1 = (_T[mr, 3] for mr in VARIANTS[3])
    _t4_6, _t4_3, _t4_1 = (_T[mr, 4] for mr in VARIANTS[4])

    @numba.njit(cache=True, nogil=True)
    def row_tiles(u, uo, us, v, vo, vs, kn, p, po, ps, rows, NR):  # pragma: no cover - compiled
        """P[po + i ps + c] = sum_{k < kn} V[vo + i vs + k] U[uo + k us + c] for rows i < ``rows`` and the 16 NR columns
        c of the block (u, v, p flat float32 arrays; NR 1, 3 or 4)."""
        i = 0
        while i < rows:
            rem = rows - i
            vi, pi = vo + i * vs, po + i * ps
            if NR == 4:
                if rem >= 6:
                    _t4_6(u, uo, us, v, vi, vs, kn, p, pi, ps)
                    i += 6
                elif rem >= 3:
                    _t4_3(u, uo, us, v, vi, vs, kn, p, pi, ps)
                    i += 3
                else:
                    _t4_1(u, uo, us, v, vi, vs, kn, p, pi, ps)
                    i += 1
            elif NR == 3:
                if rem >= 8:
                    _t3_8(u, uo, us, v, vi, vs, kn, p, pi, ps)
                    i += 8
                elif rem >= 4:
                    _t3_4(u, uo, us, v, vi, vs, kn, p, pi, ps)
                    i += 4
                else:
                    _t3_1(u, uo, us, v, vi, vs, kn, p, pi, ps)
                    i += 1
            elif rem >= 24:
                _t1_24(u, uo, us, v, vi, vs, kn, p, pi, ps)
                i += 24
            elif rem >= 8:
                _t1_8(u, uo, us, v, vi, vs, kn, p, pi, ps)
                i += 8
            elif rem >= 4:
                _t1_4(u, uo, us, v, vi, vs, kn, p, pi, ps)
                i += 4
            else:
                _t1_1(u, uo, us, v, vi, vs, kn, p, pi, ps)
                i += 1
