"""Compiled convolution kernels (numba, the optional ``fast`` extra) beside ops/_fast.py's (Winograd F(2,3):
ops/_fast_wino2.py, its products by :func:`winograd_products` here).

- :func:`conv2d_packed`: direct convolution for small maps, every product of a tile of 7 positions x 32 output
  channels summed in 14 AVX-512 registers (an LLVM intrinsic, ops/_fast_convtile.py: numba's own loops kept such
  accumulators in memory, 5x slower), the weights packed once and prefetched ahead so that reading them overlaps
  the products. ResNet-18 at 1 thread: 23.8 ms against 27.7 by im2col + OpenBLAS (layer4's 3x3 512@7: 1.85 ms
  against 2.9). Two segments of 7 positions run as one tile (28 registers, the weights loaded once for both; an
  odd last segment alone): the same sums in the same order, 8-30% faster a layer (alternating, 1 thread: 3x3/2
  64->128 @28 1.00 -> 0.85 ms, 512@7 1.64 -> 1.45, the Winograd products too; ResNet-18 27.6 -> 25.4 ms against
  onnxruntime's 23.9). Where every tile lies within one output row (ow a multiple of 7: ResNet's 56/28/14/7 maps) the
  inputs are read in place, through a table of tap offsets, from a padded copy with rows outermost (H, C, W): a row
  of tiles then reads kh contiguous runs, with no gather pass (alternating, 1 thread: 512@7 1.78 -> 1.62 ms, 3x3/2
  256@14 0.86 -> 0.84, 3x3/2 128@28 0.89 -> 0.82; the same bits); 1 x 1 stride 2 from x itself (no copy at all:
  :func:`pointwise_in_place`). The stride-phase layout instead (channels outermost) measured slower at stride 2
  (its split pass, and each tile's runs spread over 4 planes per channel); so did K ordered (ky, kx, c), whose
  consecutive terms lie a row apart (3x3/2 64@56 0.75 -> 0.80 ms). The in-place tiles store their last chunk's
  sums themselves, + bias and clipped on the accumulators, then transposed in registers into Y's rows
  (ops/_fast_convtile.py; against a scalar pass over the accumulators: 3x3/2 64@56 0.85 -> 0.79 ms, 512@7
  1.45 -> 1.37, F(2,3) 256@14 1.18 -> 1.12).
  Reference: conv.py's im2col GEMM.
- AVX2 + FMA (no AVX-512: 16 ymm registers, a 16-lane vector two of them): tiles of 7 positions x 16 channels, one
  segment (ops/_fast_convtile.py _TILE_M, _SEGS; the AVX-512 shapes above unchanged), behind :data:`TILES_OK`.
  Alternating, 1 thread, AMD Zen 3, against the portable paths (OpenBLAS im2col, NumPy Winograd GEMMs): 0.69-0.89x
  their time a layer in ResNet-18; the whole network 75.9 -> 63.8 ms (0.84x; onnxruntime 54.1 under the same load).
  conv_paths.py's and conv.py's thresholds measured there keep their values (each alternative slower).

Strict IEEE arithmetic except fused multiply-add (numba's ``contract``), each output summing its terms in a fixed
order, as ops/_fast.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from . import _blas
from ._blas import _KERNEL_SPLIT_FLOPS as _SPLIT_FLOPS  # a compiled kernel's parts (see ops/_blas.py)
from ._blas import run_parts
from ._fast import _clip_args, cpu_has, numba
from ._fast_convtile import _K_CHUNK, _PFX_AHEAD, _SEGS, _TILE_M, _TILE_P, _WIDE, _XS

if numba is not None:
    from ._fast_convtile import (
        _taps1,
        _taps1n,
        _taps1np,
        _taps1p,
        _taps2,
        _taps2n,
        _taps2np,
        _taps2npx,
        _taps2nx,
        _taps2p,
        _taps2px,
        _taps2x,
        _tile,
        _tile_pair,
    )


#: the compiled kernels' LLVM tiles are written in 16-lane float32 vectors (ops/_llvm_lanes.py); on AVX-512 one
#: vector is one zmm register (32 of them), on AVX2 + FMA two ymm halves (16 registers: 8 vectors' worth), so a
#: module takes AVX2 only with tile shapes of its own for that budget (a tile sized for AVX-512 spills there:
#: forced on an AMD Zen 3, MobileNetV2 3.2x onnxruntime's time against 1.8x by the portable paths)
AVX512 = numba is not None and cpu_has("avx512f")
AVX2 = numba is not None and not AVX512 and cpu_has("avx2", "fma")
#: the AVX-512 tiles: the packed kernel's tile holds 14 vectors of 16 floats in registers
PACKED_OK = AVX512
#: this module's kernels (the direct packed convolution, Winograd's products): on AVX-512 its tiles as PACKED_OK, on
#: AVX2 + FMA tiles of 16 channels x 7 positions, one segment (ops/_fast_convtile.py)
TILES_OK = AVX512 or AVX2
assert not TILES_OK or _WIDE == AVX512  # the tile shapes chosen for this ISA


# --------------------------------------------------------------------------- direct convolution, weights streamed

#: Winograd's products (K = C, their columns read in place, a row per term) in chunks of half as many: the weights
#: and the rows a tile reads then share L1 (alternating, 1 thread: F(2,3) 256@14 1.18 -> 1.10 ms, 512@14 4.2 -> 3.7;
#: 64 or 96: the same within noise; the direct path: no difference, it keeps _K_CHUNK)
_K_CHUNK_WINO = 128

if numba is not None:

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _pack_cols(xpad, kh, kw, sh, sw, dh, dw, oh, ow, xp):  # pragma: no cover - compiled
        # xp[pb, (c kh + ky) kw + kx, i] = xpad[c, oy sh + ky dh, ox sw + kx dw] of output p = 7 pb + i = oy ow + ox
        # (zero past the last output; i < 7 of the _XS values per K step)
        NB = xp.shape[0]
        T = _TILE_P
        C = xpad.shape[0]
        P = oh * ow
        iy0 = np.zeros(T, np.intp)
        ix0 = np.zeros(T, np.intp)
        for pb in range(NB):
            n = min(T, P - pb * T)
            oy, ox0 = (pb * T) // ow, (pb * T) % ow
            if n == T and ox0 + T <= ow:  # the tile within one output row: strided runs of each input row
                for c in range(C):
                    for ky in range(kh):
                        row = xpad[c, oy * sh + ky * dh]
                        for kx in range(kw):
                            dst = xp[pb, (c * kh + ky) * kw + kx]
                            q = ox0 * sw + kx * dw
                            if sw == 1:  # _XS values (the last one unused: xpad has room), constant strides vectorize
                                for i in range(_XS):
                                    dst[i] = row[q + i]
                            elif sw == 2:
                                for i in range(_XS):
                                    dst[i] = row[q + 2 * i]
                            else:
                                for i in range(T):
                                    dst[i] = row[q + i * sw]
                continue
            for i in range(n):
                p = pb * T + i
                iy0[i] = (p // ow) * sh
                ix0[i] = (p % ow) * sw
            for c in range(C):
                plane = xpad[c]
                for ky in range(kh):
                    for kx in range(kw):
                        dst = xp[pb, (c * kh + ky) * kw + kx]
                        for i in range(n):
                            dst[i] = plane[iy0[i] + ky * dh, ix0[i] + kx * dw]
                        for i in range(n, T):
                            dst[i] = 0

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _pack_flat(x, xp):  # pragma: no cover - compiled
        # 1 x 1 stride 1 unpadded: output p is input p, xp[pb, c, i] = x[c, 7 pb + i] (zero past P); the tiles
        # outermost, so that the writes run contiguously (8 values a copy: the 8th is the next tile's first)
        C, P = x.shape
        NB = xp.shape[0]
        T = _TILE_P
        for pb in range(NB - 1):
            q = pb * T
            for c in range(C):
                dst, src = xp[pb, c], x[c]
                for i in range(_XS):
                    dst[i] = src[q + i]
        pb = NB - 1
        n = P - pb * T
        for c in range(C):
            dst, src = xp[pb, c], x[c]
            for i in range(n):
                dst[i] = src[pb * T + i]
            for i in range(n, T):
                dst[i] = 0

    @numba.njit(inline="always")
    def _store_block(acc, mb, b, clip, lo, hi, y, ybase=None):  # pragma: no cover - compiled
        # the accumulators of channel block mb (acc[p * 32 + j]: output p, channel 32 mb + j) + b, clipped, into y;
        # ``ybase`` (not empty): output i of tile pb goes to column ybase[pb] + i instead of 7 pb + i
        M, P = y.shape
        R, T = _TILE_M, _TILE_P
        has_b = b.shape[0] == M
        mapped = ybase is not None and ybase.shape[0] > 0
        for j in range(min(R, M - mb * R)):
            m = mb * R + j
            bias = b[m] if has_b else np.float32(0)
            row = y[m]
            if mapped:
                for pb in range(ybase.shape[0]):
                    q = ybase[pb]
                    for i in range(T):
                        v = acc[(pb * T + i) * R + j] + bias
                        if clip:
                            v = lo if v < lo else (hi if v > hi else v)
                        row[q + i] = v
                continue
            for p in range(P):
                v = acc[p * R + j] + bias
                if clip:
                    v = lo if v < lo else (hi if v > hi else v)  # NaN stays NaN
                row[p] = v

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _gemm_packed(wp, xp, b, clip, lo, hi, y):  # pragma: no cover - compiled
        # y (M, P) = wp (M/32 packed) @ xp (columns packed) + b, clipped: for each block of 32 channels, the K chunks
        # outermost (their weights stay in L1 for every position tile), the tiles (two segments of 7 positions; an
        # odd last one alone) carrying their accumulators in acc
        MB, K = wp.shape[0], wp.shape[1]
        NB = xp.shape[0]
        wf, xf = wp.reshape(-1), xp.reshape(-1)
        T, R = _TILE_P, _TILE_M
        acc = np.empty(NB * T * R, np.float32)
        for mb in range(MB):
            for k0 in range(0, K, _K_CHUNK):
                kn = min(_K_CHUNK, K - k0)
                wo = (mb * K + k0) * R
                for pb in range(0, NB, _SEGS):
                    xo = (pb * K + k0) * _XS
                    if _SEGS == 2 and pb + 1 < NB:
                        _tile_pair(wf, wo, xf, xo, xo + K * _XS, kn, acc, pb * T * R, k0 == 0)
                    else:
                        _tile(wf, wo, xf, xo, kn, acc, pb * T * R, k0 == 0)
            _store_block(acc, mb, b, clip, lo, hi, y)

    @numba.njit(cache=True, nogil=True, error_model="numpy")
    def _gemm_taps(wp, xf, offs, tbase, step, kc, ybase, b, clip, lo, hi, y, pfx=False):  # pragma: no cover
        # _gemm_packed with the inputs read in place: term k of position i of segment pb is
        # xf[tbase[pb] + offs[k] + step i] (step 1 or 2); the K loop in chunks of kc; the last chunk's tiles store
        # their sums (+ b, clipped) into y themselves: segment pb's outputs at columns ybase[pb] + i where ybase is
        # not empty, else 7 pb + i (up to P); ``pfx`` (stride 2): the pairs prefetch their inputs ahead
        MB, K = wp.shape[0], wp.shape[1]
        NB = tbase.shape[0]
        M, P = y.shape
        wf = wp.reshape(-1)
        T, R = _TILE_P, _TILE_M
        acc = np.empty(NB * T * R, np.float32)
        mapped = ybase.shape[0] > 0
        has_b = b.shape[0] == M
        lo32, hi32 = np.float32(lo), np.float32(hi)
        for mb in range(MB):
            nm = min(R, M - mb * R)
            yoff, boff = mb * R * P, mb * R
            for k0 in range(0, K, kc):
                kn = min(kc, K - k0)
                wo = (mb * K + k0) * R
                first, out = k0 == 0, k0 + kn >= K
                for pb in range(0, NB, _SEGS):
                    ao = pb * T * R
                    x0 = tbase[pb]
                    q0, n0 = (ybase[pb], T) if mapped else (pb * T, min(T, P - pb * T))
                    if _SEGS == 2 and pb + 1 < NB:
                        x1 = tbase[pb + 1]
                        q1, n1 = (ybase[pb + 1], T) if mapped else (q0 + T, min(T, P - q0 - T))
                    else:
                        x1, q1, n1 = x0, q0, 0
                    a0 = (wf, wo, xf, x0, x1, offs, k0, kn, acc, ao, first, out, y, yoff, P, nm)
                    a1 = (q0, n0, q1, n1, b, boff, has_b, clip, lo32, hi32)
                    # the first tile prefetches the next weights (alternating: 2-3% faster); the pair, or the odd
                    # last segment alone (AVX2: every segment alone)
                    if _SEGS == 2 and pb + 1 < NB:
                        if pb == 0:
                            if step == 1:
                                _taps1p(*a0, *a1)
                            elif pfx:
                                _taps2px(*a0, *a1)
                            else:
                                _taps2p(*a0, *a1)
                        elif step == 1:
                            _taps1np(*a0, *a1)
                        elif pfx:
                            _taps2npx(*a0, *a1)
                        else:
                            _taps2np(*a0, *a1)
                    elif pb == 0:
                        if step == 1:
                            _taps1(*a0, *a1)
                        elif pfx and _SEGS == 1:
                            _taps2x(*a0, *a1)
                        else:
                            _taps2(*a0, *a1)
                    elif step == 1:
                        _taps1n(*a0, *a1)
                    elif pfx and _SEGS == 1:
                        _taps2nx(*a0, *a1)
                    else:
                        _taps2n(*a0, *a1)


def _gemm_parts(gemm, wp, args, y2d, extra=()) -> None:
    """gemm(wp, *args, y) (_gemm_packed or _gemm_taps) in parts over blocks of output channels (2 from _SPLIT_FLOPS,
    a rule on the shape alone: every output sums the same products in the same order, whichever thread computes
    it), run by ops/_blas.py's helpers. ``args``: the inputs, then the bias (its last but 3), clip, lo and hi;
    ``extra``: gemm's arguments after y."""
    MB, K = wp.shape[0], wp.shape[1]
    M, P = y2d.shape
    # one part on one thread: parts run one after the other would each read all the inputs again (alternating, 1
    # thread: 3x3/2 64->128@28 0.836 -> 0.815 ms, 512@7 1.527 -> 1.504); the bits do not depend on the parts
    n = 2 if MB >= 2 and 2 * M * K * P >= _SPLIT_FLOPS and _blas.threads() > 1 else 1
    if n == 1:
        gemm(wp, *args, y2d, *extra)
        return
    cuts = [MB * i // n for i in range(n + 1)]
    b = args[-4]
    parts = []
    for c0, c1 in zip(cuts, cuts[1:]):
        m0, m1 = c0 * _TILE_M, min(M, c1 * _TILE_M)
        bp = b[m0:m1] if b.shape[0] else b
        parts.append(functools.partial(gemm, wp[c0:c1], *args[:-4], bp, *args[-3:], y2d[m0:m1], *extra))
    run_parts(parts)


def pack_weight(wmat: np.ndarray) -> np.ndarray:
    """wmat (M, K) float32 as conv2d_packed takes it: (ceil(M / _TILE_M), K, _TILE_M), channel blocks of _TILE_M
    (32 on AVX-512, 16 on AVX2) innermost (the channels past M zero)."""
    M, K = wmat.shape
    MB = -(-M // _TILE_M)
    wp = np.zeros((MB * _TILE_M, K), np.float32)
    wp[:M] = wmat
    return np.ascontiguousarray(wp.reshape(MB, _TILE_M, K).transpose(0, 2, 1))


#: read the inputs in place (:func:`_gemm_taps`) where every tile lies within one output row
_IN_PLACE = True
_NO_MAP = np.zeros((0,), np.intp)  # _gemm_taps's outputs in tile order
_NO_BIAS = np.zeros((0,), np.float32)
_F32 = np.dtype(np.float32)


@functools.lru_cache(maxsize=64)
def _taps_layout(C: int, kh: int, kw: int, s: int, oh: int, ow: int, Wp: int) -> tuple:
    """(offs, tbase) of the in-place path over the padded input with rows outermost, (Hp, C, Wp): where term
    k = (c, ky, kx) of output (0, 0) lies (output (oy, ox) adds oy s C Wp + ox s) and where each tile of 7 outputs
    of a row starts."""
    c, ky, kx = np.meshgrid(np.arange(C), np.arange(kh), np.arange(kw), indexing="ij")
    offs = ((ky * C + c) * Wp + kx).reshape(-1).astype(np.intp)
    p0 = np.arange(0, oh * ow, _TILE_P)
    tbase = ((p0 // ow) * (s * C * Wp) + (p0 % ow) * s).astype(np.intp)
    for a in (offs, tbase):
        a.flags.writeable = False  # shared by every call of the shape
    return offs, tbase


def pointwise_in_place(kernel, begin, spatial, strides, out) -> bool:
    """Whether conv2d_packed reads a 1 x 1 stride-2 convolution's input in place (NCHW, no copy): unpadded before,
    every output inside the input, rows of whole tiles (ow a multiple of 7). Alternating, 1 thread, against the
    copy into rows-outermost layout: 256@14 -> 512 0.162 -> 0.112 ms (ResNet's downsamples); at stride 1 against
    the flat path's packing: the same within noise (1024@14 -> 256, 512@7 -> 2048, 2048@7 -> 512), so it keeps
    that."""
    (H, W), (oh, ow), (sh, sw) = spatial, out, strides
    return (
        tuple(kernel) == (1, 1)
        and tuple(begin) == (0, 0)
        and sh == sw == 2
        and ow % _TILE_P == 0
        and (oh - 1) * sh < H
        and (ow - 1) * sw < W
    )


@functools.lru_cache(maxsize=64)
def _plane_layout(C: int, H: int, W: int, s: int, oh: int, ow: int) -> tuple:
    """(offs, tbase) of a 1 x 1 convolution read in place from x (C, H, W): term c of output (oy, ox) at
    c H W + s (oy W + ox); each tile of 7 outputs of a row starts at its first output's."""
    offs = np.minimum(np.arange(C + _PFX_AHEAD, dtype=np.intp), C - 1) * (H * W)  # past C: for the prefetch
    p0 = np.arange(0, oh * ow, _TILE_P)
    tbase = ((p0 // ow) * (s * W) + (p0 % ow) * s).astype(np.intp)
    for a in (offs, tbase):
        a.flags.writeable = False
    return offs, tbase


@functools.lru_cache(maxsize=256)
def _plan(shape, kernel, strides, dilations, begin, out, in_place) -> tuple:
    """(path, Hp, Wp, hh, ww) of conv2d_packed for a call's geometry, kept per geometry (a model repeats its
    shapes): "plane" (1 x 1 stride 2 read in place from x), "rows" (read in place from the padded copy with rows
    outermost, Hp x C x Wp, x's hh x ww first values copied), "flat" (1 x 1 stride 1: x packed as it is) or
    "gather" (the columns gathered into tiles from the padded Hp x Wp planes)."""
    _, _, H, W = shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    oh, ow = out
    flat = (kh, kw, sh, sw) == (1, 1, 1, 1) and begin == (0, 0) and (oh, ow) == (H, W)
    Hp = max(H + begin[0], (oh - 1) * sh + (kh - 1) * dh + 1)
    Wp = max(W + begin[1], (ow - 1) * sw + (kw - 1) * dw + 1)
    hh, ww = min(H, Hp - begin[0]), min(W, Wp - begin[1])
    rows = ow % _TILE_P == 0 and sh == sw and sh in (1, 2)
    if in_place and rows and pointwise_in_place(kernel, begin, (H, W), strides, out):
        path = "plane"
    elif in_place and not flat and rows and (dh, dw) == (1, 1):
        path = "rows"
    else:
        path = "flat" if flat else "gather"
    return path, Hp, Wp, hh, ww


def conv2d_packed(x, wp, M, kernel, strides, dilations, begin, out, b=None, clip=None) -> np.ndarray:
    """y (N, M, oh, ow) of the 2-D convolution (group 1) of x (N, C, H, W) float32 with the packed weights ``wp``
    (:func:`pack_weight` of W (M, C kh kw)), + b (M,) or None, clipped to ``clip``: per sample every product summed
    in registers over tiles of 7 positions, in the order of K (c, ky, kx), the weights read once from memory. The
    inputs: where the rows hold whole tiles (ow a multiple of 7, equal strides 1 or 2, undilated) read in place
    from the padded input with rows outermost (one copy, a table of tap offsets; 1 x 1 stride 2: from x itself),
    else gathered into tiles first (K contiguous). For small maps (the weights outweigh the columns). Reference: the
    im2col GEMM of conv.py."""
    return packed_call(x.shape, wp, M, kernel, strides, dilations, begin, out, b, clip)(x)


def packed_call(shape, wp, M, kernel, strides, dilations, begin, out, b=None, clip=None) -> Callable:
    """:func:`conv2d_packed` for inputs of ``shape``, its path, layouts, bias and clip arguments computed now:
    ``fn(x) -> y`` (a layer run again and again pays only for its copies and its kernel: ~3 us a call less)."""
    N, C, H, W = shape
    kernel, strides, begin, out = tuple(kernel), tuple(strides), tuple(begin), tuple(out)
    path, Hp, Wp, hh, ww = _plan(tuple(shape), kernel, strides, tuple(dilations), begin, out, _IN_PLACE)
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    oh, ow = out
    yshape, y2d = (N, M, oh, ow), (M, oh * ow)
    bb = _NO_BIAS if b is None else b
    on, lo, hi = _clip_args(clip, _F32)
    if path == "plane":
        offs, tbase = _plane_layout(C, H, W, sh, oh, ow)  # the input itself: no copy

        def plane(x: np.ndarray) -> np.ndarray:
            y = np.empty(yshape, np.float32)
            xc = np.ascontiguousarray(x, np.float32)
            for n in range(N):
                args = (xc[n].reshape(-1), offs, tbase, sh, _K_CHUNK, _NO_MAP, bb, on, lo, hi)
                # the inputs prefetched _PFX_AHEAD terms ahead: x's planes lie too far apart for the hardware's
                # stride prefetcher (alternating, 1 thread, in cache / caches flushed, against none: 128@28 -> 256
                # 0.142 -> 0.122 / 0.31 -> 0.25 ms, 64@56 -> 128 0.145 -> 0.139 / 0.37 -> 0.31, 256@14 -> 512 0.157 ->
                # 0.145 / 0.265 -> 0.256; 8 or 32 ahead the same; the next pair's inputs instead: less; the 3x3
                # layers read the rows-outermost copy just written, no gain, so they do not)
                _gemm_parts(_gemm_taps, wp, args, y[n].reshape(y2d), (True,))
            return y

        return plane
    if path == "rows":
        offs, tbase = _taps_layout(C, kh, kw, sh, oh, ow, Wp)
        pt, pl = begin

        def rows(x: np.ndarray) -> np.ndarray:
            y = np.empty(yshape, np.float32)
            # rows outermost: a row of tiles reads kh contiguous runs; only the padding zeroed (alternating, 1
            # thread, against np.zeros and the copy: 64@56 0.105 -> 0.066 ms, 128@28 0.054 -> 0.033)
            xr = np.empty((Hp, C, Wp), np.float32)
            xr[:pt], xr[pt + hh :], xr[pt : pt + hh, :, :pl], xr[pt : pt + hh, :, pl + ww :] = 0, 0, 0, 0
            inner = xr[pt : pt + hh, :, pl : pl + ww]
            for n in range(N):
                np.copyto(inner, x[n, :, :hh, :ww].transpose(1, 0, 2))
                args = (xr.reshape(-1), offs, tbase, sh, _K_CHUNK, _NO_MAP, bb, on, lo, hi)
                _gemm_parts(_gemm_taps, wp, args, y[n].reshape(y2d))
            return y

        return rows
    flat = path == "flat"
    K = C * kh * kw
    NB = -(-(oh * ow) // _TILE_P)

    def packed(x: np.ndarray) -> np.ndarray:
        y = np.empty(yshape, np.float32)
        # room for _pack_cols's 8th value at strides 1 and 2
        xpad = None if flat else np.zeros((C, Hp, Wp + 2), np.float32)
        xp = np.empty((NB, K, _XS), np.float32)
        for n in range(N):
            if flat:  # no padding, no gather: the input's own layout (measured: 1024@14 0.06 ms against 0.23)
                _pack_flat(np.ascontiguousarray(x[n], np.float32).reshape(C, H * W), xp)
            elif xpad is not None:
                xpad[:, begin[0] : begin[0] + H, begin[1] : begin[1] + W] = x[n, :, : Hp - begin[0], : Wp - begin[1]]
                _pack_cols(xpad, kh, kw, sh, sw, dh, dw, oh, ow, xp)
            _gemm_parts(_gemm_packed, wp, (xp, bb, on, lo, hi), y[n].reshape(y2d))
        return y

    return packed


def pack_winograd(U: np.ndarray) -> np.ndarray:
    """U (n^2, M, C) float32, each position's (M, C) packed as :func:`pack_weight` packs: (n^2, M / _TILE_M, C,
    _TILE_M)."""
    return np.stack([pack_weight(u) for u in U])


@functools.lru_cache(maxsize=64)
def _rows_layout(C: int, L: int, N: int, TH: int, TWp: int) -> tuple:
    """(offs, tbase, ybase) of V[s] (C, L) read in place by _gemm_taps (row c at c L) for N samples of TH rows of
    TWp tiles: where TWp - 1 is a multiple of 7, each row's real tiles in whole tiles of the kernel, the junk column
    skipped (ybase: where their products go, the same columns); else 7 consecutive columns a tile (ybase empty)."""
    offs = np.arange(C, dtype=np.intp) * L
    if (TWp - 1) % _TILE_P == 0:
        rows = (np.arange(N)[:, None] * TH + np.arange(TH)[None, :]).reshape(-1) * TWp
        tbase = (rows[:, None] + np.arange(0, TWp - 1, _TILE_P)[None, :]).reshape(-1).astype(np.intp)
        ybase = tbase
    else:
        tbase, ybase = np.arange(0, L, _TILE_P, dtype=np.intp), _NO_MAP
    for a in (offs, tbase):
        a.flags.writeable = False
    return offs, tbase, ybase


def winograd_products(Up: np.ndarray, V: np.ndarray, cols: int, M: int, rows=None, split=True) -> np.ndarray:
    """(n^2, M, cols): U[s] @ V[s, :, :cols] for every tile position s by the packed kernel, from Up (pack_winograd)
    and V (n^2, C, whole tiles of columns, zero past ``cols``), read in place. ``rows``: (N, TH, TWp) of the
    transforms' tile layout: a row's junk column (the last) then takes no products where TWp - 1 is a multiple of
    7 (14 x 14 maps by F(2,3): 7 tiles of products a row instead of 8; those columns of the result are garbage).
    OpenBLAS packs each U[s] from memory before its products; here the weights stream once. ``split``: False in a part
    of a layer split already (one part here)."""
    S, C, L7 = V.shape
    P = np.empty((S, M, cols), V.dtype)
    none = np.zeros((0,), V.dtype)
    z = np.float32(0)
    offs, tbase, ybase = _rows_layout(C, L7, *(rows or (1, 0, 0)))

    def part(s0: int, s1: int) -> None:
        for s in range(s0, s1):
            _gemm_taps(Up[s], V[s].reshape(-1), offs, tbase, 1, _K_CHUNK_WINO, ybase, none, False, z, z, P[s])

    # in 2 parts over the tile positions from _SPLIT_FLOPS (the same sums, whichever thread runs them)
    n = 2 if split and 2 * S * M * C * cols >= _SPLIT_FLOPS else 1
    run_parts([functools.partial(part, S * i // n, S * (i + 1) // n) for i in range(n)])
    return P
