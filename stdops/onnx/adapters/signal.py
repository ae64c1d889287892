"""ONNX version adapters for the signal kernels."""

from __future__ import annotations

import numpy as np

from ..opset import adapter


@adapter("DFT", 17)
def _dft_axis_attr(ctx):
    """DFT-17..19: ``axis`` is an attribute (default 1), an input from DFT-20 on (default -2)."""
    axis = np.asarray(int(ctx.attrs.pop("axis", 1)), np.int64)
    fn = ctx.bind()
    return lambda input, dft_length=None: fn(input, dft_length, axis)


@adapter("HannWindow", 17)
@adapter("HammingWindow", 17)
@adapter("BlackmanWindow", 17)
@adapter("MelWeightMatrix", 17)
def _output_datatype(ctx):
    """output_datatype: a TensorProto enum, default FLOAT."""
    ctx.dtype_attr("output_datatype", np.dtype(np.float32))
    return ctx.bind()
