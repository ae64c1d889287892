"""Attention kernels: Attention (scaled dot-product, MHA/GQA/MQA, KV cache), RotaryEmbedding and
LinearAttention (the linear / gated / delta-rule recurrences); and the optimizer's attention step,
:func:`attention_heads` (MatMul -> Softmax -> MatMul with the Transposes around them, one step), with the
view steps that feed it (:func:`transpose_view`, :func:`gather_view`, :func:`split_view`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import KernelError
from . import _fast, _fast_epilogue
from ._blas import run_parts, threads
from ._registry import op
from .activation import softmax
from .axes import norm_axis
from .dtypes import compute_dtype, float_input, is_float
from .fused import softmax_rows
from .indexing import gather
from .linalg import mat_mul
from .shape import split as split_parts
from .shape import transpose


def _heads(x: np.ndarray, n: int | None, what: str) -> np.ndarray:
    """3-D [B, S, n*h] -> 4-D [B, n, S, h]; a 4-D input is returned as is."""
    if x.ndim == 4:
        return x
    if x.ndim != 3:
        raise KernelError(f"Attention {what} must be 3-D or 4-D, got shape {x.shape}")
    if not n or x.shape[2] % n:
        raise KernelError(
            f"Attention {what}: 3-D input of hidden size {x.shape[2]} needs a num_heads attribute "
            f"that divides it (got {n})"
        )
    b, s, hid = x.shape
    return x.reshape(b, s, n, hid // n).transpose(0, 2, 1, 3)


@op("onnx:Attention-23")
def attention(
    Q,
    K,
    V,
    attn_mask=None,
    past_key=None,
    past_value=None,
    nonpad_kv_seqlen=None,
    /,
    *,
    is_causal=0,
    kv_num_heads=None,
    q_num_heads=None,
    qk_matmul_output_mode=0,
    scale=None,
    softcap=0.0,
    softmax_precision=None,
    left_window_size=-1,
    right_window_size=-1,
):
    """Y = softmax(softcap(Q K^T * scale) + bias) V per head, bias from attn_mask (bool: -inf where
    False; float: added), is_causal (key j visible to query i iff j <= i + offset), nonpad_kv_seqlen
    (keys j >= nonpad[b] hidden) and the left/right windows; a fully masked row gives zeros.

    Q [B, Hq, Sq, D] or [B, Sq, Hq*D] (3-D needs q_num_heads / kv_num_heads); K [B, Hkv, Skv, D];
    V [B, Hkv, Skv, Dv] (Hq a multiple of Hkv: GQA/MQA); past_key/past_value [B, Hkv, P, D/Dv] are
    prepended (offset = P, else nonpad_kv_seqlen - Sq, else 0). scale defaults to 1/sqrt(D);
    softmax_precision is a numpy dtype for the softmax. Outputs: Y ([B, Hq, Sq, Dv] or 3-D [B, Sq,
    Hq*Dv]), present_key, present_value, qk_matmul_output [B, Hq, Sq, T] (mode 0: Q K^T * scale,
    1: after softcap, 2: plus bias, 3: softmax). Dtype of Q.
    """
    q0, k0, v0 = np.asarray(Q), np.asarray(K), np.asarray(V)
    dt = q0.dtype
    if not is_float(dt):
        raise KernelError(f"Attention inputs must be float tensors, got {dt}")
    three_d = q0.ndim == 3
    q = _heads(q0, q_num_heads, "Q")
    k = _heads(k0, kv_num_heads, "K")
    v = _heads(v0, kv_num_heads, "V")
    b, hq, sq, d = q.shape
    if k.shape[0] != b or v.shape[0] != b or k.shape[1] != v.shape[1] or k.shape[2] != v.shape[2] or k.shape[3] != d:
        raise KernelError(f"Attention: Q {q.shape}, K {k.shape} and V {v.shape} do not fit together")
    hkv = k.shape[1]
    if hkv == 0 or hq % hkv:
        raise KernelError(f"Attention: q heads {hq} must be a multiple of kv heads {hkv}")
    if (past_key is None) != (past_value is None):
        raise KernelError("Attention: past_key and past_value must be given together")
    past = 0
    if past_key is not None:
        pk, pv = np.asarray(past_key), np.asarray(past_value)
        if (
            pk.ndim != 4
            or pk.shape[:2] != (b, hkv)
            or pk.shape[3] != d
            or pv.shape[:3] != pk.shape[:3]
            or pv.shape[3] != v.shape[3]
        ):
            raise KernelError(
                f"Attention: past_key {pk.shape} / past_value {pv.shape} do not fit K {k.shape} and V {v.shape}"
            )
        past = pk.shape[2]
        k = np.concatenate([pk.astype(k.dtype, copy=False), k], axis=2)
        v = np.concatenate([pv.astype(v.dtype, copy=False), v], axis=2)
    present_key, present_value = k, v
    total = k.shape[2]

    wt = compute_dtype(dt)
    sc = 1.0 / np.sqrt(d) if scale is None else float(scale)
    root = np.sqrt(np.asarray(sc, np.float64)) if sc >= 0 else None
    group = hq // hkv
    # GQA without copying K/V: query head h uses kv head h // group; [B, Hkv, group, Sq, D] @ [B, Hkv, 1, D, T]
    qw = q.astype(wt).reshape(b, hkv, group, sq, d)
    kw = np.swapaxes(k.astype(wt), -1, -2)[:, :, None]
    if root is not None:  # scale Q and K by sqrt(scale) before the matmul (overflow-safe for fp16)
        logits = (qw * wt.type(root)) @ (kw * wt.type(root))
    else:
        logits = (qw @ kw) * wt.type(sc)
    logits = logits.reshape(b, hq, sq, total)
    qk0 = logits
    if softcap and softcap > 0:
        c = wt.type(softcap)
        logits = c * np.tanh(logits / c)
    qk1 = logits

    # the allowed-set (bool) part of the bias: causal, padding, windows, boolean mask
    allowed = None

    def _and(a, m):
        return m if a is None else a & m

    jj = np.arange(total)[None, None, None, :]
    ii = np.arange(sq)[None, None, :, None]
    if nonpad_kv_seqlen is not None:
        npk = np.asarray(nonpad_kv_seqlen).astype(np.int64).reshape(-1)
        if npk.shape != (b,):
            raise KernelError(f"Attention: nonpad_kv_seqlen must have shape ({b},), got {npk.shape}")
        if past:
            raise KernelError("Attention: nonpad_kv_seqlen cannot be used with past_key/past_value")
        allowed = _and(allowed, jj < npk[:, None, None, None])
        offset = (npk - sq)[:, None, None, None]
    else:
        offset = past
    pos = ii + offset  # absolute position of each query
    if is_causal:
        allowed = _and(allowed, jj <= pos)
    if left_window_size is not None and left_window_size >= 0:
        allowed = _and(allowed, jj >= pos - int(left_window_size))
    if right_window_size is not None and right_window_size >= 0:
        allowed = _and(allowed, jj <= pos + int(right_window_size))
    float_mask = None
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        if m.ndim == 0 or m.ndim > 4:
            raise KernelError(f"Attention: attn_mask must have rank 1..4, got shape {m.shape}")
        if m.shape[-1] < total:  # a shorter last axis is padded with -inf (False)
            pad = [(0, 0)] * (m.ndim - 1) + [(0, total - m.shape[-1])]
            m = np.pad(m, pad, constant_values=False if m.dtype == np.bool_ else -np.inf)
        elif m.shape[-1] > total:
            raise KernelError(f"Attention: attn_mask last axis {m.shape[-1]} exceeds the total sequence {total}")
        try:
            np.broadcast_shapes(m.shape, (b, hq, sq, total))
        except ValueError:
            raise KernelError(
                f"Attention: attn_mask shape {m.shape} does not broadcast to {(b, hq, sq, total)}"
            ) from None
        if m.dtype == np.bool_:
            allowed = _and(allowed, m)
        else:
            float_mask = m.astype(wt)
    bias = None
    if allowed is not None:
        bias = np.where(allowed, wt.type(0), wt.type(-np.inf))
    if float_mask is not None:
        bias = float_mask if bias is None else bias + float_mask
    if bias is not None:
        logits = logits + bias
    qk2 = logits

    # softmax with a fully-masked-row guard (a row of -inf gives zeros, not NaN)
    sm = logits
    if softmax_precision is not None:
        sm = sm.astype(np.dtype(softmax_precision)).astype(
            np.float64 if np.dtype(softmax_precision) == np.float64 else wt
        )
    mx = sm.max(axis=-1, keepdims=True)
    dead = ~np.isfinite(mx) & (mx < 0)
    if dead.any():
        probs = np.where(dead, sm.dtype.type(0), softmax(np.where(dead, sm.dtype.type(0), sm), axis=-1))
    else:
        probs = softmax(sm, axis=-1)
    if softmax_precision is not None:
        probs = probs.astype(np.dtype(softmax_precision))
    probs = probs.astype(wt)
    y = (probs.reshape(b, hkv, group, sq, total) @ v.astype(wt)[:, :, None]).reshape(b, hq, sq, -1)

    mode = int(qk_matmul_output_mode)
    if mode not in (0, 1, 2, 3):
        raise KernelError(f"Attention: qk_matmul_output_mode must be 0..3, got {mode}")
    qk_out = (qk0, qk1, np.broadcast_to(qk2, (b, hq, sq, total)), probs)[mode]
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
    return (
        y.astype(dt),
        present_key.astype(dt, copy=False),
        present_value.astype(dt, copy=False),
        np.ascontiguousarray(qk_out).astype(dt),
    )


@op("onnx:RotaryEmbedding-23")
def rotary_embedding(
    X, cos_cache, sin_cache, position_ids=None, /, *, interleaved=0, num_heads=0, rotary_embedding_dim=0
):
    """Rotate pairs (x1, x2) of the first rotary_embedding_dim channels of each head:
    (x1 cos - x2 sin, x1 sin + x2 cos); pairs are the two halves (default) or even/odd channels
    (interleaved=1); other channels pass through.

    X [B, H, S, D] or [B, S, H*D] (3-D needs num_heads); cos/sin [max_pos, R/2] indexed by
    position_ids [B, S], or [B, S, R/2] without position_ids (R = rotary_embedding_dim or D).
    Output: shape and dtype of X.
    """
    x = np.asarray(X)
    dt = x.dtype
    if x.ndim == 4:
        xb = x.transpose(0, 2, 1, 3)  # [B, S, H, D]
    elif x.ndim == 3:
        if not num_heads or x.shape[2] % num_heads:
            raise KernelError(
                f"RotaryEmbedding: a 3-D input of hidden size {x.shape[2]} needs num_heads "
                f"dividing it (got {num_heads})"
            )
        xb = x.reshape(x.shape[0], x.shape[1], num_heads, x.shape[2] // num_heads)
    else:
        raise KernelError(f"RotaryEmbedding input must be 3-D or 4-D, got shape {x.shape}")
    bsz, seq, _, d = xb.shape
    r = int(rotary_embedding_dim) or d
    if r > d or r % 2:
        raise KernelError(f"RotaryEmbedding: rotary_embedding_dim {r} must be even and <= head size {d}")
    cos, sin = np.asarray(cos_cache), np.asarray(sin_cache)
    if position_ids is not None:
        pid = np.asarray(position_ids)
        if pid.dtype.kind not in "iu" or pid.shape != (bsz, seq):
            raise KernelError(f"RotaryEmbedding: position_ids must be int [{bsz}, {seq}], got {pid.shape} {pid.dtype}")
        if cos.ndim != 2 or sin.shape != cos.shape:
            raise KernelError(
                f"RotaryEmbedding: with position_ids the caches must be 2-D, got {cos.shape} and {sin.shape}"
            )
        if pid.size and (pid.min() < 0 or pid.max() >= cos.shape[0]):
            raise KernelError(f"RotaryEmbedding: position id out of range [0, {cos.shape[0]})")
        cos, sin = cos[pid], sin[pid]
    elif cos.shape != (bsz, seq, cos.shape[-1] if cos.ndim else 0) or sin.shape != cos.shape:
        raise KernelError(
            f"RotaryEmbedding: without position_ids the caches must be [{bsz}, {seq}, {r // 2}], "
            f"got {cos.shape} and {sin.shape}"
        )
    if cos.shape[-1] != r // 2:
        raise KernelError(f"RotaryEmbedding: cache last dim {cos.shape[-1]} != rotary_embedding_dim/2 = {r // 2}")
    wt = compute_dtype(dt)
    c = cos.astype(wt)[:, :, None, :]
    s = sin.astype(wt)[:, :, None, :]
    rot = xb[..., :r].astype(wt)
    if interleaved:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    else:
        x1, x2 = rot[..., : r // 2], rot[..., r // 2 :]
    re_ = c * x1 - s * x2
    im_ = s * x1 + c * x2
    if interleaved:
        rotated = np.stack([re_, im_], axis=-1).reshape(rot.shape)
    else:
        rotated = np.concatenate([re_, im_], axis=-1)
    out = np.concatenate([rotated.astype(dt), xb[..., r:]], axis=-1)
    if x.ndim == 4:
        return np.ascontiguousarray(out.transpose(0, 2, 1, 3))
    return out.reshape(x.shape)


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


# --------------------------------------------------------------------------- the optimizer's attention step

#: a step of at least this many FLOPs runs its heads in two parts when the caller has two threads: a hand-off
#: costs tens of microseconds, and a head's result does not depend on which thread computes it
_PARALLEL_FLOPS = 1 << 23


def prepare_attention_heads(constants: tuple, attrs: dict) -> Callable:
    """The step for float32 operands with the compiled kernels on: S = A B (one GEMM per head), P = softmax(S)
    in one compiled pass, Y = P V written straight into the output's layout; the Transposes are views (BLAS
    reads the strided operands), never copies. Measured on one thread against the unfused nodes (their
    transposed copies, batched MatMuls and the compiled softmax): 4 heads of 128 x 64 0.197 against 0.231 ms,
    6 heads of 197 x 64 0.709 against 0.800 (a loop over heads with cache-resident scratch: 0.227 / 0.779)."""
    perms = {k: tuple(int(p) for p in attrs[k] or ()) for k in ("a_perm", "b_perm", "v_perm", "out_perm")}
    axis, scale = int(attrs["axis"]), float(attrs["scale"])
    if not (np.isfinite(scale) and scale > 0.0):
        raise KernelError(f"attention_heads: scale must be a positive finite number, got {scale}")
    out_perm = perms["out_perm"]
    inv_out = tuple(int(i) for i in np.argsort(out_perm)) if out_perm else ()

    def view(x, perm):
        return x.transpose(perm) if perm and sorted(perm) == list(range(x.ndim)) else (x if not perm else None)

    def attention_heads_prepared(a, b, v):
        if not (_fast.enabled() and all(isinstance(t, np.ndarray) and t.dtype == np.float32 for t in (a, b, v))):
            return attention_heads(a, b, v, **attrs)
        A, B, V = view(a, perms["a_perm"]), view(b, perms["b_perm"]), view(v, perms["v_perm"])
        if A is None or B is None or V is None or not (A.ndim == B.ndim == V.ndim >= 2):
            return attention_heads(a, b, v, **attrs)
        batch, (S, D), (T, Dv) = A.shape[:-2], A.shape[-2:], V.shape[-2:]
        if B.shape[:-2] != batch or V.shape[:-2] != batch or B.shape[-2:] != (D, T) or axis not in (-1, A.ndim - 1):
            return attention_heads(a, b, v, **attrs)  # broadcasting, a mismatch or another axis: the kernels decide
        if (out_perm and len(out_perm) != A.ndim) or 0 in A.shape or 0 in V.shape or T == 0:
            return attention_heads(a, b, v, **attrs)
        y_shape = batch + (S, Dv)
        if out_perm:
            R = np.empty(tuple(y_shape[p] for p in out_perm), np.float32)
            Y = R.transpose(inv_out)
        else:
            R = Y = np.empty(y_shape, np.float32)
        first = (0,) * len(batch)
        # an operand BLAS cannot read in place (no unit stride) is copied once, not per head
        A, B, V = (X if _blas_readable(X[first]) else np.ascontiguousarray(X) for X in (A, B, V))

        def part(sl):
            # every head of the part at once: numpy's batched matmul runs one GEMM per head on the strided views
            # (as the unfused MatMul does on its copies: the same bits), the softmax one compiled pass over them
            scores = np.matmul(A[sl], B[sl])
            probs = np.empty_like(scores)
            _fast_epilogue.softmax_rows_into(scores.reshape(-1, T), probs.reshape(-1, T), np.empty(T, np.int32), scale)
            np.matmul(probs, V[sl], out=Y[sl])

        n_heads = int(np.prod(batch, dtype=np.int64))
        axes = [i for i, d in enumerate(batch) if d >= 2]
        # two parts along the last such axis when a second thread may take one (a head's result is the same in
        # any grouping, so the grouping may follow the thread count; on one thread a part costs ~10 us)
        if axes and 2.0 * n_heads * S * T * (D + Dv) >= _PARALLEL_FLOPS and threads() > 1:
            ax, d = axes[-1], batch[axes[-1]]
            cut = -(-d // 2)
            run_parts([lambda lo=lo: part((slice(None),) * ax + (slice(lo, lo + cut),)) for lo in (0, cut)])
        else:
            part(())
        return R

    return attention_heads_prepared


def _blas_readable(m: np.ndarray) -> bool:
    """A 2-D float32 view BLAS reads without a copy: one unit stride, the other covering a row (or a column)."""
    (r, c), (sr, sc) = m.shape, m.strides
    return (sc == 4 and sr >= 4 * c and sr % 4 == 0) or (sr == 4 and sc >= 4 * r and sc % 4 == 0)


@op(kernels=(transpose, mat_mul, softmax_rows), prepare=prepare_attention_heads)
def attention_heads(a, b, v, /, *, a_perm=(), b_perm=(), v_perm=(), out_perm=(), axis=-1, scale=1.0):
    """Y = Transpose(MatMul(softmax_rows(MatMul(A', B'), axis, scale), V'), out_perm), X' = Transpose(X, x_perm)
    (an empty perm: X itself): the optimizer's step for scaled dot-product attention as exporters write it
    (Q K^T, the scaled Softmax, times V, the heads merged by a Transpose), the kernels themselves in this form.
    Dtype of the operands."""
    a, b, v = (x if not p else transpose(x, perm=p) for x, p in ((a, a_perm), (b, b_perm), (v, v_perm)))
    y = mat_mul(softmax_rows(mat_mul(a, b), axis=axis, scale=scale), v)
    return transpose(y, perm=out_perm) if out_perm else y


# the view steps: what Transpose, Gather (one index) and Split compute, as views of their input instead of copies,
# for values that only reshapes, other views and attention_heads read (stdops/optimize/views.py): kernels never
# write their inputs, so a view is safe there, and attention_heads hands the strided operands to BLAS as they are


@op(kernels=(transpose,))
def transpose_view(data, /, *, perm=None):
    """Transpose(data, perm) as a view of ``data`` (the axes reversed without perm). Dtype of ``data``."""
    x = np.asarray(data)
    if perm is None:
        return x.transpose()
    p = [int(i) for i in perm]
    if sorted(p) != list(range(x.ndim)):
        return transpose(x, perm=perm)  # its error
    return x.transpose(p)


@op(kernels=(gather,))
def gather_view(data, indices, /, *, axis=0):
    """Gather(data, indices, axis) for one (0-d) integer index as a view of ``data``; the kernel otherwise."""
    x, idx = np.asarray(data), np.asarray(indices)
    if x.ndim < 1 or idx.ndim != 0 or idx.dtype.kind not in "iu" or not -x.ndim <= int(axis) < x.ndim:
        return gather(data, indices, axis=axis)
    ax = norm_axis(axis, x.ndim)
    d, i = x.shape[ax], int(idx)
    if not -d <= i < d:
        return gather(data, indices, axis=axis)  # its error
    return x[(slice(None),) * ax + (i + d if i < 0 else i,)]


@op(kernels=(split_parts,))
def split_view(input, split=None, /, *, axis=0, num_outputs=None, n_outputs=None):
    """Split's outputs as views of ``input``: the part sizes (and every check) from the Split kernel itself,
    run on the positions 0 .. d - 1 of the split axis. A tuple of arrays of the input's dtype."""
    x = np.asarray(input)
    if x.ndim == 0:
        return split_parts(input, split, axis=axis, num_outputs=num_outputs, n_outputs=n_outputs)
    a = norm_axis(axis, x.ndim)
    positions = np.arange(x.shape[a]).reshape((1,) * a + (x.shape[a],) + (1,) * (x.ndim - a - 1))
    parts = split_parts(positions, split, axis=axis, num_outputs=num_outputs, n_outputs=n_outputs)
    out, lo = [], 0
    for part in parts:
        size = part.shape[a]
        out.append(x[(slice(None),) * a + (slice(lo, lo + size),)])
        lo += size
    return tuple(out)
