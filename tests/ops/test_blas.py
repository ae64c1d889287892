"""The BLAS thread policy (stdops/ops/_blas.py): OpenBLAS on one thread inside runs; big GEMMs split into parts
by a rule on their shape alone, so that results are bit-identical whatever the thread count and however many
Python threads run at once."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import stdops.ops._blas as blas


class FakeBlas:
    """A BLAS whose thread count is a number."""

    def __init__(self, threads: int):
        self.threads, self.sets = threads, []

    def get(self):
        return self.threads

    def put(self, n):
        self.sets.append(n)
        self.threads = n


@pytest.fixture
def fake(monkeypatch):
    def make(threads):
        f = FakeBlas(threads)
        monkeypatch.setattr(blas, "_API", (f.get, f.put))
        return f

    return make


def test_serial_sets_one_thread_and_restores(fake):
    f = fake(2)
    with blas.serial():
        assert f.threads == 1 and blas.threads() == 2
        with blas.serial():  # nested (a subgraph's run): unchanged
            assert f.threads == 1
        assert f.threads == 1
    assert f.threads == 2 and f.sets == [1, 2]


def test_concurrent_runs_restore_when_the_last_one_ends(fake):
    f = fake(2)
    inside, release = threading.Event(), threading.Event()

    def other():
        with blas.serial():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=other)
    with blas.serial():
        t.start()
        assert inside.wait(5)
    assert f.threads == 1  # the other run is still active
    release.set()
    t.join(5)
    assert f.threads == 2 and f.sets == [1, 2]


def test_split_rule_depends_on_the_shape_only():
    assert blas.split_plan((64, 64), (64, 64)) is None  # small: one call
    axis, cuts = blas.split_plan((64, 147), (147, 12544))
    assert axis == "n" and cuts[0] == 0 and cuts[-1] == 12544 and all(c % 16 == 0 for c in cuts[1:-1])
    assert blas.split_plan((512, 4608), (4608, 49))[0] == "m"  # few columns: split the rows
    assert blas.split_plan((4, 256, 256), (4, 256, 256)) == ("batch", [0, 2, 4])
    assert blas.split_plan((3, 4), (4,)) is None
    # a transformer's skinny GEMMs: never 64-row parts (each would re-pack the whole weight) nor 192-column ones
    assert blas.split_plan((128, 1024), (1024, 256)) is None
    assert blas.split_plan((197, 1536), (1536, 384)) is None
    assert blas.split_plan((128, 256), (256, 1024)) == ("n", [0, 512, 1024])


@pytest.mark.parametrize("shape", [(64, 147, 12544), (512, 4608, 49), (300, 700, 333)])
def test_split_gemm_is_the_product_and_the_same_bits_at_any_thread_count(fake, shape):
    m, k, n = shape
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    results = []
    for count in (1, 2, 3):
        fake(count)
        with blas.serial():
            results.append(blas.matmul(a, b))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert np.all(np.abs(results[0] - exact) <= 1e-5 * bound)
    assert all(np.array_equal(r, results[0]) for r in results[1:])


def test_gemms_from_8_python_threads_are_bit_identical(fake):
    fake(2)
    rng = np.random.default_rng(2)
    pairs = [(rng.standard_normal((96, 300), dtype=np.float32), rng.standard_normal((300, 1500), dtype=np.float32))]
    pairs *= 16

    def product(ab):
        with blas.serial():
            return blas.matmul(*ab)

    expected = product(pairs[0])
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(product, pairs))
    assert all(np.array_equal(g, expected) for g in got)


def test_run_parts_runs_unstarted_parts_itself_and_raises_their_errors(fake):
    fake(2)
    seen = []
    with blas.serial():
        blas.run_parts([lambda i=i: seen.append(i) for i in range(5)])
    assert sorted(seen) == list(range(5))

    def bad():
        raise ValueError("part failed")

    with blas.serial(), pytest.raises(ValueError, match="part failed"):
        blas.run_parts([lambda: None, bad])


def test_run_parts_first_completes(fake):
    """first_completes: a first part that returns True (every shared unit done) leaves the others unrun and unwaited
    for; any other result waits for them (or runs them here) as without it."""
    fake(2)
    here = threading.current_thread()
    seen: list = []
    with blas.serial():
        blas.run_parts([lambda: True] + [lambda: seen.append(threading.current_thread()) for _ in range(3)], True)
    time.sleep(0.05)  # (a helper may have started one before the first part returned)
    assert here not in seen
    seen.clear()
    with blas.serial():
        blas.run_parts([lambda: False] + [lambda i=i: seen.append(i) for i in range(3)], first_completes=True)
    assert sorted(seen) == [0, 1, 2]


def _helper_cpu_seconds() -> float:
    """CPU seconds of the helper threads so far (Linux: /proc/self/task/<tid>/stat, user + system ticks)."""
    ticks = 0
    for t in blas._helpers:
        with open(f"/proc/self/task/{t.native_id}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads helper CPU time from Linux's /proc")
def test_helpers_spin_between_parts_then_sleep(fake):
    """A helper waits for the next part spinning (compiled, outside the GIL) for ~2 ms, then sleeps on the queue: once
    the parts stop, it uses no CPU; parts from many Python threads each run exactly once."""
    fake(2)
    ran: list = []

    def burst(k):
        with blas.serial():
            for i in range(200):
                blas.run_parts([lambda i=i: ran.append((k, i, 0)), lambda i=i: ran.append((k, i, 1))])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(burst, range(4)))
    assert sorted(ran) == [(k, i, j) for k in range(4) for i in range(200) for j in (0, 1)]
    if blas._sync is None:
        pytest.skip("without the compiled kernels the helpers sleep on the queue (nothing to spin on)")
    time.sleep(0.05)  # past the idle spin
    before = _helper_cpu_seconds()
    time.sleep(0.5)
    assert _helper_cpu_seconds() - before <= 0.05  # asleep: at most a tick or so, not 0.5 s of spinning


def test_run_parts_first_rings(fake):
    """first_rings: the first part is given the count of parts queued (0 when they all run here) and rings the bell
    itself; every part runs exactly once, and the helpers still take parts afterwards."""
    seen: list = []

    def first(count):
        seen.append(("first", count))
        if blas._sync is not None:
            blas._sync.ring(blas.bell, count)

    for threads in (1, 2):
        fake(threads)
        seen.clear()
        with blas.serial():
            blas.run_parts([first, lambda: seen.append(("second", 0))], first_rings=True)
            blas.run_parts([lambda: seen.append(("third", 0)), lambda: seen.append(("fourth", 0))])
        assert sorted(seen) == sorted([("first", threads - 1), ("second", 0), ("third", 0), ("fourth", 0)])


def test_without_a_run_matmul_is_the_product(fake):
    fake(2)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(blas.matmul(a, a.T), a @ a.T)


def test_flops_of_broadcast_shapes():
    assert blas._flops((5, 3, 4), (4, 7)) == 2 * 5 * 3 * 4 * 7
    assert blas._flops((4,), (2, 4, 6)) == 2 * 2 * 4 * 6
    assert blas._flops((3, 4), (4,)) == 2 * 3 * 4


def test_panel_rule_depends_on_the_shape_only():
    assert blas.panel_width(384, 1536) == blas.panel_width(257, 768) == 256
    assert blas.panel_width(512, 2048) is None and blas.panel_width(384, 384) is None
    assert blas.panel_width(256, 1024) is None  # K = 256 runs faster whole inside the models (ops/_blas.py)
    w = np.zeros((8, 7), np.float32)
    assert isinstance(blas.prepare_right(w), np.ndarray)  # kept whole
    assert blas.prepare_right(np.asfortranarray(w)).flags.c_contiguous


@pytest.mark.parametrize("m,k,n", [(1, 384, 1536), (197, 384, 1152), (130, 320, 800), (700, 384, 2048)])
def test_panels_are_the_product_and_the_same_bits_at_any_thread_count(fake, m, k, n):
    """Column panels (the last one narrower where n is no multiple of the width) give the product, the same bits
    with 1, 2 or 3 threads (the GEMMs of 2 and 4 parts included: 700 x 384 x 2048 is above both thresholds)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((k, n), dtype=np.float32)
    prepared = blas.prepare_right(w)
    assert isinstance(prepared, blas.Panels) and prepared.shape == (k, n) and prepared.cuts[-1] == n
    results = []
    for count in (1, 2, 3):
        fake(count)
        with blas.serial():
            results.append(blas.matmul_panels(a, prepared))
    exact = a.astype(np.float64) @ w.astype(np.float64)
    bound = np.abs(a).astype(np.float64) @ np.abs(w).astype(np.float64)
    assert results[0].shape == (m, n) and results[0].dtype == np.float32
    assert np.all(np.abs(results[0] - exact) <= 1e-5 * bound)
    assert all(np.array_equal(r, results[0]) for r in results[1:])


def _split_shapes():
    """GEMM shapes the split rule cuts (columns, rows, batches), from the zoo's layers and in between, with the
    operands contiguous, transposed and strided as the kernels pass them."""
    out = []
    for m, k, n in [
        (64, 147, 12544),  # a 7x7 stem's im2col
        (128, 576, 784),
        (512, 4608, 49),  # layer4 of ResNet-18 (rows)
        (128, 256, 768),  # transformer projections
        (128, 256, 1024),
        (197, 384, 1152),  # ViT-small
        (197, 384, 1536),
        (300, 700, 333),
        (784, 1152, 256),
        (1000, 513, 1000),
        (3136, 64, 256),
    ]:
        for layout in ("c", "bT", "aT", "strided"):
            out.append((m, k, n, layout))
    return out


@pytest.mark.parametrize("m,k,n,layout", _split_shapes())
def test_a_whole_gemm_has_the_bits_of_its_parts(monkeypatch, m, k, n, layout):
    """One thread runs a split GEMM whole where the OpenBLAS kernel is one of _WHOLE_SAME_BITS (ops/_blas.py): with
    OpenBLAS on one thread, the whole product and the parts two threads compute are then the same bits (the
    property the one-thread shortcut rests on). On any other kernel one thread runs the parts: the same bits
    again, by construction (checked here too)."""
    rng = np.random.default_rng(m * 7 + n)
    a = rng.standard_normal((k, m) if layout == "aT" else (m, k), dtype=np.float32)
    b = rng.standard_normal((n, k) if layout == "bT" else (k, n + 5 if layout == "strided" else n), dtype=np.float32)
    a = a.T if layout == "aT" else a
    b = b.T if layout == "bT" else (b[:, :n] if layout == "strided" else b)
    assert blas.split_plan(a.shape, b.shape) is not None
    with blas.serial():  # the real OpenBLAS, set to one thread
        whole = np.matmul(a, b) if blas.whole_keeps_bits() else blas.matmul(a, b)
        monkeypatch.setattr(blas, "threads", lambda: 2)
        parts = blas.matmul(a, b)
    assert np.array_equal(whole, parts)


def test_the_one_thread_shortcut_follows_the_kernel(monkeypatch):
    """The whole call only on a kernel whose bits were checked: on another (the Haswell kernel's tail blocks sum
    in another order) one thread runs the parts, so 1 and 2 threads agree there too."""
    calls = []
    real = np.matmul
    monkeypatch.setattr(blas.np, "matmul", lambda *a, **k: calls.append(a[1].shape) or real(*a, **k))
    a = np.ones((64, 147), np.float32)
    b = np.ones((147, 12544), np.float32)
    for core, whole in (("SkylakeX", True), ("Haswell", False), ("", False)):
        monkeypatch.setattr(blas, "whole_keeps_bits", lambda core=core: core in blas._WHOLE_SAME_BITS)
        monkeypatch.setattr(blas, "threads", lambda: 1)
        calls.clear()
        blas.matmul(a, b)
        assert (calls == [b.shape]) == whole and len(calls) == (1 if whole else 2), core


def test_the_kernel_name_is_read():
    assert isinstance(blas.core_name(), str)  # "" only where the loaded BLAS is no OpenBLAS


def test_a_batched_split_has_the_bits_of_the_whole(monkeypatch):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((6, 128, 128), dtype=np.float32)
    b = rng.standard_normal((6, 128, 197), dtype=np.float32)
    assert blas.split_plan(a.shape, b.shape)[0] == "batch"
    with blas.serial():
        whole = np.matmul(a, b)
        monkeypatch.setattr(blas, "threads", lambda: 2)
        assert np.array_equal(whole, blas.matmul(a, b))
