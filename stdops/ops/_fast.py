"""Compiled kernels (numba, the optional ``fast`` extra) for the loops NumPy cannot run in one memory pass.

Each function here has a NumPy reference in the module that calls it and is differential-tested against
that reference (tests/ops/test_fast.py); the callers use it only when :func:`enabled` and fall back to
NumPy otherwise. What each one gained is measured in benchmarks/bench_conv.py (``--no-fast`` to compare):

- :func:`depthwise2d`: depthwise 2-D convolution (any kernel, stride, dilation, channel multiplier) with its
  bias and a following clip, one plane at a time in cache: the plane is scattered into its zero-padded
  stride phases, each tap is one long contiguous multiply-add into the plane's accumulator, and the
  accumulator is clipped into Y. One pass over X and one over Y; the NumPy path gathers the taps into
  columns first (2-4 passes over 2-9x the input).

Strict IEEE arithmetic except fused multiply-add (numba's ``contract``): each output sums its taps in
kernel order, padding taps included as zeros (0 * inf is NaN, as the definition says).
``STDOPS_NO_FAST=1`` in the environment turns the compiled path off.
"""

from __future__ import annotations

import os

import numpy as np

try:  # the optional extra
    import numba
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None

_enabled = numba is not None and os.environ.get("STDOPS_NO_FAST", "") in ("", "0")


def enabled() -> bool:
    """Whether the compiled kernels are in use (numba importable, not turned off)."""
    return _enabled


def set_enabled(on: bool) -> bool:
    """Turn the compiled path on or off (tests compare both); returns the previous state."""
    global _enabled
    prev = _enabled
    _enabled = bool(on) and numba is not None
    return prev


if numba is not None:

    @numba.njit(cache=True, nogil=True, fastmath={"contract"})
    def _dw2d(x, w, b, mg, sh, sw, dh, dw, pt, pl, clip, lo, hi, y):  # pragma: no cover - compiled
        N, C, H, W = x.shape
        M, kh, kw = w.shape
        oh, ow = y.shape[2], y.shape[3]
        has_b = b.shape[0] == M
        # the padded plane split into stride phases, phase (a, c) holding padded rows a + i sh and columns
        # c + j sw: tap (ky, kx) then reads ONE contiguous run of a phase for all outputs (computed at the
        # phase width Wq, the columns past ow dropped at the end); one spare row for the last tap's run
        Hq = max((H - 1 + pt) // sh + 1, oh + ((kh - 1) * dh) // sh + 1)
        Wq = max((W - 1 + pl) // sw + 1, ow + ((kw - 1) * dw) // sw)
        ph = np.zeros((sh * sw, Hq * Wq), x.dtype)
        acc = np.empty(oh * Wq, x.dtype)
        L = oh * Wq
        for n in range(N):
            for c in range(C):
                plane = x[n, c]
                for iy in range(H):  # scatter the plane into its phases (the rest stays zero)
                    py = iy + pt
                    base = (py // sh) * Wq
                    prow = (py % sh) * sw
                    for a in range(sw):  # input columns ix0, ix0 + sw, ... land in phase column a
                        ix0 = (a - pl) % sw
                        k = base + (ix0 + pl) // sw
                        dst = ph[prow + a, k : k + (W - ix0 + sw - 1) // sw]
                        src = plane[iy]
                        for i in range(dst.shape[0]):  # explicit loops: numba's slice assignment copies
                            dst[i] = src[ix0 + i * sw]
                for j in range(mg):
                    m = c * mg + j
                    bias = b[m] if has_b else x.dtype.type(0)
                    for q in range(L):
                        acc[q] = bias
                    for ky in range(kh):
                        ry = ky * dh
                        for kx in range(kw):
                            rx = kx * dw
                            off = (ry // sh) * Wq + rx // sw
                            run = ph[(ry % sh) * sw + rx % sw, off : off + L]  # slices vectorize best
                            wv = w[m, ky, kx]
                            for q in range(L):
                                acc[q] += wv * run[q]
                    if clip:
                        for q in range(L):
                            v = acc[q]
                            acc[q] = lo if v < lo else (hi if v > hi else v)  # NaN stays NaN
                    out = y[n, m]
                    for oy in range(oh):
                        r = acc[oy * Wq : oy * Wq + ow]
                        orow = out[oy]
                        for ox in range(ow):
                            orow[ox] = r[ox]


def depthwise2d(x, w, b, mult, strides, dilations, begin, out, clip=None) -> np.ndarray:
    """y (N, M, *out): y[n, m] = b[m] + sum_{ky, kx} w[m, ky, kx] xpad[n, m // mult, o s + k d] (xpad: x with
    ``begin`` zeros before each axis and as many after as the windows need), then clipped to ``clip=(lo, hi)``
    (either may be None). x (N, C, H, W) C-contiguous, w (M, kh, kw), b (M,) or None, all of one float dtype."""
    dt = w.dtype
    N = x.shape[0]
    M = w.shape[0]
    y = np.empty((N, M) + tuple(out), dt)
    lo, hi = -np.inf, np.inf
    if clip is not None:
        lo = -np.inf if clip[0] is None else clip[0]
        hi = np.inf if clip[1] is None else clip[1]
    bb = np.zeros((0,), dt) if b is None else b
    _dw2d(
        x,
        w,
        bb,
        mult,
        strides[0],
        strides[1],
        dilations[0],
        dilations[1],
        begin[0],
        begin[1],
        clip is not None,
        dt.type(lo),
        dt.type(hi),
        y,
    )
    return y
