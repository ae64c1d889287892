"""Compiled kernels (numba, the optional ``fast`` extra) for the loops NumPy cannot run in one memory pass.

Each function here has a NumPy reference in the module that calls it and is differential-tested against
that reference (tests/ops/test_fast.py); the callers use it only when :func:`enabled` and fall back to
NumPy otherwise. What each one gains (benchmarks/bench_conv.py, ``--no-fast`` for the NumPy paths; one
AVX-512 core, fastest of alternating rounds):

- :func:`winograd`: the input and output transforms of F(4x4, 3x3), each a 6-from-6 linear map per tile
  with the coefficients in registers over the 4 x 4 phases of a plane, bias and clip in the output one; the
  NumPy transforms (a gather copy and a Kronecker GEMM each way) cost 70% of the layer. 3x3 64@56:
  0.90 ms against 1.41 ms (onnxruntime 1.16 ms); 128@28: 0.85 against 0.97 (onnxruntime 1.10).
(The depthwise kernels are in ops/_fast_depthwise.py (planar) and ops/_fast_dwtiles.py (AVX-512 register tiles),
the drift-diffusion walk, ``ddm_walk``, in ops/_fast_ddm.py.)

Strict IEEE arithmetic except fused multiply-add (numba's ``contract``): each output sums its terms in a
fixed order, padding included as zeros (0 * inf is NaN, as the definition says). The first call of each
kernel compiles it (seconds; cached on disk by numba afterwards). ``STDOPS_NO_FAST=1`` in the environment
turns the compiled path off.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from . import _blas
from ._blas import _SPLIT_FLOPS, matmul, run_parts

try:  # the optional extra
    import numba
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None

_enabled = numba is not None and os.environ.get("STDOPS_NO_FAST", "") in ("", "0")


def cpu_has(*features: str) -> bool:
    """Whether the host CPU has every one of these LLVM feature names ("avx512f", "avx2", "fma"): the compiled
    kernels' tile shapes and gates (ops/_fast_conv.py AVX512 / AVX2); False without numba's llvmlite."""
    try:
        from llvmlite import binding

        found = binding.get_host_cpu_features()
        return all(bool(found.get(f)) for f in features)
    except Exception:  # noqa: BLE001 - no feature map: take the portable paths
        return False


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

    @numba.njit(inline="always")
    def _rows_out(acc, Wq, out):  # pragma: no cover - compiled
        # a plane's rows, computed at width Wq (junk columns past ow), into out (oh, ow): the row-wise kernels'
        # last step
        oh, ow = out.shape
        for oy in range(oh):
            rr = acc[oy * Wq : oy * Wq + ow]
            orow = out[oy]
            for ox in range(ow):
                orow[ox] = rr[ox]

    @numba.njit(inline="always")
    def _regs36(a):  # pragma: no cover - compiled
        # a transform's coefficients as a tuple of values that LLVM keeps in registers, from an array argument: a
        # tuple argument of NumPy scalars cost the caller 28-32 us to build for B^T's 36 (and A^T's 24) at every call
        # and the dispatcher 3.5 us more to type
        # fmt: off
        return (
            a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
            a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23],
            a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33], a[34], a[35],
        )
        # fmt: on

    @numba.njit(inline="always")
    def _regs24(a):  # pragma: no cover - compiled
        # fmt: off
        return (
            a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
            a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23],
        )
        # fmt: on

    @numba.njit(inline="always")
    def _lin6(c, k, d0, d1, d2, d3, d4, d5):  # pragma: no cover - compiled
        return c[k] * d0 + c[k + 1] * d1 + c[k + 2] * d2 + c[k + 3] * d3 + c[k + 4] * d4 + c[k + 5] * d5

    @numba.njit(cache=True, nogil=True, fastmath={"contract"})
    def _wino4_in(x, btf, pt, pl, TH, TWp, V):  # pragma: no cover - compiled
        # F(4x4, 3x3) input transform: V[6 a + b, c, i L + q] = (B^T d B)[a, b] of tile q = th TWp + tw of
        # plane (i, c) (tw = TWp - 1: a junk column). Per plane: the zero-padded plane split into 4 x 4
        # phases (tiles start every 4 rows and columns), then the row and the column stage, each 6 outputs
        # from 6 inputs per tile with the coefficients (a tuple) in registers and every loop contiguous.
        bt = _regs36(btf)
        N, C, H, W = x.shape
        THs = TH + 2
        L = TH * TWp
        S = np.zeros((4, 4, THs * TWp), x.dtype)
        R = np.zeros((6, 4, L + TWp), x.dtype)
        # the phases from a zero-padded copy of the plane, 4 tiles' columns wide, its rows grouped by row phase
        # (Xp[r, t] = padded row 4 t + r): each row phase's 4 column phases are then one long loop reading 4
        # consecutive values per step, which LLVM turns into vector loads and shuffles (a loop per phase reading
        # every 4th value took gathers: 16 x 56 x 56, 58 of the transform's 67 us). The padding stays zero (the
        # same places every plane).
        Wq4 = 4 * TWp
        Xp = np.zeros((4, THs, Wq4), x.dtype)
        y0, y1 = min(pt, 4 * THs), min(4 * THs, pt + H)
        w = max(0, min(W, Wq4 - pl))
        n_ph = THs * TWp
        for i in range(N):
            base = i * L
            for c in range(C):
                plane = x[i, c]
                for Y in range(y0, y1):
                    src, dst = plane[Y - pt], Xp[Y % 4, Y // 4, pl : pl + w]
                    for k in range(w):
                        dst[k] = src[k]
                for ry in range(4):
                    flat = Xp[ry].reshape(-1)
                    p0, p1, p2, p3 = S[ry, 0], S[ry, 1], S[ry, 2], S[ry, 3]
                    for j in range(n_ph):
                        p0[j] = flat[4 * j]
                        p1[j] = flat[4 * j + 1]
                        p2[j] = flat[4 * j + 2]
                        p3[j] = flat[4 * j + 3]
                for pc in range(4):  # rows: tile row r of tile th is phase row r % 4, r // 4 rows further
                    s0, s1, s2, s3 = S[0, pc, :L], S[1, pc, :L], S[2, pc, :L], S[3, pc, :L]
                    s4, s5 = S[0, pc, TWp : TWp + L], S[1, pc, TWp : TWp + L]
                    r0, r1, r2, r3, r4, r5 = R[0, pc], R[1, pc], R[2, pc], R[3, pc], R[4, pc], R[5, pc]
                    for q in range(L):
                        d0, d1, d2, d3, d4, d5 = s0[q], s1[q], s2[q], s3[q], s4[q], s5[q]
                        r0[q] = _lin6(bt, 0, d0, d1, d2, d3, d4, d5)
                        r1[q] = _lin6(bt, 6, d0, d1, d2, d3, d4, d5)
                        r2[q] = _lin6(bt, 12, d0, d1, d2, d3, d4, d5)
                        r3[q] = _lin6(bt, 18, d0, d1, d2, d3, d4, d5)
                        r4[q] = _lin6(bt, 24, d0, d1, d2, d3, d4, d5)
                        r5[q] = _lin6(bt, 30, d0, d1, d2, d3, d4, d5)
                for a in range(6):  # columns: tile column s is phase column s % 4, s // 4 further
                    e0, e1, e2, e3 = R[a, 0, :L], R[a, 1, :L], R[a, 2, :L], R[a, 3, :L]
                    e4, e5 = R[a, 0, 1 : 1 + L], R[a, 1, 1 : 1 + L]
                    v0, v1, v2 = (
                        V[6 * a, c, base : base + L],
                        V[6 * a + 1, c, base : base + L],
                        V[6 * a + 2, c, base : base + L],
                    )
                    v3, v4, v5 = (
                        V[6 * a + 3, c, base : base + L],
                        V[6 * a + 4, c, base : base + L],
                        V[6 * a + 5, c, base : base + L],
                    )
                    for q in range(L):
                        d0, d1, d2, d3, d4, d5 = e0[q], e1[q], e2[q], e3[q], e4[q], e5[q]
                        v0[q] = _lin6(bt, 0, d0, d1, d2, d3, d4, d5)
                        v1[q] = _lin6(bt, 6, d0, d1, d2, d3, d4, d5)
                        v2[q] = _lin6(bt, 12, d0, d1, d2, d3, d4, d5)
                        v3[q] = _lin6(bt, 18, d0, d1, d2, d3, d4, d5)
                        v4[q] = _lin6(bt, 24, d0, d1, d2, d3, d4, d5)
                        v5[q] = _lin6(bt, 30, d0, d1, d2, d3, d4, d5)

    @numba.njit(cache=True, nogil=True, fastmath={"contract"})
    def _wino4_out(P, atf, TH, TW, TWp, b, clip, lo, hi, y):  # pragma: no cover - compiled
        # F(4x4, 3x3) output transform: y[i, o, 4 th + r, 4 tw + s] = (A^T p A)[r, s] + b[o] (clipped) of
        # the 6 x 6 products p = P[:, o, i L + th TWp + tw]: the row stage (4 from 6) into Q, the column
        # stage (4 from 6) straight into Y's rows (columns past the output dropped)
        at = _regs24(atf)
        N, M, oh, ow = y.shape
        L = TH * TWp
        has_b = b.shape[0] == M
        Q = np.empty((4, 6, L), P.dtype)
        Z = np.empty((4, L), P.dtype)
        T = np.empty(4 * L, P.dtype)
        for i in range(N):
            base = i * L
            for o in range(M):
                for bb in range(6):
                    p0, p1, p2 = (
                        P[bb, o, base : base + L],
                        P[6 + bb, o, base : base + L],
                        P[12 + bb, o, base : base + L],
                    )
                    p3, p4, p5 = (
                        P[18 + bb, o, base : base + L],
                        P[24 + bb, o, base : base + L],
                        P[30 + bb, o, base : base + L],
                    )
                    q0, q1, q2, q3 = Q[0, bb], Q[1, bb], Q[2, bb], Q[3, bb]
                    for q in range(L):
                        d0, d1, d2, d3, d4, d5 = p0[q], p1[q], p2[q], p3[q], p4[q], p5[q]
                        q0[q] = _lin6(at, 0, d0, d1, d2, d3, d4, d5)
                        q1[q] = _lin6(at, 6, d0, d1, d2, d3, d4, d5)
                        q2[q] = _lin6(at, 12, d0, d1, d2, d3, d4, d5)
                        q3[q] = _lin6(at, 18, d0, d1, d2, d3, d4, d5)
                bias = b[o] if has_b else P.dtype.type(0)
                out = y[i, o]
                for r in range(4):
                    g0, g1, g2, g3, g4, g5 = Q[r, 0], Q[r, 1], Q[r, 2], Q[r, 3], Q[r, 4], Q[r, 5]
                    z0, z1, z2, z3 = Z[0], Z[1], Z[2], Z[3]
                    for q in range(L):
                        d0, d1, d2, d3, d4, d5 = g0[q], g1[q], g2[q], g3[q], g4[q], g5[q]
                        z0[q] = bias + _lin6(at, 0, d0, d1, d2, d3, d4, d5)
                        z1[q] = bias + _lin6(at, 6, d0, d1, d2, d3, d4, d5)
                        z2[q] = bias + _lin6(at, 12, d0, d1, d2, d3, d4, d5)
                        z3[q] = bias + _lin6(at, 18, d0, d1, d2, d3, d4, d5)
                    if clip:
                        for s_ in range(4):
                            zs = Z[s_]
                            for q in range(L):
                                v = zs[q]
                                zs[q] = lo if v < lo else (hi if v > hi else v)
                    # the tiles' 4 columns interleaved in one long loop (vector shuffles), then each tile row's
                    # outputs copied into Y's row (4 strided stores per tile in a loop per tile row, 14 tiles at
                    # 56 x 56, took scalar code: 16 x 56 x 56 -> 16, see the commit)
                    for q in range(L):
                        T[4 * q] = z0[q]
                        T[4 * q + 1] = z1[q]
                        T[4 * q + 2] = z2[q]
                        T[4 * q + 3] = z3[q]
                    for th in range(TH):
                        oy = 4 * th + r
                        if oy >= oh:
                            break
                        orow, trow = out[oy], T[4 * th * TWp : 4 * th * TWp + ow]
                        for ox in range(ow):
                            orow[ox] = trow[ox]


def _clip_args(clip, dt):
    lo = -np.inf if clip is None or clip[0] is None else clip[0]
    hi = np.inf if clip is None or clip[1] is None else clip[1]
    return clip is not None, dt.type(lo), dt.type(hi)


#: a Winograd layer's products of at least this many FLOP (2 S M C N L) run, at 2 threads, in 2 parts over tile rows,
#: each part with its own input transform, products and output transform (so that each core reads what it wrote);
#: below, in one part (the hand-off would not pay)
_ROW_SPLIT_FLOPS = _SPLIT_FLOPS


def row_parts(m: int, TH: int, flops: float, blas: bool) -> list[tuple[int, int]]:
    """The tile rows [t0, t1) of the parts a Winograd convolution of TH tile rows runs in (tiles of m output rows):
    2 parts where TH >= 2, the products reach _ROW_SPLIT_FLOPS and threads() > 1, else one. Each output is the same
    sum whichever part computes it (a tile's values and arithmetic do not depend on the part), except the products
    by OpenBLAS (``blas``): its sums for a column depend on the GEMM's width (measured: 64@56, 105 of 210 columns,
    differences of 1e-4), so there the parts are a rule on the shape alone, at 1 thread too (run one after the
    other)."""
    if TH < 2 or flops < _ROW_SPLIT_FLOPS or (not blas and _blas.threads() < 2):
        return [(0, TH)]
    return [(0, TH // 2), (TH // 2, TH)]


def split_rows(conv, x, begin, out, m: int, tiles: int, y, spans) -> None:
    """conv(xs, begin', out', ys, whole) for each span [t0, t1) of tile rows (tiles of m output rows, each reading
    ``tiles`` padded rows): xs the input rows those tiles read (a view of x), begin' the padding before them, ys the
    output rows' view of y; the parts run by ops/_blas.py's helpers (the caller takes the first, so that it reads
    what it wrote in a step split the same way). ``whole``: one span (the products may then be split instead)."""
    pt = begin[0]
    H = x.shape[2]
    oh = out[0]

    def part(t0: int, t1: int) -> None:
        r0, r1 = m * t0, min(oh, m * t1)
        p0 = m * t0  # the first padded row the tiles read
        a, z = max(0, p0 - pt), min(H, m * (t1 - 1) + tiles - pt)  # input rows read (the rest is padding)
        conv(x[:, :, a:z], (a - (p0 - pt), begin[1]), (r1 - r0, out[1]), y[:, :, r0:r1], False)

    if len(spans) == 1:
        conv(x, begin, out, y, True)
        return
    run_parts([functools.partial(part, t0, t1) for t0, t1 in spans])


def winograd(tile, x, U, b, begin, out, clip=None, Up=None) -> np.ndarray:
    """The 3x3 stride-1 convolution of x (N, C, H, W) by Winograd F(4x4, 3x3) (``tile``: winograd.TILES[4])
    with the transformed weights U (36, M, C), + b (M,) or None, clipped to ``clip``: the input and output
    transforms compiled (one pass over X, one over Y), the 36 products one batched GEMM. Tiles are computed
    one column wider than the map (a junk column per tile row keeps every transform loop contiguous).
    ``Up``: U packed (ops/_fast_conv.py's pack_winograd, float32): the products by its packed kernel instead
    of OpenBLAS. Reference: winograd.Tile.conv (NumPy). At 2 threads a big layer runs in 2 parts over tile
    rows (:func:`row_parts`), the same bits."""
    dt = U.dtype
    N, C = x.shape[:2]
    M = U.shape[1]
    TH, TWp = -(-out[0] // 4), -(-out[1] // 4) + 1
    x = np.ascontiguousarray(x, dtype=dt)
    y = np.empty((N, M) + tuple(out), dt)
    spans = row_parts(4, TH, 2.0 * 36 * M * C * N * TH * TWp, Up is None)
    split_rows(functools.partial(_winograd_into, tile, U, b, clip, Up), x, begin, out, 4, 6, y, spans)
    return y


def _winograd_into(tile, U, b, clip, Up, x, begin, out, y, whole) -> None:
    dt = U.dtype
    N, C = x.shape[:2]
    M = U.shape[1]
    TH, TW = -(-out[0] // 4), -(-out[1] // 4)
    TWp = TW + 1
    L = TH * TWp
    if Up is not None:  # V's columns padded to whole tiles of the packed kernel
        from ._fast_conv import _TILE_P, winograd_products

        V = np.empty((36, C, -(-(N * L) // _TILE_P) * _TILE_P), dt)
        V[:, :, N * L :] = 0
    else:
        V = np.empty((36, C, N * L), dt)
    bt, at = tile.flat(dt)
    _wino4_in(x, bt, begin[0], begin[1], TH, TWp, V)
    # (36, M, N L); a part of a split layer is not split again
    if Up is None:
        P = matmul(U, V) if whole else np.matmul(U, V)
    else:
        P = winograd_products(Up, V, N * L, M, (N, TH, TWp), split=whole)
    _wino4_out(P, at, TH, TW, TWp, np.zeros((0,), dt) if b is None else b, *_clip_args(clip, dt), y)
