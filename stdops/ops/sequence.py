"""Sequence and optional kernels.

A sequence value is a Python ``list`` of ndarrays; an optional value is the value itself or ``None``
(empty). Kernels never mutate an input list: they return new lists.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import op
from .axes import norm_axis


def _check_seq(seq, what: str = "input_sequence") -> list:
    if not isinstance(seq, (list, tuple)):
        raise KernelError(f"{what} must be a sequence (list of tensors), got {type(seq).__name__}")
    return list(seq)


def _scalar_int(x, what: str) -> int:
    a = np.asarray(x)
    if a.size != 1 or a.ndim > 1 or a.dtype.kind not in "iu":
        raise KernelError(
            f"{what} must be an integer scalar (or 1-element tensor), got shape {a.shape} dtype {a.dtype}"
        )
    return int(a.reshape(-1)[0])


def _position(position, n: int, allow_end: bool, what: str = "position") -> int:
    """Normalize a position into [0, n) (or [0, n] when inserting)."""
    p = _scalar_int(position, what)
    hi = n if allow_end else n - 1
    if not -n <= p <= hi:
        raise KernelError(f"{what} {p} out of range [{-n}, {hi}] for a sequence of length {n}")
    return p + n if p < 0 else p


@op("onnx:SequenceConstruct-11")
def sequence_construct(*inputs):
    """output_sequence = [inputs[0], inputs[1], ...].

    A new list of the input tensors, in order. All inputs must have the same dtype.
    """
    items = [np.asarray(x) for x in inputs]
    if len({x.dtype for x in items}) > 1:
        raise KernelError(f"SequenceConstruct inputs must share one dtype, got {sorted({str(x.dtype) for x in items})}")
    return items


@op("onnx:SequenceEmpty-11")
def sequence_empty(*, dtype=np.float32):
    """output = [] (an empty sequence whose elements would have ``dtype``, default float32)."""
    return []


@op("onnx:SequenceAt-11")
def sequence_at(input_sequence, position, /):
    """tensor = input_sequence[position]; position in [-n, n-1] (negative counts from the back)."""
    seq = _check_seq(input_sequence)
    return seq[_position(position, len(seq), allow_end=False)]


@op("onnx:SequenceErase-11")
def sequence_erase(input_sequence, position=None, /):
    """output_sequence = input_sequence without the element at position (default -1: the last).

    position in [-n, n-1]; a new list is returned.
    """
    seq = _check_seq(input_sequence)
    if not seq:
        raise KernelError("SequenceErase on an empty sequence")
    p = len(seq) - 1 if position is None else _position(position, len(seq), allow_end=False)
    return seq[:p] + seq[p + 1 :]


@op("onnx:SequenceInsert-11")
def sequence_insert(input_sequence, tensor, position=None, /):
    """output_sequence = input_sequence with ``tensor`` inserted before position (default: appended).

    position in [-n, n]; ``tensor`` must have the sequence's element dtype. A new list is returned.
    """
    seq = _check_seq(input_sequence)
    t = np.asarray(tensor)
    if seq and np.asarray(seq[0]).dtype != t.dtype:
        raise KernelError(
            f"SequenceInsert: tensor dtype {t.dtype} differs from the sequence's {np.asarray(seq[0]).dtype}"
        )
    p = len(seq) if position is None else _position(position, len(seq), allow_end=True)
    return seq[:p] + [t] + seq[p:]


@op("onnx:SequenceLength-11")
def sequence_length(input_sequence, /):
    """length = len(input_sequence), an int64 scalar (0-d tensor)."""
    return np.asarray(len(_check_seq(input_sequence)), dtype=np.int64)


@op("onnx:SplitToSequence-11")
def split_to_sequence(input, split=None, /, *, axis=0, keepdims=1):
    """output_sequence = the parts of ``input`` along ``axis``.

    ``split`` scalar s: chunks of size s (the last may be smaller); 1-D: the part lengths (sum =
    dim). Without ``split``: parts of size 1, and the axis is removed when keepdims=0.
    Elements keep the input dtype.
    """
    x = np.asarray(input)
    if x.ndim == 0:
        raise KernelError("SplitToSequence needs an input of rank >= 1")
    ax = norm_axis(int(axis), x.ndim)
    dim = x.shape[ax]
    if split is None:
        parts = np.split(x, dim, axis=ax) if dim else []
        if not keepdims:
            return [np.squeeze(p, axis=ax) for p in parts]
        return [np.array(p) for p in parts]
    s = np.asarray(split)
    if s.dtype.kind not in "iu" or s.ndim > 1:
        raise KernelError(f"split must be an int scalar or 1-D int tensor, got shape {s.shape} dtype {s.dtype}")
    if s.ndim == 0:
        size = int(s)
        if size <= 0:
            raise KernelError(f"split must be positive, got {size}")
        bounds = list(range(size, dim, size))
    else:
        lengths = s.astype(np.int64)
        if (lengths < 0).any() or int(lengths.sum()) != dim:
            raise KernelError(f"split lengths {lengths.tolist()} must be non-negative and sum to the axis size {dim}")
        bounds = np.cumsum(lengths)[:-1].tolist()
    return [np.array(p) for p in np.split(x, bounds, axis=ax)]


@op("onnx:ConcatFromSequence-11")
def concat_from_sequence(input_sequence, /, *, axis, new_axis=0):
    """concat_result = concatenate(input_sequence, axis) (new_axis=0) or stack(input_sequence, axis).

    axis is in [-r, r-1] (concatenate) or [-r-1, r] (new_axis=1, r = element rank). Dtype of the
    elements; the sequence must not be empty.
    """
    seq = [np.asarray(t) for t in _check_seq(input_sequence)]
    if not seq:
        raise KernelError("ConcatFromSequence on an empty sequence")
    rank = seq[0].ndim
    if any(t.ndim != rank for t in seq):
        raise KernelError(f"ConcatFromSequence elements have different ranks {[t.ndim for t in seq]}")
    if len({t.dtype for t in seq}) > 1:
        raise KernelError("ConcatFromSequence elements have different dtypes")
    try:
        if new_axis:
            return np.stack(seq, axis=norm_axis(int(axis), rank + 1))
        if rank == 0:
            raise KernelError("ConcatFromSequence with new_axis=0 needs elements of rank >= 1")
        return np.concatenate(seq, axis=norm_axis(int(axis), rank))
    except ValueError as e:
        if isinstance(e, KernelError):
            raise
        raise KernelError(f"ConcatFromSequence: {e}") from None


@op("onnx:Optional-15")
def optional(input=None, /, *, type=None):
    """output = input as an optional value (None = empty optional when input is missing).

    ``type`` (an onnx.TypeProto) only states the element type of an empty optional.
    """
    if input is None:
        return None
    return input


@op("onnx:OptionalHasElement-15")
def optional_has_element(input=None, /):
    """output = (input is not empty), a bool scalar (0-d tensor). A missing input is empty."""
    return np.asarray(input is not None, dtype=np.bool_)


@op("onnx:OptionalGetElement-15")
def optional_get_element(input, /):
    """output = the value of the optional ``input`` (a tensor or a sequence); a tensor or sequence
    input is returned as is. An empty optional is an error."""
    if input is None:
        raise KernelError("OptionalGetElement on an empty optional")
    return input
