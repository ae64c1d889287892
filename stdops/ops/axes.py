"""Axes and integer operands, written once for every kernel: an axis in [-rank, rank) names the same
axis as axis + rank; anything outside is a KernelError naming the op. Shape-like operands (a 1-D
integer tensor, a 0-d scalar, a list or a tuple) become Python ints."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError


def int_list(x, what: str) -> list[int]:
    """A shape-like operand (1-D int tensor, 0-d scalar, list, tuple) as a list of Python ints."""
    if isinstance(x, (list, tuple)):
        try:
            return [int(v) for v in x]
        except (TypeError, ValueError):
            raise KernelError(f"{what}: expected integers, got {x!r}") from None
    a = np.asarray(x)
    if a.ndim > 1:
        raise KernelError(f"{what}: expected a 1-D tensor, got shape {a.shape}")
    if a.dtype.kind not in "iub":
        raise KernelError(f"{what}: expected an integer tensor, got dtype {a.dtype}")
    return [int(v) for v in a.reshape(-1).tolist()]


def int_scalar(x, what: str) -> int:
    """A 0-d or one-element integer operand as a Python int."""
    v = int_list(x, what) if isinstance(x, (list, tuple)) else None
    if v is None:
        a = np.asarray(x)
        if a.size != 1:
            raise KernelError(f"{what}: expected a single value, got shape {a.shape}")
        if a.dtype.kind not in "iub":
            raise KernelError(f"{what}: expected an integer, got dtype {a.dtype}")
        return int(a.reshape(-1)[0])
    if len(v) != 1:
        raise KernelError(f"{what}: expected a single value, got {len(v)}")
    return v[0]


def norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    """Map ``axis`` in [-rank, rank-1] to [0, rank-1]; KernelError outside."""
    a = int(axis)
    if not -rank <= a < rank:
        raise KernelError(f"{what} {a} is out of range for rank {rank}")
    return a + rank if a < 0 else a


def norm_axes(axes, rank: int, what: str = "axes") -> list[int]:
    """Normalize a list of axes (negative count from the back); duplicates are an error."""
    out = [norm_axis(a, rank, what) for a in int_list(axes, what)]
    if len(set(out)) != len(out):
        raise KernelError(f"{what} {int_list(axes, what)} has repeated axes")
    return out
