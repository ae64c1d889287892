"""ONNX version adapters for the cast kernels.

- Cast-1: ``to`` is a type name (STRING attribute, e.g. "FLOAT"); Cast-6 on: a TensorProto enum.
  Both become the numpy dtype the kernel takes, once, at load time.
- BitCast-26: ``to`` is a TensorProto enum.
"""

from __future__ import annotations

from ..opset import adapter, onnx_dtype


@adapter("Cast", 1)
def _cast_to_name(ctx):
    from onnx import TensorProto

    to = ctx.attrs.get("to")
    if isinstance(to, bytes):
        to = to.decode()
    if isinstance(to, str):
        try:
            ctx.attrs["to"] = onnx_dtype(TensorProto.DataType.Value(to.upper()), ctx)
        except ValueError:
            raise ctx.error(f"unknown type name to={to!r}") from None
        return ctx.bind()
    ctx.dtype_attr("to")
    return ctx.bind()


@adapter("Cast", 6)
@adapter("BitCast", 26)
def _to_enum(ctx):
    ctx.dtype_attr("to")
    return ctx.bind()
