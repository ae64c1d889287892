"""The dtype policy of every kernel (docs/kernels.md, "Numerics"), written once.

- A *float* is float16, float32, float64 or an ml_dtypes float (bfloat16, the float8 family, float6,
  float4): :func:`is_float` (the type tables are :mod:`stdops.ops.lowp`'s, imported on first use). An
  *int* is a NumPy integer (:func:`is_int`); the ml_dtypes sub-byte integers (int4, uint4, int2, uint2)
  are :func:`is_sub_byte_int` (only casts and quantization take them).
- A formula of more than one correctly rounded step is evaluated in :func:`compute_dtype`: float64 in
  float64, everything else in float32 (then rounded once to the output's type). Sums and products that
  keep an integer dtype accumulate on :func:`widened` (only the narrow floats become float32).
- A kernel returns arrays, never NumPy scalars (:func:`result`), in the dtype the spec gives.
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import KernelError
from .lowp import is_low_precision, types

#: the float types NumPy computes in natively
NUMPY_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))


@functools.cache
def float_kind(dt: np.dtype) -> str:
    """'f' for float16/32/64, 'm' for an ml_dtypes float (bfloat16, float8*, float6*, float4), '' otherwise."""
    dt = np.dtype(dt)
    if dt in NUMPY_FLOATS:
        return "f"
    if is_low_precision(dt) and dt in types().floats:
        return "m"
    return ""


def is_float(dt: np.dtype) -> bool:
    return bool(float_kind(dt))


def is_int(dt: np.dtype) -> bool:
    return np.dtype(dt).kind in "iu"


def is_sub_byte_int(dt: np.dtype) -> bool:
    """int4, uint4, int2, uint2 (ml_dtypes, one element per byte)."""
    dt = np.dtype(dt)
    return is_low_precision(dt) and dt in types().ints


def compute_dtype(dt: np.dtype) -> np.dtype:
    """The dtype a float formula on ``dt`` is evaluated in: float64 for float64, float32 for every
    other type (float32, the other floats, and integer inputs of a float formula such as Resize)."""
    return np.dtype(np.float64) if np.dtype(dt) == np.float64 else np.dtype(np.float32)


def widened(x: np.ndarray) -> np.ndarray:
    """``x`` to accumulate on: the floats other than float32/float64 widened to float32; float32,
    float64, integers and bools unchanged (integer reductions and products keep their dtype)."""
    return x.astype(np.float32) if float_kind(x.dtype) == "m" or x.dtype == np.float16 else x


def as_array(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else np.asarray(x)


def result(r, dtype=None) -> np.ndarray:
    """Wrap a NumPy scalar result as a 0-d array; cast to ``dtype`` when given (no copy if equal)."""
    r = r if isinstance(r, np.ndarray) else np.asarray(r)
    if dtype is not None and r.dtype != dtype:
        r = r.astype(dtype)
    return r


def float_input(x, opname: str, what: str | None = None) -> np.ndarray:
    """``x`` as an array, refusing non-float tensors (the op is defined on float types only)."""
    x = as_array(x)
    if not float_kind(x.dtype):
        name = f"{what} " if what else ""
        raise KernelError(f"{opname}: {name}expects a floating-point tensor, got {x.dtype}")
    return x


def numeric_input(x, opname: str) -> np.ndarray:
    x = as_array(x)
    if not (float_kind(x.dtype) or x.dtype.kind in "iu"):
        raise KernelError(f"{opname}: expects a numeric tensor, got {x.dtype}")
    return x
