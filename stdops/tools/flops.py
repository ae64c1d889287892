"""Floating-point operations of one executed node, estimated from its input and output shapes.

A multiply-add counts 2. The estimate is what the operation's definition does, not what a kernel does
(a Winograd or im2col path does other work): it is the number a user compares across runtimes. Operations
that only move data (Reshape, Transpose, Concat, ncnn Split, ...) count 0; an operation with no rule
here is None (shown as "-"), never a guess.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: ops whose every output element costs about one operation (ONNX and ncnn names)
_PER_ELEMENT = frozenset(
    """Add Sub Mul Div Pow Max Min Mean Sum Abs Neg Exp Log Sqrt Reciprocal Relu LeakyRelu PRelu Elu Selu Celu
    Sigmoid HardSigmoid Tanh Softplus Softsign HardSwish Mish Gelu Erf Sin Cos Tan Asin Acos Atan Sinh Cosh Floor
    Ceil Round Sign Clip Where Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor Not Mod BitShift Dropout
    ThresholdedRelu Shrink BinaryOp UnaryOp ReLU Sigmoid TanH Swish HardSwish HardSigmoid ELU SELU CELU GELU Clip
    Exp Log Power Threshold AbsVal Bias Scale Eltwise Dequantize Quantize Requantize Erf""".split()
)
#: ops that move or select data without arithmetic
_NO_ARITHMETIC = frozenset(
    """Reshape Flatten Transpose Squeeze Unsqueeze Concat Split Slice Gather GatherElements GatherND Identity Shape
    Size Expand Tile Pad Cast CastLike ConstantOfShape Range DepthToSpace SpaceToDepth ScatterND ScatterElements
    Permute Crop Noop Input MemoryData Packing Padding Reorg PixelShuffle ShuffleChannel Squeeze ExpandDims Tile
    Flip Copy Constant Embed""".split()
)
_REDUCTIONS = frozenset(
    """ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp
    ReduceSumSquare ArgMax ArgMin GlobalAveragePool GlobalMaxPool GlobalLpPool Reduction""".split()
)
#: per-element cost of normalizations and softmax-like ops (a few passes over the data)
_PER_ELEMENT_K = {
    "Softmax": 5,
    "LogSoftmax": 5,
    "BatchNormalization": 2,
    "BatchNorm": 2,
    "InstanceNormalization": 5,
    "InstanceNorm": 5,
    "LayerNormalization": 5,
    "LayerNorm": 5,
    "GroupNormalization": 5,
    "GroupNorm": 5,
    "RMSNormalization": 4,
    "RMSNorm": 4,
    "LRN": 5,
    "Normalize": 4,
    "MVN": 5,
}


def _size(v: Any) -> int:
    return int(v.size) if isinstance(v, np.ndarray) else 0


def _first(v: Any) -> Any:
    return v[0] if isinstance(v, tuple) else v


def estimate(op: str, inputs: list, result: Any, attrs: dict[str, Any] | None = None, params: Any = None) -> int | None:
    """FLOPs of one node: ``inputs`` and ``result`` as the step saw them; ``attrs`` the ONNX node's
    attributes, ``params`` the ncnn layer's resolved params (one of them, or neither)."""
    out = _first(result)
    n_out = _size(out)
    x = inputs[0] if inputs else None
    if op in _NO_ARITHMETIC:
        return 0
    if op in _PER_ELEMENT:
        return n_out
    if op in _PER_ELEMENT_K:
        return _PER_ELEMENT_K[op] * n_out
    if op in _REDUCTIONS:
        return _size(x)
    attrs = attrs or {}
    if params is not None:
        return _ncnn(op, x, out, params)
    if op in ("Conv", "ConvInteger", "QLinearConv") and len(inputs) > 1 and isinstance(inputs[1], np.ndarray):
        w = inputs[1 if op != "QLinearConv" else 3]
        return 2 * n_out * math.prod(w.shape[1:]) + (n_out if len(inputs) > 2 and inputs[2] is not None else 0)
    if op == "ConvTranspose" and len(inputs) > 1:
        return 2 * _size(x) * math.prod(inputs[1].shape[1:])
    if op in ("MatMul", "MatMulInteger") and isinstance(x, np.ndarray) and x.ndim >= 1:
        return 2 * n_out * int(x.shape[-1])
    if op == "Gemm" and isinstance(x, np.ndarray) and x.ndim == 2:
        k = x.shape[0] if attrs.get("transA", 0) else x.shape[1]
        return 2 * n_out * int(k) + (n_out if len(inputs) > 2 and inputs[2] is not None else 0)
    if op in ("MaxPool", "AveragePool", "LpPool") and "kernel_shape" in attrs:
        return n_out * math.prod(attrs["kernel_shape"])
    if op == "Einsum" and isinstance(x, np.ndarray):
        return None
    return None


def _ncnn(op: str, x: Any, out: Any, p: Any) -> int | None:
    n_out = _size(out)

    def get(name: str, default: int = 0) -> int:  # an integer param of the layer (ncnn's are ints)
        value: int = getattr(p, name, default)
        return value

    # weight_data_size / num_output taps feed each output element (depthwise: kernel_w * kernel_h of them)
    if (op.startswith("Convolution") or op == "InnerProduct") and get("num_output") > 0:
        per_output = get("weight_data_size") // get("num_output")
        return 2 * n_out * per_output + (n_out if get("bias_term") else 0)
    if op in ("Deconvolution", "DeconvolutionDepthWise", "Deconvolution1D", "Deconvolution3D") and x is not None:
        c_in = int(x.shape[0]) if x.ndim else 1
        return 2 * _size(x) * (get("weight_data_size") // max(1, c_in))
    if op in ("Pooling", "Pooling1D", "Pooling3D"):
        if get("global_pooling"):
            return _size(x)
        return n_out * max(1, get("kernel_w", 1)) * max(1, get("kernel_h", 1)) * max(1, get("kernel_d", 1))
    if op in ("MatMul", "Gemm") and isinstance(x, np.ndarray) and x.ndim >= 1:
        k = x.shape[0] if (op == "Gemm" and get("transA")) else x.shape[-1]
        return 2 * n_out * int(k)
    return None
