"""An LSTM's input projection computed inside its recurrence (one direction, a batch of 1, full-length sequence, no
peepholes; FUSED_OK; ops/rnn.py runs a reverse direction on the steps reversed, two directions one by one): the
packed recurrent GEMV of ops/_fast_rnn.py streams R from L2/L3 and leaves the FMA units about half idle (H = 256 on
an AMD Zen 4: ~10.6 us a step for 16384 vector FMAs, ~100 GB/s), while the input projection x W^T of the same layer,
one GEMM before the loop, is FMA-bound (64 x 256 x 1024: ~0.37 ms, 5.7 us a step). Here the projection of the next
block of :data:`ROWS` steps is a sequence of GEMM tiles (16 steps x 16 columns: 16 accumulators, W's column panel
streamed once per block, x's block transposed so that one cache line holds an input's 16 steps), each half of a tile
(its first or last I/2 inputs) run in the loop of one group's GEMV, one tile step every two inputs k (both in the
same loop body: the core overlaps them), the tiles of a block spread over the steps of the block before; the first
block is computed before the loop by the same tiles (the part that overlaps nothing: 1/4 of the projection for 64
steps).

Measured on the Zen 4 (one core): extra FMAs in the GEMV's loop from L1 cost ~0.4-0.8 us a step for as many as
the GEMV's own; a whole layer of 64 steps, H = 256 (both paths alternating in one process, 300 rounds): I = 256
1097 -> 893 us (min), 1162 -> 941 (median); I = 128 912 -> 797, 942 -> 814. A whole tile in one group's loop (a
tile step at every k: 24 FMAs a k there, the FMA units' bound) against the halves in two groups: I = 256 884-892
-> 856-866 us (min, two alternating runs), I = 128 784-792 -> 782-783. Each projection sums its I products in the
order of i by fused multiply-adds from zero (OpenBLAS's order may differ: the tests allow last-bit differences
from the unfused path; on the shapes tried the bits were the same), the same at any thread count;
z = (x W^T + b) + h R^T as in ops/_fast_rnn.py.

Where: :data:`FUSED_OK`, a rule on the CPU: AMD's cores run 512-bit vectors as two 256-bit halves and the GEMV's
loop there is bound by its loads (the measurement above); on the Intel Skylake-X cores the previous measurements
were taken on, the GEMV ran 7.5 us a step, the FMA units busier, so the overlap is unmeasured there and that path
stays the GEMM before the loop. On AVX2 (AMD Zen 3, no AVX-512) the tile's 16 accumulators are 32 ymm halves, the
GEMV's group another 8, of 16 registers: it runs (the tests take it there) but spills, and the GEMM before the
loop wins. Measured there (H = 256, 64 steps, one core, one BLAS thread, both paths alternating through the
prepared step, 100 rounds): I = 256 fused 3114 us (median) / 2488 (min) against 2549 / 2126; I = 128 1921 / 1619
against 1630 / 1350. So :data:`FUSED_OK` stays AVX-512 only (a tile shaped for AVX2 would need fewer rows a
block, and more tiles than groups a step: not tried).
"""

from __future__ import annotations

import numpy as np

from ._fast import numba
from ._fast_conv import AVX512
from ._fast_rnn import _UNITS, _VL, aligned_empty

ROWS = 16  # steps of a block: the tile's rows (16 accumulators, with the GEMV's 8 and 2 more: 26 of 32 registers)


def _amd() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return "AuthenticAMD" in f.read(4096)
    except OSError:
        return False


FUSED_OK = AVX512 and _amd()  # per ISA: off on AVX2 (the module doc's measurement)

__all__ = ["FUSED_OK", "ROWS", "lstm_x", "pack_input", "usable", "x_blocks"]

_enabled = True  # tests turn the fused path off to compare it with the GEMM before the loop


def usable() -> bool:
    """Whether :func:`lstm_x` runs where :data:`FUSED_OK` put it (tests switch it off)."""
    return _enabled


def pack_input(Wt: np.ndarray) -> np.ndarray:
    """W^T (I, N) as the tiles read it: flat, 64-byte aligned, (ceil(N / 16), I, 16): element [v, i, l] =
    Wt[i, 16 v + l] (zero past N)."""
    I, N = Wt.shape
    nv = -(-N // _VL)
    pad = np.zeros((I, nv * _VL), np.float32)
    pad[:, :N] = Wt
    out = aligned_empty(nv * I * _VL)
    out.reshape(nv, I, _VL)[...] = pad.reshape(I, nv, _VL).transpose(1, 0, 2)
    return out


def x_blocks(x: np.ndarray) -> np.ndarray:
    """x (T, I) as blocks of ROWS steps transposed: flat (ceil(T / ROWS), I, ROWS), zero past T."""
    T, I = x.shape
    nb = -(-T // ROWS)
    pad = np.zeros((nb * ROWS, I), np.float32)
    pad[:T] = x
    return np.ascontiguousarray(pad.reshape(nb, ROWS, I).transpose(0, 2, 1)).reshape(-1)


if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._fast_rnn import _emit_lstm_group, _lstm_group
    from ._llvm_lanes import Lanes, data

    class _Tile:
        """A GEMM tile's code, half of it (its inputs i0 <= i < i0 + n): acc[r] += xt[xoff + i ROWS + r] * wp[woff +
        i 16 + l] for r < ROWS in the order of i; the first half (``phase`` 0) from zero into ``scratch`` (ROWS
        vectors), the second from ``scratch`` into out[ooff + r ostride + l] for l < ``left`` (a masked store: the
        last columns). The two halves run in two groups' loops: their GEMV's loads then bound each group's time,
        with one tile step every two inputs k (a whole tile in one group measured the FMAs' bound there)."""

        def __init__(self, builder, wdata, woff, xdata, xoff, i0, n, odata, ooff, ostride, left, sdata, phase):
            self.b, self.L = builder, Lanes(builder)
            c = self.c = lambda m: ir.Constant(self.L.i64, m)
            self.n, self.ostride, self.left = n, ostride, left
            self.wbase = builder.gep(wdata, [builder.add(woff, builder.mul(i0, c(_VL)))])
            self.xbase = builder.gep(xdata, [builder.add(xoff, builder.mul(i0, c(ROWS)))])
            self.obase, self.sdata = builder.gep(odata, [ooff]), sdata
            self.second = builder.icmp_signed("!=", phase, c(0))
            self.acc = [cgutils.alloca_once(builder, self.L.vec) for _ in range(ROWS)]

        def _scratch(self, r):
            return self.b.bitcast(self.b.gep(self.sdata, [self.c(r * _VL)]), self.L.vptr)

        def start(self):
            b, L = self.b, self.L
            for r, a in enumerate(self.acc):
                b.store(b.select(self.second, b.load(self._scratch(r), align=4), L.zero), a)

        def body(self, j):
            b, L = self.b, self.L
            w = b.load(b.bitcast(b.gep(self.wbase, [b.mul(j, self.c(_VL))]), L.vptr), align=4)
            xi = b.gep(self.xbase, [b.mul(j, self.c(ROWS))])
            for r, a in enumerate(self.acc):
                s = L.splat(b.load(b.gep(xi, [self.c(r)])))
                b.store(b.call(L.fma, [s, w, b.load(a)]), a)

        def finish(self):
            b, L = self.b, self.L
            with b.if_else(self.second) as (to_out, to_scratch):
                with to_out:
                    mask = L.mask(self.left)
                    for r, a in enumerate(self.acc):
                        dst = b.bitcast(b.gep(self.obase, [b.mul(self.c(r), self.ostride)]), L.vptr)
                        b.call(L.mstore, [b.load(a), dst, L.align, mask])
                with to_scratch:
                    for r, a in enumerate(self.acc):
                        b.store(b.load(a), self._scratch(r), align=4)

    _NT = 12  # a tile's arguments: wp, woff, xt, xoff, i0, n, out, ooff, ostride, left, scratch, phase

    def _tile_of(context, builder, signature, args, first):
        """The _Tile of the _NT arguments from ``first``."""
        wd, xd, od, sd = (data(context, builder, signature, args, first + j) for j in (0, 2, 6, 10))
        a = args[first:]
        return _Tile(builder, wd, a[1], xd, a[3], a[4], a[5], od, a[7], a[8], a[9], sd, a[11])

    @intrinsic
    def _gemm_tile(typingctx, wp, woff, xt, xoff, i0, n, out, ooff, ostride, left, scratch, phase):
        """Half a GEMM tile alone (see _Tile)."""
        ip = types.intp
        sig = types.void(wp, ip, xt, ip, ip, ip, out, ip, ip, ip, scratch, ip)

        def codegen(context, builder, signature, args):
            tile = _tile_of(context, builder, signature, args, 0)
            tile.start()
            with cgutils.for_range(builder, args[5]) as loop:
                tile.body(loop.index)
            tile.finish()
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def _lstm_group_tile(
        typingctx, rp, roff, h, H, gx, bias, boff, c, y, units, hin, goff, coff, hout, yoff, wp, woff, xt, xoff, i0,
        n, out, ooff, ostride, left, scratch, phase,
    ):  # fmt: skip
        """ops/_fast_rnn._lstm_group with half a GEMM tile (the last _NT arguments, see _Tile) in its GEMV's loop."""
        ip = types.intp
        sig = types.void(
            rp, ip, h, ip, gx, bias, ip, c, y, ip, ip, ip, ip, ip, ip, wp, ip, xt, ip, ip, ip, out, ip, ip, ip, scratch,
            ip,
        )  # fmt: skip

        def codegen(context, builder, signature, args):
            ts = signature.args
            arrays = [(ts[i], args[i]) for i in (0, 2, 4, 5, 7, 8)]
            tile = _tile_of(context, builder, signature, args, 15)
            _emit_lstm_group(context, builder, arrays, args[1], args[3], args[6], args[9], [args[10:15]], tile)
            return context.get_dummy_value()

        return sig, codegen

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _lstm_x(gx, xt, nb, Wp, I, bias, Rp, NG, h, c, Y):  # pragma: no cover - compiled
        # gx (nb ROWS, 4H) scratch: row t = x_t W^T; xt x_blocks(x), nb blocks; Wp pack_input(W^T); bias (4H,) =
        # Wb + Rb; Rp pack_recurrent(R) of one direction; h, c (1, H) in place; Y (T, 1, H). Block 0 first; during
        # the steps of block n - 1 the tiles of block n, ncv of them a block, (s ncv / ROWS ... (s + 1) ncv / ROWS)
        # at its step s, each in one group's GEMV (the groups in ops/_fast_rnn.py's alternating order).
        T = Y.shape[0]
        H = h.shape[1]
        G = 4 * H
        W = _VL * _UNITS
        gsize = 4 * W * H
        ncv = -(-G // _VL)
        hb = np.empty((2, H), np.float32)
        hb[0] = h[0]
        gxf, bf, hf, cf, yf = gx.reshape(-1), bias.reshape(-1), hb.reshape(-1), c.reshape(-1), Y.reshape(-1)
        panel = I * _VL
        half = I // 2
        scratch = np.empty(ROWS * _VL, np.float32)
        for v in range(ncv):
            left = min(_VL, G - v * _VL)
            _gemm_tile(Wp, v * panel, xt, 0, 0, half, gxf, v * _VL, G, left, scratch, 0)
            _gemm_tile(Wp, v * panel, xt, 0, half, I - half, gxf, v * _VL, G, left, scratch, 1)
        for t in range(T):
            src = (t % 2) * H
            dst = ((t + 1) % 2) * H
            nxt = t // ROWS + 1
            s = t % ROWS
            v0, halves = 0, 0
            if nxt < nb:
                v0 = s * ncv // ROWS
                halves = 2 * ((s + 1) * ncv // ROWS - v0)
            xo, oo = nxt * I * ROWS, nxt * ROWS * G
            j = 0  # the next half tile of this step: tile v0 + j // 2, its half j % 2
            for gi in range(NG):
                grp = NG - 1 - gi if t % 2 else gi
                u0 = grp * W
                if j < halves:
                    v, ph = v0 + j // 2, j % 2
                    _lstm_group_tile(
                        Rp, grp * gsize, hf, H, gxf, bf, u0, cf, yf, min(W, H - u0), src, t * G + u0, u0, dst + u0,
                        t * H + u0, Wp, v * panel, xt, xo, ph * half, half if ph == 0 else I - half, gxf,
                        oo + v * _VL, G, min(_VL, G - v * _VL), scratch, ph,
                    )  # fmt: skip
                    j += 1
                else:
                    _lstm_group(
                        Rp, grp * gsize, hf, H, gxf, bf, u0, cf, yf, min(W, H - u0), src, t * G + u0, u0, dst + u0,
                        t * H + u0,
                    )  # fmt: skip
            while j < halves:  # more half tiles than groups (small H)
                v, ph = v0 + j // 2, j % 2
                n = half if ph == 0 else I - half
                left = min(_VL, G - v * _VL)
                _gemm_tile(Wp, v * panel, xt, xo, ph * half, n, gxf, oo + v * _VL, G, left, scratch, ph)
                j += 1
        h[0] = hb[T % 2]


def lstm_x(x, Wp, bias, Rp, h, c, Y) -> None:
    """Run one direction of an LSTM on a batch of 1 with its input projection in the loop (the module doc): x (T, I)
    the inputs, Wp from :func:`pack_input` (W^T of the direction), bias (4H,) = Wb + Rb, Rp from
    ops/_fast_rnn.pack_recurrent, h and c (1, H) the states (updated in place), Y (T, 1, H); all float32
    C-contiguous, T >= 1."""
    T, I = x.shape
    H = h.shape[1]
    NG = -(-H // (_VL * _UNITS))
    nb = -(-T // ROWS)
    gx = np.empty((nb * ROWS, 4 * H), np.float32)
    _lstm_x(gx, x_blocks(x), nb, Wp, I, bias, Rp, NG, h, c, Y)
