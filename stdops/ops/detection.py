"""Box detection kernels: NonMaxSuppression (the greedy loop itself is the shared kernel in nms.py)."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import op
from .nms import finite_edges, greedy_nms


def _scalar(v, what: str, default, dtype):
    if v is None:
        return default
    v = np.asarray(v)
    if v.size == 0:
        return default
    if v.size != 1:
        raise KernelError(f"NonMaxSuppression: {what} must be a scalar, got shape {v.shape}")
    return dtype(v.reshape(()))


def box_corners(boxes: np.ndarray, center_point_box: int) -> tuple[np.ndarray, ...]:
    """(y_min, x_min, y_max, x_max) arrays from [y1, x1, y2, x2] (any diagonal corner pair,
    center_point_box=0) or [x_center, y_center, width, height] (center_point_box=1)."""
    if center_point_box == 0:
        y1, x1, y2, x2 = (boxes[..., i] for i in range(4))
        return np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)
    if center_point_box == 1:
        xc, yc, w, h = (boxes[..., i] for i in range(4))
        hw, hh = w / 2, h / 2
        return yc - hh, xc - hw, yc + hh, xc + hw
    raise KernelError(f"NonMaxSuppression: center_point_box must be 0 or 1, got {center_point_box}")


def _onnx_suppression(c, iou_t):
    """suppresses(i, j) for corners ``c`` (in priority order): IoU(box i, box j) > iou_t, vectorized over
    broadcast index arrays; boxes without positive intersection or area never exceed it."""
    ymin, xmin, ymax, xmax = c
    area = (ymax - ymin) * (xmax - xmin)

    def suppresses(i, j):
        ih = np.minimum(ymax[i], ymax[j]) - np.maximum(ymin[i], ymin[j])
        iw = np.minimum(xmax[i], xmax[j]) - np.maximum(xmin[i], xmin[j])
        pos = (ih > 0) & (iw > 0)
        inter = np.where(pos, ih * iw, 0)
        a_i, a_j = area[i], area[j]
        union = a_i + a_j - inter
        ok = pos & (inter > 0) & (a_i > 0) & (a_j > 0) & (union > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = inter / np.where(ok, union, 1)
        return ok & (iou > iou_t)

    return suppresses


@op("onnx:NonMaxSuppression-10")
def non_max_suppression(
    boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None, /, *, center_point_box=0
):
    """Greedy NMS per (batch, class): take boxes by descending score (ties: lower index first),
    drop those with IoU > iou_threshold with a taken box; keep score > score_threshold.

    ``boxes`` (B, N, 4), ``scores`` (B, C, N) -> selected_indices int64 (n, 3) rows
    [batch, class, box], ordered by batch, class, then selection order. At most
    ``max_output_boxes_per_class`` (default 0: none) per batch and class.
    """
    boxes, scores = np.asarray(boxes), np.asarray(scores)
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        raise KernelError(f"NonMaxSuppression: boxes must be (batches, boxes, 4), got {boxes.shape}")
    if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise KernelError(
            f"NonMaxSuppression: scores shape {scores.shape} does not fit boxes "
            f"{boxes.shape} (expected (batches, classes, boxes))"
        )
    max_out = max(0, _scalar(max_output_boxes_per_class, "max_output_boxes_per_class", 0, int))
    dt = boxes.dtype if boxes.dtype.kind == "f" else np.dtype(np.float32)
    iou_t = _scalar(iou_threshold, "iou_threshold", dt.type(0), dt.type)
    score_t = _scalar(score_threshold, "score_threshold", None, scores.dtype.type)
    if not 0 <= float(iou_t) <= 1:
        raise KernelError(f"NonMaxSuppression: iou_threshold must be in [0, 1], got {iou_t}")
    B, C, N = scores.shape
    out = []
    if max_out == 0 or N == 0:
        return np.zeros((0, 3), dtype=np.int64)
    for b in range(B):
        corners = box_corners(boxes[b].astype(dt, copy=False), center_point_box)
        for c in range(C):
            s = scores[b, c]
            cand = np.arange(N) if score_t is None else np.flatnonzero(s > score_t)
            if cand.size == 0:
                continue
            order = cand[np.lexsort((cand, -s[cand].astype(np.float64)))]
            oc = tuple(a[order] for a in corners)  # corners in priority order
            # a box suppresses only boxes it overlaps (positive intersection): the sweep applies
            keep = greedy_nms(
                (oc[0], oc[1]),
                (oc[2], oc[3]),
                _onnx_suppression(oc, iou_t),
                limit=max_out,
                overlap_only=finite_edges(*oc),
            )
            picked = order[keep]
            if picked.size:
                sel = np.empty((picked.size, 3), dtype=np.int64)
                sel[:, 0], sel[:, 1], sel[:, 2] = b, c, picked
                out.append(sel)
    if not out:
        return np.zeros((0, 3), dtype=np.int64)
    return np.concatenate(out, axis=0)
