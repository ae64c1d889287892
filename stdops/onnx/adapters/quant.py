"""ONNX version adapters for the quant kernels.

From QuantizeLinear-21 / DequantizeLinear-23 on, ``output_dtype`` (and QuantizeLinear-23's
``precision``) are TensorProto data type enums: converted once, at load time, to NumPy dtypes
(0 means unset and is dropped).
"""

from __future__ import annotations

from ..opset import adapter


def _dtype_attrs(ctx, *names):
    for name in names:
        if name in ctx.attrs:
            if int(ctx.attrs[name]) == 0:
                del ctx.attrs[name]
            else:
                ctx.dtype_attr(name)
    return ctx.bind()


@adapter("QuantizeLinear", 21)
def _quantize_linear_dtype_enums(ctx):
    return _dtype_attrs(ctx, "output_dtype", "precision")


@adapter("DequantizeLinear", 23)
def _dequantize_linear_dtype_enums(ctx):
    return _dtype_attrs(ctx, "output_dtype")
