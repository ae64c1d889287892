"""Checks the compiled Winograd F(4x4, 3x3) kernels share (tests/ops/test_fast_winoblock.py, test_fast_winochan.py): the
float64 direct sum, a NaN staying in the tile that reads it, and conv.py's dispatch taking a kernel's shapes and
agreeing with the paths it replaces."""

from __future__ import annotations

import numpy as np

from stdops.ops.conv import conv_forward, prepare_conv_weight
from stdops.ops.winograd import TILES


def direct(x, w, b, begin, out):
    """The 3x3 convolution of x (N, C, H, W) by w (M, C, 3, 3) in float64, padded by ``begin`` before each axis and
    with zeros past the input."""
    N, C, H, W = x.shape
    oh, ow = out
    xp = np.zeros((N, C, oh + 2 + begin[0], ow + 2 + begin[1]))
    hh, ww = min(H, oh + 2 - begin[0]), min(W, ow + 2 - begin[1])
    xp[:, :, begin[0] : begin[0] + hh, begin[1] : begin[1] + ww] = x[:, :, :hh, :ww]
    y = np.zeros((N, w.shape[0], oh, ow))
    for ky in range(3):
        for kx in range(3):
            y += np.einsum("mc,nchw->nmhw", w[:, :, ky, kx], xp[:, :, ky : ky + oh, kx : kx + ow])
    return y if b is None else y + b[None, :, None, None]


def check_nan_stays_in_its_tile(rng, pack, kernel, C: int):
    """A NaN input makes NaN the outputs of the one tile reading it (the clip keeps NaN), nothing far from it;
    ``kernel(x, pack(U), M, b, begin, out, clip)``."""
    x = rng.standard_normal((1, C, 20, 20)).astype(np.float32)
    x[0, 3, 5, 7] = np.nan
    w = rng.standard_normal((C, C, 3, 3)).astype(np.float32)
    y = kernel(x, pack(TILES[4].transform_weight(w, np.float32)), C, None, (1, 1), (20, 20), (0.0, 6.0))
    assert np.isnan(y[0, :, 4:8, 6:10]).all()
    assert not np.isnan(y[0, :, 12:, 12:]).any()


def check_conv_hook(monkeypatch, rng, module, xs, M, pads, clip, others=()):
    """conv.py's dispatch takes ``module``'s path for this shape (its ``conv`` called once), and with the path off
    (``module.USE`` and the ``others``' False) the paths it replaces agree within float32 rounding of the bound."""
    calls = []
    f = module.conv
    monkeypatch.setattr(module, "conv", lambda *a, **k: calls.append(1) or f(*a, **k))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal((M, xs[1], 3, 3)).astype(np.float32)
    b = rng.standard_normal(M).astype(np.float32)
    y = conv_forward(x, prepare_conv_weight(w), b, pads=pads, clip=clip)
    assert calls == [1]
    for m in (module, *others):
        monkeypatch.setattr(m, "USE", False)
    y_ref = conv_forward(x, prepare_conv_weight(w), b, pads=pads, clip=clip)
    assert calls == [1]
    bound = conv_forward(np.abs(x), prepare_conv_weight(np.abs(w)), np.abs(b), pads=pads)
    assert np.all(np.abs(y - y_ref) <= 1e-5 * bound + 1e-30)
