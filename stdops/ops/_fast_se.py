"""Compiled squeeze-and-excitation gate (numba, the optional ``fast`` extra): E = act2(W2 act1(W1 m + b1) + b2) for
each sample's channel means m (ops/fused.py's pooling GEMV, the GlobalAveragePool kernel's formula), as one
compiled call where ops/fused.py's NumPy gate makes four (two small GEMMs, two epilogues: per-call cost, most of a
MobileNetV3-small gate's 19-35 us).

Each product sums in order over its inputs from zero (the weight rows as vectors of the outputs), the bias and the
activation (ops/_fast_epilogue.py's codes) after. Reference: the NumPy gate (tests/ops/test_fast_se.py, within
float32 rounding). (The means compiled too, as 16 partial sums a channel, ran slower than the GEMV on 672 x 196:
65 us against 33.)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._fast import numba

#: the path on, read when a step is prepared (tests turn it off to reach the NumPy gate)
USE = True

if numba is not None:
    from ._fast_epilogue import _act_chunk

    @numba.njit(inline="always", error_model="numpy")
    def _dense(v, wt, b, a, p, q, out, s1, kb, s2):  # pragma: no cover - compiled
        """out = act(v @ wt + b): the rows of wt (K, J) as vectors of the outputs, in order over k from zero; b
        empty: none."""
        out[:] = 0
        for k in range(wt.shape[0]):
            vk = v[k]
            for j in range(wt.shape[1]):
                out[j] += vk * wt[k, j]
        if b.shape[0]:
            out += b
        if a != 0:
            _act_chunk(out, a, p, q, s1, kb, s2)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _gate(m, w1t, b1, a1, p1, q1, w2t, b2, a2, p2, q2, e):  # pragma: no cover - compiled
        """e (N, C) = act2(act1(m @ w1t + b1) @ w2t + b2) for the means m (N, C), w1t (C, C1), w2t (C1, C); b1, b2
        empty: none."""
        N, C = m.shape
        C1 = w1t.shape[1]
        h = np.empty(C1, np.float32)
        span = max(C, C1)
        s1, s2, kb = np.empty(span, np.float32), np.empty(span, np.float32), np.empty(span, np.int32)
        for n in range(N):
            _dense(m[n], w1t, b1, a1, p1, q1, h, s1, kb, s2)
            _dense(h, w2t, b2, a2, p2, q2, e[n], s1, kb, s2)


def gate_call(w1t: np.ndarray, b1, act1, w2t: np.ndarray, b2, act2) -> Callable[[np.ndarray], np.ndarray] | None:
    """``fn(means) -> E (N, C)`` for the means (N, C) C-contiguous float32, from W1^T (C, C1) and W2^T (C1, C) float32
    C-contiguous, the biases (or None) and the activations as (code, p, q) of ops/_fast_epilogue.py; None where
    numba is absent or USE is off."""
    if numba is None or not USE:
        return None
    f = np.float32
    none = np.zeros(0, f)
    bb1 = none if b1 is None else np.ascontiguousarray(b1, f)
    bb2 = none if b2 is None else np.ascontiguousarray(b2, f)
    (c1, p1, q1), (c2, p2, q2) = act1, act2
    a1, a2 = (int(c1), f(p1), f(q1)), (int(c2), f(p2), f(q2))

    def run(pooled: np.ndarray) -> np.ndarray:
        e = np.empty(pooled.shape, f)
        _gate(pooled, w1t, bb1, *a1, w2t, bb2, *a2, e)
        return e

    return run
