"""Elementwise activation layers (ncnn-operators.txt: ReLU, Sigmoid, TanH, AbsVal), on the shared kernels."""
from __future__ import annotations

import numpy as np

from ...ops import OPS
from ..spec import P, layer


@layer("ReLU", params=[P(0, "slope", 0.0)])
def relu(p, w):
    """y = x if x > 0 else x * slope (slope 0: ReLU)."""
    if p.slope == 0.0:
        return OPS["relu"].fn
    return lambda x: OPS["leaky_relu"].fn(x, alpha=p.slope)


@layer("Sigmoid")
def sigmoid(p, w):
    """y = 1 / (1 + exp(-x))."""
    return OPS["sigmoid"].fn


@layer("TanH")
def tanh(p, w):
    """y = tanh(x)."""
    return OPS["tanh"].fn


@layer("AbsVal")
def absval(p, w):
    """y = |x|."""
    return OPS["abs_"].fn
