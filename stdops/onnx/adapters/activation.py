"""ONNX version adapters for the activation kernels.

- opset-1 activations carried a ``consumed_inputs`` attribute (a memory hint): dropped;
- Selu-1 had other defaults (alpha 1.6732, gamma 1.0507);
- PRelu before opset 7: a 1-D slope of X's channel count applies per channel (axis 1);
- Softmax, LogSoftmax and Hardmax before opset 13 coerce the input to 2-D
  [a_0 * ... * a_{k-1}, a_k * ... * a_{n-1}] around ``axis`` (default 1).
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import KernelError
from ..opset import BindContext, adapter


@adapter("Relu", 1)
@adapter("Sigmoid", 1)
@adapter("LeakyRelu", 1)
@adapter("Elu", 1)
@adapter("HardSigmoid", 1)
def _drop_consumed(ctx: BindContext):
    ctx.attrs.pop("consumed_inputs", None)
    return ctx.bind()


@adapter("Selu", 1)
def _selu_1(ctx: BindContext):
    ctx.attrs.pop("consumed_inputs", None)
    ctx.attrs.setdefault("alpha", 1.6732000112533569)
    ctx.attrs.setdefault("gamma", 1.0506999492645264)
    return ctx.bind()


@adapter("PRelu", 1, 6)
def _prelu_channel(ctx: BindContext):
    ctx.attrs.pop("consumed_inputs", None)
    fn = ctx.bind()

    def run(x, slope):
        x, slope = np.asarray(x), np.asarray(slope)
        if x.ndim > 2 and slope.ndim == 1 and slope.size == x.shape[1] and slope.size > 1:
            slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))
        return fn(x, slope)

    return run


def _coerce_2d(ctx: BindContext):
    axis = int(ctx.attrs.pop("axis", 1))
    fn = ctx.bind(axis=1)
    op_type = ctx.op_type

    def run(x):
        x = np.asarray(x)
        a = axis + x.ndim if axis < 0 else axis
        if not 0 <= a <= x.ndim or x.ndim == 0:
            raise KernelError(f"{op_type}: axis {axis} is out of range for a tensor of rank {x.ndim}")
        y = fn(x.reshape(math.prod(x.shape[:a]), math.prod(x.shape[a:])))
        return y.reshape(x.shape)

    return run


for _name in ("Softmax", "LogSoftmax", "Hardmax"):
    adapter(_name, 1, 11)(_coerce_2d)
