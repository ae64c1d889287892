"""ONNX version adapters for the linalg kernels.

Gemm-1 and Gemm-6 have a ``broadcast`` attribute (C broadcasts only when it is 1); from Gemm-7 on,
C always broadcasts unidirectionally. The kernel broadcasts C to (M, N) in every case, which is
what a valid Gemm-1/6 model with broadcast=0 (C already (M, N)) computes too.
"""

from __future__ import annotations

from ..opset import adapter


@adapter("Gemm", 1)
def _gemm_broadcast_attr(ctx):
    ctx.attrs.pop("broadcast", None)
    return ctx.bind()
