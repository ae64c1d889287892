"""ncnn's fused activations (``activation_type`` 0..6 with ``activation_params``), shared by every layer
that has them (Convolution*, Deconvolution*, InnerProduct, Gemm-like layers): one helper, on the kernels."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..ops.activation import hard_sigmoid, leaky_relu, mish, relu, sigmoid
from ..ops.elementwise import clip, mul

#: the kernels a fused activation runs on (a layer with activation_type declares them)
FUSED = (relu, leaky_relu, clip, sigmoid, mish, hard_sigmoid, mul)


def fused_activation(activation_type: int, params: Sequence[float]) -> Callable[[np.ndarray], np.ndarray] | None:
    """0 none, 1 ReLU, 2 LeakyReLU(slope), 3 Clip(min, max), 4 Sigmoid, 5 Mish, 6 HardSwish(alpha, beta)
    (y = x * clip(x * alpha + beta, 0, 1)). Returns None for 0."""
    p = [float(v) for v in params]
    t = int(activation_type)
    if t == 0:
        return None
    if t == 1:
        return relu
    if t == 2:
        slope = p[0] if p else 0.0
        return lambda x: leaky_relu(x, alpha=slope)
    if t == 3:
        lo = np.array(p[0] if len(p) > 0 else -np.inf, np.float32)
        hi = np.array(p[1] if len(p) > 1 else np.inf, np.float32)
        return lambda x: clip(x, lo, hi)
    if t == 4:
        return sigmoid
    if t == 5:
        return mish
    if t == 6:
        alpha = float(np.float32(p[0] if len(p) > 0 else 0.2))
        beta = float(np.float32(p[1] if len(p) > 1 else 0.5))
        return lambda x: mul(x, hard_sigmoid(x, alpha=alpha, beta=beta))
    raise ValueError(f"activation_type {t} is not one of 0..6")


def fused_step_activation(activation_type: int, params: Sequence[float]) -> tuple[str, tuple[float, ...]] | None:
    """The activation as a fused step takes it (stdops/ops/fused.py: the same kernels, in the convolution's
    last pass), or None (none, or Mish: applied after the step)."""
    p = [float(v) for v in params]
    t = int(activation_type)
    if t == 1:
        return "relu", ()
    if t == 2:
        return "leaky_relu", (p[0] if p else 0.0,)
    if t == 3:
        f32 = np.float32
        return "clip", (float(f32(p[0] if len(p) > 0 else -np.inf)), float(f32(p[1] if len(p) > 1 else np.inf)))
    if t == 4:
        return "sigmoid", ()
    if t == 6:
        return "hard_swish", (
            float(np.float32(p[0] if len(p) > 0 else 0.2)),
            float(np.float32(p[1] if len(p) > 1 else 0.5)),
        )
    return None


def with_activation(fn: Callable, activation_type: int, params: Sequence[float]) -> Callable:
    """``fn`` followed by the fused activation (``fn`` itself when there is none)."""
    act = fused_activation(activation_type, params)
    if act is None:
        return fn
    return lambda *xs: act(fn(*xs))
