"""Random kernels: RandomNormal/Uniform(+Like), Bernoulli, Multinomial, Dropout.

``seed`` (a float attribute): when given, each call draws from a fresh
``numpy.random.Generator(PCG64(seed))``, so a seeded node is reproducible; without a seed every call
is a fresh draw from an OS-seeded generator. ``dtype`` arguments are numpy dtypes (the ONNX adapters
convert TensorProto enums).
"""

from __future__ import annotations

import numpy as np

from .. import limits
from ..errors import KernelError
from ._registry import op
from .dtypes import compute_dtype, is_float

_FLOATS = (np.float16, np.float32, np.float64)


def _rng(seed) -> np.random.Generator:
    if seed is None:
        return np.random.Generator(np.random.PCG64())
    s = float(seed)
    if s.is_integer() and s >= 0:
        key = int(s)
    else:  # any other float: its IEEE bits, so distinct seeds give distinct streams
        key = int(np.array(s, np.float64).view(np.uint64))
    return np.random.Generator(np.random.PCG64(key))


def _float_dtype(dtype, what: str = "dtype") -> np.dtype:
    dt = np.dtype(dtype)
    if not is_float(dt):
        raise KernelError(f"{what} must be a floating type, got {dt}")
    return dt


def _shape(shape) -> tuple[int, ...]:
    dims = tuple(int(d) for d in np.asarray(shape, np.int64).reshape(-1))
    limits.check_elements(dims, "random output")
    return dims


def _normal(shape, dtype, mean, scale, seed):
    dt = _float_dtype(dtype)
    z = _rng(seed).standard_normal(shape, dtype=compute_dtype(dt))
    return (z * scale + mean).astype(dt, copy=False)


def _uniform(shape, dtype, low, high, seed):
    dt = _float_dtype(dtype)
    u = _rng(seed).random(shape, dtype=compute_dtype(dt))
    y = (u * (high - low) + low).astype(dt, copy=False)
    if high > low:  # rounding (float16, bfloat16, float32) must not reach the open upper bound
        top = np.asarray(high).astype(dt)
        if top.astype(np.float64) >= high:
            top = np.nextafter(top, np.asarray(-np.inf).astype(dt))
        y = np.where(y >= np.asarray(high).astype(dt), top, y).astype(dt, copy=False)
    return y


@op("onnx:RandomNormal-1")
def random_normal(*, shape, dtype=np.float32, mean=0.0, scale=1.0, seed=None):
    """output ~ Normal(mean, scale**2), elementwise.

    Shape ``shape`` (a list of ints); dtype ``dtype`` (float16/32/64, default float32).
    """
    return _normal(_shape(shape), dtype, mean, scale, seed)


@op("onnx:RandomUniform-1")
def random_uniform(*, shape, dtype=np.float32, low=0.0, high=1.0, seed=None):
    """output ~ Uniform[low, high), elementwise.

    Shape ``shape``; dtype ``dtype`` (float16/32/64, default float32).
    """
    return _uniform(_shape(shape), dtype, low, high, seed)


@op("onnx:RandomNormalLike-1")
def random_normal_like(input, /, *, dtype=None, mean=0.0, scale=1.0, seed=None):
    """output ~ Normal(mean, scale**2) with the shape of ``input``.

    Dtype ``dtype``, or the input's dtype when not given (which must then be a float type).
    """
    x = np.asarray(input)
    return _normal(x.shape, x.dtype if dtype is None else dtype, mean, scale, seed)


@op("onnx:RandomUniformLike-1")
def random_uniform_like(input, /, *, dtype=None, low=0.0, high=1.0, seed=None):
    """output ~ Uniform[low, high) with the shape of ``input``.

    Dtype ``dtype``, or the input's dtype when not given (which must then be a float type).
    """
    x = np.asarray(input)
    return _uniform(x.shape, x.dtype if dtype is None else dtype, low, high, seed)


@op("onnx:Bernoulli-15")
def bernoulli(input, /, *, dtype=None, seed=None):
    """output = 1 with probability input[i], else 0 (input holds probabilities in [0, 1]).

    Shape of ``input``; dtype ``dtype`` (any numeric or bool), default the input's dtype.
    """
    p = np.asarray(input)
    if not is_float(p.dtype):
        raise KernelError(f"Bernoulli input must be a float tensor of probabilities, got {p.dtype}")
    u = _rng(seed).random(p.shape)
    return (u < p).astype(p.dtype if dtype is None else np.dtype(dtype))


@op("onnx:Multinomial-7")
def multinomial(input, /, *, dtype=np.int32, sample_size=1, seed=None):
    """output[b, s] ~ Categorical(softmax(input[b, :])): class indices drawn from unnormalized log
    probabilities.

    input [batch_size, class_size] (float); output [batch_size, sample_size], dtype int32 (default)
    or int64.
    """
    x = np.asarray(input)
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise KernelError(f"Multinomial dtype must be int32 or int64, got {dt}")
    if x.ndim != 2 or not is_float(x.dtype):
        raise KernelError(
            f"Multinomial input must be a 2-D float tensor [batch, class], got shape {x.shape} dtype {x.dtype}"
        )
    n = int(sample_size)
    if n < 1:
        raise KernelError(f"sample_size must be >= 1, got {n}")
    batch, classes = x.shape
    if classes == 0:
        raise KernelError("Multinomial needs at least one class")
    limits.check_elements((batch, n), "Multinomial output")
    z = x.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    cdf = np.cumsum(p, axis=1)
    cdf /= cdf[:, -1:]
    u = _rng(seed).random((batch, n))
    # one searchsorted over all rows: shift row b's cdf and draws by 2*b (cdf values lie in [0, 1])
    offs = 2.0 * np.arange(batch)[:, None]
    flat = (cdf + offs).reshape(-1)
    idx = np.searchsorted(flat, (u + offs).reshape(-1), side="right").reshape(batch, n)
    idx -= (np.arange(batch) * classes)[:, None]
    return np.minimum(idx, classes - 1).astype(dt)


@op("onnx:Dropout-12")
def dropout(data, ratio=None, training_mode=None, /, *, seed=None):
    """Training: output = data * mask / (1 - ratio), mask ~ Bernoulli(1 - ratio); otherwise (default)
    output = data and mask = all True.

    ratio: float scalar, default 0.5, in [0, 1); training_mode: bool scalar, default False.
    output: shape and dtype of data; mask: shape of data, bool.
    """
    x = np.asarray(data)
    training = False if training_mode is None else bool(np.asarray(training_mode).reshape(-1)[0])
    r = 0.5 if ratio is None else float(np.asarray(ratio).reshape(-1)[0])
    if not 0.0 <= r <= 1.0:
        raise KernelError(f"Dropout ratio must be in [0, 1), got {r}")
    if not training or r == 0.0:
        return x, np.ones(x.shape, np.bool_)
    mask = _rng(seed).random(x.shape) >= r
    if r == 1.0:
        return np.zeros_like(x), mask
    scale = np.asarray(1.0 / (1.0 - r), dtype=x.dtype)
    return (x * mask * scale).astype(x.dtype, copy=False), mask
