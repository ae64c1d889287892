"""The LSTM recurrence's loop over steps on the packed R (ops/_fast_rnn.py: the groups of 32 or 16 hidden units, the
packed GEMV, the gates in registers), on one thread or split over two.

- :func:`lstm_packed`: the entry. With peepholes, ops/_fast_rnn.py's loop in numba; without, every step of every row
  by the register groups (:func:`_step`).
- Two threads (the caller's thread count, :func:`ops._blas.threads`, at least 2, and at least ``_SPLIT_STEP_FLOPS``
  of recurrent product a step): each step's groups in two halves, one per thread, the two threads inside one
  compiled call each (:func:`_lstm_part`, started by ops/_blas.run_parts). A step of ~16-20 us (H = 256 on an AMD
  Zen 2) is shorter than a hand-off through run_parts' queue (~19 us median), so the threads meet once a step
  through flags instead (ops/_llvm_sync.py): a half is claimed by compare-and-swap, run once the previous step's two
  halves are done, and counted done. Each thread claims its own half first and then the other's, so a thread that
  has not started yet (or was descheduled) never holds the other up: its halves are taken by the one running, as
  run_parts does with parts (a half once claimed is waited for). Each half keeps its own part of R near its core
  (at H = 256, 512 kB of the 1 MB a step streams). The groups' outputs are their own and a step's groups all read
  the previous step's state: the bits are those of one thread.
"""

from __future__ import annotations

import numpy as np

from . import _blas
from ._fast import numba
from ._fast_rnn import _PAIR, _UNITS, _VL

__all__ = ["lstm_packed"]

# the recurrent product of a step (8 D B H^2 FLOPs, every row) from which two threads share the steps. Measured (AMD
# Zen 2, 2 vCPUs, one direction, batch 1, 64 steps, 1 and 2 threads alternating, 300 rounds, medians; the call's
# run_parts hand-off included): H = 256 (2^19) 997 -> 617 us, H = 192 562 -> 405, H = 160 376 -> 331, H = 128 (2^17)
# 254 -> 264, H = 64 87 -> 144: under ~4 us a step the halves are too short for the meeting to pay
_SPLIT_STEP_FLOPS = 1 << 18
_STRIDE = 8  # int64 flags a step (one cache line): [claimed half 0, claimed half 1, halves done]

if numba is not None:
    from ._fast_rnn import _lstm_group, _lstm_group2, _lstm_packed
    from ._llvm_sync import claim, fetch_add, wait_at_least

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _step(t, g0, g1, passes, gxf, bf, Rp, NG, lens, rev, hf, cf, yf, B, DB, H):  # pragma: no cover - compiled
        # step t of every active row, the groups g0 <= grp < g1 (_lstm_group, two rows at once by _lstm_group2 where
        # _PAIR); the state read is hf's half t % 2 (written at step t - 1), Ht goes to the other half. passes (D,):
        # passes over each direction's R by this thread so far, odd ones run
        # its groups last to first (ops/_fast_rnn.py).
        G = 4 * H
        W = _VL * _UNITS
        gsize = 4 * W * H  # floats of one group's block
        dsize = NG * gsize
        D = DB // B
        src = (t % 2) * DB * H
        dst = ((t + 1) % 2) * DB * H
        n = g1 - g0
        for d in range(D):
            pending = -1  # an active row of this direction waiting for a partner
            for b in range(B + 1):
                if b < B:
                    L = lens[b]
                    if t >= L:
                        continue
                    if pending < 0:
                        pending = b
                        if _PAIR:
                            continue
                elif pending < 0:
                    break
                b1 = pending
                L1 = lens[b1]
                r1 = d * B + b1
                ti1 = L1 - 1 - t if rev[d] else t
                g1x = (ti1 * B + b1) * D * G + d * G
                flip = passes[d] % 2
                passes[d] += 1
                if b == B or not _PAIR:  # the last active row alone (without _PAIR every row)
                    for gi in range(n):
                        grp = g1 - 1 - gi if flip else g0 + gi
                        u0 = grp * W
                        _lstm_group(
                            Rp, d * dsize + grp * gsize, hf, H, gxf, bf, d * G + u0, cf, yf, min(W, H - u0),
                            src + r1 * H, g1x + u0, r1 * H + u0, dst + r1 * H + u0, (ti1 * DB + r1) * H + u0,
                        )  # fmt: skip
                    pending = -1
                    continue
                r2 = d * B + b
                ti2 = L - 1 - t if rev[d] else t
                g2x = (ti2 * B + b) * D * G + d * G
                for gi in range(n):
                    grp = g1 - 1 - gi if flip else g0 + gi
                    u0 = grp * W
                    _lstm_group2(
                        Rp, d * dsize + grp * gsize, hf, H, gxf, bf, d * G + u0, cf, yf, min(W, H - u0),
                        src + r1 * H, g1x + u0, r1 * H + u0, dst + r1 * H + u0, (ti1 * DB + r1) * H + u0,
                        src + r2 * H, g2x + u0, r2 * H + u0, dst + r2 * H + u0, (ti2 * DB + r2) * H + u0,
                    )  # fmt: skip
                pending = -1

    @numba.njit(inline="always", error_model="numpy")
    def _flat(gx, bias, hb, c, Y, B):  # pragma: no cover - compiled
        # what both loops below hand _step: the passes of each direction (zeros) and the operands flat
        passes = np.zeros(hb.shape[1] // B, np.int64)
        return passes, gx.reshape(-1), bias.reshape(-1), hb.reshape(-1), c.reshape(-1), Y.reshape(-1)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _lstm_fused(gx, bias, Rp, NG, lens, rev, hb, c, Y, B):  # pragma: no cover - compiled
        # every step on this thread. gx (T, B, D*4H), bias (D, 4H), hb (2, D*B, H): the state, hb[0] the initial
        # one; c (D*B, H) in place, Y (T, D*B, H)
        _, DB, H = hb.shape
        passes, gxf, bf, hf, cf, yf = _flat(gx, bias, hb, c, Y, B)
        for t in range(gx.shape[0]):
            _step(t, 0, NG, passes, gxf, bf, Rp, NG, lens, rev, hf, cf, yf, B, DB, H)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _lstm_part(role, sync, gx, bias, Rp, NG, lens, rev, hb, c, Y, B):  # pragma: no cover - compiled
        # one of the two threads (role 0 or 1) of the module doc's split: half p runs the groups [0, NG / 2) or
        # [NG / 2, NG); sync (T _STRIDE,) zeros, the flags of every step
        _, DB, H = hb.shape
        passes, gxf, bf, hf, cf, yf = _flat(gx, bias, hb, c, Y, B)
        mid = NG // 2
        for t in range(gx.shape[0]):
            base = t * _STRIDE
            for k in range(2):
                p = role if k == 0 else 1 - role
                if claim(sync, base + p):
                    if t > 0:
                        wait_at_least(sync, base - _STRIDE + 2, 2)
                    g0, g1 = (0, mid) if p == 0 else (mid, NG)
                    _step(t, g0, g1, passes, gxf, bf, Rp, NG, lens, rev, hf, cf, yf, B, DB, H)
                    fetch_add(sync, base + 2, 1)


def lstm_packed(gx, bias, Rp, lens, reverse, P, h, c, Y, B: int) -> None:
    """Run the LSTM recurrence in place on the packed R (ops/_fast_rnn.py; AVX-512 or AVX2, its TILES_OK): gx
    (T, B, D*4H) the input projections without bias, bias (D, 4H) = Wb + Rb, Rp from ops/_fast_rnn.pack_recurrent,
    lens (B,) int64 the sequence lengths (steps past one are skipped: Y stays as given, the states hold; the reverse
    direction runs from the sequence's own last step), reverse (D,) bool, P (D, 3H) the peepholes or None, h and c
    (D*B, H) the states, Y (T, D*B, H); all float32 C-contiguous. On two threads where the module doc says."""
    DB, H = h.shape
    if DB == 0:  # an empty batch: nothing to run
        return
    NG = -(-H // (_VL * _UNITS))
    if P is not None:
        _lstm_packed(gx, bias, Rp, NG, lens, reverse, P, h, c, Y, B)
        return
    hb = np.empty((2, DB, H), np.float32)
    hb[0] = h
    T = gx.shape[0]
    if NG >= 2 and T > 1 and 8 * DB * H * H >= _SPLIT_STEP_FLOPS and _blas.threads() > 1:
        sync = np.zeros(T * _STRIDE, np.int64)
        args = (sync, gx, bias, Rp, NG, lens, reverse, hb, c, Y, B)
        _blas.run_parts([lambda: _lstm_part(0, *args), lambda: _lstm_part(1, *args)])
    else:
        _lstm_fused(gx, bias, Rp, NG, lens, reverse, hb, c, Y, B)
    rows = np.arange(DB)
    h[:] = hb[lens[rows % B] % 2, rows]  # row d B + b ran lens[b] steps: its last state is in hb[lens[b] % 2]
