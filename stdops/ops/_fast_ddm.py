"""Compiled drift-diffusion walk (numba, the optional ``fast`` extra; on when ops/_fast.py's ``enabled()``).

Drift-diffusion trials walked one at a time to their crossing, each on its counter-based normals (Philox4x32-10
words made 32-128 at a time in SIMD lanes, the ziggurat's fast path inline; the words past a trial's end are never
turned into normals); the NumPy path walks all trials a block of steps at a time, with the same bits (so no fused
multiply-add here: each step's x + (mu + sigma z) is NumPy's). 10,000 trials of ~420 steps: 1.7 us per trial
against 39 us (benchmarks/bench_mdf.py, where modeci-mdf's function takes ~250 us per trial).

Reference: stdops.ops.cognitive.ddm._walk_numpy (tests/ops/test_ddm.py compares them bit for bit).
"""

from __future__ import annotations

import math

import numpy as np

from ._fast import numba

# --------------------------------------------------------------------------------------------------------
# Drift diffusion: each trial walked to its end on its own counter-based normals (NumPy reference:
# stdops.ops.cognitive.ddm._walk_numpy on stdops.ops.cognitive.philox_normals, which this must match bit for bit)

if numba is not None:
    _U64 = numba.uint64
    _LO32 = np.uint64(0xFFFFFFFF)
    _SH32 = np.uint64(32)
    _SH12 = np.uint64(12)
    _SH11 = np.uint64(11)
    _SH8 = np.uint64(8)
    _ONE = np.uint64(1)
    _MASK8 = np.uint64(0xFF)
    _PM0, _PM1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    _PW0, _PW1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
    _OVF = np.uint64(1 << 63)
    _OVF_SHIFT = np.uint64(20)
    _U53 = 2.0**-53

    @numba.njit(inline="always")
    def _philox_words(j, stream, key):  # pragma: no cover - compiled
        # Philox4x32-10 of the counter (j, stream) under key: philox_normals.words
        c0, c1, c2, c3 = j & _LO32, j >> _SH32, stream & _LO32, stream >> _SH32
        k0, k1 = key & _LO32, key >> _SH32
        for _ in range(10):
            p0 = _PM0 * c0
            p1 = _PM1 * c2
            c0, c1, c2, c3 = (p1 >> _SH32) ^ c1 ^ k0, p1 & _LO32, (p0 >> _SH32) ^ c3 ^ k1, p0 & _LO32
            k0 = (k0 + _PW0) & _LO32
            k1 = (k1 + _PW1) & _LO32
        return c0 | (c1 << _SH32), c2 | (c3 << _SH32)

    @numba.njit(inline="always")
    def _overflow_word(key, stream, step, pos):  # pragma: no cover - compiled
        w0, w1 = _philox_words(_OVF | (step << _OVF_SHIFT) | (pos >> _ONE), stream, key)
        return w0 if (pos & _ONE) == 0 else w1

    @numba.njit(nogil=True)
    def _slow_normal(key, stream, step, layer, neg, v, scale, inner, zf, r):  # pragma: no cover - compiled
        # philox_normals._slow_path for one word: the tail beyond r (layer 0) or a wedge, fresh words after
        # a rejected wedge; exp only in the tests (math.exp: the C library's, as the NumPy path's band uses)
        pos = _U64(0)
        while True:
            if layer == 0:
                u1 = (np.float64(_overflow_word(key, stream, step, pos) >> _SH11) + 1.0) * _U53
                u2 = np.float64(_overflow_word(key, stream, step, pos + _ONE) >> _SH11) * _U53
                pos += _U64(2)
                x = r / math.sqrt(u1)
                q = x / r
                if u2 / (q * q * q) < math.exp(-0.5 * (x * x - r * r)):
                    return -x if neg else x
            else:
                u = np.float64(_overflow_word(key, stream, step, pos) >> _SH11) * _U53
                pos += _ONE
                y = zf[layer] + u * (zf[layer + 1] - zf[layer])
                if y < math.exp(-0.5 * v * v):
                    return -v if neg else v
                w = _overflow_word(key, stream, step, pos)
                pos += _ONE
                layer = np.intp(w & _MASK8)
                neg = ((w >> _SH8) & _ONE) == _ONE
                v = np.float64(w >> _SH12) * scale[layer]
                if v < inner[layer]:
                    return -v if neg else v

    @numba.njit(inline="always")
    def _philox_fill(j0, n, stream, key, out):  # pragma: no cover - compiled
        # the words of counters j0 .. j0 + n - 1: independent iterations, which LLVM runs in SIMD lanes
        k0i, k1i = key & _LO32, key >> _SH32
        s0, s1 = stream & _LO32, stream >> _SH32
        for q in range(n):
            j = j0 + _U64(q)
            c0, c1, c2, c3 = j & _LO32, j >> _SH32, s0, s1
            k0, k1 = k0i, k1i
            for _ in range(10):
                p0 = _PM0 * c0
                p1 = _PM1 * c2
                c0, c1, c2, c3 = (p1 >> _SH32) ^ c1 ^ k0, p1 & _LO32, (p0 >> _SH32) ^ c3 ^ k1, p0 & _LO32
                k0 = (k0 + _PW0) & _LO32
                k1 = (k1 + _PW1) & _LO32
            out[2 * q] = c0 | (c1 << _SH32)
            out[2 * q + 1] = c2 | (c3 << _SH32)

    _WALK_FIRST, _WALK_MAX = 16, 64  # Philox calls per refill of a trial's words (2 steps each), doubling

    @numba.njit(cache=True, nogil=True)
    def _ddm_walk(keys, streams, x0, mu, sigma, thr, cap, scale, inner, zf, r, steps, xend):  # pragma: no cover
        # each trial to its end; its words made _WALK_FIRST, 2 _WALK_FIRST, ... calls at a time (the words
        # after its crossing are never turned into normals)
        buf = np.empty(2 * _WALK_MAX, np.uint64)
        for i in range(x0.shape[0]):
            key, stream = keys[i], streams[i]
            x, m, s, t = x0[i], mu[i], sigma[i], thr[i]
            k = 0
            calls = _WALK_FIRST
            done = False
            while not done:
                _philox_fill(_U64(k) >> _ONE, calls, stream, key, buf)
                for q in range(2 * calls):
                    w = buf[q]
                    layer = np.intp(w & _MASK8)
                    v = np.float64(w >> _SH12) * scale[layer]
                    neg = ((w >> _SH8) & _ONE) == _ONE
                    if v < inner[layer]:
                        z = -v if neg else v
                    else:
                        z = _slow_normal(key, stream, _U64(k), layer, neg, v, scale, inner, zf, r)
                    x = x + (m + s * z)
                    k += 1
                    if abs(x) >= t:
                        done = True
                        break
                    if k >= cap:
                        return i
                if calls < _WALK_MAX:
                    calls *= 2
            steps[i] = k
            xend[i] = x
        return -1


def ddm_walk(keys, streams, x0, mu, sigma, thr, cap):
    """(steps, last x) of each trial's walk x += mu + sigma z until |x| >= thr, z = philox_normals.normal(key,
    stream, step); (None, None) when a trial has not crossed after ``cap`` steps. Flat arrays of one length."""
    from .cognitive import philox_normals

    _, zf, scale, inner = philox_normals.tables()
    steps = np.empty(x0.shape[0], np.int64)
    xend = np.empty(x0.shape[0], np.float64)
    f64 = np.float64
    bad = _ddm_walk(
        np.ascontiguousarray(keys, np.uint64),
        np.ascontiguousarray(streams, np.uint64),
        np.ascontiguousarray(x0, f64),
        np.ascontiguousarray(mu, f64),
        np.ascontiguousarray(sigma, f64),
        np.ascontiguousarray(thr, f64),
        int(cap),
        scale,
        inner,
        zf,
        philox_normals.ZIG_R,
        steps,
        xend,
    )
    return (None, None) if bad >= 0 else (steps, xend)
