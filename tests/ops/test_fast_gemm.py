"""The compiled GEMM by constant weights (stdops/ops/_fast_gemm.py, on ops/_fast_rowtiles.py's register tiles) against
numpy's product: every column block width (64, 48, 16 and their mixes), row counts off every register tile, K of 1;
2 parts at 2 threads (the same bits); the steps taking it (ops/fused.py's matmul_act, a prepared Gemm of several rows)
against the same steps with the path off."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ops import _fast, _fast_gemm
from stdops.ops.bind import bind
from stdops.ops.fused import matmul_act
from stdops.ops.linalg import gemm

pytestmark = pytest.mark.skipif(
    _fast.numba is None or not _fast_gemm.PACKED_OK, reason="needs numba and an AVX-512 machine"
)

RNG = np.random.default_rng(59)


@pytest.mark.parametrize(
    "P,K,N",
    [
        (197, 384, 1536),
        (128, 1024, 256),
        (7, 5, 16),
        (25, 33, 48),
        (31, 17, 80),
        (13, 64, 112),
        (1, 1, 64),
        (50, 3, 176),
    ],
)
def test_gemm_matches_numpy(P, K, N):
    x = RNG.standard_normal((P, K)).astype(np.float32)
    w = RNG.standard_normal((K, N)).astype(np.float32)
    assert _fast_gemm.takes(w)
    y = _fast_gemm.gemm(x, w)
    assert y.dtype == np.float32 and y.shape == (P, N)
    bound = np.abs(x).astype(np.float64) @ np.abs(w).astype(np.float64)
    assert np.all(np.abs(y - x.astype(np.float64) @ w.astype(np.float64)) <= 1e-6 * bound + 1e-30)


def test_gemm_parts_give_the_same_bits_at_1_and_2_threads(monkeypatch):
    from stdops.ops import _blas

    monkeypatch.setattr(_fast_gemm, "_SPLIT_FLOPS", 0)
    x = RNG.standard_normal((29, 70)).astype(np.float32)
    w = RNG.standard_normal((70, 208)).astype(np.float32)
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(_fast_gemm.gemm(x, w))
    assert np.array_equal(results[0], results[1])
    monkeypatch.setattr(_fast_gemm, "_SPLIT_FLOPS", 1 << 60)
    np.testing.assert_array_equal(_fast_gemm.gemm(x, w), results[0])


def test_takes_only_its_operands():
    assert not _fast_gemm.takes(np.zeros((8, 40), np.float32))  # columns off the vectors
    assert not _fast_gemm.takes(np.zeros((8, 64), np.float64))
    assert not _fast_gemm.takes(np.zeros((64, 8), np.float32).T)  # not C-contiguous


def _count_calls(monkeypatch):
    calls = []
    f = _fast_gemm.gemm
    monkeypatch.setattr(_fast_gemm, "gemm", lambda *a: calls.append(1) or f(*a))
    return calls


def test_matmul_act_takes_it(monkeypatch):
    calls = _count_calls(monkeypatch)
    x = RNG.standard_normal((2, 9, 40)).astype(np.float32)
    w = RNG.standard_normal((40, 96)).astype(np.float32)
    b = RNG.standard_normal(96).astype(np.float32)
    r = RNG.standard_normal((2, 9, 96)).astype(np.float32)
    attrs = {"activation": "relu"}
    y = bind(matmul_act, attrs, (None, w, b))(x, w, b, r)
    assert calls == [1]
    monkeypatch.setattr(_fast_gemm, "USE", False)
    y_ref = bind(matmul_act, attrs, (None, w, b))(x, w, b, r)
    assert calls == [1]
    bound = np.abs(x) @ np.abs(w) + np.abs(b) + np.abs(r)
    assert y.shape == y_ref.shape == (2, 9, 96) and np.all(np.abs(y - y_ref) <= 1e-6 * bound)


def test_one_row_goes_to_numpy():
    x = RNG.standard_normal((1, 40)).astype(np.float32)
    w = RNG.standard_normal((40, 64)).astype(np.float32)
    np.testing.assert_array_equal(_fast_gemm.gemm(x, w), x @ w)


def test_prepared_gemm_takes_it_for_several_rows(monkeypatch):
    calls = _count_calls(monkeypatch)
    a = RNG.standard_normal((5, 30)).astype(np.float32)
    b = RNG.standard_normal((64, 30)).astype(np.float32)
    attrs = {"alpha": 2.0, "beta": 1.0, "transA": 0, "transB": 1}
    y = bind(gemm, attrs, (None, b, None))(a, b)
    assert calls == [1]
    monkeypatch.setattr(_fast_gemm, "USE", False)
    y_ref = bind(gemm, attrs, (None, b, None))(a, b)
    assert np.all(np.abs(y - y_ref) <= 1e-6 * 2 * (np.abs(a) @ np.abs(b).T))
