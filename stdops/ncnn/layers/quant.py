"""ncnn's int8 layers: Quantize, Dequantize, Requantize (ncnn-operators.txt), and the int8 helpers the
convolution and dense layers share.

ncnn's int8 is its own: symmetric, scale multiplies (x * scale, not x / scale), rounding half away from
zero (C ``round``) and saturation to [-127, 127] (never -128). No ONNX kernel rounds that way, so the
rounding lives here. Per-row (2d) or per-channel (3d/4d) scales and biases: a size-1 table broadcasts.
An int8 blob is an ``np.int8`` array; an int32 accumulator blob an ``np.int32`` array (a float blob fed to
Dequantize/Requantize is read by value).
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelError
from ..activation import FUSED, fused_activation
from ..spec import P, W, layer


def float2int8(v: np.ndarray) -> np.ndarray:
    """round-half-away-from-zero(v) saturated to [-127, 127], as int8. ``v`` is the float32 product ncnn
    computes; the rounding runs in float64, where adding 0.5 to a float32 value is exact. (ncnn's SIMD paths
    add 0.5 in float32, which differs only for values one ulp below a .5 tie; this is the reference rule.)"""
    v64 = np.asarray(v, dtype=np.float32).astype(np.float64)
    r = np.trunc(v64 + np.copysign(0.5, v64))
    np.clip(r, -127, 127, out=r)
    return r.astype(np.int8)


def quantize_rows(w: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """int8 weights: row r of ``w`` (rows = len(scales)) times scales[r], rounded and saturated."""
    s = np.asarray(scales, np.float32).reshape(-1, 1)
    return float2int8(w.reshape(s.shape[0], -1) * s).reshape(w.shape)


def int8_input(x: np.ndarray, scale: np.float32) -> np.ndarray:
    """A blob as int8: int8 blobs pass through, float blobs are quantized with ``scale``."""
    if x.dtype == np.int8:
        return x
    return float2int8(x.astype(np.float32, copy=False) * np.float32(scale))


def dequant_scales(weight_scales: np.ndarray, bottom_scale: float) -> np.ndarray:
    """1 / (bottom_scale * weight_scale) per output, 0 where the weight scale is 0 (float32)."""
    ws = np.asarray(weight_scales, np.float32)
    prod = np.float32(bottom_scale) * ws
    with np.errstate(divide="ignore"):
        inv = np.float32(1) / prod
    return np.where(ws == 0, np.float32(0), inv).astype(np.float32)


def int8_epilogue(acc, descale, bias=None, act=None, top_scale=None) -> np.ndarray:
    """The end of every ncnn int8 layer, written once: y = act(acc * descale + bias) in float32
    (``acc`` the exact int32 sums, or values read as such), and for a requantizing layer
    (int8_scale_term > 100, Requantize) the int8 blob float2int8(y * top_scale)."""
    y = np.asarray(acc).astype(np.float32) * descale
    if bias is not None:
        y = y + bias
    y = y.astype(np.float32, copy=False)
    if act is not None:
        y = act(y)
    if top_scale is not None:
        return float2int8(y * top_scale)
    return y


def _per_axis(table: np.ndarray, x: np.ndarray, what: str) -> np.ndarray:
    """A scale/bias table broadcast the ncnn way: size 1 everywhere; else one per row (2d) or per channel
    (3d, 4d); a 1d blob takes a single value."""
    n = table.size
    if n == 1:
        return table.reshape(())
    axis_len = x.shape[0] if x.ndim >= 2 else None
    if axis_len is None or n != axis_len:
        raise KernelError(
            f"{what} has {n} values; a {x.ndim}d blob of shape {x.shape} needs 1"
            + (f" or {axis_len}" if axis_len is not None else "")
        )
    return table.reshape((n,) + (1,) * (x.ndim - 1))


def _as_values(x: np.ndarray) -> np.ndarray:
    """An int32/int8 blob as its values; a float blob by value."""
    if x.dtype.kind in "iu":
        return x.astype(np.float32)
    return x.astype(np.float32, copy=False)


@layer(
    "Quantize",
    params=[P(0, "scale_data_size", 1)],
    weights=lambda p: [W("scale_data", p.scale_data_size)],
    ncnn_only="ncnn's int8: x times the scale, rounded half away from zero, saturated to [-127, 127]; "
    "ONNX's QuantizeLinear divides by it and rounds half to even",
)
def quantize(p, w):
    """y = float2int8(x * scale): round half away from zero, saturate to [-127, 127]; int8 output.
    scale: one value, or one per row (2d) / channel (3d, 4d)."""
    scale = w["scale_data"].astype(np.float32)
    if scale.size < 1:
        raise KernelError("Quantize needs at least one scale")

    def run(x):
        return float2int8(x.astype(np.float32, copy=False) * _per_axis(scale, x, "scale_data"))

    return run


@layer(
    "Dequantize",
    params=[P(0, "scale_data_size", 1), P(1, "bias_data_size", 0)],
    weights=lambda p: [
        W("scale_data", p.scale_data_size),
        *([W("bias_data", p.bias_data_size)] if p.bias_data_size else []),
    ],
    ncnn_only="ncnn's int8 dequantization: int32 accumulators times a per-row/channel scale plus a bias "
    "(the shared int8 epilogue); ONNX's DequantizeLinear subtracts a zero point and has no bias",
)
def dequantize(p, w):
    """y = x * scale + bias (x: int32 accumulators, read by value); float32 output. scale and bias: one
    value, or one per row (2d) / channel (3d, 4d)."""
    scale = w["scale_data"].astype(np.float32)
    bias = w.get("bias_data")
    if scale.size < 1:
        raise KernelError("Dequantize needs at least one scale")

    def run(x):
        b = None if bias is None else _per_axis(bias, x, "bias_data")
        return int8_epilogue(_as_values(x), _per_axis(scale, x, "scale_data"), b)

    return run


@layer(
    "Requantize",
    params=[
        P(0, "scale_in_data_size", 1),
        P(1, "scale_out_data_size", 1),
        P(2, "bias_data_size", 0),
        P(3, "activation_type", 0),
        P(4, "activation_params", (), kind="floats"),
    ],
    weights=lambda p: [
        W("scale_in_data", p.scale_in_data_size),
        W("scale_out_data", p.scale_out_data_size),
        *([W("bias_data", p.bias_data_size)] if p.bias_data_size else []),
    ],
    kernels=FUSED,
    ncnn_only="ncnn's int8 requantization (the shared int8 epilogue: scale, bias, activation, int8 "
    "rounded half away from zero); no ONNX operator requantizes int32 sums this way",
)
def requantize(p, w):
    """y = float2int8(activation(x * scale_in + bias) * scale_out) (x: int32 accumulators, read by value);
    int8 output. Tables: one value, or one per row (2d) / channel (3d, 4d)."""
    s_in = w["scale_in_data"].astype(np.float32)
    s_out = w["scale_out_data"].astype(np.float32)
    bias = w.get("bias_data")
    if s_in.size < 1 or s_out.size < 1:
        raise KernelError("Requantize needs scale_in and scale_out values")
    act = fused_activation(p.activation_type, p.activation_params)

    def run(x):
        b = None if bias is None else _per_axis(bias, x, "bias_data")
        descale, top = _per_axis(s_in, x, "scale_in_data"), _per_axis(s_out, x, "scale_out_data")
        return int8_epilogue(_as_values(x), descale, b, act, top)

    return run
