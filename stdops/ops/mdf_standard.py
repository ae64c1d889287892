"""The MDF standard functions that are plain formulas (spec: mdf-standard-functions.txt, "Non-ONNX
Functions"), written in the reference's operation order so results are bit-identical to it.

They follow MDF's conventions, not ONNX's: every argument is positional and named as MDF names it, and
values are whatever the model passes (Python floats compute in float64, as the reference does).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._registry import op


@op("mdf:linear")
def linear(variable0, slope, intercept):
    """variable0 * slope + intercept"""
    return variable0 * slope + intercept


@op("mdf:logistic")
def logistic(variable0, gain, bias, offset):
    """1 / (1 + exp(-1*gain*(variable0 + bias) + offset)) (offset inside the exponent, as the spec writes it)"""
    return 1 / (1 + np.exp(-1 * gain * (variable0 + bias) + offset))


@op("mdf:exponential")
def exponential(variable0, scale, rate, bias, offset):
    """scale * exp((rate * variable0) + bias) + offset"""
    return scale * np.exp((rate * variable0) + bias) + offset


def _scaled(f: Callable, name: str) -> Callable:
    def fn(variable0, scale):
        return scale * f(variable0)

    fn.__name__ = fn.__qualname__ = f"scaled_{name}"
    fn.__doc__ = f"scale * {name}(variable0)"
    return op(f"mdf:{name}")(fn)


#: sin, cos, tan, sinh, cosh, tanh (and the arc functions the reference also registers): scale * f(variable0)
SCALED: dict[str, Callable] = {
    name: _scaled(f, name)
    for name, f in (
        ("sin", np.sin),
        ("cos", np.cos),
        ("tan", np.tan),
        ("sinh", np.sinh),
        ("cosh", np.cosh),
        ("tanh", np.tanh),
        ("arcsin", np.arcsin),
        ("arccos", np.arccos),
        ("arctan", np.arctan),
    )
}


@op("mdf:MatMul", name="mdf_matmul")
def MatMul(A, B):  # noqa: N802 - MDF's name
    """A @ B"""
    return A @ B


@op("mdf:Relu", name="mdf_relu")
def Relu(A):  # noqa: N802 - MDF's name
    """A * (A > 0)"""
    return A * (A > 0)
