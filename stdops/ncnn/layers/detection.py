"""Detection layers (ncnn-operators.txt: DetectionOutput, PriorBox, Proposal, YoloDetectionOutput,
Yolov3DetectionOutput; the RoI layers are in :mod:`stdops.ncnn.layers.roi`).

NMS is ncnn's own greedy pass (its IoU differs from the NonMaxSuppression kernel's for degenerate boxes).
Box decoding and anchor/prior generation are ncnn's own arithmetic, vectorized here.
A detection layer that finds nothing outputs an empty blob (shape (0,)), as ncnn leaves its top empty
(YoloDetectionOutput: its first bottom with the class scores softmaxed, ncnn's in-place leftover).
"""

from __future__ import annotations

import numpy as np

from ...ops import activation
from ...ops.nms import finite_edges, greedy_nms
from ..spec import P, layer

_F32 = np.float32
_EMPTY = np.zeros((0,), _F32)


def _nms(boxes: np.ndarray, thr: float, zero_union_overlaps: bool = True) -> np.ndarray:
    """Indices kept by ncnn's greedy NMS over boxes already in descending score order: a box is dropped
    when inter / union > thr with a kept box. ncnn's IoU differs from the NonMaxSuppression kernel's for
    degenerate boxes: inter = 0 when disjoint, else the product of the (possibly zero) overlaps, and a
    0 / 0 IoU (two zero-area boxes) counts as overlapping in the wheel (its NaN comparison is true), unless
    zero_union_overlaps is False (Yolov3 compares inter > thr * union)."""
    n = boxes.shape[0]
    if n == 0:
        return np.zeros((0,), np.int64)
    b = boxes.astype(_F32)
    x0, y0, x1, y1 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    area = (x1 - x0) * (y1 - y0)
    thr = _F32(thr)

    def suppresses(i, j):  # kept box i removes box j
        disjoint = (x0[j] > x1[i]) | (x1[j] < x0[i]) | (y0[j] > y1[i]) | (y1[j] < y0[i])
        iw = np.minimum(x1[j], x1[i]) - np.maximum(x0[j], x0[i])
        ih = np.minimum(y1[j], y1[i]) - np.maximum(y0[j], y0[i])
        inter = np.where(disjoint, _F32(0), iw * ih)
        union = area[j] + area[i] - inter
        if zero_union_overlaps:
            with np.errstate(divide="ignore", invalid="ignore"):
                return (inter / union > thr) | (union == 0)
        return inter > thr * union

    # disjoint boxes (inter 0) never suppress each other when every area is positive and thr >= 0:
    # the shared kernel then tests only boxes whose edges meet
    sweep = bool(thr >= 0) and bool((area > 0).all()) and finite_edges(x0, y0, x1, y1)
    return greedy_nms((x0, y0), (x1, y1), suppresses, overlap_only=sweep)


def _round_away(v):
    """C round(): half away from zero."""
    v = np.asarray(v)
    return np.copysign(np.floor(np.abs(v) + v.dtype.type(0.5)), v)


def _sort_desc(scores: np.ndarray) -> np.ndarray:
    return np.argsort(-scores.astype(np.float64), kind="stable")


def _detections(labels, scores, boxes) -> np.ndarray:
    if len(scores) == 0:
        return _EMPTY
    return np.concatenate(
        [np.asarray(labels, _F32)[:, None], np.asarray(scores, _F32)[:, None], np.asarray(boxes, _F32)], axis=1
    ).astype(_F32)


# --------------------------------------------------------------------------- DetectionOutput


@layer(
    "DetectionOutput",
    params=[
        P(0, "num_class", 0),
        P(1, "nms_threshold", 0.05),
        P(2, "nms_top_k", 300),
        P(3, "keep_top_k", 100),
        P(4, "confidence_threshold", 0.5),
        P(5, "variance0", 0.1),
        P(6, "variance1", 0.1),
        P(7, "variance2", 0.2),
        P(8, "variance3", 0.2),
    ],
    inputs=3,
    ncnn_only="SSD box decoding (center-size offsets scaled by the variances, exp of the size offsets) and "
    "ncnn's greedy NMS, whose IoU differs from NonMaxSuppression's for degenerate boxes",
)
def detection_output(p, w):
    """SSD decoding: priors (centre/size) moved by location * variance, per class (1..num_class-1) the
    boxes with score > confidence_threshold, best nms_top_k, NMS; then all classes by score, best
    keep_top_k. Rows [label, score, xmin, ymin, xmax, ymax]. num_class -233: mxnet layout
    (confidence [num_class, num_prior], variances from the params)."""
    mx = p.num_class == -233
    thr = _F32(p.confidence_threshold)
    pvar = np.array([p.variance0, p.variance1, p.variance2, p.variance3], _F32)

    def step(loc, conf, prior):
        if mx:
            num_prior = prior.shape[-2] if prior.ndim >= 2 else 1
            ncls = conf.shape[-2] if conf.ndim >= 2 else 1
            pb = prior.reshape(-1)[: 4 * num_prior].reshape(num_prior, 4)
            var = np.broadcast_to(pvar, (num_prior, 4))
            scores = conf.reshape(-1)[: ncls * num_prior].reshape(ncls, num_prior)  # [class, prior]
        else:
            num_prior = prior.shape[-1] // 4
            ncls = p.num_class
            rows = prior.reshape(-1, prior.shape[-1])
            pb = rows[0].reshape(num_prior, 4)
            var = rows[1].reshape(num_prior, 4)
            scores = conf.reshape(-1)[: num_prior * ncls].reshape(num_prior, ncls).T
        lc = loc.reshape(-1)[: num_prior * 4].reshape(num_prior, 4)
        pw, ph = pb[:, 2] - pb[:, 0], pb[:, 3] - pb[:, 1]
        pcx, pcy = (pb[:, 0] + pb[:, 2]) * _F32(0.5), (pb[:, 1] + pb[:, 3]) * _F32(0.5)
        cx = var[:, 0] * lc[:, 0] * pw + pcx
        cy = var[:, 1] * lc[:, 1] * ph + pcy
        bw = np.exp(var[:, 2] * lc[:, 2]) * pw
        bh = np.exp(var[:, 3] * lc[:, 3]) * ph
        boxes = np.stack(
            [cx - bw * _F32(0.5), cy - bh * _F32(0.5), cx + bw * _F32(0.5), cy + bh * _F32(0.5)], axis=1
        ).astype(_F32)
        labels, sc, bx = [], [], []
        for c in range(1, ncls):
            s = scores[c]
            cand = np.flatnonzero(s > thr)
            cand = cand[_sort_desc(s[cand])]
            if p.nms_top_k < cand.size:
                cand = cand[: max(p.nms_top_k, 0)]
            keep = cand[_nms(boxes[cand], p.nms_threshold)]  # cand is score-sorted
            labels += [c] * keep.size
            sc.append(s[keep])
            bx.append(boxes[keep])
        if not labels:
            return _EMPTY
        sc = np.concatenate(sc)
        bx = np.concatenate(bx)
        labels = np.asarray(labels)
        order = _sort_desc(sc)
        if p.keep_top_k < order.size:
            order = order[: max(p.keep_top_k, 0)]
        return _detections(labels[order], sc[order], bx[order])

    return step


# --------------------------------------------------------------------------- PriorBox


@layer(
    "PriorBox",
    params=[
        P(0, "min_sizes", [], kind="floats"),
        P(1, "max_sizes", [], kind="floats"),
        P(2, "aspect_ratios", [], kind="floats"),
        P(3, "variance0", 0.1),
        P(4, "variance1", 0.1),
        P(5, "variance2", 0.2),
        P(6, "variance3", 0.2),
        P(7, "flip", 1),
        P(8, "clip", 0),
        P(9, "image_width", 0),
        P(10, "image_height", 0),
        P(11, "step_width", -233.0),
        P(12, "step_height", -233.0),
        P(13, "offset", 0.0),
        P(14, "step_mmdetection", 0),
        P(15, "center_mmdetection", 0),
    ],
    inputs=None,
    ncnn_only="SSD prior boxes (ncnn's min/max sizes, square roots of the aspect ratios, flips, steps, clipping): "
    "no ONNX operator makes priors",
)
def prior_box(p, w):
    """SSD prior boxes for every feature-map cell (caffe style: [2, 4 * cells * priors] with the variances
    in row 1, normalized by the image size; mxnet style (one bottom, image size -233, no max sizes): [4 * ...])."""
    mins = np.asarray(p.min_sizes, _F32)
    maxs = np.asarray(p.max_sizes, _F32)
    ars = np.asarray(p.aspect_ratios, _F32)
    var = np.array([p.variance0, p.variance1, p.variance2, p.variance3], _F32)
    off = _F32(p.offset)

    def clip(b):
        return np.clip(b, _F32(0), _F32(1)) if p.clip else b

    def step(*bottoms):
        feat = bottoms[0]
        h, wd = feat.shape[-2], feat.shape[-1]
        if len(bottoms) == 1 and p.image_width == -233 and p.image_height == -233 and maxs.size == 0:
            sw = _F32(1.0 / wd) if p.step_width == -233 else _F32(p.step_width)
            sh = _F32(1.0 / h) if p.step_height == -233 else _F32(p.step_height)
            if mins.size == 0:
                raise ValueError("PriorBox needs min_sizes")
            hw = [m * h / wd / 2 for m in mins.astype(np.float64)]  # half sizes per prior
            hh = [m / 2 for m in mins.astype(np.float64)]
            for r in ars[1:]:
                sr = np.sqrt(np.float32(r))
                hw.append(float(mins[0]) * h / wd * sr / 2)
                hh.append(float(mins[0]) / sr / 2)
            hw, hh = np.asarray(hw, _F32), np.asarray(hh, _F32)
            cx = off * sw + np.arange(wd, dtype=_F32) * sw
            cy = off * sh + np.arange(h, dtype=_F32) * sh
            cxg = np.broadcast_to(cx[None, :, None], (h, wd, hw.size))
            cyg = np.broadcast_to(cy[:, None, None], (h, wd, hw.size))
            boxes = np.stack([cxg - hw, cyg - hh, cxg + hw, cyg + hh], axis=-1).astype(_F32)
            return clip(boxes.reshape(-1))
        if p.image_width == -233 or p.image_height == -233:
            if len(bottoms) < 2:
                raise ValueError("PriorBox with image size -233 needs the image as its second bottom")
        img_w = bottoms[1].shape[-1] if p.image_width == -233 else p.image_width
        img_h = bottoms[1].shape[-2] if p.image_height == -233 else p.image_height
        if p.step_width == -233:
            sw = np.ceil(_F32(img_w) / _F32(wd)) if p.step_mmdetection else _F32(img_w) / _F32(wd)
        else:
            sw = _F32(p.step_width)
        if p.step_height == -233:
            sh = np.ceil(_F32(img_h) / _F32(h)) if p.step_mmdetection else _F32(img_h) / _F32(h)
        else:
            sh = _F32(p.step_height)
        sw, sh = _F32(sw), _F32(sh)
        if maxs.size and maxs.size < mins.size:
            raise ValueError(f"PriorBox has {maxs.size} max_sizes for {mins.size} min_sizes")
        bw, bh = [], []
        for k, m in enumerate(mins):
            bw.append(m)
            bh.append(m)
            if maxs.size:
                s = np.sqrt(m * maxs[k])
                bw.append(s)
                bh.append(s)
            for ar in ars:
                sa = np.sqrt(ar)
                bw.append(m * sa)
                bh.append(m / sa)
                if p.flip:
                    bw.append(m / sa)
                    bh.append(m * sa)
        bw, bh = np.asarray(bw, _F32) * _F32(0.5), np.asarray(bh, _F32) * _F32(0.5)
        if p.center_mmdetection:
            cx0, cy0 = off * (sw - _F32(1)), off * (sh - _F32(1))
        else:
            cx0, cy0 = off * sw, off * sh
        cx = cx0 + np.arange(wd, dtype=_F32) * sw
        cy = cy0 + np.arange(h, dtype=_F32) * sh
        cxg = np.broadcast_to(cx[None, :, None], (h, wd, bw.size))
        cyg = np.broadcast_to(cy[:, None, None], (h, wd, bw.size))
        with np.errstate(divide="ignore", invalid="ignore"):
            boxes = np.stack(
                [
                    (cxg - bw) / _F32(img_w),
                    (cyg - bh) / _F32(img_h),
                    (cxg + bw) / _F32(img_w),
                    (cyg + bh) / _F32(img_h),
                ],
                axis=-1,
            ).astype(_F32)
        boxes = clip(boxes.reshape(-1))
        return np.stack([boxes, np.tile(var, boxes.size // 4)]).astype(_F32)

    return step


# --------------------------------------------------------------------------- Proposal


def _anchors(base_size: int) -> np.ndarray:
    """Faster R-CNN anchors for ratios 0.5, 1, 2 and scales 8, 16, 32 around (base/2, base/2)."""
    rows = []
    c = _F32(base_size * 0.5)
    for ar in (_F32(0.5), _F32(1.0), _F32(2.0)):
        rw = int(_round_away(np.float64(np.float32(base_size) / np.sqrt(ar))))
        rh = int(_round_away(np.float64(np.float32(rw) * ar)))
        for s in (8.0, 16.0, 32.0):
            sw, sh = _F32(rw * s), _F32(rh * s)
            rows.append([c - sw * _F32(0.5), c - sh * _F32(0.5), c + sw * _F32(0.5), c + sh * _F32(0.5)])
    return np.asarray(rows, _F32)


@layer(
    "Proposal",
    params=[
        P(0, "feat_stride", 16),
        P(1, "base_size", 16),
        P(2, "pre_nms_topN", 6000),
        P(3, "after_nms_topN", 300),
        P(4, "nms_thresh", 0.7),
        P(5, "min_size", 16),
    ],
    inputs=3,
    outputs=None,
    ncnn_only="Faster R-CNN proposals: ncnn's anchors (square roots of the ratios, C rounding), exp box "
    "decoding and greedy NMS",
)
def proposal(p, w):
    """RPN proposals: anchors shifted over the score map, moved by the bbox deltas, clipped to the image
    (im_info = [height, width, scale]), those at least min_size * scale kept, best pre_nms_topN by the
    foreground score, NMS, best after_nms_topN. Tops: rois [n, 1, 4][, scores [n, 1, 1]]."""
    anchors = _anchors(p.base_size)
    A = anchors.shape[0]
    stride = _F32(p.feat_stride)

    def step(score, bbox, im_info):
        h, wd = score.shape[-2], score.shape[-1]
        if bbox.shape[0] < 4 * A or score.shape[0] < 2 * A:
            raise ValueError(f"Proposal needs {2 * A} score and {4 * A} bbox channels")
        d = bbox[: 4 * A].reshape(A, 4, h, wd)
        aw = (anchors[:, 2] - anchors[:, 0])[:, None, None]
        ah = (anchors[:, 3] - anchors[:, 1])[:, None, None]
        ax = anchors[:, 0][:, None, None] + (np.arange(wd, dtype=_F32) * stride)[None, None, :]
        ay = anchors[:, 1][:, None, None] + (np.arange(h, dtype=_F32) * stride)[None, :, None]
        cx = ax + aw * _F32(0.5) + aw * d[:, 0]
        cy = ay + ah * _F32(0.5) + ah * d[:, 1]
        pw = aw * np.exp(d[:, 2])
        ph = ah * np.exp(d[:, 3])
        info = im_info.reshape(-1)
        im_h, im_w, im_s = _F32(info[0]), _F32(info[1]), _F32(info[2])
        x1 = np.maximum(np.minimum(cx - pw * _F32(0.5), im_w - 1), 0)
        y1 = np.maximum(np.minimum(cy - ph * _F32(0.5), im_h - 1), 0)
        x2 = np.maximum(np.minimum(cx + pw * _F32(0.5), im_w - 1), 0)
        y2 = np.maximum(np.minimum(cy + ph * _F32(0.5), im_h - 1), 0)
        boxes = np.stack([x1, y1, x2, y2], axis=-1).reshape(-1, 4).astype(_F32)
        scores = score[A : 2 * A].reshape(-1).astype(_F32)
        minb = _F32(p.min_size) * im_s
        ok = np.flatnonzero(((boxes[:, 2] - boxes[:, 0] + 1) >= minb) & ((boxes[:, 3] - boxes[:, 1] + 1) >= minb))
        ok = ok[_sort_desc(scores[ok])]
        if 0 < p.pre_nms_topN < ok.size:
            ok = ok[: p.pre_nms_topN]
        keep = ok[_nms(boxes[ok], p.nms_thresh)]
        keep = keep[: max(p.after_nms_topN, 0)]
        rois = boxes[keep].reshape(-1, 1, 4)
        if p.n_tops >= 2:
            return rois, scores[keep].reshape(-1, 1, 1)
        return rois

    return step


# --------------------------------------------------------------------------- YOLO


@layer(
    "YoloDetectionOutput",
    params=[
        P(0, "num_class", 20),
        P(1, "num_box", 5),
        P(2, "confidence_threshold", 0.01),
        P(3, "nms_threshold", 0.45),
        P(4, "biases", [], kind="floats"),
    ],
    inputs=None,
    outputs=None,
    kernels=(activation.softmax, activation.sigmoid),
    ncnn_only="YOLOv2 region decoding on ncnn's anchors (exp of the size offsets) and ncnn's greedy NMS",
)
def yolo_detection_output(p, w):
    """YOLOv2 region decoding over every bottom: per box anchor the class scores are softmaxed, confidence =
    sigmoid(objectness) * best class score, kept if >= confidence_threshold; all boxes sorted, NMS.
    Rows [label + 1, score, xmin, ymin, xmax, ymax]."""
    nb, nc = p.num_box, p.num_class
    biases = np.asarray(p.biases, _F32)
    if biases.size < 2 * nb:
        raise ValueError(f"YoloDetectionOutput needs {2 * nb} biases, got {biases.size}")
    softmax = activation.softmax

    def step(*bottoms):
        labels, scores, boxes = [], [], []
        soft = []
        for x in bottoms:
            c, h, wd = x.shape[0], x.shape[-2], x.shape[-1]
            if c != nb * (5 + nc):
                raise ValueError(
                    f"YoloDetectionOutput: {c} channels, expected num_box * (5 + num_class) = {nb * (5 + nc)}"
                )
            t = x.reshape(nb, 5 + nc, h, wd)
            cls = softmax(t[:, 5:], axis=1)
            soft.append(np.concatenate([t[:, :5], cls], axis=1).reshape(x.shape))
            gx = np.arange(wd, dtype=_F32)[None, None, :]
            gy = np.arange(h, dtype=_F32)[None, :, None]
            bw_ = biases[0 : 2 * nb : 2][:, None, None]
            bh_ = biases[1 : 2 * nb : 2][:, None, None]
            cx = (gx + activation.sigmoid(t[:, 0])) / _F32(wd)
            cy = (gy + activation.sigmoid(t[:, 1])) / _F32(h)
            bw = np.exp(t[:, 2]) * bw_ / _F32(wd)
            bh = np.exp(t[:, 3]) * bh_ / _F32(h)
            best = np.argmax(cls, axis=1)
            best_score = np.max(cls, axis=1)
            best_score = np.where(best_score > 0, best_score, _F32(0))
            best = np.where(np.max(cls, axis=1) > 0, best, 0)
            conf = activation.sigmoid(t[:, 4]) * best_score
            sel = conf >= _F32(p.confidence_threshold)  # [box, h, w], in ncnn's box-major order
            labels.append(best[sel])
            scores.append(conf[sel])
            boxes.append(
                np.stack([cx - bw * _F32(0.5), cy - bh * _F32(0.5), cx + bw * _F32(0.5), cy + bh * _F32(0.5)], axis=-1)[
                    sel
                ]
            )
        sc = np.concatenate(scores).astype(_F32)
        out = _EMPTY
        if sc.size:
            bx = np.concatenate(boxes).astype(_F32)
            lb = np.concatenate(labels)
            order = _sort_desc(sc)
            keep = order[_nms(bx[order], p.nms_threshold)]
            if keep.size:
                out = _detections(lb[keep] + 1, sc[keep], bx[keep])
        if out.size == 0:
            out = soft[0]  # ncnn leaves its in-place (softmaxed) first bottom as the top
        return (out, *soft[1 : p.n_tops]) if p.n_tops > 1 else out

    return step


@layer(
    "Yolov3DetectionOutput",
    params=[
        P(0, "num_class", 20),
        P(1, "num_box", 5),
        P(2, "confidence_threshold", 0.01),
        P(3, "nms_threshold", 0.45),
        P(4, "biases", [], kind="floats"),
        P(5, "mask", [], kind="floats"),
        P(6, "anchors_scale", [], kind="floats"),
    ],
    inputs=None,
    kernels=(activation.sigmoid,),
    ncnn_only="YOLOv3 decoding: ncnn's confidence 1 / (1 + e^-obj (1 + e^-cls)), exp of the size offsets, "
    "ncnn's greedy NMS",
)
def yolov3_detection_output(p, w):
    """YOLOv3 decoding over every bottom b (anchors mask[b * num_box + k], network size anchors_scale[b] *
    feature size): confidence = 1 / (1 + e^-obj * (1 + e^-cls)) for the best raw class score, kept if
    >= confidence_threshold; all boxes sorted, NMS (inter > thr * union). Rows [label + 1, score, box]."""
    nb, nc = p.num_box, p.num_class
    biases = np.asarray(p.biases, _F32)
    mask = [int(v) for v in p.mask]
    scales = np.asarray(p.anchors_scale, _F32)

    def step(*bottoms):
        if len(mask) < nb * len(bottoms) or scales.size < len(bottoms):
            raise ValueError(
                f"Yolov3DetectionOutput: {len(bottoms)} bottoms need {nb * len(bottoms)} mask "
                f"entries and {len(bottoms)} anchors_scale values"
            )
        labels, scores, boxes = [], [], []
        for b, x in enumerate(bottoms):
            c, h, wd = x.shape[0], x.shape[-2], x.shape[-1]
            if c != nb * (5 + nc):
                raise ValueError(
                    f"Yolov3DetectionOutput: {c} channels, expected num_box * (5 + num_class) = {nb * (5 + nc)}"
                )
            t = x.reshape(nb, 5 + nc, h, wd)
            idx = mask[b * nb : (b + 1) * nb]
            if max(idx) * 2 + 1 >= biases.size or min(idx) < 0:
                raise ValueError("Yolov3DetectionOutput: a mask entry points past the biases")
            bw_ = biases[[2 * i for i in idx]][:, None, None]
            bh_ = biases[[2 * i + 1 for i in idx]][:, None, None]
            net_w = _F32(int(scales[b] * wd))
            net_h = _F32(int(scales[b] * h))
            cls = t[:, 5:]
            best = np.argmax(cls, axis=1)
            best_score = np.max(cls, axis=1)
            conf = _F32(1) / (_F32(1) + np.exp(-t[:, 4]) * (_F32(1) + np.exp(-best_score)))
            gx = np.arange(wd, dtype=_F32)[None, None, :]
            gy = np.arange(h, dtype=_F32)[None, :, None]
            cx = (gx + activation.sigmoid(t[:, 0])) / _F32(wd)
            cy = (gy + activation.sigmoid(t[:, 1])) / _F32(h)
            bw = np.exp(t[:, 2]) * bw_ / net_w
            bh = np.exp(t[:, 3]) * bh_ / net_h
            sel = conf >= _F32(p.confidence_threshold)
            labels.append(best[sel])
            scores.append(conf[sel])
            boxes.append(
                np.stack([cx - bw * _F32(0.5), cy - bh * _F32(0.5), cx + bw * _F32(0.5), cy + bh * _F32(0.5)], axis=-1)[
                    sel
                ]
            )
        sc = np.concatenate(scores).astype(_F32)
        if not sc.size:
            return _EMPTY
        bx = np.concatenate(boxes).astype(_F32)
        lb = np.concatenate(labels)
        order = _sort_desc(sc)
        keep = order[_nms(bx[order], p.nms_threshold, zero_union_overlaps=False)]
        return _detections(lb[keep] + 1, sc[keep], bx[keep])

    return step
