"""Tensor generators of the shape family: Constant, ConstantOfShape, EyeLike, Range, Trilu."""

from __future__ import annotations

import math

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from ._registry import op
from .axes import int_list, int_scalar
from .dtypes import is_float

__all__ = ["constant", "constant_of_shape", "eye_like", "range_", "trilu"]


@op("onnx:Constant-1")
def constant(
    *,
    value=None,
    sparse_value=None,
    value_float=None,
    value_floats=None,
    value_int=None,
    value_ints=None,
    value_string=None,
    value_strings=None,
):
    """y = the one value attribute given: ``value`` (a tensor), ``value_float`` (0-d float32),
    ``value_floats`` (1-D float32), ``value_int`` (0-d int64), ``value_ints`` (1-D int64),
    ``value_string`` (0-d string), ``value_strings`` (1-D string).

    Exactly one must be set. ``sparse_value`` must be densified by the front end (refused here).
    """
    given = {
        k: v
        for k, v in (
            ("value", value),
            ("sparse_value", sparse_value),
            ("value_float", value_float),
            ("value_floats", value_floats),
            ("value_int", value_int),
            ("value_ints", value_ints),
            ("value_string", value_string),
            ("value_strings", value_strings),
        )
        if v is not None
    }
    if len(given) != 1:
        raise KernelError(f"Constant needs exactly one value attribute, got {sorted(given) or 'none'}")
    ((name, v),) = given.items()
    if name == "value":
        out = np.array(v, copy=True)
        if out.dtype.kind in "OSU" and out.size:  # string tensors are object arrays of str
            out = np.array([_text(e) for e in out.reshape(-1).tolist()] + [None], dtype=object)[:-1].reshape(out.shape)
        return out
    if name == "sparse_value":
        raise KernelError("Constant: sparse_value is not supported (give a dense tensor in 'value')")
    if name == "value_float":
        return np.array(v, dtype=np.float32)
    if name == "value_floats":
        return np.array(list(v), dtype=np.float32).reshape(-1)
    if name == "value_int":
        return np.array(v, dtype=np.int64)
    if name == "value_ints":
        return np.array(list(v), dtype=np.int64).reshape(-1)
    if name == "value_string":
        out = np.empty((), dtype=object)
        out[()] = _text(v)
        return out
    vals = [_text(s) for s in v]
    out = np.empty(len(vals), dtype=object)
    out[:] = vals
    return out


def _text(s):
    return s.decode("utf-8") if isinstance(s, (bytes, np.bytes_)) else str(s)


@op("onnx:ConstantOfShape-9")
def constant_of_shape(input, /, *, value=None):
    """y = full(input, value) where ``value`` is a one-element tensor (default float32 0).

    ``input`` is a 1-D int64 shape (empty: a 0-d output). Output dtype = value's dtype.
    """
    dims = int_list(input, "input")
    if value is None:
        fill = np.zeros((), dtype=np.float32)
    else:
        fill = np.asarray(value)
        if fill.size != 1:
            raise KernelError(f"value must have exactly one element, got shape {fill.shape}")
        fill = fill.reshape(())
    if any(d < 0 for d in dims):
        raise KernelError(f"shape {dims} has negative dimensions")
    check_elements(dims, "ConstantOfShape output")
    out = np.empty(dims, dtype=fill.dtype)
    out[...] = fill
    return out


@op("onnx:EyeLike-9")
def eye_like(input, /, *, dtype=None, k=0):
    """y[i, j] = 1 if j - i == k else 0, with the shape of the 2-D ``input``.

    Output dtype = ``dtype`` (a numpy dtype; the ONNX adapter converts the enum), else the input's.
    """
    x = np.asarray(input)
    if x.ndim != 2:
        raise KernelError(f"EyeLike needs a 2-D input, got shape {x.shape}")
    dt = x.dtype if dtype is None else np.dtype(dtype)
    if dt == np.dtype(object):
        raise KernelError("EyeLike does not produce string tensors")
    return np.eye(x.shape[0], x.shape[1], k=int(k), dtype=dt)


_STASH = {1: np.float32, 11: np.float64}


@op("onnx:Range-11")
def range_(start, limit, delta, /, *, stash_type=1):
    """y[i] = start + i * delta for i in [0, max(ceil((limit - start) / delta), 0)).

    Scalars of one dtype in, 1-D of that dtype out. For float16/bfloat16 the values are computed in
    ``stash_type`` (1 float32, 11 float64) and rounded back.
    """
    s, lim, d = (np.asarray(v) for v in (start, limit, delta))
    for nm, v in (("start", s), ("limit", lim), ("delta", d)):
        if v.size != 1:
            raise KernelError(f"{nm} must be a scalar, got shape {v.shape}")
    dt = s.dtype
    if lim.dtype != dt or d.dtype != dt:
        raise KernelError(f"start, limit, delta dtypes differ: {s.dtype}, {lim.dtype}, {d.dtype}")
    s, lim, d = (v.reshape(()) for v in (s, lim, d))
    if dt.kind in "iu":
        a, b, c = int(s), int(lim), int(d)
        if c == 0:
            raise KernelError("delta must not be 0")
        n = max(-((a - b) // c), 0)
        check_elements((n,), "Range output")
        return (a + np.arange(n, dtype=np.int64) * c).astype(dt)
    if not is_float(dt) or dt.itemsize == 1:  # float8: no arange in it
        raise KernelError(f"Range does not support dtype {dt}")
    low = dt.itemsize <= 2  # float16, bfloat16
    cdt = np.dtype(_STASH.get(int(stash_type), np.float32)) if low else dt
    a, b, c = (v.astype(cdt) for v in (s, lim, d))
    if c == 0:
        raise KernelError("delta must not be 0")
    span = (float(b) - float(a)) / float(c)
    if not math.isfinite(span):
        raise KernelError(f"Range of {float(a)}..{float(b)} by {float(c)} is not finite")
    n = max(math.ceil(span), 0)
    check_elements((n,), "Range output")
    return (a + np.arange(n, dtype=cdt) * c).astype(dt)


@op("onnx:Trilu-14")
def trilu(input, k=None, /, *, upper=1):
    """y = input with elements below diagonal k zeroed (upper) or above diagonal k zeroed (lower),
    on the last two axes; diagonal k holds the elements [i, i + k].

    Input rank >= 2; same shape and dtype; ``k`` is a 0-d int64 (default 0).
    """
    x = np.asarray(input)
    if x.ndim < 2:
        raise KernelError(f"Trilu needs rank >= 2, got shape {x.shape}")
    kk = 0 if k is None else int_scalar(k, "k")
    n, m = x.shape[-2:]
    diff = np.arange(m)[None, :] - np.arange(n)[:, None]  # j - i
    keep = diff >= kk if upper else diff <= kk
    return np.where(keep, x, np.zeros((), dtype=x.dtype))
