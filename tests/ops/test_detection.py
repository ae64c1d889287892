"""NonMaxSuppression against a scalar greedy implementation written here."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.errors import KernelError
from stdops.ops.detection import non_max_suppression

RNG = np.random.default_rng(0)


def _corners(b, cpb):
    if cpb:
        xc, yc, w, h = (float(v) for v in b)
        return yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
    y1, x1, y2, x2 = (float(v) for v in b)
    return min(y1, y2), min(x1, x2), max(y1, y2), max(x1, x2)


def _iou(a, b):
    iy = min(a[2], b[2]) - max(a[0], b[0])
    ix = min(a[3], b[3]) - max(a[1], b[1])
    if iy <= 0 or ix <= 0:
        return 0.0
    inter = iy * ix
    area = lambda c: (c[2] - c[0]) * (c[3] - c[1])  # noqa: E731
    return inter / (area(a) + area(b) - inter)


def nms_ref(boxes, scores, max_out, iou_t, score_t, cpb):
    rows = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            cand = [i for i in range(scores.shape[2]) if score_t is None or scores[b, c, i] > score_t]
            cand.sort(key=lambda i: (-scores[b, c, i], i))
            picked = []
            for i in cand:
                if len(picked) >= max_out:
                    break
                ci = _corners(boxes[b, i], cpb)
                if all(_iou(ci, _corners(boxes[b, j], cpb)) <= iou_t for j in picked):
                    picked.append(i)
            rows += [[b, c, i] for i in picked]
    return np.array(rows, np.int64).reshape(-1, 3)


@pytest.mark.parametrize("cpb", [0, 1])
@pytest.mark.parametrize(
    "max_out,iou_t,score_t", [(3, 0.5, None), (10, 0.3, 0.4), (1, 0.0, None), (100, 1.0, 0.9), (5, 0.45, 0.0)]
)
def test_nms_random(cpb, max_out, iou_t, score_t):
    B, C, N = 2, 3, 25
    p = RNG.uniform(0, 10, (B, N, 2))
    size = RNG.uniform(0.5, 4, (B, N, 2))
    boxes = np.concatenate([p, p + size], -1) if cpb == 0 else np.concatenate([p, size], -1)
    boxes = boxes.astype(np.float32)
    scores = RNG.uniform(0, 1, (B, C, N)).astype(np.float32)
    scores[0, 0, :4] = 0.75  # ties resolve by index
    st = None if score_t is None else np.array([score_t], np.float32)
    got = non_max_suppression(
        boxes, scores, np.array([max_out], np.int64), np.array([iou_t], np.float32), st, center_point_box=cpb
    )
    assert got.dtype == np.int64 and got.ndim == 2 and got.shape[1] == 3
    np.testing.assert_array_equal(
        got, nms_ref(boxes, scores, max_out, np.float32(iou_t), None if score_t is None else np.float32(score_t), cpb)
    )


def test_nms_flipped_corners_match():
    boxes = RNG.uniform(0, 10, (1, 12, 4)).astype(np.float32)
    scores = RNG.uniform(0, 1, (1, 2, 12)).astype(np.float32)
    args = (np.array([5], np.int64), np.array([0.2], np.float32))
    a = non_max_suppression(boxes, scores, *args)
    b = non_max_suppression(boxes[..., [2, 3, 0, 1]], scores, *args)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, nms_ref(boxes, scores, 5, np.float32(0.2), None, 0))


def test_nms_defaults_and_edge_cases():
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7]]], np.float32)
    assert non_max_suppression(boxes, scores).shape == (0, 3)  # max_output_boxes_per_class = 0
    got = non_max_suppression(boxes, scores, np.array([10], np.int64))
    np.testing.assert_array_equal(got, [[0, 0, 0], [0, 0, 2]])  # identical box suppressed (IoU 1 > 0)
    got = non_max_suppression(boxes, scores, np.array([10], np.int64), np.array([1.0], np.float32))
    np.testing.assert_array_equal(got, [[0, 0, 0], [0, 0, 1], [0, 0, 2]])  # IoU == threshold kept
    got = non_max_suppression(boxes, scores, np.array([10], np.int64), None, np.array([0.95], np.float32))
    assert got.shape == (0, 3)
    empty = non_max_suppression(
        np.zeros((1, 0, 4), np.float32), np.zeros((1, 1, 0), np.float32), np.array([3], np.int64)
    )
    assert empty.shape == (0, 3) and empty.dtype == np.int64


@pytest.mark.parametrize(
    "boxes,scores,kw",
    [
        (np.zeros((1, 3, 5)), np.zeros((1, 1, 3)), {}),
        (np.zeros((1, 3, 4)), np.zeros((1, 1, 4)), {}),
        (np.zeros((1, 3, 4)), np.zeros((2, 1, 3)), {}),
        (np.zeros((1, 3, 4)), np.zeros((1, 1, 3)), {"center_point_box": 2}),
    ],
)
def test_nms_bad_inputs(boxes, scores, kw):
    with pytest.raises(KernelError):
        non_max_suppression(boxes.astype(np.float32), scores.astype(np.float32), np.array([1], np.int64), **kw)


def test_nms_bad_thresholds():
    b, s = np.zeros((1, 2, 4), np.float32), np.zeros((1, 1, 2), np.float32)
    with pytest.raises(KernelError):
        non_max_suppression(b, s, np.array([1, 2], np.int64))
    with pytest.raises(KernelError):
        non_max_suppression(b, s, np.array([1], np.int64), np.array([1.5], np.float32))


# ----------------------------------------------------------------------------- the blocked kernel
def _random_boxes(rng, n, classes=1, spread=10.0):
    """[y1, x1, y2, x2] boxes; with classes > 1 each class offset apart, as exporters write batched NMS."""
    p = rng.uniform(0, spread, (n, 2))
    size = rng.uniform(0.5, spread / 3, (n, 2))
    boxes = np.concatenate([p, p + size], -1)
    boxes += (rng.integers(0, classes, n) * 2 * spread)[:, None]
    return boxes.astype(np.float32)


@pytest.mark.parametrize("block,rounds,pairs", [(8, 2, 64), (3, 1, 7), (256, 12, 1 << 20)])
def test_nms_blocks_match_reference(block, rounds, pairs, monkeypatch):
    """Small blocks, few fixpoint rounds and tiny pair batches reach every branch of the blocked kernel."""
    import stdops.ops.nms as nms

    monkeypatch.setattr(nms, "_BLOCK", block)
    monkeypatch.setattr(nms, "_ROUNDS", rounds)
    monkeypatch.setattr(nms, "_PAIRS", pairs)
    rng = np.random.default_rng(block)
    for classes, max_out, iou_t in ((1, 200, 0.3), (4, 7, 0.5), (3, 200, 0.0)):
        boxes = _random_boxes(rng, 60, classes)[None]
        scores = rng.uniform(0, 1, (1, 2, 60)).astype(np.float32)
        got = non_max_suppression(boxes, scores, np.array([max_out]), np.array([iou_t], np.float32))
        np.testing.assert_array_equal(got, nms_ref(boxes, scores, max_out, np.float32(iou_t), None, 0))


def test_nms_suppression_chain(monkeypatch):
    """Boxes each overlapping the next (IoU 0.6 > 0.5): greedy keeps every other one, which needs one
    fixpoint round per link; past _ROUNDS the row-by-row pass finishes the block."""
    import stdops.ops.nms as nms

    monkeypatch.setattr(nms, "_ROUNDS", 3)
    n = 40
    x = np.arange(n, dtype=np.float32) * 0.25
    boxes = np.stack([np.zeros(n), x, np.ones(n), x + 1], -1).astype(np.float32)[None]
    scores = np.linspace(1, 0.5, n, dtype=np.float32)[None, None]
    got = non_max_suppression(boxes, scores, np.array([n]), np.array([0.5], np.float32))
    np.testing.assert_array_equal(got, nms_ref(boxes, scores, n, np.float32(0.5), None, 0))
    assert got.shape[0] < n


def test_nms_sweep_equals_dense():
    """The sweep over one axis finds every suppressing pair the dense test finds."""
    from stdops.ops.detection import _onnx_suppression
    from stdops.ops.nms import greedy_nms

    rng = np.random.default_rng(3)
    c = tuple(np.ascontiguousarray(a) for a in _random_boxes(rng, 700, classes=5).T)
    for t in (0.0, 0.3, 0.7):
        sup = _onnx_suppression(c, np.float32(t))
        a = greedy_nms((c[0], c[1]), (c[2], c[3]), sup, overlap_only=True)
        b = greedy_nms((c[0], c[1]), (c[2], c[3]), sup, overlap_only=False)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(greedy_nms((c[0], c[1]), (c[2], c[3]), sup, limit=5), a[:5])


def test_nms_many_boxes_against_onnxruntime():
    """A detector-sized call (4000 boxes in 20 offset classes, one NMS) against onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    rng = np.random.default_rng(11)
    boxes = _random_boxes(rng, 4000, classes=20)[None]
    scores = rng.uniform(0, 1, (1, 1, 4000)).astype(np.float32)
    args = (np.array([100000], np.int64), np.array([0.45], np.float32), np.array([0.05], np.float32))
    names = ["boxes", "scores", "max", "iou", "score"]
    node = helper.make_node("NonMaxSuppression", names, ["sel"])
    types = [TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.INT64, TensorProto.FLOAT, TensorProto.FLOAT]
    g = helper.make_graph(
        [node],
        "nms",
        [helper.make_tensor_value_info(n, t, None) for n, t in zip(names, types)],
        [helper.make_tensor_value_info("sel", TensorProto.INT64, None)],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, dict(zip(names, (boxes, scores, *args))))[0]
    got = non_max_suppression(boxes, scores, *args)
    assert 100 < got.shape[0] < 4000
    np.testing.assert_array_equal(got, want)
