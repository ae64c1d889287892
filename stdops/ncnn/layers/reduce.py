"""Reduction layers (ncnn-operators.txt): Reduction, ArgMax, CumulativeSum, on the shared kernels."""

from __future__ import annotations

import numpy as np

from ...errors import KernelError
from ...ops import elementwise, indexing, reduce
from ..spec import P, layer

_F32 = np.float32

#: Reduction operation -> shared kernel
REDUCTIONS = {
    0: reduce.reduce_sum,
    1: reduce.reduce_l1,
    2: reduce.reduce_sum_square,
    3: reduce.reduce_mean,
    4: reduce.reduce_max,
    5: reduce.reduce_min,
    6: reduce.reduce_prod,
    7: reduce.reduce_l1,
    8: reduce.reduce_l2,
    9: reduce.reduce_log_sum,
    10: reduce.reduce_log_sum_exp,
}
REDUCTION_NAMES = "sum asum sumsq mean max min prod l1 l2 logsum logsumexp".split()


@layer(
    "Reduction",
    params=[
        P(0, "operation", 0),
        P(1, "reduce_all", 1),
        P(2, "coeff", 1.0),
        P(3, "axes", (), kind="ints"),
        P(4, "keepdims", 0),
        P(5, "fixbug0", 0),
    ],
    kernels=(
        elementwise.mul,
        reduce.reduce_l1,
        reduce.reduce_l2,
        reduce.reduce_log_sum,
        reduce.reduce_log_sum_exp,
        reduce.reduce_max,
        reduce.reduce_mean,
        reduce.reduce_min,
        reduce.reduce_prod,
        reduce.reduce_sum,
        reduce.reduce_sum_square,
    ),
)
def reduction(p, w):
    """y = coeff * reduce_op(x) over ``axes`` (every axis with reduce_all=1; a 1d blob always reduces
    its only axis); ops 0 sum, 1 asum, 2 sumsq, 3 mean, 4 max, 5 min, 6 prod, 7 L1, 8 L2, 9 log(sum),
    10 log(sum(exp)). Axes count over the numpy blob shape (negative from the back). keepdims keeps
    size-1 axes; without it a full reduction gives a 1-element 1d blob. ncnn refuses axes without
    fixbug0=1 (params written before its axes fix). No axes and reduce_all=0 on a 2d+ blob reduces
    nothing (the elementwise part only)."""
    if p.operation not in REDUCTIONS:
        raise ValueError(f"Reduction operation {p.operation} is not one of 0..10")
    if p.fixbug0 == 0 and p.axes:
        raise ValueError("Reduction with axes needs fixbug0=1 (param file too old: regenerate it)")
    fn = REDUCTIONS[p.operation]
    keep = 1 if p.keepdims else 0
    coeff = None if p.coeff == 1.0 else np.asarray(p.coeff, _F32)
    mul = elementwise.mul

    def run(x):
        nd = x.ndim
        if p.reduce_all or nd == 1:
            axes = np.arange(nd, dtype=np.int64)
        else:
            ax = []
            for a in p.axes:
                b = a + nd if a < 0 else a
                if not 0 <= b < nd:
                    raise KernelError(f"Reduction: axis {a} is out of range for a {nd}d blob")
                if b not in ax:
                    ax.append(b)
            axes = np.array(sorted(ax), dtype=np.int64)
        y = fn(x, axes, keepdims=keep, noop_with_empty_axes=1)
        if y.ndim == 0:
            y = y.reshape(1)
        return y if coeff is None else mul(y, coeff)

    return run


@layer("ArgMax", params=[P(0, "out_max_val", 0), P(1, "topk", 1)], kernels=(indexing.top_k,))
def argmax(p, w):
    """The topk largest elements of the flattened blob, largest first (equal values: the higher index
    first): a (1, topk) blob of their indices (as floats), or with out_max_val a (2, topk) blob,
    row 0 the values and row 1 the indices."""
    if p.topk < 1:
        raise ValueError(f"ArgMax topk={p.topk} must be >= 1")
    k = p.topk
    top_k = indexing.top_k
    kk = np.array([k], np.int64)

    def run(x):
        flat = np.ascontiguousarray(x, _F32).reshape(-1)
        n = flat.size
        if k > n:
            raise KernelError(f"ArgMax: topk={k} but the blob has {n} elements")
        # top_k keeps the lower index among equal values: run it on the reversed blob
        vals, idx = top_k(flat[::-1], kk)
        idx = (n - 1 - idx).astype(_F32)
        if p.out_max_val:
            return np.stack([vals.astype(_F32), idx])
        return idx.reshape(1, k)

    return run


@layer("CumulativeSum", params=[P(0, "axis", 0)], kernels=(reduce.cum_sum,))
def cumulativesum(p, w):
    """y = cumulative sum of x along axis (negative counts from the back; a 1d blob ignores axis)."""
    fn = reduce.cum_sum

    def run(x):
        nd = x.ndim
        a = 0 if nd == 1 else (p.axis + nd if p.axis < 0 else p.axis)
        if not 0 <= a < nd:
            raise KernelError(f"CumulativeSum: axis {p.axis} is out of range for a {nd}d blob")
        return fn(x, np.array(a, np.int64))

    return run
