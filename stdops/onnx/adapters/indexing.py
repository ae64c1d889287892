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


_REDUCTIONS = ("none", "add", "mul", "max", "min")


@adapter("ScatterElements", 11)
@adapter("ScatterND", 11)
def _scatter_check_reduction(ctx):
    """Same meaning from 11 on (reduction none = plain assignment); the reduction name is
    checked at load time (add/mul arrived in 16, max/min in 18; accepted at any version)."""
    red = ctx.attrs.get("reduction", "none")
    if red not in _REDUCTIONS:
        raise ctx.error(f"reduction {red!r} is not one of {', '.join(_REDUCTIONS)}")
    return ctx.bind()


@adapter("TensorScatter", 24)
def _tensor_scatter_check_mode(ctx):
    """The write mode is checked at load time."""
    mode = ctx.attrs.get("mode", "linear")
    if mode not in ("linear", "circular"):
        raise ctx.error(f"mode {mode!r} is not linear or circular")
    return ctx.bind()
