"""Elementwise and logic kernels against independent formulas written here (float64 / Python-int references)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import scipy.special

from stdops.errors import KernelError
from stdops.ops import elementwise as K
from stdops.ops import logic as L

RNG = np.random.default_rng(0)
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
SIGNED = [np.int8, np.int16, np.int32, np.int64]
FLOATS = [np.float16, np.float32, np.float64]
BF16 = np.dtype(ml_dtypes.bfloat16)
TOL = {np.dtype(np.float16): 2e-3, np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-12, BF16: 1e-2}
# broadcasting pairs, 0-d included
SHAPES = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((5,), ()), ((), ())]


def data(shape, dtype, lo=-9, hi=10, nonzero=False):
    dt = np.dtype(dtype)
    n = math.prod(shape)
    if dt.kind == "u":
        lo = max(lo, 0)
    if dt.kind in "iu":
        v = RNG.integers(lo, hi, n)
    else:
        v = RNG.uniform(lo, hi, n)
    if nonzero:
        v = np.where(v == 0, 1, v)
    return np.asarray(v.astype(dt).reshape(shape))


def wrap(v, dtype):
    """An object array of Python ints reduced into dtype's range (two's complement)."""
    bits = np.dtype(dtype).itemsize * 8
    signed = np.dtype(dtype).kind == "i"

    def one(r):
        r = int(r) % (1 << bits)
        return r - (1 << bits) if signed and r >= 1 << (bits - 1) else r

    return np.asarray(np.frompyfunc(one, 1, 1)(np.asarray(v, dtype=object))).astype(dtype)


def check(got, want, dtype=None):
    """Same type (an ndarray), dtype, shape; exact for ints/bools, within dtype tolerance for floats."""
    assert isinstance(got, np.ndarray), type(got)
    want = np.asarray(want)
    dtype = np.dtype(dtype) if dtype is not None else want.dtype
    assert got.dtype == dtype, (got.dtype, dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if dtype.kind in "fV":
        tol = TOL.get(dtype, 1e-6)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want.astype(dtype) if want.dtype != object else want)


# ------------------------------------------------------------------------------------- arithmetic
ARITH = [
    (K.add, lambda a, b: a + b),
    (K.sub, lambda a, b: a - b),
    (K.mul, lambda a, b: a * b),
]


@pytest.mark.parametrize("dtype", INTS + FLOATS)
@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("kernel,ref", ARITH, ids=lambda v: getattr(v, "__name__", ""))
def test_arith(kernel, ref, shapes, dtype):
    a, b = data(shapes[0], dtype), data(shapes[1], dtype)
    a0, b0 = a.copy(), b.copy()
    if np.dtype(dtype).kind in "iu":  # Python ints, wrapped into the type's range
        want = wrap(ref(a.astype(object), b.astype(object)), dtype)
    else:
        want = ref(a.astype(np.float64), b.astype(np.float64))
    check(kernel(a, b), want, dtype)
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.parametrize("dtype", INTS + FLOATS)
@pytest.mark.parametrize("shapes", SHAPES)
def test_div(shapes, dtype):
    a, b = data(shapes[0], dtype), data(shapes[1], dtype, nonzero=True)
    q = a.astype(np.float64) / b.astype(np.float64)
    want = np.trunc(q) if np.dtype(dtype).kind in "iu" else q
    check(K.div(a, b), want, dtype)


def test_div_int_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 6, -6, 0], np.int32)
    b = np.array([2, 2, -2, -2, 3, 4, -5], np.int32)
    check(K.div(a, b), np.array([3, -3, -3, 3, 2, -1, 0], np.int32))
    check(K.div(np.array([5], np.int64), np.array([0], np.int64)), np.array([0], np.int64))  # no exception


def test_float_arith_special_values():
    a = np.array([1.0, -1.0, 0.0, np.inf], np.float32)
    check(K.div(a, np.zeros(4, np.float32)), np.array([np.inf, -np.inf, np.nan, np.inf]), np.float32)
    check(K.add(np.float32(1.5), np.float32(2)), np.float32(3.5))  # numpy scalars in, 0-d array out


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_mod(dtype, fmod):
    a, b = data((4, 5), dtype, -30, 30), data((5,), dtype, -7, 8, nonzero=True)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    q = np.trunc(af / bf) if fmod else np.floor(af / bf)
    want = af - q * bf
    got = K.mod(a, b, fmod=fmod)
    check(got, want, dtype)
    nz = want != 0
    sign_of = bf if not fmod else af
    assert (np.sign(got.astype(np.float64))[nz] == np.broadcast_to(np.sign(sign_of), want.shape)[nz]).all()


def test_mod_examples_and_float_special_cases():
    a = np.array([-4, 7, 5, 4, -7, 8], np.int64)
    b = np.array([2, -3, 8, -2, 3, 5], np.int64)
    check(K.mod(a, b), np.array([0, -2, 5, 0, 2, 3], np.int64))
    check(K.mod(a, b, fmod=1), np.array([0, 1, 5, 0, -1, 3], np.int64))
    x = np.array([0.0, -0.0, np.inf, 1.0, 1.0, -1.0, 1.0, np.nan], np.float32)
    y = np.array([-2.0, 3.0, 2.0, 0.0, np.inf, np.inf, -np.inf, 1.0], np.float32)
    got = K.mod(x, y)
    check(got, np.array([0.0, 0.0, np.nan, np.nan, 1.0, np.inf, -np.inf, np.nan]), np.float32)
    assert np.signbit(got[0]) and not np.signbit(got[1])  # zero takes the divisor's sign
    check(K.mod(x, y, fmod=1), np.array([0.0, -0.0, np.nan, np.nan, 1.0, -1.0, 1.0, np.nan]), np.float32)


@pytest.mark.parametrize(
    "xt,yt",
    [
        (np.float32, np.float32),
        (np.float32, np.int64),
        (np.float32, np.int32),
        (np.float32, np.uint64),
        (np.float32, np.uint8),
        (np.float64, np.float32),
        (np.float16, np.float16),
        (np.int32, np.int32),
        (np.int64, np.int64),
        (np.int32, np.float32),
        (np.int64, np.float32),
    ],
)
def test_pow(xt, yt):
    x = data((3, 4), xt, 1, 5)
    y = data((4,), yt, 0, 4)
    want = np.power(x.astype(np.float64), y.astype(np.float64))
    check(K.pow_(x, y), want if np.dtype(xt).kind == "f" else np.trunc(want), xt)


def test_pow_special():
    check(
        K.pow_(np.array([2, -2, 1, -1], np.int64), np.array([-1, -1, -3, -3], np.int64)),
        np.array([0, 0, 1, -1], np.int64),
    )
    check(
        K.pow_(np.array([-8.0, 4.0], np.float32), np.array([1 / 3, 0.5], np.float32)),
        np.array([np.nan, 2.0]),
        np.float32,
    )
    check(K.pow_(np.array([2, 3], np.int32), np.array([0.5, 2.0], np.float32)), np.array([1, 9]), np.int32)


# ----------------------------------------------------------------------------------- unary math
UNARY_FLOAT = [  # kernel, reference in float64, input range
    (K.reciprocal, lambda x: 1 / x, (0.5, 4)),
    (K.sqrt, np.sqrt, (0, 9)),
    (K.exp, np.exp, (-5, 5)),
    (K.log, np.log, (0.1, 9)),
    (K.floor, np.floor, (-9, 9)),
    (K.ceil, np.ceil, (-9, 9)),
    (K.erf, scipy.special.erf, (-3, 3)),
    (K.sin, np.sin, (-3, 3)),
    (K.cos, np.cos, (-3, 3)),
    (K.tan, np.tan, (-1.2, 1.2)),
    (K.asin, np.arcsin, (-0.99, 0.99)),
    (K.acos, np.arccos, (-0.99, 0.99)),
    (K.atan, np.arctan, (-9, 9)),
    (K.sinh, np.sinh, (-3, 3)),
    (K.cosh, np.cosh, (-3, 3)),
    (K.tanh, np.tanh, (-3, 3)),
    (K.asinh, np.arcsinh, (-9, 9)),
    (K.acosh, np.arccosh, (1.01, 9)),
    (K.atanh, np.arctanh, (-0.95, 0.95)),
    (K.neg, np.negative, (-9, 9)),
    (K.abs_, np.abs, (-9, 9)),
    (K.sign, np.sign, (-9, 9)),
]


@pytest.mark.parametrize("dtype", FLOATS + [BF16])
@pytest.mark.parametrize("kernel,ref,rng", UNARY_FLOAT, ids=lambda v: getattr(v, "__name__", ""))
def test_unary_float(kernel, ref, rng, dtype):
    for shape in [(2, 3, 4), (), (0, 3)]:
        x = RNG.uniform(*rng, math.prod(shape)).reshape(shape).astype(dtype)
        x0 = x.copy()
        want = ref(x.astype(np.float64))
        got = kernel(x)
        if dtype in (np.float16, BF16):  # the result is rounded once to the narrow type
            want = want.astype(dtype)
        check(got, want, dtype)
        np.testing.assert_array_equal(x, x0)


@pytest.mark.parametrize("dtype", SIGNED + [np.uint8, np.uint64])
def test_unary_int(dtype):
    x = data((3, 5), dtype)
    xi = x.astype(np.int64)
    check(K.abs_(x), np.abs(xi), dtype)
    check(K.sign(x), np.sign(xi), dtype)
    if np.dtype(dtype).kind == "i":
        check(K.neg(x), -xi, dtype)


def test_unary_special_values():
    x = np.array([np.nan, np.inf, -np.inf, -0.0, -1.0, 0.0], np.float32)
    check(K.sqrt(x), np.array([np.nan, np.inf, np.nan, -0.0, np.nan, 0.0]), np.float32)
    check(K.log(x), np.array([np.nan, np.inf, np.nan, -np.inf, np.nan, -np.inf]), np.float32)
    check(K.sign(x), np.array([np.nan, 1, -1, 0, -1, 0]), np.float32)
    check(K.reciprocal(x), np.array([np.nan, 0, -0.0, -np.inf, -1, np.inf]), np.float32)


def test_round_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.9, 2.3, -4.5, np.nan, np.inf, -0.0], np.float32)
    got = K.round_(x)
    check(got, np.array([0, 2, 2, -0.0, -2, -2, 1, 2, -4, np.nan, np.inf, -0.0]), np.float32)
    assert np.signbit(got[3]) and np.signbit(got[-1])


@pytest.mark.parametrize("kernel", [K.sqrt, K.exp, K.reciprocal, K.round_, K.sin, K.floor, L.is_nan])
def test_float_only_ops_refuse_ints(kernel):
    with pytest.raises(KernelError, match="floating-point"):
        kernel(np.arange(3, dtype=np.int32))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
def test_erf_large_arrays(dtype):  # the blocked polynomial path (>= 4096 elements)
    x = np.concatenate(
        [
            np.linspace(-6, 6, 199999),
            RNG.standard_normal(5000) * 2,
            [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-38, 1.25, -1.25, 4.0],
        ]
    )
    x = x.astype(dtype)
    got = K.erf(x.reshape(-1, 7)[:, ::2])  # non-contiguous 2-D view
    want = scipy.special.erf(x.reshape(-1, 7)[:, ::2].astype(np.float64))
    assert got.dtype == dtype and got.shape == want.shape
    if dtype == np.float32:
        fin = np.isfinite(want)
        ulps = np.abs(got[fin] - want[fin]) / np.spacing(np.abs(want[fin]).astype(np.float32))
        assert ulps.max() <= 4
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    else:
        check(got, want.astype(dtype), dtype)
    tail = K.erf(np.concatenate([np.zeros(5000), [np.inf, -np.inf, np.nan, -0.0]]).astype(np.float32))
    np.testing.assert_array_equal(tail[-4:], [1, -1, np.nan, -0.0])
    assert np.signbit(tail[-1])


def test_erf_integer_input_old_opset():
    check(K.erf(np.array([-2, 0, 3], np.int32)), np.array([0, 0, 0]), np.int32)  # erf in (-1, 1) truncates


# ----------------------------------------------------------------------------------- float tests
@pytest.mark.parametrize("dtype", FLOATS + [BF16, np.dtype(ml_dtypes.float8_e5m2)])
def test_isinf_isnan(dtype):
    x = np.array([-1.5, np.inf, np.nan, -np.inf, 0.0], np.float32).astype(dtype)
    pos, neg = np.array([0, 1, 0, 0, 0], bool), np.array([0, 0, 0, 1, 0], bool)
    check(L.is_inf(x), pos | neg)
    check(L.is_inf(x, detect_negative=0), pos)
    check(L.is_inf(x, detect_positive=0), neg)
    check(L.is_inf(x, detect_negative=0, detect_positive=0), np.zeros(5, bool))
    check(L.is_nan(x), np.array([0, 0, 1, 0, 0], bool))


def test_isnan_float8_e4m3fn():  # a type without inf: only NaN
    x = np.array([1.0, np.nan, 448.0], np.float32).astype(ml_dtypes.float8_e4m3fn)
    check(L.is_nan(x), np.array([0, 1, 0], bool))
    check(L.is_inf(x), np.zeros(3, bool))


# ----------------------------------------------------------------------------------- comparisons
COMPARE = [
    (L.equal, lambda a, b: a == b),
    (L.greater, lambda a, b: a > b),
    (L.greater_or_equal, lambda a, b: a >= b),
    (L.less, lambda a, b: a < b),
    (L.less_or_equal, lambda a, b: a <= b),
]


@pytest.mark.parametrize("dtype", INTS + FLOATS + [BF16])
@pytest.mark.parametrize("shapes", SHAPES[:4])
@pytest.mark.parametrize("kernel,ref", COMPARE, ids=lambda v: getattr(v, "__name__", ""))
def test_compare(kernel, ref, shapes, dtype):
    a, b = data(shapes[0], dtype, -3, 3), data(shapes[1], dtype, -3, 3)
    if np.dtype(dtype).kind in "fV":
        a, b = np.round(a.astype(np.float32)).astype(dtype), np.round(b.astype(np.float32)).astype(dtype)
    check(kernel(a, b), ref(a.astype(np.float64), b.astype(np.float64)), np.bool_)


def test_compare_nan_and_bool():
    n = np.array([np.nan, 1.0], np.float32)
    check(L.equal(n, n), np.array([False, True]))
    check(L.less_or_equal(n, n), np.array([False, True]))
    t = np.array([True, False])
    check(L.equal(t, np.array(True)), np.array([True, False]))


def test_equal_strings():
    a = np.array(["string1", "string2"], dtype=object)
    check(L.equal(a, np.array(["string1", "string3"], dtype=object)), np.array([True, False]))
    check(
        L.equal(np.array([[b"x"], [b"y"]], dtype=object), np.array(["x", "z", "y"])),
        np.array([[True, False, False], [False, False, True]]),
    )


# ------------------------------------------------------------------------------- logic and bits
LOGIC = [(L.and_, np.logical_and), (L.or_, np.logical_or), (L.xor, np.not_equal)]


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("kernel,ref", LOGIC, ids=lambda v: getattr(v, "__name__", ""))
def test_logic(kernel, ref, shapes):
    a = data(shapes[0], np.int8, 0, 2).astype(bool)
    b = data(shapes[1], np.int8, 0, 2).astype(bool)
    want = np.array([[ref(p, q) for q in (False, True)] for p in (False, True)])  # truth table
    check(
        kernel(a, b),
        want[a.astype(int), b.astype(int)]
        if a.shape == b.shape
        else want[np.broadcast_arrays(a, b)[0].astype(int), np.broadcast_arrays(a, b)[1].astype(int)],
    )
    check(L.not_(a), ~a)


def test_logic_refuses_non_bool():
    with pytest.raises(KernelError, match="bool"):
        L.and_(np.ones(2, np.int32), np.ones(2, np.int32))
    with pytest.raises(KernelError, match="bool"):
        L.not_(np.ones(2, np.float32))


def _py_bits(f, x, y, dtype):
    """Apply f to Python ints and wrap into dtype's range (two's complement)."""
    pair = np.frompyfunc(lambda p, q: f(int(p), int(q)), 2, 1)
    return wrap(pair(*np.broadcast_arrays(x, y)), dtype)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize(
    "kernel,f",
    [(L.bitwise_and, lambda p, q: p & q), (L.bitwise_or, lambda p, q: p | q), (L.bitwise_xor, lambda p, q: p ^ q)],
    ids=["and", "or", "xor"],
)
def test_bitwise(kernel, f, dtype):
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, (3, 4), dtype=dtype, endpoint=True)
    b = RNG.integers(info.min, info.max, (4,), dtype=dtype, endpoint=True)
    check(kernel(a, b), _py_bits(f, a, b, dtype), dtype)
    check(L.bitwise_not(a), _py_bits(lambda p, q: -p - 1, a, a, dtype), dtype)


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift(dtype, direction):
    bits = np.dtype(dtype).itemsize * 8
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, (4, 6), dtype=dtype, endpoint=True)
    lo = -3 if np.dtype(dtype).kind == "i" else 0
    y = RNG.integers(lo, bits + 3, (6,)).astype(dtype)

    def f(p, q):
        if q < 0 or q >= bits:
            return -1 if direction == "RIGHT" and p < 0 else 0
        return p << q if direction == "LEFT" else p >> q  # Python >> is arithmetic

    check(L.bit_shift(x, y, direction=direction), _py_bits(f, x, y, dtype), dtype)


def test_bit_shift_examples():
    check(
        L.bit_shift(np.array([16, 4, 1], np.uint32), np.array([1, 2, 3], np.uint32), direction="RIGHT"),
        np.array([8, 1, 0], np.uint32),
    )
    check(
        L.bit_shift(np.array([-128, 64], np.int8), np.array([1, 1], np.int8), direction="LEFT"),
        np.array([0, -128], np.int8),
    )
    with pytest.raises(KernelError, match="direction"):
        L.bit_shift(np.ones(2, np.uint8), np.ones(2, np.uint8), direction="left")
    with pytest.raises(KernelError, match="integer"):
        L.bit_shift(np.ones(2, np.float32), np.ones(2, np.float32), direction="LEFT")


# ---------------------------------------------------------------------------------- variadic
@pytest.mark.parametrize("dtype", INTS + FLOATS)
@pytest.mark.parametrize("shapes", [[(3, 4)], [(3, 4), (3, 4)], [(2, 1, 4), (3, 1), ()], [(), ()]])
def test_max_min_sum(shapes, dtype):
    xs = [data(s, dtype, 0, 10) for s in shapes]
    x0 = [x.copy() for x in xs]
    b = [x.astype(np.float64) for x in np.broadcast_arrays(*xs)]
    check(K.max_(*xs), np.max(np.stack(b), axis=0), dtype)
    check(K.min_(*xs), np.min(np.stack(b), axis=0), dtype)
    if np.dtype(dtype).kind == "f":
        check(K.sum_(*xs), np.sum(np.stack(b), axis=0), dtype)
        check(K.mean(*xs), np.mean(np.stack(b), axis=0), dtype)
    for x, y in zip(xs, x0):
        np.testing.assert_array_equal(x, y)
    one = K.max_(xs[0])
    assert one is not xs[0]  # a fresh array, never the input itself


def test_max_min_nan_propagates_and_bf16():
    a = np.array([1.0, np.nan, 3.0], np.float32)
    b = np.array([2.0, 0.0, np.nan], np.float32)
    check(K.max_(a, b), np.array([2.0, np.nan, np.nan]), np.float32)
    check(K.min_(a, b), np.array([1.0, np.nan, np.nan]), np.float32)
    h = np.array([1, 2, 4], np.float32).astype(BF16)
    check(K.mean(h, h * 3), np.array([2, 4, 8]), BF16)
    check(K.sum_(h, h), np.array([2, 4, 8]), BF16)


def test_variadic_errors():
    with pytest.raises(KernelError, match="at least one"):
        K.sum_()
    with pytest.raises(KernelError, match="broadcast"):
        K.max_(np.ones((2, 3)), np.ones((4,)))


# ------------------------------------------------------------------------------ where / clip
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.bool_, object, np.complex64])
def test_where(dtype):
    c = data((2, 1, 4), np.int8, 0, 2).astype(bool)
    x = data((3, 1), np.int8, 0, 5).astype(dtype)
    y = data((4,), np.int8, 0, 5).astype(dtype)
    cb, xb, yb = np.broadcast_arrays(c, x, y)
    want = np.array([xv if cv else yv for cv, xv, yv in zip(cb.ravel(), xb.ravel(), yb.ravel())], dtype=dtype).reshape(
        cb.shape
    )
    check(K.where(c, x, y), want, dtype)
    with pytest.raises(KernelError, match="bool"):
        K.where(c.astype(np.int32), x, y)
    with pytest.raises(KernelError, match="broadcast"):
        K.where(c, np.ones(3, dtype), y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int64, BF16])
@pytest.mark.parametrize("lo,hi", [(None, None), (2, None), (None, 5), (2, 5), (5, 2), (5, 5)])
def test_clip(dtype, lo, hi):
    x = data((3, 4), dtype, 0, 9)
    xf = x.astype(np.float64)
    want = xf
    if lo is not None:
        want = np.where(want < lo, lo, want)
    if hi is not None:
        want = np.where(want > hi, hi, want)  # min > max: everything becomes max
    got = K.clip(x, None if lo is None else np.array(lo, dtype), None if hi is None else np.array([hi], dtype))
    check(got, want, dtype)
    assert got is not x


def test_clip_errors_and_nan():
    with pytest.raises(KernelError, match="scalar"):
        K.clip(np.ones(3, np.float32), np.zeros(2, np.float32))
    check(
        K.clip(np.array([np.nan, -5.0], np.float32), np.float32(0), np.float32(1)), np.array([np.nan, 0.0]), np.float32
    )


# ------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    "kernel",
    [
        K.add,
        K.sub,
        K.mul,
        K.div,
        K.pow_,
        K.mod,
        L.equal,
        L.greater,
        L.less,
        L.greater_or_equal,
        L.less_or_equal,
        L.bitwise_and,
    ],
)
def test_binary_shape_mismatch(kernel):
    a = np.ones((2, 3), np.int32)
    with pytest.raises(KernelError, match=r"\(2, 3\) and \(4,\)"):
        kernel(a, np.ones((4,), np.int32))


def test_mod_bad_fmod():
    with pytest.raises(KernelError, match="fmod"):
        K.mod(np.ones(2, np.int32), np.ones(2, np.int32), fmod=2)


def test_registry_specs():
    from stdops.ops import OPS

    for name, spec in [
        ("add", "onnx:Add-7"),
        ("clip", "onnx:Clip-11"),
        ("equal", "onnx:Equal-7"),
        ("max_", "onnx:Max-6"),
        ("round_", "onnx:Round-11"),
        ("bit_shift", "onnx:BitShift-11"),
        ("sin", "onnx:Sin-7"),
        ("atanh", "onnx:Atanh-9"),
        ("is_inf", "onnx:IsInf-10"),
    ]:
        assert spec in OPS[name].specs
    assert OPS["bit_shift"].attrs["direction"] is not None
    assert OPS["mod"].attrs == {"fmod": 0}
    assert OPS["is_inf"].attrs == {"detect_negative": 1, "detect_positive": 1}


# ------------------------------------------------------------------- ONNX adapters (old opsets)
def _run(op_type, opset, inputs, out_type=None, **attrs):
    from onnx import TensorProto, helper

    import stdops.onnx

    names = [f"x{i}" for i in range(len(inputs))]
    node = helper.make_node(op_type, names, ["y"], **attrs)
    vis = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
        for n, x in zip(names, inputs)
    ]
    out = helper.make_tensor_value_info("y", out_type or TensorProto.FLOAT, None)
    m = helper.make_model(helper.make_graph([node], "g", vis, [out]), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 3
    return stdops.onnx.run(m, list(inputs))[0]


A4 = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)


@pytest.mark.parametrize("opset", [1, 6])
@pytest.mark.parametrize(
    "op_type,ref", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide)]
)
def test_legacy_broadcast(op_type, ref, opset):
    extra = {"consumed_inputs": [0, 0]} if opset == 1 else {}
    b = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    check(_run(op_type, opset, [A4, b], broadcast=1, axis=1, **extra), ref(A4, b[:, :, None]), np.float32)
    b = np.arange(1, 3, dtype=np.float32)
    check(_run(op_type, opset, [A4, b], broadcast=1, axis=0, **extra), ref(A4, b[:, None, None, None]), np.float32)
    b = np.arange(1, 21, dtype=np.float32).reshape(4, 5)
    check(_run(op_type, opset, [A4, b], broadcast=1, **extra), ref(A4, b), np.float32)
    b = np.full((1, 1), 3, np.float32)
    check(_run(op_type, opset, [A4[0, 0, 0], b], broadcast=1, **extra), ref(A4[0, 0, 0], 3), np.float32)
    check(_run(op_type, opset, [A4, A4 + 1], **extra), ref(A4, A4 + 1), np.float32)
    with pytest.raises(Exception, match="broadcast=0"):
        _run(op_type, opset, [A4, b])


def test_legacy_compare_and_pow():
    from onnx import TensorProto

    a = np.array([[1, 2], [3, 4]], np.int32)
    b = np.array([1, 3], np.int32)
    check(_run("Equal", 1, [a, b], TensorProto.BOOL, broadcast=1, axis=0), a == b[:, None])
    check(_run("Greater", 1, [a, b], TensorProto.BOOL, broadcast=1), a > b)
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    check(_run("Pow", 1, [x, np.array([2.0], np.float32)], broadcast=1), x**2, np.float32)


def test_clip_attribute_versions():
    x = np.array([-3.0, 0.5, 7.0], np.float32)
    check(_run("Clip", 6, [x], min=-1.0, max=1.0), np.array([-1.0, 0.5, 1.0]), np.float32)
    check(_run("Clip", 6, [x]), x, np.float32)
    check(_run("Clip", 1, [x], min=0.0, consumed_inputs=[0]), np.array([0.0, 0.5, 7.0]), np.float32)


def test_consumed_inputs_dropped():
    x = np.array([4.0, 9.0], np.float32)
    check(_run("Sqrt", 1, [x], consumed_inputs=[0]), np.array([2.0, 3.0]), np.float32)
    check(_run("Sum", 1, [x, x, x], consumed_inputs=[0, 0, 0]), 3 * x, np.float32)
    check(_run("Max", 6, [x, x[::-1]]), np.array([9.0, 9.0]), np.float32)


# ------------------------------------------------------------------- property: broadcasting
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=4, max_side=3),
    dtype=st.sampled_from([np.float32, np.int32, np.uint8]),
)
def test_broadcasting_property(shapes, dtype):
    xs = [data(s, dtype, 0, 5) for s in shapes.input_shapes]
    want_shape = shapes.result_shape
    b = [x.astype(np.float64) for x in np.broadcast_arrays(*xs)]
    check(K.max_(*xs), np.maximum(np.maximum(b[0], b[1]), b[2]), dtype)
    ref_t = np.int64 if np.dtype(dtype).kind in "iu" else np.float64
    s2 = sum(x.astype(ref_t) for x in np.broadcast_arrays(xs[0], xs[1]))
    check(K.add(xs[0], xs[1]), wrap(s2.astype(object), dtype) if np.dtype(dtype).kind in "iu" else s2, dtype)
    got = K.where(xs[0] > 2, xs[1], xs[2])
    assert got.shape == want_shape and got.dtype == dtype
    np.testing.assert_array_equal(got, np.where(b[0] > 2, b[1], b[2]).astype(dtype))
