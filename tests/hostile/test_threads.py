"""Thread safety (README, "Threads"): a loaded model may be run from many threads at once, with results
bit-identical to a single thread's; an MDF Simulation holds its run's state and is one thread's at a time."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import stdops.mdf as mdf
import stdops.ncnn as sn
import stdops.onnx as so
from stdops.errors import SharedStateError

from .harness import EXAMPLES
from .mutate import onnx_seeds

N_THREADS = 8


def _same(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(a[k]), np.asarray(b[k])) and np.asarray(a[k]).dtype == np.asarray(b[k]).dtype
        for k in a
    ) and set(a) == set(b)


@pytest.mark.parametrize("seed", range(5))
def test_one_onnx_model_run_from_8_threads_is_bit_identical(seed):
    name, proto, _ = onnx_seeds()[seed]
    m = so.load(proto)
    rng = np.random.default_rng(seed)
    feeds_list = []
    for _ in range(4 * N_THREADS):
        feeds = {}
        for vi in m.inputs:
            shape = [d if isinstance(d, int) and d > 0 else 4 for d in vi.shape]
            feeds[vi.name] = rng.standard_normal(shape).astype(vi.dtype)
        feeds_list.append(feeds)
    expected = [m.run(f) for f in feeds_list]
    with ThreadPoolExecutor(N_THREADS) as pool:
        got = list(pool.map(m.run, feeds_list))
    assert all(_same(g, e) for g, e in zip(got, expected)), name


def test_one_ncnn_net_run_from_8_threads_is_bit_identical():
    net = sn.Net.load(EXAMPLES / "xor_mlp.param", EXAMPLES / "xor_mlp.bin")
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 2)).astype(np.float32) for _ in range(4 * N_THREADS)]
    expected = [net.run({"x": x}) for x in xs]
    with ThreadPoolExecutor(N_THREADS) as pool:
        got = list(pool.map(lambda x: net.run({"x": x}), xs))
    assert all(_same(g, e) for g, e in zip(got, expected))


def test_one_mdf_model_with_a_simulation_per_thread_is_bit_identical():
    model = mdf.load(EXAMPLES / "mdf" / "oscillator.yaml")

    def trajectory(_):
        t = mdf.Simulation(model, seed=0).run(duration=1.0, dt=0.01)
        return {c: v for c, v in t.columns()}

    expected = trajectory(0)
    with ThreadPoolExecutor(N_THREADS) as pool:
        got = list(pool.map(trajectory, range(N_THREADS)))
    assert all(_same(g, expected) for g in got)


def test_a_simulation_used_by_two_threads_at_once_is_refused():
    """While thread A is inside sim.run (held at its progress callback), thread B's evaluate raises a
    SharedStateError; afterwards the simulation is A's result, untouched by B, and usable again."""
    model = mdf.load(EXAMPLES / "mdf" / "oscillator.yaml")
    sim = mdf.Simulation(model, seed=0)
    inside, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def progress(i, n):
        if i == 1:
            inside.set()
            release.wait(30)

    def run_a():
        try:
            sim.run(duration=0.1, dt=0.01, progress=progress)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    a = threading.Thread(target=run_a)
    a.start()
    assert inside.wait(30)
    with pytest.raises(SharedStateError, match="being run by another thread"):
        sim.evaluate()
    release.set()
    a.join(30)
    assert not errors
    reference = mdf.Simulation(model, seed=0)
    reference.run(duration=0.1, dt=0.01)
    assert _same(
        {k: v for n in sim.outputs.values() for k, v in n.items()},
        {k: v for n in reference.outputs.values() for k, v in n.items()},
    )
    sim.evaluate(0.01)  # the simulation is free again


def test_a_reentrant_call_is_refused():
    sim = mdf.Simulation(mdf.load(EXAMPLES / "mdf" / "oscillator.yaml"), seed=0)
    with pytest.raises(SharedStateError, match="already running"):
        sim.run(duration=0.02, dt=0.01, progress=lambda i, n: sim.evaluate())
