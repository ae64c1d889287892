"""The ai.onnx opset 27-28 kernels LinearAttention, CausalConvWithState and SwiGLU against independent
float64 formulas written here."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from stdops.errors import KernelError
from stdops.ops.activation import swi_glu
from stdops.ops.attention import linear_attention
from stdops.ops.conv_causal import causal_conv_with_state

RNG = np.random.default_rng(7)
BF16 = np.dtype(ml_dtypes.bfloat16)
TOL = {np.dtype(np.float16): 4e-3, np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-11, BF16: 3e-2}


def check(got, want, dtype, tol=None):
    assert isinstance(got, np.ndarray)
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    t = TOL[np.dtype(dtype)] if tol is None else tol
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=t, atol=t)


def r(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape)


# --------------------------------------------------------------------------- SwiGLU


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, BF16], ids=str)
@pytest.mark.parametrize("alpha", [None, 0.5, 1.702])
@pytest.mark.parametrize("shape", [(2, 4), (3, 1, 5), ()])
def test_swiglu(dtype, alpha, shape):
    a, b = r(*shape, lo=-5, hi=5).astype(dtype), r(*shape, lo=-3, hi=3).astype(dtype)
    a0 = a.copy()
    got = swi_glu(a, b) if alpha is None else swi_glu(a, b, alpha=alpha)
    al = 1.0 if alpha is None else alpha
    A, B = a.astype(np.float64), b.astype(np.float64)
    want = A / (1 + np.exp(-al * A)) * B
    check(got, want, dtype)
    np.testing.assert_array_equal(a, a0)


@pytest.mark.parametrize(
    "a,b",
    [
        (np.zeros((2, 3), np.float32), np.zeros((3,), np.float32)),  # no broadcasting
        (np.zeros(3, np.float32), np.zeros(3, np.float64)),  # dtype mismatch
        (np.zeros(3, np.int32), np.zeros(3, np.int32)),  # not float
    ],
)
def test_swiglu_errors(a, b):
    with pytest.raises(KernelError):
        swi_glu(a, b)


# --------------------------------------------------------------------------- CausalConvWithState


def ref_causal_conv(x, w, bias=None, past=None, act="none"):
    B, C, L = x.shape
    k = w.shape[2]
    past = np.zeros((B, C, k - 1)) if past is None else past
    p = np.concatenate([past, x], axis=2)
    y = np.zeros((B, C, L))
    for t in range(L):
        for j in range(k):
            y[:, :, t] += w[None, :, 0, j] * p[:, :, t + j]
    if bias is not None:
        y += bias[None, :, None]
    if act != "none":
        y = y / (1 + np.exp(-y))
    return y, p[:, :, p.shape[2] - (k - 1) :]


CONV_CASES = [  # (B, C, L, k, bias, past, activation)
    (2, 4, 8, 4, False, False, "none"),
    (2, 4, 8, 4, True, False, "none"),
    (2, 4, 8, 4, False, True, "none"),
    (2, 4, 8, 4, True, True, "silu"),
    (2, 4, 8, 4, False, False, "swish"),
    (2, 4, 1, 4, True, True, "none"),  # decode step
    (2, 3, 6, 1, True, False, "none"),  # k == 1: empty state
    (2, 4, 2, 5, False, False, "none"),  # input shorter than k - 1
    (2, 4, 2, 5, False, True, "silu"),
    (1, 1, 6, 4, False, False, "none"),
    (1, 2, 0, 3, False, True, "none"),  # empty input: the state passes through
]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=str)
@pytest.mark.parametrize("B,C,L,k,has_bias,has_past,act", CONV_CASES)
def test_causal_conv(dtype, B, C, L, k, has_bias, has_past, act):
    x, w = r(B, C, L).astype(dtype), r(C, 1, k).astype(dtype)
    bias = r(C).astype(dtype) if has_bias else None
    past = r(B, C, k - 1).astype(dtype) if has_past else None
    keep = [a.copy() for a in (x, w, bias, past) if a is not None]
    y, state = causal_conv_with_state(x, w, bias, past, activation=act)
    f = [None if a is None else a.astype(np.float64) for a in (x, w, bias, past)]
    wy, ws = ref_causal_conv(*f, act=act)
    check(y, wy, dtype)
    check(state, ws, dtype)
    for a, b in zip([a for a in (x, w, bias, past) if a is not None], keep):
        np.testing.assert_array_equal(a, b)


def test_causal_conv_streaming_equals_one_shot():
    x, w, b = r(2, 3, 10).astype(np.float32), r(3, 1, 4).astype(np.float32), r(3).astype(np.float32)
    y_all, s_all = causal_conv_with_state(x, w, b, activation="silu")
    state, parts = None, []
    for lo, hi in [(0, 3), (3, 4), (4, 10)]:
        y, state = causal_conv_with_state(x[:, :, lo:hi], w, b, state, activation="silu")
        parts.append(y)
    np.testing.assert_allclose(np.concatenate(parts, axis=2), y_all, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state, s_all, rtol=0, atol=0)


@pytest.mark.parametrize(
    "args,attrs",
    [
        ((np.zeros((2, 4), np.float32), np.zeros((4, 1, 3), np.float32)), {}),  # rank 2 input
        ((np.zeros((2, 4, 5), np.float32), np.zeros((3, 1, 3), np.float32)), {}),  # channel mismatch
        ((np.zeros((2, 4, 5), np.float32), np.zeros((4, 2, 3), np.float32)), {}),  # not depthwise
        (
            (np.zeros((2, 4, 5), np.float32), np.zeros((4, 1, 3), np.float32), None, np.zeros((2, 4, 3), np.float32)),
            {},
        ),  # state length k
        (
            (np.zeros((2, 4, 5), np.float32), np.zeros((4, 1, 3), np.float32), np.zeros(3, np.float32)),
            {},
        ),  # bias length
        ((np.zeros((2, 4, 5), np.float32), np.zeros((4, 1, 3), np.float32)), {"activation": "relu"}),
    ],
)
def test_causal_conv_errors(args, attrs):
    with pytest.raises(KernelError):
        causal_conv_with_state(*args, **attrs)


# --------------------------------------------------------------------------- LinearAttention


def ref_linear_attention(q, k, v, past, decay, beta, hq, hkv, rule, scale):
    """Token-by-token, head-by-head recurrence in float64 (the spec's formulas, literally)."""
    B, T, _ = q.shape
    dk, dv = q.shape[2] // hq, v.shape[2] // hkv
    Q = q.reshape(B, T, hq, dk)
    Kh = k.reshape(B, T, hkv, dk)
    Vh = v.reshape(B, T, hkv, dv)
    S = np.zeros((B, hkv, dk, dv)) if past is None else past.copy()
    out = np.zeros((B, T, hq, dv))
    sc = scale if scale else 1 / np.sqrt(dk)
    for b in range(B):
        for t in range(T):
            for h in range(hkv):
                s = S[b, h]
                if rule in ("gated", "gated_delta"):
                    g = decay[b, t]
                    g = g[h * dk : (h + 1) * dk] if g.size == hkv * dk else np.full(dk, g[h])
                    s = np.diag(np.exp(g)) @ s
                kt, vt = Kh[b, t, h], Vh[b, t, h]
                if rule in ("delta", "gated_delta"):
                    be = beta[b, t, h if beta.shape[2] == hkv else 0]
                    s = s + be * np.outer(kt, vt - s.T @ kt)
                else:
                    s = s + np.outer(kt, vt)
                S[b, h] = s
            for hh in range(hq):
                out[b, t, hh] = sc * Q[b, t, hh] @ S[b, hh // (hq // hkv)]
    return out.reshape(B, T, hq * dv), S


LA_CASES = [  # (rule, B, T, hq, hkv, dk, dv, decay per key dim?, beta per head?, past?, scale)
    ("linear", 2, 4, 4, 4, 8, 8, None, None, False, 0.0),
    ("linear", 2, 1, 4, 4, 8, 8, None, None, True, 0.0),
    ("gated", 2, 4, 4, 4, 8, 8, True, None, False, 0.0),
    ("gated", 2, 4, 4, 4, 8, 8, False, None, True, 0.0),
    ("delta", 2, 4, 4, 4, 8, 6, None, True, False, 0.0),
    ("gated_delta", 2, 4, 4, 4, 8, 8, True, True, False, 0.0),
    ("gated_delta", 2, 4, 4, 4, 8, 8, False, False, True, 0.25),
    ("gated_delta", 2, 4, 8, 4, 8, 8, True, True, False, 0.0),  # GQA
    ("gated_delta", 1, 5, 8, 1, 4, 3, True, False, True, 0.0),  # MQA, d_v != d_k
    ("gated_delta", 2, 0, 4, 2, 4, 4, True, True, True, 0.0),  # no tokens: state passes through
]


def _la_inputs(rule, B, T, hq, hkv, dk, dv, dec_kd, beta_h, has_past):
    q, k, v = r(B, T, hq * dk), r(B, T, hkv * dk), r(B, T, hkv * dv)
    if rule.endswith("delta"):  # L2-normalized keys, as the spec recommends for the delta rules
        k4 = k.reshape(B, T, hkv, dk)
        k = (k4 / np.maximum(np.linalg.norm(k4, axis=-1, keepdims=True), 1e-6)).reshape(B, T, hkv * dk)
    past = r(B, hkv, dk, dv) if has_past else None
    decay = None if dec_kd is None else r(B, T, hkv * dk if dec_kd else hkv, lo=-1.0, hi=0.0)
    beta = None if beta_h is None else r(B, T, hkv if beta_h else 1, lo=0.0, hi=1.0)
    return q, k, v, past, decay, beta


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=str)
@pytest.mark.parametrize("case", LA_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LA_CASES)])
def test_linear_attention(dtype, case):
    rule, B, T, hq, hkv, dk, dv, dec_kd, beta_h, has_past, scale = case
    f64 = _la_inputs(rule, B, T, hq, hkv, dk, dv, dec_kd, beta_h, has_past)
    args = [None if a is None else a.astype(dtype) for a in f64]
    keep = [None if a is None else a.copy() for a in args]
    y, state = linear_attention(*args, q_num_heads=hq, kv_num_heads=hkv, update_rule=rule, scale=scale)
    want_y, want_s = ref_linear_attention(
        *[None if a is None else a.astype(np.float64) for a in args], hq, hkv, rule, scale
    )
    tol = 1e-2 if dtype == np.float16 else None
    check(y, want_y, dtype, tol)
    check(state, want_s, dtype, tol)
    for a, b in zip(args, keep):
        if a is not None:
            np.testing.assert_array_equal(a, b)


def test_linear_attention_default_rule_and_chunking():
    """The default rule is gated_delta; a prefill split in two with the state carried over is the same."""
    q, k, v, _, decay, beta = _la_inputs("gated_delta", 2, 6, 4, 2, 4, 4, True, True, False)
    q, k, v, decay, beta = (a.astype(np.float32) for a in (q, k, v, decay, beta))
    y_all, s_all = linear_attention(q, k, v, None, decay, beta, q_num_heads=4, kv_num_heads=2)
    y1, s1 = linear_attention(
        q[:, :2],
        k[:, :2],
        v[:, :2],
        None,
        decay[:, :2],
        beta[:, :2],
        q_num_heads=4,
        kv_num_heads=2,
        update_rule="gated_delta",
    )
    y2, s2 = linear_attention(
        q[:, 2:], k[:, 2:], v[:, 2:], s1, decay[:, 2:], beta[:, 2:], q_num_heads=4, kv_num_heads=2, chunk_size=1
    )
    np.testing.assert_allclose(np.concatenate([y1, y2], axis=1), y_all, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s2, s_all, rtol=1e-5, atol=1e-6)


def test_linear_attention_state_dtype_follows_past_state():
    q = r(1, 2, 8).astype(np.float16)
    past = r(1, 2, 4, 4).astype(np.float32)
    y, s = linear_attention(q, q, q, past, q_num_heads=2, kv_num_heads=2, update_rule="linear")
    assert y.dtype == np.float16 and s.dtype == np.float32


Z = np.zeros((1, 2, 8), np.float32)


@pytest.mark.parametrize(
    "args,attrs",
    [
        ((Z, Z, Z), {"q_num_heads": 3, "kv_num_heads": 2, "update_rule": "linear"}),  # not a multiple
        ((Z, Z, Z), {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "gated"}),  # decay missing
        ((Z, Z, Z), {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "delta"}),  # beta missing
        ((Z, Z, Z), {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "bogus"}),
        ((Z, np.zeros((1, 2, 6), np.float32), Z), {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear"}),
        (
            (Z, Z, Z, np.zeros((1, 2, 4, 5), np.float32)),
            {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear"},
        ),  # past_state shape
        (
            (Z, Z, Z, None, np.zeros((1, 2, 3), np.float32)),
            {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "gated"},
        ),  # decay shape
        ((Z[0], Z[0], Z[0]), {"q_num_heads": 2, "kv_num_heads": 2, "update_rule": "linear"}),  # rank 2
    ],
)
def test_linear_attention_errors(args, attrs):
    with pytest.raises(KernelError):
        linear_attention(*args, **attrs)
