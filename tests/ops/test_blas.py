"""The BLAS thread policy (stdops/ops/_blas.py): one thread inside a run, the caller's count only for the
GEMM sizes where it measured faster."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ops._blas as blas


class FakeBlas:
    """A BLAS whose thread count is a number, and a clock on which a GEMM on ``slow`` threads takes 5x longer."""

    def __init__(self, threads: int, slow: int):
        self.threads, self.slow, self.now, self.sets = threads, slow, 0.0, []

    def get(self):
        return self.threads

    def put(self, n):
        self.sets.append(n)
        self.threads = n

    def clock(self):
        return self.now


@pytest.fixture
def fake(monkeypatch):
    def make(threads, slow):
        f = FakeBlas(threads, slow)
        monkeypatch.setattr(blas, "_API", (f.get, f.put))
        monkeypatch.setattr(blas, "_classes", {})
        monkeypatch.setattr(blas.time, "perf_counter", f.clock)
        real = np.matmul

        def timed_matmul(a, b, **kw):  # the fake clock advances by the GEMM's cost on the current count
            f.now += 5.0 if f.threads == f.slow else 1.0
            return real(a, b, **kw)

        monkeypatch.setattr(blas.np, "matmul", timed_matmul)
        return f

    return make


def test_serial_sets_one_thread_and_restores(fake):
    f = fake(2, slow=2)
    with blas.serial():
        assert f.threads == 1
        with blas.serial():  # nested (a subgraph's run): unchanged
            assert f.threads == 1
        assert f.threads == 1
    assert f.threads == 2


def test_small_gemms_stay_on_one_thread(fake):
    f = fake(2, slow=1)
    a = np.ones((64, 64), np.float32)
    with blas.serial():
        for _ in range(5):
            np.testing.assert_array_equal(blas.matmul(a, a), np.full((64, 64), 64, np.float32))
    assert f.sets == [1, 2]  # entering and leaving serial() only


@pytest.mark.parametrize("slow,best", [(2, 1), (1, 2)])
def test_big_gemms_take_the_faster_count_and_remeasure_rarely(fake, slow, best):
    f = fake(2, slow=slow)
    a = np.ones((256, 256), np.float32)  # 33.5 MFLOP: above the one-thread floor
    used = []
    with blas.serial():
        for _ in range(200):
            before = len(f.sets)
            blas.matmul(a, a)
            used.append(2 if f.sets[before : before + 1] == [2] else 1)
    assert used[:4] == [1, 2, 1, 2]  # both counts measured twice in turn, one thread first
    worse = [i for i, n in enumerate(used[4:], 4) if n != best]
    assert 1 <= len(worse) <= 3  # re-measured rarely: once it lost 5x, >= 100 calls apart
    assert worse[0] >= 8 and all(b - a >= 100 for a, b in zip(worse, worse[1:]))
    assert f.threads == 2  # restored


def test_without_a_run_matmul_is_plain(fake):
    f = fake(2, slow=2)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(blas.matmul(a, a.T), a @ a.T)
    assert f.sets == []


def test_flops_of_broadcast_shapes():
    assert blas._flops((5, 3, 4), (4, 7)) == 2 * 5 * 3 * 4 * 7
    assert blas._flops((4,), (2, 4, 6)) == 2 * 2 * 4 * 6
    assert blas._flops((3, 4), (4,)) == 2 * 3 * 4
