"""Data layout: would channels-last (NHWC) convolutions beat the NCHW kernels stdops runs?

For ResNet/MobileNet layer shapes, one thread, alternating: the NCHW kernel stdops uses (conv_forward on the
direct im2col path, Winograd off; the compiled depthwise kernel when numba is there), against the same
convolution written for NHWC in NumPy (im2col from 9 shifted channel-contiguous views, one GEMM giving NHWC
directly; depthwise as 9 multiply-adds of shifted views) and against one layout change (NCHW -> NHWC copy),
the price of switching layouts between two layers.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_layout.py
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import alternating_many  # noqa: E402

# name, C, H, M, k, stride, group
LAYERS = [
    ("3x3 64@56", 64, 56, 64, 3, 1, 1),
    ("3x3 128@28", 128, 28, 128, 3, 1, 1),
    ("3x3 256@14", 256, 14, 256, 3, 1, 1),
    ("3x3/2 64->128@56", 64, 56, 128, 3, 2, 1),
    ("1x1 144->24@56", 144, 56, 24, 1, 1, 1),
    ("dw 3x3 144@56", 144, 56, 144, 3, 1, 144),
    ("dw 3x3/2 96@112", 96, 112, 96, 3, 2, 96),
]


def nhwc_conv(xh, wh, k, s):
    """x (H, W, C) NHWC, wh (k*k*C, M): im2col over channel-contiguous runs, one GEMM -> (OH, OW, M)."""
    H, W, C = xh.shape
    p = k // 2
    xp = np.zeros((H + 2 * p, W + 2 * p, C), xh.dtype)
    xp[p : p + H, p : p + W] = xh
    oh, ow = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    cols = np.empty((oh, ow, k, k, C), xh.dtype)
    for ky in range(k):
        for kx in range(k):
            cols[:, :, ky, kx] = xp[ky : ky + (oh - 1) * s + 1 : s, kx : kx + (ow - 1) * s + 1 : s]
    return (cols.reshape(oh * ow, -1) @ wh).reshape(oh, ow, -1)


def nhwc_depthwise(xh, w9, k, s):
    """x (H, W, C), w9 (k, k, C): y = sum of k*k shifted views times per-channel weights -> (OH, OW, C)."""
    H, W, C = xh.shape
    p = k // 2
    xp = np.zeros((H + 2 * p, W + 2 * p, C), xh.dtype)
    xp[p : p + H, p : p + W] = xh
    oh, ow = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    y = np.zeros((oh, ow, C), xh.dtype)
    t = np.empty_like(y)
    for ky in range(k):
        for kx in range(k):
            np.multiply(xp[ky : ky + (oh - 1) * s + 1 : s, kx : kx + (ow - 1) * s + 1 : s], w9[ky, kx], out=t)
            y += t
    return y


def main() -> int:
    from threadpoolctl import threadpool_limits

    from stdops.ops import conv as conv_mod
    from stdops.ops.conv import conv_forward, prepare_conv_weight
    from stdops.perf import tune_allocator

    tune_allocator()
    threadpool_limits(1)
    conv_mod.choose_tile = lambda *a: 0  # the direct NCHW path: layout, not Winograd, is compared here
    rng = np.random.default_rng(0)
    print(f"{'layer':<20}{'NCHW ms':>9}{'NHWC ms':>9}{'relayout ms':>13}{'NHWC/NCHW':>11}")
    for name, C, H, M, k, s, g in LAYERS:
        x = rng.standard_normal((1, C, H, H), dtype=np.float32)
        w = rng.standard_normal((M, C // g, k, k), dtype=np.float32)
        cw = prepare_conv_weight(w, g)
        xh = np.ascontiguousarray(x[0].transpose(1, 2, 0))
        if g == 1:
            wh = np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(k * k * C, M))
            y_ref = conv_forward(x, cw, None, strides=(s, s), pads=[k // 2] * 4)[0].transpose(1, 2, 0)
            np.testing.assert_allclose(nhwc_conv(xh, wh, k, s), y_ref, rtol=1e-4, atol=1e-4)
            f_nhwc = lambda: nhwc_conv(xh, wh, k, s)  # noqa: E731
        else:
            w9 = np.ascontiguousarray(w[:, 0].transpose(1, 2, 0))
            y_ref = conv_forward(x, cw, None, strides=(s, s), pads=[k // 2] * 4)[0].transpose(1, 2, 0)
            np.testing.assert_allclose(nhwc_depthwise(xh, w9, k, s), y_ref, rtol=1e-4, atol=1e-4)
            f_nhwc = lambda: nhwc_depthwise(xh, w9, k, s)  # noqa: E731
        times = alternating_many(
            [
                lambda: conv_forward(x, cw, None, strides=(s, s), pads=[k // 2] * 4),
                f_nhwc,
                lambda: np.ascontiguousarray(x.transpose(0, 2, 3, 1)),
            ],
            40,
            3.0,
        )
        a, b, r = (1e3 * min(t) for t in times)
        print(f"{name:<20}{a:>9.3f}{b:>9.3f}{r:>13.3f}{b / a:>10.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
