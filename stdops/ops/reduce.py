"""Reductions: Reduce* (sum, mean, max, min, prod, L1, L2, log-sum, log-sum-exp, sum of squares),
ArgMax / ArgMin, CumSum / CumProd.

Shared conventions (ONNX Reduce*-18, ReduceSum-13):

- ``axes`` is an optional 1-D int64 input; negative axes count from the back. When it is absent or
  empty, every axis is reduced, unless ``noop_with_empty_axes`` is 1: then nothing is reduced and
  only the element-wise part of a composite reduction (abs, square, log, ...) is applied.
- ``keepdims=1`` keeps the reduced axes with size 1.
- The output dtype is the input dtype. float16/bfloat16 accumulate in float32 and round once at the
  end; float32 stays float32; integer sums and products wrap in their own dtype.
- A reduction over an empty set gives the identity: 0 for sums, 1 for products, -inf (or the
  dtype's minimum) for Max, +inf (or the maximum) for Min, -inf for LogSum/LogSumExp.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import op
from .axes import norm_axes, norm_axis
from .dtypes import widened


def _axes(data: np.ndarray, axes, noop_with_empty_axes) -> tuple[int, ...] | None:
    """Normalised axes; None means all axes, () means none (noop)."""
    if axes is not None:
        axes = np.asarray(axes)
        if axes.dtype.kind not in "iu":
            raise KernelError(f"axes must be integers, got {axes.dtype}")
        axes = [int(a) for a in axes.reshape(-1)]
    if not axes:
        return () if noop_with_empty_axes else None
    return tuple(norm_axes(axes, data.ndim))


def _out(y, dtype: np.dtype) -> np.ndarray:
    y = np.asarray(y)
    return y if y.dtype == dtype else y.astype(dtype)


def _sum(x: np.ndarray, axes, keepdims, dtype=None) -> np.ndarray:
    if x.dtype.kind in "iu" or x.dtype.kind == "b":
        dtype = dtype or x.dtype
    return np.sum(x, axis=axes, keepdims=bool(keepdims), dtype=dtype)


def _check_data(data, name: str) -> np.ndarray:
    data = np.asarray(data)
    if data.dtype.kind in "OSU":
        raise KernelError(f"{name}: unsupported input dtype {data.dtype}")
    return data


@op("onnx:ReduceSum-13")
def reduce_sum(data, axes=None, /, *, keepdims=1, noop_with_empty_axes=0):
    """y = sum(data) over axes.

    Shape: data's shape with the reduced axes removed (or kept as 1 with keepdims). Dtype of data.
    """
    data = _check_data(data, "ReduceSum")
    ax = _axes(data, axes, noop_with_empty_axes)
    if ax == ():
        return data.copy()
    return _out(_sum(widened(data), ax, keepdims), data.dtype)


@op("onnx:ReduceSumSquare-18")
def reduce_sum_square(data, axes=None, /, *, keepdims=1, noop_with_empty_axes=0):
    """y = sum(data * data) over axes.

    Shape as ReduceSum; dtype of data.
    """
    data = _check_data(data, "ReduceSumSquare")
    x = widened(data)
    ax = _axes(data, axes, noop_with_empty_axes)
    if ax == ():
        return _out(x * x, data.dtype)
    return _out(_sum(x * x, ax, keepdims), data.dtype)


@op("onnx:ReduceL1-18")
def reduce_l1(data, axes=None, /, *, keepdims=1, noop_with_empty_axes=0):
    """y = sum(|data|) over axes.

    Shape as ReduceSum; dtype of data.
    """
    data = _check_data(data, "ReduceL1")
    x = np.abs(widened(data))
    ax = _axes(data, axes, noop_with_empty_axes)
    if ax == ():
        return _out(x, data.dtype)
    return _out(_sum(x, ax, keepdims), data.dtype)


@op("onnx:ReduceL2-18")
def reduce_l2(data, axes=None, /, *, keepdims=1, noop_with_empty_axes=0):
    """y = sqrt(sum(data * data)) over axes.

    Shape as ReduceSum; dtype of data (integer results are truncated).
    """
    data = _check_data(data, "ReduceL2")
    ax = _axes(data, axes, noop_with_empty_axes)
    if ax == ():
        return _out(np.abs(widened(data)), data.dtype)
    if data.dtype.kind in "iub":
        x = data.astype(np.float64)
    else:
        x = widened(data)
    return _out(np.sqrt(_sum(x * x, ax, keepdims)), data.dtype)


@op("onnx:ReduceLogSum-18")
def reduce_log_sum(data, axes=None, /, *, keepdims=1, noop_with_empty_axes=0):
    """y = log(sum(data)) over axes (-inf for an empty set).

    Shape as ReduceSum; dtype of data.
    """
    data = _check_data(data, "ReduceLogSum")
    ax = _axes(data, axes, noop_with_empty_axes)
    x = data.astype(np.float64) if data.dtype.kind in "iub" else widened(data)
    with np.errstate(divide="ignore", invalid="ignore"):
        if ax == ():
            return _out(np.log(x), data.dtype)
        return _out(np.log(_sum(x, ax, keepdims)), data.dtype)


@op("onnx:ReduceLogSumExp-18")
def reduce_log_sum_exp(data, axes=None, /, *, keepdims=1, noop_with_empty_axes=0):
    """y = log(sum(exp(data))) over axes, computed as m + log(sum(exp(data - m))), m = max.

    -inf for an empty set. Shape as ReduceSum; dtype of data.
    """
    data = _check_data(data, "ReduceLogSumExp")
    ax = _axes(data, axes, noop_with_empty_axes)
    if ax == ():
        return data.copy()
    x = data.astype(np.float64) if data.dtype.kind in "iub" else widened(data)
    m = np.max(x, axis=ax, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, np.zeros((), x.dtype))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.sum(np.exp(x - m), axis=ax, keepdims=True)
        y = np.log(s) + m
    if not keepdims:
        y = np.squeeze(y, axis=ax if ax is not None else tuple(range(x.ndim)))
    return _out(y, data.dtype)


@op("onnx:ReduceMean-18")
def reduce_mean(data, axes=None, /, *, keepdims=1, noop_with_empty_axes=0):
    """y = sum(data) / count over axes (NaN for an empty set of floats).

    Shape as ReduceSum; dtype of data (integer means truncate toward zero).
    """
    data = _check_data(data, "ReduceMean")
    ax = _axes(data, axes, noop_with_empty_axes)
    if ax == ():
        return data.copy()
    x = data.astype(np.float64) if data.dtype.kind in "iub" else widened(data)
    with np.errstate(divide="ignore", invalid="ignore"):
        n = x.size if ax is None else int(np.prod([x.shape[a] for a in ax]))
        s = np.sum(x, axis=ax, keepdims=bool(keepdims))
        y = s / np.asarray(n, s.dtype) if n else s * np.asarray(np.nan, s.dtype)
    if data.dtype.kind in "iub":
        with np.errstate(invalid="ignore"):
            y = np.trunc(y)
    return _out(y, data.dtype)


@op("onnx:ReduceProd-18")
def reduce_prod(data, axes=None, /, *, keepdims=1, noop_with_empty_axes=0):
    """y = prod(data) over axes (1 for an empty set).

    Shape as ReduceSum; dtype of data.
    """
    data = _check_data(data, "ReduceProd")
    ax = _axes(data, axes, noop_with_empty_axes)
    if ax == ():
        return data.copy()
    x = widened(data)
    dtype = x.dtype if x.dtype.kind in "iu" else None
    return _out(np.prod(x, axis=ax, keepdims=bool(keepdims), dtype=dtype), data.dtype)


def _extreme(data: np.ndarray, largest: bool):
    """The identity of max (largest=False: the lowest value) or min (largest=True)."""
    dt = data.dtype
    if dt.kind == "b":
        return bool(largest)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return info.max if largest else info.min
    return np.inf if largest else -np.inf


@op("onnx:ReduceMax-18")
def reduce_max(data, axes=None, /, *, keepdims=1, noop_with_empty_axes=0):
    """y = max(data) over axes (-inf or the dtype's minimum for an empty set; False < True).

    Shape as ReduceSum; dtype of data.
    """
    data = _check_data(data, "ReduceMax")
    ax = _axes(data, axes, noop_with_empty_axes)
    if ax == ():
        return data.copy()
    x = widened(data)
    return _out(np.max(x, axis=ax, keepdims=bool(keepdims), initial=_extreme(x, False)), data.dtype)


@op("onnx:ReduceMin-18")
def reduce_min(data, axes=None, /, *, keepdims=1, noop_with_empty_axes=0):
    """y = min(data) over axes (+inf or the dtype's maximum for an empty set; False < True).

    Shape as ReduceSum; dtype of data.
    """
    data = _check_data(data, "ReduceMin")
    ax = _axes(data, axes, noop_with_empty_axes)
    if ax == ():
        return data.copy()
    x = widened(data)
    return _out(np.min(x, axis=ax, keepdims=bool(keepdims), initial=_extreme(x, True)), data.dtype)


# ----------------------------------------------------------------------------- ArgMax / ArgMin
def _arg(data, axis, keepdims, select_last_index, fn, name):
    data = np.asarray(data)
    r = data.ndim
    if r == 0:
        data = data.reshape(1)
        r = 1
        squeeze0 = True
    else:
        squeeze0 = False
    axis = int(axis)
    if not -r <= axis < r:
        raise KernelError(f"{name}: axis {axis} is out of range for a tensor of rank {data.ndim}")
    axis %= r
    n = data.shape[axis]
    if n == 0:
        raise KernelError(f"{name}: cannot take the arg of an empty axis {axis}")
    x = widened(data)
    if select_last_index:
        idx = (n - 1) - fn(np.flip(x, axis=axis), axis=axis, keepdims=True)
    else:
        idx = fn(x, axis=axis, keepdims=True)
    idx = idx.astype(np.int64, copy=False)
    if squeeze0:
        return idx.reshape(()) if not keepdims else idx
    return idx if keepdims else np.squeeze(idx, axis=axis)


@op("onnx:ArgMax-1")
def arg_max(data, /, *, axis=0, keepdims=1, select_last_index=0):
    """y = index of the largest element along axis (first, or last with select_last_index).

    Shape: data's shape with axis removed (kept as 1 with keepdims); dtype int64.
    """
    return _arg(data, axis, keepdims, select_last_index, np.argmax, "ArgMax")


@op("onnx:ArgMin-1")
def arg_min(data, /, *, axis=0, keepdims=1, select_last_index=0):
    """y = index of the smallest element along axis (first, or last with select_last_index).

    Shape: data's shape with axis removed (kept as 1 with keepdims); dtype int64.
    """
    return _arg(data, axis, keepdims, select_last_index, np.argmin, "ArgMin")


# ----------------------------------------------------------------------------- CumSum / CumProd
def _scalar_axis(axis, r: int, name: str) -> int:
    a = np.asarray(axis)
    if a.size != 1 or a.dtype.kind not in "iu":
        raise KernelError(f"{name}: axis must be a single integer, got {a!r}")
    return norm_axis(int(a.reshape(-1)[0]), max(r, 1), f"{name}: axis")


def _cumulative(x, axis, exclusive, reverse, ufunc, identity, name):
    x = np.asarray(x)
    if x.ndim == 0:
        _scalar_axis(axis, 0, name)
        return x.copy() if not exclusive else np.full((), identity, x.dtype)
    ax = _scalar_axis(axis, x.ndim, name)
    w = widened(x)
    if reverse:
        w = np.flip(w, axis=ax)
    if exclusive:
        head = np.full(w.shape[:ax] + (min(1, w.shape[ax]),) + w.shape[ax + 1 :], identity, w.dtype)
        body = np.take(w, np.arange(max(w.shape[ax] - 1, 0)), axis=ax)
        w = np.concatenate([head, body], axis=ax)
    y = ufunc.accumulate(w, axis=ax, dtype=w.dtype)
    if reverse:
        y = np.flip(y, axis=ax)
    return _out(np.ascontiguousarray(y), x.dtype)


@op("onnx:CumSum-11")
def cum_sum(x, axis, /, *, exclusive=0, reverse=0):
    """y[..., j, ...] = sum of x[..., i, ...] for i <= j along axis (i < j with exclusive;
    i >= j / i > j with reverse).

    Shape and dtype of x; axis is a 0-D (or 1-element) int32/int64 tensor.
    """
    return _cumulative(x, axis, exclusive, reverse, np.add, 0, "CumSum")


@op("onnx:CumProd-26")
def cum_prod(x, axis, /, *, exclusive=0, reverse=0):
    """y[..., j, ...] = product of x[..., i, ...] for i <= j along axis (i < j with exclusive;
    i >= j / i > j with reverse).

    Shape and dtype of x; axis is a 0-D (or 1-element) int32/int64 tensor.
    """
    return _cumulative(x, axis, exclusive, reverse, np.multiply, 1, "CumProd")
