"""Normalization kernels: BatchNormalization, InstanceNormalization, LRN, LpNormalization,
MeanVarianceNormalization, LayerNormalization, GroupNormalization, RMSNormalization.

Statistics are computed in float32 (float64 for float64 inputs), or in the precision a
``stash_type`` attribute names; every kernel returns the input's dtype (or the dtype the spec
names for an output).
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import op
from .axes import norm_axis
from .dtypes import compute_dtype, is_float
from .lowp import types

#: TensorProto data type enum -> numpy dtype, for the stash_type attribute (16, bfloat16, in _stash_dtype)
_STASH: dict[int, np.dtype] = {1: np.dtype(np.float32), 10: np.dtype(np.float16), 11: np.dtype(np.float64)}


def _check_float(x: np.ndarray, what: str, opname: str) -> np.ndarray:
    x = np.asarray(x)
    if not is_float(x.dtype):
        raise KernelError(f"{opname}: {what} must be a floating-point tensor, got {x.dtype}")
    return x


def _stash_dtype(stash_type: int, opname: str) -> tuple[np.dtype, np.dtype]:
    """(dtype of the stashed statistics, dtype the arithmetic runs in) for a stash_type enum."""
    try:
        st = types().bfloat16 if int(stash_type) == 16 else _STASH[int(stash_type)]
    except (KeyError, TypeError, ValueError):
        raise KernelError(
            f"{opname}: unsupported stash_type {stash_type!r} (1 float, 10 float16, 11 double, 16 bfloat16)"
        ) from None
    # float16/bfloat16 stashes: compute in float32 and round the results to the stash type
    return st, (np.dtype(np.float64) if st == np.float64 else np.dtype(np.float32))


def _channel_param(p: np.ndarray, c: int, ndim: int, name: str, opname: str) -> np.ndarray:
    """A per-channel vector (C,) reshaped to (1, C, 1, ..., 1) for an input of rank ndim."""
    p = np.asarray(p)
    if p.size != c or (p.ndim != 1 and p.shape != (c,) + (1,) * (p.ndim - 1)):
        raise KernelError(f"{opname}: {name} must have shape ({c},), got {p.shape}")
    return p.reshape((1, c) + (1,) * (ndim - 2))


def _unidirectional(p: np.ndarray, shape: tuple, name: str, opname: str) -> np.ndarray:
    p = np.asarray(p)
    try:
        ok = np.broadcast_shapes(p.shape, shape) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise KernelError(f"{opname}: {name} of shape {p.shape} does not broadcast to the input shape {tuple(shape)}")
    return p


# --------------------------------------------------------------------------- BatchNormalization


@op("onnx:BatchNormalization-14")
def batch_normalization(X, scale, B, input_mean, input_var, /, *, epsilon=1e-5, momentum=0.9, training_mode=0):
    """Y = (X - mean) / sqrt(var + epsilon) * scale + B, per channel (axis 1).

    Inference (``training_mode=0``): mean/var are ``input_mean``/``input_var``; returns Y.
    Training: mean/var are the batch statistics over every axis but 1 (population variance) and
    the result is ``(Y, running_mean, running_var)`` with
    ``running = input * momentum + current * (1 - momentum)``.
    X is (N, C, D1, ..., Dn) float; Y has X's shape and dtype; running stats input_mean's dtype.
    """
    name = "BatchNormalization"
    X = _check_float(X, "X", name)
    if X.ndim < 2:
        raise KernelError(f"{name}: X must have rank >= 2 (N, C, ...), got shape {X.shape}")
    c, nd = X.shape[1], X.ndim
    wt = compute_dtype(X.dtype)
    s = _channel_param(scale, c, nd, "scale", name).astype(wt, copy=False)
    b = _channel_param(B, c, nd, "B", name).astype(wt, copy=False)
    m_in = _channel_param(input_mean, c, nd, "input_mean", name)
    v_in = _channel_param(input_var, c, nd, "input_var", name)
    eps = wt.type(epsilon)
    if not training_mode:
        inv = s / np.sqrt(v_in.astype(wt) + eps)
        shift = b - m_in.astype(wt) * inv
        y = X.astype(wt, copy=False) * inv
        y += shift
        return y.astype(X.dtype, copy=False)
    axes = (0,) + tuple(range(2, nd))
    xw = X.astype(wt, copy=False)
    mean = xw.mean(axis=axes, keepdims=True)
    d = xw - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    y = (d * (s / np.sqrt(var + eps)) + b).astype(X.dtype, copy=False)
    mom = wt.type(momentum)
    one = wt.type(1)
    rdt = np.asarray(input_mean).dtype
    running_mean = (m_in.astype(wt) * mom + mean * (one - mom)).reshape(c).astype(rdt)
    running_var = (v_in.astype(wt) * mom + var * (one - mom)).reshape(c).astype(rdt)
    return y, running_mean, running_var


# --------------------------------------------------------------------------- InstanceNormalization


@op("onnx:InstanceNormalization-6")
def instance_normalization(input, scale, B, /, *, epsilon=1e-5):
    """y = scale * (x - mean) / sqrt(var + epsilon) + B, mean/var per instance and channel.

    input is (N, C, D1, ..., Dn); statistics over D1..Dn (population variance); scale and B (C,).
    Output: input's shape and dtype.
    """
    name = "InstanceNormalization"
    x = _check_float(input, "input", name)
    if x.ndim < 2:
        raise KernelError(f"{name}: input must have rank >= 2 (N, C, ...), got shape {x.shape}")
    c, nd = x.shape[1], x.ndim
    wt = compute_dtype(x.dtype)
    s = _channel_param(scale, c, nd, "scale", name).astype(wt, copy=False)
    b = _channel_param(B, c, nd, "B", name).astype(wt, copy=False)
    xw = x.astype(wt, copy=False)
    axes = tuple(range(2, nd))
    mean = xw.mean(axis=axes, keepdims=True) if axes else xw
    d = xw - mean
    var = np.mean(d * d, axis=axes, keepdims=True) if axes else np.zeros_like(d)
    return (d * (s / np.sqrt(var + wt.type(epsilon))) + b).astype(x.dtype, copy=False)


# --------------------------------------------------------------------------- LRN


@op("onnx:LRN-1")
def lrn(X, /, *, size, alpha=1e-4, beta=0.75, bias=1.0):
    """Y = X / (bias + alpha / size * square_sum) ** beta, square_sum over the channel window
    [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to [0, C-1].

    X is (N, C, D1, ..., Dn) float; Y has its shape and dtype.
    """
    name = "LRN"
    X = _check_float(X, "X", name)
    size = int(size)
    if size < 1:
        raise KernelError(f"{name}: size must be >= 1, got {size}")
    if X.ndim < 2:
        raise KernelError(f"{name}: X must have rank >= 2 (N, C, ...), got shape {X.shape}")
    c = X.shape[1]
    wt = compute_dtype(X.dtype)
    xw = X.astype(wt, copy=False)
    sq = xw * xw
    pre = (size - 1) // 2
    post = size - 1 - pre
    acc = sq.copy()
    # one shifted add per tap of the window (taps beyond the channel count add nothing)
    for k in range(1, min(pre, c - 1) + 1):  # channels c - k
        acc[:, k:] += sq[:, : c - k]
    for k in range(1, min(post, c - 1) + 1):  # channels c + k
        acc[:, : c - k] += sq[:, k:]
    den = wt.type(bias) + wt.type(alpha / size) * acc
    return (xw / den ** wt.type(beta)).astype(X.dtype, copy=False)


# --------------------------------------------------------------------------- LpNormalization


@op("onnx:LpNormalization-1")
def lp_normalization(input, /, *, axis=-1, p=2):
    """output = input / Lp_norm(input, axis) (0 where the norm is 0); p is 1 or 2.

    Shape and dtype of ``input`` (float types).
    """
    name = "LpNormalization"
    x = _check_float(input, "input", name)
    if int(p) not in (1, 2):
        raise KernelError(f"{name}: p must be 1 or 2, got {p}")
    if x.ndim == 0:
        raise KernelError(f"{name}: input must have rank >= 1")
    ax = norm_axis(axis, x.ndim, f"{name}: axis")
    wt = compute_dtype(x.dtype)
    xw = x.astype(wt, copy=False)
    if int(p) == 1:
        norm = np.sum(np.abs(xw), axis=ax, keepdims=True)
    else:
        norm = np.sqrt(np.sum(xw * xw, axis=ax, keepdims=True))
    out = np.zeros_like(xw)
    np.divide(xw, norm, out=out, where=np.broadcast_to(norm != 0, xw.shape))
    return out.astype(x.dtype, copy=False)


# --------------------------------------------------------------------------- MeanVarianceNormalization


@op("onnx:MeanVarianceNormalization-9")
def mean_variance_normalization(X, /, *, axes=(0, 2, 3)):
    """Y = (X - E[X]) / (sqrt(E[(X - E[X])^2]) + 1e-9), expectations over ``axes``.

    Shape and dtype of X (float types).
    """
    name = "MeanVarianceNormalization"
    X = _check_float(X, "X", name)
    ax = tuple(sorted({norm_axis(a, X.ndim, f"{name}: axis") for a in axes})) if X.ndim else ()
    if X.ndim and len(ax) != len(tuple(axes)):
        raise KernelError(f"{name}: repeated axis in {tuple(axes)}")
    wt = compute_dtype(X.dtype)
    xw = X.astype(wt, copy=False)
    mean = xw.mean(axis=ax, keepdims=True)
    d = xw - mean
    std = np.sqrt(np.mean(d * d, axis=ax, keepdims=True))
    return (d / (std + wt.type(1e-9))).astype(X.dtype, copy=False)


# --------------------------------------------------------------------------- LayerNormalization


@op("onnx:LayerNormalization-17")
def layer_normalization(X, Scale, B=None, /, *, axis=-1, epsilon=1e-5, stash_type=1):
    """Y = (X - Mean) * InvStdDev * Scale + B, statistics over axes [axis, ..., rank-1],
    InvStdDev = 1 / sqrt(Var + epsilon).

    Returns (Y, Mean, InvStdDev): Y has X's shape and dtype; Mean and InvStdDev have shape
    [d0, ..., d(axis-1), 1, ..., 1] and the stash_type's dtype (1 float32, 11 float64, ...).
    Scale and B broadcast unidirectionally to X.
    """
    name = "LayerNormalization"
    X = _check_float(X, "X", name)
    if X.ndim == 0:
        raise KernelError(f"{name}: X must have rank >= 1")
    ax = norm_axis(axis, X.ndim, f"{name}: axis")
    st, wt = _stash_dtype(stash_type, name)
    scale = _unidirectional(Scale, X.shape, "Scale", name)
    bias = None if B is None else _unidirectional(B, X.shape, "B", name)
    axes = tuple(range(ax, X.ndim))
    xw = X.astype(wt, copy=False)
    mean = xw.mean(axis=axes, keepdims=True)
    d = xw - mean
    var = np.mean(d * d, axis=axes, keepdims=True)
    inv = wt.type(1) / np.sqrt(var + wt.type(epsilon))
    if st != wt:  # a float16/bfloat16 stash: the statistics are rounded to it
        mean, inv = mean.astype(st), inv.astype(st)
        normalized = ((xw - mean.astype(wt)) * inv.astype(wt)).astype(X.dtype)
    else:
        normalized = (d * inv).astype(X.dtype, copy=False)
    y = normalized * scale.astype(X.dtype, copy=False)
    if bias is not None:
        y = y + bias.astype(X.dtype, copy=False)
    return y.astype(X.dtype, copy=False), mean, inv


# --------------------------------------------------------------------------- GroupNormalization


@op("onnx:GroupNormalization-21")
def group_normalization(X, scale, bias, /, *, num_groups, epsilon=1e-5, stash_type=1):
    """Y = scale * (X - mean) / sqrt(var + epsilon) + bias, mean/var per instance and group of
    C / num_groups consecutive channels; scale and bias are per channel (C,).

    X is (N, C, D1, ..., Dn); Y has its shape and dtype. The statistics run in the stash_type's
    precision.
    """
    name = "GroupNormalization"
    X = _check_float(X, "X", name)
    if X.ndim < 2:
        raise KernelError(f"{name}: X must have rank >= 2 (N, C, ...), got shape {X.shape}")
    n, c, nd = X.shape[0], X.shape[1], X.ndim
    g = int(num_groups)
    if g < 1 or c % g:
        raise KernelError(f"{name}: num_groups {g} must be a positive divisor of the channel count {c}")
    s = _channel_param(scale, c, nd, "scale", name)
    b = _channel_param(bias, c, nd, "bias", name)
    st, wt = _stash_dtype(stash_type, name)
    xg = X.astype(wt, copy=False).reshape(n, g, -1)
    mean = xg.mean(axis=2, keepdims=True)
    d = xg - mean
    var = np.mean(d * d, axis=2, keepdims=True)
    inv = wt.type(1) / np.sqrt(var + wt.type(epsilon))
    if st != wt:
        normalized = (d * inv).astype(st).astype(X.dtype)
    else:
        normalized = (d * inv).astype(X.dtype, copy=False)
    normalized = normalized.reshape(X.shape)
    y = normalized * s.astype(X.dtype, copy=False) + b.astype(X.dtype, copy=False)
    return y.astype(X.dtype, copy=False)


# --------------------------------------------------------------------------- RMSNormalization


@op("onnx:RMSNormalization-23")
def rms_normalization(X, scale, /, *, axis=-1, epsilon=1e-5, stash_type=1):
    """Y = X / sqrt(mean(X^2 over axes [axis, ..., rank-1]) + epsilon) * scale.

    Y has X's shape and scale's dtype; scale broadcasts unidirectionally to X. The mean square
    runs in the stash_type's precision.
    """
    name = "RMSNormalization"
    X = _check_float(X, "X", name)
    if X.ndim == 0:
        raise KernelError(f"{name}: X must have rank >= 1")
    scale = _check_float(scale, "scale", name)
    scale = _unidirectional(scale, X.shape, "scale", name)
    ax = norm_axis(axis, X.ndim, f"{name}: axis")
    st, wt = _stash_dtype(stash_type, name)
    axes = tuple(range(ax, X.ndim))
    xw = X.astype(wt, copy=False)
    ms = np.mean(xw * xw, axis=axes, keepdims=True)
    inv = wt.type(1) / np.sqrt(ms + wt.type(epsilon))
    if st != wt:
        inv = inv.astype(st).astype(wt)
    normalized = (xw * inv).astype(X.dtype, copy=False)
    return (normalized * scale.astype(X.dtype, copy=False)).astype(scale.dtype, copy=False)
