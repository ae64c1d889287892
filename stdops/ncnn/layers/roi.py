"""RoI layers (ncnn-operators.txt): ROIPooling on MaxRoiPool, ROIAlign (version 1, detectron2, on RoiAlign;
version 0 ncnn's own arithmetic), PSROIPooling (ncnn's own), vectorized over channels and positions.
"""

from __future__ import annotations

import numpy as np

from ...limits import check_elements
from ...ops import roi
from ..spec import P, layer
from .detection import _round_away

_F32 = np.float32


# --------------------------------------------------------------------------- ROI layers


def _roi(roi: np.ndarray) -> np.ndarray:
    r = np.asarray(roi, _F32).reshape(-1)
    if r.size < 4:
        raise ValueError(f"the roi blob needs 4 values [x1, y1, x2, y2], got {r.size}")
    return r[:4]


@layer(
    "ROIPooling",
    params=[P(0, "pooled_width", 0), P(1, "pooled_height", 0), P(2, "spatial_scale", 1.0)],
    inputs=2,
    kernels=(roi.max_roi_pool,),
)
def roi_pooling(p, w):
    """Max over each of pooled_height x pooled_width bins of the roi [x1, y1, x2, y2] (corners rounded after
    scaling by spatial_scale, at least 1x1), bins [floor(i * size / n), ceil((i + 1) * size / n)) from the
    corner clipped to the blob; an empty bin is 0 (ncnn's source, = the MaxRoiPool kernel)."""
    pool = roi.max_roi_pool
    if p.pooled_height <= 0 or p.pooled_width <= 0:
        raise ValueError(f"pooled size must be positive, got {p.pooled_height} x {p.pooled_width}")
    shape = (p.pooled_height, p.pooled_width)

    def step(x, roi):
        rois = np.concatenate([[0], _roi(roi)]).astype(_F32)[None]
        return pool(x[None], rois, pooled_shape=shape, spatial_scale=float(p.spatial_scale))[0]

    return step


@layer(
    "ROIAlign",
    params=[
        P(0, "pooled_width", 0),
        P(1, "pooled_height", 0),
        P(2, "spatial_scale", 1.0),
        P(3, "sampling_ratio", 0),
        P(4, "aligned", 0),
        P(5, "version", 0),
    ],
    inputs=2,
    kernels=(roi.roi_align,),
)
def roi_align(p, w):
    """Average of bilinear samples per bin. version 1 (detectron2): the RoiAlign kernel (aligned: half-pixel
    shift; else the roi is at least 1x1). version 0 (ncnn's original): bins clipped to the image, a grid
    of ceil(clipped bin size) samples (or sampling_ratio), empty bins 0."""
    ph, pw = p.pooled_height, p.pooled_width
    scale = _F32(p.spatial_scale)
    if ph <= 0 or pw <= 0:
        raise ValueError(f"pooled size must be positive, got {ph} x {pw}")
    if p.version not in (0, 1):
        raise ValueError(f"version must be 0 or 1, got {p.version}")
    if p.version == 1:
        kern = roi.roi_align
        mode = "half_pixel" if p.aligned else "output_half_pixel"

        def v1(x, roi):
            r = _roi(roi)[None]
            return kern(
                x[None],
                r,
                np.zeros(1, np.int64),
                coordinate_transformation_mode=mode,
                mode="avg",
                output_height=ph,
                output_width=pw,
                sampling_ratio=p.sampling_ratio,
                spatial_scale=float(p.spatial_scale),
            )[0]

        return v1

    def v0(x, roi):
        c, h, wd = x.shape
        x1, y1, x2, y2 = _roi(roi) * scale
        if p.aligned:
            x1, y1, x2, y2 = x1 - _F32(0.5), y1 - _F32(0.5), x2 - _F32(0.5), y2 - _F32(0.5)
        rw, rh = x2 - x1, y2 - y1
        if not p.aligned:
            rw, rh = max(rw, _F32(1)), max(rh, _F32(1))
        bsw, bsh = _F32(rw / _F32(pw)), _F32(rh / _F32(ph))
        check_elements((c, ph, pw), "ROIAlign output")
        out = np.zeros((c, ph, pw), _F32)
        for i in range(ph):
            hs = min(max(_F32(y1 + i * bsh), _F32(0)), _F32(h))
            he = min(max(_F32(y1 + (i + 1) * bsh), _F32(0)), _F32(h))
            for j in range(pw):
                ws = min(max(_F32(x1 + j * bsw), _F32(0)), _F32(wd))
                we = min(max(_F32(x1 + (j + 1) * bsw), _F32(0)), _F32(wd))
                if he <= hs or we <= ws:
                    continue
                gh = p.sampling_ratio if p.sampling_ratio > 0 else int(np.ceil(he - hs))
                gw = p.sampling_ratio if p.sampling_ratio > 0 else int(np.ceil(we - ws))
                check_elements((c, gh, gw), "ROIAlign sampling grid")
                ys = hs + (np.arange(gh, dtype=_F32) + _F32(0.5)) * bsh / _F32(gh)
                xs = ws + (np.arange(gw, dtype=_F32) + _F32(0.5)) * bsw / _F32(gw)
                yy, xx = np.meshgrid(ys, xs, indexing="ij")
                out[:, i, j] = _bilinear(x, xx.ravel(), yy.ravel()).sum(axis=1) / _F32(gh * gw)
        return out

    return v0


def _bilinear(x: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """ncnn's version-0 bilinear sample at points (xs, ys) >= 0 for every channel: [C, n]. Like ncnn it
    addresses the channel as a flat array (y * w + x), so a sample at x == w reads the start of the next
    row; reads past the channel end (undefined in ncnn) take its last element."""
    c, h, wd = x.shape
    flat = x.reshape(c, h * wd)
    x0 = xs.astype(np.int64)
    y0 = ys.astype(np.int64)
    x1, y1 = x0 + 1, y0 + 1
    a0, a1 = (x1 - xs).astype(_F32), (xs - x0).astype(_F32)
    b0, b1 = (y1 - ys).astype(_F32), (ys - y0).astype(_F32)
    xe, ye = x1 >= wd, y1 >= h
    x1 = np.where(xe, wd - 1, x1)
    y1 = np.where(ye, h - 1, y1)
    a0, a1 = np.where(xe, _F32(1), a0), np.where(xe, _F32(0), a1)
    b0, b1 = np.where(ye, _F32(1), b0), np.where(ye, _F32(0), b1)

    def at(yy, xx):
        return flat[:, np.minimum(yy * wd + xx, h * wd - 1)]

    r0 = at(y0, x0) * a0 + at(y0, x1) * a1
    r1 = at(y1, x0) * a0 + at(y1, x1) * a1
    return (r0 * b0 + r1 * b1).astype(_F32)


@layer(
    "PSROIPooling",
    params=[P(0, "pooled_width", 7), P(1, "pooled_height", 7), P(2, "spatial_scale", 0.0625), P(3, "output_dim", 0)],
    inputs=2,
    ncnn_only="position-sensitive RoI average pooling (R-FCN): no ONNX operator pools position-sensitive score maps",
)
def psroi_pooling(p, w):
    """Position-sensitive ROI pooling: output channel q, bin (i, j) is the mean over that bin of input
    channel (q * pooled_height + i) * pooled_width + j (0 for an empty bin)."""
    ph, pw, od = p.pooled_height, p.pooled_width, p.output_dim
    scale = _F32(p.spatial_scale)

    def step(x, roi):
        c, h, wd = x.shape
        if c != od * ph * pw:
            raise ValueError(f"PSROIPooling: {c} channels, expected output_dim * pooled_h * pooled_w = {od * ph * pw}")
        r = _roi(roi)
        rx1, ry1 = _round_away(r[0]) * scale, _round_away(r[1]) * scale
        rx2, ry2 = _round_away(r[2] + _F32(1)) * scale, _round_away(r[3] + _F32(1)) * scale
        rw, rh = max(_F32(rx2 - rx1), _F32(0.1)), max(_F32(ry2 - ry1), _F32(0.1))
        bsw, bsh = _F32(rw / _F32(pw)), _F32(rh / _F32(ph))
        xg = x.reshape(od, ph, pw, h, wd)
        out = np.zeros((od, ph, pw), _F32)
        for i in range(ph):
            hs = min(max(int(np.floor(_F32(ry1 + i * bsh))), 0), h)
            he = min(max(int(np.ceil(_F32(ry1 + (i + 1) * bsh))), 0), h)
            for j in range(pw):
                ws = min(max(int(np.floor(_F32(rx1 + j * bsw))), 0), wd)
                we = min(max(int(np.ceil(_F32(rx1 + (j + 1) * bsw))), 0), wd)
                if he <= hs or we <= ws:
                    continue
                area = _F32((he - hs) * (we - ws))
                out[:, i, j] = xg[:, i, j, hs:he, ws:we].sum(axis=(1, 2), dtype=_F32) / area
        return out

    return step
