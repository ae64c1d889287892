"""Winograd F(2x2, 3x3) with compiled transforms (numba, the optional ``fast`` extra; ops/_fast.py has F(4x4, 3x3)).

:func:`winograd2`: the input and output transforms of Winograd F(2x2, 3x3) compiled, as ops/_fast.py's F(4x4,
3x3) ones: each plane split once into its 2 x 2 phases (tiles start every 2 rows and columns), then a row and a
column stage, each a 4-from-4 (output: 2-from-4) linear map per tile with the coefficients in registers and every
loop contiguous; bias and clip in the output stage. The NumPy transforms (winograd.Tile.conv: a gather copy, a
Kronecker GEMM each way and a scatter copy) cost more than the 16 products on 14 x 14 maps; the products by
ops/_fast_conv.py's packed kernel (:func:`winograd_products`; ResNet-18 at 1 thread: 24.8 ms against 25.7 with
OpenBLAS's; F(4,3)'s measured slower that way and stay on OpenBLAS), reading V in place (no copy into tiles:
256@14 1.40 -> 1.30 ms a layer, alternating), in K chunks of 128, and where a row holds whole tiles of the
kernel (14 x 14 maps: 7 tiles and the junk one) without the junk column's products (1.08 -> 1.05 ms, 512@14 3.54
-> 3.25). Reference: winograd.Tile.conv.

Strict IEEE arithmetic except fused multiply-add (numba's ``contract``), each output summing its terms in a fixed
order, as ops/_fast.py.
"""

from __future__ import annotations

import functools

import numpy as np

from ._blas import matmul
from ._fast import _clip_args, numba, row_parts, split_rows
from ._fast_conv import winograd_products
from ._fast_convtile import _TILE_P

if numba is not None:

    @numba.njit(inline="always")
    def _regs16(a):  # pragma: no cover - compiled
        # the transform's coefficients as a tuple of values that LLVM keeps in registers, from an array argument (a
        # tuple of NumPy scalars built at every call costs ~1 us per coefficient, see ops/_fast.py's _regs36)
        return (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15])

    @numba.njit(inline="always")
    def _regs8(a):  # pragma: no cover - compiled
        return (a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7])

    @numba.njit(inline="always")
    def _lin4(c, k, d0, d1, d2, d3):  # pragma: no cover - compiled
        return c[k] * d0 + c[k + 1] * d1 + c[k + 2] * d2 + c[k + 3] * d3

    @numba.njit(cache=True, nogil=True, fastmath={"contract"})
    def _wino2_in(x, btf, pt, pl, TH, TWp, V):  # pragma: no cover - compiled
        # F(2x2, 3x3) input transform: V[4 a + b, c, i L + q] = (B^T d B)[a, b] of tile q = th TWp + tw of plane
        # (i, c) (tw = TWp - 1: a junk column). Tile row r (0..3) of tile th is padded row 2 th + r: phase row r % 2,
        # r // 2 phase rows further; the same for columns.
        bt = _regs16(btf)
        N, C, H, W = x.shape
        THs = TH + 1
        L = TH * TWp
        S = np.zeros((2, 2, THs * TWp), x.dtype)
        R = np.zeros((4, 2, L + TWp), x.dtype)
        # the phases from a zero-padded copy of the plane grouped by row phase (Xp[r, t] = padded row 2 t + r), each
        # row phase's 2 column phases one long loop (vector shuffles, not gathers: see ops/_fast.py's _wino4_in);
        # the padding stays zero (the same places every plane)
        Wq2 = 2 * TWp
        Xp = np.zeros((2, THs, Wq2), x.dtype)
        y0, y1 = min(pt, 2 * THs), min(2 * THs, pt + H)
        w = max(0, min(W, Wq2 - pl))
        n_ph = THs * TWp
        for i in range(N):
            base = i * L
            for c in range(C):
                plane = x[i, c]
                for Y in range(y0, y1):
                    src, dst = plane[Y - pt], Xp[Y % 2, Y // 2, pl : pl + w]
                    for k in range(w):
                        dst[k] = src[k]
                for ry in range(2):
                    flat = Xp[ry].reshape(-1)
                    p0, p1 = S[ry, 0], S[ry, 1]
                    for j in range(n_ph):
                        p0[j] = flat[2 * j]
                        p1[j] = flat[2 * j + 1]
                for pc in range(2):  # the row stage
                    s0, s1 = S[0, pc, :L], S[1, pc, :L]
                    s2, s3 = S[0, pc, TWp : TWp + L], S[1, pc, TWp : TWp + L]
                    r0, r1, r2, r3 = R[0, pc], R[1, pc], R[2, pc], R[3, pc]
                    for q in range(L):
                        d0, d1, d2, d3 = s0[q], s1[q], s2[q], s3[q]
                        r0[q] = _lin4(bt, 0, d0, d1, d2, d3)
                        r1[q] = _lin4(bt, 4, d0, d1, d2, d3)
                        r2[q] = _lin4(bt, 8, d0, d1, d2, d3)
                        r3[q] = _lin4(bt, 12, d0, d1, d2, d3)
                for a in range(4):  # the column stage
                    e0, e1 = R[a, 0, :L], R[a, 1, :L]
                    e2, e3 = R[a, 0, 1 : 1 + L], R[a, 1, 1 : 1 + L]
                    v0, v1 = V[4 * a, c, base : base + L], V[4 * a + 1, c, base : base + L]
                    v2, v3 = V[4 * a + 2, c, base : base + L], V[4 * a + 3, c, base : base + L]
                    for q in range(L):
                        d0, d1, d2, d3 = e0[q], e1[q], e2[q], e3[q]
                        v0[q] = _lin4(bt, 0, d0, d1, d2, d3)
                        v1[q] = _lin4(bt, 4, d0, d1, d2, d3)
                        v2[q] = _lin4(bt, 8, d0, d1, d2, d3)
                        v3[q] = _lin4(bt, 12, d0, d1, d2, d3)

    @numba.njit(cache=True, nogil=True, fastmath={"contract"})
    def _wino2_out(P, atf, TH, TW, TWp, b, clip, lo, hi, y):  # pragma: no cover - compiled
        # F(2x2, 3x3) output transform: y[i, o, 2 th + r, 2 tw + s] = (A^T p A)[r, s] + b[o] (clipped) of the 4 x 4
        # products p = P[:, o, i L + th TWp + tw]: the row stage (2 from 4) into Q, the column stage (2 from 4) into
        # Z, then Z's tiles into Y's rows (columns past the output dropped)
        at = _regs8(atf)
        N, M, oh, ow = y.shape
        L = TH * TWp
        has_b = b.shape[0] == M
        Q = np.empty((2, 4, L), P.dtype)
        Z = np.empty((2, L), P.dtype)
        T = np.empty(2 * L, P.dtype)
        for i in range(N):
            base = i * L
            for o in range(M):
                for bb in range(4):
                    p0, p1 = P[bb, o, base : base + L], P[4 + bb, o, base : base + L]
                    p2, p3 = P[8 + bb, o, base : base + L], P[12 + bb, o, base : base + L]
                    q0, q1 = Q[0, bb], Q[1, bb]
                    for q in range(L):
                        d0, d1, d2, d3 = p0[q], p1[q], p2[q], p3[q]
                        q0[q] = _lin4(at, 0, d0, d1, d2, d3)
                        q1[q] = _lin4(at, 4, d0, d1, d2, d3)
                bias = b[o] if has_b else P.dtype.type(0)
                out = y[i, o]
                for r in range(2):
                    g0, g1, g2, g3 = Q[r, 0], Q[r, 1], Q[r, 2], Q[r, 3]
                    z0, z1 = Z[0], Z[1]
                    for q in range(L):
                        d0, d1, d2, d3 = g0[q], g1[q], g2[q], g3[q]
                        z0[q] = bias + _lin4(at, 0, d0, d1, d2, d3)
                        z1[q] = bias + _lin4(at, 4, d0, d1, d2, d3)
                    if clip:
                        for s_ in range(2):
                            zs = Z[s_]
                            for q in range(L):
                                v = zs[q]
                                zs[q] = lo if v < lo else (hi if v > hi else v)  # NaN stays NaN
                    for q in range(L):  # the tiles' 2 columns interleaved in one long loop (ops/_fast.py's _wino4_out)
                        T[2 * q] = z0[q]
                        T[2 * q + 1] = z1[q]
                    for th in range(TH):
                        oy = 2 * th + r
                        if oy >= oh:
                            break
                        orow, trow = out[oy], T[2 * th * TWp : 2 * th * TWp + ow]
                        for ox in range(ow):
                            orow[ox] = trow[ox]


def winograd2(tile, x, U, b, begin, out, clip=None, Up=None) -> np.ndarray:
    """The 3x3 stride-1 convolution of x (N, C, H, W) by Winograd F(2x2, 3x3) (``tile``: winograd.TILES[2]) with
    the transformed weights U (16, M, C), + b (M,) or None, clipped to ``clip``: the transforms compiled (one pass
    over X, one over Y), the 16 products one batched GEMM. Tiles are computed one column wider than the map (a junk
    column per tile row keeps every transform loop contiguous). ``Up``: U packed (:func:`pack_winograd`, float32):
    the products by the packed kernel instead of OpenBLAS. Reference: winograd.Tile.conv (NumPy). At 2 threads a
    layer whose rows pay for it runs in 2 parts over tile rows (ops/_fast.py's row_parts), the same bits."""
    dt = U.dtype
    N, C = x.shape[:2]
    M = U.shape[1]
    TH, TWp = -(-out[0] // 2), -(-out[1] // 2) + 1
    x = np.ascontiguousarray(x, dtype=dt)
    y = np.empty((N, M) + tuple(out), dt)
    spans = row_parts(2, TH, 2.0 * 16 * M * C * N * TH * TWp, Up is None) if _ROWS2 else [(0, TH)]
    split_rows(functools.partial(_winograd2_into, tile, U, b, clip, Up), x, begin, out, 2, 4, y, spans)
    return y


#: F(2,3) split over tile rows at 2 threads (else its products over the tile positions only)
_ROWS2 = True


def _winograd2_into(tile, U, b, clip, Up, x, begin, out, y, whole) -> None:
    dt = U.dtype
    N, C = x.shape[:2]
    M = U.shape[1]
    TH, TW = -(-out[0] // 2), -(-out[1] // 2)
    TWp = TW + 1
    L = TH * TWp
    bt, at = tile.flat(dt)
    if Up is not None:  # the products by the packed kernel: V's columns padded to whole tiles
        V = np.empty((16, C, -(-(N * L) // _TILE_P) * _TILE_P), dt)
        V[:, :, N * L :] = 0
    else:
        V = np.empty((16, C, N * L), dt)
    _wino2_in(x, bt, begin[0], begin[1], TH, TWp, V)
    if Up is None:  # (16, M, N L); a part of a split layer is not split again
        P = matmul(U, V) if whole else np.matmul(U, V)
    else:
        P = winograd_products(Up, V, N * L, M, (N, TH, TWp), split=whole)
    on, lo, hi = _clip_args(clip, dt)
    _wino2_out(P, at, TH, TW, TWp, np.zeros((0,), dt) if b is None else b, on, lo, hi, y)
