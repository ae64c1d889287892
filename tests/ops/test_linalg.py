"""Linear algebra kernels (stdops.ops.linalg) and their ONNX adapters, against independent formulas."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import stdops.onnx
from stdops.errors import KernelError
from stdops.ops import linalg as L
from stdops.ops.bind import bind

RNG = np.random.default_rng(1)


def _same(got, want, rtol=1e-5, atol=1e-5):
    want = np.asarray(want)
    assert isinstance(got, np.ndarray), type(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


def _loop_matmul(a, b):
    """Matrix product written as an explicit sum over k, with numpy.matmul's shape rules."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    va, vb = a64.ndim == 1, b64.ndim == 1
    if va:
        a64 = a64[None, :]
    if vb:
        b64 = b64[:, None]
    y = (a64[..., :, :, None] * b64[..., None, :, :]).sum(axis=-2)
    if va:
        y = y[..., 0, :]
    if vb:
        y = y[..., 0]
    return y


# ----------------------------------------------------------------------------- MatMul
SHAPES = [
    ((3, 4), (4, 5)),
    ((2, 3, 4), (2, 4, 5)),
    ((1, 3, 4), (6, 4, 2)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((4,), (2, 4, 3)),
    ((2, 3, 4), (4,)),
]


@pytest.mark.parametrize("sa, sb", SHAPES)
@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.int64, np.uint32]
)
def test_matmul(sa, sb, dtype):
    a = RNG.integers(0, 4, sa).astype(dtype)
    b = RNG.integers(0, 4, sb).astype(dtype)
    _same(L.mat_mul(a, b), _loop_matmul(a, b).astype(dtype))


@pytest.mark.parametrize("sa, sb", [((3, 4), (5, 6)), ((2, 3, 4), (3, 4, 5)), ((), (3,)), ((3,), (4,))])
def test_matmul_bad_shapes(sa, sb):
    with pytest.raises(KernelError):
        L.mat_mul(np.ones(sa, np.float32), np.ones(sb, np.float32))


def test_matmul_dtype_mismatch():
    with pytest.raises(KernelError):
        L.mat_mul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float64))


# ----------------------------------------------------------------------------- Gemm
@pytest.mark.parametrize("transA, transB", list(itertools.product([0, 1], [0, 1])))
@pytest.mark.parametrize("cshape", [None, (), (1,), (5,), (3, 1), (1, 5), (3, 5)])
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (0.5, 2.0), (2.0, 0.0)])
def test_gemm(transA, transB, cshape, alpha, beta):
    a = RNG.standard_normal((4, 3) if transA else (3, 4)).astype(np.float32)
    b = RNG.standard_normal((5, 4) if transB else (4, 5)).astype(np.float32)
    c = None if cshape is None else RNG.standard_normal(cshape).astype(np.float32)
    a2 = a.T if transA else a
    b2 = b.T if transB else b
    want = alpha * _loop_matmul(a2, b2)
    if c is not None:
        want = want + beta * c.astype(np.float64)
    got = L.gemm(a, b, c, alpha=alpha, beta=beta, transA=transA, transB=transB)
    _same(got, want.astype(np.float32), rtol=1e-5)


def test_gemm_defaults_and_dtypes():
    for dt in (np.float64, np.float16, np.int32, np.int64):
        a = RNG.integers(0, 3, (2, 3)).astype(dt)
        b = RNG.integers(0, 3, (3, 4)).astype(dt)
        c = RNG.integers(0, 3, (4,)).astype(dt)
        _same(L.gemm(a, b, c), (_loop_matmul(a, b) + c).astype(dt))
        _same(L.gemm(a, b, c, alpha=2.0, beta=3.0), (2 * _loop_matmul(a, b) + 3 * c.astype(np.float64)).astype(dt))


@pytest.mark.parametrize(
    "sa, sb, sc",
    [
        ((3, 4), (5, 6), None),
        ((3, 4), (4, 5), (4,)),
        ((3, 4), (4, 5), (3, 5, 1)),
        ((3, 4, 1), (4, 5), None),
        ((3, 4), (4, 5), (2, 5)),
    ],
)
def test_gemm_bad_shapes(sa, sb, sc):
    c = None if sc is None else np.ones(sc, np.float32)
    with pytest.raises(KernelError):
        L.gemm(np.ones(sa, np.float32), np.ones(sb, np.float32), c)


@pytest.mark.parametrize("transA, transB", list(itertools.product([0, 1], [0, 1])))
@pytest.mark.parametrize("cshape", [None, (5,), (3, 1), (3, 5)])
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (0.5, 2.0)])
def test_gemm_prepared_constant_b(transA, transB, cshape, alpha, beta):
    """B (and C) known at load time: the kernel's prepare lays B' out once; the step still computes
    alpha * A' B' + beta * C, and a B that is not the prepared one runs the plain kernel."""
    a = RNG.standard_normal((4, 3) if transA else (3, 4)).astype(np.float32)
    b = RNG.standard_normal((5, 4) if transB else (4, 5)).astype(np.float32)
    c = None if cshape is None else RNG.standard_normal(cshape).astype(np.float32)
    attrs = dict(alpha=alpha, beta=beta, transA=transA, transB=transB)
    step = bind(L.gemm, attrs, (None, b, c))
    assert step.prepared
    want = alpha * _loop_matmul(a.T if transA else a, b.T if transB else b)
    if c is not None:
        want = want + beta * c.astype(np.float64)
    for _ in range(2):
        _same(step(a, b, c), want.astype(np.float32), rtol=1e-5)
    b2 = b + 1  # another B at run time: the plain kernel
    want2 = alpha * _loop_matmul(a.T if transA else a, b2.T if transB else b2)
    if c is not None:
        want2 = want2 + beta * c.astype(np.float64)
    _same(step(a, b2, c), want2.astype(np.float32), rtol=1e-5)


def test_gemm_does_not_modify_inputs():
    a, b, c = np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)
    L.gemm(a, b, c, alpha=3.0, beta=2.0)
    assert (a == 1).all() and (b == 1).all() and (c == 1).all()


# ----------------------------------------------------------------------------- Einsum
def _ein_loops(terms, out, xs):
    """Einstein summation from the definition: enumerate every index assignment."""
    sizes = {}
    for t, x in zip(terms, xs):
        for ch, n in zip(t, x.shape):
            sizes[ch] = n
    letters = sorted(sizes)
    y = np.zeros([sizes[c] for c in out], np.float64)
    for vals in itertools.product(*[range(sizes[c]) for c in letters]):
        env = dict(zip(letters, vals))
        p = 1.0
        for t, x in zip(terms, xs):
            p *= float(x[tuple(env[c] for c in t)])
        y[tuple(env[c] for c in out)] += p
    return y


@pytest.mark.parametrize(
    "eq, shapes, terms, out",
    [
        ("ij->ji", [(2, 3)], ["ij"], "ji"),
        ("ij->", [(2, 3)], ["ij"], ""),
        ("ii->i", [(3, 3)], ["ii"], "i"),
        ("i,i", [(4,), (4,)], ["i", "i"], ""),
        ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)], ["bij", "bjk"], "bik"),
        ("ij,jk", [(2, 3), (3, 4)], ["ij", "jk"], "ik"),
        ("ba, ac -> bc", [(2, 3), (3, 2)], ["ba", "ac"], "bc"),
        ("Ab,bA->A", [(2, 3), (3, 2)], ["Ab", "bA"], "A"),
        ("i,j,k->ijk", [(2,), (3,), (2,)], ["i", "j", "k"], "ijk"),
        ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)], ["ij", "jk", "kl"], "il"),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, ml_dtypes.bfloat16])
def test_einsum(eq, shapes, terms, out, dtype):
    xs = [RNG.integers(-2, 3, s).astype(dtype) for s in shapes]
    _same(L.einsum(*xs, equation=eq), _ein_loops(terms, out, xs).astype(dtype))


def test_einsum_ellipsis():
    a = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = RNG.standard_normal((5, 2)).astype(np.float32)
    want = np.stack([np.stack([_ein_loops(["ij", "jk"], "ik", [a[p, q], b]) for q in range(3)]) for p in range(2)])
    _same(L.einsum(a, b, equation="...ij,jk->...ik"), want.astype(np.float32))


@pytest.mark.parametrize("eq, n", [("ij,jk->ik", 1), ("ij->ji->ij", 1), ("ij,jk->iz", 2)])
def test_einsum_bad(eq, n):
    with pytest.raises(KernelError):
        L.einsum(*[np.ones((2, 2), np.float32)] * n, equation=eq)


# ----------------------------------------------------------------------------- Det
def _det_ref(m):
    """Determinant by Laplace expansion (small matrices only)."""
    n = m.shape[0]
    if n == 1:
        return float(m[0, 0])
    return sum((-1) ** j * float(m[0, j]) * _det_ref(np.delete(m[1:], j, axis=1)) for j in range(n))


@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (4, 4), (2, 3, 3), (2, 1, 2, 2), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_det(shape, dtype):
    x = RNG.integers(-3, 4, shape).astype(dtype)
    flat = x.reshape(-1, shape[-1], shape[-1]).astype(np.float64)
    want = np.array([_det_ref(m) for m in flat]).reshape(shape[:-2]).astype(dtype)
    _same(L.det(x), want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("shape, dtype", [((2, 3), np.float32), ((3,), np.float32), ((2, 2), np.int32)])
def test_det_bad(shape, dtype):
    with pytest.raises(KernelError):
        L.det(np.ones(shape, dtype))


# ----------------------------------------------------------------------------- MatMulInteger
@pytest.mark.parametrize("ta, tb", list(itertools.product([np.int8, np.uint8], [np.int8, np.uint8])))
@pytest.mark.parametrize("zp", ["none", "scalar", "vector"])
def test_matmul_integer(ta, tb, zp):
    lo = lambda t: -128 if t == np.int8 else 0  # noqa: E731
    a = RNG.integers(lo(ta), lo(ta) + 256, (3, 4)).astype(ta)
    b = RNG.integers(lo(tb), lo(tb) + 256, (4, 2)).astype(tb)
    if zp == "none":
        za = zb = None
        za64, zb64 = 0, 0
    elif zp == "scalar":
        za, zb = np.array(lo(ta) + 7, ta), np.array(lo(tb) + 200, tb)
        za64, zb64 = int(za), int(zb)
    else:
        za = np.array([lo(ta) + 1, lo(ta) + 100, lo(ta) + 255], ta)
        zb = np.array([lo(tb) + 3, lo(tb) + 128], tb)
        za64, zb64 = za.astype(np.int64)[:, None], zb.astype(np.int64)[None, :]
    want = _loop_matmul(a.astype(np.int64) - za64, b.astype(np.int64) - zb64).astype(np.int32)
    _same(L.mat_mul_integer(a, b, za, zb), want)


def test_matmul_integer_batched_and_errors():
    a = RNG.integers(0, 256, (2, 3, 4)).astype(np.uint8)
    b = RNG.integers(-128, 128, (4, 5)).astype(np.int8)
    _same(L.mat_mul_integer(a, b), _loop_matmul(a, b).astype(np.int32))
    with pytest.raises(KernelError):
        L.mat_mul_integer(a.astype(np.int32), b)
    with pytest.raises(KernelError):
        L.mat_mul_integer(a, b, np.array([1, 2], np.uint8))
    with pytest.raises(KernelError):
        L.mat_mul_integer(a, b, np.array(1, np.int8))


# ----------------------------------------------------------------------------- ONNX adapters
def _run(node, inputs, opset):
    g = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in zip(node.input, inputs)
        ],
        [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return stdops.onnx.run(m, list(inputs))[0]


@pytest.mark.parametrize(
    "opset, attrs", [(1, {"broadcast": 1}), (6, {"broadcast": 1}), (6, {}), (7, {}), (11, {}), (13, {})]
)
def test_onnx_gemm_versions(opset, attrs):
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal((5, 4)).astype(np.float32)
    c = RNG.standard_normal((5,)).astype(np.float32)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1, alpha=0.5, beta=2.0, **attrs)
    _same(_run(node, [a, b, c], opset), (0.5 * _loop_matmul(a, b.T) + 2.0 * c).astype(np.float32))


@pytest.mark.parametrize("opset", [1, 9, 13])
def test_onnx_matmul_versions(opset):
    a = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    b = RNG.standard_normal((4, 2)).astype(np.float32)
    _same(_run(helper.make_node("MatMul", ["a", "b"], ["y"]), [a, b], opset), _loop_matmul(a, b).astype(np.float32))
