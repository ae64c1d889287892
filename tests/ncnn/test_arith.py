"""ncnn arithmetic layers against the official wheel: UnaryOp, BinaryOp (every op, every branch of
ncnn's broadcasting), Eltwise, Scale, Bias, BatchNorm, Cast, Packing, MemoryData, Diag; bad params."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import KernelError, ModelFormatError
from stdops.ncnn.layers.arith import BINARY_NAMES, UNARY_NAMES, ncnn_broadcast_shapes

from . import quirks, wheel
from .test_activation import SHAPES, compare, needs_wheel, ours, rand_shape, wheel_batch

# --------------------------------------------------------------------------- UnaryOp

DOMAIN = {
    "sqrt": (0.01, 9),
    "rsqrt": (0.05, 9),
    "log": (0.01, 9),
    "log10": (0.01, 9),
    "asin": (-0.99, 0.99),
    "acos": (-0.99, 0.99),
    "atanh": (-0.95, 0.95),
    "acosh": (1.0, 6),
    "log1p": (-0.9, 6),
    "tan": (-1.4, 1.4),
    "exp": (-6, 6),
    "expm1": (-6, 6),
    "sinh": (-5, 5),
    "cosh": (-5, 5),
}


def _unary_input(rng, name, shape):
    lo, hi = DOMAIN.get(name, (-5, 5))
    x = rng.uniform(lo, hi, shape).astype(np.float32)
    if name == "reciprocal":
        x = np.where(np.abs(x) < 0.05, np.float32(0.5), x)
    if name in ("round", "trunc", "floor", "ceil", "sign"):
        flat = x.reshape(-1)
        k = flat.size // 3
        flat[:k] = np.round(flat[:k] * 2) / 2  # exact halves and integers (round: half to even), zeros
    return x


@needs_wheel
@pytest.mark.parametrize("op_type", range(len(UNARY_NAMES)), ids=UNARY_NAMES)
def test_unaryop(op_type):
    name = UNARY_NAMES[op_type]
    rng = np.random.default_rng(100 + op_type)
    cases = []
    for k in range(20):
        shape = SHAPES[k % len(SHAPES)] if k < 8 else rand_shape(rng)
        cases.append(("UnaryOp", {0: op_type} if op_type or k else {}, [], [_unary_input(rng, name, shape)]))
    assert compare(cases, atol=1e-4, rtol=1e-4) == 20


# --------------------------------------------------------------------------- BinaryOp


def _broadcast_pairs(rng) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Shape pairs reaching every branch of ncnn's BinaryOp broadcasting (numpy order)."""
    pairs = []
    for nd in (1, 2, 3, 4):
        s = tuple(int(v) for v in rng.integers(2, 6, nd))
        pairs.append((s, s))  # no broadcast
        pairs.append((s, (1,)))  # scalar-like, 1d [1]
        pairs.append(((1,), s))
        pairs.append((s, (1,) * nd))  # scalar-like, all ones
        # explicit broadcast: some axes 1 in B, in A, or in both (one operand 1 where the other is not)
        for _ in range(2):
            mask = rng.integers(0, 2, nd).astype(bool)
            b = tuple(1 if m else v for m, v in zip(mask, s))
            pairs.append((s, b))
            pairs.append((b, s))
        if nd >= 2:
            a = tuple(1 if i % 2 else v for i, v in enumerate(s))
            b = tuple(v if i % 2 else 1 for i, v in enumerate(s))
            pairs.append((a, b))
    # implicit broadcast of a lower-rank operand (expanded at its inner end)
    h, w = 3, 5
    c, d = 4, 2
    pairs += [
        ((h, w), (h,)),
        ((h, w), (w,)),
        ((h,), (h, w)),
        ((w,), (h, w)),
        ((4, 4), (4,)),
        ((4,), (4, 4)),
        ((c, h, w), (c,)),
        ((c, h, w), (w,)),
        ((c,), (c, h, w)),
        ((w,), (c, h, w)),
        ((4, 3, 4), (4,)),
        ((c, h, w), (c, h)),
        ((c, h), (c, h, w)),
        ((c, 1), (c, h, w)),
        ((c, h, w), (1, h)),
        ((c, d, h, w), (c,)),
        ((c, d, h, w), (w,)),
        ((c,), (c, d, h, w)),
        ((w,), (c, d, h, w)),
        ((c, d, h, w), (c, d)),
        ((c, d), (c, d, h, w)),
        ((c, d, h, w), (c, d, h)),
        ((c, d, h), (c, d, h, w)),
        ((c, d, h, w), (1, d)),
        ((c, d, h, w), (c, 1, h)),
        ((c, 1, h), (c, d, h, w)),
    ]
    return pairs


def _binary_inputs(rng, name, sa, sb):
    a = rng.uniform(-3, 3, sa).astype(np.float32)
    b = rng.uniform(-3, 3, sb).astype(np.float32)
    if name in ("pow", "rpow"):
        base, expo = (a, b) if name == "pow" else (b, a)
        np.abs(base, out=base)
        base += np.float32(0.25)
        expo *= np.float32(0.7)
    elif name in ("div", "rdiv", "fmod", "rfmod", "floor_divide", "rfloor_divide", "remainder", "rremainder"):
        for v in (a, b):  # keep divisors (either operand of the reversed forms) away from zero
            v[np.abs(v) < 0.2] = np.float32(0.75)
    return a, b


@needs_wheel
@pytest.mark.parametrize("op_type", range(len(BINARY_NAMES)), ids=BINARY_NAMES)
def test_binaryop_broadcasting(op_type):
    name = BINARY_NAMES[op_type]
    rng = np.random.default_rng(200 + op_type)
    cases = []
    for sa, sb in _broadcast_pairs(rng):
        cases.append(("BinaryOp", {0: op_type}, [], list(_binary_inputs(rng, name, sa, sb))))
    for k in range(6):  # with_scalar
        shape = SHAPES[(k + op_type) % len(SHAPES)]
        a, b = _binary_inputs(rng, name, shape, (1,))
        cases.append(("BinaryOp", {0: op_type, 1: 1, 2: float(b[0])}, [], [a]))
    assert compare(cases, atol=1e-4, rtol=1e-4) >= 20


def test_fmod_and_floor_divide_follow_c_at_whole_quotients():
    """ncnn's reference binaryop.cpp computes fmodf(x, y) and floorf(x / y): fmod(0.75, 0.75) = 0 and
    floor_divide(0.75, 0.75) = 1 (C99 7.12.10.1: fmod is exact). The wheel's x86 SIMD path computes
    x - trunc(x / y) * y with a fast-math division estimate, which on some CPUs (AVX512 ones here) lands
    below 1 and gives 0.75 and 0 for the elements it vectorizes; the tail elements go through fmodf and
    give 0. stdops follows the C rule; the differential tests compare the wheel away from whole
    quotients only (tests/ncnn/quirks.py)."""
    x = np.full(37, 0.75, np.float32)
    assert not sn.run_layer("BinaryOp", {0: 12}, [], [x, x])[0].any()
    assert (sn.run_layer("BinaryOp", {0: 15}, [], [x, x])[0] == 1).all()
    assert not sn.run_layer("BinaryOp", {0: 13, 1: 1, 2: 0.75}, [], [x])[0].any()
    assert not quirks.binaryop_mask({0: 12}, [x, x]).any()
    if wheel.available():  # the wheel's scalar tail (C fmodf) agrees on every CPU: the last element
        theirs = wheel.wheel_run("BinaryOp", {0: 12}, [], [x, x])[0]
        assert theirs[-1] == 0.0 and set(np.unique(theirs)) <= {0.0, 0.75}


def test_ncnn_broadcast_shapes():
    assert ncnn_broadcast_shapes((3, 5), (3,)) == ((3, 5), (3, 1))
    assert ncnn_broadcast_shapes((3, 5), (5,)) == ((3, 5), (1, 5))
    assert ncnn_broadcast_shapes((4, 4), (4,)) == ((4, 4), (4, 1))  # h wins over w
    assert ncnn_broadcast_shapes((2,), (2, 3, 4)) == ((2, 1, 1), (2, 3, 4))
    assert ncnn_broadcast_shapes((2, 3, 4), (3, 4)) == ((2, 3, 4), (3, 4, 1))  # not numpy's (1, 3, 4)
    assert ncnn_broadcast_shapes((2, 3, 4, 5), (2, 3, 4)) == ((2, 3, 4, 5), (2, 3, 4, 1))


def test_binaryop_errors():
    a, b = np.ones((2, 3), np.float32), np.ones((4,), np.float32)
    with pytest.raises(KernelError, match="do not broadcast"):
        sn.run_layer("BinaryOp", {0: 0}, [], [a, b])
    with pytest.raises(ModelFormatError, match=r"param 0 \(op_type\): a float literal"):
        sn.run_layer("BinaryOp", {0: 1.0}, [], [a, a])
    with pytest.raises(ValueError, match="op_type 19"):
        sn.run_layer("BinaryOp", {0: 19}, [], [a, a])
    with pytest.raises(ValueError, match="takes 1 bottom"):
        sn.run_layer("BinaryOp", {0: 0, 1: 1}, [], [a, a])
    with pytest.raises(ValueError, match="op_type 28"):
        sn.run_layer("UnaryOp", {0: 28}, [], [a])


# --------------------------------------------------------------------------- Eltwise, Scale, Bias, BatchNorm


@needs_wheel
def test_eltwise():
    rng = np.random.default_rng(300)
    cases = []
    for k in range(36):
        shape = SHAPES[k % len(SHAPES)] if k < 8 else rand_shape(rng)
        n = int(rng.integers(2, 5))
        xs = [rng.uniform(-2, 2, shape).astype(np.float32) for _ in range(n)]
        op = k % 3
        params = {0: op} if k else {}
        if op == 1 and k % 2:
            params[1] = [float(v) for v in rng.uniform(-2, 2, n)]
        cases.append(("Eltwise", params, [], xs))
    assert compare(cases) == 36


@needs_wheel
def test_scale():
    rng = np.random.default_rng(301)
    cases = []
    for k in range(30):
        shape = SHAPES[k % len(SHAPES)] if k < 8 else rand_shape(rng)
        x = rng.uniform(-2, 2, shape).astype(np.float32)
        n = shape[0]
        s = rng.uniform(-2, 2, n).astype(np.float32)
        if k % 3 == 2:  # the two-bottom form: the scale is a 1d blob
            cases.append(("Scale", {0: -233}, [], [x, s]))
        elif k % 3 == 1:
            cases.append(("Scale", {0: n, 1: 1}, [s, rng.uniform(-1, 1, n).astype(np.float32)], [x]))
        else:
            cases.append(("Scale", {0: n}, [s], [x]))
    assert compare(cases) == 30


@needs_wheel
def test_bias():
    rng = np.random.default_rng(302)
    cases = []
    for k in range(24):
        shape = SHAPES[k % len(SHAPES)] if k < 8 else rand_shape(rng)
        n = shape[0] if len(shape) >= 3 else int(rng.integers(1, 4))  # 1d/2d blobs use bias[0]
        cases.append(
            ("Bias", {0: n}, [rng.uniform(-2, 2, n).astype(np.float32)], [rng.uniform(-2, 2, shape).astype(np.float32)])
        )
    assert compare(cases) == 24


@needs_wheel
def test_batchnorm():
    rng = np.random.default_rng(303)
    cases = []
    for k in range(28):
        shape = SHAPES[k % len(SHAPES)] if k < 8 else rand_shape(rng)
        c = shape[0]
        slope, mean, bias = (rng.uniform(-2, 2, c).astype(np.float32) for _ in range(3))
        var = rng.uniform(0, 3, c).astype(np.float32)
        eps = float(rng.choice([0.0, 1e-5, 1e-3]))
        if k % 4 == 3:  # a zero variance without eps: ncnn's 1e-4 guard
            var[0] = 0
            eps = 0.0
        params = {0: c, 1: eps} if k % 5 else {0: c}
        if 1 not in params:
            var = np.maximum(var, np.float32(0.1))
        cases.append(("BatchNorm", params, [slope, mean, var, bias], [rng.uniform(-3, 3, shape).astype(np.float32)]))
    assert compare(cases, atol=1e-3) == 28  # the 1e-4 guard turns x into x * 1e4


def test_scale_bias_batchnorm_errors():
    x = np.ones((3, 2, 2), np.float32)
    with pytest.raises(ModelFormatError, match="has 2 elements, the params say 3"):
        sn.run_layer("Scale", {0: 3}, [np.ones(2, np.float32)], [x])
    with pytest.raises(KernelError, match="2 values for a blob of shape"):
        sn.run_layer("Scale", {0: 2}, [np.ones(2, np.float32)], [x])
    with pytest.raises(ValueError, match="bias_term must be 0"):
        sn.run_layer("Scale", {0: -233, 1: 1}, [], [x, np.ones(3, np.float32)])
    with pytest.raises(KernelError, match="4 channels"):
        sn.run_layer("BatchNorm", {0: 4}, [np.ones(4, np.float32)] * 4, [x])
    with pytest.raises(ModelFormatError, match=r"param 1 \(eps\): expected a float"):
        sn.run_layer("BatchNorm", {0: 3, 1: [1]}, [np.ones(3, np.float32)] * 4, [x])
    with pytest.raises(ValueError, match="Eltwise op_type 3"):
        sn.run_layer("Eltwise", {0: 3}, [], [x, x])
    with pytest.raises(KernelError, match="shapes differ"):
        sn.run_layer("Eltwise", {0: 1}, [], [x, x[:2]])
    with pytest.raises(ValueError, match="scale_data_size=0 must be >= 1"):
        sn.run_layer("Scale", {}, [], [x])
    with pytest.raises(ValueError, match="bias_data_size=0 must be >= 1"):
        sn.run_layer("Bias", {}, [], [x])
    with pytest.raises(ModelFormatError, match=r"line 4 layer 'b' \(BatchNorm\): params do not define the weights"):
        sn.Net.from_bytes("7767517\n2 2\nInput in 0 1 x\nBatchNorm b 1 1 x y 0=-2\n", b"")
    with pytest.raises(ValueError, match="3 bottoms but 2 coeffs"):
        sn.run_layer("Eltwise", {0: 1, 1: [1.0, 2.0]}, [], [x, x, x])


# --------------------------------------------------------------------------- Cast, Packing


def _payload(values: np.ndarray) -> np.ndarray:
    """A float32 blob whose every channel (or whole 1d/2d data) starts with the bytes of ``values``
    (a 16- or 8-bit array of the same shape): how the wheel receives a non-fp32 input Mat."""
    p = np.zeros(values.shape, np.float32)
    if values.ndim <= 2:
        p.reshape(-1).view(np.uint8)[: values.nbytes] = values.reshape(-1).view(np.uint8)
    else:
        for q in range(values.shape[0]):
            p[q].reshape(-1).view(np.uint8)[: values[q].nbytes] = values[q].reshape(-1).view(np.uint8)
    return p


def _cast_shape(rng, k):
    nd = 1 + k % 4
    shape = [int(v) for v in rng.integers(1, 5, nd)]
    shape[-1] = 4 * int(rng.integers(1, 4))  # whole SIMD groups (the wheel's tail rounds differently)
    return tuple(shape)


@needs_wheel
def test_cast():
    rng = np.random.default_rng(400)
    ours_in, wheel_in, cases, kinds = [], [], [], []
    for k in range(60):
        kind = [(1, 2), (1, 4), (2, 1), (4, 1), (3, 1), (1, 1)][k % 6]
        shape = _cast_shape(rng, k)
        x = (rng.standard_normal(shape) * rng.choice([1, 100, 1e4])).astype(np.float32)
        if kind == (2, 1):
            xo = x.astype(np.float16)
            xw = _payload(xo)
        elif kind == (4, 1):
            xo = x.astype(ml_dtypes.bfloat16)
            xw = _payload(xo.view(np.uint16))
        elif kind == (3, 1):
            xo = rng.integers(-128, 128, shape).astype(np.int8)
            xw = _payload(xo)
        else:
            xo = xw = x
        ours_in.append(xo)
        wheel_in.append(xw)
        kinds.append(kind)
        cases.append(("Cast", {0: kind[0], 1: kind[1]}, [], [xw]))
    theirs = wheel_batch(cases)
    for k, (kind, xo, th) in enumerate(zip(kinds, ours_in, theirs)):
        (y,) = sn.run_layer("Cast", {0: kind[0], 1: kind[1]}, [], [xo])
        t = th[0]
        assert y.shape == t.shape, (k, kind)
        if kind[1] == 2:
            assert y.dtype == np.float16
            np.testing.assert_array_equal(y.view(np.uint16), t.view(np.uint16), err_msg=f"case {k}")
        elif kind[1] == 4:
            assert y.dtype == ml_dtypes.bfloat16
            np.testing.assert_array_equal(y.view(np.uint16), t.view(np.uint16), err_msg=f"case {k}")
        else:
            assert y.dtype == np.float32
            np.testing.assert_array_equal(y, t, err_msg=f"case {k} {kind}")


def test_cast_to_int8_and_chains():
    x = np.array([-200, -128.5, -127.5, -2.5, -0.5, -0.49, 0, 0.5, 1.5, 2.5, 126.5, 127.5, 300], np.float32)
    (y,) = sn.run_layer("Cast", {0: 1, 1: 3}, [], [x])
    assert y.dtype == np.int8
    assert y.tolist() == [-128, -128, -128, -3, -1, 0, 0, 1, 2, 3, 127, 127, 127]  # half away from zero
    (h,) = sn.run_layer("Cast", {0: 1, 1: 2}, [], [x])
    (b,) = sn.run_layer("Cast", {0: 2, 1: 4}, [], [h])
    assert b.dtype == ml_dtypes.bfloat16
    (z,) = sn.run_layer("Cast", {0: 0, 1: 0}, [], [x])
    assert z is x
    with pytest.raises(ValueError, match="type_to=5"):
        sn.run_layer("Cast", {0: 1, 1: 5}, [], [x])


@needs_wheel
def test_packing():
    rng = np.random.default_rng(401)
    cases = []
    for k in range(36):
        shape = SHAPES[k % len(SHAPES)] if k < 8 else rand_shape(rng)
        if 8 <= k < 24 and len(shape) >= 2:
            shape = (int(rng.choice([4, 8, 12, 16])),) + shape[1:]
        ep = [1, 4, 8][k % 3] if k else None
        params = {} if ep is None else {0: ep}
        if k >= 24:
            params[1] = 1  # use_padding: axis 0 grows to a multiple of out_elempack
        cases.append(("Packing", params, [], [rng.uniform(-2, 2, shape).astype(np.float32)]))
    theirs = wheel_batch(cases, unpack=True)
    packed = padded = 0
    for k, (case, th) in enumerate(zip(cases, theirs)):
        t = th[0]
        if isinstance(t, tuple):  # the wheel packed the blob; unpacked, it is the input again
            t, ep = t
            assert ep == case[1][0]
            packed += 1
        (y,) = ours(case)
        x = case[3][0]
        assert y.shape == t.shape, f"Packing case {k}: {y.shape} vs the wheel's {t.shape}"
        n = x.shape[0]
        wheel.assert_close([y[:n]], [t[:n]], what=f"Packing case {k}")  # ncnn leaves the padding unset
        if y.shape[0] > n:
            padded += 1
            assert not y[n:].any()
    assert packed >= 10 and padded >= 3


# --------------------------------------------------------------------------- MemoryData, Diag


@needs_wheel
def test_memorydata():
    rng = np.random.default_rng(402)
    cases = []
    for k in range(24):
        nd = 1 + k % 4
        dims = [int(v) for v in rng.integers(1, 6, nd)]
        params = dict(zip([0, 1, 2, 11], dims[::-1] if nd < 4 else [dims[3], dims[2], dims[0], dims[1]]))
        if k % 2:
            params[21] = 0  # tagged
        n = int(np.prod(dims))
        data = rng.uniform(-2, 2, n).astype(np.float32)
        if k % 4 == 3:
            data = rng.integers(-128, 128, n).astype(np.int8)  # tagged int8 storage
        cases.append(("MemoryData", params, [data], []))
    assert compare(cases) == 24
    (y,) = sn.run_layer("MemoryData", {0: 3, 1: 2, 11: 4, 2: 5}, [np.arange(120, dtype=np.float32)], [])
    assert y.shape == (5, 4, 2, 3) and y[1, 0, 0, 0] == 24


@needs_wheel
def test_diag():
    rng = np.random.default_rng(403)
    cases = []
    for k in range(30):
        if k % 2:
            shape = (int(rng.integers(1, 7)), int(rng.integers(1, 7)))
            kk = int(rng.integers(-shape[0] + 1, shape[1]))  # the diagonal exists
        else:
            shape = (int(rng.integers(1, 7)),)
            kk = int(rng.integers(-3, 4))
        cases.append(("Diag", {0: kk} if k > 1 else {}, [], [rng.uniform(-2, 2, shape).astype(np.float32)]))
    assert compare(cases) == 30
    (y,) = sn.run_layer("Diag", {0: 9}, [], [np.ones((3, 4), np.float32)])
    assert y.shape == (0,)
    with pytest.raises(KernelError, match="1d or 2d"):
        sn.run_layer("Diag", {}, [], [np.ones((2, 2, 2), np.float32)])


@needs_wheel
def test_binaryop_random_shape_pairs():
    """Random small shapes (many coincidences like n == h == w) that ncnn's rule accepts."""
    from stdops.ncnn.layers.arith import ncnn_broadcast_shapes as nbs

    rng = np.random.default_rng(250)
    cases = []
    while len(cases) < 150:
        sa = tuple(int(v) for v in rng.integers(1, 4, int(rng.integers(1, 5))))
        sb = tuple(int(v) for v in rng.integers(1, 4, int(rng.integers(1, 5))))
        ea, eb = nbs(sa, sb)
        if all(m == n or 1 in (m, n) for m, n in zip(ea, eb)):
            cases.append(
                (
                    "BinaryOp",
                    {0: int(rng.choice([0, 1, 2, 7]))},
                    [],
                    [rng.uniform(-2, 2, sa).astype(np.float32), rng.uniform(-2, 2, sb).astype(np.float32)],
                )
            )
    assert compare(cases) == 150
