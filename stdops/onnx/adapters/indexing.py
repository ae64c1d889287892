"""ONNX version adapters for the indexing kernels."""
from __future__ import annotations

import numpy as np

from ..opset import adapter


@adapter("TopK", 1)
def _top_k_attr(ctx):
    """TopK-1: k is an attribute (TopK-10 made it an input)."""
    if "k" not in ctx.attrs:
        raise ctx.error("missing required attribute k")
    k = np.array([int(ctx.attrs.pop("k"))], np.int64)
    fn = ctx.bind()
    return lambda x: fn(x, k)


@adapter("OneHot", 9)
def _one_hot_no_wrap(ctx):
    """OneHot-9: indices outside [0, depth) (negative ones included) give all-off rows;
    OneHot-11 wraps negative indices."""
    fn = ctx.bind()

    def one_hot_9(indices, depth, values):
        ind = np.asarray(indices)
        if ind.dtype.kind in "iuf" and ind.size and (ind < 0).any():
            if ind.dtype.kind == "f":
                ind = np.where(ind < 0, ind.dtype.type(np.inf), ind)
            else:
                ind = np.where(ind < 0, np.iinfo(np.int64).max, ind.astype(np.int64))
        return fn(ind, depth, values)

    return one_hot_9
