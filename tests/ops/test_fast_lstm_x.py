"""The LSTM with its input projection in the recurrence's loop (ops/_fast_lstm_x.py) against the same kernel with
the projection by one GEMM before the loop (ops/_fast_rnn.py) and against the NumPy loop: steps around the blocks
of 16, input sizes below, at and above H and no multiple of 16, hidden sizes around the groups of 32, initial
states, layout 1, through the load-time prepare; the cases it does not take fall back."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ops import _fast, _fast_lstm_x
from stdops.ops._fast_rnn import TILES_OK
from stdops.ops.bind import bind
from stdops.ops.rnn import lstm

pytestmark = pytest.mark.skipif(
    not (_fast.enabled() and TILES_OK), reason="the fused projection's kernel needs AVX-512 or AVX2 (and numba)"
)


@pytest.fixture(autouse=True)
def _fused_path_on(monkeypatch):
    """The kernel runs on any AVX-512 core; FUSED_OK only says where a plan picks it (AMD's, where it was measured
    faster): tested wherever it can run, so that a CI machine of the other vendor checks it too."""
    monkeypatch.setattr(_fast_lstm_x, "FUSED_OK", True)


def _case(seed, T, I, H, states, layout=0, B=1, direction="forward"):
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    x = rng.standard_normal((B, T, I) if layout else (T, B, I)).astype(np.float32)
    # weights of a trained network's size (1 / sqrt(fan-in)): with larger ones a long sequence is chaotic, a last-bit
    # difference in one projection grows into the gates' whole range
    w = (rng.standard_normal((D, 4 * H, I)) / np.sqrt(I)).astype(np.float32)
    r = (rng.standard_normal((D, 4 * H, H)) / np.sqrt(H)).astype(np.float32)
    b = rng.standard_normal((D, 8 * H)).astype(np.float32)
    sshape = (B, D, H) if layout else (D, B, H)
    h0 = rng.standard_normal(sshape).astype(np.float32) if states else None
    c0 = rng.standard_normal(sshape).astype(np.float32) if states else None
    return (x, w, r, b, None, h0, c0), {"direction": direction, "layout": layout}


def _runs(monkeypatch, inputs, attrs):
    """(fused, GEMM before the loop, NumPy loop, calls of the fused kernel) through the prepared step."""
    calls = []
    real = _fast_lstm_x.lstm_x
    monkeypatch.setattr(_fast_lstm_x, "lstm_x", lambda *a: (calls.append(1), real(*a)))
    x, w, r, b = inputs[:4]
    step = bind(lstm, attrs, (None, w, r, b))
    assert step.prepared
    fused = step(*inputs)
    n = len(calls)
    monkeypatch.setattr(_fast_lstm_x, "_enabled", False)
    before = step(*inputs)
    assert len(calls) == n
    prev = _fast.set_enabled(False)
    try:
        ref = lstm(*inputs, **attrs)
    finally:
        _fast.set_enabled(prev)
    return fused, before, ref, n


# T, I, H, initial states, layout
CASES = [
    (1, 3, 4, False, 0),
    (15, 20, 33, True, 0),
    (16, 16, 32, False, 0),
    (17, 40, 7, True, 1),
    (33, 300, 100, True, 0),
    (40, 64, 1, False, 0),
    (64, 128, 256, True, 0),
]


@pytest.mark.parametrize("T,I,H,states,layout", CASES)
def test_fused_projection_matches_the_gemm_before_the_loop(T, I, H, states, layout, monkeypatch):
    inputs, attrs = _case(T * 1000 + I + H, T, I, H, states, layout)
    fused, before, ref, calls = _runs(monkeypatch, inputs, attrs)
    assert calls == 1
    for f, g, e in zip(fused, before, ref, strict=True):
        assert f.shape == g.shape == e.shape and f.dtype == e.dtype
        # the same kernel on projections summed in another order (OpenBLAS's there): equal or last-bit close
        np.testing.assert_allclose(f, g, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(f, e, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("T,I,H,direction,layout", [(20, 9, 33, "reverse", 0), (17, 24, 40, "bidirectional", 1)])
def test_fused_projection_reverse_and_both_directions(T, I, H, direction, layout, monkeypatch):
    """Each direction by itself, a reverse one on the steps reversed."""
    inputs, attrs = _case(T + I + H, T, I, H, True, layout, 1, direction)
    fused, before, ref, calls = _runs(monkeypatch, inputs, attrs)
    assert calls == (2 if direction == "bidirectional" else 1)
    for f, g, e in zip(fused, before, ref, strict=True):
        assert f.shape == g.shape == e.shape
        np.testing.assert_allclose(f, g, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(f, e, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("B,lens", [(2, None), (1, [5]), (3, [8, 8, 8])])
def test_what_the_fused_path_does_not_take_falls_back(B, lens, monkeypatch):
    """A batch of 2 or more, a short sequence: the GEMM before the loop, the same results."""
    direction = "forward"
    inputs, attrs = _case(3, 8, 12, 20, True, 0, B, direction)
    if lens is not None:
        inputs = (*inputs[:4], np.asarray(lens, np.int32), *inputs[5:])
    fused, before, ref, calls = _runs(monkeypatch, inputs, attrs)
    assert calls == 0
    for f, g, e in zip(fused, before, ref, strict=True):
        np.testing.assert_array_equal(f, g)
        np.testing.assert_allclose(f, e, rtol=1e-5, atol=2e-6)


def test_packed_input_and_blocks_layout():
    """pack_input's [v, i, l] = W^T[i, 16 v + l] (zero past N), x_blocks' [n, i, r] = x[16 n + r, i] (zero past T)."""
    rng = np.random.default_rng(4)
    Wt = rng.standard_normal((5, 37)).astype(np.float32)
    Wp = _fast_lstm_x.pack_input(Wt).reshape(3, 5, 16)
    assert Wp.ctypes.data % 64 == 0
    full = np.zeros((5, 48), np.float32)
    full[:, :37] = Wt
    np.testing.assert_array_equal(Wp, full.reshape(5, 3, 16).transpose(1, 0, 2))
    x = rng.standard_normal((19, 6)).astype(np.float32)
    xb = _fast_lstm_x.x_blocks(x).reshape(2, 6, 16)
    np.testing.assert_array_equal(xb[0], x[:16].T)
    np.testing.assert_array_equal(xb[1, :, :3], x[16:].T)
    assert not xb[1, :, 3:].any()
