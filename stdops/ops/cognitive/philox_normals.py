"""Counter-based standard normals: ``normal(key, stream, step)`` is a pure function of three 64-bit integers,
so a drift-diffusion trial draws the same numbers whatever else is computed beside it, in whatever order or
blocking, in NumPy or in the compiled kernel (``stdops.ops._fast``).

Random words come from Philox4x32-10 (Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy as 1, 2,
3", SC'11): a 10-round Feistel-like bijection of a 128-bit counter under a 64-bit key, built from 32 x 32 -> 64
bit products; checked against the Random123 known-answer vectors in the tests. Each call yields two 64-bit
words. The counter is (j, stream): a trial's ``stream`` number in the high half, a draw number ``j`` in the
low half -- j = step >> 1 for the primary word of a step (word step & 1), and j = 2**63 | step << 20 | c for
the extra words a step's rejection sampling may consume (c = 0, 1, ...), so no two draws share a counter.

Words become normals with the ziggurat method (Marsaglia & Tsang, "The ziggurat method for generating random
variables", J. Stat. Softw. 5(8), 2000), 256 layers of equal area under f(x) = exp(-x**2/2), symmetric: the
low 8 bits of a word pick the layer i, bit 8 the sign, the top 52 bits a magnitude v uniform in [0, x_i).
When v is under the layer above (v < x_{i+1}; 98.8% of words) it is the result. Otherwise (the slow path)
the base layer's overhang is the tail beyond r = x_1, sampled by rejection from the Pareto proposal
r / sqrt(u) (density 2 r**2 / x**3) with acceptance (x/r)**3 exp(-(x**2 - r**2)/2) <= 1; another layer's is
a wedge: v is kept when f(x_i) + u (f(x_{i+1}) - f(x_i)) < f(v), else a fresh word starts over. Values are
made with +, -, *, /, sqrt and table look-ups only, identical in NumPy and compiled code; exp appears only in
the accept/reject tests, where the two implementations' exp may differ by an ulp: a test within a few ulps of
its boundary is decided with the C library's exp (math.exp, which the compiled kernel calls too).
"""

from __future__ import annotations

import math

import numpy as np

# Philox4x32 multipliers and Weyl key increments (Salmon et al. 2011, section 5)
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
ROUNDS = 10
_LO = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)

#: the base of the extra words of a step's rejection sampling (j = OVERFLOW | step << 20 | c)
OVERFLOW = 1 << 63
OVERFLOW_SHIFT = 20
#: steps are numbered below this (so that step << 20 stays under bit 63)
MAX_STEPS = 1 << 42


def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of the counter (c0, c1, c2, c3) under the key (k0, k1): four uint64 arrays of 32-bit
    values (broadcast together). Each round: (hi0, lo0) = M0 * c0, (hi1, lo1) = M1 * c2, then
    (c0, c1, c2, c3) = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0); the key grows by (W0, W1) between rounds."""
    shape = np.broadcast_shapes(*(np.shape(v) for v in (c0, c1, c2, c3, k0, k1)))
    c0, c1, c2, c3 = (np.array(np.broadcast_to(np.asarray(c, dtype=np.uint64), shape)) for c in (c0, c1, c2, c3))
    k0 = np.asarray(k0, dtype=np.uint64)
    k1 = np.asarray(k1, dtype=np.uint64)
    m0, m1 = np.uint64(PHILOX_M0), np.uint64(PHILOX_M1)
    w0, w1 = np.uint64(PHILOX_W0), np.uint64(PHILOX_W1)
    p0, p1 = np.empty(shape, dtype=np.uint64), np.empty(shape, dtype=np.uint64)
    for r in range(ROUNDS):  # in place: c0 and c2 first (they read c1 and c3), then c1 and c3
        np.multiply(c0, m0, out=p0)  # < 2**64: both factors are below 2**32
        np.multiply(c2, m1, out=p1)
        np.right_shift(p1, _32, out=c0)
        c0 ^= c1
        c0 ^= k0
        np.right_shift(p0, _32, out=c2)
        c2 ^= c3
        c2 ^= k1
        np.bitwise_and(p1, _LO, out=c1)
        np.bitwise_and(p0, _LO, out=c3)
        if r + 1 < ROUNDS:
            k0 = (k0 + w0) & _LO
            k1 = (k1 + w1) & _LO
    return c0, c1, c2, c3


def words(key, stream, j):
    """The two 64-bit words of counter (j, stream) under ``key`` (uint64 arrays, broadcast together):
    word 0 = out0 | out1 << 32, word 1 = out2 | out3 << 32."""
    key = np.asarray(key, dtype=np.uint64)
    stream = np.asarray(stream, dtype=np.uint64)
    j = np.asarray(j, dtype=np.uint64)
    o0, o1, o2, o3 = philox4x32(j & _LO, j >> _32, stream & _LO, stream >> _32, key & _LO, key >> _32)
    o1 <<= _32
    o1 |= o0
    o3 <<= _32
    o3 |= o2
    return o1, o3


# ----------------------------------------------------------------------------- the ziggurat's tables
#: r and v of the 256-layer ziggurat: the r whose layers of area v = r f(r) + integral_r^inf f close at the top
#: (f(x_255) + v / x_255 = 1), found by bisection in 60-digit decimal arithmetic (the tests check both)
ZIG_R_TEXT = "3.654152885361008771645429720399515762975"
ZIG_V_TEXT = "0.004928673233974655347361775402336028069"
ZIG_R = float(ZIG_R_TEXT)
ZIG_R2 = ZIG_R * ZIG_R
_TABLES: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None


def tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x, f, scale, inner): the layer widths x_0..x_256 (x_0 = v / f(r), the base layer as a rectangle of
    area v; x_1 = r; x_{i+1} = sqrt(-2 ln(v / x_i + f(x_i))); x_256 = 0), f(x_i) (f(x_256) = 1), the magnitude
    scale x_i / 2**52 and the inner widths x_{i+1}. Computed once, in decimal arithmetic (its exp, ln and sqrt
    are correctly rounded), so the tables are the same bits on every platform."""
    global _TABLES
    if _TABLES is None:
        import decimal

        with decimal.localcontext() as ctx:
            ctx.prec = 40
            r, v = decimal.Decimal(ZIG_R_TEXT), decimal.Decimal(ZIG_V_TEXT)
            xs = [v / (-r * r / 2).exp(), r]
            for _ in range(254):
                xs.append((-2 * (v / xs[-1] + (-xs[-1] * xs[-1] / 2).exp()).ln()).sqrt())
            x = np.array([float(d) for d in xs] + [0.0])
            # f at the float boundaries (their exact values), correctly rounded
            f = np.array([float((-decimal.Decimal(b) * decimal.Decimal(b) / 2).exp()) for b in x[:256]] + [1.0])
        scale = x[:256] * 2.0**-52
        inner = x[1:257].copy()
        for a in (x, f, scale, inner):
            a.flags.writeable = False
        _TABLES = (x, f, scale, inner)
    return _TABLES


_U53 = 2.0**-53
_MASK8 = np.uint64(0xFF)


def _decode(w):
    """word -> (layer, negative, magnitude)."""
    layer = (w & _MASK8).astype(np.intp)
    negative = ((w >> np.uint64(8)) & np.uint64(1)).astype(bool)
    v = (w >> np.uint64(12)).astype(np.float64) * tables()[2][layer]
    return layer, negative, v


def _uniform(w):
    """[0, 1) from a word's top 53 bits."""
    return (w >> np.uint64(11)).astype(np.float64) * _U53


def _below_exp(y, arg):
    """y < exp(arg), decided as the C library's exp would (np.exp may differ from it by an ulp: where y is
    within 8 ulps of np.exp(arg), math.exp decides; that band is almost never reached)."""
    e = np.exp(arg)
    out = y < e
    near = np.flatnonzero(np.abs(y - e) <= 8 * np.spacing(e))
    for k in near.tolist():  # a measure-zero band, not a loop over the elements
        out[k] = float(y[k]) < math.exp(float(arg[k]))
    return out


_WINDOW = 16  # extra words made at once for each word still on the slow path


def _overflow_window(key, stream, step, pos):
    """(m, _WINDOW) words: a step's extra words pos .. pos + _WINDOW - 1, for each of m steps."""
    half = _WINDOW // 2 + 1  # Philox calls covering the window whatever the parity of pos
    j = (pos >> np.uint64(1))[:, None] + np.arange(half, dtype=np.uint64)[None, :]
    j |= np.uint64(OVERFLOW) | (step << np.uint64(OVERFLOW_SHIFT))[:, None]
    w0, w1 = words(key[:, None], stream[:, None], j)
    both = np.empty((pos.size, 2 * half), dtype=np.uint64)
    both[:, 0::2], both[:, 1::2] = w0, w1
    first = (pos & np.uint64(1)).astype(np.intp)
    return np.take_along_axis(both, first[:, None] + np.arange(_WINDOW)[None, :], axis=1)


def _slow_path(key, stream, step, layer, negative, v):
    """The normals of the words that missed the fast path (uint64 key, stream, step; their decoded layer,
    sign and magnitude), by the module docstring's tail and wedge rules. Vectorized over the words: each
    pending word's next extra words are made a window at a time, and the rules advance every pending word
    by one test per pass, each in its own order of words (so the result is the one-word-at-a-time walk's)."""
    n = v.size
    _, zf, _, inner = tables()
    out = np.empty(n)
    pos = np.zeros(n, dtype=np.uint64)
    layer, negative, v = layer.copy(), negative.copy(), v.copy()
    todo = np.arange(n)
    while todo.size:
        win = _overflow_window(key[todo], stream[todo], step[todo], pos[todo])
        m = todo.size
        cur = np.zeros(m, dtype=np.intp)  # words of the window used
        finished = np.zeros(m, dtype=bool)
        value = np.empty(m)
        rows = np.arange(m)
        while rows.size:
            rows = rows[cur[rows] + 2 <= _WINDOW]  # a test uses at most two words; else the next window
            li = layer[todo[rows]]
            tail = rows[li == 0]
            if tail.size:  # the tail beyond r: a Pareto proposal and its acceptance, two words
                c = cur[tail]
                u1 = ((win[tail, c] >> np.uint64(11)).astype(np.float64) + 1.0) * _U53  # (0, 1]
                u2 = _uniform(win[tail, c + 1])
                cur[tail] += 2
                x = ZIG_R / np.sqrt(u1)
                q = x / ZIG_R
                ok = _below_exp(u2 / (q * q * q), -0.5 * (x * x - ZIG_R2))
                finished[tail[ok]] = True
                value[tail[ok]] = x[ok]
            wedge = rows[li != 0]
            if wedge.size:  # a wedge: one word for the test, another for a fresh start when it fails
                lw, vw = layer[todo[wedge]], v[todo[wedge]]
                u = _uniform(win[wedge, cur[wedge]])
                cur[wedge] += 1
                y = zf[lw] + u * (zf[lw + 1] - zf[lw])
                ok = _below_exp(y, -0.5 * vw * vw)
                finished[wedge[ok]] = True
                value[wedge[ok]] = vw[ok]
                again = wedge[~ok]
                if again.size:
                    nl, nneg, nv = _decode(win[again, cur[again]])
                    cur[again] += 1
                    g = todo[again]
                    layer[g], negative[g], v[g] = nl, nneg, nv
                    fast = nv < inner[nl]
                    finished[again[fast]] = True
                    value[again[fast]] = nv[fast]
            rows = rows[~finished[rows]]
        pos[todo] += cur.astype(np.uint64)
        fin = todo[finished]
        out[fin] = np.where(negative[fin], -value[finished], value[finished])
        todo = todo[~finished]
    return out


def normals(key, stream, first_step, n_steps: int) -> np.ndarray:
    """(m, n_steps) float64: row i holds normal(key[i], stream[i], first_step[i] + j), j < n_steps; key,
    stream and first_step are (m,) integer arrays, first_step even and n_steps even (whole Philox calls)."""
    key = np.asarray(key, dtype=np.uint64)
    stream = np.asarray(stream, dtype=np.uint64)
    first = np.asarray(first_step, dtype=np.uint64)
    m, half = key.size, n_steps // 2
    j = (first >> np.uint64(1))[:, None] + np.arange(half, dtype=np.uint64)[None, :]
    w0, w1 = words(key[:, None], stream[:, None], j)
    w = np.empty((m, 2 * half), dtype=np.uint64)
    w[:, 0::2], w[:, 1::2] = w0, w1
    layer, negative, v = _decode(w)
    out = np.where(negative, -v, v)
    slow = np.nonzero(v >= tables()[3][layer])
    if slow[0].size:
        step = first[slow[0]] + slow[1].astype(np.uint64)
        out[slow] = _slow_path(key[slow[0]], stream[slow[0]], step, layer[slow], negative[slow], v[slow])
    return out
