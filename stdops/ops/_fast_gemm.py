"""Compiled float32 GEMM of a layer's rows by its constant weights (numba + LLVM code, AVX-512): Y = X W, X (P, K)
and W (K, N) row major, N a multiple of 16, as ops/_fast_rowtiles.py's register tiles over column blocks of 64 (48,
16) columns: each block of W (K x 64 floats) stays in L2 while every row of X passes it. The matrix products of a
transformer (MatMul + bias in ops/fused.py's ``matmul_act``) take it.

Measured on one AVX-512 core (Zen 4), 1 thread, min of 30 calls, against numpy's matmul (OpenBLAS SkylakeX): 197 x 384
@ 384 x 1536 89 against 90 GFLOP/s, 197 x 1536 @ 1536 x 384 97 / 82, 197 x 384 @ 384 x 1152 92 / 83, 128 x 256 @
256 x 1024 89 / 80, 128 x 1024 @ 1024 x 256 94 / 85, 197 x 384 @ 384 x 384 98 / 85.

Each output is one sum over k in order from zero (one fused multiply-add a term): the same bits at any thread count.
Reference: numpy's matmul (tests/ops/test_fast_gemm.py, within float32 rounding).
"""

from __future__ import annotations

import functools

import numpy as np

from ._blas import _KERNEL_SPLIT_FLOPS as _SPLIT_FLOPS  # a compiled kernel's parts (see ops/_blas.py)
from ._blas import matmul, run_parts
from ._fast import numba
from ._fast_conv import PACKED_OK
from ._fast_rowtiles import row_tiles

_VL = 16
#: the path on (tests turn it off to reach numpy's product)
USE = True

if numba is not None:

    @numba.njit(cache=True, nogil=True)
    def _gemm(x, w, y, c0, c1):  # pragma: no cover - compiled
        """y[:, c0:c1] = x @ w[:, c0:c1] (c0, c1 multiples of 16): blocks of 64 columns, then of 48 or 16."""
        P, K = x.shape
        N = w.shape[1]
        xf, wf, yf = x.reshape(-1), w.reshape(-1), y.reshape(-1)
        c = c0
        while c < c1:
            rem = c1 - c
            NR = 4 if rem >= 64 else 3 if rem >= 48 else 1
            row_tiles(wf, c, N, xf, 0, K, K, yf, c, N, P, NR)
            c += _VL * NR


def takes(w: np.ndarray) -> bool:
    """Whether constant weights W (K, N) can take this path: float32, C-contiguous, N a multiple of 16, on an AVX-512
    machine with numba (the caller checks that the compiled extra is on at each call)."""
    return USE and PACKED_OK and w.ndim == 2 and w.dtype == np.float32 and w.flags.c_contiguous and w.shape[1] % 16 == 0


def gemm(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Y (P, N) float32 = X (P, K) @ W (K, N) (``takes(w)`` holds; X float32). From _SPLIT_FLOPS, 2 parts over column
    blocks when the caller has 2 threads. One row goes to numpy's GEMV (the tiles' one-row form is load-bound:
    1 x 576 @ 576 x 1024 78 us against 38; from 2 rows the tiles win: 2 rows 150 against 210, 4 x 256 @ 256 x 1024 65
    against 103)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    P, K = x.shape
    if P < 2:
        return matmul(x, w)
    N = w.shape[1]
    y = np.empty((P, N), np.float32)
    if 2.0 * P * K * N < _SPLIT_FLOPS or N < 128:
        _gemm(x, w, y, 0, N)
        return y
    half = N // 2 // 64 * 64
    run_parts([functools.partial(_gemm, x, w, y, 0, half), functools.partial(_gemm, x, w, y, half, N)])
    return y
