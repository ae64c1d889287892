"""FlexAttention (ai.onnx.preview) against a float64 formula written here, called directly and through
ONNX models whose score_mod / prob_mod subgraphs read values of the enclosing graph."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import stdops.onnx
from stdops.errors import KernelError, ModelFormatError
from stdops.ops import preview as K

RNG = np.random.default_rng(11)


def ref(q, k, v, scale=None, score_mod=None, prob_mod=None):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = np.einsum("bhld,bhsd->bhls", q, k) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if score_mod is not None:
        s = score_mod(s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    if prob_mod is not None:
        p = prob_mod(p)
    return np.einsum("bhls,bhsd->bhld", p, v)


def causal(s):
    L, S = s.shape[-2:]
    return np.where(np.arange(L)[:, None] >= np.arange(S)[None, :], s, -np.inf)


CASES = [  # (B, Hq, Hkv, L, S, D, Dv, scale, score_mod, prob_mod)
    (2, 4, 4, 8, 6, 16, 16, None, None, None),
    (2, 4, 4, 8, 6, 16, 16, 0.1, None, None),
    (2, 8, 2, 4, 6, 16, 16, None, None, None),  # GQA
    (2, 4, 4, 8, 6, 16, 32, None, None, None),  # Dv != D
    (1, 2, 2, 4, 8, 8, 8, None, causal, None),
    (1, 2, 1, 3, 4, 8, 8, None, lambda s: 20 * np.tanh(s / 20), lambda p: p * 0.5),
    (1, 2, 2, 3, 4, 8, 8, None, lambda s: s + np.arange(4)[None, None, None, :] * 0.1, None),
]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=str)
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_flex_attention(case, dtype):
    B, hq, hkv, L, S, D, Dv, scale, smod, pmod = case
    q, k, v = (RNG.standard_normal(s).astype(dtype) for s in ((B, hq, L, D), (B, hkv, S, D), (B, hkv, S, Dv)))
    keep = [a.copy() for a in (q, k, v)]
    kw = {"scale": scale} if scale is not None else {}
    got = K.flex_attention(q, k, v, score_mod=smod, prob_mod=pmod, **kw)
    want = ref(q, k, v, scale, smod, pmod)
    assert got.dtype == np.dtype(dtype) and got.shape == (B, hq, L, Dv)
    tol = {np.float16: 5e-3, np.float32: 1e-5, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
    for a, b in zip((q, k, v), keep):
        np.testing.assert_array_equal(a, b)


def test_modifier_sees_softmax_precision():
    seen = []
    q = RNG.standard_normal((1, 1, 2, 4)).astype(np.float16)
    K.flex_attention(q, q, q, score_mod=lambda s: seen.append(s.dtype) or s)
    K.flex_attention(q, q, q, score_mod=lambda s: seen.append(s.dtype) or s, softmax_precision=np.float64)
    K.flex_attention(
        q.astype(np.float64), q.astype(np.float64), q.astype(np.float64), prob_mod=lambda p: seen.append(p.dtype) or p
    )
    assert seen == [np.float32, np.float64, np.float64]


@pytest.mark.parametrize(
    "args,attrs",
    [
        (
            (
                np.zeros((1, 3, 2, 4), np.float32),
                np.zeros((1, 2, 2, 4), np.float32),
                np.zeros((1, 2, 2, 4), np.float32),
            ),
            {},
        ),  # 3 heads over 2
        ((np.zeros((3, 2, 4), np.float32),) * 3, {}),  # rank 3
        (
            (
                np.zeros((1, 1, 2, 4), np.float32),
                np.zeros((1, 1, 2, 5), np.float32),
                np.zeros((1, 1, 2, 4), np.float32),
            ),
            {},
        ),  # head sizes
        ((np.zeros((1, 1, 2, 4), np.float32),) * 3, {"score_mod": lambda s: s[..., :1]}),  # shape changed
        ((np.zeros((1, 1, 2, 4), np.int32),) * 3, {}),
    ],
)
def test_errors(args, attrs):
    with pytest.raises(KernelError):
        K.flex_attention(*args, **attrs)


# --------------------------------------------------------------------------- through the ONNX front end


def _model(node, inputs, outputs, inits=()):
    g = helper.make_graph([node], "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)])
    m.ir_version = 10
    return m


def _vi(name, shape=None, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def test_onnx_subgraphs_with_outer_scope_values():
    """score_mod adds a graph input 'bias' of the main graph; prob_mod multiplies by an initializer."""
    score = helper.make_graph(
        [helper.make_node("Add", ["scores", "bias"], ["out"])], "score_mod", [_vi("scores")], [_vi("out")]
    )
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    prob = helper.make_graph(
        [helper.make_node("Mul", ["probs", "half"], ["out"])], "prob_mod", [_vi("probs")], [_vi("out")], [half]
    )
    node = helper.make_node(
        "FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview", score_mod=score, prob_mod=prob, scale=0.3
    )
    m = _model(
        node,
        [_vi("Q", [1, 2, 3, 4]), _vi("K", [1, 1, 5, 4]), _vi("V", [1, 1, 5, 2]), _vi("bias", [5])],
        [_vi("Y", [1, 2, 3, 2])],
    )
    q, k, v = (RNG.standard_normal(s).astype(np.float32) for s in ((1, 2, 3, 4), (1, 1, 5, 4), (1, 1, 5, 2)))
    bias = RNG.standard_normal(5).astype(np.float32)
    (y,) = stdops.onnx.run(m, [q, k, v, bias])
    want = ref(q, k, v, 0.3, lambda s: s + bias, lambda p: p * 0.5)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_onnx_subgraph_with_two_inputs_is_refused():
    bad = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["out"])], "score_mod", [_vi("a"), _vi("b")], [_vi("out")]
    )
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview", score_mod=bad)
    m = _model(node, [_vi("Q"), _vi("K"), _vi("V")], [_vi("Y")])
    with pytest.raises(ModelFormatError, match="score_mod"):
        stdops.onnx.load(m)


def test_onnx_softmax_precision_enum():
    node = helper.make_node(
        "FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview", softmax_precision=TensorProto.DOUBLE
    )
    m = _model(node, [_vi("Q"), _vi("K"), _vi("V")], [_vi("Y")])
    q = RNG.standard_normal((1, 1, 2, 4)).astype(np.float32)
    (y,) = stdops.onnx.run(m, [q, q, q])
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref(q, q, q), rtol=1e-5, atol=1e-6)
