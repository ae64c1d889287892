"""The compiled LSTM loops (ops/_fast_rnn.py) against the NumPy loop of ops/rnn.py (the reference, on the shared
cells): the packed GEMV, AVX-512 or AVX2 (through the kernel and through its load-time prepare) and the BLAS-GEMV loop
that other machines take. Hidden sizes around the packed groups of 32 (16) units, batches, directions, states,
sequence lengths, peepholes, layouts."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ops import _blas, _fast, _fast_lstm_loop, _fast_rnn
from stdops.ops.bind import bind
from stdops.ops.rnn import lstm

pytestmark = pytest.mark.skipif(not _fast.enabled(), reason="the compiled path is off (no numba, or STDOPS_NO_FAST)")
packed_only = pytest.mark.skipif(not _fast_rnn.TILES_OK, reason="the packed GEMV needs AVX-512 or AVX2 (no such CPU)")

_DIRS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _case(seed, T, B, I, H, direction, states, lens, peep, layout=0):
    rng = np.random.default_rng(seed)
    D = _DIRS[direction]
    x = rng.standard_normal((B, T, I) if layout else (T, B, I)).astype(np.float32)
    w = (rng.standard_normal((D, 4 * H, I)) * 0.5).astype(np.float32)
    r = (rng.standard_normal((D, 4 * H, H)) * 0.5).astype(np.float32)
    b = rng.standard_normal((D, 8 * H)).astype(np.float32)
    sshape = (B, D, H) if layout else (D, B, H)
    h0 = rng.standard_normal(sshape).astype(np.float32) if states else None
    c0 = rng.standard_normal(sshape).astype(np.float32) if states else None
    sl = None if lens is None else np.asarray(lens, np.int32)
    p = rng.standard_normal((D, 3 * H)).astype(np.float32) if peep else None
    return (x, w, r, b, sl, h0, c0, p), {"direction": direction, "layout": layout}


def _reference(inputs, attrs):
    prev = _fast.set_enabled(False)
    try:
        return lstm(*inputs, **attrs)
    finally:
        _fast.set_enabled(prev)


def _close(got, want):
    assert len(got) == len(want) == 3
    for g, e in zip(got, want):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=2e-6)


# T, B, I, H, direction, initial states, sequence lengths, peepholes
CASES = [
    (7, 1, 5, 4, "forward", False, None, False),
    (6, 3, 4, 8, "bidirectional", True, None, False),
    (5, 2, 3, 6, "reverse", True, None, True),
    (1, 1, 16, 33, "forward", True, None, False),
    (9, 1, 20, 32, "bidirectional", False, None, True),
    (8, 2, 7, 16, "forward", True, [8, 3], False),
    (8, 3, 7, 31, "reverse", False, [5, 8, 0], False),
    (6, 4, 9, 48, "bidirectional", True, [6, 1, 0, 4], True),
    (12, 1, 64, 64, "forward", False, [12], False),
    (4, 2, 8, 100, "bidirectional", True, None, False),
    (3, 2, 5, 1, "forward", True, [2, 3], True),
]


@packed_only
@pytest.mark.parametrize("T,B,I,H,direction,states,lens,peep", CASES)
def test_packed_loop_matches_numpy(T, B, I, H, direction, states, lens, peep):
    inputs, attrs = _case(T * 100 + H, T, B, I, H, direction, states, lens, peep)
    want = _reference(inputs, attrs)
    _close(lstm(*inputs, **attrs), want)
    # through the load-time prepare (W, R, B and P constants), as the ONNX and ncnn front ends bind it
    x, w, r, b, sl, h0, c0, p = inputs
    step = bind(lstm, attrs, (None, w, r, b, None, None, None, p))
    assert step.prepared
    _close(step(*inputs), want)


@packed_only
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_packed_loop_layout_1_and_float16(direction):
    """layout 1 (batch first) and a float16 X (computed in float32, returned as float16)."""
    inputs, attrs = _case(7, 5, 3, 6, 20, direction, True, [5, 2, 4], False, layout=1)
    _close(lstm(*inputs, **attrs), _reference(inputs, attrs))
    x16 = inputs[0].astype(np.float16)
    args16 = (x16, *inputs[1:])
    got = lstm(*args16, **attrs)
    assert got[0].dtype == np.float16
    _close(got, _reference(args16, attrs))


@packed_only
def test_prepared_step_falls_back_when_its_constants_change():
    """A fed W (not the prepared constant), a run-time B where none was constant, a float64 X: the plain kernel,
    the same results as the reference; the prepared packing never computes with stale weights."""
    inputs, attrs = _case(3, 6, 2, 5, 12, "forward", True, None, False)
    x, w, r, b, sl, h0, c0, p = inputs
    step = bind(lstm, attrs, (None, w, r, None))
    assert step.prepared
    w2 = (w * 0.5).astype(np.float32)
    _close(step(x, w2, r, None, None, h0, c0), _reference((x, w2, r, None, None, h0, c0), attrs))
    _close(step(x, w, r, b, None, h0, c0), _reference((x, w, r, b, None, h0, c0), attrs))
    x64 = x.astype(np.float64)
    got = step(x64, w, r, None, None, h0, c0)
    want = _reference((x64, w, r, None, None, h0, c0), attrs)
    for g, e in zip(got, want):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, e, rtol=1e-12)


def test_no_prepare_for_what_the_compiled_loop_does_not_compute():
    """clip, input_forget, other activations: no packing; the kernel's own loops."""
    _, w, r, b, *_ = _case(1, 2, 1, 3, 4, "forward", False, None, False)[0]
    for attrs in ({"clip": 2.0}, {"input_forget": 1}, {"activations": ["Tanh", "Tanh", "Tanh"]}):
        assert not bind(lstm, attrs, (None, w, r, b)).prepared


@pytest.mark.parametrize(
    "T,B,I,H,direction,states", [(7, 1, 5, 4, "forward", False), (6, 3, 4, 40, "bidirectional", True)]
)
def test_blas_loop_matches_numpy(T, B, I, H, direction, states, monkeypatch):
    """The loop machines without AVX-512 or AVX2 take (the GEMV by BLAS through numba), forced here."""
    monkeypatch.setattr(_fast_rnn, "TILES_OK", False)
    inputs, attrs = _case(11, T, B, I, H, direction, states, None, False)
    assert not bind(lstm, attrs, (None, *inputs[1:4])).prepared
    _close(lstm(*inputs, **attrs), _reference(inputs, attrs))


@packed_only
def test_packed_layout():
    """pack_recurrent's documented layout, element by element, and its 64-byte alignment."""
    rng = np.random.default_rng(5)
    D, H, G = 2, 37, 4
    R = rng.standard_normal((D, G * H, H)).astype(np.float32)
    Rp = _fast_rnn.pack_recurrent(R, G)
    assert Rp.ctypes.data % 64 == 0
    U = _fast_rnn._UNITS  # vectors of 16 units a group: 2 on AVX-512, 1 on AVX2
    NG = -(-H // (16 * U))
    v = Rp.reshape(D, NG, H, G, U, 16)
    d, grp, k, g, p, lane = np.meshgrid(*(np.arange(n) for n in v.shape), indexing="ij")
    unit = 16 * U * grp + 16 * p + lane
    inside = unit < H
    np.testing.assert_array_equal(v[inside], R[d[inside], g[inside] * H + unit[inside], k[inside]])
    assert not v[~inside].any()


@packed_only
@pytest.mark.parametrize("H", [7, 32, 45, 64, 100])
def test_register_epilogue_rounds_as_the_scalar_loop(H):
    """Without peepholes a group's gates and cell update run in AVX-512 registers (_lstm_group); with them, in
    numba's loops on the same exp stages. Zero peepholes add exact zeros: the two paths agree bit for bit."""
    rng = np.random.default_rng(H)
    T, B, D = 5, 2, 2
    gx = rng.standard_normal((T, B, D * 4 * H)).astype(np.float32) * 3
    bias = rng.standard_normal((D, 4 * H)).astype(np.float32)
    Rp = _fast_rnn.pack_recurrent(rng.standard_normal((D, 4 * H, H)).astype(np.float32), 4)
    lens = np.array([5, 3], np.int64)
    rev = np.array([False, True])
    h0 = rng.standard_normal((D * B, H)).astype(np.float32)
    c0 = rng.standard_normal((D * B, H)).astype(np.float32) * 4
    outs = []
    for P in (None, np.zeros((D, 3 * H), np.float32)):
        h, c, Y = h0.copy(), c0.copy(), np.zeros((T, D * B, H), np.float32)
        _fast_lstm_loop.lstm_packed(gx, bias, Rp, lens, rev, P, h, c, Y, B)
        outs.append((h, c, Y))
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


def _split_case(seed, T, B, H, D, lens):
    rng = np.random.default_rng(seed)
    gx = rng.standard_normal((T, B, D * 4 * H)).astype(np.float32) * 2
    bias = rng.standard_normal((D, 4 * H)).astype(np.float32)
    Rp = _fast_rnn.pack_recurrent((rng.standard_normal((D, 4 * H, H)) * 0.3).astype(np.float32), 4)
    rev = np.array([False, True][:D])
    h0 = rng.standard_normal((D * B, H)).astype(np.float32)
    c0 = rng.standard_normal((D * B, H)).astype(np.float32)
    return gx, bias, Rp, np.array(lens, np.int64), rev, h0, c0


def _run_split(case, T, B, threads, monkeypatch):
    gx, bias, Rp, lens, rev, h0, c0 = case
    monkeypatch.setattr(_blas, "threads", lambda: threads)
    h, c, Y = h0.copy(), c0.copy(), np.zeros((T, h0.shape[0], h0.shape[1]), np.float32)
    _fast_lstm_loop.lstm_packed(gx, bias, Rp, lens, rev, None, h, c, Y, B)
    return h, c, Y


@packed_only
@pytest.mark.parametrize(
    "T,B,H,D,lens",
    [
        (9, 1, 64, 1, [9]),
        (7, 3, 45, 2, [7, 2, 5]),
        (6, 2, 100, 1, [6, 6]),
        (5, 4, 33, 2, [5, 0, 3, 5]),
        (3, 1, 256, 1, [3]),
    ],
)
def test_two_thread_steps_give_the_bits_of_one(T, B, H, D, lens, monkeypatch):
    """Each step's groups in two halves on two threads (ops/_fast_lstm_loop.py): the same bits as one thread, with
    the helper running, and with one thread taking every half (the other then finds them all claimed, in either
    order: a helper that starts late, or a caller descheduled before its first step)."""
    monkeypatch.setattr(_fast_lstm_loop, "_SPLIT_STEP_FLOPS", 0)
    case = _split_case(T * 10 + H, T, B, H, D, lens)
    want = _run_split(case, T, B, 1, monkeypatch)
    for _ in range(3):
        for g, e in zip(_run_split(case, T, B, 2, monkeypatch), want):
            np.testing.assert_array_equal(g, e)
    gx, bias, Rp, lens_, rev, h0, c0 = case
    NG = -(-H // (16 * _fast_rnn._UNITS))
    for first in (0, 1):
        hb = np.empty((2, D * B, H), np.float32)
        hb[0] = h0
        c, Y = c0.copy(), np.zeros((T, D * B, H), np.float32)
        sync = np.zeros(T * _fast_lstm_loop._STRIDE, np.int64)
        for role in (first, 1 - first):
            _fast_lstm_loop._lstm_part(role, sync, gx, bias, Rp, NG, lens_, rev, hb, c, Y, B)
        rows = np.arange(D * B)
        np.testing.assert_array_equal(hb[lens_[rows % B] % 2, rows], want[0])
        np.testing.assert_array_equal(c, want[1])
        np.testing.assert_array_equal(Y, want[2])


# --------------------------------------------------------------------------- GRU (linear_before_reset)


def _gru_case(seed, T, B, I, H, direction, states, lens, bias=True):
    rng = np.random.default_rng(seed)
    D = _DIRS[direction]
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    w = (rng.standard_normal((D, 3 * H, I)) * 0.5).astype(np.float32)
    r = (rng.standard_normal((D, 3 * H, H)) * 0.5).astype(np.float32)
    b = rng.standard_normal((D, 6 * H)).astype(np.float32) if bias else None
    h0 = rng.standard_normal((D, B, H)).astype(np.float32) if states else None
    sl = None if lens is None else np.asarray(lens, np.int32)
    return (x, w, r, b, sl, h0), {"direction": direction, "linear_before_reset": 1}


def _gru_reference(inputs, attrs):
    from stdops.ops.rnn import gru

    prev = _fast.set_enabled(False)
    try:
        return gru(*inputs, **attrs)
    finally:
        _fast.set_enabled(prev)


# T, B, I, H, direction, initial state, sequence lengths
GRU_CASES = [
    (7, 1, 5, 4, "forward", False, None),
    (6, 3, 4, 33, "bidirectional", True, None),
    (5, 2, 3, 32, "reverse", True, [5, 2]),
    (8, 4, 9, 50, "bidirectional", False, [8, 0, 3, 7]),
    (1, 1, 16, 1, "forward", True, None),
]


@packed_only
@pytest.mark.parametrize("T,B,I,H,direction,states,lens", GRU_CASES)
def test_packed_gru_matches_numpy(T, B, I, H, direction, states, lens):
    from stdops.ops.rnn import gru

    inputs, attrs = _gru_case(T * 10 + H, T, B, I, H, direction, states, lens)
    want = _gru_reference(inputs, attrs)
    for got in (gru(*inputs, **attrs), bind(gru, attrs, (None, *inputs[1:4])).fn(*inputs)):
        assert len(got) == 2
        for g, e in zip(got, want):
            assert g.shape == e.shape and g.dtype == e.dtype
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=2e-6)
    assert bind(gru, attrs, (None, *inputs[1:4])).prepared
    # without linear_before_reset (r * H before its GEMV): no packing, the NumPy loop
    assert not bind(gru, {**attrs, "linear_before_reset": 0}, (None, *inputs[1:4])).prepared


@packed_only
def test_packed_gru_without_bias_and_fallbacks():
    """No B; a run-time B where none was constant (the plain kernel); a float64 X."""
    from stdops.ops.rnn import gru

    inputs, attrs = _gru_case(9, 4, 2, 3, 10, "forward", True, None, bias=False)
    x, w, r, _, _, h0 = inputs
    step = bind(gru, attrs, (None, w, r, None))
    want = _gru_reference(inputs, attrs)
    for g, e in zip(step(*inputs), want):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=2e-6)
    b = np.random.default_rng(1).standard_normal((1, 60)).astype(np.float32)
    for g, e in zip(step(x, w, r, b, None, h0), _gru_reference((x, w, r, b, None, h0), attrs)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=2e-6)
    x64 = x.astype(np.float64)
    got = step(x64, w, r, None, None, h0)
    assert got[0].dtype == np.float64


@packed_only
@pytest.mark.parametrize("T,B,I,H", [(0, 1, 3, 4), (3, 0, 3, 4), (3, 2, 3, 0), (3, 1, 0, 5)])
def test_empty_shapes_as_the_numpy_loop(T, B, I, H):
    """No steps, an empty batch, no hidden units, no inputs: the NumPy loop's outputs, shapes and all."""
    from stdops.ops.rnn import gru

    rng = np.random.default_rng(T + B + I + H)
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    for fn, gates, attrs in ((lstm, 4, {}), (gru, 3, {"linear_before_reset": 1})):
        w = rng.standard_normal((1, gates * H, I)).astype(np.float32)
        r = rng.standard_normal((1, gates * H, H)).astype(np.float32)
        got = fn(x, w, r, **attrs)
        prev = _fast.set_enabled(False)
        try:
            want = fn(x, w, r, **attrs)
        finally:
            _fast.set_enabled(prev)
        for g, e in zip(got, want, strict=True):
            assert g.shape == e.shape and g.dtype == e.dtype
            np.testing.assert_array_equal(g, e)


def test_huge_empty_layout():
    """huge_empty: float32, writable, n values, 64-byte aligned at least (2 MB where huge pages are offered), and
    the small-size path; pack_recurrent's layout for an R of 1 MB (on a huge page)."""
    for n in (0, 5, 1 << 17, (1 << 18) + 3):
        a = _fast_rnn.huge_empty(n)
        assert a.dtype == np.float32 and a.shape == (n,) and a.flags.writeable and a.flags.c_contiguous
        assert n == 0 or a.ctypes.data % 64 == 0  # (an empty view's data pointer is no address)
        a[:] = 1.5
        assert (a == 1.5).all()
    R = np.random.default_rng(2).standard_normal((1, 4 * 256, 256)).astype(np.float32)
    Rp = _fast_rnn.pack_recurrent(R, 4)  # 1 MB
    U = _fast_rnn._UNITS
    block = Rp.reshape(1, 256 // (16 * U), 256, 4, U, 16)[0, 1, 3, 2, U - 1]  # group 1, input 3, gate 2, last vector
    u0 = 16 * U + 16 * (U - 1)
    np.testing.assert_array_equal(block, R[0, 2 * 256 + u0 : 2 * 256 + u0 + 16, 3])
