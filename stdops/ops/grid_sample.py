"""GridSample (N-D, nearest / linear / cubic, zeros / border / reflection padding) and AffineGrid.

GridSample is vectorized over every output point: per spatial axis it computes the tap indices and
1-D weights, then loops over the tap combinations (2^r for linear, 4^r for cubic, 1 for nearest),
gathering from the flattened input with one ``take_along_axis`` per combination.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from ._registry import op
from .dtypes import compute_dtype

_MODES = {"linear": "linear", "bilinear": "linear", "nearest": "nearest", "cubic": "cubic", "bicubic": "cubic"}
_PADDING = ("zeros", "border", "reflection")


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Reflect coordinates at the borders lo and hi until they fall inside [lo, hi]."""
    rng = hi - lo
    if rng <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    dx = np.where(below, lo - x, np.where(above, x - hi, 0.0))
    flips = np.floor(dx / rng)
    rem = dx - flips * rng
    even = (flips % 2) == 0
    from_lo = np.where(even, lo + rem, hi - rem)
    from_hi = np.where(even, hi - rem, lo + rem)
    return np.where(below, from_lo, np.where(above, from_hi, x))


def _cubic_weights(t: np.ndarray, a: float = -0.75) -> list[np.ndarray]:
    """Keys' weights of the taps at floor-1 .. floor+2 for the fraction t in [0, 1)."""

    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


@op("onnx:GridSample-16")
def grid_sample(x, grid, /, *, align_corners=0, mode="linear", padding_mode="zeros"):
    """Y[n, c, o...] = sum_taps w * X[n, c, taps(denormalize(grid[n, o...]))].

    ``x`` (N, C, D1..Dr), ``grid`` (N, O1..Or, r) with grid[..., 0] the coordinate of the last
    axis (x/width), in [-1, 1]. Denormalized ``((g + 1) * L - 1) / 2`` (align_corners=0) or
    ``(g + 1) / 2 * (L - 1)``. Modes linear/nearest/cubic (bilinear/bicubic accepted, GridSample-16
    names); nearest rounds half to even; cubic uses a = -0.75. Output (N, C, O1..Or), dtype of x.
    """
    x, grid = np.asarray(x), np.asarray(grid)
    kind = _MODES.get(mode)
    if kind is None:
        raise KernelError(f"GridSample: unknown mode {mode!r} (linear, nearest, cubic)")
    if padding_mode not in _PADDING:
        raise KernelError(f"GridSample: unknown padding_mode {padding_mode!r} (zeros, border, reflection)")
    if x.ndim < 3:
        raise KernelError(f"GridSample: X must have rank >= 3 (N, C, spatial...), got {x.shape}")
    r = x.ndim - 2
    if grid.ndim != r + 2 or grid.shape[0] != x.shape[0] or grid.shape[-1] != r:
        raise KernelError(
            f"GridSample: grid shape {grid.shape} does not fit X {x.shape} (expected (N, out spatial..., {r}))"
        )
    N, C, spatial = x.shape[0], x.shape[1], x.shape[2:]
    out_sp = grid.shape[1:-1]
    out_shape = (N, C, *out_sp)
    check_elements(out_shape, "GridSample output")
    Q = int(np.prod(out_sp, dtype=np.int64))
    if N * C * Q == 0:
        return np.zeros(out_shape, dtype=x.dtype)
    if any(L == 0 for L in spatial):
        raise KernelError(f"GridSample: empty spatial input {x.shape}")
    g = grid.reshape(N, Q, r).astype(np.float64)
    acc_dtype = compute_dtype(x.dtype)

    # per spatial axis: list of taps (index (N,Q), weight (N,Q) or None, valid (N,Q) or None)
    axes_taps = []
    for d in range(r):
        L = spatial[d]
        gd = g[..., r - 1 - d]
        if align_corners:
            c = (gd + 1) / 2 * (L - 1)
            lo, hi = 0.0, L - 1.0
        else:
            c = ((gd + 1) * L - 1) / 2
            lo, hi = -0.5, L - 0.5
        if kind == "nearest":
            c = np.rint(c)
        outside = (c < lo) | (c > hi)
        if padding_mode == "border" and kind != "cubic":
            # (cubic: as PyTorch, the coordinate stays and each tap is clamped to the border)
            c = np.where(outside, np.clip(c, 0, L - 1), c)
        elif padding_mode == "reflection":
            c = np.where(outside, _reflect(c, lo, hi), c)
        if kind == "nearest":
            base = np.trunc(c)
            offsets, weights = [0], [None]
        else:
            base = np.floor(c)
            t = c - base
            if kind == "linear":
                offsets, weights = [0, 1], [1 - t, t]
            else:
                offsets, weights = [-1, 0, 1, 2], _cubic_weights(t)
        taps = []
        for off, w in zip(offsets, weights):
            i = base + off
            valid = None
            if padding_mode == "zeros":
                valid = (i >= 0) & (i <= L - 1)
            elif padding_mode == "reflection":
                i = np.trunc(_reflect(i, lo, hi))
            i = np.clip(i, 0, L - 1).astype(np.intp)
            taps.append((i, w, valid))
        axes_taps.append(taps)

    strides = [int(np.prod(spatial[d + 1 :], dtype=np.int64)) for d in range(r)]
    xf = x.reshape(N, C, -1)
    out = None
    for combo in itertools.product(*axes_taps):
        flat = combo[0][0] * strides[0]
        for d in range(1, r):
            flat = flat + combo[d][0] * strides[d]
        valid = None
        for _, _, v in combo:
            if v is not None:
                valid = v if valid is None else (valid & v)
        vals = np.take_along_axis(xf, flat[:, None, :], axis=2)  # (N, C, Q)
        if kind == "nearest":
            if valid is not None:
                vals = np.where(valid[:, None, :], vals, np.zeros((), dtype=x.dtype))
            out = vals
            break
        w = combo[0][1]
        for d in range(1, r):
            w = w * combo[d][1]
        if valid is not None:
            w = np.where(valid, w, 0.0)
            vals = np.where(valid[:, None, :], vals, np.zeros((), dtype=x.dtype))
        term = vals.astype(acc_dtype, copy=False) * w.astype(acc_dtype)[:, None, :]
        out = term if out is None else out + term
    if kind != "nearest" and out.dtype != x.dtype:
        if x.dtype.kind in "iu":
            info = np.iinfo(x.dtype)
            out = np.clip(np.rint(out), info.min, info.max)
        out = out.astype(x.dtype)
    return np.ascontiguousarray(out.reshape(out_shape))


def _base_coords(L: int, align_corners: int) -> np.ndarray:
    if align_corners:
        if L == 1:
            return np.array([-1.0])
        return np.linspace(-1.0, 1.0, L)
    return (2.0 * np.arange(L) + 1.0) / L - 1.0


@op("onnx:AffineGrid-20")
def affine_grid(theta, size, /, *, align_corners=0):
    """grid[n, ..., :] = theta[n] @ (x, y[, z], 1) over a regular grid in [-1, 1].

    ``theta`` (N, 2, 3) with ``size`` (N, C, H, W) -> grid (N, H, W, 2); or (N, 3, 4) with
    (N, C, D, H, W) -> (N, D, H, W, 3); last grid component is x (width). Dtype of theta.
    """
    theta = np.asarray(theta)
    sz = [int(v) for v in np.asarray(size).ravel()]
    if len(sz) not in (4, 5):
        raise KernelError(f"AffineGrid: size must have 4 or 5 values (N, C, [D,] H, W), got {sz}")
    r = len(sz) - 2
    if theta.ndim != 3 or theta.shape[1:] != (r, r + 1):
        raise KernelError(f"AffineGrid: theta shape {theta.shape} does not fit size {sz} (expected (N, {r}, {r + 1}))")
    if theta.shape[0] != sz[0]:
        raise KernelError(f"AffineGrid: theta has {theta.shape[0]} matrices for N={sz[0]}")
    spatial = sz[2:]
    if any(v < 0 for v in spatial):
        raise KernelError(f"AffineGrid: negative size {sz}")
    check_elements([sz[0], *spatial, r], "AffineGrid output")
    cdt = compute_dtype(theta.dtype)
    # homogeneous points (..., r + 1) with component order (x, y[, z], 1): x is the last axis
    comps = []
    for d in reversed(range(r)):
        shp = [1] * r
        shp[d] = spatial[d]
        comps.append(np.broadcast_to(_base_coords(spatial[d], align_corners).reshape(shp), spatial))
    comps.append(np.ones(spatial))
    pts = np.stack(comps, axis=-1).astype(cdt)  # (*spatial, r+1)
    out = np.einsum("...k,njk->n...j", pts, theta.astype(cdt))
    return np.ascontiguousarray(out.astype(theta.dtype, copy=False))
