"""Where the official wheel's answer depends on the CPU it runs on, and so cannot be an oracle there.

The wheel (ncnn 1.0.20261020) is built with fast-math: its float divisions in two places are not IEEE
divisions but reciprocal estimates whose error (and sign) depends on the instruction set dispatched
(SSE2 / AVX / AVX512 / AVX512-FP16). Measured on two machines, with minimal cases in the tests:

- BinaryOp fmod / floor_divide (and their reversed forms, and remainder): ncnn's x86 SIMD path computes
  ``x - trunc(x / y) * y`` and ``floor(x / y)`` (x86/sse_mathfun.h, avx512_mathfun.h), while the reference
  layer (src/layer/binaryop.cpp) and the scalar tail use C's ``fmodf`` / ``floorf(x / y)``. With an IEEE
  division both agree except within an ulp of a whole quotient; with the estimate, a quotient that is a
  whole number (fmod(0.75, 0.75)) truncates one lower on some CPUs: the wheel gives 0.75, C gives 0.
- ROIPooling: src/layer/roipooling.cpp computes ``bin_size = (float)roi_w / (float)pooled`` and the bin
  borders ``floorf(i * bin_size)``, ``ceilf((i + 1) * bin_size)``. Where ``i * roi_w / pooled`` is a whole
  number, IEEE arithmetic gives that number exactly (roi 2, pooled 2: bin 1 starts at cell 1); the wheel's
  estimate lands just below it and starts the bin one cell early (cell 0), on some CPUs for every pooled
  size but 1, on others only for even ones.

stdops follows the source (C semantics with IEEE arithmetic). These masks say which output elements the
wheel computes deterministically, so the tests compare the wheel there and the source rule everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: BinaryOp op types whose SIMD formula has a discontinuity at whole (or half) quotients
_FLOORING = {12: False, 13: True, 15: False, 16: True}  # op -> operands reversed
_ROUNDING = {17: False, 18: True}
#: a quotient within this relative distance of a discontinuity may land on either side in the wheel
_Q_REL = 1e-3


def binaryop_mask(params: dict, inputs: Sequence[np.ndarray]) -> np.ndarray | None:
    """True where the wheel's BinaryOp result does not depend on its division estimate (None: everywhere)."""
    op = int(params.get(0, 0))
    if op not in _FLOORING and op not in _ROUNDING:
        return None
    from stdops.ncnn.layers.arith import ncnn_binary

    a = np.asarray(inputs[0], np.float64)
    b = np.full((1,), float(params.get(2, 0.0))) if int(params.get(1, 0)) else np.asarray(inputs[1], np.float64)
    reverse = _FLOORING.get(op, _ROUNDING.get(op))

    def deterministic(u, v):
        x, y = (v, u) if reverse else (u, v)
        with np.errstate(all="ignore"):
            q = x / y
        step = np.floor(q) if op in _FLOORING else np.floor(q) + 0.5
        near = np.minimum(np.abs(q - step), np.abs(q - step - 1.0)) <= _Q_REL * np.maximum(1.0, np.abs(q))
        return ~near | ~np.isfinite(q)

    if int(params.get(1, 0)):
        return deterministic(a, b.reshape((1,) * a.ndim))
    return ncnn_binary(deterministic, a, b)  # the operands as ncnn aligns them


def roipooling_mask(params: dict, roi: np.ndarray, channels: int) -> np.ndarray:
    """(c, ph, pw) True for the cells whose bin borders are not whole numbers computed by a division (where
    the wheel's estimate may round either way); the first border (0) is always exact."""
    pw, ph = int(params.get(0, 0)), int(params.get(1, 0))
    scale = np.float32(params.get(2, 1.0))
    r = np.asarray(roi, np.float32).ravel()[:4] * scale
    x1, y1, x2, y2 = (int(np.floor(abs(v) + 0.5) * np.sign(v)) for v in r)
    rw, rh = max(x2 - x1 + 1, 1), max(y2 - y1 + 1, 1)

    def exact(n_bins, size):
        i = np.arange(n_bins)
        start_ok = (i == 0) | ((i * size) % n_bins != 0)
        end_ok = ((i + 1) * size) % n_bins != 0
        return start_ok & end_ok

    ok = exact(ph, rh)[:, None] & exact(pw, rw)[None, :]
    return np.broadcast_to(ok, (channels, ph, pw))


def compare_mask(type_name: str, params: dict, inputs: Sequence[np.ndarray], k: int = 0) -> np.ndarray | None:
    """The mask of output ``k`` of one case where the wheel is deterministic (None: the whole output)."""
    if type_name == "BinaryOp":
        return binaryop_mask(params, inputs)
    if type_name == "ROIPooling" and len(inputs) >= 2:
        return roipooling_mask(params, inputs[1], np.asarray(inputs[0]).shape[0])
    return None
