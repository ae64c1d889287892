"""Resampling layers (ncnn-operators.txt): Interp, GridSample, Fold, Unfold.

Interp's bilinear and bicubic modes run on the per-axis interpolation kernel Resize runs on
(``interpolate_axis``: edge-clamped taps, cubic a = -0.75: ncnn's formulas) with ncnn's source
coordinates, which the ONNX modes cannot express: half-pixel with the ratio in / out when the size was
given but 1 / scale when it came from a scale (the wheel's rule; both differ when in * scale is not an
integer), or align-corner. Its nearest mode is ncnn's own index rule (``min(trunc(x * ws), w - 1)`` in
float32, same choice of ``ws``), computed here and gathered (the Gather kernel). GridSample runs on the
shared GridSample kernel (its nearest mode, which rounds half up in float32, here), Fold on Col2Im;
Unfold (im2col) is a pad plus one strided copy per kernel tap.
"""

from __future__ import annotations

import functools

import numpy as np

from ...errors import KernelError
from ...limits import check_elements
from ...ops import conv_transpose, indexing, resize, shape_pad
from ...ops import grid_sample as sampling
from ...ops import shape as shapes
from .. import expr as _expr
from ..spec import P, Ref, layer
from .conv_geometry import crop_negative, same_pads

_grid_sample = sampling.grid_sample
_col2im = conv_transpose.col2im
_pad = shape_pad.pad
_expand = shapes.expand
_transpose = shapes.transpose

_F = np.float32


# ----------------------------------------------------------------------------------------- Interp
@functools.lru_cache(maxsize=64)
def _nearest_index(in_len: int, out_len: int, ws: np.float32) -> np.ndarray:
    """ncnn's nearest source index: min(trunc(float32(x) * ws), in_len - 1)."""
    with np.errstate(all="ignore"):
        f = np.arange(out_len, dtype=_F) * _F(ws)
    idx = np.trunc(np.nan_to_num(f, nan=0.0, posinf=in_len, neginf=0.0)).astype(np.int64)
    return np.clip(idx, 0, in_len - 1)


@layer(
    "Interp",
    params=[
        P(0, "resize_type", 0),
        P(1, "height_scale", 1.0),
        P(2, "width_scale", 1.0),
        P(3, "output_height", 0),
        P(4, "output_width", 0),
        P(5, "dynamic_target_size", 0),
        P(6, "align_corner", 0),
        P(9, "size_expr", ""),
    ],
    inputs=None,
    kernels=(shapes.expand, resize.interpolate_axis, indexing.gather),
)
def interp(p, w):
    """Resize the h and w of a 3d bottom (a 2d bottom: only w; a 1d bottom of n values: n channels of
    out_h x out_w filled with each value). Out size: ``output_width/height``, else trunc(in * scale);
    with ``dynamic_target_size`` the w and h of bottom 1; ``size_expr`` (w[, h]) overrides both.
    resize_type 1 nearest, 2 bilinear, 3 bicubic (a = -0.75); ``align_corner`` for 2 and 3."""
    rt = p.resize_type
    if not 0 <= rt <= 3:
        raise ValueError(f"Interp resize_type {rt} is not one of 0..3")
    ex = _expr.parse(p.size_expr) if p.size_expr else None
    if ex is not None:
        if not 1 <= ex.n_items <= 2:
            raise ValueError(f"Interp size_expr {p.size_expr!r} has {ex.n_items} items, expected 1 or 2")
    two = p.dynamic_target_size == 1 or (ex is not None and ex.n_blobs > 1)
    if not two and p.n_bottoms != 1:
        raise ValueError(f"Interp with these params takes 1 bottom (as ncnn), the layer has {p.n_bottoms}")
    if two and p.n_bottoms < 2:
        raise ValueError(
            "Interp with dynamic_target_size or a size_expr reading bottom 1 takes 2 bottoms, "
            f"the layer has {p.n_bottoms}"
        )
    ow_p, oh_p, wsc, hsc = p.output_width, p.output_height, _F(p.width_scale), _F(p.height_scale)
    use_sizes = ex is not None

    def out_size(x, ref):
        if two:
            rd = _expr.blob_dims(ref)
            ow, oh = rd["w"], rd["h"]
        else:
            if x.ndim == 1:
                w_, h_ = 1, 1
            else:
                d = _expr.blob_dims(x)
                w_, h_ = d["w"], d["h"]
            ow, oh = ow_p, oh_p
            if ow == 0 or oh == 0:
                ow, oh = int(_F(w_) * wsc), int(_F(h_) * hsc)
        if ex is not None:
            v = ex.eval([x] + ([ref] if ref is not None else []))
            ow = v[0]
            oh = v[1] if len(v) == 2 else _expr.blob_dims(x)["h"]
        return ow, oh

    def ws_of(in_len, out_len, set_explicitly, scale):
        if set_explicitly or use_sizes or two:
            return _F(in_len) / _F(out_len)
        with np.errstate(all="ignore"):
            return _F(1) / scale

    @functools.lru_cache(maxsize=16)
    def coords(in_len, out_len, explicit, scale):
        """ncnn's source coordinate along one axis (align_corner: x (in - 1) / (out - 1); else
        (x + 0.5) s - 0.5 with s = in / out when the size was given, 1 / scale when it came from the
        scale)."""
        xo = np.arange(out_len, dtype=np.float64)
        if p.align_corner:
            return xo * ((in_len - 1) / (out_len - 1)) if out_len > 1 else np.zeros(out_len)
        s = in_len / out_len if (explicit or use_sizes or two) else 1.0 / float(scale)
        return (xo + 0.5) * s - 0.5

    mode = "linear" if rt == 2 else "cubic"

    def along(x, axis, in_len, out_len, explicit, scale):
        """Resample one axis on the shared interpolation kernel."""
        xo = coords(in_len, out_len, explicit, scale)
        return resize.interpolate_axis(x, xo, axis=axis, mode=mode, cubic_coeff_a=-0.75)

    def run(x, ref=None):
        if x.ndim not in (1, 2, 3):
            raise KernelError(f"Interp: bottom of shape {x.shape}, expected 1d, 2d or 3d")
        ow, oh = out_size(x, ref if two else None)
        if x.ndim == 1:
            if ow <= 0 or oh <= 0:
                raise KernelError(f"Interp: output size {oh} x {ow} is not positive")
            check_elements((x.shape[0], oh, ow), "Interp output")
            return _expand(x.reshape(-1, 1, 1), np.array([x.shape[0], oh, ow], np.int64))
        if x.ndim == 2:
            h, w_ = x.shape
            if ow == w_:
                return x
            if ow <= 0:
                raise KernelError(f"Interp: output width {ow} is not positive")
            check_elements((h, ow), "Interp output")
            if rt == 1:
                idx = _nearest_index(w_, ow, ws_of(w_, ow, ow_p != 0, wsc))
                return indexing.gather(x, idx, axis=1)
            if rt == 0:
                raise KernelError("Interp: resize_type 0 does not resize")
            return np.ascontiguousarray(along(x, 1, w_, ow, ow_p != 0, wsc))
        c, h, w_ = x.shape
        if ow == w_ and oh == h:
            return x
        if ow <= 0 or oh <= 0:
            raise KernelError(f"Interp: output size {oh} x {ow} is not positive")
        check_elements((c, oh, ow), "Interp output")
        if rt == 1:
            iy = _nearest_index(h, oh, ws_of(h, oh, oh_p != 0, hsc))
            ix = _nearest_index(w_, ow, ws_of(w_, ow, ow_p != 0, wsc))
            return indexing.gather(indexing.gather(x, iy, axis=1), ix, axis=2)
        if rt == 0:
            raise KernelError("Interp: resize_type 0 does not resize")
        y = along(x, 1, h, oh, oh_p != 0, hsc)
        return np.ascontiguousarray(along(y, 2, w_, ow, ow_p != 0, wsc))

    return run


# ------------------------------------------------------------------------------------- GridSample
#: ncnn's enum (gridsample.h and the wheel): 1 bilinear, 2 nearest, 3 bicubic; the operator table in
#: ncnn-operators.txt lists 1 and 2 the other way round.
_SAMPLE = {1: "linear", 2: "nearest", 3: "cubic"}
_PADDING = {1: "zeros", 2: "border", 3: "reflection"}


def _nearest_sample(x: np.ndarray, g: np.ndarray, pad: str, ac: int) -> np.ndarray:
    """ncnn's nearest GridSample, which differs from the shared kernel's (ONNX/PyTorch) rounding: the
    float32 coordinate is unnormalized, border-clamped or reflected (once) and rounded half up."""
    sp = x.shape[1:]
    k = len(sp)
    one, half, two = _F(1), _F(0.5), _F(2)
    flat = np.zeros(g.shape[:-1], np.int64)
    valid = np.ones(g.shape[:-1], bool)
    for d in range(k):
        L = sp[d]
        v = g[..., k - 1 - d]
        c = (v + one) / two * _F(L - 1) if ac else ((v + one) * _F(L) - one) / two
        if pad == "border":
            c = np.clip(c, _F(0), _F(L - 1))
        elif pad == "reflection":
            if ac:
                hi = _F(L - 1)
                c = hi - np.abs(np.abs(c) - hi)
            else:
                hi = _F(L)
                c = np.abs(c + half)
                c = np.clip(hi - np.abs(c - hi) - half, _F(0), _F(L - 1))
        with np.errstate(invalid="ignore"):
            i = np.floor(c + half)
        ok = (i >= 0) & (i <= L - 1)
        valid &= ok
        flat = flat * L + np.where(ok, i, 0).astype(np.int64)
    vals = np.take(x.reshape(x.shape[0], -1), flat.ravel(), axis=1).reshape((x.shape[0],) + flat.shape)
    return np.where(valid[None], vals, np.zeros((), x.dtype))


@layer(
    "GridSample",
    params=[P(0, "sample_type", 1), P(1, "padding_mode", 1), P(2, "align_corner", 0), P(3, "permute_fusion", 0)],
    inputs=2,
    kernels=(sampling.grid_sample, shapes.transpose),
)
def grid_sample(p, w):
    """y[c, o] = sample(x[c], grid[o]) for a 3d bottom (c, h, w) with grid (oh, ow, 2) — or (2, oh, ow)
    with ``permute_fusion`` — and a 4d bottom (c, d, h, w) with grid (od, oh, ow, 3) / (3, od, oh, ow);
    grid[..., 0] is x (width) in [-1, 1]. sample_type 1 bilinear, 2 nearest, 3 bicubic (3d only);
    padding_mode 1 zeros, 2 border, 3 reflection."""
    if p.sample_type not in _SAMPLE:
        raise ValueError(f"GridSample sample_type {p.sample_type} is not one of 1, 2, 3")
    if p.padding_mode not in _PADDING:
        raise ValueError(f"GridSample padding_mode {p.padding_mode} is not one of 1, 2, 3")
    mode, pad, ac, pf = _SAMPLE[p.sample_type], _PADDING[p.padding_mode], int(bool(p.align_corner)), p.permute_fusion

    def run(x, grid):
        r = x.ndim
        if r not in (3, 4) or grid.ndim != r:
            raise KernelError(f"GridSample: bottom {x.shape} and grid {grid.shape} must both be 3d or both 4d")
        if r == 4 and mode == "cubic":
            raise KernelError("GridSample: bicubic sampling of a 4d bottom is not supported (as in ncnn)")
        k = r - 1
        g = _transpose(grid, perm=list(range(1, r)) + [0]) if pf else grid
        if g.shape[-1] != k:
            raise KernelError(f"GridSample: grid {grid.shape} does not hold {k} coordinates per point")
        g = np.ascontiguousarray(g, np.float32)
        if mode == "nearest":
            return _nearest_sample(x, g, pad, ac)
        return _grid_sample(x[None], g[None], align_corners=ac, mode=mode, padding_mode=pad)[0]

    return run


# ---------------------------------------------------------------------------------- Fold / Unfold
_WINDOW = [
    P(0, "num_output", 0),
    P(1, "kernel_w", 0),
    P(11, "kernel_h", Ref("kernel_w")),
    P(2, "dilation_w", 1),
    P(12, "dilation_h", Ref("dilation_w")),
    P(3, "stride_w", 1),
    P(13, "stride_h", Ref("stride_w")),
    P(4, "pad_left", 0),
    P(15, "pad_right", Ref("pad_left")),
    P(14, "pad_top", Ref("pad_left")),
    P(16, "pad_bottom", Ref("pad_top")),
]


def _check_window(p, what):
    for name in ("kernel_w", "kernel_h", "dilation_w", "dilation_h", "stride_w", "stride_h"):
        if getattr(p, name) < 1:
            raise ValueError(f"{what} {name} {getattr(p, name)} must be >= 1")


@layer(
    "Fold",
    params=_WINDOW + [P(20, "output_w", 0), P(21, "output_h", Ref("output_w"))],
    kernels=(conv_transpose.col2im,),
)
def fold(p, w):
    """col2im: a 2d bottom (c * kh * kw, L) of sliding-window columns summed back into a 3d
    (c, output_h, output_w) image (overlaps add), windows placed with stride/dilation/pads."""
    _check_window(p, "Fold")
    pads = [p.pad_top, p.pad_left, p.pad_bottom, p.pad_right]
    if any(v < 0 for v in pads):
        raise ValueError(f"Fold pads {pads} must be >= 0")
    if p.output_w < 1 or p.output_h < 1:
        raise ValueError(f"Fold output_w/output_h ({p.output_w}, {p.output_h}) must be >= 1")
    maxk = p.kernel_w * p.kernel_h
    kw = dict(dilations=[p.dilation_h, p.dilation_w], pads=pads, strides=[p.stride_h, p.stride_w])
    img, blk = np.array([p.output_h, p.output_w], np.int64), np.array([p.kernel_h, p.kernel_w], np.int64)

    def run(x):
        if x.ndim != 2:
            raise KernelError(f"Fold: bottom of shape {x.shape}, expected 2d (c * kernel, L)")
        c = x.shape[0] // maxk
        if c == 0:
            raise KernelError(f"Fold: {x.shape[0]} rows, fewer than kernel_w * kernel_h = {maxk}")
        return _col2im(x[None, : c * maxk], img, blk, **kw)[0]

    return run


@layer("Unfold", params=_WINDOW + [P(18, "pad_value", 0.0)], kernels=(shape_pad.pad,))
def unfold(p, w):
    """im2col: a 3d bottom (c, h, w), padded with ``pad_value`` (pads -233 / -234: SAME_UPPER /
    SAME_LOWER), gives a 2d (c * kh * kw, oh * ow): row (c, u, v) holds the tap (u, v) of every window."""
    _check_window(p, "Unfold")
    kh, kw_, dh, dw, sh, sw = p.kernel_h, p.kernel_w, p.dilation_h, p.dilation_w, p.stride_h, p.stride_w
    ekh, ekw = dh * (kh - 1) + 1, dw * (kw_ - 1) + 1
    pads4 = (p.pad_left, p.pad_right, p.pad_top, p.pad_bottom)
    same = None
    if all(v == -233 for v in pads4):
        same = "upper"
    elif all(v == -234 for v in pads4):
        same = "lower"
    elif any(v < 0 for v in pads4):
        raise ValueError(f"Unfold pads {pads4} must be >= 0, or all -233 / -234")
    pv = _F(p.pad_value)

    def run(x):
        if x.ndim != 3:
            raise KernelError(f"Unfold: bottom of shape {x.shape}, expected 3d (c, h, w)")
        c, h, w_ = x.shape
        if same is None:
            t, b, l, r = p.pad_top, p.pad_bottom, p.pad_left, p.pad_right
        else:  # ncnn's SAME split (conv.same_pads); a negative total on one axis crops it (copy_make_border)
            totals = [ekh + (h - 1) // sh * sh - h, ekw + (w_ - 1) // sw * sw - w_]
            be = same_pads(totals, same)
            t = b = l = r = 0
            if be is not None:
                x, (t, l), (b, r) = crop_negative(x, *be)
        if t or b or l or r:
            x = _pad(x, np.array([0, t, l, 0, b, r], np.int64), np.asarray(pv, x.dtype))
        H, W = x.shape[1:]
        oh, ow = (H - ekh) // sh + 1, (W - ekw) // sw + 1
        if oh <= 0 or ow <= 0:
            raise KernelError(f"Unfold: kernel extent {ekh} x {ekw} is larger than the padded input {H} x {W}")
        check_elements((c * kh * kw_, oh * ow), "Unfold output")
        out = np.empty((c, kh, kw_, oh, ow), x.dtype)
        for u in range(kh):
            for v in range(kw_):
                out[:, u, v] = x[:, u * dh : u * dh + (oh - 1) * sh + 1 : sh, v * dw : v * dw + (ow - 1) * sw + 1 : sw]
        return out.reshape(c * kh * kw_, oh * ow)

    return run
