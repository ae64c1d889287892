"""Elementwise activation layers and Softmax (ncnn-operators.txt), on the shared kernels.

Every layer here keeps the blob's shape (GLU halves one axis). Semantics follow ncnn's reference
layers; where ncnn evaluates a formula naively (Softplus, BNLL, Mish: log(1 + exp(x))) the kernels use
the overflow-free form, which agrees wherever ncnn's result is finite.
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelError
from ...ops import activation, elementwise, fused, ml
from ...ops.axes import norm_axis
from ...ops.bind import bind
from ..activation import FUSED, fused_activation, fused_step_activation
from ..spec import P, W, layer

_F32 = np.float32


def _count(n: int, what: str) -> int:
    """A weight count from the params: at least 1."""
    if n < 1:
        raise ValueError(f"{what}={n} must be >= 1")
    return n


@layer("ReLU", params=[P(0, "slope", 0.0)], kernels=(activation.relu, activation.leaky_relu))
def relu(p, w):
    """y = x if x > 0 else x * slope (slope 0: ReLU)."""
    if p.slope == 0.0:
        return bind(activation.relu)
    return bind(activation.leaky_relu, {"alpha": p.slope})


@layer("Sigmoid", kernels=(activation.sigmoid,))
def sigmoid(p, w):
    """y = 1 / (1 + exp(-x))."""
    return bind(activation.sigmoid)


@layer("TanH", kernels=(elementwise.tanh,))
def tanh(p, w):
    """y = tanh(x)."""
    return bind(elementwise.tanh)


@layer("AbsVal", kernels=(elementwise.abs_,))
def absval(p, w):
    """y = |x|."""
    return bind(elementwise.abs_)


@layer("BNLL", kernels=(activation.softplus,))
def bnll(p, w):
    """y = log(1 + exp(x)) (softplus)."""
    return bind(activation.softplus)


@layer("Softplus", kernels=(activation.softplus,))
def softplus(p, w):
    """y = log(exp(x) + 1)."""
    return bind(activation.softplus)


@layer("CELU", params=[P(0, "alpha", 1.0)], kernels=(activation.relu, activation.celu))
def celu(p, w):
    """y = x if x >= 0 else (exp(x / alpha) - 1) * alpha (alpha 0: the limit, ReLU)."""
    if p.alpha == 0.0:
        return activation.relu
    return bind(activation.celu, {"alpha": p.alpha})


@layer("ELU", params=[P(0, "alpha", 0.1)], kernels=(activation.elu,))
def elu(p, w):
    """y = x if x >= 0 else alpha * (exp(x) - 1)."""
    return bind(activation.elu, {"alpha": p.alpha})


@layer("SELU", params=[P(0, "alpha", 1.67326324), P(1, "lambda_", 1.050700987)], kernels=(activation.selu,))
def selu(p, w):
    """y = x * lambda if x >= 0 else (exp(x) - 1) * alpha * lambda."""
    return bind(activation.selu, {"alpha": p.alpha, "gamma": p.lambda_})


@layer(
    "Clip",
    params=[P(0, "min", -3.4028234663852886e38), P(1, "max", 3.4028234663852886e38)],
    kernels=(elementwise.clip,),
)
def clip(p, w):
    """y = min(max(x, min), max) (min > max gives max everywhere)."""
    fn = elementwise.clip
    lo, hi = np.asarray(p.min, _F32), np.asarray(p.max, _F32)

    def run(x):
        return fn(x, lo, hi)

    if not (np.isnan(lo) or np.isnan(hi)):  # the bounds as a fused step's clip (stdops/ncnn/fuse.py)
        run.act_form = ("clip", (float(lo), float(hi)))
    return run


@layer("Erf", kernels=(elementwise.erf,))
def erf(p, w):
    """y = erf(x)."""
    return bind(elementwise.erf)


@layer(
    "Exp",
    params=[P(0, "base", -1.0), P(1, "scale", 1.0), P(2, "shift", 0.0)],
    kernels=(elementwise.exp, elementwise.pow_, elementwise.mul, elementwise.add),
)
def exp(p, w):
    """y = exp(shift + x * scale) (base -1) or base ** (shift + x * scale)."""
    lin = _affine(p.scale, p.shift)
    if p.base == -1.0:
        fn = elementwise.exp
        return lambda x: fn(lin(x))
    pw, base = elementwise.pow_, np.asarray(p.base, _F32)
    return lambda x: pw(np.broadcast_to(base, np.shape(x)), lin(x))


@layer(
    "Log",
    params=[P(0, "base", -1.0), P(1, "scale", 1.0), P(2, "shift", 0.0)],
    kernels=(elementwise.log, elementwise.mul, elementwise.add),
)
def log(p, w):
    """y = log(shift + x * scale) (base -1), divided by log(base) otherwise."""
    lin, fn = _affine(p.scale, p.shift), elementwise.log
    if p.base == -1.0:
        return lambda x: fn(lin(x))
    mul = elementwise.mul
    inv = np.asarray(_F32(1) / elementwise.log(np.asarray(p.base, _F32)), _F32)
    return lambda x: mul(fn(lin(x)), inv)


@layer(
    "Power",
    params=[P(0, "power", 1.0), P(1, "scale", 1.0), P(2, "shift", 0.0)],
    kernels=(elementwise.pow_, elementwise.mul, elementwise.add),
)
def power(p, w):
    """y = (shift + x * scale) ** power."""
    lin, pw = _affine(p.scale, p.shift), elementwise.pow_
    e = np.asarray(p.power, _F32)
    return lambda x: pw(lin(x), e)


def _affine(scale: float, shift: float):
    """x -> shift + x * scale in float32 (the identity when scale 1, shift 0)."""
    if scale == 1.0 and shift == 0.0:
        return lambda x: x
    mul, add = elementwise.mul, elementwise.add
    s, b = np.asarray(scale, _F32), np.asarray(shift, _F32)
    return lambda x: add(mul(x, s), b)


@layer("GELU", params=[P(0, "fast_gelu", 0)], kernels=(activation.gelu,))
def gelu(p, w):
    """y = 0.5 x (1 + erf(x / sqrt 2)); fast_gelu: the tanh approximation."""
    return bind(activation.gelu, {"approximate": "tanh" if p.fast_gelu else "none"})


@layer("GLU", params=[P(0, "axis", 0)], kernels=(activation.sigmoid, elementwise.mul))
def glu(p, w):
    """y = a * sigmoid(b): a the first half of x along axis, b the second (1d: axis ignored; an odd
    length drops its last element)."""
    sig, mul = activation.sigmoid, elementwise.mul

    def run(x):
        ax = 0 if x.ndim == 1 else norm_axis(p.axis, x.ndim, "GLU: axis")
        n = x.shape[ax] // 2
        lead = (slice(None),) * ax
        return mul(x[lead + (slice(0, n),)], sig(x[lead + (slice(n, 2 * n),)]))

    return run


@layer("HardSigmoid", params=[P(0, "alpha", 0.2), P(1, "beta", 0.5)], kernels=(activation.hard_sigmoid,))
def hardsigmoid(p, w):
    """y = clamp(x * alpha + beta, 0, 1)."""
    return bind(activation.hard_sigmoid, {"alpha": p.alpha, "beta": p.beta})


@layer("HardSwish", params=[P(0, "alpha", 0.2), P(1, "beta", 0.5)], kernels=FUSED)
def hardswish(p, w):
    """y = x * clamp(x * alpha + beta, 0, 1) (the fused-activation helper, type 6)."""
    fn = fused_activation(6, [p.alpha, p.beta])
    # the activation as a fused step names it (stdops/ncnn/fuse.py folds the layer into the convolution before it)
    fn.act_form = fused_step_activation(6, [p.alpha, p.beta])
    return fn


@layer("Mish", kernels=(activation.mish,))
def mish(p, w):
    """y = x * tanh(log(1 + exp(x)))."""
    return bind(activation.mish)


@layer("Swish", kernels=(activation.swish,))
def swish(p, w):
    """y = x / (1 + exp(-x))."""
    return bind(activation.swish)


@layer("Shrink", params=[P(0, "bias", 0.0), P(1, "lambd", 0.5)], kernels=(activation.shrink,))
def shrink(p, w):
    """y = x + bias if x < -lambd, x - bias if x > lambd, else 0."""
    return bind(activation.shrink, {"bias": p.bias, "lambd": p.lambd})


@layer("Threshold", params=[P(0, "threshold", 0.0)], kernels=(ml.binarizer,))
def threshold(p, w):
    """y = 1 if x > threshold else 0."""
    fn = ml.binarizer
    t = _F32(p.threshold)
    return lambda x: fn(x, threshold=t)


@layer("Dropout", params=[P(0, "scale", 1.0)], kernels=(elementwise.mul,))
def dropout(p, w):
    """y = x * scale (inference: identity when scale is 1)."""
    if p.scale == 1.0:
        return lambda x: x
    mul, s = elementwise.mul, np.asarray(p.scale, _F32)
    return lambda x: mul(x, s)


@layer(
    "PReLU",
    params=[P(0, "num_slope", 0)],
    weights=lambda p: [W("slope", _count(p.num_slope, "num_slope"))],
    kernels=(activation.prelu,),
)
def prelu(p, w):
    """y = x if x >= 0 else x * slope; one slope, or one per element of axis 0 (1d: per element,
    2d: per row, 3d/4d: per channel)."""
    slope = w["slope"]
    fn = activation.prelu
    if p.num_slope == 1:
        s1 = np.asarray(slope[0], _F32)
        return lambda x: fn(x, s1)
    shapes = {nd: (slope.size,) + (1,) * (nd - 1) for nd in range(1, 5)}

    def run(x):
        if x.shape[0] != slope.size:
            raise KernelError(f"PReLU: {slope.size} slopes for a blob of shape {x.shape} (axis 0 has {x.shape[0]})")
        return fn(x, slope.reshape(shapes[x.ndim]))

    return run


@layer("Softmax", params=[P(0, "axis", 0), P(1, "fixbug0", 0)], kernels=(activation.softmax, fused.softmax_rows))
def softmax(p, w):
    """y = exp(x - max) / sum(exp(x - max)) along axis (1d: axis ignored). ncnn refuses a nonzero
    axis without fixbug0=1 (params written before its axis fix). Along the last axis of a float32 blob: the
    compiled row-wise step (stdops/ops/fused.py softmax_rows; a classifier's 10 values 12 -> 2.5 us)."""
    if p.fixbug0 == 0 and p.axis != 0:
        raise ValueError(f"Softmax axis={p.axis} needs fixbug0=1 (param file too old: regenerate it)")
    fn = activation.softmax
    rows = bind(fused.softmax_rows, {"axis": -1, "scale": 1.0})

    def run(x):
        ax = 0 if x.ndim == 1 else norm_axis(p.axis, x.ndim, "Softmax: axis")
        if ax == x.ndim - 1 and x.dtype == _F32:
            return rows(x)
        return fn(x, axis=ax)

    return run
