"""Compiled inverted-residual block (numba, the optional ``fast`` extra; where ops/_fast_pointwise.py's tiles and
ops/_fast_dwtiles.py's run: ops/fused_blocks.py's gate): the 1 x 1 expansion and the depthwise convolution of
ops/_fast_pointwise.py's ``PointwiseDepthwise``, then the 1 x 1 projection of their result (with its activation,
the residual added and the post-activation), as one compiled call per block of MobileNetV2.

The projection sums each output as the kernel conv.py picks for that layer alone does (ops/_fast_pointwise.py's
tile from the bias, or on small maps, bias last, ops/_fast_conv.py's direct kernel's order), and the residual and
activations are ops/_fast_epilogue.py's pass, so that the block gives the bits of its three steps apart. What it
saves is a step (its dispatch, checks and epilogue call, ~15 us: a tenth of a 7 x 7 block) and the depthwise
output's round trip (measured: see :class:`InvertedResidual`). Reference: the steps it replaces
(tests/ops/test_fast_blocks.py).
"""

from __future__ import annotations

import numpy as np

from ._fast import numba
from ._fast_epilogue import _NONE_F32, ACT_NONE
from ._fast_pointwise import _ACT_BLOCKS, _COLS, _MR, TILES_OK, PointwiseDepthwise

if numba is not None and TILES_OK:
    from ._fast_epilogue import _epi
    from ._fast_pointwise import _pointwise_cols

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _project(wp, d, bp, clip, lo, hi, late, a1, p1, q1, r, a2, p2, q2, z):  # pragma: no cover - compiled
        # z (N, M, Q) = the 1 x 1 convolution of d (N, C, Q) by the packed wp (bias bp in the tile, clipped), then
        # z = a2(a1(z) + r) by the epilogue's pass (r empty: none)
        span = _ACT_BLOCKS * _COLS
        e, e2, kb = np.empty(span, np.float32), np.empty(span, np.float32), np.empty(span, np.int32)
        Q = d.shape[2]
        _pointwise_cols(wp, d, bp, clip, lo, hi, 0, np.float32(0), np.float32(0), z, 0, Q, e, e2, kb, late)
        if a1 != 0 or a2 != 0 or r.shape[0] > 0:
            none = np.zeros((0,), np.float32)
            _epi(z.reshape(-1), none, none, max(Q, 1), z.shape[1], a1, p1, q1, r, a2, p2, q2)


class InvertedResidual:
    """The block's compiled form: ``expand`` (a :class:`PointwiseDepthwise`), then the projection's packed weights
    ``wp`` (ops/_fast_pointwise.py ``pack_weight`` of W (M, C)), its bias (or None), clip (``clip_args``: what the
    tile applies), activation ``act`` and post-activation ``post`` ((code, p, q) of ops/_fast_epilogue.py).

    Measured, MobileNetV2 at 1 thread, whole-network runs alternating (A B peer B A, 100 rounds, medians; the same
    bits): ncnn 10.08 -> 9.66 ms with every block one step (22 steps instead of 38), and in a second run with the
    ONNX plan's blocks too, ncnn 11.01 -> 10.42 and ONNX 10.75 -> 10.00 (a loaded machine)."""

    def __init__(self, expand: PointwiseDepthwise, wp, M: int, b, clip, act=(ACT_NONE, 0.0, 0.0), post=None):
        f = np.float32
        bp = np.zeros(wp.shape[0] * _MR, f)
        if b is not None:
            bp[:M] = b
        post = (ACT_NONE, 0.0, 0.0) if post is None else post
        self.expand, self.M = expand, M
        self._pw = (wp, bp, bool(clip[0]), f(clip[1]), f(clip[2]))
        self._acts = (int(act[0]), f(act[1]), f(act[2])), (int(post[0]), f(post[1]), f(post[2]))

    def __call__(self, x, begin, out, bias_last1: bool, bias_last3: bool, residual=None) -> np.ndarray:
        """z (N, M, *out) of x (N, K, H, W) C-contiguous float32; ``bias_last1`` / ``bias_last3``: the expansion's
        and the projection's order (see the module doc); residual None or C-contiguous float32 of z's shape."""
        d = self.expand(x, begin, out, bias_last1)
        N, C = d.shape[:2]
        z = np.empty((N, self.M) + tuple(out), np.float32)
        r = _NONE_F32 if residual is None else residual.reshape(-1)
        (a1, p1, q1), (a2, p2, q2) = self._acts
        wp, bp, on, lo, hi = self._pw
        d3, z3 = d.reshape(N, C, -1), z.reshape(N, self.M, -1)
        _project(wp, d3, bp, on, lo, hi, bool(bias_last3), a1, p1, q1, r, a2, p2, q2, z3)
        return z
