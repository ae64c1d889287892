"""Geometry of the ncnn convolution, deconvolution, pooling and resampling layers (ncnn-operators.txt): params
read innermost first (w, h, d), explicit pads, ncnn's SAME_UPPER / SAME_LOWER rule (-233 / -234: total = extent +
(size - 1) // stride * stride - size, the odd one at the end / the beginning), negative pads as crops."""

from __future__ import annotations

import numpy as np

from ...errors import KernelError
from ...ops import shape_pad

_AXES = ("w", "h", "d")  # innermost first


def _spatial(p, stem: str, nd: int) -> tuple[int, ...]:
    """A per-axis param (kernel/dilation/stride) outermost first: (d, h, w)[-nd:]."""
    return tuple(int(getattr(p, f"{stem}_{a}")) for a in reversed(_AXES[:nd]))


def _pads(p, nd: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(begin, end) pads outermost first."""
    names = [("pad_left", "pad_right"), ("pad_top", "pad_bottom"), ("pad_front", "pad_behind")][:nd]
    begin = tuple(int(getattr(p, b)) for b, _ in reversed(names))
    end = tuple(int(getattr(p, e)) for _, e in reversed(names))
    return begin, end


def _pad_mode(begin, end, what: str) -> str:
    """'explicit' (some pad > 0), 'upper' (every pad -233), 'lower' (every pad -234) or 'none'."""
    allp = tuple(begin) + tuple(end)
    if any(v > 0 for v in allp):
        if any(v < 0 for v in allp):
            raise KernelError(f"{what}: pads {list(allp)} mix positive and negative values")
        return "explicit"
    if all(v == -233 for v in allp):
        return "upper"
    if all(v == -234 for v in allp):
        return "lower"
    return "none"


def _cdiv2(t: int) -> int:
    """t / 2 rounded toward zero (C integer division)."""
    return -((-t) // 2) if t < 0 else t // 2


def same_pads(totals, mode: str, depth_upper: bool = False):
    """ncnn's split of SAME totals (outermost first) into (begin, end); None when no total is positive
    (ncnn then leaves the blob alone). A negative total (kernel extent < stride) yields a negative pad: ncnn
    crops that many. ``depth_upper``: ncnn's 3D layers split the depth (axis 0) the SAME_UPPER way in
    SAME_LOWER mode too."""
    if not any(t > 0 for t in totals):
        return None
    begin, end = [], []
    for ax, tot in enumerate(totals):
        half = _cdiv2(tot)
        lo = half if mode == "upper" or (depth_upper and ax == 0) else tot - half
        begin.append(lo)
        end.append(tot - lo)
    return tuple(begin), tuple(end)


def crop_negative(x: np.ndarray, begin, end):
    """Apply negative pads to x (C, *sp) the way ncnn's border copy does; return (x, begin, end) with the
    pads >= 0. A negative end pad drops trailing elements; a negative begin pad drops leading ones, except
    along the rows (h axis of a 2D / 3D blob), where ncnn fills the rows from the start and so drops
    trailing ones. (Along w, ncnn's copy for rows of 12+ values also writes out of place; that is not
    reproduced: with a negative SAME total the dropped elements are never read, so only the shift matters.)"""
    if min(begin) >= 0 and min(end) >= 0:
        return x, tuple(begin), tuple(end)
    nd = x.ndim - 1
    h_axis = nd - 2 if nd >= 2 else None
    sl = [slice(None)]
    for ax, (b, e, n) in enumerate(zip(begin, end, x.shape[1:])):
        lead, trail = max(0, -b), max(0, -e)
        if ax == h_axis:
            lead, trail = 0, lead + trail
        sl.append(slice(lead, n - trail))
    return x[tuple(sl)], tuple(max(0, b) for b in begin), tuple(max(0, e) for e in end)


def _same_pads(mode: str, in_sp, kernel, strides, dilations):
    """ncnn's SAME padding of a convolution input (see :func:`same_pads`), outermost first."""
    totals = [d * (k - 1) + 1 + (i - 1) // s * s - i for i, k, s, d in zip(in_sp, kernel, strides, dilations)]
    return same_pads(totals, mode, depth_upper=len(in_sp) == 3)


def _check_rank(x: np.ndarray, nd: int, type_name: str) -> np.ndarray:
    want = nd + 1
    if x.ndim == want:
        return x
    if x.ndim == want - 1 and nd < 3:  # ncnn reads a 1d / 2d blob one rank short as a single channel
        return x[None]
    axes = ", ".join(("C", "D", "H", "W")[:1] + ("D", "H", "W")[3 - nd :])
    raise KernelError(f"{type_name} takes a {want}d blob ({axes}), got shape {x.shape}")


def _pad_const(x: np.ndarray, begin, end, value) -> np.ndarray:
    """x (C, *sp) padded on its spatial axes with a constant, through the shared Pad kernel."""
    pads = np.array([0, *begin, 0, *end], np.int64)
    if x.dtype == np.int8:
        v = np.int8(np.clip(np.trunc(value), -128, 127))
    else:
        v = np.asarray(value, dtype=x.dtype)
    return shape_pad.pad(x, pads, v, mode="constant")
