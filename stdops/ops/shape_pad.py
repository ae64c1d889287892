"""Padding and block-layout kernels of the shape family: Pad, CenterCropPad, DepthToSpace,
SpaceToDepth."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from ._registry import op
from .axes import int_list, norm_axes

__all__ = ["pad", "center_crop_pad", "depth_to_space", "space_to_depth"]

_PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _zero(dtype: np.dtype):
    """The padding value a dtype defaults to: 0, False, or '' for strings."""
    if dtype == np.dtype(object):
        return ""
    return np.zeros((), dtype=dtype)


def _fill_value(constant_value, dtype: np.dtype):
    if constant_value is None:
        return _zero(dtype)
    v = np.asarray(constant_value)
    if v.size == 0:  # an empty tensor standing for "not given"
        return _zero(dtype)
    if v.size != 1:
        raise KernelError(f"constant_value must be a scalar, got shape {v.shape}")
    v = v.reshape(-1)[0]
    if dtype == np.dtype(object):
        return v.decode("utf-8") if isinstance(v, bytes) else v
    return np.asarray(v).astype(dtype)


@op("onnx:Pad-11")
def pad(data, pads, constant_value=None, axes=None, /, *, mode="constant"):
    """y = data padded by pads[i] before and pads[i + n] after each of the n ``axes`` (default all);
    negative pads crop. Modes: constant (``constant_value``, default 0 / False / ''), reflect
    (mirror without repeating the edge), edge (repeat the edge), wrap (periodic).

    Same dtype as ``data``; output dim = d + begin + end.
    """
    x = np.asarray(data)
    if mode not in _PAD_MODES:
        raise KernelError(f"unknown pad mode {mode!r} (expected one of {', '.join(_PAD_MODES)})")
    p = int_list(pads, "pads")
    r = x.ndim
    ax = list(range(r)) if axes is None else norm_axes(axes, r)
    if len(p) != 2 * len(ax):
        raise KernelError(f"pads has {len(p)} values; expected 2 * {len(ax)} (one begin/end pair per axis)")
    begin, end = [0] * r, [0] * r
    for i, a in enumerate(ax):
        begin[a], end[a] = p[i], p[i + len(ax)]
    out_shape = [d + b + e for d, b, e in zip(x.shape, begin, end)]
    if any(d < 0 for d in out_shape):
        raise KernelError(f"pads {p} crop more than the shape {x.shape} holds")
    check_elements(out_shape, "Pad output")
    # negative pads crop first
    if any(b < 0 or e < 0 for b, e in zip(begin, end)):
        x = x[tuple(slice(max(-b, 0), d - max(-e, 0)) for d, b, e in zip(x.shape, begin, end))]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if not any(b or e for b, e in widths):
        return x.copy()
    if mode == "constant":
        out = np.empty(out_shape, dtype=x.dtype)
        out[...] = _fill_value(constant_value, x.dtype)
        out[tuple(slice(b, b + d) for (b, _), d in zip(widths, x.shape))] = x
        return out
    for a, ((b, e), d) in enumerate(zip(widths, x.shape)):
        if (b or e) and d == 0:
            raise KernelError(f"cannot pad an empty axis {a} in {mode} mode")
        if mode == "reflect" and (b or e) and d < 2:
            raise KernelError(f"reflect padding needs at least 2 elements on axis {a}, got {d}")
    return np.pad(x, widths, mode=mode)


@op("onnx:CenterCropPad-18")
def center_crop_pad(input_data, shape, /, *, axes=None):
    """y = input_data centre-cropped or zero-padded to ``shape`` on ``axes`` (default all).

    A crop starts at floor((d - t) / 2); a pad puts floor((t - d) / 2) before and the rest after.
    Same dtype as the input.
    """
    x = np.asarray(input_data)
    target = int_list(shape, "shape")
    ax = list(range(x.ndim)) if axes is None else norm_axes(axes, x.ndim)
    if len(target) != len(ax):
        raise KernelError(f"shape {target} must have one entry per axis {ax}")
    if any(t < 0 for t in target):
        raise KernelError(f"shape {target} has negative dimensions")
    out_shape = list(x.shape)
    src = [slice(None)] * x.ndim
    dst = [slice(None)] * x.ndim
    for a, t in zip(ax, target):
        d = x.shape[a]
        out_shape[a] = t
        if d >= t:
            lo = (d - t) // 2
            src[a] = slice(lo, lo + t)
        else:
            lo = (t - d) // 2
            dst[a] = slice(lo, lo + d)
    check_elements(out_shape, "CenterCropPad output")
    out = np.empty(out_shape, dtype=x.dtype)
    out[...] = _zero(x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    return out


def _check_blocks(x: np.ndarray, blocksize, mode: str, what: str) -> int:
    if x.ndim != 4:
        raise KernelError(f"{what} needs a 4-D (N, C, H, W) input, got shape {x.shape}")
    bs = int(blocksize)
    if bs < 1:
        raise KernelError(f"blocksize must be >= 1, got {bs}")
    if mode not in ("DCR", "CRD"):
        raise KernelError(f"mode must be 'DCR' or 'CRD', got {mode!r}")
    return bs


@op("onnx:DepthToSpace-1")
def depth_to_space(input, /, *, blocksize, mode="DCR"):
    """y[n, c, h*bs + i, w*bs + j] = x[n, (i*bs + j)*C' + c, h, w] (DCR) or
    x[n, c*bs*bs + i*bs + j, h, w] (CRD), C' = C / bs^2.

    Input (N, C, H, W) with C divisible by bs^2; output (N, C/bs^2, H*bs, W*bs), same dtype.
    """
    x = np.asarray(input)
    bs = _check_blocks(x, blocksize, mode, "DepthToSpace")
    n, c, h, w = x.shape
    if c % (bs * bs):
        raise KernelError(f"channels {c} are not divisible by blocksize^2 = {bs * bs}")
    cc = c // (bs * bs)
    if mode == "DCR":
        t = x.reshape(n, bs, bs, cc, h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, cc, bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, cc, h * bs, w * bs)


@op("onnx:SpaceToDepth-1")
def space_to_depth(input, /, *, blocksize, mode="DCR"):
    """y[n, (i*bs + j)*C + c, h, w] = x[n, c, h*bs + i, w*bs + j] (DCR) or
    y[n, c*bs*bs + i*bs + j, h, w] = the same element (CRD): the inverse of DepthToSpace.

    Input (N, C, H, W) with H, W divisible by bs; output (N, C*bs^2, H/bs, W/bs), same dtype.
    """
    x = np.asarray(input)
    bs = _check_blocks(x, blocksize, mode, "SpaceToDepth")
    n, c, h, w = x.shape
    if h % bs or w % bs:
        raise KernelError(f"spatial size {h}x{w} is not divisible by blocksize {bs}")
    t = x.reshape(n, c, h // bs, bs, w // bs, bs)
    t = t.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(n, c * bs * bs, h // bs, w // bs)
