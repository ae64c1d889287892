"""Reductions (stdops.ops.reduce) and their ONNX adapters, against independent formulas written here."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import stdops.onnx
from stdops.errors import KernelError
from stdops.ops import reduce as R

I64 = np.int64
RNG = np.random.default_rng(0)
X = RNG.uniform(0.5, 2.0, (3, 4, 5)).astype(np.float32)
XN = RNG.standard_normal((3, 4, 5)).astype(np.float32)


def _same(got, want, rtol=1e-5, atol=1e-6):
    want = np.asarray(want)
    assert isinstance(got, np.ndarray), type(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "fc" or want.dtype == ml_dtypes.bfloat16:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


# Independent formulas over float64 (the reduction is written out with explicit sums where numpy
# offers a direct form only for the kernel's own building block).
def _ref(name, x, axes, keepdims):
    x64 = x.astype(np.float64)
    ax = None if axes is None else tuple(axes)
    kd = bool(keepdims)
    f = {
        "reduce_sum": lambda: np.add.reduce(x64, axis=ax, keepdims=kd),
        "reduce_sum_square": lambda: np.add.reduce(x64**2, axis=ax, keepdims=kd),
        "reduce_l1": lambda: np.add.reduce(np.fabs(x64), axis=ax, keepdims=kd),
        "reduce_l2": lambda: np.add.reduce(x64**2, axis=ax, keepdims=kd) ** 0.5,
        "reduce_log_sum": lambda: np.log(np.add.reduce(x64, axis=ax, keepdims=kd)),
        "reduce_log_sum_exp": lambda: np.log(np.add.reduce(np.exp(x64), axis=ax, keepdims=kd)),
        "reduce_mean": lambda: (
            np.add.reduce(x64, axis=ax, keepdims=kd) / (x64.size / np.add.reduce(x64, axis=ax, keepdims=True).size)
        ),
        "reduce_prod": lambda: np.multiply.reduce(x64, axis=ax, keepdims=kd),
        "reduce_max": lambda: np.maximum.reduce(x64, axis=ax, keepdims=kd),
        "reduce_min": lambda: np.minimum.reduce(x64, axis=ax, keepdims=kd),
    }[name]()
    return np.asarray(f).astype(x.dtype)


NAMES = [
    "reduce_sum",
    "reduce_sum_square",
    "reduce_l1",
    "reduce_l2",
    "reduce_log_sum",
    "reduce_log_sum_exp",
    "reduce_mean",
    "reduce_prod",
    "reduce_max",
    "reduce_min",
]
AXES = [None, [0], [1], [-1], [0, 2], [-3, -1], [2, 0, 1]]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("axes", AXES)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_float32(name, axes, keepdims):
    fn = getattr(R, name)
    a = None if axes is None else np.array(axes, I64)
    _same(fn(X, a, keepdims=keepdims), _ref(name, X, axes, keepdims), rtol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_reduce_defaults_reduce_all_and_keep_dims(name):
    got = getattr(R, name)(X)
    assert got.shape == (1, 1, 1) and got.dtype == np.float32
    _same(got, _ref(name, X, None, 1), rtol=1e-5)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [np.float64, np.float16, ml_dtypes.bfloat16])
def test_reduce_float_dtypes(name, dtype):
    x = X.astype(dtype)
    tol = {np.float64: 1e-12, np.float16: 2e-3, ml_dtypes.bfloat16: 1e-2}[dtype]
    _same(R.__dict__[name](x, np.array([1], I64), keepdims=0), _ref(name, x, [1], 0), rtol=tol)


@pytest.mark.parametrize(
    "name, want",
    [
        ("reduce_sum", lambda x: x.sum(axis=1, dtype=x.dtype)),
        ("reduce_sum_square", lambda x: (x * x).sum(axis=1, dtype=x.dtype)),
        ("reduce_l1", lambda x: np.abs(x).sum(axis=1, dtype=x.dtype)),
        ("reduce_prod", lambda x: x.prod(axis=1, dtype=x.dtype)),
        ("reduce_max", lambda x: x.max(axis=1)),
        ("reduce_min", lambda x: x.min(axis=1)),
        ("reduce_mean", lambda x: np.trunc(x.astype(np.float64).mean(axis=1)).astype(x.dtype)),
        ("reduce_l2", lambda x: np.sqrt((x.astype(np.float64) ** 2).sum(axis=1)).astype(x.dtype)),
    ],
)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64, np.int8, np.uint8])
def test_reduce_integers_keep_dtype(name, want, dtype):
    x = (np.arange(24).reshape(2, 4, 3) % 5 - (0 if np.dtype(dtype).kind == "u" else 2)).astype(dtype)
    _same(getattr(R, name)(x, np.array([1], I64), keepdims=0), want(x))


def test_reduce_sum_int32_wraps_in_int32():
    x = np.full((4,), 2**30, np.int32)
    _same(R.reduce_sum(x, keepdims=0), np.array(0, np.int32))


def test_reduce_max_min_bool():
    b = np.array([[True, False], [False, False]])
    _same(R.reduce_max(b, np.array([1], I64)), np.array([[True], [False]]))
    _same(R.reduce_min(b, np.array([0], I64), keepdims=0), np.array([False, False]))


@pytest.mark.parametrize(
    "name, identity",
    [
        ("reduce_sum", 0.0),
        ("reduce_sum_square", 0.0),
        ("reduce_l1", 0.0),
        ("reduce_l2", 0.0),
        ("reduce_log_sum", -np.inf),
        ("reduce_log_sum_exp", -np.inf),
        ("reduce_prod", 1.0),
        ("reduce_max", -np.inf),
        ("reduce_min", np.inf),
    ],
)
def test_empty_set_gives_identity(name, identity):
    x = np.zeros((2, 0, 4), np.float32)
    got = getattr(R, name)(x, np.array([1], I64), keepdims=1)
    _same(got, np.full((2, 1, 4), identity, np.float32))
    # reducing a non-empty axis of an empty tensor keeps the empty axis
    assert getattr(R, name)(x, np.array([2], I64), keepdims=0).shape == (2, 0)


@pytest.mark.parametrize(
    "dtype, lo, hi", [(np.int32, -(2**31), 2**31 - 1), (np.uint8, 0, 255), (np.bool_, False, True)]
)
def test_empty_max_min_integer_identity(dtype, lo, hi):
    x = np.zeros((0, 3), dtype)
    _same(R.reduce_max(x, np.array([0], I64), keepdims=0), np.full((3,), lo, dtype))
    _same(R.reduce_min(x, np.array([0], I64), keepdims=0), np.full((3,), hi, dtype))


@pytest.mark.parametrize(
    "name, f",
    [
        ("reduce_sum", lambda x: x),
        ("reduce_mean", lambda x: x),
        ("reduce_max", lambda x: x),
        ("reduce_min", lambda x: x),
        ("reduce_prod", lambda x: x),
        ("reduce_log_sum_exp", lambda x: x),
        ("reduce_l1", np.abs),
        ("reduce_l2", np.abs),
        ("reduce_sum_square", lambda x: x * x),
        ("reduce_log_sum", np.log),
    ],
)
@pytest.mark.parametrize("axes", [None, np.array([], I64)])
def test_noop_with_empty_axes(name, f, axes):
    got = getattr(R, name)(X, axes, keepdims=0, noop_with_empty_axes=1)
    _same(got, f(X))
    assert got is not X


def test_empty_axes_input_without_noop_reduces_all():
    _same(R.reduce_sum(X, np.array([], I64), keepdims=0), np.asarray(X.astype(np.float64).sum()).astype(np.float32))


def test_rank0_input():
    s = np.array(3.0, np.float32)
    _same(R.reduce_sum(s), s)
    _same(R.reduce_max(s, keepdims=0), s)
    _same(R.reduce_log_sum_exp(s), s)


def test_log_sum_exp_is_stable():
    x = np.array([[1000.0, 1000.0], [-1000.0, -np.inf]], np.float32)
    got = R.reduce_log_sum_exp(x, np.array([1], I64), keepdims=0)
    _same(got, np.array([1000.0 + np.log(2.0), -1000.0], np.float32))
    allneg = np.full((2, 2), -np.inf, np.float32)
    _same(R.reduce_log_sum_exp(allneg, np.array([1], I64), keepdims=0), np.full((2,), -np.inf, np.float32))


@pytest.mark.parametrize("axes", [[3], [-4], [0, 0], [1, -2]])
def test_bad_axes(axes):
    with pytest.raises(KernelError):
        R.reduce_sum(X, np.array(axes, I64))


def test_bad_input_dtype():
    with pytest.raises(KernelError):
        R.reduce_sum(np.array(["a"], object))


# ----------------------------------------------------------------------------- ArgMax / ArgMin
A = np.array([[2, 9, 9, 1], [7, 7, 3, 7], [0, 5, 5, 5]], np.float32)


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.float64])
def test_arg_max_min(axis, keepdims, last, dtype):
    x = A.astype(dtype)
    ax = axis % 2
    n = x.shape[ax]
    pos = np.arange(n).reshape((-1, 1) if ax == 0 else (1, -1))
    for fn, better in ((R.arg_max, np.max), (R.arg_min, np.min)):
        hit = x == better(x, axis=ax, keepdims=True)
        if last:
            want = np.max(np.where(hit, pos, -1), axis=ax, keepdims=bool(keepdims))
        else:
            want = np.min(np.where(hit, pos, n), axis=ax, keepdims=bool(keepdims))
        _same(fn(x, axis=axis, keepdims=keepdims, select_last_index=last), want.astype(np.int64))


def test_arg_defaults_and_errors():
    _same(R.arg_max(A), np.array([[1, 0, 0, 1]], np.int64))
    with pytest.raises(KernelError):
        R.arg_max(A, axis=2)
    with pytest.raises(KernelError):
        R.arg_min(np.zeros((0, 2), np.float32), axis=0)


# ----------------------------------------------------------------------------- CumSum / CumProd
def _cum_ref(x, axis, exclusive, reverse, prod):
    x64 = np.moveaxis(x.astype(np.float64), axis, -1)
    n = x64.shape[-1]
    out = np.empty_like(x64)
    for j in range(n):  # the definition, one output position at a time
        idx = [i for i in range(n) if (i > j if reverse else i < j) or (i == j and not exclusive)]
        part = x64[..., idx]
        out[..., j] = part.prod(axis=-1) if prod else part.sum(axis=-1)
    return np.moveaxis(out, -1, axis).astype(x.dtype)


@pytest.mark.parametrize("prod", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1, np.array(1, np.int32), np.array([0], I64)])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.float16])
def test_cumulative(prod, axis, exclusive, reverse, dtype):
    x = (np.arange(1, 13).reshape(3, 4) % 4 + 1).astype(dtype)
    fn = R.cum_prod if prod else R.cum_sum
    a = np.asarray(axis, I64) if not isinstance(axis, np.ndarray) else axis
    got = fn(x, a, exclusive=exclusive, reverse=reverse)
    _same(got, _cum_ref(x, int(np.asarray(a).reshape(-1)[0]), exclusive, reverse, prod))


def test_cumulative_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(KernelError):
        R.cum_sum(x, np.array(2, I64))
    with pytest.raises(KernelError):
        R.cum_sum(x, np.array([0, 1], I64))
    with pytest.raises(KernelError):
        R.cum_prod(x, np.array(0.5, np.float32))


# ----------------------------------------------------------------------------- ONNX adapters
def _run(node, inputs, opset, out_type=TensorProto.FLOAT):
    g = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in zip(node.input, inputs)
            if n
        ],
        [helper.make_tensor_value_info(node.output[0], out_type, None)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return stdops.onnx.run(m, list(inputs))[0]


@pytest.mark.parametrize(
    "op, name",
    [
        ("ReduceSum", "reduce_sum"),
        ("ReduceMean", "reduce_mean"),
        ("ReduceMax", "reduce_max"),
        ("ReduceL2", "reduce_l2"),
        ("ReduceLogSumExp", "reduce_log_sum_exp"),
    ],
)
@pytest.mark.parametrize("opset", [1, 11, 12, 13, 17])
def test_onnx_axes_attribute_versions(op, name, opset):
    if op == "ReduceSum" and opset >= 13:
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)
        got = _run(node, [X, np.array([-1, 0], I64)], opset)
    else:
        node = helper.make_node(op, ["x"], ["y"], axes=[-1, 0], keepdims=0)
        got = _run(node, [X], opset)
    _same(got, _ref(name, X, [0, 2], 0), rtol=1e-5)


@pytest.mark.parametrize("opset", [11, 18])
def test_onnx_axes_absent_reduces_all(opset):
    node = helper.make_node("ReduceProd", ["x"], ["y"])
    _same(_run(node, [X], opset), _ref("reduce_prod", X, None, 1), rtol=1e-5)


def test_onnx_axes_input_version_18():
    node = helper.make_node("ReduceMin", ["x", "axes"], ["y"], keepdims=1)
    _same(_run(node, [X, np.array([1], I64)], 18), _ref("reduce_min", X, [1], 1))
