"""The recurrences compiled (numba, the optional ``fast`` extra): every step of every direction in one call, on the
input projections of every step computed before (one GEMM). Reference: ops/rnn.py's NumPy loop on the shared
cells (rnn_cell.LSTMCell); the sigmoid is the epilogue's polynomial one (~4 ulp), tanh ops/_fast_epilogue's, the
cell update the reference's products and sums in its order.

- The LSTM (ops/_fast_lstm_loop.py's lstm_packed; AVX-512, AVX2 below): the recurrent product of a step by a GEMV
  compiled here on R packed once (:func:`pack_recurrent`): for each group of 32 hidden units, the rows of its 4 gates
  interleaved and transposed, so that the loop over the H inputs streams 128 contiguous floats per input (8 vectors of
  16) into 8 AVX-512 accumulators (an LLVM intrinsic, as ops/_fast_conv.py's tile: numba's own loops emit 256-bit
  vectors), h[k] broadcast; each output sums its H products in the order of k, by fused multiply-adds. Without peepholes
  the group's gates, cell update and Ht follow from the registers (:func:`_lstm_group`: the exp stages of
  ops/_fast_epilogue.py written as vector IR, operation for operation, so that the results are those of the scalar loops
  bit for bit); a step is one pass over R from L2 (1 MB for H = 256) and nothing else. The packed R is 64-byte aligned.
  Measured (H = 256, one core, alternating): a GEMV 6.3 us aligned against 9.6 misaligned (every vector load then spans
  two cache lines) and 13.0 by OpenBLAS (np.dot on the ONNX layout); a whole step 7.5 us against 12.7 + 2.8 by the BLAS
  loop below (the gates in registers: 0.2-0.3 us of it). Two rows of a batch (same direction, both running) share each
  pass over R (:func:`_lstm_group2`, 16 accumulators): batch 2 10.5 us a step against 17.3 a row at a time, batch 8 41
  against 66. Sequence lengths, both directions and peepholes are handled in the loop.
- The groups of a pass over R (one step of one row, or of two rows) run first to last, and last to first on the
  next pass over the same direction's R: the blocks read last are the first read again, still in L2 (R of
  H = 256 is 1 MB: in one pass order the L2 of an AMD Zen 4 core, 1 MB, kept little of it for the next step).
  Measured on that Zen 4 (H = 256, 64 steps, one core, the two orders alternating in one process): 11.8 -> 10.9
  us a step (min), 13.9 -> 13.0 (median). Each group's outputs are its own: the order changes no bits.
- A packed R of 512 kB or more lies on a transparent huge page (:func:`huge_empty`, Linux): one TLB entry, no 4 kB
  page boundary for the prefetchers to stop at. Measured (the same Zen 4, a whole LSTM layer H = 256, 64 steps,
  both placements alternating in one process): 1132 -> 1118 us (min), 1408 -> 1393 and 1495 -> 1459 (medians);
  at H = 128 (256 kB) no difference.
- :func:`gru_packed` (AVX-512 or AVX2): a GRU with linear_before_reset (the form PyTorch and ncnn export) on the same
  packed GEMV with 3 gates, its gates in numba's loops (reference: rnn_cell.GRUCell). H = 256, 64 steps:
  0.65 ms a call against 1.66 by the NumPy loop; on the AVX2 Zen 3 (prepared, one BLAS thread, alternating, 40
  rounds) 1.86 ms against 4.40 (medians).
- AVX2 + FMA (no AVX-512, :data:`TILES_OK`): the same loops on groups of 16 units (``_UNITS`` 1: 4 gate vectors,
  8 ymm accumulators; the AVX-512 group's 8 vectors would be 16 ymm and spill), each row of a batch alone (no
  _lstm_group2). The sums are the same, in the same order (each output its H products by FMAs in the order of k):
  the same bits as the AVX-512 groups. Measured on an AMD Zen 3 (64 steps, batch 1, one core, one BLAS thread,
  alternating with the BLAS loop below, 120 rounds): H = 256 31.8 against 36.3 us a step (median), 25.8 against
  23.3 (min): a step is bound by streaming R (1 MB; L2 512 kB) from L3 there, either way; H = 128 (R in L2) 6.2
  against 8.7 (median). The zoo's LSTMs with the gate open (bench_zoo --threads 1, the gate off / on in
  alternate runs, a loaded machine): built:lstm_2layer 1.28-1.51x -> 0.93-1.09x onnxruntime's time, lstm_text
  1.45-1.55x -> 1.01-1.19x, ncnn lstm_text 1.05-1.15x -> 0.78-0.80x the ncnn wheel's (the prepared packing, no
  per-call setup, the gates in registers).
- :func:`lstm_loop` (elsewhere, neither AVX-512 nor AVX2): the same loop with the GEMV by BLAS (numba's np.dot),
  every sequence of full length, no peepholes.
"""

from __future__ import annotations

import mmap

import numpy as np

from ._fast import numba
from ._fast_conv import AVX2, AVX512, PACKED_OK
from ._fast_epilogue import ACT_SIGMOID

#: Where the packed loops run (ops/rnn.py's gate): AVX-512 with the shapes below, AVX2 + FMA with its own.
TILES_OK = AVX512 or AVX2
_VL = 16  # float32 lanes of an AVX-512 register (two ymm halves on AVX2)
# vectors of hidden units per gate per group. AVX-512: a group of 32 units, 4 gates = 8 accumulators (of 32 zmm).
# AVX2: a group of 16 units, 4 gates = 4 vectors = 8 ymm accumulators (of 16: the loop is 8 FMAs with memory
# operands and one broadcast a k, no spill; 32 units would be 16 ymm of accumulators alone and spill). At H = 256
# the step is bound by streaming R from L3 either way (Zen 3, 64 steps, one core, alternating, 60 rounds: batch 1
# 26.6 us a step with 16 units against 27.9 with 32, medians; H = 128, R in L2: 5.1 against 7.0 by BLAS's GEMV)
_UNITS = 2 if AVX512 else 1
# two rows of a batch share each pass over R (_lstm_group2): 16 accumulators, AVX-512 only (32 ymm on AVX2; the
# same measurement, batch 2: 62.1 us a step a row at a time, 67.4 paired)
_PAIR = AVX512
_ALIGN = 64  # bytes: one cache line, one vector
_HUGE = 2 << 20  # bytes: an x86-64 huge page
_HUGE_MIN = 512 << 10  # bytes: smaller packed R stay on 4 kB pages (measured no gain at 256 kB; a huge page is 2 MB)

__all__ = ["PACKED_OK", "TILES_OK", "gru_packed", "lstm_loop", "pack_recurrent"]


def aligned_empty(n: int) -> np.ndarray:
    """A float32 array of n values whose data starts on a 64-byte boundary (a view into a slightly larger one)."""
    buf = np.empty(n + _ALIGN // 4, np.float32)
    off = (-buf.ctypes.data % _ALIGN) // 4
    return buf[off : off + n]


def huge_empty(n: int) -> np.ndarray:
    """A float32 array of n values on transparent huge pages where the OS offers them (Linux, madvise): the data
    starts on a 2 MB boundary of an anonymous mapping advised MADV_HUGEPAGE (only the pages touched get memory);
    elsewhere, and under _HUGE_MIN bytes, :func:`aligned_empty`. A packed R streamed every step then crosses no
    4 kB page (each a new TLB entry and a restart of the hardware prefetchers)."""
    nbytes = 4 * n
    if nbytes < _HUGE_MIN or not hasattr(mmap, "MADV_HUGEPAGE"):
        return aligned_empty(n)
    size = -(-nbytes // _HUGE) * _HUGE + _HUGE
    try:
        m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        buf = np.frombuffer(m, np.uint8)
        off = -buf.ctypes.data % _HUGE
        m.madvise(mmap.MADV_HUGEPAGE, off, size - off)
    except (OSError, ValueError):
        return aligned_empty(n)
    return buf[off : off + nbytes].view(np.float32)


def pack_recurrent(R: np.ndarray, gates: int) -> np.ndarray:
    """R (D, gates*H, H) as the packed GEMV reads it: flat, 64-byte aligned, per direction NG = ceil(H / W)
    groups of W = 16 U units (U = ``_UNITS``: 2 on AVX-512, 1 on AVX2), each (H, gates, U, 16): element
    [d, grp, k, g, p, l] = R[d, g H + W grp + 16 p + l, k] (zero for the units past H)."""
    D, GH, H = R.shape
    NG = -(-H // (_VL * _UNITS))
    out = huge_empty(D * NG * H * gates * _UNITS * _VL)
    _pack(np.ascontiguousarray(R, dtype=np.float32), gates, NG, out)
    return out


if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._fast_epilogue import _act_chunk, _tanh_chunk
    from ._llvm_expstages import ExpStages
    from ._llvm_lanes import Lanes, data

    def _make_gemv(gates: int):
        """The packed GEMV for ``gates`` gates (an intrinsic: the accumulators stay in registers)."""
        nacc = gates * _UNITS
        row = nacc * _VL  # floats per input k of a group

        @intrinsic
        def gemv(typingctx, rp, roff, hv, hoff, K, NG, out, Hp, flip):  # pragma: no cover - compiled
            """out[g Hp + 32 grp + 16 p + l] = sum_{k < K} hv[hoff + k] * rp[roff + (grp K + k) row + (g 2 + p) 16 + l]
            for every group grp < NG: the sums in the order of k, one fused multiply-add per term, from zero. The
            groups in order, or last to first when ``flip`` is nonzero (the module doc's alternating order)."""
            ip = types.intp
            sig = types.void(rp, ip, hv, ip, ip, ip, out, ip, ip)

            def codegen(context, builder, signature, args):
                rp_, roff_, h_, hoff_, K_, NG_, out_, Hp_, flip_ = args
                lanes = Lanes(builder)
                i64, vec, vptr, fma = lanes.i64, lanes.vec, lanes.vptr, lanes.fma
                rdata, hdata, odata = (data(context, builder, signature, args, i) for i in (0, 2, 6))
                slots = [cgutils.alloca_once(builder, vec) for _ in range(nacc)]
                rbase = builder.gep(rdata, [roff_])
                hbase = builder.gep(hdata, [hoff_])
                with cgutils.for_range(builder, NG_) as groups:
                    back = builder.sub(builder.sub(NG_, ir.Constant(i64, 1)), groups.index)
                    grp = builder.select(builder.icmp_signed("!=", flip_, ir.Constant(i64, 0)), back, groups.index)
                    for s in slots:
                        builder.store(ir.Constant(vec, None), s)
                    gbase = builder.gep(rbase, [builder.mul(builder.mul(grp, K_), ir.Constant(i64, row))])
                    with cgutils.for_range(builder, K_) as inputs:
                        k = inputs.index
                        wk = builder.gep(gbase, [builder.mul(k, ir.Constant(i64, row))])
                        s_ = builder.load(builder.gep(hbase, [k]))
                        bc = lanes.splat(s_)
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

    def _emit_lstm_group(context, builder, arrays, roff_, H_, boff_, units_, rows, tile=None):
        """The code of one group of 32 units for ``len(rows)`` rows of the same direction (see _lstm_group): one
        pass over the group's block of R for every row (8 accumulators a row), then each row's gates. ``arrays``:
        (type, value) of rp, h, gx, bias, c; ``rows``: per row the offsets (h in, gx, c, h out, y). ``tile``: a
        GEMM tile whose steps run in the GEMV's loop (ops/_fast_lstm_x.py: n steps, start(), body(j), finish())."""
        v, lanes_ir = ExpStages(builder), Lanes(builder)
        vec, i32, i64, vptr = lanes_ir.vec, lanes_ir.i32, lanes_ir.i64, lanes_ir.vptr
        fma, mload, mstore = lanes_ir.fma, lanes_ir.mload, lanes_ir.mstore

        def arg_data(k):
            ty, val = arrays[k]
            return context.make_array(ty)(context, builder, val).data

        rdata, hdata, gdata, bdata, cdata = (arg_data(k) for k in range(5))
        rbase, bbase = builder.gep(rdata, [roff_]), builder.gep(bdata, [boff_])
        nacc = 4 * _UNITS
        row = nacc * _VL
        slots = [[cgutils.alloca_once(builder, vec) for _ in range(nacc)] for _ in rows]
        for per_row in slots:
            for s_ in per_row:
                builder.store(ir.Constant(vec, None), s_)
        lane0 = ir.Constant(ir.VectorType(i32, _VL), [0] * _VL)  # a shuffle that broadcasts lane 0
        hbases = [builder.gep(hdata, [offs[0]]) for offs in rows]

        def gemv_body(k):  # the GEMV: each row's sums in the order of k, from zero
            wk = builder.gep(rbase, [builder.mul(k, ir.Constant(i64, row))])
            ws = [
                builder.load(builder.bitcast(builder.gep(wk, [ir.Constant(i64, j * _VL)]), vptr), align=4)
                for j in range(nacc)
            ]
            for hb_, per_row in zip(hbases, slots):
                hk = builder.load(builder.gep(hb_, [k]))
                bc = lanes_ir.splat(hk)
                for j in range(nacc):
                    builder.store(builder.call(fma, [bc, ws[j], builder.load(per_row[j])]), per_row[j])

        if tile is None:
            with cgutils.for_range(builder, H_) as inputs:
                gemv_body(inputs.index)
        else:  # a GEMM tile's steps in the same loop, one every 2 inputs k (ops/_fast_lstm_x.py), the rests after
            tile.start()
            half = builder.sdiv(H_, ir.Constant(i64, 2))
            both = builder.select(builder.icmp_signed("<", half, tile.n), half, tile.n)
            with cgutils.for_range(builder, both) as inputs:
                j = inputs.index
                k2 = builder.mul(j, ir.Constant(i64, 2))
                gemv_body(k2)
                tile.body(j)
                gemv_body(builder.add(k2, ir.Constant(i64, 1)))
            with cgutils.for_range_slice(builder, builder.mul(both, ir.Constant(i64, 2)), H_, ir.Constant(i64, 1)) as (
                k,
                _,
            ):
                gemv_body(k)
            with cgutils.for_range_slice(builder, both, tile.n, ir.Constant(i64, 1)) as (j, _):
                tile.body(j)
            tile.finish()
        ivec64 = ir.VectorType(i64, _VL)
        lanes = ir.Constant(ivec64, list(range(_VL)))
        zero = v.c(0.0)
        align = ir.Constant(i32, 4)

        def ptr(b0, off):
            return builder.bitcast(builder.gep(b0, [off]), vptr)

        for (_, goff_, coff_, hoff_, yoff_), per_row in zip(rows, slots):
            gbase, cbase = builder.gep(gdata, [goff_]), builder.gep(cdata, [coff_])
            hobase, ybase = builder.gep(hdata, [hoff_]), builder.gep(arg_data(5), [yoff_])
            for p in range(_UNITS):
                u = ir.Constant(i64, p * _VL)
                left = builder.sub(units_, u)  # units of this vector: lanes < left
                lv = builder.insert_element(ir.Constant(ivec64, ir.Undefined), left, ir.Constant(i32, 0))
                mask = builder.icmp_signed(
                    "<", lanes, builder.shuffle_vector(lv, ir.Constant(ivec64, ir.Undefined), lane0)
                )
                z = []
                for q in range(4):
                    off = builder.add(builder.mul(ir.Constant(i64, q), H_), u)
                    gq = builder.call(mload, [ptr(gbase, off), align, mask, zero])
                    bq = builder.call(mload, [ptr(bbase, off), align, mask, zero])
                    z.append(v.add(v.add(gq, bq), builder.load(per_row[q * _UNITS + p])))
                gi, go, gf = v.sigmoid(z[0]), v.sigmoid(z[1]), v.sigmoid(z[2])
                gc = v.tanh(z[3])
                cp = ptr(cbase, u)
                ct = v.add(v.mul(gf, builder.call(mload, [cp, align, mask, zero])), v.mul(gi, gc))
                builder.call(mstore, [ct, cp, align, mask])
                hv = v.mul(go, v.tanh(ct))
                builder.call(mstore, [hv, ptr(hobase, u), align, mask])
                builder.call(mstore, [hv, ptr(ybase, u), align, mask])

    @intrinsic
    def _lstm_group(typingctx, rp, roff, h, H, gx, bias, boff, c, y, units, hin, goff, coff, hout, yoff):
        """One group of 32 hidden units of an LSTM step (no peepholes), in registers: the packed GEMV of the group
        (as ``_gemv4``: rp[roff:] its (H, 4, 2, 16) block, h[hin:] the H inputs), then per vector of 16 units
        z = (gx + bias) + acc for each gate q (gx[goff + q H + u], bias[boff + q H + u]), i, o, f = sigmoid(z),
        g = tanh(z), Ct = f * c + i * g into c[coff + u], Ht = o * tanh(Ct) into h[hout + u] and y[yoff + u], for
        the units u < ``units`` of the group (masked loads and stores: a last, partial group)."""
        ip = types.intp
        sig = types.void(rp, ip, h, ip, gx, bias, ip, c, y, ip, ip, ip, ip, ip, ip)

        def codegen(context, builder, signature, args):
            ts = signature.args
            arrays = [(ts[i], args[i]) for i in (0, 2, 4, 5, 7, 8)]
            _emit_lstm_group(context, builder, arrays, args[1], args[3], args[6], args[9], [args[10:15]])
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def _lstm_group2(
        typingctx, rp, roff, h, H, gx, bias, boff, c, y, units, hin, goff, coff, hout, yoff, hin2, goff2, coff2,
        hout2, yoff2,
    ):  # fmt: skip
        """_lstm_group for two rows of the same direction at once: R's block read once for both."""
        ip = types.intp
        sig = types.void(rp, ip, h, ip, gx, bias, ip, c, y, ip, ip, ip, ip, ip, ip, ip, ip, ip, ip, ip)

        def codegen(context, builder, signature, args):
            ts = signature.args
            arrays = [(ts[i], args[i]) for i in (0, 2, 4, 5, 7, 8)]
            rows = [args[10:15], args[15:20]]
            _emit_lstm_group(context, builder, arrays, args[1], args[3], args[6], args[9], rows)
            return context.get_dummy_value()

        return sig, codegen

    _gemv3 = _make_gemv(3)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _gru_packed(gx, wbias, rbias, Rp, NG, lens, rev, h, Y, B):  # pragma: no cover - compiled
        # GRU, linear_before_reset: gx (T, B, D*3H) = x W^T (no bias), wbias / rbias (D, 3H) = Wb / Rb, Rp packed R
        # (3 gates), lens, rev as _lstm_packed; h (D*B, H) in place, Y (T, D*B, H). Gates in ONNX order z, r, h:
        # z, r = sigmoid((x W^T + Wb) + Rb + h R^T); n = tanh((x Wh^T + Wbh) + r * (h Rh^T + Rbh));
        # Ht = (1 - z) * n + z * Ht-1, the reference's operations in its order (rnn_cell.GRUCell)
        T = gx.shape[0]
        DB, H = h.shape
        G = 3 * H
        Hp = NG * _VL * _UNITS
        dsize = 3 * Hp * H
        rec = np.empty(3 * Hp, np.float32)
        zr = np.empty(2 * H, np.float32)
        n = np.empty(H, np.float32)
        e = np.empty(2 * H, np.float32)
        kb = np.empty(2 * H, np.int32)
        hf = h.reshape(-1)
        zero = np.float32(0)
        one = np.float32(1)
        passes = np.zeros(DB // B, np.int64)  # as ops/_fast_lstm_loop.py's _step
        for t in range(T):
            for r in range(DB):
                d = r // B
                b = r - d * B
                L = lens[b]
                if t >= L:
                    continue
                ti = L - 1 - t if rev[d] else t
                _gemv3(Rp, d * dsize, hf, r * H, H, NG, rec, Hp, passes[d] % 2)
                passes[d] += 1
                g = gx[ti, b, d * G : (d + 1) * G]
                wb, rb = wbias[d], rbias[d]
                for q in range(2):
                    for j in range(H):
                        zr[q * H + j] = ((g[q * H + j] + wb[q * H + j]) + rb[q * H + j]) + rec[q * Hp + j]
                _act_chunk(zr, ACT_SIGMOID, zero, zero, e, kb, e)
                for j in range(H):
                    hh = zr[H + j] * (rec[2 * Hp + j] + rb[2 * H + j])
                    n[j] = (g[2 * H + j] + wb[2 * H + j]) + hh
                _tanh_chunk(n, e, kb)
                hr, yr = h[r], Y[ti, r]
                for j in range(H):
                    z = zr[j]
                    hv = (one - z) * n[j] + z * hr[j]
                    hr[j] = hv
                    yr[j] = hv

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
        passes = np.zeros(DB // B, np.int64)  # as ops/_fast_lstm_loop.py's _step
        for t in range(T):
            for r in range(DB):
                d = r // B
                b = r - d * B
                L = lens[b]
                if t >= L:
                    continue
                ti = L - 1 - t if rev[d] else t
                _gemv4(Rp, d * dsize, hf, r * H, H, NG, rec, Hp, passes[d] % 2)
                passes[d] += 1
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


def gru_packed(gx, wbias, rbias, Rp, lens, reverse, h, Y, B: int) -> None:
    """Run the GRU recurrence (linear_before_reset) in place on the packed R (:func:`pack_recurrent` with 3 gates;
    :data:`TILES_OK`): gx (T, B, D*3H) the input projections without bias, wbias and rbias (D, 3H) = Wb and Rb, lens and
    reverse as ops/_fast_lstm_loop.py's lstm_packed, h (D*B, H) the state, Y (T, D*B, H); all float32 C-contiguous."""
    NG = -(-h.shape[1] // (_VL * _UNITS))
    _gru_packed(gx, wbias, rbias, Rp, NG, lens, reverse, h, Y, B)
