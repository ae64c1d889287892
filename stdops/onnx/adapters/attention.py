"""ONNX version adapters for the attention kernels."""

from __future__ import annotations

from ..opset import adapter


@adapter("Attention", 23)
def _attention(ctx):
    """softmax_precision is a TensorProto enum (absent: the inputs' precision); the window attributes
    exist from Attention-25 on and the nonpad_kv_seqlen input from 24 on."""
    ctx.dtype_attr("softmax_precision", None)
    if ctx.opset < 25:
        for a in ("left_window_size", "right_window_size"):
            if a in ctx.attrs:
                raise ctx.error(f"attribute {a} needs Attention-25 (model opset {ctx.opset})")
    if ctx.opset < 24 and ctx.n_inputs > 6:
        raise ctx.error(f"input nonpad_kv_seqlen needs Attention-24 (model opset {ctx.opset})")
    return ctx.bind()
