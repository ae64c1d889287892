"""Random kernels: shapes, dtypes, moments within statistical bounds, seeded reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.errors import KernelError
from stdops.ops import random as R

N = 200_000  # 5-sigma bounds below are loose enough to never flake


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("mean, scale", [(0.0, 1.0), (3.0, 0.5), (-2.0, 4.0)])
def test_random_normal_moments(dtype, mean, scale):
    y = R.random_normal(shape=(N // 100, 100), dtype=dtype, mean=mean, scale=scale)
    assert y.shape == (N // 100, 100) and y.dtype == dtype
    y = y.astype(np.float64)
    assert abs(y.mean() - mean) < 5 * scale / np.sqrt(N) + 2e-3 * abs(mean)
    assert abs(y.std() - scale) < 5 * scale * np.sqrt(0.5 / N) + 2e-3 * scale
    # standardized third/fourth moments of a normal: 0 and 3
    z = (y - mean) / scale
    assert abs((z**3).mean()) < 0.05 and abs((z**4).mean() - 3) < 0.1


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("low, high", [(0.0, 1.0), (-3.0, 5.0)])
def test_random_uniform_moments(dtype, low, high):
    y = R.random_uniform(shape=[N], dtype=dtype, low=low, high=high)
    assert y.shape == (N,) and y.dtype == dtype
    y = y.astype(np.float64)
    assert y.min() >= low and y.max() <= high
    w = high - low
    assert abs(y.mean() - (low + high) / 2) < 5 * w / np.sqrt(12 * N)
    assert abs(y.var() - w * w / 12) < 0.01 * w * w / 12 + 1e-3
    hist = np.histogram(y, bins=10, range=(low, high))[0]
    assert np.all(np.abs(hist - N / 10) < 5 * np.sqrt(N / 10))


def test_like_ops():
    x = np.zeros((3, 4, 5), np.float32)
    for fn in (R.random_normal_like, R.random_uniform_like):
        y = fn(x)
        assert y.shape == x.shape and y.dtype == np.float32
        y = fn(x.astype(np.float16), dtype=np.float64)
        assert y.dtype == np.float64
        with pytest.raises(KernelError):
            fn(np.zeros(3, np.int32))  # no dtype and an int input
    y = R.random_normal_like(np.zeros((N,), np.float64), mean=1.0, scale=2.0)
    assert abs(y.mean() - 1.0) < 5 * 2 / np.sqrt(N)
    y = R.random_uniform_like(np.zeros((N,), np.float32), low=2.0, high=3.0)
    assert 2.0 <= y.min() and y.max() <= 3.0 and abs(y.mean() - 2.5) < 0.01


@pytest.mark.parametrize(
    "fn, kw",
    [
        (R.random_normal, {"shape": (4, 5)}),
        (R.random_uniform, {"shape": (4, 5)}),
    ],
)
def test_seeded_reproducible(fn, kw):
    a, b = fn(**kw, seed=3.0), fn(**kw, seed=3.0)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, fn(**kw, seed=4.0))
    assert not np.array_equal(fn(**kw), fn(**kw))  # unseeded: fresh draws
    c = fn(**kw, seed=0.5)
    np.testing.assert_array_equal(c, fn(**kw, seed=0.5))


def test_seeded_like_bernoulli_multinomial():
    x = np.full((6, 7), 0.5, np.float32)
    for fn in (R.random_normal_like, R.random_uniform_like, R.bernoulli):
        np.testing.assert_array_equal(fn(x, seed=1.0), fn(x, seed=1.0))
    lg = np.zeros((4, 10), np.float32)
    np.testing.assert_array_equal(
        R.multinomial(lg, sample_size=50, seed=2.0), R.multinomial(lg, sample_size=50, seed=2.0)
    )


def test_bernoulli():
    p = np.linspace(0, 1, 11).astype(np.float32)
    y = R.bernoulli(np.tile(p, (20000, 1)))
    assert y.dtype == np.float32 and y.shape == (20000, 11)
    assert set(np.unique(y).tolist()) <= {0.0, 1.0}
    np.testing.assert_allclose(y.mean(0), p, atol=5 * 0.5 / np.sqrt(20000))
    assert y[:, 0].sum() == 0 and y[:, -1].sum() == 20000
    assert R.bernoulli(p, dtype=np.bool_).dtype == np.bool_
    assert R.bernoulli(p.astype(np.float64), dtype=np.int64).dtype == np.int64
    with pytest.raises(KernelError):
        R.bernoulli(np.array([1, 0]))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_multinomial_frequencies(dtype):
    probs = np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.0, 0.0, 0.3], [0.25, 0.25, 0.25, 0.25]])
    n = 40_000
    y = R.multinomial(np.log(probs + 1e-30).astype(np.float32), sample_size=n, dtype=dtype)
    assert y.shape == (3, n) and y.dtype == dtype
    assert y.min() >= 0 and y.max() <= 3
    freq = np.stack([np.bincount(row, minlength=4) for row in y]) / n
    np.testing.assert_allclose(freq, probs, atol=5 * 0.5 / np.sqrt(n))
    assert freq[1, 1] == 0 and freq[1, 2] == 0  # impossible classes never drawn


def test_multinomial_unnormalized_logits_and_default():
    x = np.array([[1000.0, 1000.0 + np.log(3.0)]], np.float32)  # huge logits: no overflow
    y = R.multinomial(x, sample_size=20000)
    assert y.dtype == np.int32 and y.shape == (1, 20000)
    assert abs(y.mean() - 0.75) < 0.02
    assert R.multinomial(np.zeros((2, 3), np.float64)).shape == (2, 1)


@pytest.mark.parametrize(
    "x, kw",
    [
        (np.zeros(3, np.float32), {}),
        (np.zeros((2, 3), np.int32), {}),
        (np.zeros((2, 3), np.float32), {"dtype": np.float32}),
        (np.zeros((2, 3), np.float32), {"sample_size": 0}),
        (np.zeros((2, 0), np.float32), {}),
    ],
)
def test_multinomial_errors(x, kw):
    with pytest.raises(KernelError):
        R.multinomial(x, **kw)


def test_dropout_inference():
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for args in [(), (np.float32(0.7),), (np.float32(0.7), np.bool_(False)), (None, None)]:
        y, m = R.dropout(x, *args)
        np.testing.assert_array_equal(y, x)
        assert y.dtype == x.dtype and m.dtype == np.bool_ and m.all() and m.shape == x.shape
    y, m = R.dropout(x, np.float32(0.0), np.bool_(True))
    np.testing.assert_array_equal(y, x)
    assert m.all()


@pytest.mark.parametrize("ratio", [0.1, 0.5, 0.9])
def test_dropout_training(ratio):
    x = np.ones((400, 500), np.float32)
    y, m = R.dropout(x, np.float32(ratio), np.array(True))
    assert y.dtype == np.float32 and m.dtype == np.bool_
    np.testing.assert_allclose(y, m / np.float32(1 - ratio), rtol=1e-6)
    assert abs(m.mean() - (1 - ratio)) < 5 * 0.5 / np.sqrt(x.size)
    y2, m2 = R.dropout(x, np.float32(ratio), np.array(True), seed=5.0)
    y3, m3 = R.dropout(x, np.float32(ratio), np.array(True), seed=5.0)
    np.testing.assert_array_equal(m2, m3)
    np.testing.assert_array_equal(y2, y3)


def test_dropout_bad_ratio():
    with pytest.raises(KernelError):
        R.dropout(np.ones(3, np.float32), np.float32(1.5), np.bool_(True))


def test_random_errors():
    with pytest.raises(KernelError):
        R.random_normal(shape=(2,), dtype=np.int32)
    with pytest.raises(KernelError):
        R.random_uniform(shape=(2,), dtype=np.bool_)


def test_bfloat16():
    import ml_dtypes

    bf = np.dtype(ml_dtypes.bfloat16)
    assert R.random_normal(shape=(3,), dtype=bf).dtype == bf
    assert R.random_uniform_like(np.zeros(3, bf)).dtype == bf
    assert R.bernoulli(np.full(4, 1.0, bf)).astype(np.float32).tolist() == [1.0] * 4
    assert R.multinomial(np.zeros((2, 3), bf), sample_size=4).shape == (2, 4)


# --------------------------------------------------------------------------- through the ONNX front end (adapters)
def _onnx_run(node, in_types, out_types, opset, feeds):
    from onnx import helper as h

    import stdops.onnx

    g = h.make_graph(
        [node],
        "g",
        [h.make_tensor_value_info(n, t, None) for n, t in in_types],
        [h.make_tensor_value_info(n, t, None) for n, t in out_types],
    )
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    return stdops.onnx.run(m, feeds)


@pytest.mark.parametrize("opset", [7, 22])
def test_onnx_random_dtype_enums(opset):
    from onnx import TensorProto as TP
    from onnx import helper as h

    (y,) = _onnx_run(
        h.make_node("RandomNormal", [], ["y"], shape=[3, 4], dtype=TP.DOUBLE, seed=1.0, mean=2.0),
        [],
        [("y", TP.DOUBLE)],
        opset,
        [],
    )
    assert y.dtype == np.float64 and y.shape == (3, 4)
    (y2,) = _onnx_run(
        h.make_node("RandomNormal", [], ["y"], shape=[3, 4], dtype=TP.DOUBLE, seed=1.0, mean=2.0),
        [],
        [("y", TP.DOUBLE)],
        opset,
        [],
    )
    np.testing.assert_array_equal(y, y2)
    (y,) = _onnx_run(h.make_node("RandomUniform", [], ["y"], shape=[5]), [], [("y", TP.FLOAT)], opset, [])
    assert y.dtype == np.float32 and ((0 <= y) & (y < 1)).all()
    x = np.zeros((2, 3), np.float32)
    (y,) = _onnx_run(
        h.make_node("RandomUniformLike", ["x"], ["y"], dtype=TP.FLOAT16),
        [("x", TP.FLOAT)],
        [("y", TP.FLOAT16)],
        opset,
        [x],
    )
    assert y.dtype == np.float16 and y.shape == (2, 3)
    (y,) = _onnx_run(h.make_node("RandomNormalLike", ["x"], ["y"]), [("x", TP.FLOAT)], [("y", TP.FLOAT)], opset, [x])
    assert y.dtype == np.float32
    (y,) = _onnx_run(
        h.make_node("Multinomial", ["x"], ["y"], sample_size=6, dtype=TP.INT64),
        [("x", TP.FLOAT)],
        [("y", TP.INT64)],
        opset,
        [x],
    )
    assert y.dtype == np.int64 and y.shape == (2, 6)
    (y,) = _onnx_run(h.make_node("Multinomial", ["x"], ["y"]), [("x", TP.FLOAT)], [("y", TP.INT32)], opset, [x])
    assert y.dtype == np.int32 and y.shape == (2, 1)


@pytest.mark.parametrize(
    "opset, attrs, mask_dtype",
    [
        (6, {"is_test": 1, "ratio": 0.3}, np.float32),
        (7, {"ratio": 0.2}, np.float32),
        (10, {}, np.bool_),
        (12, {}, np.bool_),
        (22, {"seed": 3.0}, np.bool_),
    ],
)
def test_onnx_dropout_versions(opset, attrs, mask_dtype):
    from onnx import TensorProto as TP
    from onnx import helper as h

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y, m = _onnx_run(
        h.make_node("Dropout", ["x"], ["y", "m"], **attrs),
        [("x", TP.FLOAT)],
        [("y", TP.FLOAT), ("m", TP.BOOL if mask_dtype == np.bool_ else TP.FLOAT)],
        opset,
        [x],
    )
    np.testing.assert_array_equal(y, x)
    assert m.dtype == mask_dtype and m.shape == x.shape and (m == 1).all()


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_uniform_upper_bound_is_open(dtype):
    y = R.random_uniform(shape=(N,), dtype=dtype, low=0.0, high=1.0).astype(np.float64)
    assert y.max() < 1.0 and y.min() >= 0.0
    y = R.random_uniform(shape=(N,), dtype=np.float16, low=1000.0, high=1000.9).astype(np.float64)
    assert y.max() < 1000.9
