"""ncnn layer -> ONNX ops, one module per layer family; ``EMIT`` maps an ncnn layer type to its emitter.

An emitter receives a :class:`LayerCtx`: the loaded layer (resolved params ``p``, weights ``w``, the
front end's own declaration), the ONNX names of its bottoms and the static ncnn shapes of every bottom and
top (measured by running the model once). It appends ONNX nodes and hands each top back with ``put``.

Layout: an ncnn blob of shape ``s`` (no batch axis: (w,), (h, w), (c, h, w), (c, d, h, w)) is the ONNX
tensor of shape ``(1, *s)``: ncnn axis ``a`` is ONNX axis ``a + 1``. ``raw(k)`` gives a bottom without the
batch axis for emitters that compute in ncnn's own layout (MatMul, Gemm, attention); ``put(k, v, raw=True)``
restores it.
"""

from . import conv, dense, detection, elementwise, norm, pool, recurrent, resample, shape, spectral
from .base import EMIT, NO_ONNX_FORM, LayerCtx

__all__ = [
    "EMIT",
    "NO_ONNX_FORM",
    "LayerCtx",
    "conv",
    "dense",
    "detection",
    "elementwise",
    "norm",
    "pool",
    "recurrent",
    "resample",
    "shape",
    "spectral",
]
