"""Detection and ROI ncnn layers -> ONNX: PriorBox (a constant: it reads only shapes), ROIPooling (MaxRoiPool),
ROIAlign version 1 (RoiAlign). The others have no ONNX form and are refused with the reason."""

from __future__ import annotations

import numpy as np

from .base import NO_ONNX_FORM, LayerCtx, emits

NO_ONNX_FORM.update(
    {
        "DetectionOutput": "SSD decoding keeps a data-dependent number of boxes after per-class NMS and top-k",
        "Proposal": "RPN proposals keep a data-dependent number of boxes after NMS",
        "YoloDetectionOutput": "YOLO decoding keeps a data-dependent number of boxes after NMS",
        "Yolov3DetectionOutput": "YOLOv3 decoding keeps a data-dependent number of boxes after NMS",
        "PSROIPooling": "its bin sizes follow the roi values (ncnn's rounding), which ONNX ops cannot index by",
    }
)


@emits("PriorBox")
def prior_box(ctx: LayerCtx) -> None:
    """The boxes depend on the feature-map and image sizes only: computed by the front end, stored."""
    boxes = ctx.layer.fn(*[np.zeros(s, np.float32) for s in ctx.in_shapes])
    ctx.put(0, ctx.g.const(np.asarray(boxes, np.float32)[None], name=ctx.tops[0]))


def _roi5(ctx: LayerCtx) -> str:
    """The roi blob [x1, y1, x2, y2, ...] as MaxRoiPool's (1, 5) [batch 0, x1, y1, x2, y2]."""
    g = ctx.g
    r = g.slice(g.reshape(ctx.x(1), (1, -1)), [0], [4], [1])
    return g.op("Concat", [g.const(np.zeros((1, 1), np.float32), stem="batch0"), r], axis=1)


@emits("ROIPooling")
def roi_pooling(ctx: LayerCtx) -> None:
    p = ctx.p
    y = ctx.g.op(
        "MaxRoiPool",
        [ctx.x(0), _roi5(ctx)],
        pooled_shape=[int(p.pooled_height), int(p.pooled_width)],
        spatial_scale=float(p.spatial_scale),
    )
    ctx.put(0, y)


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
