"""Detection layers against the ncnn wheel: DetectionOutput, PriorBox, Proposal, YoloDetectionOutput,
Yolov3DetectionOutput, ROIAlign, ROIPooling, PSROIPooling."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import ModelFormatError

from . import quirks, wheel

N = 22
needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")


def _f(rng, *shape, scale=1.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32)


def _check(type_name, params, weights, inputs, n_out=1, atol=1e-4, rtol=1e-4):
    ours = sn.run_layer(type_name, params, weights, inputs, n_out)
    theirs = wheel.wheel_run(type_name, params, weights, inputs, n_out)
    wheel.assert_close(ours, theirs, atol=atol, rtol=rtol, what=f"{type_name} {params}")
    return ours


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)


def _boxes(rng, n):
    c = rng.uniform(0.1, 0.9, size=(n, 2))
    s = rng.uniform(0.05, 0.4, size=(n, 2))
    return np.concatenate([c - s / 2, c + s / 2], axis=1).astype(np.float32)


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_detectionoutput(i):
    rng = np.random.default_rng(11000 + i)
    n, c = int(rng.integers(4, 40)), int(rng.integers(2, 6))
    mx = i % 5 == 4
    params = {1: float(rng.uniform(0.2, 0.7)), 4: float(rng.uniform(0.05, 0.5))}
    if i % 3 == 1:
        params[2] = int(rng.integers(1, 5))  # nms_top_k
    if i % 4 == 2:
        params[3] = int(rng.integers(1, 6))  # keep_top_k
    loc = _f(rng, n * 4, scale=0.5)
    pb = _boxes(rng, n)
    if mx:
        params[0] = -233
        params.update({5: 0.1, 6: 0.15, 7: 0.2, 8: 0.25})
        conf = _softmax(_f(rng, c, n, scale=2.0), 0)
        prior = pb
    else:
        params[0] = c
        conf = _softmax(_f(rng, n, c, scale=2.0), 1)
        prior = np.stack([pb.ravel(), rng.uniform(0.05, 0.3, 4 * n).astype(np.float32)])
    if i == 0:
        params = {0: c}
    _check("DetectionOutput", params, [], [loc, conf, prior])


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_priorbox(i):
    rng = np.random.default_rng(12000 + i)
    fh, fw = (int(v) for v in rng.integers(1, 6, size=2))
    feat = _f(rng, 2, fh, fw)
    img = _f(rng, 3, int(rng.integers(20, 60)), int(rng.integers(20, 60)))
    mins = [float(v) for v in rng.uniform(4, 20, size=int(rng.integers(1, 3)))]
    ars = [float(v) for v in rng.uniform(0.5, 3, size=int(rng.integers(0, 3)))]
    if i % 4 == 3:  # mxnet style: one bottom, image size -233, no max sizes
        params = {0: mins, 2: [1.0] + ars, 9: -233, 10: -233, 8: i % 8 == 7, 13: 0.5}
        params[0] = [float(v) / 40 for v in mins]
        if i % 8 == 3:
            params.update({11: 0.3, 12: 0.25})
        _check("PriorBox", params, [], [feat])
        return
    params = {0: mins, 7: i % 2, 8: (i // 2) % 2, 13: float(rng.choice([0.0, 0.5]))}
    if ars:
        params[2] = ars
    if i % 3 == 0:
        params[1] = [m + float(rng.uniform(1, 10)) for m in mins]
    if i % 5 == 1:
        params.update({9: int(img.shape[2]), 10: int(img.shape[1])})
    else:
        params.update({9: -233, 10: -233})
    if i % 6 == 2:
        params.update({11: float(rng.uniform(4, 10)), 12: float(rng.uniform(4, 10))})
    params[14] = int(i % 7 == 5)
    params[15] = int(i % 7 == 6)
    params.update({3: 0.1, 4: 0.12, 5: 0.2, 6: 0.22})
    _check("PriorBox", params, [], [feat, img])


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_proposal(i):
    rng = np.random.default_rng(13000 + i)
    h, w = (int(v) for v in rng.integers(2, 7, size=2))
    score = _softmax(_f(rng, 2, 9, h, w, scale=2.0), 0).reshape(18, h, w)
    bbox = _f(rng, 36, h, w, scale=0.3)
    stride = int(rng.choice([4, 8, 16]))
    im_info = np.float32([h * stride, w * stride, float(rng.uniform(0.5, 1.5))])
    params = {0: stride, 1: int(rng.choice([8, 16])), 4: float(rng.uniform(0.3, 0.8)), 5: int(rng.integers(1, 16))}
    if i % 3 == 1:
        params[2] = int(rng.integers(5, 30))
    if i % 4 == 2:
        params[3] = int(rng.integers(1, 10))
    n_out = 1 + i % 2
    ours = sn.run_layer("Proposal", params, [], [score, bbox, im_info], n_out)
    if ours[0].shape[0] == 0:  # nothing kept: the wheel refuses to create an empty top (-100)
        with pytest.raises(wheel.OracleError, match="-100"):
            wheel.wheel_run("Proposal", params, [], [score, bbox, im_info], n_out)
        return
    wheel.assert_close(
        ours, wheel.wheel_run("Proposal", params, [], [score, bbox, im_info], n_out), what=f"Proposal {params}"
    )


def _yolo_input(rng, nb, nc, h, w):
    return _f(rng, nb * (5 + nc), h, w, scale=1.5)


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_yolodetectionoutput(i):
    rng = np.random.default_rng(14000 + i)
    nb, nc = int(rng.integers(1, 4)), int(rng.integers(1, 5))
    xs = [_yolo_input(rng, nb, nc, *(int(v) for v in rng.integers(1, 6, size=2))) for _ in range(1 + i % 2)]
    params = {
        0: nc,
        1: nb,
        2: float(rng.uniform(0.05, 0.6)),
        3: float(rng.uniform(0.2, 0.7)),
        4: [float(v) for v in rng.uniform(0.5, 4, size=2 * nb)],
    }
    if i == 7:
        params[2] = 2.0  # nothing detected: ncnn keeps its (softmaxed) first bottom as the top
    _check("YoloDetectionOutput", params, [], xs)


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_yolov3detectionoutput(i):
    rng = np.random.default_rng(15000 + i)
    nb, nc = int(rng.integers(1, 4)), int(rng.integers(1, 5))
    nin = 1 + i % 3
    xs = [_yolo_input(rng, nb, nc, *(int(v) for v in rng.integers(1, 6, size=2))) for _ in range(nin)]
    nbias = int(rng.integers(nb, nb * nin + 2))
    params = {
        0: nc,
        1: nb,
        2: float(rng.uniform(0.05, 0.6)),
        3: float(rng.uniform(0.2, 0.7)),
        4: [float(v) for v in rng.uniform(5, 60, size=2 * nbias)],
        5: [float(v) for v in rng.integers(0, nbias, size=nb * nin)],
        6: [float(v) for v in rng.choice([8.0, 16.0, 32.0], size=nin)],
    }
    if i == 5:
        params[2] = 2.0
    _check("Yolov3DetectionOutput", params, [], xs)


def _roi(rng, h, w, scale):
    x1, x2 = np.sort(rng.uniform(-1, w + 1, size=2)) / scale
    y1, y2 = np.sort(rng.uniform(-1, h + 1, size=2)) / scale
    return np.float32([x1, y1, x2, y2])


def _roipool_reference(x, roi, pw, ph, scale):
    """ncnn's roipooling.cpp semantics, written out with python loops."""
    c, h, w = x.shape
    x1, y1, x2, y2 = (int(np.floor(abs(v) + 0.5) * np.sign(v)) for v in np.float32(roi) * np.float32(scale))
    rw, rh = max(x2 - x1 + 1, 1), max(y2 - y1 + 1, 1)
    bw, bh = np.float32(rw) / np.float32(pw), np.float32(rh) / np.float32(ph)
    out = np.zeros((c, ph, pw), np.float32)
    for i in range(ph):
        for j in range(pw):
            hs = min(max(y1 + int(np.floor(np.float32(i) * bh)), 0), h)
            he = min(max(y1 + int(np.ceil(np.float32(i + 1) * bh)), 0), h)
            ws = min(max(x1 + int(np.floor(np.float32(j) * bw)), 0), w)
            we = min(max(x1 + int(np.ceil(np.float32(j + 1) * bw)), 0), w)
            if he > hs and we > ws:
                out[:, i, j] = x[:, hs:he, ws:we].max(axis=(1, 2))
    return out


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_roipooling(i):
    """Against ncnn's source semantics always, and against the wheel on every cell whose bin borders are not
    whole numbers computed by a division: there the wheel 1.0.20261020 (a fast-math build) uses a
    CPU-dependent reciprocal estimate and may start a bin one cell early (test_roipooling_whole_borders
    below; tests/ncnn/quirks.py)."""
    rng = np.random.default_rng(16000 + i)
    c, h, w = int(rng.integers(1, 4)), int(rng.integers(2, 9)), int(rng.integers(2, 9))
    scale = float(rng.choice([1.0, 0.5, 0.25]))
    pw, ph = (int(v) for v in rng.choice([1, 3, 2, 4], size=2, p=[0.3, 0.3, 0.2, 0.2]))
    params = {0: pw, 1: ph, 2: scale}
    x, roi = _f(rng, c, h, w), _roi(rng, h, w, scale)
    ours = sn.run_layer("ROIPooling", params, [], [x, roi])
    np.testing.assert_allclose(ours[0], _roipool_reference(x, roi, pw, ph, scale), rtol=1e-6, atol=1e-6)
    mask = quirks.roipooling_mask(params, roi, c)
    wheel.assert_close(
        ours, wheel.wheel_run("ROIPooling", params, [], [x, roi]), what=f"ROIPooling {params}", masks=[mask]
    )


def test_roipooling_whole_borders():
    """roipooling.cpp: bin_size_w = (float)roi_w / (float)pooled_width = 2.0f / 2.0f = 1.0f exactly (IEEE 754
    division is correctly rounded), so bin 1 starts at floorf(1 * 1.0f) = 1 and covers cell 1 only. The
    wheel on this project's machines gives max(cell 0, cell 1) there (its division is an estimate just below
    1.0f): the wheel is wrong on this case and stdops keeps the source rule."""
    x = np.float32([[[0.0, -1.0]]])  # c=1, h=1, w=2
    roi = np.float32([0, 0, 1, 0])
    y = sn.run_layer("ROIPooling", {0: 2, 1: 1, 2: 1.0}, [], [x, roi])[0]
    np.testing.assert_array_equal(y, np.float32([[[0.0, -1.0]]]))
    assert not quirks.roipooling_mask({0: 2, 1: 1, 2: 1.0}, roi, 1).any()  # both bins have a whole border


@needs_wheel
@pytest.mark.parametrize("i", range(N + 6))
def test_roialign(i):
    rng = np.random.default_rng(17000 + i)
    c, h, w = int(rng.integers(1, 4)), int(rng.integers(2, 9)), int(rng.integers(2, 9))
    scale = float(rng.choice([1.0, 0.5, 0.25]))
    params = {
        0: int(rng.integers(1, 4)),
        1: int(rng.integers(1, 4)),
        2: scale,
        3: int(rng.choice([0, 0, 1, 2])),
        4: (i // 2) % 2,
        5: i % 2,
    }
    roi = _roi(rng, h - 0.6, w - 0.6, scale)
    _check("ROIAlign", params, [], [_f(rng, c, h, w), roi])


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_psroipooling(i):
    rng = np.random.default_rng(18000 + i)
    ph, pw, od = (int(v) for v in rng.integers(1, 4, size=3))
    h, w = int(rng.integers(2, 9)), int(rng.integers(2, 9))
    scale = float(rng.choice([1.0, 0.5, 0.0625]))
    params = {0: pw, 1: ph, 2: scale, 3: od}
    _check("PSROIPooling", params, [], [_f(rng, od * ph * pw, h, w), _roi(rng, h, w, scale)])


def test_bad_params():
    x = np.zeros((4, 3, 3), np.float32)
    with pytest.raises(ModelFormatError, match="float literal"):
        sn.run_layer("ROIPooling", {0: 2.5}, [], [x, np.zeros(4, np.float32)])
    with pytest.raises(ModelFormatError, match="expected an array|float element"):
        sn.run_layer("PriorBox", {0: "abc"}, [], [x])
    with pytest.raises(ValueError, match="channels"):
        sn.run_layer("PSROIPooling", {0: 2, 1: 2, 3: 2}, [], [x, np.zeros(4, np.float32)])
    with pytest.raises(ValueError, match="biases"):
        sn.run_layer("YoloDetectionOutput", {0: 1, 1: 2, 4: [1.0]}, [], [np.zeros((12, 2, 2), np.float32)])


@needs_wheel
def test_roipooling_more_cases_against_the_wheel():
    """24 more wheel cases, every cell the wheel computes deterministically (quirks.roipooling_mask)."""
    cases, inputs = [], []
    for i in range(24):
        rng = np.random.default_rng(16500 + i)
        c, h, w = int(rng.integers(1, 4)), int(rng.integers(2, 9)), int(rng.integers(2, 9))
        scale = float(rng.choice([1.0, 0.5, 0.25]))
        pw, ph = (int(v) for v in rng.choice([1, 2, 3, 5], size=2))
        params = {0: pw, 1: ph, 2: scale}
        x, roi = _f(rng, c, h, w), _roi(rng, h, w, scale)
        cases.append(("ROIPooling", params, [], [x, roi]))
        inputs.append((x, roi, pw, ph, scale))
    theirs = wheel.wheel_batch(cases)
    for case, th, (x, roi, pw, ph, scale) in zip(cases, theirs, inputs):
        ours = sn.run_layer(*case)
        np.testing.assert_allclose(ours[0], _roipool_reference(x, roi, pw, ph, scale), rtol=1e-6, atol=1e-6)
        wheel.assert_close(
            ours, th, what=f"ROIPooling {case[1]}", masks=[quirks.roipooling_mask(case[1], roi, x.shape[0])]
        )
