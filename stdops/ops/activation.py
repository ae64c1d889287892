"""Activation kernels: Relu family, sigmoids, softplus, GELU/Mish/Swish/SwiGLU, Softmax family.

Formulas are evaluated in the input's float type (float16, bfloat16 and float8 in float32, then
cast back) and written so that no intermediate overflows for large |x| (Sigmoid, Softplus,
Softmax, LogSoftmax, Mish).
"""

from __future__ import annotations

import numpy as np

from .._lazy import LazyModule
from ..errors import KernelError
from ._registry import op
from .axes import norm_axis
from .dtypes import as_array, compute_dtype, float_input, is_int, numeric_input, result
from .elementwise import erf_float32

_special = LazyModule("scipy.special")


def _prep(x, opname: str) -> tuple[np.ndarray, np.dtype]:
    """(x in its compute dtype, output dtype) for a float-only activation."""
    x = float_input(x, opname)
    cd = compute_dtype(x.dtype)
    return (x if x.dtype == cd else x.astype(cd)), x.dtype


# --------------------------------------------------------------------------- ReLU family


def _pos_plus_neg(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """max(x, 0) + slope * min(x, 0), i.e. x if x >= 0 else slope * x (without a masked select)."""
    y = np.minimum(x, 0) * slope
    y += np.maximum(x, 0)
    return y


@op("onnx:Relu-6")
def relu(x, /):
    """Y = max(0, X). Shape and dtype of X (float and signed integer types)."""
    x = numeric_input(x, "Relu")
    return result(np.maximum(x, x.dtype.type(0)), x.dtype)


@op("onnx:LeakyRelu-6")
def leaky_relu(x, /, *, alpha=0.01):
    """Y = X if X >= 0 else alpha * X. Shape and dtype of X (float types)."""
    xc, dt = _prep(x, "LeakyRelu")
    a = xc.dtype.type(alpha)
    # branch-free (np.where with a data-dependent mask is several times slower)
    if 0 <= alpha <= 1:
        y = np.maximum(xc, xc * a)
    elif alpha > 1:
        y = np.minimum(xc, xc * a)
    else:
        y = np.minimum(xc, 0) * a
        y += np.maximum(xc, 0)
    return result(y, dt)


@op("onnx:PRelu-7")
def prelu(x, slope, /):
    """Y = X if X >= 0 else slope * X; slope broadcasts unidirectionally to X's shape.

    Shape and dtype of X (float and 32/64-bit integer types).
    """
    x, slope = as_array(x), as_array(slope)
    try:
        if np.broadcast_shapes(x.shape, slope.shape) != x.shape:
            raise ValueError
    except ValueError:
        raise KernelError(f"PRelu: slope of shape {slope.shape} does not broadcast to X's shape {x.shape}") from None
    if is_int(x.dtype):
        with np.errstate(all="ignore"):
            return result(_pos_plus_neg(x, slope.astype(x.dtype, copy=False)), x.dtype)
    xc, dt = _prep(x, "PRelu")
    s = slope.astype(xc.dtype, copy=False)
    return result(_pos_plus_neg(xc, s), dt)


@op("onnx:Elu-6")
def elu(x, /, *, alpha=1.0):
    """Y = X if X >= 0 else alpha * (exp(X) - 1). Shape and dtype of X (float types)."""
    xc, dt = _prep(x, "Elu")
    y = np.expm1(np.minimum(xc, 0))
    y *= xc.dtype.type(alpha)
    y += np.maximum(xc, 0)  # alpha * (exp(min(x, 0)) - 1) is 0 for x >= 0
    return result(y, dt)


@op("onnx:Selu-6")
def selu(x, /, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    """Y = gamma * X if X > 0 else gamma * alpha * (exp(X) - 1). Shape and dtype of X (float types)."""
    xc, dt = _prep(x, "Selu")
    t = xc.dtype.type
    y = np.expm1(np.minimum(xc, 0))
    y *= t(alpha)
    y += np.maximum(xc, 0)
    y *= t(gamma)
    return result(y, dt)


@op("onnx:Celu-12")
def celu(x, /, *, alpha=1.0):
    """Y = max(0, X) + min(0, alpha * (exp(X / alpha) - 1)). Shape and dtype of X (float types)."""
    if alpha == 0:
        raise KernelError("Celu: alpha must not be 0")
    xc, dt = _prep(x, "Celu")
    t = xc.dtype.type
    y = result(np.minimum(xc, 0))  # an array (0-d included) for the in-place steps
    y /= t(alpha)
    np.expm1(y, out=y)
    y *= t(alpha)
    np.minimum(y, 0, out=y)
    y += np.maximum(xc, 0)
    return result(y, dt)


@op("onnx:ThresholdedRelu-10")
def thresholded_relu(x, /, *, alpha=1.0):
    """Y = X if X > alpha else 0. Shape and dtype of X (float types)."""
    xc, dt = _prep(x, "ThresholdedRelu")
    return result(np.where(xc > xc.dtype.type(alpha), xc, xc.dtype.type(0)), dt)


@op("onnx:Shrink-9")
def shrink(input, /, *, bias=0.0, lambd=0.5):  # noqa: A002 - the ONNX input name
    """Y = X + bias if X < -lambd, X - bias if X > lambd, else 0.

    Shape and dtype of X (numeric types; integers are computed in float64 and cast back).
    """
    x = as_array(input)
    if is_int(x.dtype):
        xc, dt = x.astype(np.float64), x.dtype
    else:
        xc, dt = _prep(x, "Shrink")
    t = xc.dtype.type
    y = np.where(xc < t(-lambd), xc + t(bias), np.where(xc > t(lambd), xc - t(bias), t(0)))
    return result(y, dt)


# --------------------------------------------------------------------------- sigmoids


def sigmoid_into(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """1 / (1 + exp(-x)) in x's float dtype, into ``out`` when given: scipy's logistic ufunc, which
    never overflows (it takes exp of -|x| only). The one sigmoid of stdops: the Sigmoid, Swish and
    SwiGLU kernels, the recurrent cells and the ncnn layers all compute it here."""
    return _special.expit(x, out=out)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return result(sigmoid_into(x))


def _softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))."""
    y = result(np.abs(x))
    np.negative(y, out=y)
    np.exp(y, out=y)
    np.log1p(y, out=y)
    y += np.maximum(x, 0)
    return y


@op("onnx:Sigmoid-6")
def sigmoid(x, /):
    """Y = 1 / (1 + exp(-X)). Shape and dtype of X (float types)."""
    xc, dt = _prep(x, "Sigmoid")
    with np.errstate(all="ignore"):
        return result(_sigmoid(xc), dt)


@op("onnx:HardSigmoid-6")
def hard_sigmoid(x, /, *, alpha=0.2, beta=0.5):
    """Y = max(0, min(1, alpha * X + beta)). Shape and dtype of X (float types)."""
    xc, dt = _prep(x, "HardSigmoid")
    t = xc.dtype.type
    y = result(xc * t(alpha))
    y += t(beta)
    return result(np.clip(y, t(0), t(1), out=y), dt)


@op("onnx:HardSwish-14")
def hard_swish(x, /):
    """Y = X * max(0, min(1, X / 6 + 0.5)). Shape and dtype of X (float types)."""
    xc, dt = _prep(x, "HardSwish")
    t = xc.dtype.type
    y = result(xc * t(1 / 6))
    y += t(0.5)
    np.clip(y, t(0), t(1), out=y)
    y *= xc
    return result(y, dt)


@op("onnx:Softplus-1")
def softplus(x, /):
    """Y = ln(exp(X) + 1), evaluated as max(X, 0) + log1p(exp(-|X|)). Shape and dtype of X (float types)."""
    xc, dt = _prep(x, "Softplus")
    with np.errstate(all="ignore"):
        return result(_softplus(xc), dt)


@op("onnx:Softsign-1")
def softsign(input, /):  # noqa: A002 - the ONNX input name
    """Y = X / (1 + |X|). Shape and dtype of X (float types)."""
    xc, dt = _prep(input, "Softsign")
    with np.errstate(all="ignore"):
        d = result(np.abs(xc))
        d += 1
        return result(np.divide(xc, d, out=d), dt)


@op("onnx:Gelu-20")
def gelu(x, /, *, approximate="none"):
    """Y = 0.5 * X * (1 + erf(X / sqrt(2))) (approximate="none") or
    0.5 * X * (1 + tanh(sqrt(2 / pi) * (X + 0.044715 * X^3))) (approximate="tanh").

    Shape and dtype of X (float types).
    """
    if approximate not in ("none", "tanh"):
        raise KernelError(f"Gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    xc, dt = _prep(x, "Gelu")
    t = xc.dtype.type
    with np.errstate(all="ignore"):
        if approximate == "tanh":
            y = result(xc * xc)
            y *= xc
            y *= t(0.044715)
            y += xc
            y *= t(np.sqrt(2 / np.pi))
            np.tanh(y, out=y)
            y += 1
            y *= t(0.5)
            y *= xc
        else:
            y = xc * t(1 / np.sqrt(2))
            y = erf_float32(y) if y.dtype == np.float32 else _special.erf(y)
            y += 1
            y *= t(0.5)
            y *= xc
    return result(y, dt)


@op("onnx:Mish-18")
def mish(x, /):
    """Y = X * tanh(softplus(X)) = X * tanh(ln(1 + exp(X))). Shape and dtype of X (float types)."""
    xc, dt = _prep(x, "Mish")
    with np.errstate(all="ignore"):
        y = _softplus(xc)
        np.tanh(y, out=y)
        y *= xc
        return result(y, dt)


@op("onnx:Swish-24")
def swish(x, /, *, alpha=1.0):
    """Y = X * sigmoid(alpha * X). Shape and dtype of X (float types)."""
    xc, dt = _prep(x, "Swish")
    with np.errstate(all="ignore"):
        y = _sigmoid(xc if alpha == 1 else xc * xc.dtype.type(alpha))
        y *= xc
        return result(y, dt)


# --------------------------------------------------------------------------- softmax family


@op("onnx:Softmax-13")
def softmax(input, /, *, axis=-1):  # noqa: A002 - the ONNX input name
    """Y = exp(X - max) / sum(exp(X - max)) along ``axis``.

    Shape and dtype of X (float types); axis in [-r, r-1].
    """
    xc, dt = _prep(input, "Softmax")
    if xc.ndim == 0:
        raise KernelError("Softmax: input must have rank >= 1")
    a = norm_axis(axis, xc.ndim, "Softmax: axis")
    if xc.size == 0:  # nothing to normalize (np.max has no identity on an empty axis)
        return result(np.empty_like(xc), dt)
    with np.errstate(all="ignore"):
        e = xc - np.max(xc, axis=a, keepdims=True)
        np.exp(e, out=e)
        e /= np.sum(e, axis=a, keepdims=True)
    return result(e, dt)


@op("onnx:LogSoftmax-13")
def log_softmax(input, /, *, axis=-1):  # noqa: A002 - the ONNX input name
    """Y = (X - max) - log(sum(exp(X - max))) along ``axis``.

    Shape and dtype of X (float types); axis in [-r, r-1].
    """
    xc, dt = _prep(input, "LogSoftmax")
    if xc.ndim == 0:
        raise KernelError("LogSoftmax: input must have rank >= 1")
    a = norm_axis(axis, xc.ndim, "LogSoftmax: axis")
    if xc.size == 0:
        return result(np.empty_like(xc), dt)
    with np.errstate(all="ignore"):
        s = xc - np.max(xc, axis=a, keepdims=True)
        s -= np.log(np.sum(np.exp(s), axis=a, keepdims=True))
    return result(s, dt)


@op("onnx:Hardmax-13")
def hardmax(input, /, *, axis=-1):  # noqa: A002 - the ONNX input name
    """Y = 1 at the first maximum of X along ``axis``, 0 elsewhere.

    Shape and dtype of X (float types); axis in [-r, r-1].
    """
    x = float_input(input, "Hardmax")
    if x.ndim == 0:
        raise KernelError("Hardmax: input must have rank >= 1")
    a = norm_axis(axis, x.ndim, "Hardmax: axis")
    y = np.zeros(x.shape, x.dtype)
    if x.size:
        idx = np.argmax(x, axis=a, keepdims=True)
        np.put_along_axis(y, idx, x.dtype.type(1), axis=a)
    return y


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
