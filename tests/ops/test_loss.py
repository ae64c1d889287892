"""Loss kernels against explicit per-sample formulas (loops over a handful of samples, in the test only)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from stdops.errors import KernelError
from stdops.ops import loss as L

RNG = np.random.default_rng(7)


def _ref_nll(logp, target, weight, ii, reduction):
    n, c = logp.shape[:2]
    rest = logp.shape[2:]
    loss = np.zeros((n,) + rest, np.float64)
    wsum = 0.0
    for idx in itertools.product(range(n), *[range(d) for d in rest]):
        t = int(target[idx])
        if ii is not None and t == ii:
            continue
        w = 1.0 if weight is None else float(weight[t])
        loss[idx] = -float(logp[(idx[0], t) + idx[1:]]) * w
        wsum += w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / wsum


def _ref_log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


CASES = [
    # shape, weighted, ignore_index, reduction, target dtype
    ((3, 5), False, None, "mean", np.int64),
    ((3, 5), True, None, "sum", np.int32),
    ((3, 5), True, 2, "mean", np.int64),
    ((2, 4, 3), False, None, "none", np.int64),
    ((2, 4, 3), True, 1, "none", np.int32),
    ((2, 4, 3, 2), False, 0, "mean", np.int64),
    ((2, 4, 3, 2), True, -1, "mean", np.int64),  # negative ignore_index
    ((2, 3, 2, 2, 2), True, 10, "sum", np.int64),  # ignore_index outside [0, C)
]


def _data(shape, weighted, ii, tdtype, dtype=np.float32):
    x = RNG.standard_normal(shape).astype(dtype)
    c = shape[1]
    t = RNG.integers(0, c, (shape[0],) + shape[2:]).astype(tdtype)
    if ii is not None:
        t.reshape(-1)[::3] = ii
    w = RNG.uniform(0.2, 1.0, c).astype(dtype) if weighted else None
    return x, t, w


@pytest.mark.parametrize("shape, weighted, ii, reduction, tdtype", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nll(shape, weighted, ii, reduction, tdtype, dtype):
    x, t, w = _data(shape, weighted, ii, tdtype, dtype)
    got = L.negative_log_likelihood_loss(x, t, w, ignore_index=ii, reduction=reduction)
    want = _ref_nll(x, t, w, ii, reduction)
    assert got.dtype == dtype and got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape, weighted, ii, reduction, tdtype", CASES)
def test_softmax_cross_entropy(shape, weighted, ii, reduction, tdtype):
    x, t, w = _data(shape, weighted, ii, tdtype)
    out, logp = L.softmax_cross_entropy_loss(x, t, w, ignore_index=ii, reduction=reduction)
    ref_logp = _ref_log_softmax(x)
    assert logp.dtype == np.float32 and logp.shape == x.shape
    np.testing.assert_allclose(logp, ref_logp, rtol=1e-5, atol=1e-6)
    want = _ref_nll(ref_logp, t, w, ii, reduction)
    assert out.dtype == np.float32 and out.shape == np.shape(want)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_defaults_and_float16():
    x, t, _ = _data((4, 3), False, None, np.int64)
    np.testing.assert_allclose(L.negative_log_likelihood_loss(x, t), _ref_nll(x, t, None, None, "mean"), rtol=1e-6)
    out, logp = L.softmax_cross_entropy_loss(x.astype(np.float16), t)
    assert out.dtype == np.float16 and logp.dtype == np.float16
    np.testing.assert_allclose(out, _ref_nll(_ref_log_softmax(x), t, None, None, "mean"), rtol=2e-3)
    big = np.array([[1000.0, 0.0, -1000.0]], np.float32)  # stable log-softmax
    out, logp = L.softmax_cross_entropy_loss(big, np.array([1]))
    assert np.isfinite(logp).all() and np.isclose(out, 1000.0)


@pytest.mark.parametrize(
    "args, kw",
    [
        ((np.zeros((2, 3), np.float32), np.array([0, 3])), {}),  # target out of range
        ((np.zeros((2, 3), np.float32), np.array([0, -1])), {}),  # negative target
        ((np.zeros((2, 3), np.float32), np.array([0, 1, 2])), {}),  # target shape
        ((np.zeros((2, 3), np.float32), np.array([0, 1.0])), {}),  # float target
        ((np.zeros((2, 3), np.float32), np.array([0, 1]), np.ones(2, np.float32)), {}),  # weight shape
        ((np.zeros((2, 3), np.float32), np.array([0, 1])), {"reduction": "max"}),
        ((np.zeros(3, np.float32), np.array(0)), {}),
        ((np.zeros((2, 3), np.int32), np.array([0, 1])), {}),
    ],
)
def test_errors(args, kw):
    with pytest.raises(KernelError):
        L.negative_log_likelihood_loss(*args, **kw)
    with pytest.raises(KernelError):
        L.softmax_cross_entropy_loss(*args, **kw)


def test_bfloat16():
    import ml_dtypes

    bf = np.dtype(ml_dtypes.bfloat16)
    x, t, w = _data((3, 4, 2), True, None, np.int64)
    got = L.negative_log_likelihood_loss(x.astype(bf), t, w.astype(bf), reduction="sum")
    assert got.dtype == bf
    np.testing.assert_allclose(got.astype(np.float32), _ref_nll(x, t, w, None, "sum"), rtol=2e-2)
