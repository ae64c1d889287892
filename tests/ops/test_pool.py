"""Pooling kernels against naive per-window formulas written here (loops over output positions)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stdops.errors import KernelError
from stdops.ops.pool import (
    average_pool,
    global_average_pool,
    global_lp_pool,
    global_max_pool,
    lp_pool,
    max_pool,
    max_pool_values,
    max_unpool,
)
from stdops.ops.roi import max_roi_pool, roi_align

RNG = np.random.default_rng(42)


# ----------------------------------------------------------------------------- naive reference
def _out_and_pads(sp, k, s, d, pads, auto_pad, ceil_mode):
    n = len(sp)
    dk = [(k[i] - 1) * d[i] + 1 for i in range(n)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [math.ceil(sp[i] / s[i]) for i in range(n)]
        tot = [max(0, (out[i] - 1) * s[i] + dk[i] - sp[i]) for i in range(n)]
        b = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in tot]
        e = [t - bb for t, bb in zip(tot, b)]
        return out, b, e
    if auto_pad == "VALID":
        b = e = [0] * n
    else:
        b, e = list(pads[:n]) if pads else [0] * n, list(pads[n:]) if pads else [0] * n
    out = []
    for i in range(n):
        span = sp[i] + b[i] + e[i] - dk[i]
        o = (math.ceil(span / s[i]) if ceil_mode else span // s[i]) + 1
        if ceil_mode and (o - 1) * s[i] >= sp[i] + b[i]:
            o -= 1
        out.append(o)
    return out, b, e


def naive_pool(x, kind, k, s=None, d=None, pads=None, auto_pad="NOTSET", ceil_mode=0, cip=0, p=2, storage_order=0):
    n = x.ndim - 2
    s = s or [1] * n
    d = d or [1] * n
    sp = x.shape[2:]
    out, b, e = _out_and_pads(sp, k, s, d, pads, auto_pad, ceil_mode)
    y = np.zeros(x.shape[:2] + tuple(out), np.float64)
    idx = np.zeros(y.shape, np.int64)
    for nn in range(x.shape[0]):
        for c in range(x.shape[1]):
            for o in np.ndindex(*out):
                vals, flat, counted = [], [], 0
                for t in np.ndindex(*k):
                    pos = [o[i] * s[i] + t[i] * d[i] - b[i] for i in range(n)]
                    inside = all(0 <= pos[i] < sp[i] for i in range(n))
                    in_padded = all(-b[i] <= pos[i] < sp[i] + e[i] for i in range(n))
                    if inside:
                        vals.append(float(x[(nn, c) + tuple(pos)]))
                        if storage_order:
                            f = sum(pos[i] * math.prod(sp[:i]) for i in range(n))
                        else:
                            f = sum(pos[i] * math.prod(sp[i + 1 :]) for i in range(n))
                        flat.append((nn * x.shape[1] + c) * math.prod(sp) + f)
                    if in_padded if cip else inside:
                        counted += 1
                at = (nn, c) + o
                if kind == "max":
                    j = int(np.argmax(vals))
                    y[at], idx[at] = vals[j], flat[j]
                elif kind == "avg":
                    y[at] = sum(vals) / counted
                else:
                    y[at] = sum(abs(v) ** p for v in vals) ** (1.0 / p)
    return y, idx


POOL_CASES = [
    # shape, kernel, attrs
    ((1, 2, 7), [3], {}),
    ((2, 3, 6, 7), [3, 2], {}),
    ((1, 2, 8, 8), [3, 3], dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 7, 9), [2, 3], dict(strides=[2, 3], pads=[0, 1, 1, 2])),
    ((1, 1, 7, 7), [3, 3], dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ((1, 1, 6, 7), [2, 3], dict(auto_pad="SAME_LOWER", strides=[1, 2])),
    ((1, 1, 7, 8), [3, 2], dict(auto_pad="VALID", strides=[2, 2])),
    ((1, 2, 9, 9), [2, 2], dict(dilations=[2, 3], strides=[1, 2])),
    ((1, 2, 6, 6), [3, 3], dict(strides=[2, 2], ceil_mode=1)),
    ((1, 1, 5, 5), [2, 2], dict(strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ((1, 2, 4, 5, 6), [2, 2, 3], dict(strides=[1, 2, 2], pads=[1, 0, 1, 0, 1, 1])),
    ((1, 1, 9, 9, 9), [2, 2, 2], dict(dilations=[2, 2, 2], strides=[2, 2, 2], ceil_mode=1)),
    # stride 1 along the last axis with as many outputs as inputs: taps as shifted flat views
    ((2, 3, 6, 7), [3, 3], dict(pads=[1, 1, 1, 1])),
    ((1, 2, 7), [3], dict(pads=[1, 1])),
    ((1, 2, 6, 10), [2, 3], dict(pads=[0, 2, 1, 2], dilations=[1, 2])),
    ((1, 1, 4, 8), [1, 4], dict(pads=[0, 1, 0, 2])),
    ((1, 1, 3, 6), [1, 4], dict(pads=[0, 3, 0, 0])),  # a window holding one real column
    ((1, 2, 5, 4), [2, 3], dict(auto_pad="SAME_UPPER")),
]
STRIDE1_CASES = POOL_CASES[12:]


def _naive_kwargs(k, a):
    return dict(
        k=k,
        s=a.get("strides"),
        d=a.get("dilations"),
        pads=a.get("pads"),
        auto_pad=a.get("auto_pad", "NOTSET"),
        ceil_mode=a.get("ceil_mode", 0),
    )


@pytest.mark.parametrize("shape,k,attrs", POOL_CASES)
def test_max_pool(shape, k, attrs):
    x = RNG.standard_normal(shape).astype(np.float32)
    y, idx = max_pool(x, kernel_shape=k, **attrs)
    ry, ridx = naive_pool(x, "max", **_naive_kwargs(k, attrs))
    assert y.dtype == np.float32 and idx.dtype == np.int64
    np.testing.assert_array_equal(y, ry.astype(np.float32))
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_array_equal(max_pool_values(x, kernel_shape=k, **attrs), y)


@pytest.mark.parametrize("shape,k,attrs", POOL_CASES[:6])
def test_max_pool_storage_order(shape, k, attrs):
    x = RNG.standard_normal(shape).astype(np.float32)
    _, idx = max_pool(x, kernel_shape=k, storage_order=1, **attrs)
    _, ridx = naive_pool(x, "max", storage_order=1, **_naive_kwargs(k, attrs))
    np.testing.assert_array_equal(idx, ridx)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.float16, np.float64])
def test_max_pool_dtypes(dtype):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        x = RNG.integers(info.min, info.max, (1, 2, 6, 6), endpoint=True).astype(dtype)
        x[0, 0, :2, :2] = info.min  # a window of minimums next to the padding
    else:
        x = RNG.standard_normal((1, 2, 6, 6)).astype(dtype)
    y, idx = max_pool(x, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    ry, ridx = naive_pool(x, "max", [3, 3], [2, 2], None, [1, 1, 1, 1])
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, ry.astype(dtype))
    np.testing.assert_array_equal(x.reshape(-1)[idx], y)  # every index points at its maximum
    np.testing.assert_array_equal(idx, ridx)


@pytest.mark.parametrize("cip", [0, 1])
@pytest.mark.parametrize("shape,k,attrs", POOL_CASES)
def test_average_pool(shape, k, attrs, cip):
    x = RNG.standard_normal(shape).astype(np.float32)
    y = average_pool(x, kernel_shape=k, count_include_pad=cip, **attrs)
    ry, _ = naive_pool(x, "avg", cip=cip, **_naive_kwargs(k, attrs))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape,k,attrs", STRIDE1_CASES)
def test_lp_pool_stride1(shape, k, attrs, p):
    x = RNG.standard_normal(shape).astype(np.float32)
    ry, _ = naive_pool(x, "lp", p=p, **_naive_kwargs(k, attrs))
    np.testing.assert_allclose(lp_pool(x, kernel_shape=k, p=p, **attrs), ry, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.int8, np.float16])
def test_max_pool_stride1_dtypes(dtype):
    x = (RNG.standard_normal((1, 2, 5, 9)) * 50).astype(dtype)
    y = max_pool_values(x, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    ry, _ = naive_pool(x, "max", [3, 3], None, None, [1, 1, 1, 1])
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, ry.astype(dtype))


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_average_pool_dtypes(dtype):
    x = RNG.standard_normal((1, 3, 6, 6)).astype(dtype)
    y = average_pool(x, kernel_shape=[2, 2], pads=[1, 1, 0, 0])
    ry, _ = naive_pool(x.astype(np.float64), "avg", [2, 2], pads=[1, 1, 0, 0])
    assert y.dtype == dtype
    np.testing.assert_allclose(y.astype(np.float64), ry, rtol=2e-3 if dtype == np.float16 else 1e-12)


@pytest.mark.parametrize("p", [1, 2, 3, 2.5])
@pytest.mark.parametrize("shape,k,attrs", POOL_CASES[:8])
def test_lp_pool(shape, k, attrs, p):
    x = RNG.standard_normal(shape).astype(np.float32)
    y = lp_pool(x, kernel_shape=k, p=p, **attrs)
    ry, _ = naive_pool(x, "lp", p=p, **_naive_kwargs(k, attrs))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ry, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 4, 3, 5), (2, 2, 3, 4, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_global_pools(shape, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    axes = tuple(range(2, x.ndim))
    x64 = x.astype(np.float64)
    tol = dict(rtol=2e-3) if dtype == np.float16 else dict(rtol=1e-5)
    for fn, ref in [
        (global_average_pool, x64.mean(axis=axes, keepdims=True)),
        (global_max_pool, x64.max(axis=axes, keepdims=True)),
        (global_lp_pool, np.sqrt((x64**2).sum(axis=axes, keepdims=True))),
    ]:
        y = fn(x)
        assert y.dtype == dtype and y.shape == shape[:2] + (1,) * (x.ndim - 2)
        np.testing.assert_allclose(y.astype(np.float64), ref, **tol)


@pytest.mark.parametrize("p", [1, 2, 3, 4.0])
def test_global_lp_pool_p(p):
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    ref = (np.abs(x.astype(np.float64)) ** p).sum(axis=(2, 3), keepdims=True) ** (1.0 / p)
    y = global_lp_pool(x, p=p)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref, rtol=1e-5)


def test_global_lp_pool_onnx_versions():
    """GlobalLpPool-1 (float p) and -2 (int p) through the ONNX front end."""
    from onnx import TensorProto, helper

    import stdops.onnx

    x = RNG.standard_normal((1, 2, 3, 3)).astype(np.float32)
    for opset, p in [(1, 3.0), (2, 3), (22, 1)]:
        node = helper.make_node("GlobalLpPool", ["X"], ["Y"], p=p)
        g = helper.make_graph(
            [node],
            "g",
            [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)],
            [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        )
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        (y,) = stdops.onnx.run(m, [x])
        ref = (np.abs(x.astype(np.float64)) ** p).sum(axis=(2, 3), keepdims=True) ** (1.0 / p)
        np.testing.assert_allclose(y, ref, rtol=1e-5)


def test_max_unpool_roundtrip():
    x = (np.abs(RNG.standard_normal((2, 3, 6, 8))) + 0.1).astype(np.float32)
    y, idx = max_pool(x, kernel_shape=[2, 2], strides=[2, 2])
    u = max_unpool(y, idx, kernel_shape=[2, 2], strides=[2, 2])
    assert u.shape == x.shape and u.dtype == x.dtype
    ref = np.zeros_like(x)
    ref.reshape(-1)[idx.reshape(-1)] = y.reshape(-1)
    np.testing.assert_array_equal(u, ref)
    # pooling the unpooled tensor gives the pooled values back
    np.testing.assert_array_equal(max_pool(u, kernel_shape=[2, 2], strides=[2, 2])[0], y)
    big = max_unpool(y, idx, np.array([2, 3, 7, 9]), kernel_shape=[2, 2], strides=[2, 2])
    assert big.shape == (2, 3, 7, 9)
    np.testing.assert_array_equal(big[:, :, :6, :8], ref)
    assert not big[:, :, 6:].any() and not big[:, :, :, 8:].any()


@pytest.mark.parametrize(
    "call",
    [
        lambda: max_pool(np.zeros((1, 1, 2, 2), np.float32), kernel_shape=[3, 3]),  # kernel > input
        lambda: max_pool(np.zeros((1, 1, 4, 4), np.float32), kernel_shape=[2]),  # wrong length
        lambda: max_pool(np.zeros((1, 1, 4, 4), np.float32), kernel_shape=[2, 2], pads=[1, 1]),
        lambda: max_pool(np.zeros((1, 1, 4, 4), np.float32), kernel_shape=[2, 2], auto_pad="SAME"),
        lambda: max_pool(np.zeros((4, 4), np.float32), kernel_shape=[2, 2]),  # no N, C
        lambda: average_pool(np.zeros((1, 1, 4, 4), np.float32), kernel_shape=[2, 2], strides=[0, 1]),
        lambda: average_pool(np.zeros((1, 1, 4, 4), np.int32), kernel_shape=[2, 2]),
        lambda: lp_pool(np.zeros((1, 1, 4, 4), np.float32), kernel_shape=[2, 2], p=0),
        lambda: global_average_pool(np.zeros((1, 1), np.float32)),
        lambda: max_unpool(
            np.zeros((1, 1, 2, 2), np.float32), np.full((1, 1, 2, 2), 99), kernel_shape=[2, 2], strides=[2, 2]
        ),
        lambda: max_unpool(np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 1, 2, 1), np.int64), kernel_shape=[2, 2]),
        lambda: max_roi_pool(np.zeros((1, 1, 4, 4), np.float32), np.zeros((1, 4), np.float32), pooled_shape=[2, 2]),
        lambda: max_roi_pool(
            np.zeros((1, 1, 4, 4), np.float32), np.array([[3, 0, 0, 1, 1]], np.float32), pooled_shape=[2, 2]
        ),
        lambda: roi_align(np.zeros((1, 1, 4, 4), np.float32), np.zeros((1, 4), np.float32), np.array([1])),
        lambda: roi_align(np.zeros((1, 1, 4, 4), np.float32), np.zeros((1, 4), np.float32), np.array([0]), mode="sum"),
    ],
)
def test_bad_inputs(call):
    with pytest.raises(KernelError):
        call()


# ----------------------------------------------------------------------------- RoI pooling
def naive_max_roi_pool(x, rois, ph, pw, scale):
    R, (_, C, H, W) = rois.shape[0], x.shape
    y = np.zeros((R, C, ph, pw), x.dtype)
    for r in range(R):
        b = int(rois[r, 0])
        x1, y1, x2, y2 = [int(math.floor(abs(v * scale) + 0.5) * (1 if v >= 0 else -1)) for v in rois[r, 1:]]
        h, w = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        for i in range(ph):
            for j in range(pw):
                hs = min(max(math.floor(i * h / ph) + y1, 0), H)
                he = min(max(math.ceil((i + 1) * h / ph) + y1, 0), H)
                ws = min(max(math.floor(j * w / pw) + x1, 0), W)
                we = min(max(math.ceil((j + 1) * w / pw) + x1, 0), W)
                if he > hs and we > ws:
                    y[r, :, i, j] = x[b, :, hs:he, ws:we].max(axis=(1, 2))
    return y


@pytest.mark.parametrize("pooled,scale", [((2, 2), 1.0), ((3, 4), 0.5), ((1, 1), 0.25), ((5, 5), 1.0)])
def test_max_roi_pool(pooled, scale):
    x = RNG.standard_normal((2, 3, 10, 12)).astype(np.float32)
    rois = np.array(
        [[0, 0, 0, 11, 9], [1, 2.4, 3.6, 7.5, 8.2], [0, 5, 5, 5, 5], [1, -3, -2, 20, 30], [1, 9, 1, 3, 4]], np.float32
    )
    rois[:, 1:] /= scale
    y = max_roi_pool(x, rois, pooled_shape=pooled, spatial_scale=scale)
    assert y.shape == (5, 3) + pooled and y.dtype == np.float32
    np.testing.assert_array_equal(y, naive_max_roi_pool(x, rois, *pooled, scale))


def test_max_roi_pool_matches_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    x = RNG.standard_normal((2, 4, 9, 11)).astype(np.float32)
    rois = np.array([[0, 1, 1, 6, 7], [1, 0.5, 2.5, 10, 8], [1, 3, 3, 3, 3]], np.float32) * np.array(
        [1, 2, 2, 2, 2], np.float32
    )
    node = helper.make_node("MaxRoiPool", ["X", "R"], ["Y"], pooled_shape=[3, 2], spatial_scale=0.5)
    g = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape),
            helper.make_tensor_value_info("R", TensorProto.FLOAT, rois.shape),
        ],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"X": x, "R": rois})[0]
    np.testing.assert_array_equal(max_roi_pool(x, rois, pooled_shape=[3, 2], spatial_scale=0.5), ref)


def naive_roi_align(x, rois, bi, oh, ow, sr, scale, mode, half):
    R, (_, C, H, W) = rois.shape[0], x.shape
    y = np.zeros((R, C, oh, ow))
    off = 0.5 if half else 0.0

    def corners(v, size):
        if v < -1.0 or v > size:
            return None
        v = max(v, 0.0)
        lo = int(v)
        if lo >= size - 1:
            return [(size - 1, 1.0), (size - 1, 0.0)]
        return [(lo, 1 - (v - lo)), (lo + 1, v - lo)]

    for r in range(R):
        x1, y1, x2, y2 = [float(v) * scale - off for v in rois[r]]
        rw, rh = x2 - x1, y2 - y1
        if not half:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = sr if sr > 0 else math.ceil(rh / oh)
        gw = sr if sr > 0 else math.ceil(rw / ow)
        img = x[bi[r]].astype(np.float64)
        for i in range(oh):
            for j in range(ow):
                samples = []
                for a in range(gh):
                    for b in range(gw):
                        yy = y1 + i * rh / oh + (a + 0.5) * rh / oh / gh
                        xx = x1 + j * rw / ow + (b + 0.5) * rw / ow / gw
                        cy, cx = corners(yy, H), corners(xx, W)
                        if cy is None or cx is None:
                            samples.append(np.zeros(C) if mode == "avg" else np.zeros(C))
                            continue
                        terms = [wy * wx * img[:, py, px] for py, wy in cy for px, wx in cx]
                        samples.append(sum(terms) if mode == "avg" else np.max(terms, axis=0))
                if samples:
                    y[r, :, i, j] = (
                        (np.sum(samples, axis=0) / max(gh * gw, 1)) if mode == "avg" else np.max(samples, axis=0)
                    )
    return y


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("half", [True, False])
@pytest.mark.parametrize("sr,scale,out", [(0, 1.0, (3, 3)), (2, 0.5, (2, 4)), (1, 0.25, (1, 1))])
def test_roi_align(mode, half, sr, scale, out):
    x = RNG.standard_normal((2, 3, 8, 9)).astype(np.float32)
    rois = np.array([[0, 0, 8, 7], [1.5, 2.2, 6.7, 5.1], [3, 3, 3.2, 3.1], [-2, -3, 12, 10]], np.float32) / scale
    bi = np.array([0, 1, 1, 0], np.int64)
    y = roi_align(
        x,
        rois,
        bi,
        mode=mode,
        output_height=out[0],
        output_width=out[1],
        sampling_ratio=sr,
        spatial_scale=scale,
        coordinate_transformation_mode="half_pixel" if half else "output_half_pixel",
    )
    ref = naive_roi_align(x, rois, bi, out[0], out[1], sr, scale, mode, half)
    assert y.dtype == np.float32 and y.shape == (4, 3) + out
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_roi_align_10_is_output_half_pixel():
    from onnx import TensorProto, helper

    import stdops.onnx

    x = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32)
    rois = np.array([[0.5, 1.0, 4.5, 5.0]], np.float32)
    bi = np.array([0], np.int64)
    node = helper.make_node("RoiAlign", ["X", "R", "B"], ["Y"], output_height=2, output_width=2)
    ins = [
        helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape),
        helper.make_tensor_value_info("R", TensorProto.FLOAT, rois.shape),
        helper.make_tensor_value_info("B", TensorProto.INT64, bi.shape),
    ]
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)])
    (y,) = stdops.onnx.run(m, [x, rois, bi])
    ref = roi_align(x, rois, bi, output_height=2, output_width=2, coordinate_transformation_mode="output_half_pixel")
    np.testing.assert_array_equal(y, ref)
