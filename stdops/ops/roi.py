"""RoI pooling kernels: MaxRoiPool, RoiAlign (split from pool.py).

A Python loop runs over the boxes; inside a box everything is vectorized over channels and
positions (RoiAlign's bilinear sampling is separable: one interpolation matrix per axis).
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from ._registry import op
from ._window import check_float
from .dtypes import compute_dtype


def _check_x4(x):
    check_float(x, "X")
    if x.ndim != 4:
        raise KernelError(f"X must have shape (N, C, H, W), got {x.shape}")


def _round_half_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


@op("onnx:MaxRoiPool-1")
def max_roi_pool(x, rois, /, *, pooled_shape, spatial_scale=1.0):
    """Y[r, c, i, j] = max of X[batch_r, c] over bin (i, j) of RoI r (0 for an empty bin).

    rois (R, 5) = [batch_id, x1, y1, x2, y2] in input coordinates: the RoI is
    round(coord * spatial_scale) (half away from zero), at least 1x1 pixel, split into
    pooled_shape (ph, pw) bins [floor(i * h / ph), ceil((i + 1) * h / ph)) clipped to X.
    Y (R, C, ph, pw) with X's dtype.
    """
    _check_x4(x)
    rois = np.asarray(rois)
    if rois.ndim != 2 or rois.shape[1] != 5:
        raise KernelError(f"rois must have shape (num_rois, 5), got {rois.shape}")
    if pooled_shape is None or len(pooled_shape) != 2 or any(int(v) < 1 for v in pooled_shape):
        raise KernelError(f"pooled_shape must be two positive ints, got {pooled_shape}")
    ph, pw = (int(v) for v in pooled_shape)
    N, C, H, W = x.shape
    R = rois.shape[0]
    check_elements((R, C, ph, pw), "MaxRoiPool output")
    check_elements((C, H, pw), "MaxRoiPool column buffer")
    y = np.zeros((R, C, ph, pw), x.dtype)
    r64 = rois.astype(np.float64)
    bidx = r64[:, 0].astype(np.int64)
    if R and (bidx.min() < 0 or bidx.max() >= N):
        raise KernelError(f"rois batch_id outside [0, {N})")
    coords = _round_half_away(r64[:, 1:] * float(spatial_scale)).astype(np.int64)
    for r in range(R):
        x1, y1, x2, y2 = coords[r]
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        bh, bw = rh / ph, rw / pw
        hs = np.clip(np.floor(np.arange(ph) * bh).astype(np.int64) + y1, 0, H)
        he = np.clip(np.ceil(np.arange(1, ph + 1) * bh).astype(np.int64) + y1, 0, H)
        ws = np.clip(np.floor(np.arange(pw) * bw).astype(np.int64) + x1, 0, W)
        we = np.clip(np.ceil(np.arange(1, pw + 1) * bw).astype(np.int64) + x1, 0, W)
        img = x[bidx[r]]
        colmax = np.empty((C, H, pw), x.dtype)
        okw = we > ws
        for j in range(pw):  # per bin column: max over its width, for every channel and row
            if okw[j]:
                colmax[:, :, j] = img[:, :, ws[j] : we[j]].max(axis=2)
        for i in range(ph):
            if he[i] > hs[i]:
                y[r, :, i, okw] = colmax[:, hs[i] : he[i], okw].max(axis=1).T
    return y


def _axis_interp(start: float, size: float, pooled: int, grid: int, extent: int):
    """Sample positions along one axis: (low, high, w_low, w_high), each (pooled * grid,)."""
    bin_ = size / pooled
    pos = (start + np.arange(pooled)[:, None] * bin_ + (np.arange(grid)[None, :] + 0.5) * bin_ / grid).reshape(-1)
    invalid = (pos < -1.0) | (pos > extent)
    pos = np.maximum(pos, 0.0)
    low = np.floor(pos).astype(np.int64)
    at_end = low >= extent - 1
    low = np.where(at_end, extent - 1, low)
    high = np.where(at_end, extent - 1, low + 1)
    pos = np.where(at_end, low, pos)
    lw = pos - low
    hw = 1.0 - lw
    return low, high, np.where(invalid, 0.0, hw), np.where(invalid, 0.0, lw)


def _interp_matrix(low, high, wl, wh, pooled, grid, extent):
    """A (pooled, extent): the bin's sum of interpolation weights over its samples."""
    S = low.shape[0]
    a = np.zeros((S, extent))
    rows = np.arange(S)
    np.add.at(a, (rows, low), wl)
    np.add.at(a, (rows, high), wh)
    return a.reshape(pooled, grid, extent).sum(axis=1)


@op("onnx:RoiAlign-16")
def roi_align(
    x,
    rois,
    batch_indices,
    /,
    *,
    coordinate_transformation_mode="half_pixel",
    mode="avg",
    output_height=1,
    output_width=1,
    sampling_ratio=0,
    spatial_scale=1.0,
):
    """Y[r, c, i, j] = avg (or max) over a grid of samples in bin (i, j) of RoI r of bilinear(X[b_r, c]).

    rois (R, 4) = [x1, y1, x2, y2] scaled by spatial_scale and shifted by -0.5 (half_pixel; not
    for output_half_pixel, where the RoI is also at least 1x1); the grid is sampling_ratio^2
    points, or ceil(roi_size / output_size) per axis when sampling_ratio is 0. Samples beyond
    [-1, size] read 0, others are clamped to the image. Max mode takes, per sample, the largest
    of the four weighted corner terms. Y (R, C, output_height, output_width), X's dtype.
    """
    _check_x4(x)
    if mode not in ("avg", "max"):
        raise KernelError(f"mode must be 'avg' or 'max', got {mode!r}")
    if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
        raise KernelError(
            f"coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel', "
            f"got {coordinate_transformation_mode!r}"
        )
    oh, ow = int(output_height), int(output_width)
    if oh < 1 or ow < 1:
        raise KernelError(f"output_height/output_width must be >= 1, got {oh}, {ow}")
    rois = np.asarray(rois)
    if rois.ndim != 2 or rois.shape[1] != 4:
        raise KernelError(f"rois must have shape (num_rois, 4), got {rois.shape}")
    bi = np.asarray(batch_indices).reshape(-1).astype(np.int64)
    R = rois.shape[0]
    if bi.shape[0] != R:
        raise KernelError(f"batch_indices has {bi.shape[0]} entries, rois has {R}")
    N, C, H, W = x.shape
    if R and (bi.min() < 0 or bi.max() >= N):
        raise KernelError(f"batch_indices outside [0, {N})")
    dt = compute_dtype(x.dtype)
    half = coordinate_transformation_mode == "half_pixel"
    off = 0.5 if half else 0.0
    r64 = rois.astype(np.float64) * float(spatial_scale) - off
    check_elements((R, C, oh, ow), "RoiAlign output")
    y = np.zeros((R, C, oh, ow), dt)
    for r in range(R):
        x1, y1, x2, y2 = r64[r]
        rw, rh = x2 - x1, y2 - y1
        if not half:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = int(sampling_ratio) if sampling_ratio > 0 else int(np.ceil(rh / oh))
        gw = int(sampling_ratio) if sampling_ratio > 0 else int(np.ceil(rw / ow))
        if gh <= 0 or gw <= 0:
            continue  # no sample points: the bin stays 0
        if mode == "avg":  # the sample grids and interpolation matrices below
            check_elements((oh * gh, max(H, 1)), "RoiAlign sample grid")
            check_elements((ow * gw, max(W, 1)), "RoiAlign sample grid")
        else:
            check_elements((C, oh * gh, 2, ow * gw, 2), "RoiAlign sample grid")
        img = x[bi[r]].astype(dt, copy=False)
        ylo, yhi, ywl, ywh = _axis_interp(y1, rh, oh, gh, H)
        xlo, xhi, xwl, xwh = _axis_interp(x1, rw, ow, gw, W)
        if mode == "avg":
            ay = _interp_matrix(ylo, yhi, ywl, ywh, oh, gh, H).astype(dt)
            ax = _interp_matrix(xlo, xhi, xwl, xwh, ow, gw, W).astype(dt)
            y[r] = (ay @ img) @ ax.T
            y[r] *= dt.type(1.0 / max(gh * gw, 1))
        else:
            yi = np.stack([ylo, yhi], axis=1)  # (SY, 2)
            xi = np.stack([xlo, xhi], axis=1)  # (SX, 2)
            wy = np.stack([ywl, ywh], axis=1).astype(dt)
            wx = np.stack([xwl, xwh], axis=1).astype(dt)
            v = img[:, yi[:, :, None, None], xi[None, None, :, :]]  # (C, SY, 2, SX, 2)
            v = v * (wy[:, :, None, None] * wx[None, None, :, :])
            v = v.max(axis=(2, 4)).reshape(C, oh, gh, ow, gw)
            y[r] = v.max(axis=(2, 4))
    return y if y.dtype == x.dtype else y.astype(x.dtype)
