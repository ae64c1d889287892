"""Normalization layers (ncnn-operators.txt: LayerNorm, GroupNorm, InstanceNorm, RMSNorm, LRN, MVN, Normalize).

LayerNorm/GroupNorm/InstanceNorm/RMSNorm/LRN map onto the shared ONNX-style kernels; MVN (eps added to the
standard deviation) and Normalize (three eps modes, per-position/per-channel/whole-blob L2) have no matching
kernel and are written here.
"""

from __future__ import annotations

import numpy as np

from ...ops import elementwise, fused, norm
from ...ops import pool as pooling
from ...ops.bind import bind
from ..spec import P, W, layer

_F32 = np.float32


def _trailing_axes(x: np.ndarray, affine_size: int) -> int:
    """How many trailing numpy axes one LayerNorm/RMSNorm part spans: the w row, the (h, w) plane or the
    whole (d, h, w) channel, picked by affine_size as ncnn does (1d/2d: always the row)."""
    nd = x.ndim
    if nd <= 2:
        return 1
    if affine_size == x.shape[-1]:
        return 1
    if nd == 4 and affine_size == x.shape[-1] * x.shape[-2]:
        return 2
    return nd - 1


def _affine_like(vec: np.ndarray | None, x: np.ndarray, k: int) -> np.ndarray:
    """gamma / beta shaped as one normalized part. ncnn reads entry j for element j of the part
    (layernorm.cpp), so an affine_size beyond the part (c*h*w of a 3d blob) uses its first entries."""
    shape = x.shape[x.ndim - k :]
    if vec is None:
        return np.ones(shape, _F32)
    n = int(np.prod(shape))
    if vec.size < n:
        raise ValueError(f"affine_size {vec.size} does not fit a normalized part of shape {shape}")
    return vec[:n].reshape(shape)


@layer(
    "LayerNorm",
    params=[P(0, "affine_size", 0), P(1, "eps", 0.001), P(2, "affine", 1)],
    weights=lambda p: [W("gamma", p.affine_size), W("beta", p.affine_size)] if p.affine else [],
    kernels=(norm.layer_normalization, fused.layer_norm_rows),
)
def layer_norm(p, w):
    """y = (x - mean) / sqrt(var + eps) * gamma + beta over each row (affine_size == w), (h, w) plane or
    channel (the part affine_size selects). Over rows of affine_size values: the compiled row-wise step where the
    ``fast`` extra runs (stdops/ops/fused.py layer_norm_rows: 0.15 -> 0.04 ms on 128 rows of 256)."""
    ln = norm.layer_normalization
    gamma = w.get("gamma")
    beta = w.get("beta")
    eps = float(p.eps)
    size = int(p.affine_size)
    rows = None
    if size > 0 and (gamma is None or gamma.size == size) and (beta is None or beta.size == size):
        g1 = np.ones(size, _F32) if gamma is None else np.ascontiguousarray(gamma, _F32)
        b1 = None if beta is None else np.ascontiguousarray(beta, _F32)
        rows = bind(fused.layer_norm_rows, {"axis": -1, "epsilon": eps}, (None, g1, b1))

    def run(x):
        k = _trailing_axes(x, size)
        if rows is not None and k == 1 and x.shape[-1] == size:
            return rows(x, g1, b1)
        g = _affine_like(gamma, x, k)
        b = None if beta is None else _affine_like(beta, x, k)
        return ln(x, g, b, axis=-k, epsilon=eps)[0]

    return run


@layer(
    "RMSNorm",
    params=[P(0, "affine_size", 0), P(1, "eps", 0.001), P(2, "affine", 1)],
    weights=lambda p: [W("gamma", p.affine_size)] if p.affine else [],
    kernels=(norm.rms_normalization,),
)
def rms_norm(p, w):
    """y = x / sqrt(mean(x^2) + eps) * gamma over each row, (h, w) plane or channel (as LayerNorm)."""
    rms = norm.rms_normalization
    gamma = w.get("gamma")
    eps = float(p.eps)
    size = int(p.affine_size)

    def run(x):
        k = _trailing_axes(x, size)
        return rms(x, _affine_like(gamma, x, k), axis=-k, epsilon=eps)

    return run


@layer(
    "GroupNorm",
    params=[P(0, "group", 1), P(1, "channels", 0), P(2, "eps", 0.001), P(3, "affine", 1)],
    weights=lambda p: [W("gamma", p.channels), W("beta", p.channels)] if p.affine else [],
    kernels=(norm.group_normalization,),
)
def group_norm(p, w):
    """Channels split into `group` groups of consecutive channels, each normalized as one part, then
    y = x * gamma[c] + beta[c]. Channels are the w of a 1d blob, the rows of a 2d blob, the c of 3d/4d."""
    gn = norm.group_normalization
    groups = int(p.group)
    if groups <= 0:
        raise ValueError(f"group must be positive, got {groups}")
    eps = float(p.eps)
    gamma, beta = w.get("gamma"), w.get("beta")

    def run(x):
        xn = x[None, :, None] if x.ndim == 1 else x[None]
        c = xn.shape[1]
        if c % groups:
            raise ValueError(f"GroupNorm: {c} channels do not split into {groups} groups")
        g = np.ones(c, _F32) if gamma is None else gamma
        b = np.zeros(c, _F32) if beta is None else beta
        y = gn(xn, g, b, num_groups=groups, epsilon=eps)
        return y.reshape(x.shape)

    return run


@layer(
    "InstanceNorm",
    params=[P(0, "channels", 0), P(1, "eps", 0.001), P(2, "affine", 1)],
    weights=lambda p: [W("gamma", p.channels), W("beta", p.channels)] if p.affine else [],
    kernels=(norm.instance_normalization,),
)
def instance_norm(p, w):
    """Each channel of a 3d/4d blob: y = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c]."""
    inorm = norm.instance_normalization
    eps = float(p.eps)
    gamma, beta = w.get("gamma"), w.get("beta")

    def run(x):
        if x.ndim < 3:
            raise ValueError(f"InstanceNorm takes a 3d or 4d blob, got shape {x.shape}")
        c = x.shape[0]
        g = np.ones(c, _F32) if gamma is None else gamma
        b = np.zeros(c, _F32) if beta is None else beta
        return inorm(x[None], g, b, epsilon=eps)[0]

    return run


@layer(
    "LRN",
    params=[P(0, "region_type", 0), P(1, "local_size", 5), P(2, "alpha", 1.0), P(3, "beta", 0.75), P(4, "bias", 1.0)],
    kernels=(pooling.average_pool, norm.lrn, elementwise.pow_),
)
def lrn(p, w):
    """y = x * (bias + alpha / n * square_sum)^-beta; square_sum over the channel window of local_size
    channels starting at c - local_size/2 (region_type 0, n = local_size) or over the local_size^2 spatial
    window with zero padding local_size/2 before (region_type 1, n = local_size^2)."""
    size = int(p.local_size)
    alpha, beta, bias = float(p.alpha), float(p.beta), float(p.bias)
    if size <= 0:
        raise ValueError(f"local_size must be positive, got {size}")
    if p.region_type == 0:
        # the wheel's window is the local_size channels [c - local_size/2, c - local_size/2 + local_size - 1];
        # the ONNX kernel's is [c - (local_size-1)/2, ...]: equal for odd sizes, mirrored for even ones,
        # so an even size runs the kernel on the channel-reversed blob.
        k = norm.lrn
        if size % 2:
            return lambda x: k(x[None], size=size, alpha=alpha, beta=beta, bias=bias)[0]
        return lambda x: k(x[None, ::-1], size=size, alpha=alpha, beta=beta, bias=bias)[0, ::-1]
    if p.region_type == 1:
        pad = size // 2
        pool = pooling.average_pool
        pads = [pad, pad, size - pad - 1, size - pad - 1]
        b32, a32, nb = _F32(bias), _F32(alpha), _F32(-beta)

        def within(x):
            mean_sq = pool((x * x)[None], kernel_shape=[size, size], pads=pads, count_include_pad=1)[0]
            return x * elementwise.pow_(b32 + a32 * mean_sq, nb)

        return within
    raise ValueError(f"region_type must be 0 (across channels) or 1 (within channel), got {p.region_type}")


@layer(
    "MVN",
    params=[P(0, "normalize_variance", 0), P(1, "across_channels", 0), P(2, "eps", 0.0001)],
    kernels=(elementwise.sqrt,),
    ncnn_only="ncnn's MVN adds eps to the standard deviation, not to the variance (ONNX's "
    "MeanVarianceNormalization has neither), and normalizes the mean alone unless normalize_variance",
)
def mvn(p, w):
    """y = x - mean, then / (sqrt(mean(y^2)) + eps) when normalize_variance; statistics per channel or
    over the whole blob (across_channels)."""
    eps = _F32(p.eps)
    norm_var = bool(p.normalize_variance)
    across = bool(p.across_channels)

    def run(x):
        axes = tuple(range(x.ndim)) if across else tuple(range(1, x.ndim))
        y = x - x.mean(axis=axes, keepdims=True, dtype=_F32)
        if norm_var:
            y = y * (_F32(1) / (elementwise.sqrt((y * y).mean(axis=axes, keepdims=True, dtype=_F32)) + eps))
        return y.astype(_F32, copy=False)

    return run


@layer(
    "Normalize",
    params=[
        P(0, "across_spatial", 0),
        P(1, "channel_shared", 0),
        P(2, "eps", 0.0001),
        P(3, "scale_data_size", 0),
        P(4, "across_channel", 1),
        P(9, "eps_mode", 0),
    ],
    weights=lambda p: [W("scale", p.scale_data_size)],
    kernels=(elementwise.sqrt,),
    ncnn_only="ncnn's three eps modes (eps inside the sqrt, a floor on the norm, a floor on the sum of "
    "squares) and per-channel scales: ONNX's LpNormalization has no eps and no scale",
)
def normalize(p, w):
    """L2 normalization of the whole blob (across_spatial and across_channel), of each channel
    (across_spatial only) or of each position across channels (across_channel only), times scale
    (one value if channel_shared, else per channel). eps_mode 0: 1/sqrt(ss + eps), 1: 1/max(sqrt(ss), eps),
    2: 1/sqrt(max(ss, eps)). Neither flag: y = x."""
    eps = _F32(p.eps)
    mode = int(p.eps_mode)
    scale = w["scale"]
    spatial, channel = bool(p.across_spatial), bool(p.across_channel)
    if not (spatial or channel):
        return lambda x: x
    if scale.size < 1:
        raise ValueError("Normalize needs at least one scale value")

    def inv_norm(ss):
        if mode == 0:
            return _F32(1) / elementwise.sqrt(ss + eps)
        if mode == 1:
            return _F32(1) / np.maximum(elementwise.sqrt(ss), eps)
        return _F32(1) / elementwise.sqrt(np.maximum(ss, eps))

    def run(x):
        c = x.shape[0]
        if p.channel_shared:
            s = scale[:1].reshape((1,) * x.ndim)
        else:
            if scale.size < c:
                raise ValueError(f"Normalize has {scale.size} scale values for {c} channels")
            s = scale[:c].reshape((c,) + (1,) * (x.ndim - 1))
        axes = tuple(range(x.ndim)) if spatial and channel else tuple(range(1, x.ndim)) if spatial else (0,)
        a = inv_norm((x * x).sum(axis=axes, keepdims=True, dtype=_F32))
        return (x * (a * s)).astype(_F32, copy=False)

    return run
