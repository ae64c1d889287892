"""Shape and layout kernels (stdops.ops.shape, shape_gen, shape_pad) and their ONNX adapters,
against independent formulas written here."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from stdops import limits
from stdops.errors import KernelError, ModelFormatError, ResourceLimitError
from stdops.ops import shape as S
from stdops.ops import shape_gen as G
from stdops.ops import shape_pad as P

I64 = np.int64
X234 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
STR = np.array([["a", "bb", "c"], ["d", "e", "ff"]], dtype=object)
DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int32, np.int64, np.uint8, np.bool_]


def _same(got, want):
    want = np.asarray(want)
    assert isinstance(got, np.ndarray), type(got)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


def _data(dtype, shape=(2, 3, 4)):
    return (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)


# --------------------------------------------------------------------------- Reshape / Flatten
@pytest.mark.parametrize(
    "shape, allowzero, want",
    [
        ([4, 6], 0, (4, 6)),
        ([-1], 0, (24,)),
        ([0, -1], 0, (2, 12)),
        ([0, 0, 4], 0, (2, 3, 4)),
        ([2, 0, 2, -1], 0, (2, 3, 2, 2)),
        ([-1, 2, 2], 0, (6, 2, 2)),
        ([3, 8], 1, (3, 8)),
    ],
)
def test_reshape(shape, allowzero, want):
    got = S.reshape(X234, np.array(shape, I64), allowzero=allowzero)
    _same(got, X234.ravel().reshape(want))


def test_reshape_allowzero_empty_and_scalar():
    empty = np.zeros((0, 3), np.float32)
    _same(S.reshape(empty, np.array([3, 0], I64), allowzero=1), np.zeros((3, 0), np.float32))
    _same(S.reshape(np.ones((1, 1), np.int32), np.array([], I64)), np.array(1, np.int32))
    _same(S.reshape(STR, [3, 2]), STR.ravel().reshape(3, 2))


@pytest.mark.parametrize(
    "shape, allowzero",
    [
        ([5, 5], 0),
        ([-1, -1], 0),
        ([0, -1], 1),
        ([-2, 12], 0),
        ([0, 0, 0, 0], 0),
        ([7, -1], 0),
    ],
)
def test_reshape_bad(shape, allowzero):
    with pytest.raises(KernelError):
        S.reshape(X234, np.array(shape, I64), allowzero=allowzero)


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -2, -3])
def test_flatten(axis):
    a = axis + 3 if axis < 0 else axis
    want = X234.reshape(int(np.prod(X234.shape[:a])), -1)
    _same(S.flatten(X234, axis=axis), want)


def test_flatten_default_and_bad():
    _same(S.flatten(X234), X234.reshape(2, 12))
    _same(S.flatten(np.array(5.0, np.float32), axis=0), np.full((1, 1), 5.0, np.float32))
    for ax in (4, -4):
        with pytest.raises(KernelError):
            S.flatten(X234, axis=ax)


# --------------------------------------------------------------------------- Transpose
@pytest.mark.parametrize("perm", [None, (0, 1, 2), (2, 0, 1), [1, 0, 2]])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, object])
def test_transpose(perm, dtype):
    x = (
        _data(dtype)
        if dtype is not object
        else np.array([[[f"s{i * 12 + j * 4 + k}" for k in range(4)] for j in range(3)] for i in range(2)], object)
    )
    p = (2, 1, 0) if perm is None else tuple(perm)
    want = np.empty(tuple(x.shape[i] for i in p), dtype=x.dtype)
    for idx in itertools.product(*map(range, x.shape)):
        want[tuple(idx[i] for i in p)] = x[idx]
    _same(S.transpose(x, perm=perm), want)


def test_transpose_bad_and_small():
    _same(S.transpose(np.array(3, np.int8)), np.array(3, np.int8))
    _same(S.transpose(np.arange(3, dtype=np.int8)), np.arange(3, dtype=np.int8))
    for perm in ((0, 1), (0, 1, 1), (0, 1, 3)):
        with pytest.raises(KernelError):
            S.transpose(X234, perm=perm)


# --------------------------------------------------------------------------- Squeeze / Unsqueeze
@pytest.mark.parametrize(
    "axes, want",
    [
        (None, (3, 4)),
        ([0], (3, 1, 4)),
        ([-2], (1, 3, 4)),
        ([0, 2], (3, 4)),
        ([2, -4], (3, 4)),
    ],
)
def test_squeeze(axes, want):
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 1, 4)
    got = S.squeeze(x, None if axes is None else np.array(axes, I64))
    _same(got, x.ravel().reshape(want))


@pytest.mark.parametrize("axes", [[1], [4], [0, 0]])
def test_squeeze_bad(axes):
    with pytest.raises(KernelError):
        S.squeeze(np.zeros((1, 3, 1, 4)), np.array(axes, I64))


@pytest.mark.parametrize(
    "axes, want",
    [
        ([0], (1, 2, 3, 4)),
        ([3], (2, 3, 4, 1)),
        ([-1], (2, 3, 4, 1)),
        ([0, 4], (1, 2, 3, 4, 1)),
        ([4, 0], (1, 2, 3, 4, 1)),
        ([1, 3], (2, 1, 3, 1, 4)),
        ([-5, -1], (1, 2, 3, 4, 1)),
    ],
)
def test_unsqueeze(axes, want):
    _same(S.unsqueeze(X234, np.array(axes, I64)), X234.ravel().reshape(want))


@pytest.mark.parametrize("axes", [[4], [-5], [0, 0], [1, -4]])
def test_unsqueeze_bad(axes):
    with pytest.raises(KernelError):
        S.unsqueeze(X234, np.array(axes, I64))


def test_unsqueeze_scalar_and_strings():
    _same(S.unsqueeze(np.array(2.5, np.float32), [0]), np.array([2.5], np.float32))
    _same(S.unsqueeze(STR, [1]), STR.reshape(2, 1, 3))


# --------------------------------------------------------------------------- Concat / Split
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_concat(axis, dtype):
    a = axis % 3
    shapes = [list(X234.shape) for _ in range(3)]
    for i, s in enumerate(shapes):
        s[a] = i + 1
    xs = [_data(dtype, tuple(s)) for s in shapes]
    # expected by placing each input at its offset
    out_shape = list(X234.shape)
    out_shape[a] = 6
    want = np.zeros(out_shape, dtype)
    off = 0
    for x in xs:
        idx = [slice(None)] * 3
        idx[a] = slice(off, off + x.shape[a])
        want[tuple(idx)] = x
        off += x.shape[a]
    _same(S.concat(*xs, axis=axis), want)


def test_concat_misc():
    _same(S.concat(STR, STR, axis=0), np.array(STR.tolist() * 2, dtype=object))
    _same(S.concat(np.zeros((0, 2), np.float32), np.ones((1, 2), np.float32), axis=0), np.ones((1, 2), np.float32))
    _same(S.concat(X234, axis=1), X234)
    for bad in [
        ((X234, X234[:, :, :2]), 0),
        ((X234, X234), 3),
        ((X234, X234.astype(np.float64)), 0),
        ((np.array(1.0), np.array(2.0)), 0),
        ((), 0),
    ]:
        with pytest.raises(KernelError):
            S.concat(*bad[0], axis=bad[1])


def _split_want(x, sizes, axis):
    out, off = [], 0
    for s in sizes:
        out.append(np.take(x, np.arange(off, off + s), axis=axis))
        off += s
    return out


@pytest.mark.parametrize(
    "kw, sizes, axis",
    [
        (dict(split=np.array([1, 3], I64)), [1, 3], -1),
        (dict(split=np.array([2, 0, 2], I64)), [2, 0, 2], 2),
        (dict(n_outputs=2), [2, 2], 2),
        (dict(n_outputs=3), [1, 1, 1], 1),
        (dict(num_outputs=3), [2, 2, 0], 2),  # ceil(4 / 3) = 2: the last chunk is smaller
        (dict(num_outputs=3, n_outputs=3), [1, 1, 1], -2),
        (dict(num_outputs=2), [1, 1], 0),
    ],
)
def test_split(kw, sizes, axis):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    split = kw.pop("split", None)
    got = S.split(x, split, axis=axis, **kw)
    assert isinstance(got, tuple) and len(got) == len(sizes)
    for g, w in zip(got, _split_want(x, sizes, axis)):
        _same(g, w)


def test_split_uneven_num_outputs():
    x = np.arange(7, dtype=np.int64)
    got = S.split(x, num_outputs=4)
    assert [g.tolist() for g in got] == [[0, 1], [2, 3], [4, 5], [6]]
    got = S.split(STR, None, axis=1, n_outputs=3)
    assert [g.tolist() for g in got] == [[["a"], ["d"]], [["bb"], ["e"]], [["c"], ["ff"]]]


@pytest.mark.parametrize(
    "split, kw",
    [
        ([1, 2], {}),
        ([-1, 5], {}),
        ([2, 2], dict(n_outputs=3)),
        (None, {}),
        (None, dict(n_outputs=3)),
        (None, dict(num_outputs=0)),
        (None, dict(num_outputs=5, axis=0)),
    ],
)
def test_split_bad(split, kw):
    kw.setdefault("axis", -1)
    with pytest.raises(KernelError):
        S.split(np.zeros((3, 4), np.float32), None if split is None else np.array(split, I64), **kw)


# --------------------------------------------------------------------------- Slice
def _slice_want(x, starts, ends, axes, steps):
    """The spec's rule, one index list per axis, gathered with np.ix_."""
    axes = list(range(len(starts))) if axes is None else [a % x.ndim for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    idx = [list(range(d)) for d in x.shape]
    for a, s, e, st in zip(axes, starts, ends, steps):
        d = x.shape[a]
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
            idx[a] = [i for i in range(s, e, st)]
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
            idx[a] = [i for i in range(s, e, st)] if d else []
    return x[np.ix_(*[np.array(i, dtype=np.intp) for i in idx])]


IMAX, IMIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


@pytest.mark.parametrize(
    "starts, ends, axes, steps",
    [
        ([0, 0, 0], [2, 3, 4], None, None),
        ([1], [2], [0], None),
        ([0, 1], [-1, 1000], None, None),
        ([0, 0, 3], [20, 10, 4], [0, 1, 2], None),
        ([1], [IMAX], [1], None),
        ([-1], [IMIN], [-1], [-1]),
        ([20], [-20], [2], [-2]),
        ([-100], [100], [2], [3]),
        ([2], [0], [2], [1]),  # empty
        ([3, 2], [0, IMIN], [2, 1], [-1, -1]),
        ([1], [1000], [-2], [2]),
        ([0], [-1], [-1], [-1]),  # empty: end clamps to d-1
        ([-5], [-3], [2], [1]),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, object])
def test_slice(starts, ends, axes, steps, dtype):
    x = X234.astype(dtype) if dtype is not object else X234.astype(int).astype(str).astype(object)
    a = lambda v: None if v is None else np.array(v, I64)  # noqa: E731
    got = S.slice_(x, a(starts), a(ends), a(axes), a(steps))
    _same(got, _slice_want(x, starts, ends, axes, steps))


def test_slice_int32_indices_and_empty_axis():
    got = S.slice_(X234, np.array([1], np.int32), np.array([3], np.int32), np.array([1], np.int32))
    _same(got, X234[:, 1:3])
    e = np.zeros((2, 0), np.float32)
    _same(S.slice_(e, np.array([0], I64), np.array([5], I64), np.array([1], I64), np.array([-1], I64)), e)


@pytest.mark.parametrize(
    "args",
    [
        ([0], [1], [0], [0]),  # step 0
        ([0, 0], [1], None, None),
        ([0], [1], [3], None),
        ([0, 0], [1, 1], [1, 1], None),
        ([0], [1], [0], [1, 1]),
    ],
)
def test_slice_bad(args):
    with pytest.raises(KernelError):
        S.slice_(X234, *[None if v is None else np.array(v, I64) for v in args])


# --------------------------------------------------------------------------- Expand / Tile
@pytest.mark.parametrize(
    "xshape, shape, want",
    [
        ((3, 1), [2, 1, 6], (2, 3, 6)),
        ((3, 1), [3, 4], (3, 4)),
        ((3, 1), [1], (3, 1)),  # shape may be smaller
        ((1,), [2, 2], (2, 2)),
        ((), [2, 3], (2, 3)),
        ((2, 3), [], (2, 3)),
    ],
)
def test_expand(xshape, shape, want):
    x = (np.arange(int(np.prod(xshape))) + 1).astype(np.float32).reshape(xshape)
    got = S.expand(x, np.array(shape, I64))
    _same(got, x * np.ones(want, np.float32))
    assert got.flags.writeable


def test_expand_bad_and_limits():
    with pytest.raises(KernelError):
        S.expand(np.zeros((2, 3)), np.array([4, 3], I64))
    with pytest.raises(KernelError):
        S.expand(np.zeros((2, 3)), np.array([-1, 3], I64))
    old = limits.set_max_elements(100)
    try:
        with pytest.raises(ResourceLimitError):
            S.expand(np.zeros(1, np.float32), np.array([1000], I64))
    finally:
        limits.set_max_elements(old)
    _same(S.expand(np.array(["x"], object), [2]), np.array(["x", "x"], object))


@pytest.mark.parametrize("reps", [[1, 1, 1], [2, 1, 1], [1, 3, 2], [0, 1, 2]])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_tile(reps, dtype):
    x = _data(dtype)
    want = np.empty([d * r for d, r in zip(x.shape, reps)], dtype)
    for idx in itertools.product(*map(range, want.shape)):
        want[idx] = x[tuple(i % d for i, d in zip(idx, x.shape))]
    _same(S.tile(x, np.array(reps, I64)), want)


def test_tile_bad():
    for reps in ([1, 1], [1, -1, 1]):
        with pytest.raises(KernelError):
            S.tile(X234, np.array(reps, I64))
    old = limits.set_max_elements(100)
    try:
        with pytest.raises(ResourceLimitError):
            S.tile(X234, np.array([10, 10, 10], I64))
    finally:
        limits.set_max_elements(old)


# --------------------------------------------------------------------------- Shape / Size / Identity
@pytest.mark.parametrize(
    "start, end, want",
    [
        (0, None, [2, 3, 4]),
        (-1, None, [4]),
        (0, -1, [2, 3]),
        (1, 2, [3]),
        (-10, 10, [2, 3, 4]),
        (2, 1, []),
        (3, None, []),
    ],
)
def test_shape(start, end, want):
    _same(S.shape(X234, start=start, end=end), np.array(want, I64))


def test_shape_size_identity():
    _same(S.shape(X234), np.array([2, 3, 4], I64))
    _same(S.shape(np.array(1.0)), np.zeros(0, I64))
    _same(S.size(X234), np.array(24, I64))
    _same(S.size(np.zeros((3, 0))), np.array(0, I64))
    _same(S.size(STR), np.array(6, I64))
    seq = [X234, STR]
    assert S.identity(seq) is seq
    assert S.identity(None) is None
    _same(S.identity(STR), STR)


# --------------------------------------------------------------------------- Constant family
@pytest.mark.parametrize(
    "kw, want",
    [
        (dict(value=np.array([[1, 2]], np.int8)), np.array([[1, 2]], np.int8)),
        (dict(value_float=1.5), np.array(1.5, np.float32)),
        (dict(value_floats=(1.0, 2.5)), np.array([1.0, 2.5], np.float32)),
        (dict(value_floats=()), np.zeros(0, np.float32)),
        (dict(value_int=-3), np.array(-3, I64)),
        (dict(value_ints=[4, 5, 6]), np.array([4, 5, 6], I64)),
        (dict(value_string="hi"), np.array("hi", dtype=object)),
        (dict(value_strings=("a", "b")), np.array(["a", "b"], dtype=object)),
    ],
)
def test_constant(kw, want):
    got = G.constant(**kw)
    _same(got, want)
    if "value" in kw:
        assert got is not kw["value"]


@pytest.mark.parametrize("kw", [{}, dict(value_int=1, value_float=1.0), dict(sparse_value=object())])
def test_constant_bad(kw):
    with pytest.raises(KernelError):
        G.constant(**kw)


@pytest.mark.parametrize(
    "shape, value",
    [
        ([2, 3], None),
        ([4], np.array([7], np.int32)),
        ([], np.array([1.5], np.float64)),
        ([0, 3], np.array([True])),
        ([1, 2, 1], np.array([-1], I64)),
    ],
)
def test_constant_of_shape(shape, value):
    got = G.constant_of_shape(np.array(shape, I64), value=value)
    v = np.zeros(1, np.float32) if value is None else value
    _same(got, np.full(shape, v[0], dtype=v.dtype))


def test_constant_of_shape_bad():
    with pytest.raises(KernelError):
        G.constant_of_shape(np.array([2], I64), value=np.array([1, 2], np.float32))
    with pytest.raises(KernelError):
        G.constant_of_shape(np.array([-2], I64))
    with pytest.raises(ResourceLimitError):
        G.constant_of_shape(np.array([2**20, 2**20], I64))


@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (5, 2)])
@pytest.mark.parametrize("k", [0, 1, -1, 4, -7])
@pytest.mark.parametrize("dtype", [None, np.int32, np.float64, np.bool_])
def test_eye_like(shape, k, dtype):
    x = np.zeros(shape, np.float32)
    dt = np.float32 if dtype is None else dtype
    want = np.array([[1 if j - i == k else 0 for j in range(shape[1])] for i in range(shape[0])]).astype(dt)
    _same(G.eye_like(x, dtype=dtype, k=k), want)


def test_eye_like_bad():
    with pytest.raises(KernelError):
        G.eye_like(np.zeros((2, 2, 2)))


@pytest.mark.parametrize(
    "start, limit, delta, dtype",
    [
        (3, 9, 3, np.int32),
        (10, 4, -2, np.int64),
        (0, 10, 3, np.int16),
        (5, 5, 1, np.int64),
        (5, 1, 1, np.int32),
        (1.0, 5.0, 0.5, np.float32),
        (10.0, 6.0, -3.0, np.float64),
        (0.0, 1.0, 0.3, np.float32),
        (1.0, 10.0, 2.0, np.float16),
    ],
)
def test_range(start, limit, delta, dtype):
    got = G.range_(np.array(start, dtype), np.array(limit, dtype), np.array(delta, dtype))
    vals = []
    v = start
    while (delta > 0 and v < limit) or (delta < 0 and v > limit):
        vals.append(v)
        v = start + len(vals) * delta
    want = np.array(vals, dtype=dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-6)


def test_range_bad():
    with pytest.raises(KernelError):
        G.range_(np.array(1, I64), np.array(5, I64), np.array(0, I64))
    with pytest.raises(KernelError):
        G.range_(np.array(1.0, np.float32), np.array(5.0, np.float32), np.array(0.0, np.float32))
    with pytest.raises(KernelError):
        G.range_(np.array(1, I64), np.array(5, np.int32), np.array(1, I64))
    with pytest.raises(KernelError):
        G.range_(np.array(1, I64), np.array(np.inf), np.array(1, I64))
    with pytest.raises(ResourceLimitError):
        G.range_(np.array(0, I64), np.array(2**40, I64), np.array(1, I64))


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 1, -1, 5, -5])
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 5), (1, 4, 2), (0, 3)])
def test_trilu(upper, k, shape):
    x = (np.arange(int(np.prod(shape))) + 1).astype(np.float32).reshape(shape)
    kk = 0 if k is None else k
    want = x.copy()
    for idx in itertools.product(*map(range, shape)):
        i, j = idx[-2:]
        if (upper and j - i < kk) or (not upper and j - i > kk):
            want[idx] = 0
    _same(G.trilu(x, None if k is None else np.array(k, I64), upper=upper), want)


def test_trilu_bool_and_bad():
    x = np.ones((3, 3), bool)
    _same(G.trilu(x, np.array([1], I64)), np.array([[0, 1, 1], [0, 0, 1], [0, 0, 0]], bool))
    with pytest.raises(KernelError):
        G.trilu(np.ones(3))


# --------------------------------------------------------------------------- Pad
def _pad_index(i, d, mode):
    """Source index of output position i (relative to the data start) for a dimension of size d."""
    if 0 <= i < d:
        return i
    if mode == "edge":
        return min(max(i, 0), d - 1)
    if mode == "wrap":
        return i % d
    # reflect: period 2(d-1), mirror without repeating the edge
    m = i % (2 * (d - 1))
    return m if m < d else 2 * (d - 1) - m


def _pad_want(x, begin, end, mode, cval):
    out_shape = [d + b + e for d, b, e in zip(x.shape, begin, end)]
    out = np.empty(out_shape, x.dtype)
    for idx in itertools.product(*map(range, out_shape)):
        src = [i - b for i, b in zip(idx, begin)]
        if mode == "constant":
            inside = all(0 <= s < d for s, d in zip(src, x.shape))
            out[idx] = x[tuple(src)] if inside else cval
        else:
            out[idx] = x[tuple(_pad_index(s, d, mode) for s, d in zip(src, x.shape))]
    return out


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
@pytest.mark.parametrize(
    "pads, axes",
    [
        ([0, 2, 0, 0], None),
        ([1, 1, 2, 2], None),
        ([0, 0, 0, 0], None),
        ([2, 1], [1]),
        ([1, 0, 0, 2], [-1, 0]),
        ([3, 0, 4, 1], None),
        ([-1, 1, 0, -1], None),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_pad(mode, pads, axes, dtype):
    x = (np.arange(12) + 1).astype(dtype).reshape(3, 4)
    ax = [0, 1] if axes is None else [a % 2 for a in axes]
    begin, end = [0, 0], [0, 0]
    for i, a in enumerate(ax):
        begin[a], end[a] = pads[i], pads[i + len(ax)]
    xc = x[max(-begin[0], 0) : 3 - max(-end[0], 0), max(-begin[1], 0) : 4 - max(-end[1], 0)]
    want = _pad_want(xc, [max(b, 0) for b in begin], [max(e, 0) for e in end], mode, dtype(9))
    cv = np.array(9, dtype) if mode == "constant" else None
    got = P.pad(x, np.array(pads, I64), cv, None if axes is None else np.array(axes, I64), mode=mode)
    _same(got, want)


def test_pad_defaults_and_types():
    x = np.ones((2, 2), np.float32)
    _same(P.pad(x, np.array([1, 0, 0, 0], I64)), np.array([[0, 0], [1, 1], [1, 1]], np.float32))
    _same(P.pad(np.ones((1, 2), bool), np.array([0, 1, 0, 0], I64)), np.array([[False, True, True]]))
    s = np.array(["a", "b"], object)
    _same(P.pad(s, np.array([1, 1], I64)), np.array(["", "a", "b", ""], object))
    _same(P.pad(s, np.array([1, 0], I64), np.array("z", object)), np.array(["z", "a", "b"], object))
    _same(P.pad(s, np.array([0, 2], I64), mode="edge"), np.array(["a", "b", "b", "b"], object))


@pytest.mark.parametrize(
    "pads, kw",
    [
        ([1, 1], {}),
        ([-3, 0, 0, 0], {}),
        ([1, 1, 1, 1], dict(mode="bogus")),
        ([1, 1, 1, 1], dict(constant_value=np.array([1.0, 2.0], np.float32))),
        ([1, 1], dict(axes=np.array([2], I64))),
        ([1, 1], dict(axes=np.array([0, 0], I64))),
    ],
)
def test_pad_bad(pads, kw):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(KernelError):
        P.pad(x, np.array(pads, I64), kw.get("constant_value"), kw.get("axes"), mode=kw.get("mode", "constant"))


def test_pad_bad_edge_cases():
    with pytest.raises(KernelError):
        P.pad(np.zeros((0, 2), np.float32), np.array([1, 0, 0, 0], I64), mode="edge")
    with pytest.raises(KernelError):
        P.pad(np.zeros((1, 2), np.float32), np.array([1, 0, 0, 0], I64), mode="reflect")
    old = limits.set_max_elements(100)
    try:
        with pytest.raises(ResourceLimitError):
            P.pad(np.zeros((2, 2), np.float32), np.array([100, 0, 0, 0], I64))
    finally:
        limits.set_max_elements(old)


# --------------------------------------------------------------------------- CenterCropPad
@pytest.mark.parametrize(
    "shape, axes",
    [
        ([3, 4, 2], None),
        ([6, 8, 2], None),
        ([1, 7], [0, 1]),
        ([4, 3], [-1, -2]),
        ([5], [1]),
        ([2, 2, 2], None),
    ],
)
def test_center_crop_pad(shape, axes):
    x = (np.arange(60) + 1).astype(np.float32).reshape(4, 5, 3)
    ax = [0, 1, 2] if axes is None else [a % 3 for a in axes]
    tgt = list(x.shape)
    for a, t in zip(ax, shape):
        tgt[a] = t
    want = np.zeros(tgt, np.float32)
    for idx in itertools.product(*map(range, tgt)):
        src = []
        for i, t, d in zip(idx, tgt, x.shape):
            src.append(i + (d - t) // 2 if d >= t else i - (t - d) // 2)
        if all(0 <= s < d for s, d in zip(src, x.shape)):
            want[idx] = x[tuple(src)]
    got = P.center_crop_pad(x, np.array(shape, I64), axes=axes)
    _same(got, want)


def test_center_crop_pad_bad():
    with pytest.raises(KernelError):
        P.center_crop_pad(np.zeros((2, 2)), np.array([1, 1, 1], I64))
    with pytest.raises(KernelError):
        P.center_crop_pad(np.zeros((2, 2)), np.array([-1, 1], I64))


# --------------------------------------------------------------------------- DepthToSpace / SpaceToDepth
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("bs, shape", [(2, (1, 8, 2, 3)), (3, (2, 9, 1, 2)), (1, (1, 2, 2, 2))])
def test_depth_to_space(mode, bs, shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    n, c, h, w = shape
    cc = c // (bs * bs)
    want = np.empty((n, cc, h * bs, w * bs), np.float32)
    for b, k, y, z in itertools.product(range(n), range(cc), range(h * bs), range(w * bs)):
        i, j = y % bs, z % bs
        ch = (i * bs + j) * cc + k if mode == "DCR" else k * bs * bs + i * bs + j
        want[b, k, y, z] = x[b, ch, y // bs, z // bs]
    got = P.depth_to_space(x, blocksize=bs, mode=mode)
    _same(got, want)
    _same(P.space_to_depth(got, blocksize=bs, mode=mode), x)


def test_depth_space_bad():
    with pytest.raises(KernelError):
        P.depth_to_space(np.zeros((1, 6, 2, 2)), blocksize=2)
    with pytest.raises(KernelError):
        P.depth_to_space(np.zeros((1, 4, 2)), blocksize=2)
    with pytest.raises(KernelError):
        P.depth_to_space(np.zeros((1, 4, 2, 2)), blocksize=2, mode="XYZ")
    with pytest.raises(KernelError):
        P.space_to_depth(np.zeros((1, 1, 3, 2)), blocksize=2)
    with pytest.raises(KernelError):
        P.space_to_depth(np.zeros((1, 1, 2, 2)), blocksize=0)


# --------------------------------------------------------------------------- dtype preservation
@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes_preserved(dtype):
    x = _data(dtype)
    i = lambda *v: np.array(v, I64)  # noqa: E731
    outs = [
        S.reshape(x, i(6, 4)),
        S.flatten(x),
        S.transpose(x),
        S.squeeze(x[:1], i(0)),
        S.unsqueeze(x, i(0)),
        S.concat(x, x, axis=0),
        *S.split(x, i(1, 2), axis=1),
        S.slice_(x, i(0), i(1)),
        S.expand(x, i(2, 2, 3, 4)),
        S.tile(x, i(1, 2, 1)),
        P.pad(x, i(0, 1, 0, 0, 0, 1)),
        P.pad(x, i(0, 1, 0, 0, 0, 1), mode="edge"),
        P.center_crop_pad(x, i(2, 2), axes=[1, 2]),
        G.trilu(x),
        P.depth_to_space(x.reshape(1, 4, 3, 2), blocksize=2),
        P.space_to_depth(x.reshape(1, 6, 2, 2), blocksize=2),
    ]
    for o in outs:
        assert isinstance(o, np.ndarray) and o.dtype == np.dtype(dtype)
    assert x.tolist() == _data(dtype).tolist()  # inputs untouched


def test_outputs_do_not_alias_inputs():
    x = X234.copy()
    for out in (
        S.slice_(x, [0], [1]),
        S.split(x, [1, 1])[0],
        S.expand(x, [2, 3, 4]),
        S.transpose(x),
        P.pad(x, [0] * 6),
    ):
        out[...] = -1
    _same(x, X234)


# --------------------------------------------------------------------------- ONNX adapters
def _bind(op_type, opset, attrs=None, n_inputs=1, n_outputs=1, present=None):
    import stdops.onnx.adapters  # noqa: F401  (registers the adapters)
    from stdops.onnx.opset import BindContext, resolve

    since, kernel, adp = resolve("", op_type, opset)
    ctx = BindContext(
        op_type,
        "",
        opset,
        since,
        "n",
        None,
        dict(attrs or {}),
        n_inputs,
        present or [True] * n_inputs,
        n_outputs,
        kernel,
        [None] * n_inputs,
    )
    return adp(ctx) if adp else ctx.bind()


def test_adapter_reshape_1_and_squeeze_unsqueeze_1():
    _same(_bind("Reshape", 4, dict(shape=(4, -1), consumed_inputs=(0,)))(X234), X234.reshape(4, 6))
    _same(_bind("Reshape", 13, n_inputs=2)(X234, np.array([0, -1], I64)), X234.reshape(2, 12))
    x = np.zeros((1, 3, 1), np.float32)
    _same(_bind("Squeeze", 11, dict(axes=(-1,)))(x), np.zeros((1, 3), np.float32))
    _same(_bind("Squeeze", 1)(x), np.zeros(3, np.float32))
    _same(_bind("Unsqueeze", 11, dict(axes=(0, -1)))(X234), X234.reshape(1, 2, 3, 4, 1))
    with pytest.raises(ModelFormatError):
        _bind("Unsqueeze", 9)
    with pytest.raises(ModelFormatError):
        _bind("Reshape", 1)


def test_adapter_concat_split():
    _same(_bind("Concat", 1, n_inputs=2)(X234, X234), np.concatenate([X234, X234], 1))
    _same(_bind("Concat", 11, dict(axis=-1), n_inputs=2)(X234, X234), np.concatenate([X234, X234], 2))
    with pytest.raises(ModelFormatError):
        _bind("Concat", 13, n_inputs=2)
    for opset, attrs, n_in, args, sizes in [
        (2, dict(axis=2, split=(1, 3)), 1, (), [1, 3]),
        (11, dict(axis=-1), 1, (), [2, 2]),
        (1, dict(axis=2), 2, (np.array([3, 1], I64),), [3, 1]),
        (13, dict(axis=2), 2, (np.array([3, 1], I64),), [3, 1]),
        (13, dict(axis=2), 1, (), [2, 2]),
        (18, dict(axis=2), 1, (), [2, 2]),
        (18, dict(axis=2, num_outputs=2), 1, (), [2, 2]),
    ]:
        fn = _bind("Split", opset, attrs, n_inputs=n_in, n_outputs=len(sizes))
        got = fn(X234, *args)
        for g, w in zip(got, _split_want(X234, sizes, 2)):
            _same(g, w)


def test_adapter_slice_tile_pad_eyelike():
    f = _bind("Slice", 9, dict(starts=(0, 1), ends=(1, 1000), axes=(0, 2)))
    _same(f(X234), X234[0:1, :, 1:])
    _same(_bind("Slice", 9, dict(starts=(1,), ends=(2,)))(X234), X234[1:2])
    f = _bind("Tile", 5, n_inputs=3)
    _same(f(X234, np.array(2, I64), np.array(-1, I64)), np.tile(X234, (1, 1, 2)))
    _same(_bind("Tile", 13, n_inputs=2)(X234, np.array([1, 2, 1], I64)), np.tile(X234, (1, 2, 1)))
    x = np.ones((2, 2), np.float32)
    want = np.array([[5, 5, 5], [5, 1, 1], [5, 1, 1]], np.float32)
    _same(_bind("Pad", 2, dict(pads=(1, 1, 0, 0), value=5.0))(x), want)
    _same(_bind("Pad", 1, dict(paddings=(1, 1, 0, 0), value=5.0))(x), want)
    _same(
        _bind("Pad", 7, dict(pads=(0, 1, 0, 0), mode="edge"))(np.array([[1, 2]], np.int32)),
        np.array([[1, 1, 2]], np.int32),
    )
    _same(_bind("EyeLike", 9, dict(dtype=7, k=1))(x), np.array([[0, 1], [0, 0]], I64))
    _same(_bind("EyeLike", 22)(x.astype(np.int32)), np.eye(2, dtype=np.int32))


def test_adapter_constant_sparse():
    from onnx import TensorProto, helper

    values = helper.make_tensor("v", TensorProto.FLOAT, [2], [1.5, 2.5])
    indices = helper.make_tensor("i", TensorProto.INT64, [2], [1, 5])
    sp = helper.make_sparse_tensor(values, indices, [2, 3])
    got = _bind("Constant", 13, dict(sparse_value=sp), n_inputs=0)()
    _same(got, np.array([[0, 1.5, 0], [0, 0, 2.5]], np.float32))
    _same(_bind("Constant", 9, dict(value=np.arange(3, dtype=np.uint16)), n_inputs=0)(), np.arange(3, dtype=np.uint16))


def test_adapter_legacy_float_typed_inputs():
    # Split-1 takes ``split`` as a second input of type T; Tile-1 takes tiles/axis as T tensors.
    got = _bind("Split", 1, dict(axis=2), n_inputs=2, n_outputs=2)(X234, np.array([1.0, 3.0], np.float32))
    for g, w in zip(got, _split_want(X234, [1, 3], 2)):
        _same(g, w)
    f = _bind("Tile", 1, n_inputs=3)
    _same(f(X234, np.array(3.0, np.float32), np.array(0.0, np.float32)), np.tile(X234, (3, 1, 1)))
    with pytest.raises(KernelError):
        f(X234, np.array(1.5, np.float32), np.array(0.0, np.float32))
    with pytest.raises(KernelError):
        f(X234, np.array(2, I64), np.array(3, I64))
    with pytest.raises(ModelFormatError):
        _bind("Split", 1, dict(axis=0, split=(1, 1)), n_inputs=2, n_outputs=2)
