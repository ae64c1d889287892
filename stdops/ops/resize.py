"""Resampling kernels: Resize (nearest / linear / cubic over any axes), with GridSample and
AffineGrid in :mod:`stdops.ops.grid_sample`.

Resize is separable: every resized axis gets one small interpolation matrix ``W`` (out x in) and
the data is contracted with it (one tensordot/matmul per axis; exact and BLAS-fast). Nearest mode
gathers with an index vector per axis instead (exact for every dtype). Coordinates are computed in
float64 from the float32 ``scales`` values, as the ONNX spec formulas read.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from ._registry import op
from .dtypes import compute_dtype

_COORD_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
    "tf_half_pixel_for_nn",
)
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _opt(a):
    """An optional input: None for an absent or empty tensor."""
    if a is None:
        return None
    a = np.asarray(a)
    return None if a.size == 0 else a


def source_coords(
    mode: str,
    out_len: int,
    in_len: int,
    scale: float,
    length_resized: float,
    roi_start: float = 0.0,
    roi_end: float = 1.0,
    exact_ratio: bool = False,
) -> np.ndarray:
    """x_original (float64, shape (out_len,)) for every output index along one axis.

    ``length_resized`` is ``in_len * scale`` (fractional when it comes from a scale factor).
    With ``exact_ratio`` (scale = out_len / in_len, from ``sizes``) ``v / scale`` is computed as
    ``v * in_len / out_len`` so that exact half-way points stay exact.
    """
    y = np.arange(out_len, dtype=np.float64)

    def unscale(v):
        return v * in_len / out_len if exact_ratio else v / scale

    if mode == "half_pixel":
        return unscale(y + 0.5) - 0.5
    if mode == "half_pixel_symmetric":
        adjustment = out_len / length_resized
        offset = in_len / 2.0 * (1.0 - adjustment)
        return offset + unscale(y + 0.5) - 0.5
    if mode == "pytorch_half_pixel":
        if out_len > 1:
            return unscale(y + 0.5) - 0.5
        return np.zeros(out_len)
    if mode == "align_corners":
        if length_resized == 1:
            return np.zeros(out_len)
        return y * (in_len - 1) / (length_resized - 1)
    if mode == "asymmetric":
        return unscale(y)
    if mode == "tf_half_pixel_for_nn":  # Resize-11 only
        return unscale(y + 0.5)
    if mode == "tf_crop_and_resize":
        if length_resized > 1:
            x = y * (roi_end - roi_start) * (in_len - 1) / (length_resized - 1)
        else:
            x = np.full(out_len, (roi_end - roi_start) * (in_len - 1) / 2.0)
        return x + roi_start * (in_len - 1)
    raise KernelError(
        f"Resize: unknown coordinate_transformation_mode {mode!r} (expected one of {', '.join(_COORD_MODES[:-1])})"
    )


def nearest_index(x: np.ndarray, in_len: int, nearest_mode: str) -> np.ndarray:
    """The input index nearest to each coordinate ``x``, clamped to [0, in_len - 1]."""
    if nearest_mode == "round_prefer_floor":
        i = np.ceil(x - 0.5)
    elif nearest_mode == "round_prefer_ceil":
        i = np.floor(x + 0.5)
    elif nearest_mode == "floor":
        i = np.floor(x)
    elif nearest_mode == "ceil":
        i = np.ceil(x)
    else:
        raise KernelError(
            f"Resize: unknown nearest_mode {nearest_mode!r} (expected one of {', '.join(_NEAREST_MODES)})"
        )
    return np.clip(i, 0, in_len - 1).astype(np.intp)


def _cubic_kernel(d: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with coefficient ``a`` (zero for |d| >= 2)."""
    d = np.abs(d)
    d2, d3 = d * d, d * d * d
    near = (a + 2) * d3 - (a + 3) * d2 + 1
    far = a * d3 - 5 * a * d2 + 8 * a * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def interpolation_taps(
    x: np.ndarray,
    in_len: int,
    mode: str,
    *,
    scale: float = 1.0,
    antialias: bool = False,
    cubic_coeff_a: float = -0.75,
    exclude_outside: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(idx, w), both (len(x), T): the input index (clamped to the edge) and weight of each tap
    of every output sample along one axis, for linear or cubic (Keys, ``cubic_coeff_a``)
    interpolation. Out-of-range taps read the border sample or, with ``exclude_outside``, get
    weight 0 and the remaining weights are renormalized. With ``antialias`` and ``scale < 1`` the
    filter is stretched by 1/scale and its weights normalized to sum 1."""
    radius = 1.0 if mode == "linear" else 2.0
    s = min(scale, 1.0) if antialias else 1.0
    half = int(math.ceil(radius / s))
    base = np.floor(x)
    taps = base[:, None] + np.arange(-half, half + 2)[None, :]  # a superset of the support
    d = (taps - x[:, None]) * s
    if mode == "linear":
        w = np.maximum(0.0, 1.0 - np.abs(d))
    else:
        w = _cubic_kernel(d, cubic_coeff_a)
    if antialias:
        tot = w.sum(axis=1, keepdims=True)
        w = w / np.where(tot == 0, 1.0, tot)
    idx = taps.astype(np.int64)
    if exclude_outside:
        w = np.where((idx < 0) | (idx >= in_len), 0.0, w)
        tot = w.sum(axis=1, keepdims=True)
        w = w / np.where(tot == 0, 1.0, tot)
    return np.clip(idx, 0, in_len - 1), w


def interpolation_matrix(x: np.ndarray, in_len: int, mode: str, **kw) -> np.ndarray:
    """W (len(x), in_len) float64 with ``out = W @ in`` along one axis (see interpolation_taps)."""
    idx, w = interpolation_taps(x, in_len, mode, **kw)
    out_len = x.shape[0]
    flat = (np.arange(out_len)[:, None] * in_len + idx).ravel()
    W = np.bincount(flat, weights=w.ravel(), minlength=out_len * in_len)
    return W.reshape(out_len, in_len)


#: above this many matrix entries (or with non-finite data) an axis is resampled tap by tap
_MATRIX_LIMIT = 1 << 22


def _apply_matrix(data: np.ndarray, W: np.ndarray, axis: int) -> np.ndarray:
    if axis == data.ndim - 1:
        return data @ W.T
    return np.moveaxis(np.tensordot(W, data, axes=([1], [axis])), 0, axis)


def _apply_taps(data: np.ndarray, idx: np.ndarray, w: np.ndarray, axis: int) -> np.ndarray:
    """sum_t w[:, t] * data[idx[:, t]] along ``axis``; zero-weight taps are skipped so that a
    NaN/inf only reaches the outputs whose filter covers it."""
    shape = [1] * data.ndim
    shape[axis] = idx.shape[0]
    out = None
    for t in range(idx.shape[1]):
        wt = w[:, t]
        if not wt.any():
            continue
        vals = np.take(data, idx[:, t], axis=axis)
        wt_b = wt.astype(data.dtype).reshape(shape)
        term = np.where(wt_b != 0, vals * wt_b, np.zeros((), data.dtype))
        out = term if out is None else out + term
    if out is None:
        shp = list(data.shape)
        shp[axis] = idx.shape[0]
        out = np.zeros(shp, dtype=data.dtype)
    return out


@op()
def interpolate_axis(
    data, coords, /, *, axis, mode="linear", scale=1.0, antialias=0, cubic_coeff_a=-0.75, exclude_outside=0
):
    """out[.., j, ..] = sum_t w_t(coords[j]) * data[.., idx_t(coords[j]), ..] along ``axis``: linear or
    cubic (Keys, ``cubic_coeff_a``) interpolation at the source coordinates ``coords`` (1-D float64),
    taps clamped to the edge (see interpolation_taps for ``scale``, ``antialias``, ``exclude_outside``).

    One GEMM with the interpolation matrix; tap by tap for non-finite data or a huge matrix, so that a
    NaN/inf reaches only the outputs whose taps read it. Resize runs on it per axis, as does ncnn's
    Interp with its own source coordinates. Output: data's shape with len(coords) along ``axis``, data's
    float dtype.
    """
    coords = np.asarray(coords, np.float64).reshape(-1)
    in_len = data.shape[axis]
    kw = dict(
        scale=float(scale),
        antialias=bool(antialias),
        cubic_coeff_a=float(cubic_coeff_a),
        exclude_outside=bool(exclude_outside),
    )
    if coords.size * in_len <= _MATRIX_LIMIT and np.isfinite(data).all():
        W = interpolation_matrix(coords, in_len, mode, **kw)
        return _apply_matrix(data, W.astype(data.dtype, copy=False), axis)
    return _apply_taps(data, *interpolation_taps(coords, in_len, mode, **kw), axis)


def _to_output(r: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Cast an interpolated float result back to the input dtype (integers: round half to even,
    saturate to the type's range)."""
    if r.dtype == dtype:
        return r
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        r = np.clip(np.rint(r), info.min, info.max)
    elif dtype == np.bool_:
        return r != 0
    return r.astype(dtype)


@op("onnx:Resize-11", kernels=(interpolate_axis,))
def resize(
    x,
    roi=None,
    scales=None,
    sizes=None,
    /,
    *,
    antialias=0,
    axes=None,
    coordinate_transformation_mode="half_pixel",
    cubic_coeff_a=-0.75,
    exclude_outside=0,
    extrapolation_value=0.0,
    keep_aspect_ratio_policy="stretch",
    mode="nearest",
    nearest_mode="round_prefer_floor",
):
    """Y[i] = sum_j W_axis[i, j] X[j] per resized axis; x_original from the coordinate mode.

    Output size per axis d (``axes`` index i): ``floor(in[d] * scales[i])`` or ``sizes[i]``
    (adjusted by ``keep_aspect_ratio_policy``); other axes keep their size. Dtype of ``x``
    (integers are rounded half to even and saturated). Exactly one of scales/sizes is given
    (an empty tensor counts as absent); ``roi`` is only read by tf_crop_and_resize.
    """
    x = np.asarray(x)
    r = x.ndim
    roi, scales, sizes = _opt(roi), _opt(scales), _opt(sizes)
    if mode not in ("nearest", "linear", "cubic"):
        raise KernelError(f"Resize: unknown mode {mode!r} (expected nearest, linear or cubic)")
    if coordinate_transformation_mode not in _COORD_MODES:
        raise KernelError(f"Resize: unknown coordinate_transformation_mode {coordinate_transformation_mode!r}")
    if mode == "nearest" and nearest_mode not in _NEAREST_MODES:
        raise KernelError(f"Resize: unknown nearest_mode {nearest_mode!r}")
    if axes is None:
        ax = list(range(r))
    else:
        ax = [int(a) for a in np.asarray(axes, dtype=np.int64).ravel()]
        if any(not -r <= a < r for a in ax):
            raise KernelError(f"Resize: axes {tuple(ax)} out of range for rank {r}")
        ax = [a % r for a in ax]
        if len(set(ax)) != len(ax):
            raise KernelError(f"Resize: repeated axis in axes {tuple(ax)}")
    n = len(ax)
    if (scales is None) == (sizes is None):
        raise KernelError(
            "Resize: exactly one of 'scales' and 'sizes' must be given"
            if scales is not None
            else "Resize: neither 'scales' nor 'sizes' given"
        )

    in_shape = x.shape
    out_shape = list(in_shape)
    scale_of = [1.0] * r
    exact = [False] * r
    length_of = [float(d) for d in in_shape]
    if scales is not None:
        sc = np.asarray(scales, dtype=np.float64).ravel()  # the float32 values, exactly
        if sc.size != n:
            raise KernelError(f"Resize: scales has {sc.size} values for {n} axes")
        if not np.all(np.isfinite(sc)) or np.any(sc <= 0):
            raise KernelError(f"Resize: scales must be positive and finite, got {sc.tolist()}")
        for i, d in enumerate(ax):
            scale_of[d] = float(sc[i])
            length_of[d] = in_shape[d] * scale_of[d]
            out_shape[d] = int(math.floor(length_of[d]))
    else:
        sz = np.asarray(sizes).ravel()
        if sz.dtype.kind not in "iu":
            raise KernelError(f"Resize: sizes must be int64, got {sz.dtype}")
        sz = sz.astype(np.int64)
        if sz.size != n:
            raise KernelError(f"Resize: sizes has {sz.size} values for {n} axes")
        if np.any(sz < 0):
            raise KernelError(f"Resize: negative value in sizes {sz.tolist()}")
        if any(in_shape[d] == 0 for d in ax):
            raise KernelError("Resize: cannot resize an empty axis to a given size")
        if keep_aspect_ratio_policy == "stretch":
            for i, d in enumerate(ax):
                out_shape[d] = int(sz[i])
                scale_of[d] = out_shape[d] / in_shape[d]
                length_of[d] = float(out_shape[d])
                exact[d] = out_shape[d] > 0
        elif keep_aspect_ratio_policy in ("not_larger", "not_smaller"):
            ratios = [int(sz[i]) / in_shape[d] for i, d in enumerate(ax)] or [1.0]
            s = min(ratios) if keep_aspect_ratio_policy == "not_larger" else max(ratios)
            for d in ax:
                scale_of[d] = s
                length_of[d] = s * in_shape[d]
                out_shape[d] = int(math.floor(length_of[d] + 0.5))
        else:
            raise KernelError(
                f"Resize: unknown keep_aspect_ratio_policy "
                f"{keep_aspect_ratio_policy!r} (stretch, not_larger, not_smaller)"
            )
    check_elements(out_shape, "Resize output")

    crop = coordinate_transformation_mode == "tf_crop_and_resize"
    roi_of = {d: (0.0, 1.0) for d in range(r)}
    if roi is not None and crop:  # other modes ignore roi (exporters write anything there)
        rv = np.asarray(roi, dtype=np.float64).ravel()
        if rv.size != 2 * n:
            raise KernelError(f"Resize: roi has {rv.size} values, expected {2 * n} (starts and ends of {n} axes)")
        for i, d in enumerate(ax):
            roi_of[d] = (float(rv[i]), float(rv[n + i]))
    elif crop:
        raise KernelError("Resize: tf_crop_and_resize needs the 'roi' input")

    if mode != "nearest" and x.dtype.kind not in "fiub" and x.dtype.kind != "V":
        raise KernelError(f"Resize: unsupported dtype {x.dtype}")

    y = x
    masks = []
    if mode != "nearest":
        y = x.astype(compute_dtype(x.dtype), copy=False)
    for d in ax:
        in_len, out_len, s = in_shape[d], out_shape[d], scale_of[d]
        if (
            (not crop or roi_of[d] == (0.0, 1.0))
            and out_len == in_len
            and math.isclose(s, 1.0)
            and coordinate_transformation_mode != "tf_half_pixel_for_nn"
        ):
            continue  # identity along this axis
        if out_len == 0:
            shp = list(y.shape)
            shp[d] = 0
            y = np.empty(shp, dtype=y.dtype)
            continue
        if in_len == 0:
            raise KernelError(f"Resize: cannot resize empty axis {d} to length {out_len}")
        xo = source_coords(
            coordinate_transformation_mode, out_len, in_len, s, length_of[d], *roi_of[d], exact_ratio=exact[d]
        )
        if crop:
            m = (xo < 0) | (xo > in_len - 1)
            if m.any():
                shp = [1] * r
                shp[d] = out_len
                masks.append(m.reshape(shp))
        if mode == "nearest":
            y = np.take(y, nearest_index(xo, in_len, nearest_mode), axis=d)
        else:
            y = interpolate_axis(
                y,
                xo,
                axis=d,
                mode=mode,
                scale=s,
                antialias=antialias,
                cubic_coeff_a=cubic_coeff_a,
                exclude_outside=exclude_outside,
            )
    out = _to_output(y, x.dtype) if mode != "nearest" else y
    if masks:
        m = masks[0]
        for extra in masks[1:]:
            m = m | extra
        out = np.where(m, np.asarray(extrapolation_value).astype(x.dtype), out)
    if out is x:
        out = x.copy()
    return np.ascontiguousarray(out)
