"""Attention and RotaryEmbedding against per-(batch, head) reference formulas written here."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.errors import KernelError
from stdops.ops import attention as A

RNG = np.random.default_rng(11)


def _ref(
    q, k, v, mask=None, past_k=None, past_v=None, nonpad=None, causal=False, scale=None, softcap=0.0, left=-1, right=-1
):
    """q [B,Hq,S,D], k/v [B,Hkv,T,*] float64; returns (Y, probs, logits-after-bias)."""
    if past_k is not None:
        k = np.concatenate([past_k, k], 2)
        v = np.concatenate([past_v, v], 2)
    b, hq, s, d = q.shape
    hkv, t = k.shape[1], k.shape[2]
    sc = 1 / np.sqrt(d) if scale is None else scale
    y = np.zeros((b, hq, s, v.shape[3]))
    probs = np.zeros((b, hq, s, t))
    biased = np.zeros((b, hq, s, t))
    full_mask = None if mask is None else np.broadcast_to(mask, (b, hq, s, t))
    for bi in range(b):
        off = past_k.shape[2] if past_k is not None else (nonpad[bi] - s if nonpad is not None else 0)
        for h in range(hq):
            kh = h // (hq // hkv)
            lg = q[bi, h] @ k[bi, kh].T * sc
            if softcap:
                lg = softcap * np.tanh(lg / softcap)
            for i in range(s):
                p = i + off
                for j in range(t):
                    ok = True
                    if causal and j > p:
                        ok = False
                    if nonpad is not None and j >= nonpad[bi]:
                        ok = False
                    if left >= 0 and j < p - left:
                        ok = False
                    if right >= 0 and j > p + right:
                        ok = False
                    if full_mask is not None:
                        mv = full_mask[bi, h, i, j]
                        if full_mask.dtype == bool:
                            ok = ok and bool(mv)
                        else:
                            lg[i, j] += mv
                    if not ok:
                        lg[i, j] = -np.inf
                row = lg[i]
                biased[bi, h, i] = row
                if np.isneginf(row).all():
                    continue
                e = np.exp(row - row.max())
                probs[bi, h, i] = e / e.sum()
                y[bi, h, i] = probs[bi, h, i] @ v[bi, kh]
    return y, probs, biased


def _f32(*xs):
    return [None if x is None else x.astype(np.float32) for x in xs]


CASES = [
    # B, Hq, Hkv, S, T, D, Dv, extra kwargs (kernel + reference)
    (2, 3, 3, 4, 4, 8, 8, {}),
    (2, 4, 2, 3, 5, 8, 6, {}),  # GQA, cross lengths, Dv != D
    (1, 4, 1, 4, 4, 4, 4, {"causal": True}),  # MQA + causal
    (2, 2, 2, 3, 6, 4, 4, {"causal": True}),  # causal, S < T: top-left without cache
    (1, 2, 2, 4, 4, 8, 8, {"scale": 0.3, "softcap": 2.0}),
    (1, 2, 2, 4, 6, 4, 4, {"left": 2, "right": 1}),
    (1, 2, 2, 4, 6, 4, 4, {"left": 1, "right": 0, "causal": True}),
]


def _kernel_kw(kw):
    out = {
        "is_causal": int(kw.get("causal", False)),
        "scale": kw.get("scale"),
        "softcap": kw.get("softcap", 0.0),
        "left_window_size": kw.get("left", -1),
        "right_window_size": kw.get("right", -1),
    }
    return out


@pytest.mark.parametrize("B, Hq, Hkv, S, T, D, Dv, kw", CASES)
def test_attention_4d(B, Hq, Hkv, S, T, D, Dv, kw):
    q, k, v = (
        RNG.standard_normal((B, Hq, S, D)),
        RNG.standard_normal((B, Hkv, T, D)),
        RNG.standard_normal((B, Hkv, T, Dv)),
    )
    y, pk, pv, qk = A.attention(*_f32(q, k, v), **_kernel_kw(kw), qk_matmul_output_mode=3)
    ry, rp, _ = _ref(q, k, v, **kw)
    assert y.dtype == np.float32 and y.shape == (B, Hq, S, Dv)
    np.testing.assert_allclose(y, ry, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(qk, rp, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(pk, k.astype(np.float32))


@pytest.mark.parametrize("B, Hq, Hkv, S, T, D, Dv, kw", CASES[:4])
def test_attention_3d(B, Hq, Hkv, S, T, D, Dv, kw):
    q, k, v = (
        RNG.standard_normal((B, S, Hq * D)),
        RNG.standard_normal((B, T, Hkv * D)),
        RNG.standard_normal((B, T, Hkv * Dv)),
    )
    y, _, pv, _ = A.attention(*_f32(q, k, v), **_kernel_kw(kw), q_num_heads=Hq, kv_num_heads=Hkv)
    split = lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).transpose(0, 2, 1, 3)  # noqa: E731
    ry, _, _ = _ref(split(q, Hq), split(k, Hkv), split(v, Hkv), **kw)
    assert y.shape == (B, S, Hq * Dv)
    np.testing.assert_allclose(y, ry.transpose(0, 2, 1, 3).reshape(B, S, -1), rtol=1e-4, atol=1e-5)
    assert pv.shape == (B, Hkv, T, Dv)


@pytest.mark.parametrize(
    "mask_shape, boolean",
    [((4, 6), True), ((4, 6), False), ((2, 1, 4, 6), True), ((3, 4, 6), False), ((4, 4), True), ((4, 3), False)],
)
def test_attention_masks(mask_shape, boolean):
    B, H, S, T, D = 2, 3, 4, 6, 4
    q, k, v = RNG.standard_normal((B, H, S, D)), RNG.standard_normal((B, H, T, D)), RNG.standard_normal((B, H, T, D))
    if boolean:
        m = RNG.random(mask_shape) > 0.3
    else:
        m = RNG.standard_normal(mask_shape)
    y, _, _, qk = A.attention(*_f32(q, k, v), m if boolean else m.astype(np.float32), qk_matmul_output_mode=2)
    full = m
    if m.shape[-1] < T:  # the kernel pads a short last axis with -inf / False
        pad = [(0, 0)] * (m.ndim - 1) + [(0, T - m.shape[-1])]
        full = np.pad(m, pad, constant_values=False if boolean else -np.inf)
    ry, _, rb = _ref(q, k, v, mask=full)
    np.testing.assert_allclose(y, ry, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(qk, rb.astype(np.float32), rtol=1e-4, atol=1e-5)


def test_attention_past_and_modes():
    B, H, S, P, D = 1, 2, 2, 3, 4
    q, k, v = RNG.standard_normal((B, H, S, D)), RNG.standard_normal((B, H, S, D)), RNG.standard_normal((B, H, S, D))
    pk, pv = RNG.standard_normal((B, H, P, D)), RNG.standard_normal((B, H, P, D))
    y, prk, prv, qk0 = A.attention(*_f32(q, k, v), None, *_f32(pk, pv), is_causal=1, softcap=3.0)
    ry, _, _ = _ref(q, k, v, past_k=pk, past_v=pv, causal=True, softcap=3.0)
    np.testing.assert_allclose(y, ry, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(prk, np.concatenate([pk, k], 2), rtol=1e-6)
    np.testing.assert_allclose(prv, np.concatenate([pv, v], 2), rtol=1e-6)
    raw = np.einsum("bhsd,bhtd->bhst", q, np.concatenate([pk, k], 2)) / 2.0
    np.testing.assert_allclose(qk0, raw, rtol=1e-4, atol=1e-5)
    _, _, _, qk1 = A.attention(*_f32(q, k, v), None, *_f32(pk, pv), softcap=3.0, qk_matmul_output_mode=1)
    np.testing.assert_allclose(qk1, 3.0 * np.tanh(raw / 3.0), rtol=1e-4, atol=1e-5)


def test_attention_nonpad_and_fully_masked():
    B, H, S, T, D = 2, 2, 3, 6, 4
    q, k, v = RNG.standard_normal((B, H, S, D)), RNG.standard_normal((B, H, T, D)), RNG.standard_normal((B, H, T, D))
    nonpad = np.array([5, 2], np.int64)  # offsets 2 and -1 (the first query row of batch 1 sees nothing)
    y, _, _, p = A.attention(*_f32(q, k, v), None, None, None, nonpad, is_causal=1, qk_matmul_output_mode=3)
    ry, rp, _ = _ref(q, k, v, nonpad=nonpad, causal=True)
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, ry, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(p, rp, rtol=1e-4, atol=1e-6)
    assert not y[1, :, 0].any()
    m = np.zeros((S, T), bool)  # all False: zero rows, no NaN
    y, *_ = A.attention(*_f32(q, k, v), m)
    assert not y.any()


def test_attention_dtypes_and_precision():
    q, k, v = (RNG.standard_normal((1, 2, 3, 4)) for _ in range(3))
    y16, pk, _, qk = A.attention(*(x.astype(np.float16) for x in (q, k, v)), softmax_precision=np.float32)
    assert y16.dtype == np.float16 and pk.dtype == np.float16 and qk.dtype == np.float16
    np.testing.assert_allclose(y16, _ref(q, k, v)[0], rtol=1e-2, atol=1e-2)
    y64, *_ = A.attention(q, k, v, softmax_precision=np.float16)
    assert y64.dtype == np.float64
    np.testing.assert_allclose(y64, _ref(q, k, v)[0], rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(
    "args, kw",
    [
        ((np.zeros((1, 3, 2, 4)), np.zeros((1, 2, 2, 4)), np.zeros((1, 2, 2, 4))), {}),  # 3 % 2 heads
        ((np.zeros((1, 2, 4)), np.zeros((1, 2, 4)), np.zeros((1, 2, 4))), {}),  # 3-D without heads
        ((np.zeros((1, 2, 2, 4)), np.zeros((1, 2, 2, 3)), np.zeros((1, 2, 2, 4))), {}),  # head size
        ((np.zeros((1, 2, 2, 4)), np.zeros((1, 2, 2, 4)), np.zeros((1, 2, 2, 4)), np.ones((3, 2), bool)), {}),
        ((np.zeros((1, 2, 2, 4)), np.zeros((1, 2, 2, 4)), np.zeros((1, 2, 2, 4)), None, np.zeros((1, 2, 1, 4))), {}),
        ((np.zeros((1, 2, 2, 4)), np.zeros((1, 2, 2, 4)), np.zeros((1, 2, 2, 4))), {"qk_matmul_output_mode": 4}),
        ((np.zeros((1, 2, 2, 4), np.int32),) * 3, {}),
    ],
)
def test_attention_errors(args, kw):
    with pytest.raises(KernelError):
        A.attention(*args, **kw)


# --------------------------------------------------------------------------- RotaryEmbedding
def _ref_rope(x4, cos, sin, interleaved, r):
    """x4 [B, S, H, D] float64; cos/sin [B, S, r/2]."""
    out = x4.copy()
    for i in range(r // 2):
        a, b = (2 * i, 2 * i + 1) if interleaved else (i, i + r // 2)
        c, s = cos[:, :, None, i], sin[:, :, None, i]
        out[..., a] = x4[..., a] * c - x4[..., b] * s
        out[..., b] = x4[..., a] * s + x4[..., b] * c
    return out


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rdim", [0, 4])
@pytest.mark.parametrize("layout", ["4d", "3d"])
@pytest.mark.parametrize("with_pos", [True, False])
def test_rotary(interleaved, rdim, layout, with_pos):
    B, H, S, D = 2, 3, 5, 8
    r = rdim or D
    x4 = RNG.standard_normal((B, S, H, D))
    theta = RNG.uniform(0, 6, (10, r // 2))
    pos = RNG.integers(0, 10, (B, S))
    cos_b, sin_b = np.cos(theta)[pos], np.sin(theta)[pos]
    want = _ref_rope(x4, cos_b, sin_b, interleaved, r)
    if layout == "4d":
        x, want = x4.transpose(0, 2, 1, 3), want.transpose(0, 2, 1, 3)
        kw = {}
    else:
        x, want = x4.reshape(B, S, H * D), want.reshape(B, S, H * D)
        kw = {"num_heads": H}
    if with_pos:
        args = (np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32), pos)
    else:
        args = (cos_b.astype(np.float32), sin_b.astype(np.float32))
    y = A.rotary_embedding(x.astype(np.float32), *args, interleaved=interleaved, rotary_embedding_dim=rdim, **kw)
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_rotary_errors():
    x = np.zeros((1, 2, 3, 8), np.float32)
    c = np.zeros((4, 4), np.float32)
    with pytest.raises(KernelError):
        A.rotary_embedding(x, c, c, np.array([[0, 1, 9]]))  # position out of range
    with pytest.raises(KernelError):
        A.rotary_embedding(x, c[:, :3], c[:, :3], np.array([[0, 1, 2]]))  # cache width
    with pytest.raises(KernelError):
        A.rotary_embedding(x.reshape(1, 3, 16), c, c, np.array([[0, 1, 2]]))  # 3-D without num_heads
    with pytest.raises(KernelError):
        A.rotary_embedding(x, c, c, np.array([[0, 1, 2]]), rotary_embedding_dim=5)
    with pytest.raises(KernelError):
        A.rotary_embedding(x, c, c)  # 2-D caches without position_ids


def test_onnx_attention_softmax_precision_and_version_checks():
    from onnx import TensorProto as TP
    from onnx import helper as h

    import stdops.errors
    import stdops.onnx

    def model(opset, **kw):
        g = h.make_graph(
            [h.make_node("Attention", ["q", "k", "v"], ["y"], **kw)],
            "g",
            [h.make_tensor_value_info(n, TP.FLOAT, None) for n in "qkv"],
            [h.make_tensor_value_info("y", TP.FLOAT, None)],
        )
        return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])

    q, k, v = (RNG.standard_normal((1, 2, 3, 4)) for _ in range(3))
    (y,) = stdops.onnx.run(model(23, softmax_precision=TP.DOUBLE, is_causal=1), _f32(q, k, v))
    np.testing.assert_allclose(y, _ref(q, k, v, causal=True)[0], rtol=1e-4, atol=1e-5)
    (y,) = stdops.onnx.run(model(25, left_window_size=1), _f32(q, k, v))
    np.testing.assert_allclose(y, _ref(q, k, v, left=1)[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(stdops.errors.StdopsError):
        stdops.onnx.run(model(23, left_window_size=1), _f32(q, k, v))
