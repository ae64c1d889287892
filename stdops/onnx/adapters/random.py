"""ONNX version adapters for the random kernels: dtype enums, and Dropout before opset 12."""

from __future__ import annotations

import numpy as np

from ..opset import adapter


@adapter("RandomNormal", 1)
@adapter("RandomUniform", 1)
def _random_dtype_float(ctx):
    """dtype: a TensorProto enum, default FLOAT."""
    ctx.dtype_attr("dtype", np.dtype(np.float32))
    return ctx.bind()


@adapter("RandomNormalLike", 1)
@adapter("RandomUniformLike", 1)
@adapter("Bernoulli", 15)
def _random_dtype_like(ctx):
    """dtype: a TensorProto enum; absent = the input's dtype."""
    ctx.dtype_attr("dtype", None)
    return ctx.bind()


@adapter("Multinomial", 7)
def _multinomial(ctx):
    """dtype: a TensorProto enum, default INT32."""
    ctx.dtype_attr("dtype", np.dtype(np.int32))
    return ctx.bind()


@adapter("Dropout", 1, 6, 7, 10)
def _dropout_ratio_attr(ctx):
    """Dropout-1..10: ``ratio`` is an attribute; -1/-6 have ``is_test`` (and -1 ``consumed_inputs``).

    An inference runtime runs these in test mode: output = data, mask all ones (before Dropout-10 the
    mask has the data's dtype, from 10 on it is bool). There is no ``seed`` before 12.
    """
    ratio = float(ctx.attrs.pop("ratio", 0.5))
    ctx.attrs.pop("is_test", None)
    ctx.attrs.pop("consumed_inputs", None)
    if not 0.0 <= ratio <= 1.0:
        raise ctx.error(f"Dropout ratio must be in [0, 1), got {ratio}")
    fn = ctx.bind()
    r = np.asarray(ratio, np.float32)
    if ctx.since >= 10:
        return lambda data: fn(data, r, None)

    def dropout_old(data):
        out, mask = fn(data, r, None)
        return out, mask.astype(np.asarray(data).dtype)

    return dropout_old
