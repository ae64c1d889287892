"""ONNX version adapters for the sequence kernels."""

from __future__ import annotations

import numpy as np

from ..opset import adapter


@adapter("SequenceEmpty", 11)
def _sequence_empty(ctx):
    """dtype is a TensorProto enum (default FLOAT)."""
    ctx.dtype_attr("dtype", np.dtype(np.float32))
    return ctx.bind()


@adapter("Optional", 15)
def _optional(ctx):
    """type is an onnx.TypeProto describing the element type: checked here, not needed at run time."""
    tp = ctx.attrs.pop("type", None)
    if tp is None and not any(ctx.input_present[:1]):
        raise ctx.error("Optional needs either an input or the 'type' attribute")
    return ctx.bind()
