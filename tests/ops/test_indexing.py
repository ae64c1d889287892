"""Indexing kernels against independent element-by-element formulas written here (small arrays)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from stdops import limits
from stdops.errors import KernelError, ResourceLimitError
from stdops.ops import indexing as K

RNG = np.random.default_rng(0)
STR = np.array(["a", "bb", "", "ccc", "d", "ee"], dtype=object)


def _data(shape, dtype):
    n = int(np.prod(shape))
    if dtype is object:
        return np.array([f"s{i % 7}" for i in range(n)], dtype=object).reshape(shape)
    if np.dtype(dtype) == np.bool_:
        return (np.arange(n) % 3 == 0).reshape(shape)
    return (
        (RNG.integers(-20, 20, n) if np.dtype(dtype).kind == "i" else RNG.integers(0, 40, n))
        .astype(dtype)
        .reshape(shape)
        if np.dtype(dtype).kind in "iu"
        else RNG.standard_normal(n).astype(dtype).reshape(shape)
    )


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert (got == want).all() if got.dtype == object else np.array_equal(got, want, equal_nan=True)


# ------------------------------------------------------------------------------------------ Gather
def _ref_gather(data, idx, axis):
    axis %= data.ndim
    out = np.empty(data.shape[:axis] + idx.shape + data.shape[axis + 1 :], data.dtype)
    for o in np.ndindex(out.shape):
        pre, ii, post = o[:axis], o[axis : axis + idx.ndim], o[axis + idx.ndim :]
        k = int(idx[ii]) % data.shape[axis]
        out[o] = data[pre + (k,) + post]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.uint64, np.bool_, object])
@pytest.mark.parametrize(
    "shape,idx,axis",
    [
        ((5,), [0, 4, -1, 2], 0),
        ((3, 4), [[0, 1], [-1, 2]], 0),
        ((3, 4), [[0, 3], [-4, 2]], 1),
        ((3, 4), [[0, 3], [-4, 2]], -1),
        ((2, 3, 4), 1, 1),
        ((2, 3, 4), [], 2),
        ((2, 3, 4), [[1]], -3),
    ],
)
def test_gather(dtype, shape, idx, axis):
    data = _data(shape, dtype)
    for itype in (np.int64, np.int32):
        ind = np.array(idx, itype)
        _same(K.gather(data, ind, axis=axis), _ref_gather(data, ind, axis))


def test_gather_default_axis_and_scalar_result():
    data = np.array([1.5, 2.5, 3.5], np.float32)
    out = K.gather(data, np.array(-1))
    assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float32 and out == 3.5
    s = K.gather(STR, np.array(1))
    assert s.dtype == object and s.shape == () and s[()] == "bb"


@pytest.mark.parametrize(
    "data,idx,kw,msg",
    [
        (np.zeros((3, 2)), np.array([3]), {}, "out of range"),
        (np.zeros((3, 2)), np.array([-4]), {}, "out of range"),
        (np.zeros((3, 2)), np.array([0]), {"axis": 2}, "axis"),
        (np.zeros((3, 2)), np.array([0.0]), {}, "integer"),
        (np.zeros(()), np.array([0]), {}, "rank"),
        (np.zeros((0, 2)), np.array([0]), {}, "out of range"),
    ],
)
def test_gather_errors(data, idx, kw, msg):
    with pytest.raises(KernelError, match=msg):
        K.gather(data, idx, **kw)


# ---------------------------------------------------------------------------------- GatherElements
def _ref_gather_elements(data, idx, axis):
    axis %= data.ndim
    out = np.empty(idx.shape, data.dtype)
    for o in np.ndindex(idx.shape):
        src = list(o)
        src[axis] = int(idx[o]) % data.shape[axis]
        out[o] = data[tuple(src)]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.int64, object])
@pytest.mark.parametrize(
    "dshape,ishape,axis",
    [
        ((4,), (6,), 0),
        ((3, 4), (2, 4), 0),
        ((3, 4), (3, 2), 1),
        ((3, 4), (2, 3), -1),
        ((2, 3, 4), (2, 5, 1), 1),
        ((2, 3, 4), (1, 2, 3), -3),
    ],
)
def test_gather_elements(dtype, dshape, ishape, axis):
    data = _data(dshape, dtype)
    n = dshape[axis]
    idx = RNG.integers(-n, n, ishape)
    _same(K.gather_elements(data, idx, axis=axis), _ref_gather_elements(data, idx, axis))


def test_gather_elements_errors():
    with pytest.raises(KernelError, match="out of range"):
        K.gather_elements(np.zeros((2, 2)), np.array([[2, 0]]), axis=0)
    with pytest.raises(KernelError, match="rank"):
        K.gather_elements(np.zeros((2, 2)), np.array([0, 1]))
    with pytest.raises(KernelError, match="exceeds"):
        K.gather_elements(np.zeros((2, 2)), np.zeros((2, 3), np.int64), axis=0)


# ---------------------------------------------------------------------------------------- GatherND
def _ref_gather_nd(data, idx, b):
    k = idx.shape[-1]
    out = np.empty(idx.shape[:-1] + data.shape[b + k :], data.dtype)
    for o in np.ndindex(idx.shape[:-1]):
        tup = tuple(int(v) % data.shape[b + j] for j, v in enumerate(idx[o]))
        out[o] = data[o[:b] + tup]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.int32, object])
@pytest.mark.parametrize(
    "dshape,ishape,b",
    [
        ((2, 2), (2, 2), 0),
        ((2, 2), (2, 1), 0),
        ((2, 2, 2), (2, 2), 0),
        ((2, 2, 2), (2, 1, 1), 0),
        ((2, 2, 2), (2, 1), 1),
        ((3, 4, 5, 2), (3, 4, 6, 1), 2),
        ((3, 4, 5), (3, 2), 1),
        ((4,), (1,), 0),
        ((3, 4, 5), (3, 0, 2), 1),
    ],
)
def test_gather_nd(dtype, dshape, ishape, b):
    data = _data(dshape, dtype)
    k = ishape[-1]
    cols = [RNG.integers(-dshape[b + j], dshape[b + j], ishape[:-1]) for j in range(k)]
    idx = np.stack(cols, -1).astype(np.int64).reshape(ishape)
    _same(K.gather_nd(data, idx, batch_dims=b), _ref_gather_nd(data, idx, b))


def test_gather_nd_spec_examples():
    d = np.array([[0, 1], [2, 3]], np.int32)
    _same(K.gather_nd(d, np.array([[0, 0], [1, 1]])), np.array([0, 3], np.int32))
    _same(K.gather_nd(d, np.array([[1], [0]])), np.array([[2, 3], [0, 1]], np.int32))
    d3 = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    _same(K.gather_nd(d3, np.array([[1], [0]]), batch_dims=1), np.array([[2, 3], [4, 5]], np.float32))


@pytest.mark.parametrize(
    "dshape,idx,b,msg",
    [
        ((2, 2), [[0, 2]], 0, "out of range"),
        ((2, 2), [[0, 0, 0]], 0, "exceeds"),
        ((2, 2), [[0], [1]], 2, "batch_dims"),
        ((2, 2), [[0], [1], [0]], 1, "batch dimensions"),
    ],
)
def test_gather_nd_errors(dshape, idx, b, msg):
    with pytest.raises(KernelError, match=msg):
        K.gather_nd(np.zeros(dshape), np.array(idx), batch_dims=b)


# -------------------------------------------------------------------------- ScatterElements/Scatter
_PY_RED = {"none": lambda a, u: u, "add": lambda a, u: a + u, "mul": lambda a, u: a * u, "max": max, "min": min}


def _ref_scatter_elements(data, idx, upd, axis, reduction):
    axis %= data.ndim
    out = data.copy()
    for o in np.ndindex(idx.shape):
        dst = list(o)
        dst[axis] = int(idx[o]) % data.shape[axis]
        dst = tuple(dst)
        out[dst] = _PY_RED[reduction](out[dst], upd[o])
    return out


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
@pytest.mark.parametrize(
    "dshape,ishape,axis",
    [
        ((5,), (8,), 0),
        ((3, 4), (2, 4), 0),
        ((3, 4), (3, 6), 1),
        ((2, 3, 4), (2, 3, 3), -1),
    ],
)
def test_scatter_elements(reduction, dtype, dshape, ishape, axis):
    data = _data(dshape, dtype)
    n = dshape[axis]
    if reduction == "none":  # unique targets: take a permutation along the axis
        base = np.argsort(RNG.random(ishape[: axis % len(ishape)] + (n,) + ishape[axis % len(ishape) + 1 :]), axis=axis)
        idx = np.take(base, np.arange(min(n, ishape[axis])), axis=axis) - n * (RNG.random() < 0.5)
        ishape = idx.shape
    else:  # duplicates must accumulate
        idx = RNG.integers(-n, n, ishape)
    upd = _data(ishape, dtype)
    before = data.copy()
    got = K.scatter_elements(data, idx, upd, axis=axis, reduction=reduction)
    _same(data, before)  # input untouched
    want = _ref_scatter_elements(data, idx, upd, axis, reduction)
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5)
        assert got.dtype == want.dtype
    else:
        _same(got, want)


def test_scatter_elements_spec_examples_and_strings():
    data = np.zeros((3, 3), np.float32)
    idx = np.array([[1, 0, 2], [0, 2, 1]])
    upd = np.array([[1.0, 1.1, 1.2], [2.0, 2.1, 2.2]], np.float32)
    want = np.array([[2.0, 1.1, 0.0], [1.0, 0.0, 2.2], [0.0, 2.1, 1.2]], np.float32)
    _same(K.scatter_elements(data, idx, upd), want)
    _same(K.scatter(data, idx, upd), want)
    d = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], np.float32)
    _same(
        K.scatter_elements(d, np.array([[1, 1]]), np.array([[1.1, 2.1]], np.float32), axis=1, reduction="add"),
        np.array([[1.0, 5.2, 3.0, 4.0, 5.0]], np.float32),
    )
    s = STR.reshape(2, 3)
    out = K.scatter_elements(s, np.array([[2, 0]]), np.array([["x", "y"]], object), axis=1)
    assert out.dtype == object and out.tolist() == [["y", "bb", "x"], ["ccc", "d", "ee"]]
    assert s.tolist() == [["a", "bb", ""], ["ccc", "d", "ee"]]


def test_scatter_elements_errors():
    d = np.zeros((2, 3), np.float32)
    with pytest.raises(KernelError, match="out of range"):
        K.scatter_elements(d, np.array([[3]]), np.ones((1, 1), np.float32), axis=1)
    with pytest.raises(KernelError, match="updates shape"):
        K.scatter_elements(d, np.array([[0]]), np.ones((1, 2), np.float32))
    with pytest.raises(KernelError, match="reduction"):
        K.scatter_elements(d, np.array([[0]]), np.ones((1, 1), np.float32), reduction="sub")
    with pytest.raises(KernelError, match="axis"):
        K.scatter(d, np.array([[0]]), np.ones((1, 1), np.float32), axis=-3)


# --------------------------------------------------------------------------------------- ScatterND
def _ref_scatter_nd(data, idx, upd, reduction):
    out = data.copy()
    for o in np.ndindex(idx.shape[:-1]):
        tup = tuple(int(v) % data.shape[j] for j, v in enumerate(idx[o]))
        if reduction == "none":
            out[tup] = upd[o]
        else:  # slice-wise, element by element
            region = out[tup]
            if np.ndim(region) == 0:
                out[tup] = _PY_RED[reduction](out[tup], upd[o])
            else:
                for e in np.ndindex(region.shape):
                    out[tup + e] = _PY_RED[reduction](out[tup + e], upd[o][e])
    return out


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize(
    "dshape,ishape",
    [
        ((8,), (4, 1)),
        ((4, 4, 4), (2, 1)),
        ((3, 4), (5, 2)),
        ((3, 4, 2), (2, 3, 2)),
        ((3, 4), (2,)),
    ],
)
def test_scatter_nd(reduction, dshape, ishape):
    data = _data(dshape, np.float64)
    k = ishape[-1]
    lead = ishape[:-1]
    if reduction == "none":  # distinct tuples
        every = np.array(list(itertools.product(*[range(s) for s in dshape[:k]])))
        pick = RNG.permutation(len(every))[: int(np.prod(lead))]
        idx = every[pick].reshape(ishape)
    else:
        idx = np.stack([RNG.integers(-dshape[j], dshape[j], lead) for j in range(k)], -1).reshape(ishape)
    upd = _data(lead + dshape[k:], np.float64)
    before = data.copy()
    got = K.scatter_nd(data, idx, upd, reduction=reduction)
    _same(data, before)
    np.testing.assert_allclose(got, _ref_scatter_nd(data, idx, upd, reduction), rtol=1e-12)


def test_scatter_nd_spec_example_and_strings():
    data = np.array([1, 2, 3, 4, 5, 6, 7, 8], np.int64)
    _same(
        K.scatter_nd(data, np.array([[4], [3], [1], [7]]), np.array([9, 10, 11, 12], np.int64)),
        np.array([1, 11, 3, 10, 9, 6, 7, 12], np.int64),
    )
    out = K.scatter_nd(STR, np.array([[0], [-1]]), np.array(["x", "y"], object))
    assert out.dtype == object and out.tolist() == ["x", "bb", "", "ccc", "d", "y"]


def test_scatter_nd_errors():
    d = np.zeros((2, 3), np.float32)
    with pytest.raises(KernelError, match="out of range"):
        K.scatter_nd(d, np.array([[2]]), np.ones((1, 3), np.float32))
    with pytest.raises(KernelError, match="updates shape"):
        K.scatter_nd(d, np.array([[1]]), np.ones((1, 2), np.float32))
    with pytest.raises(KernelError, match="indices.shape"):
        K.scatter_nd(d, np.array([[1, 1, 1]]), np.ones((1,), np.float32))


# ----------------------------------------------------------------------------------- TensorScatter
def _ref_tensor_scatter(past, upd, wi, axis, mode):
    axis %= past.ndim
    out = past.copy()
    wi = np.zeros(past.shape[0], np.int64) if wi is None else wi
    m = past.shape[axis]
    for o in np.ndindex(upd.shape):
        t = int(wi[o[0]]) + o[axis]
        if mode == "circular":
            t %= m
        dst = list(o)
        dst[axis] = t
        out[tuple(dst)] = upd[o]
    return out


@pytest.mark.parametrize("pshape,seq,axis", [((2, 3, 6, 4), 2, -2), ((2, 6, 4), 3, 1), ((3, 4, 5), 2, -1)])
@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("with_wi", [False, True])
def test_tensor_scatter(pshape, seq, axis, mode, with_wi):
    past = _data(pshape, np.float32)
    ushape = list(pshape)
    ushape[axis] = seq
    upd = _data(tuple(ushape), np.float32)
    m = pshape[axis]
    wi = None
    if with_wi:
        hi = m if mode == "circular" else m - seq + 1
        wi = RNG.integers(0, hi, pshape[0]).astype(np.int64)
    got = K.tensor_scatter(past, upd, wi, axis=axis, mode=mode)
    _same(got, _ref_tensor_scatter(past, upd, wi, axis, mode))


def test_tensor_scatter_errors():
    past, upd = np.zeros((2, 4, 3), np.float32), np.ones((2, 2, 3), np.float32)
    with pytest.raises(KernelError, match="out of the cache range"):
        K.tensor_scatter(past, upd, np.array([3, 0]), axis=1)
    with pytest.raises(KernelError, match="batch"):
        K.tensor_scatter(past, upd, np.array([0]), axis=1)
    with pytest.raises(KernelError, match="batch axis"):
        K.tensor_scatter(past, np.ones((1, 4, 3), np.float32), axis=0)
    with pytest.raises(KernelError, match="mode"):
        K.tensor_scatter(past, upd, axis=1, mode="ring")


# ------------------------------------------------------------------------------------------ OneHot
def _ref_one_hot(ind, depth, values, axis):
    r = ind.ndim
    axis = axis + r + 1 if axis < 0 else axis
    shape = ind.shape[:axis] + (depth,) + ind.shape[axis:]
    out = np.full(shape, values[0], dtype=values.dtype)
    for o in np.ndindex(ind.shape):
        v = int(ind[o])  # truncation toward zero
        if -depth <= v < depth:
            out[o[:axis] + (v % depth,) + o[axis:]] = values[1]
    return out


@pytest.mark.parametrize("axis", [-1, 0, 1, -2, 2, -3])
@pytest.mark.parametrize("itype", [np.int64, np.int32, np.float32])
@pytest.mark.parametrize(
    "vals",
    [np.array([0, 1], np.float32), np.array([2, 5], np.int8), np.array(["off", "on"], object), np.array([False, True])],
)
def test_one_hot(axis, itype, vals):
    ind = np.array([[0, 3, -1], [-5, 9, 4]], np.float64)
    if np.dtype(itype).kind == "f":
        ind = ind + np.array([[0.4, -0.7, 0.2], [0.9, 0.0, -0.3]])
    ind = ind.astype(itype)
    got = K.one_hot(ind, np.array([5.0], np.float32), vals, axis=axis)
    _same(got, _ref_one_hot(ind, 5, vals, axis))


def test_one_hot_errors_and_limit():
    with pytest.raises(KernelError, match="axis"):
        K.one_hot(np.array([1]), np.array(3), np.array([0, 1]), axis=2)
    with pytest.raises(KernelError, match="depth"):
        K.one_hot(np.array([1]), np.array([3, 4]), np.array([0, 1]))
    with pytest.raises(KernelError, match="depth"):
        K.one_hot(np.array([1]), np.array(0), np.array([0, 1]))
    with pytest.raises(KernelError, match="values"):
        K.one_hot(np.array([1]), np.array(3), np.array([0, 1, 2]))
    old = limits.set_max_elements(1000)
    try:
        with pytest.raises(ResourceLimitError):
            K.one_hot(np.arange(10), np.array(10**9, np.int64), np.array([0, 1]))
    finally:
        limits.set_max_elements(old)


# ----------------------------------------------------------------------------------------- NonZero
@pytest.mark.parametrize(
    "x",
    [
        np.array([[1, 0], [1, 1]], np.int32),
        np.array([0.0, 2.0, 0.0, -1.0], np.float32),
        np.zeros((2, 3, 0)),
        np.array([[True, False, True]]),
        np.array(["", "a", "b", ""], object),
        RNG.integers(0, 2, (3, 4, 5)).astype(np.uint8),
    ],
)
def test_non_zero(x):
    coords = [o for o in np.ndindex(x.shape) if bool(x[o])]
    want = np.array(coords, np.int64).reshape(len(coords), x.ndim).T.reshape(x.ndim, len(coords))
    _same(K.non_zero(x), want)


def test_non_zero_scalar():
    _same(K.non_zero(np.array(3.0)), np.zeros((0, 1), np.int64))
    _same(K.non_zero(np.array(0)), np.zeros((0, 0), np.int64))


# ---------------------------------------------------------------------------------------- Compress
@pytest.mark.parametrize("x", [np.arange(24, dtype=np.float32).reshape(2, 3, 4), STR.reshape(2, 3)])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("cond", [[True, False, True], [False, True], [], [True, True, True, True, False, False]])
def test_compress(x, axis, cond):
    cond = np.array(cond, bool)
    src = x.reshape(-1) if axis is None else x
    ax = 0 if axis is None else axis % x.ndim
    n = src.shape[ax]
    if cond.size > n and cond[n:].any():
        with pytest.raises(KernelError, match="condition"):
            K.compress(x, cond, axis=axis)
        return
    keep = [i for i in range(min(n, cond.size)) if cond[i]]
    want = np.empty(src.shape[:ax] + (len(keep),) + src.shape[ax + 1 :], x.dtype)
    for j, i in enumerate(keep):
        want[(slice(None),) * ax + (j,)] = src[(slice(None),) * ax + (i,)]
    _same(K.compress(x, cond, axis=axis), want)


def test_compress_errors():
    with pytest.raises(KernelError, match="axis"):
        K.compress(np.zeros((2, 2)), np.array([True]), axis=2)
    with pytest.raises(KernelError, match="1-D"):
        K.compress(np.zeros((2, 2)), np.array([[True]]))


# -------------------------------------------------------------------------------------------- TopK
def _ref_top_k(x, k, axis, largest):
    axis %= x.ndim
    xm = np.moveaxis(x, axis, -1)
    vals = np.empty(xm.shape[:-1] + (k,), x.dtype)
    inds = np.empty(xm.shape[:-1] + (k,), np.int64)
    for o in np.ndindex(xm.shape[:-1]):
        row = [(xm[o][i], i) for i in range(xm.shape[-1])]
        row.sort(key=(lambda p: (-float(p[0]), p[1])) if largest else (lambda p: (float(p[0]), p[1])))
        vals[o] = [v for v, _ in row[:k]]
        inds[o] = [i for _, i in row[:k]]
    return np.moveaxis(vals, -1, axis), np.moveaxis(inds, -1, axis)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint64, np.int8, np.float16])
@pytest.mark.parametrize(
    "shape,axis,k", [((7,), 0, 3), ((3, 6), 1, 6), ((3, 6), 0, 2), ((2, 5, 4), -2, 0), ((2, 5, 4), -1, 1)]
)
@pytest.mark.parametrize("largest", [1, 0])
def test_top_k(dtype, shape, axis, k, largest):
    x = RNG.integers(0, 4, shape).astype(dtype)  # many ties
    vals, inds = K.top_k(x, np.array([k], np.int64), axis=axis, largest=largest)
    wv, wi = _ref_top_k(x, k, axis, largest)
    _same(vals, wv)
    _same(inds, wi)


def test_top_k_defaults_and_errors():
    x = np.array([[0, 1, 2, 3], [7, 6, 5, 4]], np.float32)
    v, i = K.top_k(x, np.array([2]))
    _same(v, np.array([[3, 2], [7, 6]], np.float32))
    _same(i, np.array([[3, 2], [0, 1]], np.int64))
    with pytest.raises(KernelError, match="out of range"):
        K.top_k(x, np.array([5]))
    with pytest.raises(KernelError, match="out of range"):
        K.top_k(x, np.array([-1]))
    with pytest.raises(KernelError, match="axis"):
        K.top_k(x, np.array([1]), axis=2)
    with pytest.raises(KernelError, match="K must be"):
        K.top_k(x, np.array([1, 2]))


# ------------------------------------------------------------------------------------------ Unique
def _ref_unique(x, axis, sorted_):
    if axis is None:
        items = [x.reshape(-1)[i] for i in range(x.size)]
        key = lambda v: v  # noqa: E731
    else:
        xm = np.moveaxis(x, axis, 0)
        items = [xm[i] for i in range(xm.shape[0])]
        key = lambda v: tuple(v.reshape(-1).tolist())  # noqa: E731
    first = {}
    for i, v in enumerate(items):
        first.setdefault(key(v), i)
    keys = list(first)
    if sorted_:
        keys.sort()
    pos = {kk: j for j, kk in enumerate(keys)}
    idx = np.array([first[kk] for kk in keys], np.int64)
    inv = np.array([pos[key(v)] for v in items], np.int64)
    counts = np.bincount(inv, minlength=len(keys)).astype(np.int64)
    y = np.take(x.reshape(-1) if axis is None else x, idx, axis=0 if axis is None else axis)
    return y, idx, inv, counts


@pytest.mark.parametrize(
    "x",
    [
        np.array([2, 1, 1, 3, 4, 3], np.float32),
        np.array([[1, 3], [2, 3]], np.int64),
        np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4]], np.int32),
        np.array([[[1.0, 1.0], [0.0, 1.0], [2.0, 1.0], [0.0, 1.0]]] * 2, np.float32),
        RNG.integers(0, 3, (4, 3, 2)).astype(np.int8),
        np.array(["b", "a", "b", "c", "a", "b"], object).reshape(3, 2),
        np.array([7]),
    ],
)
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("sorted_", [1, 0])
def test_unique(x, axis, sorted_):
    if axis is not None and not -x.ndim <= axis < x.ndim:
        with pytest.raises(KernelError, match="axis"):
            K.unique(x, axis=axis, sorted=sorted_)
        return
    got = K.unique(x, axis=axis, sorted=sorted_)
    assert len(got) == 4
    for g, w in zip(got, _ref_unique(x, axis, sorted_)):
        _same(g, w)


def test_unique_spec_example_1():
    y, i, inv, c = K.unique(np.array([2, 1, 1, 3, 4, 3], np.float32), sorted=0)
    _same(y, np.array([2, 1, 3, 4], np.float32))
    _same(i, np.array([0, 1, 3, 4], np.int64))
    _same(inv, np.array([0, 1, 1, 2, 3, 2], np.int64))
    _same(c, np.array([1, 2, 2, 1], np.int64))


# --------------------------------------------------------------------------------- ReverseSequence
def _ref_reverse_sequence(x, lens, ba, ta):
    out = x.copy()
    for o in np.ndindex(x.shape):
        b, t = o[ba], o[ta]
        if t < lens[b]:
            src = list(o)
            src[ta] = lens[b] - 1 - t
            out[o] = x[tuple(src)]
    return out


@pytest.mark.parametrize(
    "shape,ba,ta", [((4, 4), 1, 0), ((4, 4), 0, 1), ((3, 5, 2), 0, 1), ((5, 3, 2), 1, 0), ((2, 3, 5), -3, -1)]
)
@pytest.mark.parametrize("dtype", [np.float32, np.int16, object])
def test_reverse_sequence(shape, ba, ta, dtype):
    x = _data(shape, dtype)
    nb, nt = shape[ba], shape[ta]
    lens = RNG.integers(0, nt + 1, nb).astype(np.int64)
    _same(K.reverse_sequence(x, lens, batch_axis=ba, time_axis=ta), _ref_reverse_sequence(x, lens, ba, ta))


def test_reverse_sequence_spec_example_and_errors():
    x = np.arange(16, dtype=np.float32).reshape(4, 4).T.copy()
    want = np.array([[3, 6, 9, 12], [2, 5, 8, 13], [1, 4, 10, 14], [0, 7, 11, 15]], np.float32)
    _same(K.reverse_sequence(x, np.array([4, 3, 2, 1])), want)
    with pytest.raises(KernelError, match="sequence lengths"):
        K.reverse_sequence(x, np.array([5, 3, 2, 1]))
    with pytest.raises(KernelError, match="entries"):
        K.reverse_sequence(x, np.array([1, 1]))
    with pytest.raises(KernelError, match="differ"):
        K.reverse_sequence(x, np.array([1, 1, 1, 1]), batch_axis=0, time_axis=0)


# -------------------------------------------------------------------------------- ONNX adapters
def _bind(op_type, opset, attrs, n_inputs):
    import stdops.onnx.adapters  # noqa: F401 - registers the adapters
    from stdops.onnx.opset import BindContext, resolve

    since, kernel, adapt = resolve("", op_type, opset)
    ctx = BindContext(
        op_type, "", opset, since, "n0", None, dict(attrs), n_inputs, [True] * n_inputs, 2, kernel, [None] * n_inputs
    )
    return adapt(ctx) if adapt else ctx.bind()


def test_adapter_top_k_1():
    fn = _bind("TopK", 1, {"k": 2, "axis": 0}, 1)
    v, i = fn(np.array([1.0, 3.0, 2.0, 3.0], np.float32))
    _same(v, np.array([3, 3], np.float32))
    _same(i, np.array([1, 3], np.int64))
    from stdops.errors import ModelFormatError

    with pytest.raises(ModelFormatError, match="k"):
        _bind("TopK", 1, {}, 1)


def test_adapter_one_hot_9_no_wrap():
    ind = np.array([-1, 1, 3], np.int64)
    vals = np.array([0, 1], np.float32)
    want9 = np.array([[0, 0, 0], [0, 1, 0], [0, 0, 0]], np.float32)
    _same(_bind("OneHot", 9, {}, 3)(ind, np.array(3), vals), want9)
    _same(_bind("OneHot", 9, {}, 3)(ind.astype(np.float32), np.array(3), vals), want9)
    want11 = np.array([[0, 0, 1], [0, 1, 0], [0, 0, 0]], np.float32)
    _same(_bind("OneHot", 11, {}, 3)(ind, np.array(3), vals), want11)


@pytest.mark.parametrize(
    "op_type,opset,name",
    [
        ("Gather", 7, "gather"),
        ("Gather", 13, "gather"),
        ("GatherElements", 13, "gather_elements"),
        ("GatherND", 11, "gather_nd"),
        ("Scatter", 10, "scatter"),
        ("ScatterElements", 18, "scatter_elements"),
        ("ScatterND", 11, "scatter_nd"),
        ("NonZero", 9, "non_zero"),
        ("Compress", 9, "compress"),
        ("TopK", 10, "top_k"),
        ("Unique", 11, "unique"),
        ("ReverseSequence", 10, "reverse_sequence"),
        ("TensorScatter", 24, "tensor_scatter"),
    ],
)
def test_bindings(op_type, opset, name):
    from stdops.onnx.opset import resolve

    _, kernel, _ = resolve("", op_type, opset)
    assert kernel is not None and kernel.name == name


def test_bfloat16_and_unsigned_paths():
    import ml_dtypes

    bf = np.array([3, 1, 2, 1, 3], ml_dtypes.bfloat16)
    v, i = K.top_k(bf, np.array([2]))
    assert v.dtype == bf.dtype and v.tolist() == [3, 3] and i.tolist() == [0, 4]
    y, first, inv, counts = K.unique(bf, sorted=0)
    assert y.dtype == bf.dtype and y.tolist() == [3, 1, 2] and first.tolist() == [0, 1, 2]
    assert inv.tolist() == [0, 1, 2, 1, 0] and counts.tolist() == [2, 2, 1]
    out = K.scatter_elements(bf, np.array([0, 0]), np.array([1, 2], ml_dtypes.bfloat16), reduction="add")
    assert out.dtype == bf.dtype and out.tolist() == [6, 1, 2, 1, 3]
    oh = K.one_hot(np.array([0, 2, 200], np.uint8), np.array(3, np.uint8), np.array([0, 1], ml_dtypes.bfloat16))
    assert oh.dtype == bf.dtype and oh.tolist() == [[1, 0, 0], [0, 0, 1], [0, 0, 0]]
    with pytest.raises(KernelError, match="out of range"):
        K.gather(np.arange(3), np.array([2**63], np.uint64))


def test_top_k_nan_is_largest():
    x = np.array([1.0, np.nan, 3.0], np.float32)
    v, i = K.top_k(x, np.array([2]))
    assert i.tolist() == [1, 2]
    v, i = K.top_k(x, np.array([2]), largest=0)
    assert i.tolist() == [0, 2]


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("axis", [-1, 0])
def test_top_k_partial_path(dtype, largest, axis):
    """k much smaller than the axis (the partition path), with heavy ties."""
    x = RNG.integers(0, 30, (3, 600) if axis == -1 else (600, 3)).astype(dtype)
    for k in (1, 7, 50):
        vals, inds = K.top_k(x, np.array([k]), axis=axis, largest=largest)
        wv, wi = _ref_top_k(x, k, axis, largest)
        _same(vals, wv)
        _same(inds, wi)


@pytest.mark.parametrize(
    "op_type,opset,attrs,n",
    [
        ("ScatterElements", 18, {"reduction": "sub"}, 3),
        ("ScatterND", 16, {"reduction": "avg"}, 3),
        ("TensorScatter", 24, {"mode": "ring"}, 3),
    ],
)
def test_adapters_reject_bad_attribute_values(op_type, opset, attrs, n):
    from stdops.errors import ModelFormatError

    with pytest.raises(ModelFormatError, match="n0"):
        _bind(op_type, opset, attrs, n)


def test_adapters_bind_good_values():
    d = np.zeros(3, np.float32)
    out = _bind("ScatterElements", 18, {"reduction": "max", "axis": 0}, 3)(
        d, np.array([1, 1]), np.array([2, 5], np.float32)
    )
    _same(out, np.array([0, 5, 0], np.float32))
    out = _bind("ScatterND", 13, {}, 3)(d, np.array([[2]]), np.array([4], np.float32))
    _same(out, np.array([0, 0, 4], np.float32))
