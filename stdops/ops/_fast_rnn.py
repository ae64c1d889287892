"""The LSTM time loop compiled (numba, the optional ``fast`` extra): every step of every direction in one call,
for the common case (float32, the default activations Sigmoid / Tanh / Tanh, no peepholes, no clip, no
input_forget, every sequence of full length). The NumPy loop of ops/rnn.py pays ~12 NumPy calls per step
(about 1 us each) around a GEMV of a few microseconds; here a step is the GEMV (BLAS, through numba's np.dot)
and one pass over the gates. Reference: ops/rnn.py's loop on the shared cells (rnn_cell.LSTMCell); the
sigmoid is the epilogue's polynomial one (~4 ulp), tanh libm's, the cell update the reference's products and
sums in its order.
"""

from __future__ import annotations

import numpy as np

from ._fast import numba
from ._fast_epilogue import ACT_SIGMOID

if numba is not None:
    from ._fast_epilogue import _act_chunk, _tanh_chunk

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
