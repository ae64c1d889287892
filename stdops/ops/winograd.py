"""Winograd minimal filtering for dense 3x3 stride-1 2-D convolutions: F(2x2, 3x3) and F(4x4, 3x3).

An output tile of m x m values is Y = A^T [(G g G^T) * (B^T d B)] A over an (m + 2) x (m + 2) input tile d:
n^2 = (m + 2)^2 products per channel pair instead of 9 m^2 (F(2,3): 16 for 36; F(4,3): 36 for 144). Here
every stage is a BLAS call over all tiles at once:

- the tiles are gathered from the zero-padded input with one copy of a strided view, (n^2, C, N * T);
- the input transform (B^T d B for every tile) is one GEMM by kron(B^T, B^T), (n^2, n^2) @ (n^2, C * N * T);
- the products are n^2 GEMMs (M, C) @ (C, N * T) against the weights transformed at load, U = G g G^T;
- the output transform is one GEMM by kron(A^T, A^T), then one copy scatters the tiles into Y.

The matrices come from the Toom-Cook construction on interpolation points (plus the point at infinity):
A^T holds the powers of the points, G the Lagrange weights g_k p^k / prod(p - q), and B^T is solved from
the identity the three must satisfy (checked to 1e-12 at import). F(4,3) uses the points 0, 1, -1, 2, -1/2:
in float32 their error is a third of the usual 0, +-1, +-2 (2e-6 of the output's magnitude on random data,
against 4e-7 for the direct sum and F(2,3)); :func:`choose_tile` keeps the direct sum where the
transforms would cost what they save.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ._blas import matmul

_POINTS = {2: (0, 1, -1), 4: (0, 1, -1, 2, Fraction(-1, 2))}


class Tile:
    """The matrices of F(m x m, 3 x 3): at (m, n), G (n, 3), B^T (n, n), and their Kronecker squares."""

    def __init__(self, m: int, points):
        r = 3
        n = m + r - 1
        p = [Fraction(v) for v in points]
        if len(p) != n - 1:
            raise ValueError(f"F({m},{r}) needs {n - 1} finite points, got {len(p)}")
        at = np.zeros((m, n))
        g = np.zeros((n, r))
        for j, pj in enumerate(p):
            f = Fraction(1)
            for q in p[:j] + p[j + 1 :]:
                f *= pj - q
            at[:, j] = [float(pj**i) for i in range(m)]
            g[j] = [float(pj**k / f) for k in range(r)]
        at[m - 1, n - 1] = g[n - 1, r - 1] = 1.0  # the point at infinity: leading coefficients
        # B^T from the identity: for every output i, tap k and input l, sum_j A^T[i,j] G[j,k] B^T[j,l] = [l == i+k]
        lhs = np.einsum("ij,jk,jJ,lL->iklJL", at, g, np.eye(n), np.eye(n)).reshape(m * r * n, n * n)
        rhs = np.zeros((m, r, n))
        for i in range(m):
            for k in range(r):
                rhs[i, k, i + k] = 1.0
        bt = np.linalg.lstsq(lhs, rhs.reshape(-1), rcond=None)[0]
        if np.abs(lhs @ bt - rhs.reshape(-1)).max() > 1e-12:
            raise ArithmeticError(f"no B^T solves F({m},{r}) on points {points}")
        self.m, self.n = m, n
        self.at, self.g, self.bt = at, g, bt.reshape(n, n)
        self._kin = {dt: np.kron(self.bt, self.bt).astype(dt) for dt in (np.float32, np.float64)}
        self._kout = {dt: np.kron(at, at).astype(dt) for dt in (np.float32, np.float64)}
        # B^T and A^T flat in each dtype, for the compiled transforms (ops/_fast.py, ops/_fast_conv.py)
        self._flat = {
            np.dtype(dt): (self.bt.reshape(-1).astype(dt), at.reshape(-1).astype(dt)) for dt in (np.float32, np.float64)
        }

    def flat(self, dtype) -> tuple[np.ndarray, np.ndarray]:
        """(B^T, A^T) flattened, in ``dtype`` (float32 or float64)."""
        return self._flat[np.dtype(dtype)]

    def transform_weight(self, w: np.ndarray, dtype) -> np.ndarray:
        """U (n^2, M, C) = G g G^T of each 3x3 filter of w (M, C, 3, 3), computed in float64."""
        u = self.g @ w.astype(np.float64) @ self.g.T  # (M, C, n, n)
        M, C = w.shape[:2]
        return np.ascontiguousarray(u.transpose(2, 3, 0, 1).reshape(self.n * self.n, M, C), dtype=dtype)

    def conv(self, xc: np.ndarray, U: np.ndarray, begin, out) -> np.ndarray:
        """Y (N, M, *out) of the 3x3 stride-1 convolution of xc (N, C, H, W) with padding ``begin`` before
        each axis (zeros after as needed), by tiles of m x m outputs."""
        N, C, H, W = xc.shape
        m, n = self.m, self.n
        M, dt = U.shape[1], U.dtype
        oh, ow = out
        TH, TW = -(-oh // m), -(-ow // m)
        NT = N * TH * TW
        bt, bw = begin
        xp = np.zeros((N, C, m * TH + 2, m * TW + 2), dt)
        hh, ww = min(H, m * TH + 2 - bt), min(W, m * TW + 2 - bw)
        xp[:, :, bt : bt + hh, bw : bw + ww] = xc[:, :, :hh, :ww]
        sn, sc, sh, sw = xp.strides
        tiles = np.lib.stride_tricks.as_strided(
            xp, (n, n, C, N, TH, TW), (sh, sw, sc, sn, m * sh, m * sw), writeable=False
        )
        D = np.empty((n * n, C, N, TH, TW), dt)
        np.copyto(D.reshape(n, n, C, N, TH, TW), tiles)
        V = matmul(self._kin[dt.type], D.reshape(n * n, C * NT)).reshape(n * n, C, NT)
        P = matmul(U, V)  # (n^2, M, N * T)
        Yt = matmul(self._kout[dt.type], P.reshape(n * n, M * NT))  # (m^2, M * N * T)
        y = np.empty((N, M, TH, m, TW, m), dt)
        np.copyto(y, Yt.reshape(m, m, M, N, TH, TW).transpose(3, 2, 4, 0, 5, 1))
        y = y.reshape(N, M, m * TH, m * TW)
        if m * TH != oh or m * TW != ow:
            y = np.ascontiguousarray(y[:, :, :oh, :ow])
        return y


TILES = {m: Tile(m, pts) for m, pts in _POINTS.items()}

# measured on one AVX-512 core (benchmarks/bench_conv.py shapes): F(4,3) from 28x28 outputs on, F(2,3) on
# 14x14 maps with >= 128 channels, the direct sum below (7x7 maps: as many GEMM columns as tiles, the
# weights' transform costs more than it saves; 14x14 with fewer channels: the compiled direct sum of
# ops/_fast_conv.py wins, alternating 1-thread runs: 32 ch 0.064 ms against F(2,3)'s 0.117, 64 ch 0.147
# against 0.203, 96 ch 0.271 against 0.315, 128 ch 0.43-0.46 both, 256 ch 1.65 against 1.19)
_MIN_CHANNELS = 16
_F4_MIN_TILES = 49
_F2_MIN_TILES = 36
_F2_MIN_CHANNELS = 128


def choose_tile(M: int, C: int, out) -> int:
    """The output tile size m for a 3x3 stride-1 convolution with M outputs, C inputs and output map
    ``out`` (per sample): 4, 2, or 0 for the direct sum."""
    oh, ow = out
    ch = min(M, C)
    if ch < _MIN_CHANNELS:
        return 0
    if -(-oh // 4) * -(-ow // 4) >= _F4_MIN_TILES:
        return 4
    if ch >= _F2_MIN_CHANNELS and -(-oh // 2) * -(-ow // 2) >= _F2_MIN_TILES:
        return 2
    return 0
