"""Sliding-window geometry shared by the convolution and pooling kernels (no kernels here).

Conventions: ``x`` is (N, C, D1, ..., Dn); kernel, strides, dilations have n entries; ``pads`` is
``[x1_begin, ..., xn_begin, x1_end, ..., xn_end]`` as in ONNX.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from .dtypes import is_float

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def ints(v, n: int, default: int, name: str, minimum: int | None = 1) -> tuple[int, ...]:
    """An INTS attribute with one value per spatial axis (empty or None -> ``default``)."""
    if v is None or len(v) == 0:
        return (default,) * n
    t = tuple(int(a) for a in v)
    if len(t) != n:
        raise KernelError(f"{name} has {len(t)} values, expected {n} (one per spatial axis)")
    if minimum is not None and any(a < minimum for a in t):
        raise KernelError(f"{name} must be >= {minimum}, got {list(t)}")
    return t


def pad_pairs(pads, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if pads is None or len(pads) == 0:
        return (0,) * n, (0,) * n
    p = tuple(int(a) for a in pads)
    if len(p) != 2 * n:
        raise KernelError(f"pads has {len(p)} values, expected {2 * n} (begin and end per spatial axis)")
    if any(a < 0 for a in p):
        raise KernelError(f"pads must be >= 0, got {list(p)}")
    return p[:n], p[n:]


class Geometry(NamedTuple):
    begin: tuple[int, ...]  # padding before each axis
    end: tuple[int, ...]  # padding after each axis, including the extra room ceil_mode needs
    out: tuple[int, ...]  # output spatial shape
    dk: tuple[int, ...]  # dilated kernel extent
    inner_end: tuple[int, ...]  # the real padding after each axis (without ceil_mode's extra)


def geometry(
    in_sp: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
) -> Geometry:
    """Output shape and paddings of a sliding window (ONNX Conv / *Pool rules). Cached per
    arguments: a model runs the same shapes again and again."""
    pads = () if pads is None else tuple(int(p) for p in pads)
    return _geometry(
        tuple(int(i) for i in in_sp),
        tuple(kernel),
        tuple(strides),
        tuple(dilations),
        pads,
        auto_pad,
        int(bool(ceil_mode)),
    )


@functools.lru_cache(maxsize=4096)
def _geometry(in_sp, kernel, strides, dilations, pads, auto_pad, ceil_mode) -> Geometry:
    n = len(in_sp)
    if auto_pad not in AUTO_PADS:
        raise KernelError(f"auto_pad must be one of {', '.join(AUTO_PADS)}, got {auto_pad!r}")
    dk = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations))
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = tuple(-(-i // s) for i, s in zip(in_sp, strides))
        total = [max(0, (o - 1) * s + k - i) for o, s, k, i in zip(out, strides, dk, in_sp)]
        if auto_pad == "SAME_UPPER":
            begin = tuple(t // 2 for t in total)
        else:
            begin = tuple(t - t // 2 for t in total)
        end = tuple(t - b for t, b in zip(total, begin))
    else:
        if auto_pad == "VALID":
            begin, end = (0,) * n, (0,) * n
        else:
            begin, end = pad_pairs(pads, n)
        outs = []
        for ax in range(n):
            span = in_sp[ax] + begin[ax] + end[ax] - dk[ax]
            if span < 0:
                raise KernelError(
                    f"kernel extent {dk[ax]} (kernel {kernel[ax]}, dilation {dilations[ax]}) is larger than "
                    f"the padded input {in_sp[ax] + begin[ax] + end[ax]} along spatial axis {ax}"
                )
            if ceil_mode and auto_pad == "NOTSET":
                o = -(-span // strides[ax]) + 1
                if (o - 1) * strides[ax] >= in_sp[ax] + begin[ax]:  # window would start in the end padding
                    o -= 1
            else:
                o = span // strides[ax] + 1
            outs.append(o)
        out = tuple(outs)
    inner_end = end
    end = tuple(max(e, (o - 1) * s + k - i - b) for e, o, s, k, i, b in zip(end, out, strides, dk, in_sp, begin))
    return Geometry(begin, end, out, dk, inner_end)


def pad_input(x: np.ndarray, begin: Sequence[int], end: Sequence[int], value=0) -> np.ndarray:
    """x padded on its spatial axes (a new array; x itself when there is nothing to pad)."""
    if not any(begin) and not any(end):
        return x
    shape = x.shape[:2] + tuple(d + b + e for d, b, e in zip(x.shape[2:], begin, end))
    if min(shape) >= 0:  # pads come from attributes / params: refuse a buffer they cannot justify
        check_elements(shape, "padded input")
    out = np.full(shape, value, dtype=x.dtype) if value != 0 else np.zeros(shape, dtype=x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(b, b + d) for b, d in zip(begin, x.shape[2:]))] = x
    return out


def tap_slices(tap: Sequence[int], dilations, strides, out) -> tuple:
    """Index of the inputs that kernel tap ``tap`` sees for every output position (on padded x)."""
    return (Ellipsis,) + tuple(
        slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, s, o in zip(tap, dilations, strides, out)
    )


def windows(xp: np.ndarray, kernel, strides, dilations, out) -> np.ndarray:
    """A read-only strided view (N, C, *kernel, *out) of the padded input ``xp``."""
    st = xp.strides
    n = len(kernel)
    shape = xp.shape[:2] + tuple(kernel) + tuple(out)
    strides_ = (
        st[:2] + tuple(st[2 + i] * dilations[i] for i in range(n)) + tuple(st[2 + i] * strides[i] for i in range(n))
    )
    return np.lib.stride_tricks.as_strided(xp, shape, strides_, writeable=False)


def check_float(x: np.ndarray, what: str) -> None:
    if not is_float(x.dtype):
        raise KernelError(f"{what} must be a float tensor, got {x.dtype}")


def check_rank(x: np.ndarray, what: str = "X") -> int:
    if x.ndim < 3:
        raise KernelError(f"{what} must have shape (N, C, D1, ...) with at least one spatial axis, got shape {x.shape}")
    return x.ndim - 2


def prod(v) -> int:
    return math.prod(int(a) for a in v)


class FlatTaps:
    """The padded input split into stride phases and laid out flat per (n, c) plane, so that each
    kernel tap reads ONE contiguous run ``run(t)`` of length ``L`` per plane for all output
    positions. Rows are computed at the phase width (junk columns past the output width);
    :meth:`crop` drops them. Vectorized tap loops then work on long contiguous inner loops.

    ``fill`` is the padding value (0 for sums, -inf for max).
    """

    def __init__(self, x: np.ndarray, geo: Geometry, kernel, strides, dilations, fill=0):
        N, C = x.shape[:2]
        (shape, copies, self.tail, self.row, self.L, self.runs) = _flat_plan(
            tuple(x.shape), geo.begin, geo.end, geo.out, tuple(kernel), tuple(strides), tuple(dilations)
        )
        self.out, self.kernel = geo.out, tuple(kernel)
        self.strides, self.dilations = tuple(strides), tuple(dilations)
        self.N, self.C, self.nph = N, C, shape[0]
        buf = np.empty(shape, x.dtype)
        for pi, dst, src, pads in copies:
            ph = buf[pi]
            ph[dst] = x[src]
            for pad in pads:  # the padding around the copied box
                ph[pad] = fill
        self.flat = buf.reshape(shape[0], N * C, prod(shape[3:]))

    def run(self, t: int, rows=slice(None)) -> np.ndarray:
        pi, off = self.runs[t]
        return self.flat[pi, rows, off : off + self.L]

    def all_runs(self, rows=slice(None)) -> np.ndarray | None:
        """Every tap's run at once, (rows, *kernel, L), as a strided view (stride 1 only)."""
        if self.nph != 1:
            return None
        f = self.flat[0, rows]
        isz = f.itemsize
        return np.lib.stride_tricks.as_strided(
            f,
            (f.shape[0],) + self.kernel + (self.L,),
            (f.strides[0],) + tuple(d * r * isz for d, r in zip(self.dilations, self.row)) + (isz,),
            writeable=False,
        )

    def crop(self, y: np.ndarray, lead: tuple) -> np.ndarray:
        """(rows, ..., L) results -> lead + out, dropping the junk columns (a copy only if any)."""
        y = y.reshape(lead + (self.out[0],) + self.tail)
        if len(self.out) > 1 and self.tail != tuple(self.out[1:]):
            y = np.ascontiguousarray(y[(Ellipsis,) + tuple(slice(0, o) for o in self.out[1:])])
        return y


@functools.lru_cache(maxsize=1024)
def _flat_plan(xshape, begin, end, out, kernel, strides, dilations):
    """The shape-only part of :class:`FlatTaps`: buffer shape, phase copies, tap runs."""
    N, C = xshape[:2]
    n = len(kernel)
    sp = tuple(d + b + e for d, b, e in zip(xshape[2:], begin, end))
    Q = [-(-S // s) for S, s in zip(sp, strides)]
    Q0 = Q[0] + (1 if n > 1 else 0)  # a spare row: the last tap's run may spill past the end
    nph = prod(strides)
    shape = (nph, N, C, Q0) + tuple(Q[1:])
    copies = []
    for pi, a in enumerate(np.ndindex(*strides)):
        # phase a holds padded positions a + q * s, i.e. x[a + q * s - begin] where that exists
        dst, src = [], []
        for ai, si, b, D in zip(a, strides, begin, xshape[2:]):
            q0 = max(0, -(-(b - ai) // si))
            x0 = ai + q0 * si - b
            cnt = max(0, -(-(D - x0) // si))
            dst.append((q0, q0 + cnt))
            src.append(slice(x0, x0 + (cnt - 1) * si + 1 if cnt else x0, si))
        pads = []
        for ax, (lo, hi) in enumerate(dst):
            pre = (slice(None),) * (2 + ax)
            pads += [pre + (slice(0, lo),), pre + (slice(hi, None),)]
        copies.append((pi, (Ellipsis,) + tuple(slice(lo, hi) for lo, hi in dst), (Ellipsis,) + tuple(src), tuple(pads)))
    row = tuple(prod(Q[i + 1 :]) for i in range(n))
    L = out[0] * row[0]
    runs = []
    for tap in np.ndindex(*kernel):
        pos = [k * d for k, d in zip(tap, dilations)]
        pi = int(np.ravel_multi_index([p % s for p, s in zip(pos, strides)], strides)) if nph > 1 else 0
        runs.append((pi, sum((p // s) * r for p, s, r in zip(pos, strides, row))))
    return shape, tuple(copies), tuple(Q[1:]), row, L, tuple(runs)
