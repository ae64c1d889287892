"""Detection and ROI ncnn layers -> ONNX: PriorBox (a constant: it reads only shapes), ROIPooling and
PSROIPooling (bins computed from the roi values with ncnn's rounding, pooled through 0/1 masks of the rows and
columns each bin covers), ROIAlign version 1 (RoiAlign). The layers that keep a data-dependent number of
boxes have no ONNX form here and are refused with the reason."""

from __future__ import annotations

import numpy as np

from .base import NO_ONNX_FORM, LayerCtx, emits

NO_ONNX_FORM.update(
    {
        "DetectionOutput": "SSD decoding keeps a data-dependent number of boxes after per-class NMS and top-k",
        "Proposal": "RPN proposals keep a data-dependent number of boxes after NMS",
        "YoloDetectionOutput": "YOLO decoding keeps a data-dependent number of boxes after NMS",
        "Yolov3DetectionOutput": "YOLOv3 decoding keeps a data-dependent number of boxes after NMS",
    }
)


@emits("PriorBox")
def prior_box(ctx: LayerCtx) -> None:
    """The boxes depend on the feature-map and image sizes only: computed by the front end, stored."""
    boxes = ctx.layer.fn(*[np.zeros(s, np.float32) for s in ctx.in_shapes])
    ctx.put(0, ctx.g.const(np.asarray(boxes, np.float32)[None], name=ctx.tops[0]))


def _round_away(g, v: str, dtype) -> str:
    """C round(): half away from zero."""
    half = g.scalar(0.5, dtype)
    return g.op("Mul", [g.op("Floor", [g.op("Add", [g.op("Abs", [v]), half])]), g.op("Sign", [v])])


def _roi_value(ctx: LayerCtx, k: int, dtype) -> str:
    """Element k of the roi blob, as a 1-element tensor of ``dtype``."""
    g = ctx.g
    v = g.slice(g.reshape(ctx.x(1), (-1,)), [k], [k + 1], [0])
    return v if dtype == np.float32 else g.cast(v, dtype)


def _bin_masks(g, starts: str, ends: str, extent: int, dtype) -> str:
    """(bins, extent) booleans: position p is in bin b when starts[b] <= p < ends[b]."""
    pos = g.const(np.arange(extent, dtype=dtype).reshape(1, extent), dtype=dtype, stem="positions")
    s, e = g.reshape(starts, (-1, 1)), g.reshape(ends, (-1, 1))
    return g.op("And", [g.op("GreaterOrEqual", [pos, s]), g.op("Less", [pos, e])])


@emits("ROIPooling")
def roi_pooling(ctx: LayerCtx) -> None:
    """The front end's max_roi_pool: corners round(coord * scale) (half away), at least 1x1, bins
    [floor(i * size / n), ceil((i + 1) * size / n)) from the corner clipped to the blob; an empty bin 0."""
    g, p = ctx.g, ctx.p
    C, H, W = ctx.in_shapes[0]
    ph, pw = int(p.pooled_height), int(p.pooled_width)
    d = np.float64
    scale = g.scalar(float(p.spatial_scale), d)
    x1, y1, x2, y2 = (_round_away(g, g.op("Mul", [_roi_value(ctx, k, d), scale]), d) for k in range(4))
    one = g.scalar(1.0, d)

    def edges(lo: str, hi: str, n: int, extent: int) -> tuple[str, str]:
        size = g.op("Max", [g.op("Add", [g.op("Sub", [hi, lo]), one]), one])
        step = g.op("Div", [size, g.scalar(n, d)])
        i0 = g.const(np.arange(n, dtype=d), dtype=d, stem="bin_index")
        i1 = g.const(np.arange(1, n + 1, dtype=d), dtype=d, stem="bin_index1")
        lim = g.scalar(float(extent), d)
        zero = g.scalar(0.0, d)
        s = g.op("Clip", [g.op("Add", [g.op("Floor", [g.op("Mul", [i0, step])]), lo]), zero, lim])
        e = g.op("Clip", [g.op("Add", [g.op("Ceil", [g.op("Mul", [i1, step])]), lo]), zero, lim])
        return s, e

    hs, he = edges(y1, y2, ph, H)
    ws, we = edges(x1, x2, pw, W)
    rows, cols = _bin_masks(g, hs, he, H, d), _bin_masks(g, ws, we, W, d)  # (ph, H), (pw, W)
    ninf = g.const(np.asarray(-np.inf, np.float32), stem="ninf")
    x = g.reshape(ctx.x(0), (C, 1, H, W))
    t = g.op("Where", [g.reshape(cols, (1, pw, 1, W)), x, ninf])
    t = g.op("ReduceMax", [t, g.ints([3], "axes")], keepdims=0)  # (C, pw, H)
    t = g.op("Where", [g.reshape(rows, (1, ph, 1, H)), g.reshape(t, (C, 1, pw, H)), ninf])
    t = g.op("ReduceMax", [t, g.ints([3], "axes")], keepdims=0)  # (C, ph, pw)
    valid = g.op("And", [g.reshape(g.op("Greater", [he, hs]), (ph, 1)), g.reshape(g.op("Greater", [we, ws]), (1, pw))])
    y = g.op("Where", [valid, t, g.const(np.zeros((), np.float32), stem="zero")])
    ctx.put(0, g.reshape(y, (1, C, ph, pw)))


@emits("PSROIPooling")
def psroi_pooling(ctx: LayerCtx) -> None:
    """The front end's rule in float32: corners round(coord) * scale (the far ones of coord + 1), bin size
    max(extent, 0.1) / n, bin edges floor / ceil clipped to the blob; the mean of channel
    (q * ph + i) * pw + j over bin (i, j); an empty bin 0."""
    g, p = ctx.g, ctx.p
    C, H, W = ctx.in_shapes[0]
    ph, pw, od = int(p.pooled_height), int(p.pooled_width), int(p.output_dim)
    f = np.float32
    scale = g.scalar(float(p.spatial_scale))
    one = g.scalar(1.0)
    r = [_roi_value(ctx, k, f) for k in range(4)]
    rx1 = g.op("Mul", [_round_away(g, r[0], f), scale])
    ry1 = g.op("Mul", [_round_away(g, r[1], f), scale])
    rx2 = g.op("Mul", [_round_away(g, g.op("Add", [r[2], one]), f), scale])
    ry2 = g.op("Mul", [_round_away(g, g.op("Add", [r[3], one]), f), scale])

    def edges(lo: str, hi: str, n: int, extent: int) -> tuple[str, str]:
        size = g.op("Max", [g.op("Sub", [hi, lo]), g.scalar(0.1)])
        step = g.op("Div", [size, g.scalar(n)])
        zero, lim = g.scalar(0.0), g.scalar(float(extent))
        i0 = g.const(np.arange(n, dtype=f), stem="bin_index")
        i1 = g.const(np.arange(1, n + 1, dtype=f), stem="bin_index1")
        s = g.op("Clip", [g.op("Floor", [g.op("Add", [lo, g.op("Mul", [i0, step])])]), zero, lim])
        e = g.op("Clip", [g.op("Ceil", [g.op("Add", [lo, g.op("Mul", [i1, step])])]), zero, lim])
        return s, e

    hs, he = edges(ry1, ry2, ph, H)
    ws, we = edges(rx1, rx2, pw, W)
    rows, cols = _bin_masks(g, hs, he, H, f), _bin_masks(g, ws, we, W, f)
    mask = g.op("And", [g.reshape(rows, (ph, 1, H, 1)), g.reshape(cols, (1, pw, 1, W))])  # (ph, pw, H, W)
    xg = g.reshape(ctx.x(0), (od, ph, pw, H, W))
    total = g.op("ReduceSum", [g.op("Where", [mask, xg, g.scalar(0.0)]), g.ints([3, 4], "axes")], keepdims=0)
    area = g.op("Mul", [g.reshape(g.op("Sub", [he, hs]), (ph, 1)), g.reshape(g.op("Sub", [we, ws]), (1, pw))])
    valid = g.op("Greater", [area, g.scalar(0.0)])
    y = g.op("Where", [valid, g.op("Div", [total, area]), g.scalar(0.0)])
    ctx.put(0, g.reshape(y, (1, od, ph, pw)))


@emits("ROIAlign")
def roi_align(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    if p.version != 1:
        raise ctx.fail(
            "ROIAlign version 0 (ncnn's original) samples a grid whose size follows the roi values; "
            "only version 1 (detectron2, = ONNX RoiAlign) converts"
        )
    rois = g.slice(g.reshape(ctx.x(1), (1, -1)), [0], [4], [1])
    y = g.op(
        "RoiAlign",
        [ctx.x(0), rois, g.const(np.zeros(1, np.int64), stem="batch_indices")],
        coordinate_transformation_mode="half_pixel" if p.aligned else "output_half_pixel",
        mode="avg",
        output_height=int(p.pooled_height),
        output_width=int(p.pooled_width),
        sampling_ratio=int(p.sampling_ratio),
        spatial_scale=float(p.spatial_scale),
    )
    ctx.put(0, y)
