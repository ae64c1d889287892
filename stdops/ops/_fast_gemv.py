"""Compiled matrix-vector product for a classifier's weights (numba + LLVM code, AVX-512): y = W x with W (N, K) row
major, 16 rows at a time. A network's last layer reads its weights once per run, from memory (MobileNetV2's 1280 ->
1000: 5 MB, evicted by the rest of the run), and a single stream of them (OpenBLAS's GEMV on x @ W^T) leaves
most of the memory system idle; 16 rows read side by side keep 16 streams in flight.

Measured on one AVX-512 core (Zen 4), W 1000 x 1280 after reading 32 MB (the weights out of cache): 171 us (median
192) against numpy's x @ W^T 212-263 us (median 280); warm, the same 63-66 us (memory, not arithmetic, either way).

Each output sums its K products in 16 lane-wise partial sums over k = 16 j + l (one fused multiply-add each, in
order of j), then adds the 16 partial sums pairwise (8 + 8, 4 + 4, 2 + 2, 1 + 1): the same bits for a row whichever
16-row block or part holds it. Reference: numpy's matmul (tests/ops/test_fast_gemv.py, within float32 rounding).
"""

from __future__ import annotations

import functools

import numpy as np

from ._blas import run_parts
from ._fast import numba
from ._fast_conv import PACKED_OK

_R = 16  # rows a call
#: the path on (tests turn it off to reach numpy's product)
USE = True
#: the path's smallest weights (N K values): below, the weights stay in cache between runs and numpy's GEMV is as fast
MIN_VALUES = 1 << 18
#: ... and from this many, 2 parts over rows when the caller has 2 threads
_SPLIT_VALUES = 1 << 20

if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    from ._llvm_lanes import Lanes, data

    def _rows_codegen_for(rows: int):
        def codegen(context, builder, signature, args):
            w_, woff, K, x_, y_, yoff = args
            lanes = Lanes(builder)
            i64 = lanes.i64
            wd, xd, yd = (data(context, builder, signature, args, i) for i in (0, 3, 4))
            slots = [cgutils.alloca_once(builder, lanes.vec) for _ in range(rows)]
            for s in slots:
                builder.store(lanes.zero, s)

            def step(k, mask=None):
                def load(ptr):
                    ptr = builder.bitcast(ptr, lanes.vptr)
                    if mask is None:
                        return builder.load(ptr, align=4)
                    return builder.call(lanes.mload, [ptr, lanes.align, mask, lanes.zero])

                xv = load(builder.gep(xd, [k]))
                for r, s in enumerate(slots):
                    wv = load(builder.gep(wd, [builder.add(builder.add(woff, builder.mul(ir.Constant(i64, r), K)), k)]))
                    builder.store(builder.call(lanes.fma, [wv, xv, builder.load(s)]), s)

            full = builder.sdiv(K, ir.Constant(i64, lanes.width))
            with cgutils.for_range(builder, full) as loop:
                step(builder.mul(loop.index, ir.Constant(i64, lanes.width)))
            tail = builder.srem(K, ir.Constant(i64, lanes.width))
            with builder.if_then(builder.icmp_signed(">", tail, ir.Constant(i64, 0))):
                step(builder.mul(full, ir.Constant(i64, lanes.width)), lanes.mask(tail))
            for r, s in enumerate(slots):
                v = builder.load(s)
                width = lanes.width
                while width > 1:  # pairwise: lanes j and j + width / 2
                    h = width // 2
                    undef = ir.Constant(v.type, ir.Undefined)
                    lo = builder.shuffle_vector(v, undef, ir.Constant(ir.VectorType(lanes.i32, h), list(range(h))))
                    hi = builder.shuffle_vector(
                        v, undef, ir.Constant(ir.VectorType(lanes.i32, h), list(range(h, width)))
                    )
                    v = builder.fadd(lo, hi)
                    width = h
                out = builder.gep(yd, [builder.add(yoff, ir.Constant(i64, r))])
                builder.store(builder.extract_element(v, ir.Constant(lanes.i32, 0)), out)
            return context.get_dummy_value()

        def typer(typingctx, w, woff, K, x, y, yoff):  # pragma: no cover - compiled
            ip = types.intp
            return types.void(w, ip, ip, x, y, ip), codegen

        return intrinsic(typer)

    # y[yoff + r] = W[woff + r K ..] . x for r < 16 (or 1)
    _rows16, _rows1 = _rows_codegen_for(_R), _rows_codegen_for(1)

    @numba.njit(cache=True, nogil=True)
    def _gemv(w, x, y, r0, r1):  # pragma: no cover - compiled
        K = w.shape[1]
        wf = w.reshape(-1)
        r = r0
        while r + _R <= r1:
            _rows16(wf, r * K, K, x, y, r)
            r += _R
        while r < r1:
            _rows1(wf, r * K, K, x, y, r)
            r += 1


def takes(w: np.ndarray) -> bool:
    """Whether weights W (N, K) (as stored: rows of K) can take this path: float32, C-contiguous, at least
    MIN_VALUES, on an AVX-512 machine with numba (the caller checks that the compiled extra is on at each call)."""
    return USE and w.ndim == 2 and w.dtype == np.float32 and w.flags.c_contiguous and w.size >= MIN_VALUES and PACKED_OK


def gemv(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """y (N,) = W (N, K) @ x (K,), float32 (``takes(w)`` holds; x any float32 vector of K values)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    N = w.shape[0]
    y = np.empty(N, np.float32)
    if w.size < _SPLIT_VALUES or N < 2 * _R:
        _gemv(w, x, y, 0, N)
        return y
    half = N // 2 // _R * _R
    run_parts([functools.partial(_gemv, w, x, y, 0, half), functools.partial(_gemv, w, x, y, half, N)])
    return y
