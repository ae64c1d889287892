"""Kernels of the newest ai.onnx opsets: LinearAttention-27, CausalConvWithState-27, SwiGLU-28.

Half-precision inputs (float16, bfloat16) are computed in float32 and cast back; float32 stays
float32 and float64 stays float64.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import op
from .activation import swish
from .conv import ConvWeight, conv_forward
from .dtypes import compute_dtype, float_input

# --------------------------------------------------------------------------- SwiGLU


@op("onnx:SwiGLU-28")
def swi_glu(A, B, /, *, alpha=1.0):
    """Y = Swish_alpha(A) * B = A * sigmoid(alpha * A) * B.

    A and B have identical shapes (no broadcasting) and the same float dtype; Y has that shape
    and dtype.
    """
    a, b = float_input(A, "SwiGLU", "A"), float_input(B, "SwiGLU", "B")
    if a.shape != b.shape:
        raise KernelError(f"SwiGLU: A {a.shape} and B {b.shape} must have identical shapes")
    if a.dtype != b.dtype:
        raise KernelError(f"SwiGLU: A ({a.dtype}) and B ({b.dtype}) must have the same dtype")
    wt = compute_dtype(a.dtype)
    y = swish(a.astype(wt, copy=False), alpha=alpha) * b.astype(wt, copy=False)
    return np.asarray(y).astype(a.dtype, copy=False)


# --------------------------------------------------------------------------- CausalConvWithState


@op("onnx:CausalConvWithState-27")
def causal_conv_with_state(input, weight, bias=None, past_state=None, /, *, activation="none"):  # noqa: A002
    """Y[b, c, t] = act(bias[c] + sum_j W[c, 0, j] * P[b, c, t + j]), P = concat(past_state or
    zeros (B, C, k-1), input) along the last axis; present_state = the last k-1 positions of P.

    input (B, C, L), weight (C, 1, k), bias (C,), past_state (B, C, k-1); act is identity
    ("none") or SiLU ("silu" / "swish"). Outputs: Y (B, C, L) and present_state (B, C, k-1),
    the dtype of input.
    """
    x = float_input(input, "CausalConvWithState", "input")
    w = float_input(weight, "CausalConvWithState", "weight")
    if x.ndim != 3:
        raise KernelError(f"CausalConvWithState: input must have shape (B, C, L), got {x.shape}")
    B, C, L = x.shape
    if w.ndim != 3 or w.shape[0] != C or w.shape[1] != 1 or w.shape[2] < 1:
        raise KernelError(f"CausalConvWithState: weight must have shape ({C}, 1, k), got {w.shape}")
    k = int(w.shape[2])
    act = str(activation).lower()
    if act not in ("none", "silu", "swish"):
        raise KernelError(f"CausalConvWithState: activation must be 'none', 'silu' or 'swish', got {activation!r}")
    wt = compute_dtype(x.dtype)
    if past_state is None:
        past = np.zeros((B, C, k - 1), wt)
    else:
        past = np.asarray(past_state)
        if past.shape != (B, C, k - 1):
            raise KernelError(f"CausalConvWithState: past_state must have shape {(B, C, k - 1)}, got {past.shape}")
        past = past.astype(wt, copy=False)
    padded = np.concatenate([past, x.astype(wt, copy=False)], axis=2)
    b = None
    if bias is not None:
        b = np.asarray(bias)
        if b.shape != (C,):
            raise KernelError(f"CausalConvWithState: bias must have shape ({C},), got {b.shape}")
    if L == 0:
        y = np.zeros((B, C, 0), wt)
    else:
        y = conv_forward(padded, ConvWeight(w, C, wt), b)  # depthwise, no padding: length L
    if act != "none":
        y = swish(y)
    present = padded[:, :, padded.shape[2] - (k - 1) :]
    return y.astype(x.dtype, copy=False), np.ascontiguousarray(present).astype(x.dtype, copy=False)


# --------------------------------------------------------------------------- LinearAttention

_RULES = ("linear", "gated", "delta", "gated_delta")


@op("onnx:LinearAttention-27")
def linear_attention(
    query,
    key,
    value,
    past_state=None,
    decay=None,
    beta=None,
    /,
    *,
    chunk_size=64,
    kv_num_heads,
    q_num_heads,
    scale=0.0,
    update_rule="gated_delta",
):
    """Per KV head, for t = 1..T: S_t = G_t S_{t-1} + U_t, o_t = scale * q_t^T S_t, with G_t =
    exp(decay_t) for "gated"/"gated_delta" (else 1) and U_t = k_t (x) v_t ("linear", "gated") or
    beta_t * k_t (x) (v_t - (G_t S_{t-1})^T k_t) ("delta", "gated_delta").

    query (B, T, Hq*dk), key (B, T, Hkv*dk), value (B, T, Hkv*dv); Hq a multiple of Hkv, query
    head h reads KV head h // (Hq/Hkv). past_state (B, Hkv, dk, dv) (zeros when absent); decay
    (B, T, Hkv*dk) per key dimension or (B, T, Hkv) per head (log-space); beta (B, T, Hkv) or
    (B, T, 1). scale 0 means 1/sqrt(dk). Outputs: output (B, T, Hq*dv) in query's dtype and
    present_state (B, Hkv, dk, dv) in past_state's dtype (query's when absent). chunk_size is a
    performance hint only.
    """
    name = "LinearAttention"
    q, k, v = float_input(query, name, "query"), float_input(key, name, "key"), float_input(value, name, "value")
    rule = str(update_rule)
    if rule not in _RULES:
        raise KernelError(f"{name}: update_rule must be one of {', '.join(_RULES)}, got {update_rule!r}")
    hq, hkv = int(q_num_heads), int(kv_num_heads)
    if hq <= 0 or hkv <= 0 or hq % hkv:
        raise KernelError(f"{name}: q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})")
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise KernelError(f"{name}: query, key and value must be 3-D (B, T, H*D), got {q.shape}, {k.shape}, {v.shape}")
    B, T = q.shape[:2]
    if k.shape[:2] != (B, T) or v.shape[:2] != (B, T):
        raise KernelError(f"{name}: query {q.shape}, key {k.shape} and value {v.shape} differ in (B, T)")
    if q.shape[2] % hq or v.shape[2] % hkv:
        raise KernelError(
            f"{name}: hidden sizes {q.shape[2]} / {v.shape[2]} are not divisible by the head counts {hq} / {hkv}"
        )
    dk, dv = q.shape[2] // hq, v.shape[2] // hkv
    if k.shape[2] != hkv * dk:
        raise KernelError(f"{name}: key hidden size {k.shape[2]} must be kv_num_heads * d_k = {hkv * dk}")
    group = hq // hkv
    wt = compute_dtype(q.dtype)
    qh = q.astype(wt, copy=False).reshape(B, T, hkv, group, dk)
    kh = k.astype(wt, copy=False).reshape(B, T, hkv, dk)
    vh = v.astype(wt, copy=False).reshape(B, T, hkv, dv)

    if past_state is None:
        S = np.zeros((B, hkv, dk, dv), wt)
        state_dtype = q.dtype
    else:
        ps = float_input(past_state, name, "past_state")
        if ps.shape != (B, hkv, dk, dv):
            raise KernelError(f"{name}: past_state must have shape {(B, hkv, dk, dv)}, got {ps.shape}")
        S = ps.astype(wt)  # a copy: the input is never modified
        state_dtype = ps.dtype

    gated = rule in ("gated", "gated_delta")
    delta = rule in ("delta", "gated_delta")
    g = None
    if gated:
        if decay is None:
            raise KernelError(f"{name}: update_rule {rule!r} needs the decay input")
        d = float_input(decay, name, "decay")
        if d.shape == (B, T, hkv * dk):
            g = np.exp(d.astype(wt).reshape(B, T, hkv, dk, 1))
        elif d.shape == (B, T, hkv):
            g = np.exp(d.astype(wt).reshape(B, T, hkv, 1, 1))
        else:
            raise KernelError(f"{name}: decay must have shape {(B, T, hkv * dk)} or {(B, T, hkv)}, got {d.shape}")
    bt = None
    if delta:
        if beta is None:
            raise KernelError(f"{name}: update_rule {rule!r} needs the beta input")
        bb = float_input(beta, name, "beta")
        if bb.shape not in ((B, T, hkv), (B, T, 1)):
            raise KernelError(f"{name}: beta must have shape {(B, T, hkv)} or {(B, T, 1)}, got {bb.shape}")
        bt = bb.astype(wt).reshape(B, T, bb.shape[2], 1, 1)

    sc = float(scale) if scale else 1.0 / np.sqrt(dk)
    out = np.empty((B, T, hkv, group, dv), wt)
    for t in range(T):  # the recurrence runs over time steps, vectorized over batch and heads
        if g is not None:
            S = S * g[:, t]
        kt = kh[:, t, :, :, None]  # (B, Hkv, dk, 1)
        if delta:
            pred = np.matmul(kh[:, t, :, None, :], S)  # (B, Hkv, 1, dv) = S^T k
            S = S + bt[:, t] * (kt * (vh[:, t, :, None, :] - pred))
        else:
            S = S + kt * vh[:, t, :, None, :]
        out[:, t] = np.matmul(qh[:, t], S)  # (B, Hkv, group, dv)
    out *= wt.type(sc)
    return out.reshape(B, T, hq * dv).astype(q.dtype, copy=False), S.astype(state_dtype, copy=False)
