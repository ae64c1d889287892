"""Activation kernels against independent float64 formulas written here."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import scipy.special

from stdops.errors import KernelError
from stdops.ops import activation as K

RNG = np.random.default_rng(1)
BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64), BF16]
TOL = {np.dtype(np.float16): 3e-3, np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-12, BF16: 2e-2}


def check(got, want, dtype, tol=None):
    assert isinstance(got, np.ndarray), type(got)
    dtype = np.dtype(dtype)
    assert got.dtype == dtype, (got.dtype, dtype)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    t = TOL[dtype] if tol is None else tol
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=t, atol=t, equal_nan=True)


def sig(x):  # float64 reference, fine for |x| < 700
    return 1 / (1 + np.exp(-x))


SELU_A, SELU_G = 1.67326319217681884765625, 1.05070102214813232421875
# kernel, attrs, float64 reference f(x, **attrs)
TABLE = [
    (K.relu, {}, lambda x: np.where(x > 0, x, 0)),
    (K.leaky_relu, {}, lambda x: np.where(x >= 0, x, 0.01 * x)),
    (K.leaky_relu, {"alpha": 0.3}, lambda x: np.where(x >= 0, x, 0.3 * x)),
    (K.elu, {}, lambda x: np.where(x >= 0, x, np.exp(x) - 1)),
    (K.elu, {"alpha": 2.0}, lambda x: np.where(x >= 0, x, 2 * (np.exp(x) - 1))),
    (K.selu, {}, lambda x: np.where(x > 0, SELU_G * x, SELU_G * (SELU_A * np.exp(x) - SELU_A))),
    (K.selu, {"alpha": 2.0, "gamma": 3.0}, lambda x: np.where(x > 0, 3 * x, 3 * (2 * np.exp(x) - 2))),
    (K.celu, {}, lambda x: np.maximum(0, x) + np.minimum(0, np.exp(x) - 1)),
    (K.celu, {"alpha": 2.0}, lambda x: np.maximum(0, x) + np.minimum(0, 2 * (np.exp(x / 2) - 1))),
    (K.thresholded_relu, {}, lambda x: np.where(x > 1, x, 0)),
    (K.thresholded_relu, {"alpha": -0.5}, lambda x: np.where(x > -0.5, x, 0)),
    (K.shrink, {}, lambda x: np.where(x < -0.5, x, np.where(x > 0.5, x, 0))),
    (K.shrink, {"bias": 1.5, "lambd": 1.0}, lambda x: np.where(x < -1, x + 1.5, np.where(x > 1, x - 1.5, 0))),
    (K.sigmoid, {}, sig),
    (K.hard_sigmoid, {}, lambda x: np.clip(0.2 * x + 0.5, 0, 1)),
    (K.hard_sigmoid, {"alpha": 0.5, "beta": 0.6}, lambda x: np.clip(0.5 * x + 0.6, 0, 1)),
    (K.hard_swish, {}, lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    (K.softplus, {}, lambda x: np.log(np.exp(x) + 1)),
    (K.softsign, {}, lambda x: x / (1 + np.abs(x))),
    (K.gelu, {}, lambda x: 0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2)))),
    (K.gelu, {"approximate": "tanh"}, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))),
    (K.mish, {}, lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    (K.swish, {}, lambda x: x * sig(x)),
    (K.swish, {"alpha": 1.702}, lambda x: x * sig(1.702 * x)),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize(
    "kernel,attrs,ref",
    TABLE,
    ids=[f"{k.__name__}{'-' + '-'.join(map(str, a.values())) if a else ''}" for k, a, _ in TABLE],
)
def test_pointwise(kernel, attrs, ref, dtype):
    for shape in [(2, 3, 5), (), (0, 4)]:
        x = RNG.uniform(-6, 6, math.prod(shape)).reshape(shape).astype(dtype)
        x0 = x.copy()
        got = kernel(x, **attrs)
        want = ref(x.astype(np.float64))
        check(got, want.astype(dtype) if dtype.itemsize <= 2 else want, dtype)
        np.testing.assert_array_equal(x, x0)


@pytest.mark.parametrize(
    "kernel", [K.sigmoid, K.softplus, K.mish, K.swish, K.elu, K.selu, K.celu, K.gelu, K.softsign, K.hard_swish]
)
def test_large_magnitudes_stay_finite(kernel):
    x = np.array([-1e4, -100.0, -89.0, 0.0, 89.0, 100.0, 1e4, 3e38], np.float32)
    with np.errstate(all="raise"):  # no overflow warnings either
        try:
            y = kernel(x)
        except FloatingPointError as e:  # pragma: no cover - reported with the kernel's name
            pytest.fail(f"{kernel.__name__}: {e}")
    assert y.dtype == np.float32 and np.isfinite(y).all()


def test_stable_values():
    x = np.array([-1000.0, -50.0, 50.0, 1000.0], np.float32)
    np.testing.assert_allclose(K.sigmoid(x), [0.0, math.exp(-50), 1.0, 1.0], rtol=1e-6, atol=0)
    check(K.softplus(x), [0.0, math.log1p(math.exp(-50)), 50.0, 1000.0], np.float32, 1e-7)
    check(K.mish(x), [0.0, -50 * math.tanh(math.log1p(math.exp(-50))), 50.0, 1000.0], np.float32, 1e-7)


def test_nan_passes_through():
    x = np.array([np.nan, 1.0], np.float32)
    for k in (K.relu, K.sigmoid, K.softplus, K.elu, K.leaky_relu, K.gelu, K.mish, K.hard_sigmoid):
        assert np.isnan(k(x)[0]), k.__name__


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_relu_and_shrink_ints(dtype):
    x = np.arange(-5, 6, dtype=dtype)
    check(K.relu(x), np.maximum(np.arange(-5, 6), 0), dtype, 0)
    check(
        K.shrink(x, lambd=1.5, bias=1.0),
        np.where(
            np.arange(-5, 6) < -1.5, np.arange(-5, 6) + 1, np.where(np.arange(-5, 6) > 1.5, np.arange(-5, 6) - 1, 0)
        ),
        dtype,
        0,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64])
@pytest.mark.parametrize(
    "xs,ss",
    [
        ((2, 3, 4), (3, 1)),
        ((2, 3, 4, 2), (3, 1, 1)),
        ((2, 3, 4), (4,)),
        ((2, 3, 4), (1,)),
        ((2, 3, 4), ()),
        ((2, 3, 4), (2, 3, 4)),
        ((5,), (5,)),
    ],
)
def test_prelu(dtype, xs, ss):
    x = RNG.integers(-5, 6, xs).astype(dtype)
    s = RNG.integers(1, 4, ss).astype(dtype) if np.dtype(dtype).kind == "i" else RNG.uniform(0, 1, ss).astype(dtype)
    xf, sf = x.astype(np.float64), np.asarray(s, np.float64)
    check(K.prelu(x, s), np.where(xf < 0, xf * sf, xf), dtype, 0 if np.dtype(dtype).kind == "i" else None)


def test_prelu_is_unidirectional():
    with pytest.raises(KernelError, match="slope"):
        K.prelu(np.ones((3,), np.float32), np.ones((2, 3), np.float32))
    with pytest.raises(KernelError, match="slope"):
        K.prelu(np.ones((2, 3), np.float32), np.ones((2,), np.float32))


def test_attribute_validation():
    with pytest.raises(KernelError, match="approximate"):
        K.gelu(np.ones(2, np.float32), approximate="erf")
    with pytest.raises(KernelError, match="floating-point"):
        K.sigmoid(np.ones(2, np.int32))
    with pytest.raises(KernelError, match="numeric"):
        K.relu(np.ones(2, bool))


# --------------------------------------------------------------------------- softmax family
def ref_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def ref_hardmax(x, axis):
    x = np.moveaxis(x, axis, -1)
    flat = x.reshape(-1, x.shape[-1])
    out = np.zeros_like(flat)
    for i, row in enumerate(flat):  # first maximum of each row
        out[i, list(row).index(row.max())] = 1
    return np.moveaxis(out.reshape(x.shape), -1, axis)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize(
    "shape,axis",
    [((3, 4, 5), 0), ((3, 4, 5), 1), ((3, 4, 5), 2), ((3, 4, 5), -1), ((3, 4, 5), -3), ((7,), 0), ((2, 1, 3), 1)],
)
def test_softmax_family(dtype, shape, axis):
    x = RNG.uniform(-5, 5, shape).astype(dtype)
    xf = x.astype(np.float64)
    sm = ref_softmax(xf, axis)
    check(K.softmax(x, axis=axis), sm.astype(dtype) if dtype.itemsize <= 2 else sm, dtype)
    check(K.log_softmax(x, axis=axis), np.log(sm).astype(dtype) if dtype.itemsize <= 2 else np.log(sm), dtype)
    check(K.hardmax(x, axis=axis), ref_hardmax(xf, axis), dtype, 0)


def test_softmax_defaults_and_large_numbers():
    x = np.array([[0, 1, 2, 3], [10000, 10001, 10002, 10003]], np.float32)
    want = ref_softmax(np.array([[0, 1, 2, 3.0]]), -1)
    check(K.softmax(x), np.vstack([want, want]), np.float32)
    check(K.log_softmax(x), np.log(np.vstack([want, want])), np.float32, 1e-5)
    check(K.log_softmax(np.array([-1e30, 0.0], np.float32)), [-1e30, 0.0], np.float32)
    check(K.hardmax(np.array([[3.0, 3.0, 1.0], [1.0, 2.0, 2.0]], np.float32)), [[1, 0, 0], [0, 1, 0]], np.float32, 0)


def test_softmax_errors():
    for k in (K.softmax, K.log_softmax, K.hardmax):
        with pytest.raises(KernelError, match="axis"):
            k(np.ones((2, 3), np.float32), axis=2)
        with pytest.raises(KernelError, match="axis"):
            k(np.ones((2, 3), np.float32), axis=-3)
        with pytest.raises(KernelError, match="rank"):
            k(np.float32(1.0))
    assert K.softmax(np.ones((0, 3), np.float32)).shape == (0, 3)
    assert K.hardmax(np.ones((2, 0), np.float32)).shape == (2, 0)


def test_registry_specs():
    from stdops.ops import OPS

    for name, spec in [
        ("relu", "onnx:Relu-6"),
        ("prelu", "onnx:PRelu-7"),
        ("softmax", "onnx:Softmax-13"),
        ("gelu", "onnx:Gelu-20"),
        ("swish", "onnx:Swish-24"),
        ("mish", "onnx:Mish-18"),
        ("celu", "onnx:Celu-12"),
        ("hard_swish", "onnx:HardSwish-14"),
    ]:
        assert spec in OPS[name].specs
    assert OPS["softmax"].attrs == {"axis": -1}
    assert OPS["selu"].attrs["alpha"] == np.float32(1.67326319217681884765625)
    assert OPS["leaky_relu"].attrs == {"alpha": 0.01}
    assert OPS["gelu"].attrs == {"approximate": "none"}


# ------------------------------------------------------------------- ONNX adapters (old opsets)
def _run(op_type, opset, inputs, **attrs):
    from onnx import TensorProto, helper

    import stdops.onnx

    names = [f"x{i}" for i in range(len(inputs))]
    node = helper.make_node(op_type, names, ["y"], **attrs)
    vis = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
        for n, x in zip(names, inputs)
    ]
    m = helper.make_model(
        helper.make_graph([node], "g", vis, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", opset)],
    )
    m.ir_version = 3
    return stdops.onnx.run(m, list(inputs))[0]


def ref_coerced(fn, x, axis):
    a = axis % x.ndim
    x2 = x.astype(np.float64).reshape(math.prod(x.shape[:a]), -1)
    return fn(x2, 1).reshape(x.shape)


@pytest.mark.parametrize("opset", [1, 11, 12])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -2])
def test_softmax_2d_coercion(opset, axis):
    x = RNG.uniform(-3, 3, (2, 3, 4)).astype(np.float32)
    attrs = {} if axis is None else {"axis": axis}
    if opset == 1 and axis is not None and axis < 0:
        return
    a = 1 if axis is None else axis
    check(_run("Softmax", opset, [x], **attrs), ref_coerced(ref_softmax, x, a), np.float32)
    check(_run("LogSoftmax", opset, [x], **attrs), np.log(ref_coerced(ref_softmax, x, a)), np.float32, 1e-5)
    check(_run("Hardmax", opset, [x], **attrs), ref_coerced(ref_hardmax, x, a), np.float32, 0)


def test_old_activation_versions():
    x = np.array([-2.0, -0.5, 0.0, 1.5], np.float32)
    check(_run("Relu", 1, [x], consumed_inputs=[0]), np.maximum(x, 0), np.float32)
    check(_run("Sigmoid", 1, [x], consumed_inputs=[0]), sig(x.astype(np.float64)), np.float32)
    check(
        _run("Elu", 1, [x], alpha=0.5, consumed_inputs=[0]),
        np.where(x >= 0, x, 0.5 * np.expm1(x.astype(np.float64))),
        np.float32,
    )
    check(_run("LeakyRelu", 1, [x], consumed_inputs=[0]), np.where(x >= 0, x, 0.01 * x), np.float32)
    check(_run("HardSigmoid", 1, [x], consumed_inputs=[0]), np.clip(0.2 * x + 0.5, 0, 1), np.float32)
    xf = x.astype(np.float64)
    check(
        _run("Selu", 1, [x], consumed_inputs=[0]),
        np.where(xf > 0, 1.0507 * xf, 1.0507 * 1.6732 * np.expm1(xf)),
        np.float32,
    )
    check(_run("Selu", 6, [x]), np.where(xf > 0, SELU_G * xf, SELU_G * SELU_A * np.expm1(xf)), np.float32)


def test_prelu_channel_slope_before_7():
    x = RNG.uniform(-1, 1, (2, 3, 4, 4)).astype(np.float32)
    s = np.array([0.1, 0.2, 0.3], np.float32)
    want = np.where(x < 0, x * s[:, None, None], x)
    check(_run("PRelu", 6, [x, s]), want, np.float32)
    check(_run("PRelu", 1, [x, s], consumed_inputs=[0]), want, np.float32)
    s4 = np.array([0.1, 0.2, 0.3, 0.4], np.float32)  # opset 7+: NumPy broadcast on the last axis
    check(_run("PRelu", 9, [x, s4]), np.where(x < 0, x * s4, x), np.float32)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4), (2, 0, 5)])
def test_softmax_of_an_empty_tensor_is_empty(shape):
    """Softmax / LogSoftmax over a tensor with no values: an empty result of its shape and dtype (np.max has no
    identity on an empty axis: it raised ValueError before)."""
    x = np.zeros(shape, np.float32)
    for axis in range(-len(shape), len(shape)):
        for fn in (K.softmax, K.log_softmax):
            y = fn(x, axis=axis)
            assert y.shape == shape and y.dtype == np.float32
