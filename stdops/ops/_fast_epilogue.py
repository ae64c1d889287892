"""The fused steps' epilogue, compiled (numba, the optional ``fast`` extra): bias, activation, residual and
activation in one pass over a convolution's or a GEMM's fresh output (stdops/ops/fused.py uses it when
``_fast.enabled()``; its reference is the activation and Add kernels themselves, ``fused.Activation``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from . import _blas
from ._fast import numba

_NONE_F32 = np.zeros((0,), np.float32)
_NONE_F32.flags.writeable = False

#: activation codes of :func:`epilogue` (ops/fused.py maps the activations onto them)
ACT_NONE, ACT_CLIP, ACT_LEAKY, ACT_SIGMOID, ACT_SILU, ACT_HARD_SIGMOID, ACT_HARD_SWISH, ACT_GELU = range(8)
#: :func:`epilogue` in 2 parts (over rows) from this many values where the caller has 2 threads and an activation takes
#: an exp (_EXP_ACTS). Alone, 1 -> 2 threads (AMD Zen 4, medians): SiLU with a bias over 32 x 112 x 112 (EfficientNet's
#: stem) 227 -> 143 us, Sigmoid and a residual over 2 x 7 x 191 x 193 397 -> 337; the others stream memory, and
#: split ran slower (HardSwish and a residual over 96 x 56 x 56 91 -> 101 us)
SPLIT_VALUES = 1 << 18
_EXP_ACTS = (ACT_SIGMOID, ACT_SILU)

# erf(u) / u = P(u^2) / Q(u^2) for |u| <= 3.92 (erf rounds to +-1 in float32 beyond): a weighted least-squares
# fit (iterated for the relative error, in float64 against scipy.special.erf) of degrees 6 / 4; max error of
# erf 5.7e-8 in float64 with these float32 coefficients, 3.7e-7 evaluated in float32 (the Erf kernel: 1.0e-7)
_GELU_CLIP = np.float32(3.92)
_GELU_P = tuple(
    np.float32(c)
    for c in (
        1.1283791089409232,
        1.9992387165692735e-01,
        5.0573242705164771e-02,
        3.7015867103261137e-03,
        1.4185030462353577e-04,
        -1.9578432329618167e-06,
        1.9924404061458623e-08,
    )
)
_GELU_Q = tuple(
    np.float32(c)
    for c in (1.0, 5.1050957286491427e-01, 1.1499814515474659e-01, 1.4353151484028272e-02, 9.5603487849546694e-04)
)
_CHUNK = 2048  # elements per pass of the exp stages (their scratch stays in L1)

if numba is not None:
    # no contraction to fused multiply-adds here: clip, leaky relu, hard sigmoid and hard swish then round
    # exactly as their kernels do (one product, one sum), and the fused step is their result bit for bit

    @numba.njit(inline="always", error_model="numpy")
    def _exp_poly(r):  # pragma: no cover - compiled
        # exp(r) on |r| <= ln 2 / 2: Cephes' expf degree-6 polynomial (~1 ulp), the one every exp stage here uses
        p = np.float32(1.9875691500e-4)
        p = p * r + np.float32(1.3981999507e-3)
        p = p * r + np.float32(8.3334519073e-3)
        p = p * r + np.float32(4.1665795894e-2)
        p = p * r + np.float32(1.6666665459e-1)
        p = p * r + np.float32(5.0000001201e-1)
        return p * (r * r) + r + np.float32(1.0)

    @numba.njit(inline="always", error_model="numpy")
    def _exp_stage(v, e, kb, scale=np.float32(1.0)):  # pragma: no cover - compiled
        # e = exp(-|scale v|) (<= 1, never overflows) for a chunk: Cody-Waite reduction by ln 2 and a degree-6
        # polynomial on |r| <= ln 2 / 2 (Cephes' expf coefficients, ~1 ulp), scaled by 2^n through the
        # exponent bits (kb, viewed as float32); exp(-|scale v|) below 2^-125 (> 87) is flushed to 0
        kf = kb.view(np.float32)
        for j in range(v.shape[0]):
            t = -abs(scale * v[j])
            t = max(t, np.float32(-87.0))
            n = np.floor(t * np.float32(1.4426950408889634) + np.float32(0.5))
            r = t - n * np.float32(0.693359375)
            r = r + n * np.float32(2.12194440e-4)
            e[j] = _exp_poly(r)
            kb[j] = (np.int32(n) + np.int32(127)) << 23
        for j in range(v.shape[0]):
            x = e[j] * kf[j]
            a = scale * v[j]
            e[j] = x if a > np.float32(-87.0) and a < np.float32(87.0) else np.float32(0.0)

    @numba.njit(inline="always", error_model="numpy")
    def _tanh_chunk(v, e, kb):  # pragma: no cover - compiled
        # v = tanh(v) in place: (1 - e) / (1 + e) with the sign of v, e = exp(-2|v|), for |v| >= 0.3 (no
        # cancellation there: e <= 0.55); below, the odd Taylor polynomial to x^9 (error < 1e-8 of |v|)
        _exp_stage(v, e, kb, np.float32(2.0))
        for j in range(v.shape[0]):
            x = v[j]
            a = abs(x)
            x2 = x * x
            p = np.float32(62.0 / 2835.0)
            p = p * x2 - np.float32(17.0 / 315.0)
            p = p * x2 + np.float32(2.0 / 15.0)
            p = p * x2 - np.float32(1.0 / 3.0)
            small = x + x * (x2 * p)
            big = (np.float32(1.0) - e[j]) / (np.float32(1.0) + e[j])
            big = big if x >= np.float32(0.0) else -big
            v[j] = small if a < np.float32(0.3) else (big if x == x else x)

    @numba.njit(fastmath={"contract"}, error_model="numpy")
    def _gelu_chunk(v, k):  # pragma: no cover - compiled
        # v = v (1 + erf(u)) 0.5, u = v k, in one loop: erf(u) = u P(u^2) / Q(u^2) on |u| <= _GELU_CLIP (the
        # rational of _GELU_P, _GELU_Q), clamped to [-1, 1]; multiply-adds contracted (one rounding per
        # Horner step: the evaluation error stays within ~6 ulp of 1, where the erf form is flat)
        for j in range(v.shape[0]):
            x = v[j]
            u = x * k
            u = -_GELU_CLIP if u < -_GELU_CLIP else (_GELU_CLIP if u > _GELU_CLIP else u)
            t = u * u
            num = _GELU_P[6] * t + _GELU_P[5]
            num = num * t + _GELU_P[4]
            num = num * t + _GELU_P[3]
            num = num * t + _GELU_P[2]
            num = num * t + _GELU_P[1]
            num = num * t + _GELU_P[0]
            den = _GELU_Q[4] * t + _GELU_Q[3]
            den = den * t + _GELU_Q[2]
            den = den * t + _GELU_Q[1]
            den = den * t + np.float32(1.0)
            e = u * (num / den)
            e = np.float32(1.0) if e > np.float32(1.0) else (np.float32(-1.0) if e < np.float32(-1.0) else e)
            g = x * ((e + np.float32(1.0)) * np.float32(0.5))
            v[j] = g if x == x else x

    @numba.njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy")
    def _sigmoid_span(v, silu, kb):  # pragma: no cover - compiled
        # v = sigmoid(v) (silu: v sigmoid(v)) in place: 1 / (1 + e) for v >= 0, e / (1 + e) below, e = exp(-|v|) by
        # the reduction and polynomial of _exp_stage, with fused multiply-adds (the products and their sums
        # contracted: the SiLU over 401k values 222 -> 158 us on an AMD Zen 4, within 2.2e-7 of the plain loop). A
        # function of its own, not inlined, so that every kernel's activation runs this one compiled loop (the same
        # bits wherever a value falls); ops/_llvm_expstages.py's sigmoid fuses the same operations.
        kf = kb.view(np.float32)
        for j in range(v.shape[0]):
            x = v[j]
            t = max(-abs(x), np.float32(-87.0))
            k = np.floor(t * np.float32(1.4426950408889634) + np.float32(0.5))
            r = t - k * np.float32(0.693359375)
            r = r + k * np.float32(2.12194440e-4)
            q_ = _exp_poly(r)
            kb[j] = (np.int32(k) + np.int32(127)) << 23
            ex = q_ * kf[j]
            ex = ex if x > np.float32(-87.0) and x < np.float32(87.0) else np.float32(0.0)
            num = ex if x < np.float32(0) else np.float32(1.0)
            if silu:
                num = num * x
            s = num / (np.float32(1.0) + ex)
            v[j] = s if x == x else x  # NaN stays NaN

    @numba.njit(inline="always", error_model="numpy")
    def _act_chunk(v, code, p, q, e, kb, e2):  # pragma: no cover - compiled
        # v = act(v) in place on a chunk (codes: ACT_*)
        n = v.shape[0]
        if code == 1:  # clip: min(max(v, lo), hi), NaN kept (lo > hi gives hi, as np.clip)
            for j in range(n):
                t = v[j]
                t = p if t < p else t
                v[j] = q if t > q else t
        elif code == 2:  # leaky relu
            for j in range(n):
                t = v[j]
                v[j] = t if t >= np.float32(0) else p * t
        elif code == 3 or code == 4:
            _sigmoid_span(v, code == 4, kb)
        elif code == 7:  # GELU, erf form: v (1 + erf(u)) 0.5, u = v / p (q = 1) or v p (q = 0)
            _gelu_chunk(v, p if q == np.float32(0) else np.float32(1.0) / p)
        elif code == 5 or code == 6:  # hard sigmoid max(0, min(1, p v + q)), hard swish v * that
            for j in range(n):
                t = v[j]
                h = p * t + q
                h = np.float32(0.0) if h < np.float32(0.0) else h
                h = np.float32(1.0) if h > np.float32(1.0) else h
                v[j] = h * t if code == 6 else h

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _epi(y, b, bc, L, M, a1, p1, q1, r, a2, p2, q2):  # pragma: no cover - compiled
        # y flat (rows of L values, row i of channel i % M) in place: y = act2(act1(y + b[row % M] + bc[col]) + r),
        # chunk by chunk over the flat array (a chunk spans short rows: per-row loops only for the bias)
        n = y.shape[0]
        has_b = b.shape[0] > 0
        col_b = bc.shape[0] > 0
        has_r = r.shape[0] > 0
        e = np.empty(_CHUNK, y.dtype)
        e2 = np.empty(_CHUNK, y.dtype)
        kb = np.empty(_CHUNK, np.int32)
        for c0 in range(0, n, _CHUNK):
            c1 = min(n, c0 + _CHUNK)
            if has_b or col_b:
                s = c0
                while s < c1:
                    row = s // L
                    t = min(c1, (row + 1) * L)
                    seg = y[s:t]  # slices: numba's flat indexing would check for negative indices
                    if has_b:
                        bias = b[row % M]
                        for j in range(t - s):
                            seg[j] = seg[j] + bias
                    if col_b:
                        bcs = bc[s - row * L : t - row * L]
                        for j in range(t - s):
                            seg[j] = seg[j] + bcs[j]
                    s = t
            v = y[c0:c1]
            if a1 != 0:
                _act_chunk(v, a1, p1, q1, e, kb, e2)
            if has_r:
                rr = r[c0:c1]
                for j in range(c1 - c0):
                    v[j] = v[j] + rr[j]
            if a2 != 0:
                _act_chunk(v, a2, p2, q2, e, kb, e2)


def epilogue(y: np.ndarray, b, act1, residual, act2, bias_axis: int = 1) -> np.ndarray:
    """In place on y (N, M, ...) float32 C-contiguous: y = act2(act1(y + b) + residual), one pass. b is one
    value per channel (axis 1, a convolution's) or, with ``bias_axis=-1``, per column of a 2-D y (a GEMM's);
    None for no bias. ``act1``/``act2``: (code, p, q) with the ACT_* codes (ops/fused.py builds them);
    residual of y's shape or None. Sigmoid and SiLU by a polynomial exp (~4 ulp of the exact sigmoid).
    Reference: the activation kernels themselves (fused.Activation.reference)."""
    f = y.dtype.type
    none = _NONE_F32 if y.dtype == np.float32 else np.zeros((0,), y.dtype)
    if bias_axis == -1:
        L, M = y.shape[-1], 1
        brow, bcol = none, none if b is None else b
    else:
        L, M = math.prod(y.shape[2:]), y.shape[1]
        brow, bcol = none if b is None else b, none
    rr = none if residual is None else residual.reshape(-1)
    L = max(L, 1)
    acts = (act1[0], f(act1[1]), f(act1[2]))
    acts2 = (act2[0], f(act2[1]), f(act2[2]))
    rows = y.size // L
    heavy = acts[0] in _EXP_ACTS or acts2[0] in _EXP_ACTS
    if not heavy or y.size < SPLIT_VALUES or rows < 2 or _blas.threads() < 2:
        _epi(y.reshape(-1), brow, bcol, L, M, *acts, rr, *acts2)
        return y
    # 2 parts over the rows (every value the same operations wherever it runs): the second part's rows start at row
    # k, so its per-row bias is the per-channel one rotated by k
    k = rows // 2
    yf, cut = y.reshape(-1), k * L
    brow2 = np.roll(brow, -(k % M)) if brow.size else brow
    _blas.run_parts(
        [
            functools.partial(_epi, yf[:cut], brow, bcol, L, M, *acts, rr[:cut] if rr.size else rr, *acts2),
            functools.partial(_epi, yf[cut:], brow2, bcol, L, M, *acts, rr[cut:] if rr.size else rr, *acts2),
        ]
    )
    return y


def gemm_epilogue(n_cols: int, bias, act1, act2):
    """For a GEMM step prepared at load: ``run(y, residual=None)``, what ``epilogue(y, bias, act1, residual, act2,
    bias_axis=-1)`` does on y (m, n_cols) float32 C-contiguous (residual None or float32 of y's size), its
    arguments converted once instead of per call (~5 us a step); None without the compiled kernels."""
    if numba is None:
        return None
    f = np.float32
    bcol = _NONE_F32 if bias is None else np.ascontiguousarray(bias, np.float32).reshape(-1)
    a1, p1, q1 = int(act1[0]), f(act1[1]), f(act1[2])
    a2, p2, q2 = int(act2[0]), f(act2[1]), f(act2[2])
    L = max(int(n_cols), 1)

    def run(y: np.ndarray, residual=None) -> None:
        rr = _NONE_F32 if residual is None else np.ascontiguousarray(residual).reshape(-1)
        _epi(y.reshape(-1), _NONE_F32, bcol, L, 1, a1, p1, q1, rr, a2, p2, q2)

    return run


# --------------------------------------------------------------------------- row-wise normalizations

_LANES = 16  # partial sums / maxima per row: independent chains the compiler keeps in vector registers

if numba is not None:

    @numba.njit(inline="always", error_model="numpy")
    def _lane_sum(v, lanes):  # pragma: no cover - compiled
        # sum of v in _LANES interleaved partial sums, then the lanes and the tail in order (a fixed order: the
        # result depends on the length only; a single running sum would be one add latency per element). The
        # partial sums are scalar locals, not the ``lanes`` scratch (kept for the callers' signature): LLVM packs
        # locals into one vector register, while it reloads and stores an array's lanes on every block (it cannot
        # rule out that they alias v): 128 x 256 LayerNormalization rows 17.5 -> 14.4 us, the same bits
        n = v.shape[0]
        n16 = n - n % _LANES
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = s8 = s9 = s10 = s11 = s12 = s13 = s14 = s15 = np.float32(0.0)
        for j in range(0, n16, _LANES):
            s0 += v[j]
            s1 += v[j + 1]
            s2 += v[j + 2]
            s3 += v[j + 3]
            s4 += v[j + 4]
            s5 += v[j + 5]
            s6 += v[j + 6]
            s7 += v[j + 7]
            s8 += v[j + 8]
            s9 += v[j + 9]
            s10 += v[j + 10]
            s11 += v[j + 11]
            s12 += v[j + 12]
            s13 += v[j + 13]
            s14 += v[j + 14]
            s15 += v[j + 15]
        s = np.float32(0.0)
        for a in (s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15):
            s += a
        for j in range(n16, n):
            s += v[j]
        return s

    @numba.njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy")
    def _softmax_rows(x, y, kb, scale):  # pragma: no cover - compiled
        # y[r] = exp(s (x[r] - max)) / sum(exp(s (x[r] - max))) per row (s = scale > 0: Softmax(s x[r])); exp of
        # the non-positive differences as _exp_stage (d < -87 gives 0). A row holding NaN or +inf (max - max is
        # NaN), or only -inf, is NaN throughout, as the kernel's formula gives. Multiply-adds contracted (the
        # reduction and the polynomial one rounding per step; within 3.1e-7 relative of the uncontracted pass):
        # 4 x 128 rows of 128 64 -> 55 us, 6 x 197 rows of 197 246 -> 206 us on one AVX-512 core
        R, L = x.shape
        L16 = L - L % _LANES
        lanes = np.empty(_LANES, x.dtype)
        kf = kb.view(np.float32)
        for r in range(R):
            xr, yr = x[r], y[r]
            for k in range(_LANES):
                lanes[k] = xr[0]
            for j0 in range(0, L16, _LANES):
                w = xr[j0 : j0 + _LANES]
                for k in range(_LANES):
                    v = w[k]
                    lanes[k] = v if v > lanes[k] else lanes[k]
            m = xr[0]
            for k in range(_LANES):
                m = lanes[k] if lanes[k] > m else m
            for j in range(L16, L):
                v = xr[j]
                m = v if v > m else m
            # a NaN after the first element is ignored by the maximum: its difference is NaN, kept by the exp
            # loop, and the sum's NaN makes the whole row NaN
            if m - m != np.float32(0.0):
                for j in range(L):
                    yr[j] = np.float32(np.nan)
                continue
            for j in range(L):  # exp(t), t = (x - max) scale <= 0: 2^n p(r), n = round(t / ln 2) (by the 1.5 * 2^23
                # shift); 2^n through kb's bits, stored and read back in the same iteration (the compiler keeps it
                # in a register: one vectorized loop)
                d = (xr[j] - m) * scale
                t = d if d > np.float32(-87.0) else np.float32(-87.0)
                n = (t * np.float32(1.4426950408889634) + np.float32(12582912.0)) - np.float32(12582912.0)
                q = t - n * np.float32(0.693359375)
                q = q + n * np.float32(2.12194440e-4)
                kb[j] = (np.int32(n) + np.int32(127)) << 23
                e = _exp_poly(q) * kf[j]
                yr[j] = e if d > np.float32(-87.0) else (np.float32(0.0) if d == d else d)
            inv = np.float32(1.0) / _lane_sum(yr, lanes)  # a product per element, not a division (<= 1 ulp apart)
            for j in range(L):
                yr[j] = yr[j] * inv

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _layer_norm_rows(x, scale, bias, eps, y):  # pragma: no cover - compiled
        # y[r] = (x[r] - mean) / sqrt(var + eps) * scale + bias per row (two passes for the statistics; the
        # squared deviations go through y's row, then overwritten)
        R, L = x.shape
        has_b = bias.shape[0] == L
        lanes = np.empty(_LANES, x.dtype)
        for r in range(R):
            xr, yr = x[r], y[r]
            mean = _lane_sum(xr, lanes) / np.float32(L)
            for j in range(L):
                d = xr[j] - mean
                yr[j] = d * d
            inv = np.float32(1.0) / np.sqrt(_lane_sum(yr, lanes) / np.float32(L) + eps)
            for j in range(L):
                t = ((xr[j] - mean) * inv) * scale[j]
                yr[j] = t + bias[j] if has_b else t


def softmax_rows(x: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """Softmax(scale * x) over the last axis of a float32 array (a new array); scale a positive finite number."""
    x2 = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    y = np.empty_like(x2)
    _softmax_rows(x2, y, np.empty(x2.shape[1], np.int32), np.float32(scale))
    return y.reshape(x.shape)


def softmax_rows_into(x: np.ndarray, y: np.ndarray, kb: np.ndarray, scale: float) -> None:
    """y = Softmax(scale * x) per row of 2-D float32 x into y (another array of x's shape: the loops vectorize
    only when they do not alias, 3x slower in place), kb an int32 scratch of x's row length; scale a positive
    finite number."""
    _softmax_rows(x, y, kb, np.float32(scale))


def layer_norm_rows(x: np.ndarray, scale: np.ndarray, bias, eps: float) -> np.ndarray:
    """LayerNormalization over the last axis of a float32 array, scale and bias (L,) float32 (a new array)."""
    x2 = np.ascontiguousarray(x).reshape(-1, x.shape[-1])
    y = np.empty_like(x2)
    _layer_norm_rows(x2, scale, _NONE_F32 if bias is None else bias, np.float32(eps), y)
    return y.reshape(x.shape)
