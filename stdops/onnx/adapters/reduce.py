"""ONNX version adapters for the reduce kernels.

Reduce*-1/11/13 (ReduceSum-1/11) take ``axes`` as an attribute; from ReduceSum-13 / the others -18
it is an optional input. The adapter turns the attribute into the load-time input the kernel takes.
"""

from __future__ import annotations

import numpy as np

from ..opset import adapter

_AXES_ATTR = {
    "ReduceSum": 1,  # ReduceSum-1, -11
    "ReduceSumSquare": 1,
    "ReduceL1": 1,
    "ReduceL2": 1,
    "ReduceLogSum": 1,
    "ReduceLogSumExp": 1,
    "ReduceMean": 1,
    "ReduceProd": 1,
    "ReduceMax": 1,
    "ReduceMin": 1,  # -1, -11, (-12), -13
}


def _axes_attr(ctx):
    axes = ctx.attrs.pop("axes", None)
    fn = ctx.bind()
    if axes is None or len(axes) == 0:
        return lambda data: fn(data, None)
    axes = np.asarray(axes, np.int64)
    return lambda data: fn(data, axes)


for _op, _v in _AXES_ATTR.items():
    adapter(_op, _v)(_axes_attr)
