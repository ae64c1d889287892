"""Spectral ncnn layers -> ONNX: Spectrogram and InverseSpectrogram as constant frame indices, products with
DFT matrices, and (inverse) an overlap-add by ScatterND with reduction "add".

The window is the front end's (stdops/ncnn/layers/spectral.py: ncnn's hann / hamming constants, centred
in n_fft), and so is the overlap-added squared window the inverse divides by.
"""

from __future__ import annotations

import math

import numpy as np

from ...ncnn.layers.spectral import _hop, _window
from .base import F32, LayerCtx, emits


def _dft_matrices(n: int, bins: int, inverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of 2 pi k t / n as (n, bins) (forward: rows t, columns k) in float32 via float64."""
    t = np.arange(n, dtype=np.float64)[:, None]
    k = np.arange(bins, dtype=np.float64)[None, :]
    ang = 2 * math.pi * ((t * k) % n) / n
    c, s = np.cos(ang), np.sin(ang)
    if inverse:
        c, s = c / n, s / n
    return c.astype(F32), s.astype(F32)


@emits("Spectrogram")
def spectrogram(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    n, hop = int(p.n_fft), _hop(p)
    win = _window(n, p.winlen, p.window_type)
    x = ctx.x()  # (1, length)
    length = ctx.in_shapes[0][0]
    if p.center:
        mode = ("constant", "edge", "reflect")[p.pad_type]
        x = g.op("Pad", [x, g.ints([0, n // 2, 0, n // 2], "pads")], mode=mode)
        length += 2 * (n // 2)
    frames = (length - n) // hop + 1
    idx = np.arange(frames)[:, None] * hop + np.arange(n)[None, :]
    fr = g.op("Gather", [x, g.const(idx.astype(np.int64), stem="frames")], axis=1)  # (1, frames, n)
    fr = g.op("Mul", [fr, g.const(win, stem="window")])
    bins = n // 2 + 1 if p.onesided else n
    c, s = _dft_matrices(n, bins, False)
    re = g.op("MatMul", [fr, g.const(c, stem="dft_cos")])
    im = g.op("Neg", [g.op("MatMul", [fr, g.const(s, stem="dft_sin")])])
    if p.normalized:
        scale = F32(1.0 / math.sqrt(n)) if p.normalized == 1 else F32(1) / np.sqrt((win * win).sum(dtype=F32))
        re, im = g.op("Mul", [re, g.scalar(scale)]), g.op("Mul", [im, g.scalar(scale)])
    re = g.op("Transpose", [re], perm=[0, 2, 1])  # (1, bins, frames)
    im = g.op("Transpose", [im], perm=[0, 2, 1])
    if p.power == 0:
        axes = g.ints([-1], "axes")
        ctx.put(0, g.op("Concat", [g.op("Unsqueeze", [re, axes]), g.op("Unsqueeze", [im, axes])], axis=-1))
        return
    sq = g.op("Add", [g.op("Mul", [re, re]), g.op("Mul", [im, im])])
    ctx.put(0, g.op("Sqrt", [sq]) if p.power == 1 else sq)


@emits("InverseSpectrogram")
def inverse_spectrogram(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    n, hop = int(p.n_fft), _hop(p)
    win = _window(n, p.winlen, p.window_type)
    freqs, frames, _ = ctx.in_shapes[0]
    spec = g.op("Transpose", [ctx.raw()], perm=[1, 0, 2])  # (frames, freqs, 2)
    if freqs == n // 2 + 1 and freqs != n:
        k = np.arange(n // 2 + 1, n)
        mirror = g.op("Gather", [spec, g.const((n - k).astype(np.int64), stem="mirror")], axis=1)
        mirror = g.op("Mul", [mirror, g.const(np.array([1, -1], F32), stem="conj")])
        spec = g.op("Concat", [spec, mirror], axis=1)  # (frames, n, 2)
    if p.normalized:
        scale = F32(math.sqrt(n)) if p.normalized == 1 else np.sqrt((win * win).sum(dtype=F32))
        spec = g.op("Mul", [spec, g.scalar(scale)])
    re = g.reshape(g.slice(spec, [0], [1], [2]), (frames, n))
    im = g.reshape(g.slice(spec, [1], [2], [2]), (frames, n))
    c, s = _dft_matrices(n, n, True)
    C, S = g.const(c, stem="idft_cos"), g.const(s, stem="idft_sin")
    tr = g.op("Sub", [g.op("MatMul", [re, C]), g.op("MatMul", [im, S])])
    ti = g.op("Add", [g.op("MatMul", [re, S]), g.op("MatMul", [im, C])])
    wconst = g.const(win.reshape(1, n), stem="window")
    tr, ti = g.op("Mul", [tr, wconst]), g.op("Mul", [ti, wconst])
    axes = g.ints([-1], "axes")
    frames_t = g.op("Concat", [g.op("Unsqueeze", [tr, axes]), g.op("Unsqueeze", [ti, axes])], axis=-1)  # (frames, n, 2)
    outsize = (frames - 1) * hop + (n % 2 if p.center else n)
    idx = (np.arange(frames)[:, None] * hop + np.arange(n)[None, :] - (n // 2 if p.center else 0)).ravel()
    ok = (idx >= 0) & (idx < outsize)
    updates = g.op(
        "Gather", [g.reshape(frames_t, (-1, 2)), g.const(np.nonzero(ok)[0].astype(np.int64), stem="kept")], axis=0
    )
    acc = g.op(
        "ScatterND",
        [
            g.const(np.zeros((outsize, 2), F32), stem="zeros"),
            g.const(idx[ok].reshape(-1, 1).astype(np.int64), stem="ola"),
            updates,
        ],
        reduction="add",
    )
    wss = np.zeros(outsize, F32)
    np.add.at(wss, idx[ok], np.broadcast_to(win * win, (frames, n)).ravel()[ok])
    acc = g.op("Div", [acc, g.const(np.where(wss != 0, wss, F32(1)).reshape(-1, 1), stem="window_sum")])
    if p.returns == 0:
        ctx.put(0, acc, raw=True)
        return
    ctx.put(0, g.reshape(g.slice(acc, [p.returns - 1], [p.returns], [1]), (1, outsize)))
