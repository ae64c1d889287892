"""ai.onnx.preview kernels: FlexAttention (scaled dot-product attention with score / probability
modifier subgraphs)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import KernelError
from ._registry import op
from .activation import softmax
from .dtypes import is_float


def _apply_mod(mod: Callable | None, t: np.ndarray, what: str) -> np.ndarray:
    if mod is None:
        return t
    out = np.asarray(mod(t))
    if out.shape != t.shape:
        raise KernelError(f"FlexAttention: {what} must keep the shape {t.shape}, returned {out.shape}")
    return out.astype(t.dtype, copy=False)


@op("onnx-preview:FlexAttention-1")
def flex_attention(Q, K, V, /, *, prob_mod=None, scale=None, score_mod=None, softmax_precision=None):
    """Y = prob_mod(softmax(score_mod(Q K^T * scale), axis=-1)) V, per head.

    Q (B, Hq, L, D), K (B, Hkv, S, D), V (B, Hkv, S, Dv) of one float dtype; Hq a multiple of
    Hkv, query head h uses K/V head h // (Hq / Hkv). scale defaults to 1/sqrt(D). score_mod and
    prob_mod are callables (B, Hq, L, S) -> same shape (an ONNX node's subgraphs, compiled);
    scores and probabilities are in softmax_precision (a numpy dtype; default float64 for double
    inputs, else float32). Y (B, Hq, L, Dv) has Q's dtype.
    """
    q, k, v = np.asarray(Q), np.asarray(K), np.asarray(V)
    dt = q.dtype
    if not is_float(dt) or k.dtype != dt or v.dtype != dt:
        raise KernelError(f"FlexAttention: Q, K, V must share one float dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise KernelError(f"FlexAttention: Q, K, V must be rank 4, got {q.shape}, {k.shape}, {v.shape}")
    b, hq, _, d = q.shape
    hkv, s = k.shape[1], k.shape[2]
    if k.shape[0] != b or v.shape[0] != b or v.shape[1] != hkv or v.shape[2] != s or k.shape[3] != d:
        raise KernelError(f"FlexAttention: Q {q.shape}, K {k.shape} and V {v.shape} do not fit together")
    if hkv == 0 or hq % hkv:
        raise KernelError(f"FlexAttention: q heads {hq} must be a multiple of kv heads {hkv}")
    wt = np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)
    sp = np.dtype(softmax_precision) if softmax_precision is not None else wt
    if not is_float(sp):
        raise KernelError(f"FlexAttention: softmax_precision must be a float type, got {sp}")
    group = hq // hkv
    if group > 1:
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    sc = 1.0 / np.sqrt(d) if scale is None else float(scale)
    scores = (q.astype(wt) @ np.swapaxes(k.astype(wt), -1, -2)) * wt.type(sc)
    scores = _apply_mod(score_mod, scores.astype(sp, copy=False), "score_mod")
    sw = np.dtype(np.float64) if sp == np.float64 else np.dtype(np.float32)
    probs = softmax(scores.astype(sw, copy=False), axis=-1).astype(sp, copy=False)
    probs = _apply_mod(prob_mod, probs, "prob_mod")
    y = probs.astype(wt, copy=False) @ v.astype(wt, copy=False)
    return y.astype(dt, copy=False)
