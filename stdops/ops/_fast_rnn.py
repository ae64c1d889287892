"""The recurrences compiled (numba, the optional ``fast`` extra): every step of every direction in one call, on the
input projections of every step computed before (one GEMM). Reference: ops/rnn.py's NumPy loop on the shared
cells (rnn_cell.LSTMCell); the sigmoid is the epilogue's polynomial one (~4 ulp), tanh ops/_fast_epilogue's, the
cell update the reference's products and sums in its order.

- :func:`lstm_packed` (AVX-512): the recurrent product of a step by a GEMV compiled here on R packed once
  (:func:`pack_recurrent`): for each group of 32 hidden units, the rows of its 4 gates interleaved and transposed,
  so that the loop over the H inputs streams 128 contiguous floats per input (8 vectors of 16) into 8 AVX-512
  accumulators (an LLVM intrinsic, as ops/_fast_conv.py's tile: numba's own loops emit 256-bit vectors), h[k]
  broadcast; each output sums its H products in the order of k, by fused multiply-adds. The step is one pass
  over R from L2 (1 MB for H = 256) and one over the gates in L1. The packed R is 64-byte aligned: measured
  (H = 256, one core) 6.3 us a GEMV aligned against 9.6 misaligned (every vector load then spans two cache lines)
  and 13.0 by OpenBLAS (numpy's np.dot on the ONNX layout). Sequence lengths, both directions and peepholes
  are handled in the loop.
- :func:`lstm_loop` (elsewhere, no AVX-512: the packed tile would spill AVX2's 16 registers): the same loop with
  the GEMV by BLAS (numba's np.dot), every sequence of full length, no peepholes.
"""

from __future__ import annotations

import numpy as np

from ._fast import numba
from ._fast_conv import PACKED_OK
from ._fast_epilogue import ACT_SIGMOID

_VL = 16  # float32 lanes of an AVX-512 register
_UNITS = 2  # vectors of hidden units per gate per group: a group of 32 units, 4 gates = 8 accumulators
_ALIGN = 64  # bytes: one cache line, one vector

__all__ = ["PACKED_OK", "lstm_loop", "lstm_packed", "pack_recurrent"]


def aligned_empty(n: int) -> np.ndarray:
    """A float32 array of n values whose data starts on a 64-byte boundary (a view into a slightly larger one)."""
    buf = np.empty(n + _ALIGN // 4, np.float32)
    off = (-buf.ctypes.data % _ALIGN) // 4
    return buf[off : off + n]


def pack_recurrent(R: np.ndarray, gates: int) -> np.ndarray:
    """R (D, gates*H, H) as the packed GEMV reads it: flat, 64-byte aligned, per direction NG = ceil(H / 32)
    groups, each (H, gates, 2, 16): element [d, grp, k, g, p, l] = R[d, g H + 32 grp + 16 p + l, k] (zero for the
    units past H)."""
    D, GH, H = R.shape
    NG = -(-H // (_VL * _UNITS))
    out = aligned_empty(D * NG * H * gates * _UNITS * _VL)
    _pack(np.ascontiguousarray(R, dtype=np.float32), gates, NG, out)
    return out


if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._fast_epilogue import _act_chunk, _tanh_chunk

    def _make_gemv(gates: int):
        """The packed GEMV for ``gates`` gates (an intrinsic: the accumulators stay in registers)."""
        nacc = gates * _UNITS
        row = nacc * _VL  # floats per input k of a group

        @intrinsic
        def gemv(typingctx, rp, roff, hv, hoff, K, NG, out, Hp):  # pragma: no cover - compiled
            """out[g Hp + 32 grp + 16 p + l] = sum_{k < K} hv[hoff + k] * rp[roff + (grp K + k) row + (g 2 + p) 16 + l]
            for every group grp < NG: the sums in the order of k, one fused multiply-add per term, from zero."""
            sig = types.void(rp, types.intp, hv, types.intp, types.intp, types.intp, out, types.intp)

            def codegen(context, builder, signature, args):
                rp_, roff_, h_, hoff_, K_, NG_, out_, Hp_ = args
                f32, i32, i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
                vec = ir.VectorType(f32, _VL)
                vptr = vec.as_pointer()
                rdata = context.make_array(signature.args[0])(context, builder, rp_).data
                hdata = context.make_array(signature.args[2])(context, builder, h_).data
                odata = context.make_array(signature.args[6])(context, builder, out_).data
                fma = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(vec, [vec, vec, vec]), "llvm.fma.v16f32"
                )
                slots = [cgutils.alloca_once(builder, vec) for _ in range(nacc)]
                splat = ir.Constant(ir.VectorType(i32, _VL), [0] * _VL)
                undef = ir.Constant(vec, ir.Undefined)
                rbase = builder.gep(rdata, [roff_])
                hbase = builder.gep(hdata, [hoff_])
                with cgutils.for_range(builder, NG_) as groups:
                    grp = groups.index
                    for s in slots:
                        builder.store(ir.Constant(vec, None), s)
                    gbase = builder.gep(rbase, [builder.mul(builder.mul(grp, K_), ir.Constant(i64, row))])
                    with cgutils.for_range(builder, K_) as inputs:
                        k = inputs.index
                        wk = builder.gep(gbase, [builder.mul(k, ir.Constant(i64, row))])
                        s_ = builder.load(builder.gep(hbase, [k]))
                        bc = builder.shuffle_vector(
                            builder.insert_element(undef, s_, ir.Constant(i32, 0)), undef, splat
                        )
                        for j in range(nacc):
                            w = builder.load(
                                builder.bitcast(builder.gep(wk, [ir.Constant(i64, j * _VL)]), vptr), align=4
                            )
                            builder.store(builder.call(fma, [bc, w, builder.load(slots[j])]), slots[j])
                    unit0 = builder.mul(grp, ir.Constant(i64, _VL * _UNITS))
                    for g in range(gates):
                        gate0 = builder.add(builder.mul(ir.Constant(i64, g), Hp_), unit0)
                        for p in range(_UNITS):
                            dst = builder.gep(odata, [builder.add(gate0, ir.Constant(i64, p * _VL))])
                            builder.store(builder.load(slots[g * _UNITS + p]), builder.bitcast(dst, vptr), align=4)
                return context.get_dummy_value()

            return sig, codegen

        return gemv

    _gemv4 = _make_gemv(4)

    @numba.njit(cache=True, nogil=True)
    def _pack(R, gates, NG, out):  # pragma: no cover - compiled
        # out[d, grp, k, g, p, l] = R[d, g H + 32 grp + 16 p + l, k], zero past H (pack_recurrent)
        D, _, H = R.shape
        W = _VL * _UNITS
        i = 0
        for d in range(D):
            for grp in range(NG):
                for k in range(H):
                    for g in range(gates):
                        for u in range(W):
                            unit = grp * W + u
                            out[i] = R[d, g * H + unit, k] if unit < H else np.float32(0)
                            i += 1

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _lstm_packed(gx, bias, Rp, NG, lens, rev, P, h, c, Y, B):  # pragma: no cover - compiled
        # gx (T, B, D*4H) = x W^T of every step (no bias), bias (D, 4H) = Wb + Rb, Rp packed R (pack_recurrent), lens
        # (B,) the sequence lengths, rev (D,) the reverse directions, P (D, 3H) the peepholes (i, o, f) or (0, 0);
        # h, c (D*B, H) the states (updated in place), Y (T, D*B, H) zeros, receives Ht. Gates in ONNX order i, o, f, c.
        T = gx.shape[0]
        DB, H = h.shape
        G = 4 * H
        Hp = NG * _VL * _UNITS
        dsize = 4 * Hp * H
        peep = P.shape[0] > 0
        rec = np.empty(4 * Hp, np.float32)
        pre = np.empty(G, np.float32)
        e = np.empty(3 * H, np.float32)  # the exp stages' scratch (the sigmoid runs over i, o, f at once)
        kb = np.empty(3 * H, np.int32)
        th = np.empty(H, np.float32)
        hf = h.reshape(-1)
        pi, po, pf = pre[:H], pre[H : 2 * H], pre[2 * H : 3 * H]
        pc = pre[3 * H :]
        zero = np.float32(0)
        for t in range(T):
            for r in range(DB):
                d = r // B
                b = r - d * B
                L = lens[b]
                if t >= L:
                    continue
                ti = L - 1 - t if rev[d] else t
                _gemv4(Rp, d * dsize, hf, r * H, H, NG, rec, Hp)
                g = gx[ti, b, d * G : (d + 1) * G]
                bd = bias[d]
                for q in range(4):  # Xt W^T + Wb + Rb + Ht-1 R^T, the reference's order
                    for j in range(H):
                        pre[q * H + j] = (g[q * H + j] + bd[q * H + j]) + rec[q * Hp + j]
                hr, cr, yr = h[r], c[r], Y[ti, r]
                if peep:
                    pd = P[d]
                    for j in range(H):
                        pi[j] = pi[j] + pd[j] * cr[j]
                        pf[j] = pf[j] + pd[2 * H + j] * cr[j]
                    _act_chunk(pi, ACT_SIGMOID, zero, zero, e, kb, e)
                    _act_chunk(pf, ACT_SIGMOID, zero, zero, e, kb, e)
                else:
                    _act_chunk(pre[: 3 * H], ACT_SIGMOID, zero, zero, e, kb, e)
                _tanh_chunk(pc, e, kb)
                for j in range(H):
                    ct = pf[j] * cr[j]  # Ct = f * Ct-1 + i * g(c)
                    ct = ct + pi[j] * pc[j]
                    cr[j] = ct
                    th[j] = ct
                if peep:
                    pd = P[d]
                    for j in range(H):
                        po[j] = po[j] + pd[H + j] * cr[j]
                    _act_chunk(po, ACT_SIGMOID, zero, zero, e, kb, e)
                _tanh_chunk(th, e, kb)
                for j in range(H):
                    hv = po[j] * th[j]
                    hr[j] = hv
                    yr[j] = hv

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _lstm(gx, Rs, h, c, Y, B):  # pragma: no cover - compiled
        # gx (T, D*B, 4H): x W^T + Wb + Rb of every step (overwritten); Rs (D, 4H, H) = R; h, c (D*B, H) the
        # states (updated in place); Y (T, D*B, H) receives Ht. Gates in ONNX order i, o, f, c.
        T, DB, G = gx.shape
        H = G // 4
        e = np.empty(3 * H, gx.dtype)
        kb = np.empty(3 * H, np.int32)
        th = np.empty(H, gx.dtype)
        for t in range(T):
            for r in range(DB):
                g = gx[t, r]
                rec = np.dot(Rs[r // B], h[r])
                for j in range(G):
                    g[j] = g[j] + rec[j]
                _act_chunk(g[: 3 * H], ACT_SIGMOID, np.float32(0), np.float32(0), e, kb, e)
                gc = g[3 * H :]
                _tanh_chunk(gc, e, kb)
                hr, cr, yr = h[r], c[r], Y[t, r]
                gi, go, gf = g[:H], g[H : 2 * H], g[2 * H : 3 * H]
                for j in range(H):
                    ct = gf[j] * cr[j]  # Ct = f * Ct-1 + i * g(c)
                    ct = ct + gi[j] * gc[j]
                    cr[j] = ct
                    th[j] = ct
                _tanh_chunk(th, e, kb)
                for j in range(H):
                    hv = go[j] * th[j]
                    hr[j] = hv
                    yr[j] = hv


def lstm_loop(gx: np.ndarray, R: np.ndarray, h: np.ndarray, c: np.ndarray, Y: np.ndarray, B: int) -> None:
    """Run the LSTM recurrence in place (see the module doc): gx (T, D*B, 4H), R (D, 4H, H), h and c (D*B, H),
    Y (T, D*B, H), all float32 C-contiguous."""
    _lstm(gx, np.ascontiguousarray(R), h, c, Y, B)


def lstm_packed(gx, bias, Rp, lens, reverse, P, h, c, Y, B: int) -> None:
    """Run the LSTM recurrence in place on the packed R (see the module doc; AVX-512 only, :data:`PACKED_OK`):
    gx (T, B, D*4H) the input projections without bias, bias (D, 4H) = Wb + Rb, Rp from :func:`pack_recurrent`,
    lens (B,) int64 the sequence lengths (steps past one are skipped: Y stays as given, the states hold; the reverse
    direction runs from the sequence's own last step), reverse (D,) bool, P (D, 3H) the peepholes or None, h and c
    (D*B, H) the states, Y (T, D*B, H); all float32 C-contiguous."""
    H = h.shape[1]
    NG = -(-H // (_VL * _UNITS))
    _lstm_packed(gx, bias, Rp, NG, lens, reverse, np.zeros((0, 0), np.float32) if P is None else P, h, c, Y, B)
