"""Elementwise comparisons, logic and bit kernels, and the float tests IsInf/IsNaN.

Binary kernels broadcast NumPy-style; comparisons and tests return bool, bit operations keep the
integer type.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import op
from .dtypes import as_array, float_input, is_int, result
from .elementwise import binary_operands

# --------------------------------------------------------------------------- float tests


@op("onnx:IsInf-10")
def is_inf(x, /, *, detect_negative=1, detect_positive=1):
    """Y = (X == +inf and detect_positive) or (X == -inf and detect_negative).

    Shape of X, dtype bool (float types, float8 included).
    """
    x = float_input(x, "IsInf")
    if detect_negative and detect_positive:
        return result(np.isinf(x))
    with np.errstate(all="ignore"):
        if detect_positive:
            return result(np.isinf(x) & (x > 0))
        if detect_negative:
            return result(np.isinf(x) & (x < 0))
    return np.zeros(x.shape, dtype=bool)


@op("onnx:IsNaN-9")
def is_nan(x, /):
    """Y = (X is NaN). Shape of X, dtype bool (float types, float8 included)."""
    x = float_input(x, "IsNaN")
    return result(np.isnan(x))


# --------------------------------------------------------------------------- comparisons


def _cmp_operands(a, b, opname: str) -> tuple[np.ndarray, np.ndarray]:
    a, b = binary_operands(a, b, opname)
    if a.dtype.kind in "OSUT" or b.dtype.kind in "OSUT":
        a, b = _as_str(a), _as_str(b)
    return a, b


def _as_str(x: np.ndarray) -> np.ndarray:
    """A string tensor (object of str/bytes, or 'U'/'S') as an object array of str."""
    if x.dtype.kind == "O":
        if x.size and any(isinstance(v, bytes) for v in x.flat):
            return np.vectorize(lambda v: v.decode("utf-8") if isinstance(v, bytes) else v, otypes=[object])(x)
        return x
    if x.dtype.kind == "S":
        return np.char.decode(x, "utf-8").astype(object)
    return x.astype(object)


@op("onnx:Equal-7")
def equal(a, b, /):
    """C = (A == B) (broadcasting; strings compare by value since Equal-19).

    Shape: broadcast of A and B. Dtype: bool.
    """
    a, b = _cmp_operands(a, b, "Equal")
    return result(np.equal(a, b), np.bool_)


@op("onnx:Greater-7")
def greater(a, b, /):
    """C = (A > B) (broadcasting). Shape: broadcast of A and B. Dtype: bool."""
    a, b = binary_operands(a, b, "Greater")
    return result(np.greater(a, b))


@op("onnx:GreaterOrEqual-12")
def greater_or_equal(a, b, /):
    """C = (A >= B) (broadcasting). Shape: broadcast of A and B. Dtype: bool."""
    a, b = binary_operands(a, b, "GreaterOrEqual")
    return result(np.greater_equal(a, b))


@op("onnx:Less-7")
def less(a, b, /):
    """C = (A < B) (broadcasting). Shape: broadcast of A and B. Dtype: bool."""
    a, b = binary_operands(a, b, "Less")
    return result(np.less(a, b))


@op("onnx:LessOrEqual-12")
def less_or_equal(a, b, /):
    """C = (A <= B) (broadcasting). Shape: broadcast of A and B. Dtype: bool."""
    a, b = binary_operands(a, b, "LessOrEqual")
    return result(np.less_equal(a, b))


# --------------------------------------------------------------------------- logic and bits


def _bool_operands(a, b, opname: str) -> tuple[np.ndarray, np.ndarray]:
    a, b = binary_operands(a, b, opname)
    if a.dtype != np.bool_ or b.dtype != np.bool_:
        raise KernelError(f"{opname}: expects bool tensors, got {a.dtype} and {b.dtype}")
    return a, b


@op("onnx:And-7")
def and_(a, b, /):
    """C = A and B (broadcasting). Shape: broadcast of A and B. Dtype: bool."""
    return result(np.logical_and(*_bool_operands(a, b, "And")))


@op("onnx:Or-7")
def or_(a, b, /):
    """C = A or B (broadcasting). Shape: broadcast of A and B. Dtype: bool."""
    return result(np.logical_or(*_bool_operands(a, b, "Or")))


@op("onnx:Xor-7")
def xor(a, b, /):
    """C = A xor B (broadcasting). Shape: broadcast of A and B. Dtype: bool."""
    return result(np.logical_xor(*_bool_operands(a, b, "Xor")))


@op("onnx:Not-1")
def not_(x, /):
    """Y = not X. Shape of X, dtype bool."""
    x = as_array(x)
    if x.dtype != np.bool_:
        raise KernelError(f"Not: expects a bool tensor, got {x.dtype}")
    return result(np.logical_not(x))


def _int_operands(a, b, opname: str) -> tuple[np.ndarray, np.ndarray]:
    a, b = binary_operands(a, b, opname)
    if not (is_int(a.dtype) and is_int(b.dtype)):
        raise KernelError(f"{opname}: expects integer tensors, got {a.dtype} and {b.dtype}")
    return a, b


@op("onnx:BitShift-11")
def bit_shift(x, y, /, *, direction):
    """Z = X << Y (direction "LEFT") or X >> Y ("RIGHT", arithmetic for signed types),
    broadcasting; a shift Y < 0 or >= the bit width gives 0 (-1 for a right shift of X < 0).

    Shape: broadcast of X and Y. Dtype: that of X.
    """
    if direction not in ("LEFT", "RIGHT"):
        raise KernelError(f"BitShift: direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    x, y = _int_operands(x, y, "BitShift")
    bits = x.dtype.itemsize * 8
    y = y.astype(x.dtype, copy=False) if y.dtype != x.dtype and y.dtype.kind == x.dtype.kind else y
    ok = (y >= 0) & (y < bits) if y.dtype.kind == "i" else (y < bits)
    ys = np.where(ok, y, 0).astype(x.dtype)
    with np.errstate(all="ignore"):
        if direction == "LEFT":
            r = np.left_shift(x, ys)
            fill = np.zeros((), x.dtype)
        else:
            r = np.right_shift(x, ys)
            fill = (x < 0).astype(x.dtype) * x.dtype.type(-1) if x.dtype.kind == "i" else np.zeros((), x.dtype)
    return result(np.where(ok, r, fill), x.dtype)


@op("onnx:BitwiseAnd-18")
def bitwise_and(a, b, /):
    """C = A & B (broadcasting). Shape: broadcast of A and B. Dtype: that of A (integer types)."""
    return result(np.bitwise_and(*_int_operands(a, b, "BitwiseAnd")))


@op("onnx:BitwiseOr-18")
def bitwise_or(a, b, /):
    """C = A | B (broadcasting). Shape: broadcast of A and B. Dtype: that of A (integer types)."""
    return result(np.bitwise_or(*_int_operands(a, b, "BitwiseOr")))


@op("onnx:BitwiseXor-18")
def bitwise_xor(a, b, /):
    """C = A ^ B (broadcasting). Shape: broadcast of A and B. Dtype: that of A (integer types)."""
    return result(np.bitwise_xor(*_int_operands(a, b, "BitwiseXor")))


@op("onnx:BitwiseNot-18")
def bitwise_not(x, /):
    """Y = ~X. Shape and dtype of X (integer types)."""
    x = as_array(x)
    if not is_int(x.dtype):
        raise KernelError(f"BitwiseNot: expects an integer tensor, got {x.dtype}")
    return result(np.invert(x))
