"""The drift-diffusion walk and its counter-based normals (stdops/ops/cognitive/ddm.py, philox_normals.py):
Philox4x32-10 against the Random123 known answers, the ziggurat's tables against their defining equations,
the normals against the normal distribution (scipy), the compiled walk against the NumPy one bit for bit,
and a trial's result independent of the trials beside it. (The walk's distribution against the reference's
one-normal-per-step loop and against DDM theory: tests/mdf/test_functions.py, tests/mdf/test_examples.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from stdops import limits
from stdops.errors import KernelError, StdopsError
from stdops.ops import _fast
from stdops.ops.cognitive import ddm
from stdops.ops.cognitive import philox_normals as P

# Random123 tests/kat_vectors, the three philox4x32 10 lines: counter (4 words), key (2 words), result (4 words)
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("ctr,key,want", KAT)
def test_philox_known_answers(ctr, key, want):
    got = P.philox4x32(*ctr, *key)
    assert tuple(int(np.asarray(g)) for g in got) == want


def test_philox_vectorized_matches_one_at_a_time():
    rng = np.random.default_rng(3)
    c = rng.integers(0, 2**32, size=(4, 50), dtype=np.uint64)
    k = rng.integers(0, 2**32, size=(2, 50), dtype=np.uint64)
    many = P.philox4x32(*c, *k)
    for i in (0, 17, 49):
        one = P.philox4x32(*c[:, i], *k[:, i])
        assert [int(m[i]) for m in many] == [int(np.asarray(o)) for o in one]


def test_ziggurat_tables_satisfy_their_equations():
    x, f, scale, inner = P.tables()
    r, v = float(P.ZIG_R_TEXT), float(P.ZIG_V_TEXT)
    assert x[1] == r and x[256] == 0.0 and f[256] == 1.0
    # v: the base strip r f(r) plus the tail's area (scipy's normal survival function)
    tail = math.sqrt(2 * math.pi) * stats.norm.sf(r)
    assert v == pytest.approx(r * math.exp(-r * r / 2) + tail, rel=1e-13)
    assert x[0] * math.exp(-r * r / 2) == pytest.approx(v, rel=1e-14)  # the base layer as a rectangle
    # every layer above the base has area v, and the top one closes at f = 1
    areas = x[1:256] * (f[2:257] - f[1:256])
    np.testing.assert_allclose(areas, v, rtol=1e-11)
    np.testing.assert_allclose(f[:256], np.exp(-0.5 * x[:256] ** 2), rtol=1e-15)
    assert np.all(np.diff(x[1:]) < 0)
    np.testing.assert_array_equal(scale, x[:256] * 2.0**-52)
    np.testing.assert_array_equal(inner, x[1:])


def _many_normals(n_streams=20000, n_steps=200, key=7):
    return P.normals(
        np.full(n_streams, key, np.uint64), np.arange(n_streams), np.zeros(n_streams, np.int64), n_steps
    ).ravel()


def test_normals_have_the_normal_distribution():
    z = _many_normals()  # 4 million
    edges = np.concatenate([[-np.inf], np.linspace(-4.5, 4.5, 181), [np.inf]])
    counts, _ = np.histogram(z, edges)
    expect = z.size * np.diff(stats.norm.cdf(edges))
    chi2 = float(((counts - expect) ** 2 / expect).sum())
    assert stats.chi2.sf(chi2, len(expect) - 1) > 1e-4
    assert abs(z.mean()) < 5 / math.sqrt(z.size)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / z.size)
    assert abs(stats.skew(z)) < 5 * math.sqrt(6 / z.size)
    assert abs(stats.kurtosis(z)) < 5 * math.sqrt(24 / z.size)
    beyond = np.abs(z) > P.ZIG_R  # the tail's share
    p = 2 * stats.norm.sf(P.ZIG_R)
    assert abs(beyond.mean() - p) < 5 * math.sqrt(p / z.size)


def test_tail_sampler():
    """The slow path alone: words forced into the base layer beyond r give the normal's tail beyond r, with
    their sign (the wedges are covered by the whole distribution above)."""
    n = 20000
    key = np.full(n, 5, np.uint64)
    stream = np.arange(n, dtype=np.uint64)
    step = np.zeros(n, np.uint64)
    tail = P._slow_path(key, stream, step, np.zeros(n, np.intp), np.zeros(n, bool), np.full(n, P.ZIG_R))
    assert np.all(tail > P.ZIG_R)
    assert stats.kstest(tail, stats.truncnorm(P.ZIG_R, np.inf).cdf).pvalue > 1e-4
    neg = P._slow_path(key, stream + n, step, np.zeros(n, np.intp), np.ones(n, bool), np.full(n, P.ZIG_R))
    assert np.all(neg < -P.ZIG_R)


def test_below_exp_decides_as_the_c_library_near_the_boundary():
    rng = np.random.default_rng(0)
    arg = -rng.random(4000) * 10
    e = np.array([math.exp(a) for a in arg])
    y = e * (1 + rng.integers(-4, 5, arg.size) * 2.0**-52)  # within a few ulps of the boundary, both sides
    got = P._below_exp(y, arg)
    np.testing.assert_array_equal(got, y < e)


PARAMS = [
    (0.0, 0.2, 0.1, 2.0, 1.0, 0.01),
    (0.3, 0.1, 1.5, 1.0, 1.0, 0.01),
    (-0.2, 0.0, -0.4, 1.0, 0.5, 0.005),
    (0.0, 0.0, 0.0, 0.05, 2.0, 0.01),  # one or two steps each: mostly first words, many slow paths in all
    (0.0, 0.2, 0.3, 1.0, 0.0, 0.01),  # no noise
]


@pytest.fixture
def numpy_path():
    prev = _fast.set_enabled(False)
    yield
    _fast.set_enabled(prev)


def _run(params, path_on, seed=3, n=3000):
    prev = _fast.set_enabled(path_on)
    try:
        return ddm.drift_diffusion_integrator(*params, rng=np.random.default_rng(seed), n_trials=n)
    finally:
        _fast.set_enabled(prev)


@pytest.mark.skipif(_fast.numba is None, reason="numba (the optional 'fast' extra) is not installed")
@pytest.mark.parametrize("params", PARAMS)
def test_compiled_walk_matches_numpy_bit_for_bit(params):
    a, b = _run(params, True), _run(params, False)
    np.testing.assert_array_equal(a, b)
    assert a.dtype == b.dtype == np.float64


@pytest.mark.skipif(_fast.numba is None, reason="numba (the optional 'fast' extra) is not installed")
def test_compiled_walk_matches_numpy_over_many_keys_and_mixed_trials():
    rng = np.random.default_rng(9)
    n = 4000
    keys = rng.integers(0, 2**64, size=n, dtype=np.uint64)
    streams = rng.integers(0, 2**40, size=n, dtype=np.uint64)
    x0 = rng.uniform(-0.5, 0.5, n)
    ndt = rng.uniform(0, 0.3, n)
    drift = rng.normal(0, 1, n)
    thr = rng.uniform(0.6, 1.5, n)
    sd = rng.uniform(0.2, 2.0, n)
    step = rng.choice([0.001, 0.01, 0.02], n)
    out = []
    for on in (True, False):
        prev = _fast.set_enabled(on)
        try:
            out.append(ddm.signed_times(keys, streams, x0, ndt, drift, thr, sd, step))
        finally:
            _fast.set_enabled(prev)
    np.testing.assert_array_equal(out[0], out[1])


@pytest.mark.parametrize("path_on", [False, True] if _fast.numba is not None else [False])
def test_a_trial_does_not_depend_on_the_trials_beside_it(path_on):
    n = 1000
    keys = np.full(n, 1234567, np.uint64)
    streams = np.arange(n, dtype=np.uint64)
    args = [np.full(n, v) for v in (0.0, 0.2, 0.5, 1.0, 1.0, 0.01)]
    prev = _fast.set_enabled(path_on)
    try:
        full = ddm.signed_times(keys, streams, *args)
        part = ddm.signed_times(keys[700:], streams[700:], *(a[700:] for a in args))
        rev = ddm.signed_times(keys[::-1], streams[::-1], *(a[::-1] for a in args))
    finally:
        _fast.set_enabled(prev)
    np.testing.assert_array_equal(full[700:], part)
    np.testing.assert_array_equal(full[::-1], rev)


def test_the_call_takes_one_key_from_the_generator(numpy_path):
    rng = np.random.default_rng(42)
    out = ddm.drift_diffusion_integrator(0.0, 0.1, 0.5, 1.0, 1.0, 0.01, rng=rng, n_trials=50)
    again = np.random.default_rng(42)
    key = ddm.draw_key(again)
    assert rng.integers(1 << 30) == again.integers(1 << 30)  # both generators moved by one draw
    n = 50
    same = ddm.signed_times(
        np.full(n, key, np.uint64), np.arange(n, dtype=np.uint64), *[np.full(n, v) for v in (0, 0.1, 0.5, 1, 1, 0.01)]
    )
    np.testing.assert_array_equal(out, same)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(noise=-1.0), "noise"),
        (dict(dt=0.0), "dt"),
        (dict(dt=float("nan")), "dt"),
        (dict(drift_rate=float("nan")), "drift_rate"),
        (dict(threshold=float("nan")), "threshold"),
    ],
)
def test_bad_arguments_are_refused(kwargs, match):
    args = dict(starting_point=0.0, non_decision_time=0.1, drift_rate=0.5, threshold=1.0, noise=1.0, dt=0.01)
    args.update(kwargs)
    with pytest.raises(KernelError, match=match):
        ddm.drift_diffusion_integrator(**args, rng=np.random.default_rng(0))


@pytest.mark.parametrize("path_on", [False, True] if _fast.numba is not None else [False])
def test_a_walk_that_never_ends_is_stopped(path_on):
    prev = _fast.set_enabled(path_on)
    try:
        with limits.override(max_loop_iterations=512):
            with pytest.raises(StdopsError, match="no boundary crossing after 512 steps"):
                ddm.drift_diffusion_integrator(0.0, 0.0, 0.0, 1.0, 0.0, 0.01, rng=np.random.default_rng(0))
            # one that ends on its 512th step is not stopped: x = 512 * 2**-9 = 1.0 exactly, on the threshold,
            # which is the lower response (the reference's x > threshold)
            got = ddm.drift_diffusion_integrator(0.0, 0.0, 2.0**-7, 1.0, 0.0, 0.25, rng=np.random.default_rng(0))
            assert got == -512 * 0.25
    finally:
        _fast.set_enabled(prev)
