"""The compiled GEMV of a classifier's weights (stdops/ops/_fast_gemv.py) against numpy's product: row and column
counts off its 16-row blocks and 16-lane vectors, 2 parts at 2 threads (the same bits), the Gemm step taking it
(ONNX Gemm with transB, ncnn InnerProduct) against the same step with the path off."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ops import _fast, _fast_gemv
from stdops.ops.bind import bind
from stdops.ops.linalg import gemm

pytestmark = pytest.mark.skipif(
    _fast.numba is None or not _fast_gemv.PACKED_OK, reason="needs numba and an AVX-512 machine"
)

RNG = np.random.default_rng(53)


@pytest.mark.parametrize("N,K", [(1000, 1280), (1024, 576), (17, 16), (35, 37), (1, 5), (64, 1)])
def test_gemv_matches_numpy(N, K):
    w = RNG.standard_normal((N, K)).astype(np.float32)
    x = RNG.standard_normal(K).astype(np.float32)
    y = _fast_gemv.gemv(w, x)
    assert y.dtype == np.float32 and y.shape == (N,)
    bound = np.abs(w).astype(np.float64) @ np.abs(x).astype(np.float64)
    assert np.all(np.abs(y - w.astype(np.float64) @ x.astype(np.float64)) <= 1e-6 * bound + 1e-30)


def test_gemv_parts_give_the_same_bits_at_1_and_2_threads(monkeypatch):
    from stdops.ops import _blas

    monkeypatch.setattr(_fast_gemv, "_SPLIT_VALUES", 0)
    w = RNG.standard_normal((203, 150)).astype(np.float32)
    x = RNG.standard_normal(150).astype(np.float32)
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(_fast_gemv.gemv(w, x))
    assert np.array_equal(results[0], results[1])
    monkeypatch.setattr(_fast_gemv, "_SPLIT_VALUES", 1 << 60)  # one part: every row's sum as in either part
    np.testing.assert_array_equal(_fast_gemv.gemv(w, x), results[0])


def test_gemv_nan_stays_in_its_row():
    w = RNG.standard_normal((40, 300)).astype(np.float32)
    w[7, 123] = np.nan
    y = _fast_gemv.gemv(w, RNG.standard_normal(300).astype(np.float32))
    assert np.isnan(y[7]) and np.isfinite(np.delete(y, 7)).all()


@pytest.mark.parametrize("alpha,with_c", [(1.0, True), (0.5, False)])
def test_gemm_step_takes_it_at_one_row(alpha, with_c, monkeypatch):
    """A prepared Gemm (transB, constant B of at least MIN_VALUES) runs one row of A through the GEMV, and agrees with
    the same step with the path off; two rows keep the GEMM."""
    calls = []
    f = _fast_gemv.gemv
    monkeypatch.setattr(_fast_gemv, "gemv", lambda *a: calls.append(1) or f(*a))
    b = RNG.standard_normal((1000, 512)).astype(np.float32)
    c = RNG.standard_normal(1000).astype(np.float32) if with_c else None
    a = RNG.standard_normal((1, 512)).astype(np.float32)
    attrs = {"alpha": alpha, "beta": 1.0, "transA": 0, "transB": 1}
    step = bind(gemm, attrs, (None, b, c))
    y = step(a, b, c)
    assert calls == [1] and y.shape == (1, 1000) and y.dtype == np.float32
    monkeypatch.setattr(_fast_gemv, "USE", False)
    y_ref = bind(gemm, attrs, (None, b, c))(a, b, c)
    assert calls == [1]
    bound = alpha * (np.abs(a) @ np.abs(b).T) + (0 if c is None else np.abs(c))
    assert np.all(np.abs(y - y_ref) <= 1e-6 * bound)
    monkeypatch.setattr(_fast_gemv, "USE", True)
    step(np.concatenate([a, a]), b, c)  # two rows: the GEMM
    assert calls == [1]
