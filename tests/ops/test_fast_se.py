"""The compiled squeeze-and-excitation gate (ops/_fast_se.py, through ops/fused.py's squeeze_excite steps): the
NumPy gate's values within float32 rounding, for each activation the epilogue knows, with and without biases,
one and two samples; the steps with it agree with their plain forms."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ops import _fast, _fast_se, fused

pytestmark = pytest.mark.skipif(_fast.numba is None, reason="the compiled gate needs numba (the fast extra)")

RNG = np.random.default_rng(2027)

PAIRS = [
    (("relu", ()), ("hard_sigmoid", (1 / 6, 0.5))),  # MobileNetV3
    (("silu", ()), ("sigmoid", ())),  # EfficientNet
    (("relu", ()), ("sigmoid", ())),  # RegNetY
    (("hard_swish", (1 / 6, 0.5)), ("clip", (0.0, 1.0))),
    (("leaky_relu", (0.1,)), ("gelu", (np.sqrt(2), 1.0))),
    (("", ()), ("", ())),
]


def _attrs(a1, a2) -> dict:
    return {
        "se_activation": a1[0],
        "se_activation_params": a1[1],
        "se_gate": a2[0],
        "se_gate_params": a2[1],
        "activation": "",
        "activation_params": (),
        "post_activation": "",
        "post_activation_params": (),
    }


def _weights(C, C1, M, bias):
    w1 = RNG.standard_normal((C1, C, 1, 1)).astype(np.float32) / np.float32(np.sqrt(C))
    w2 = RNG.standard_normal((C, C1, 1, 1)).astype(np.float32) / np.float32(np.sqrt(C1))
    w3 = RNG.standard_normal((M, C, 1, 1)).astype(np.float32)
    bs = [RNG.standard_normal(n).astype(np.float32) if bias else None for n in (C1, C, M)]
    return w1, bs[0], w2, bs[1], w3, bs[2]


@pytest.mark.parametrize("acts", PAIRS, ids=lambda p: f"{p[0][0] or 'none'}-{p[1][0] or 'none'}")
@pytest.mark.parametrize("shape", [(1, 96, 7, 7), (2, 40, 5, 9), (1, 17, 1, 1)], ids=str)
@pytest.mark.parametrize("bias", [False, True])
def test_compiled_gate_matches_the_numpy_gate(acts, shape, bias, monkeypatch):
    monkeypatch.setattr(_fast, "_enabled", True)
    N, C, H, W = shape
    w1, b1, w2, b2, _, _ = _weights(C, max(1, C // 4), 8, bias)
    x = RNG.standard_normal(shape).astype(np.float32) * np.float32(3)
    consts, attrs = (None, w1, b1, w2, b2), _attrs(*acts)
    monkeypatch.setattr(_fast_se, "USE", True)
    gate, _ = fused._se_gate_prepared(consts, attrs, "se_activation", "se_gate")
    monkeypatch.setattr(_fast_se, "USE", False)
    numpy_gate, _ = fused._se_gate_prepared(consts, attrs, "se_activation", "se_gate")
    got, want = gate(x), numpy_gate(x)
    assert got.dtype == np.float32 and got.shape == want.shape == (N, C)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())))


def test_squeeze_excite_conv_with_the_compiled_gate_is_its_plain_form(monkeypatch):
    monkeypatch.setattr(_fast, "_enabled", True)
    monkeypatch.setattr(_fast_se, "USE", True)
    x = RNG.standard_normal((2, 48, 7, 7)).astype(np.float32)
    w1, b1, w2, b2, w3, b3 = _weights(48, 12, 24, True)
    attrs = _attrs(*PAIRS[0])
    step = fused.prepare_squeeze_excite_conv((None, w1, b1, w2, b2, w3, b3), attrs)
    got = step(x, w1, b1, w2, b2, w3, b3)
    monkeypatch.setattr(_fast, "_enabled", False)
    want = fused.squeeze_excite_conv(x, w1, b1, w2, b2, w3, b3, **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))


def test_gate_call_is_none_when_turned_off(monkeypatch):
    monkeypatch.setattr(_fast_se, "USE", False)
    w = np.zeros((4, 2), np.float32)
    assert _fast_se.gate_call(w, None, (0, 0.0, 0.0), w.T.copy(), None, (0, 0.0, 0.0)) is None
