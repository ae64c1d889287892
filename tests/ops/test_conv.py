"""Convolution kernels against naive formulas written here (loops over output positions / taps)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import stdops.onnx
from stdops.errors import KernelError, OpError
from stdops.ops.conv import conv
from stdops.ops.conv_transpose import col2im, conv_transpose, deform_conv
from stdops.ops.quant import conv_integer, qlinear_conv

RNG = np.random.default_rng(7)


# ----------------------------------------------------------------------------- naive references
def _pads(sp, k, s, d, pads, auto_pad):
    n = len(sp)
    dk = [(k[i] - 1) * d[i] + 1 for i in range(n)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [math.ceil(sp[i] / s[i]) for i in range(n)]
        tot = [max(0, (out[i] - 1) * s[i] + dk[i] - sp[i]) for i in range(n)]
        b = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in tot]
        return b, out
    b = [0] * n if auto_pad == "VALID" or not pads else list(pads[:n])
    e = [0] * n if auto_pad == "VALID" or not pads else list(pads[n:])
    return b, [(sp[i] + b[i] + e[i] - dk[i]) // s[i] + 1 for i in range(n)]


def naive_conv(x, w, b=None, strides=None, dilations=None, pads=None, auto_pad="NOTSET", group=1):
    x, w = x.astype(np.float64), w.astype(np.float64)
    n = x.ndim - 2
    s, d = strides or [1] * n, dilations or [1] * n
    N, C = x.shape[:2]
    M, Cg = w.shape[:2]
    k = w.shape[2:]
    begin, out = _pads(x.shape[2:], k, s, d, pads, auto_pad)
    y = np.zeros((N, M) + tuple(out))
    for m in range(M):
        g = m // (M // group)
        for o in np.ndindex(*out):
            acc = np.zeros(N)
            for t in np.ndindex(*k):
                pos = [o[i] * s[i] + t[i] * d[i] - begin[i] for i in range(n)]
                if all(0 <= pos[i] < x.shape[2 + i] for i in range(n)):
                    acc += x[(slice(None), slice(g * Cg, (g + 1) * Cg)) + tuple(pos)] @ w[(m, slice(None)) + t]
            y[(slice(None), m) + o] = acc + (0 if b is None else b[m])
    return y


CONV_CASES = [
    # x shape, w shape, attrs
    ((1, 3, 7, 7), (4, 3, 3, 3), {}),
    ((2, 3, 8, 9), (5, 3, 3, 2), dict(pads=[1, 0, 2, 1], strides=[2, 1])),
    ((1, 4, 9, 9), (6, 2, 3, 3), dict(group=2, dilations=[2, 1], pads=[1, 1, 1, 1])),
    ((1, 6, 10, 9), (6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1], strides=[2, 2])),  # depthwise
    ((2, 4, 9, 8), (8, 1, 3, 3), dict(group=4, auto_pad="SAME_LOWER", strides=[2, 3])),  # multiplier 2
    ((1, 5, 11, 10), (5, 1, 3, 2), dict(group=5, dilations=[2, 3], pads=[2, 0, 1, 1])),
    ((2, 8, 5, 6), (4, 8, 1, 1), {}),  # 1x1
    ((1, 8, 7, 7), (6, 4, 1, 1), dict(group=2, strides=[2, 2])),  # grouped strided 1x1
    ((1, 4, 6, 6), (3, 4, 1, 1), dict(pads=[1, 0, 0, 1])),  # padded 1x1
    ((1, 3, 7, 8), (2, 3, 3, 3), dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ((1, 3, 8, 8), (2, 3, 4, 4), dict(auto_pad="SAME_UPPER")),
    ((1, 3, 8, 8), (2, 3, 4, 4), dict(auto_pad="SAME_LOWER")),
    ((1, 3, 7, 8), (2, 3, 3, 3), dict(auto_pad="VALID", strides=[2, 2])),
    ((2, 3, 11), (4, 3, 3), dict(strides=[2], pads=[1, 2])),  # 1-D
    ((1, 4, 9), (4, 1, 3), dict(group=4, strides=[2])),  # 1-D depthwise
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 2), dict(pads=[1, 0, 1, 0, 1, 1])),  # 3-D
    ((1, 4, 5, 6, 7), (8, 1, 2, 3, 2), dict(group=4, strides=[1, 2, 2], pads=[1, 0, 1, 0, 1, 1])),
    ((2, 96, 4, 5), (100, 96, 3, 3), dict(pads=[1, 0, 2, 1])),  # many channels, small map: direct
    ((1, 100, 5, 4), (96, 100, 3, 3), dict(auto_pad="SAME_LOWER")),
    ((1, 32, 30, 29), (24, 32, 3, 3), dict(pads=[1, 1, 1, 1])),  # Winograd F(4x4, 3x3), partial tiles
    ((2, 40, 15, 14), (36, 40, 3, 3), dict(pads=[1, 1, 1, 1])),  # Winograd F(2x2, 3x3)
]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
def test_conv(xs, ws, attrs):
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32)
    ref = naive_conv(x, w, b, **attrs)
    y = conv(x, w, b, **attrs)
    assert y.dtype == np.float32 and y.shape == ref.shape
    # float32 error is relative to the terms summed, sum |w| |x| + |b| (Winograd F(4,3): up to 5e-6 of it)
    bound = conv(np.abs(x), np.abs(w), np.abs(b), **attrs)
    assert np.all(np.abs(y - ref) <= 1e-5 * bound), float(np.max(np.abs(y - ref) / bound))
    y0 = conv(x, w, **attrs)  # no bias
    assert np.all(np.abs(y0 - naive_conv(x, w, **attrs)) <= 1e-5 * bound)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_conv_dtypes(dtype):
    x = RNG.standard_normal((1, 4, 6, 6)).astype(dtype)
    w = RNG.standard_normal((4, 2, 3, 3)).astype(dtype)
    y = conv(x, w, group=2, pads=[1, 1, 1, 1])
    assert y.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 1e-2
    np.testing.assert_allclose(
        y.astype(np.float64), naive_conv(x, w, group=2, pads=[1, 1, 1, 1]), rtol=tol, atol=tol * 5
    )


def test_conv_does_not_modify_inputs():
    x = RNG.standard_normal((1, 3, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(2).astype(np.float32)
    xc, wc, bc = x.copy(), w.copy(), b.copy()
    conv(x, w, b, pads=[1, 1, 1, 1])
    np.testing.assert_array_equal(x, xc)
    np.testing.assert_array_equal(w, wc)
    np.testing.assert_array_equal(b, bc)


def _one_node(op_type, inputs, initializers, attrs, opset=17):
    vis = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name, _ in inputs]
    node = helper.make_node(op_type, [n for n, _ in inputs] + [n for n, _ in initializers], ["Y"], **attrs)
    g = helper.make_graph(
        [node],
        "g",
        vis,
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, n) for n, v in initializers],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("opset", [1, 11, 22])
@pytest.mark.parametrize(
    "xs,ws,attrs",
    [CONV_CASES[i] for i in (1, 2, 3, 4, 7, 13, 15, 17, 19, 20)]
    + [
        ((1, 3, 9, 200), (4, 3, 3, 5), dict(strides=[2, 2], pads=[1, 2, 1, 2])),  # wide rows, bias folded
        ((2, 2, 5, 120), (3, 2, 3, 3), dict(pads=[1, 1, 1, 1])),
        ((1, 4, 6, 7), (12, 4, 1, 1), {}),  # 1x1 expanding: bias folded into the GEMM
        ((2, 3, 7, 7), (5, 3, 1, 1), dict(strides=[2, 2])),  # strided 1x1: X copied anyway, bias folded
        ((1, 3, 6, 6), (6, 3, 1, 1), dict(pads=[1, 0, 0, 1])),
        ((1, 12, 6, 7), (4, 12, 1, 1), {}),  # 1x1 narrowing: bias added after the GEMM
    ],
)
def test_conv_prepared_weights_through_onnx(xs, ws, attrs, opset):
    """The kernel's load-time preparation (W an initializer) computes what the kernel computes: the two
    sum in different orders, so the tolerance is float32 rounding scaled by the outputs' magnitude."""
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32)
    m = stdops.onnx.load(_one_node("Conv", [("X", x)], [("W", w), ("B", b)], attrs, opset))
    assert m.plan.nodes[0].bound.prepared
    y = m.run({"X": x})["Y"]
    # the two paths add the same terms in different orders (B inside or after the GEMM): float32 rounding
    # of a sum is relative to the magnitude of its terms, sum |w| |x| + |b|, not to the result
    bound = conv(np.abs(x), np.abs(w), np.abs(b), **attrs)
    assert np.all(np.abs(y - conv(x, w, b, **attrs)) <= 1e-6 * bound)
    y2 = m.run({"X": x})["Y"]  # a second run with the same prepared weight
    np.testing.assert_array_equal(y, y2)


def tapwise_depthwise(x, w, b=None, strides=None, dilations=None, pads=None, auto_pad="NOTSET", group=1):
    """Depthwise reference (C/group == 1) in float64: a loop over taps on a zero-padded copy."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    N, C, H, W = x.shape
    M, _, kh, kw = w.shape
    s, d = strides or [1, 1], dilations or [1, 1]
    begin, out = _pads((H, W), (kh, kw), s, d, pads, auto_pad)
    xp = np.zeros(
        (N, C, H + begin[0] + (kh - 1) * d[0] + out[0] * s[0], W + begin[1] + (kw - 1) * d[1] + out[1] * s[1])
    )
    xp[:, :, begin[0] : begin[0] + H, begin[1] : begin[1] + W] = x
    y = np.zeros((N, M) + tuple(out))
    ch = np.arange(M) // (M // group)
    for ky in range(kh):
        for kx in range(kw):
            r0, c0 = ky * d[0], kx * d[1]
            v = xp[:, ch, r0 : r0 + (out[0] - 1) * s[0] + 1 : s[0], c0 : c0 + (out[1] - 1) * s[1] + 1 : s[1]]
            y += w[None, :, 0, ky, kx, None, None] * v
    return y if b is None else y + b.astype(np.float64)[None, :, None, None]


DEPTHWISE_WIDE = [  # wide planes: the row-block path (4 output rows per GEMM column)
    ((1, 3, 10, 100), (3, 1, 3, 3), dict(group=3, pads=[1, 1, 1, 1])),  # last row block partial
    ((2, 4, 9, 60), (8, 1, 3, 3), dict(group=4, pads=[1, 1, 1, 1])),  # batch 2, multiplier 2
    ((1, 3, 13, 50), (3, 1, 3, 3), dict(group=3, dilations=[2, 2], pads=[2, 2, 2, 2])),
    ((1, 3, 9, 200), (3, 1, 3, 3), dict(group=3, strides=[1, 2], pads=[1, 1, 1, 1])),  # column phases
    ((1, 2, 11, 97), (2, 1, 5, 2), dict(group=2, pads=[2, 0, 1, 1], dilations=[1, 3])),
    ((1, 2, 3, 120), (2, 1, 3, 3), dict(group=2, pads=[0, 1, 0, 1])),  # one output row
    ((1, 4, 12, 99), (4, 1, 3, 3), dict(group=4, auto_pad="SAME_UPPER")),
    ((1, 4, 30, 30), (4, 1, 3, 3), dict(group=4, strides=[2, 2], pads=[1, 1, 1, 1])),  # per-tap path
]


@pytest.mark.parametrize("xs,ws,attrs", DEPTHWISE_WIDE)
@pytest.mark.parametrize("fast", [True, False])  # the compiled kernel (when numba is there) and NumPy's
def test_depthwise_wide(xs, ws, attrs, fast, monkeypatch):
    from stdops.ops import _fast

    monkeypatch.setattr(_fast, "_enabled", fast and _fast.numba is not None)
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32)
    ref = tapwise_depthwise(x, w, b, **attrs)
    y = conv(x, w, b, **attrs)
    assert y.dtype == np.float32 and y.shape == ref.shape and y.flags.c_contiguous
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(conv(x, w, **attrs), tapwise_depthwise(x, w, **attrs), rtol=1e-4, atol=1e-4)
    y64 = conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), **attrs)
    assert y64.dtype == np.float64
    np.testing.assert_allclose(y64, ref, rtol=1e-12, atol=1e-12)
    m = stdops.onnx.load(_one_node("Conv", [("X", x)], [("W", w), ("B", b)], attrs))  # bias prepared, cached
    for _ in range(2):
        np.testing.assert_allclose(m.run({"X": x})["Y"], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("fast", [True, False])
def test_depthwise_wide_non_finite(bad, fast, monkeypatch):
    from stdops.ops import _fast

    monkeypatch.setattr(_fast, "_enabled", fast and _fast.numba is not None)
    """An inf/NaN reaches only the outputs whose window holds it (the row-block path falls back)."""
    x = RNG.standard_normal((1, 3, 12, 100)).astype(np.float32)
    x[0, 1, 5, 40] = bad
    w = RNG.standard_normal((3, 1, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    y = conv(x, w, b, group=3, pads=[1, 1, 1, 1])
    ref = tapwise_depthwise(x, w, b, group=3, pads=[1, 1, 1, 1])
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    assert np.isfinite(y).sum() == y.size - 9


def test_conv_prepared_weights_reports_bad_shapes():
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    m = stdops.onnx.load(_one_node("Conv", [("X", None)], [("W", w)], {}))
    with pytest.raises(OpError, match="channels"):
        m.run({"X": np.zeros((1, 5, 8, 8), np.float32)})


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: conv(np.zeros((1, 4, 5, 5), np.float32), np.zeros((2, 3, 3, 3), np.float32)), "channels"),
        (lambda: conv(np.zeros((1, 4, 5, 5), np.float32), np.zeros((3, 2, 3, 3), np.float32), group=2), "group"),
        (lambda: conv(np.zeros((1, 3, 2, 2), np.float32), np.zeros((2, 3, 3, 3), np.float32)), "larger"),
        (lambda: conv(np.zeros((1, 3, 5, 5), np.float32), np.zeros((2, 3, 3, 3), np.float32), pads=[1, 1]), "pads"),
        (
            lambda: conv(np.zeros((1, 3, 5, 5), np.float32), np.zeros((2, 3, 3, 3), np.float32), kernel_shape=[2, 2]),
            "kernel_shape",
        ),
        (lambda: conv(np.zeros((1, 3, 5, 5), np.float32), np.zeros((2, 3, 3), np.float32)), "spatial"),
        (lambda: conv(np.zeros((3, 5), np.float32), np.zeros((2, 3, 3), np.float32)), "shape"),
        (
            lambda: conv(
                np.zeros((1, 3, 5, 5), np.float32), np.zeros((2, 3, 3, 3), np.float32), np.zeros(3, np.float32)
            ),
            "B",
        ),
        (
            lambda: conv(np.zeros((1, 3, 5, 5), np.float32), np.zeros((2, 3, 3, 3), np.float32), strides=[0, 1]),
            "strides",
        ),
        (
            lambda: conv(np.zeros((1, 3, 5, 5), np.float32), np.zeros((2, 3, 3, 3), np.float32), auto_pad="SAME"),
            "auto_pad",
        ),
        (lambda: conv(np.zeros((1, 3, 5, 5), np.int32), np.zeros((2, 3, 3, 3), np.int32)), "float"),
        (lambda: conv_transpose(np.zeros((1, 3, 5, 5), np.float32), np.zeros((4, 2, 3, 3), np.float32)), "channels"),
        (
            lambda: conv_transpose(np.zeros((1, 3, 5, 5), np.float32), np.zeros((3, 2, 3, 3), np.float32), group=2),
            "group",
        ),
        (
            lambda: conv_transpose(
                np.zeros((1, 2, 3, 3), np.float32),
                np.zeros((2, 1, 3, 3), np.float32),
                strides=[2, 2],
                output_shape=[9, 9],
            ),
            "output_shape",
        ),
        (lambda: conv_integer(np.zeros((1, 3, 5, 5), np.float32), np.zeros((2, 3, 3, 3), np.uint8)), "int8"),
        (lambda: col2im(np.zeros((1, 4, 5), np.float32), np.array([3, 3]), np.array([2, 2])), "blocks"),
        (
            lambda: deform_conv(
                np.zeros((1, 2, 4, 4), np.float32),
                np.zeros((1, 2, 2, 2), np.float32),
                np.zeros((1, 8, 2, 2), np.float32),
            ),
            "offset",
        ),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises(KernelError, match=match):
        call()


# ----------------------------------------------------------------------------- integer convolutions
@pytest.mark.parametrize("xdt,wdt", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("per_channel", [False, True])
def test_conv_integer(xdt, wdt, per_channel):
    xi, wi = np.iinfo(xdt), np.iinfo(wdt)
    x = RNG.integers(xi.min, xi.max, (1, 4, 6, 5), endpoint=True).astype(xdt)
    w = RNG.integers(wi.min, wi.max, (6, 2, 3, 3), endpoint=True).astype(wdt)
    xz = np.array(xi.min + 100, xdt)
    wz = RNG.integers(wi.min, wi.max, 6).astype(wdt) if per_channel else np.array(wi.min + 3, wdt)
    y = conv_integer(x, w, xz, wz, group=2, pads=[1, 0, 1, 2])
    xx = x.astype(np.int64) - int(xz)
    ww = w.astype(np.int64) - (wz.astype(np.int64).reshape(-1, 1, 1, 1) if per_channel else int(wz))
    ref = naive_conv(xx, ww, group=2, pads=[1, 0, 1, 2])  # padding contributes (x_zp - x_zp) = 0
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, np.rint(ref).astype(np.int32))
    # default zero points are 0
    np.testing.assert_array_equal(
        conv_integer(x, w, group=2), np.rint(naive_conv(x.astype(np.int64), w.astype(np.int64), group=2))
    )


@pytest.mark.parametrize("ydt", [np.uint8, np.int8])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv(ydt, per_channel):
    x = RNG.integers(0, 255, (1, 3, 5, 5), endpoint=True).astype(np.uint8)
    w = RNG.integers(-128, 127, (4, 3, 2, 2), endpoint=True).astype(np.int8)
    xs, xz = np.float32(0.02), np.uint8(120)
    ws = RNG.uniform(0.001, 0.01, 4).astype(np.float32) if per_channel else np.float32(0.005)
    wz = np.zeros(4, np.int8) if per_channel else np.int8(0)
    ys, yz = np.float32(0.05), np.array(128 if ydt == np.uint8 else 0, ydt)
    b = RNG.integers(-2000, 2000, 4).astype(np.int32)
    y = qlinear_conv(x, xs, xz, w, ws, wz, ys, yz, b, pads=[1, 1, 0, 0], strides=[2, 1])
    acc = naive_conv(
        x.astype(np.int64) - int(xz), w.astype(np.int64), b.astype(np.float64), pads=[1, 1, 0, 0], strides=[2, 1]
    )
    scale = (xs * np.asarray(ws, np.float32) / ys).astype(np.float64)
    scale = scale.reshape(-1, 1, 1) if per_channel else scale
    info = np.iinfo(ydt)
    ref = np.clip(np.rint(acc * scale) + int(yz), info.min, info.max).astype(ydt)
    assert y.dtype == ydt
    np.testing.assert_array_equal(y, ref)


def test_qlinear_conv_rounds_half_to_even_and_saturates():
    x = np.array([[[[1, 3, 5, 200]]]], np.uint8)
    w = np.array([[[[1]]]], np.uint8)
    y = qlinear_conv(x, np.float32(1), np.uint8(0), w, np.float32(1), np.uint8(0), np.float32(2), np.uint8(0))
    np.testing.assert_array_equal(y, [[[[0, 2, 2, 100]]]])  # 0.5 -> 0, 1.5 -> 2, 2.5 -> 2
    y = qlinear_conv(x, np.float32(1), np.uint8(0), w, np.float32(1), np.uint8(0), np.float32(0.5), np.int8(0))
    np.testing.assert_array_equal(y, [[[[2, 6, 10, 127]]]])


# ----------------------------------------------------------------------------- transposed convolution
def naive_conv_transpose(
    x, w, b=None, strides=None, dilations=None, group=1, begin=None, out=None, output_padding=None
):
    x, w = x.astype(np.float64), w.astype(np.float64)
    n = x.ndim - 2
    s, d = strides or [1] * n, dilations or [1] * n
    N, C = x.shape[:2]
    Mg = w.shape[1]
    k = w.shape[2:]
    full = [s[i] * (x.shape[2 + i] - 1) + (k[i] - 1) * d[i] + 1 for i in range(n)]
    big = np.zeros((N, Mg * group) + tuple(f + 20 for f in full))
    for c in range(C):
        g = c // (C // group)
        for i in np.ndindex(*x.shape[2:]):
            for t in np.ndindex(*k):
                pos = tuple(i[a] * s[a] + t[a] * d[a] for a in range(n))
                big[(slice(None), slice(g * Mg, (g + 1) * Mg)) + pos] += (
                    x[(slice(None), c) + i][:, None] * w[(c, slice(None)) + t][None, :]
                )
    sl = tuple(slice(bb, bb + o) for bb, o in zip(begin, out))
    y = big[(Ellipsis,) + sl]
    if b is not None:
        y = y + b.reshape((-1,) + (1,) * n)
    return y


CT_CASES = [
    # x shape, w shape, attrs, begin, out
    ((1, 2, 3, 3), (2, 3, 3, 3), {}, [0, 0], [5, 5]),
    ((2, 2, 3, 4), (2, 2, 3, 3), dict(strides=[2, 3], pads=[1, 0, 1, 2]), [1, 0], [5, 10]),
    ((1, 4, 3, 3), (4, 2, 2, 3), dict(group=2, dilations=[2, 1], strides=[2, 2]), [0, 0], [7, 7]),
    ((1, 2, 3, 3), (2, 1, 3, 3), dict(strides=[3, 2], output_padding=[1, 1]), [0, 0], [10, 8]),
    ((1, 2, 3, 3), (2, 1, 3, 3), dict(strides=[3, 2], output_shape=[10, 8]), [0, 0], [10, 8]),
    ((1, 2, 3, 3), (2, 1, 3, 3), dict(strides=[2, 2], output_shape=[6, 6]), [1, 1], [6, 6]),
    ((1, 1, 3, 3), (1, 2, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER"), [0, 0], [6, 6]),
    ((1, 1, 3, 3), (1, 2, 3, 3), dict(strides=[2, 2], auto_pad="SAME_LOWER"), [1, 1], [6, 6]),
    ((1, 1, 4), (1, 2, 3), dict(strides=[2], pads=[1, 1]), [1], [7]),
    ((2, 2, 3, 4), (2, 3, 2, 2), dict(strides=[2, 2]), [0, 0], [6, 8]),  # taps tile the output
    ((1, 4, 3, 4), (4, 1, 2, 3), dict(strides=[2, 3], group=2, pads=[1, 0, 0, 2]), [1, 0], [5, 10]),
    ((1, 2, 2, 3, 2), (2, 2, 2, 2, 3), dict(strides=[1, 2, 1], pads=[0, 1, 0, 0, 0, 1]), [0, 1, 0], [3, 5, 3]),
]


@pytest.mark.parametrize("xs,ws,attrs,begin,out", CT_CASES)
def test_conv_transpose(xs, ws, attrs, begin, out):
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[1] * attrs.get("group", 1)).astype(np.float32)
    y = conv_transpose(x, w, b, **attrs)
    ref = naive_conv_transpose(x, w, b, attrs.get("strides"), attrs.get("dilations"), attrs.get("group", 1), begin, out)
    assert y.dtype == np.float32 and y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_conv_transpose_onnx_versions():
    x = RNG.standard_normal((1, 2, 3, 3)).astype(np.float32)
    w = RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)
    for opset in (1, 11, 22):
        m = _one_node("ConvTranspose", [("X", x)], [("W", w)], dict(strides=[2, 2], output_shape=[8, 8]), opset)
        y = stdops.onnx.load(m).run({"X": x})["Y"]
        np.testing.assert_allclose(y, conv_transpose(x, w, strides=[2, 2], output_shape=[8, 8]), rtol=1e-6)


# ----------------------------------------------------------------------------- Col2Im, DeformConv
def naive_col2im(cols, img, blk, s, d, pads):
    n = len(img)
    N, CK, L = cols.shape
    C = CK // math.prod(blk)
    padded = [img[i] + pads[i] + pads[n + i] for i in range(n)]
    nb = [(padded[i] - ((blk[i] - 1) * d[i] + 1)) // s[i] + 1 for i in range(n)]
    y = np.zeros((N, C) + tuple(padded))
    c5 = cols.reshape((N, C) + tuple(blk) + (L,))
    for li, o in enumerate(np.ndindex(*nb)):
        for t in np.ndindex(*blk):
            pos = tuple(o[i] * s[i] + t[i] * d[i] for i in range(n))
            y[(slice(None), slice(None)) + pos] += c5[(slice(None), slice(None)) + t + (li,)]
    return y[(Ellipsis,) + tuple(slice(pads[i], pads[i] + img[i]) for i in range(n))]


@pytest.mark.parametrize(
    "img,blk,s,d,pads",
    [
        ([5, 5], [2, 2], [1, 1], [1, 1], [0, 0, 0, 0]),
        ([6, 7], [3, 2], [2, 1], [1, 2], [1, 0, 1, 2]),
        ([4, 5, 6], [2, 2, 3], [1, 2, 1], [1, 1, 2], [0, 1, 0, 1, 0, 0]),
    ],
)
def test_col2im(img, blk, s, d, pads):
    n = len(img)
    padded = [img[i] + pads[i] + pads[n + i] for i in range(n)]
    L = math.prod((padded[i] - ((blk[i] - 1) * d[i] + 1)) // s[i] + 1 for i in range(n))
    cols = RNG.standard_normal((2, 3 * math.prod(blk), L)).astype(np.float32)
    y = col2im(cols, np.array(img), np.array(blk), dilations=d, pads=pads, strides=s)
    assert y.dtype == np.float32 and y.shape == (2, 3) + tuple(img)
    np.testing.assert_allclose(y, naive_col2im(cols, img, blk, s, d, pads), rtol=1e-5, atol=1e-5)


def test_deform_conv_zero_offsets_is_conv():
    x = RNG.standard_normal((2, 4, 6, 7)).astype(np.float32)
    w = RNG.standard_normal((6, 2, 3, 2)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)
    attrs = dict(group=2, pads=[1, 0, 1, 1], strides=[2, 1], dilations=[1, 2])
    ref = naive_conv(x, w, b, **attrs)
    off = np.zeros((2, 2 * 6 * 2) + ref.shape[2:], np.float32)
    y = deform_conv(x, w, off, b, offset_group=2, **attrs)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    mask = RNG.uniform(size=(2, 2 * 6) + ref.shape[2:]).astype(np.float32)
    ym = deform_conv(x, w, off, b, mask, offset_group=2, **attrs)
    assert ym.shape == y.shape and not np.allclose(ym, y)


def test_deform_conv_offsets_shift_and_interpolate():
    x = RNG.standard_normal((1, 1, 5, 5)).astype(np.float32)
    w = np.ones((1, 1, 1, 1), np.float32)
    off = np.zeros((1, 2, 5, 5), np.float32)
    off[0, 0] = 1.0  # move every sample one row down: row 4 reads outside -> 0
    y = deform_conv(x, w, off)
    ref = np.zeros_like(x)
    ref[..., :4, :] = x[..., 1:, :]
    np.testing.assert_allclose(y, ref, rtol=1e-6)
    off[0, 0] = 0.0
    off[0, 1] = 0.25  # a quarter pixel right: linear interpolation along the row
    y = deform_conv(x, w, off)
    ref = 0.75 * x.astype(np.float64)
    ref[..., :4] += 0.25 * x[..., 1:]
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "xs,ws,attrs",
    [
        ((1, 3, 9, 200), (4, 3, 3, 5), dict(strides=[2, 2], pads=[1, 2, 1, 2])),
        ((2, 4, 6, 110), (4, 2, 3, 3), dict(group=2, dilations=[1, 2], pads=[1, 1, 0, 2])),
    ],
)
def test_conv_wide_rows_path_matches_window_path(xs, ws, attrs, monkeypatch):
    """Wide images take the strided-phase im2col; it must equal the window-view im2col."""
    import stdops.ops.conv as conv_mod

    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    y_flat = conv(x, w, **attrs)
    monkeypatch.setattr(conv_mod, "_FLAT_IM2COL", False)
    y_win = conv(x, w, **attrs)
    np.testing.assert_allclose(y_flat, y_win, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y_win[:, :, :2, :3], naive_conv(x, w, **attrs)[:, :, :2, :3], rtol=1e-4, atol=1e-4)


def _winograd_tol(x, w, attrs):
    """Winograd sums transformed values: its float32 error scales with the magnitude of the terms, so the
    bound is relative to sum |w| |x| over each output's window (the direct sum's own error is ~1e-7 of it)."""
    return naive_conv(np.abs(x), np.abs(w), **attrs)


WINOGRAD_CASES = [
    ((2, 96, 4, 5), (100, 96, 3, 3), dict(pads=[1, 0, 2, 1])),
    ((1, 100, 5, 4), (96, 100, 3, 3), dict(auto_pad="SAME_LOWER")),  # odd output: cropped tiles
    ((1, 96, 3, 3), (96, 96, 3, 3), dict(pads=[1, 1, 1, 1])),
    ((2, 16, 13, 11), (24, 16, 3, 3), dict(pads=[1, 1, 1, 1])),  # partial tiles on both axes
    ((1, 3, 9, 10), (5, 3, 3, 3), dict(pads=[0, 2, 1, 0])),  # few channels, asymmetric padding
    ((1, 8, 6, 6), (4, 8, 3, 3), {}),  # no padding
]


@pytest.mark.parametrize("xs,ws,attrs", WINOGRAD_CASES)
@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_winograd_matches_direct(xs, ws, attrs, tile, dtype, monkeypatch):
    """Winograd F(2x2, 3x3) and F(4x4, 3x3), forced on shapes the tile choice would give the direct sum,
    against the direct path (the same kernel with Winograd off) and the naive sum in float64."""
    import stdops.ops.conv as conv_mod
    from stdops.ops import _fast

    monkeypatch.setattr(_fast, "_enabled", False)  # the NumPy reference (tests/ops/test_fast.py: the compiled one)
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal(ws).astype(dtype)
    b = RNG.standard_normal(ws[0]).astype(dtype)
    monkeypatch.setattr(conv_mod, "choose_tile", lambda *a: 0)
    direct = conv(x, w, b, **attrs)
    used = []
    real = conv_mod.TILES[tile].conv
    monkeypatch.setattr(conv_mod, "choose_tile", lambda *a: tile)
    monkeypatch.setattr(conv_mod.TILES[tile], "conv", lambda *a: used.append(tile) or real(*a))
    y = conv(x, w, b, **attrs)
    assert used and y.dtype == dtype and y.shape == direct.shape
    ref = naive_conv(x, w, b, **attrs)
    scale = _winograd_tol(x, w, attrs)
    # measured in float32: up to 5e-6 of sum |w| |x| for F(4,3) (fewest channels), 2e-7 for F(2,3)
    rel = {2: 1e-6, 4: 1e-5}[tile] if dtype == np.float32 else 1e-13
    assert np.all(np.abs(y - ref) <= rel * scale + 1e-30), float(np.max(np.abs(y - ref) / scale))
    assert np.all(np.abs(direct - ref) <= (1e-6 if dtype == np.float32 else 1e-14) * scale + 1e-30)


def test_winograd_tile_choice():
    """F(4,3) on large maps, F(2,3) on 14x14 with enough channels, the direct sum on 7x7 and few channels."""
    from stdops.ops.winograd import choose_tile

    assert choose_tile(64, 64, (56, 56)) == 4
    assert choose_tile(128, 128, (28, 28)) == 4
    assert choose_tile(256, 256, (14, 14)) == 2
    assert choose_tile(64, 64, (14, 14)) == 0
    assert choose_tile(512, 512, (7, 7)) == 0
    assert choose_tile(8, 64, (56, 56)) == 0


def test_winograd_matrices_satisfy_the_identity():
    """A^T [(G g) * (B^T d)] is the 1-D correlation of d with g, for each tile's matrices."""
    from stdops.ops.winograd import TILES

    rng = np.random.default_rng(1)
    for t in TILES.values():
        g, d = rng.standard_normal(3), rng.standard_normal(t.n)
        want = np.array([d[i : i + 3] @ g for i in range(t.m)])
        np.testing.assert_allclose(t.at @ ((t.g @ g) * (t.bt @ d)), want, rtol=1e-12, atol=1e-12)


def test_winograd_transform_prepared_once():
    """With the input size known at load, prepare computes the tile's transform; runs reuse it."""
    from stdops.ops.conv import conv_forward, prepare_conv_weight

    x = RNG.standard_normal((1, 32, 30, 30)).astype(np.float32)
    w = RNG.standard_normal((32, 32, 3, 3)).astype(np.float32)
    cw = prepare_conv_weight(w, 1, spatial=(30, 30), pads=[1, 1, 1, 1])
    u = cw.wino(4)
    y = conv_forward(x, cw, None, pads=[1, 1, 1, 1])
    # (the packings of that transform by ops/_fast_winoblock.py and _fast_winochan.py kept beside it, at the first run)
    assert cw.wino(4) is u and set(cw._wino) <= {4, "block", "chan"}
    np.testing.assert_allclose(y, naive_conv(x, w, pads=[1, 1, 1, 1]), rtol=1e-4, atol=2e-4)


@pytest.mark.parametrize("cin,hw", [(64, 3), (96, 10)])  # float64 accumulation; >= 96 channels (no Winograd)
def test_conv_integer_large_sums_are_exact(cin, hw):
    x = RNG.integers(0, 255, (1, cin, hw, hw), endpoint=True).astype(np.uint8)
    w = RNG.integers(0, 255, (2, cin, 3, 3), endpoint=True).astype(np.uint8)
    y = conv_integer(x, w, np.uint8(0), np.uint8(0), pads=[1, 1, 1, 1])
    ref = naive_conv(x.astype(np.int64), w.astype(np.int64), pads=[1, 1, 1, 1])
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, ref.astype(np.int64))
