"""CausalConvWithState (opset 27): a depthwise causal convolution over the last axis carrying its state, on
ops/conv.py's kernel."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import op
from .activation import swish
from .conv import ConvWeight, conv_forward
from .dtypes import compute_dtype, float_input


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
