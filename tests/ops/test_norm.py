"""Normalization kernels against independent float64 formulas written here."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.errors import KernelError
from stdops.ops.norm import (
    batch_normalization,
    group_normalization,
    instance_normalization,
    layer_normalization,
    lp_normalization,
    lrn,
    mean_variance_normalization,
    rms_normalization,
)

RNG = np.random.default_rng(1234)


def rand(*shape, dtype=np.float32, scale=1.0, offset=0.0):
    return (RNG.standard_normal(shape) * scale + offset).astype(dtype)


def close(got, want, dtype, rtol=None, atol=None):
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    assert got.shape == np.shape(want)
    tol = {
        np.dtype(np.float16): (3e-3, 3e-3),
        np.dtype(np.float32): (1e-5, 1e-5),
        np.dtype(np.float64): (1e-12, 1e-12),
    }[np.dtype(dtype)]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol or tol[0], atol=atol or tol[1])


def chan(v, ndim):
    return np.asarray(v, np.float64).reshape((1, -1) + (1,) * (ndim - 2))


# ----------------------------------------------------------------------------- BatchNormalization


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 2, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_batchnorm_inference(shape, dtype):
    c = shape[1]
    x, s, b, m = rand(*shape, dtype=dtype), rand(c, dtype=dtype), rand(c, dtype=dtype), rand(c, dtype=dtype)
    v = np.abs(rand(c, dtype=dtype)) + dtype(0.1)
    eps = 1e-3
    y = batch_normalization(x, s, b, m, v, epsilon=eps)
    nd = len(shape)
    want = (x.astype(np.float64) - chan(m, nd)) / np.sqrt(chan(v, nd) + eps) * chan(s, nd) + chan(b, nd)
    close(y, want, dtype)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 4, 5)])
@pytest.mark.parametrize("momentum", [0.9, 0.5])
def test_batchnorm_training(shape, momentum):
    c, nd = shape[1], len(shape)
    x, s, b, m = rand(*shape), rand(c), rand(c), rand(c)
    v = np.abs(rand(c)) + np.float32(0.1)
    y, rm, rv = batch_normalization(x, s, b, m, v, training_mode=1, momentum=momentum)
    axes = (0,) + tuple(range(2, nd))
    xd = x.astype(np.float64)
    bm, bv = xd.mean(axis=axes), xd.var(axis=axes)
    want = (xd - chan(bm, nd)) / np.sqrt(chan(bv, nd) + 1e-5) * chan(s, nd) + chan(b, nd)
    close(y, want, np.float32)
    close(rm, m * momentum + bm * (1 - momentum), np.float32)
    close(rv, v * momentum + bv * (1 - momentum), np.float32)


def test_batchnorm_inference_returns_one_array_and_keeps_inputs():
    x, s, b, m, v = rand(2, 3, 4), rand(3), rand(3), rand(3), np.ones(3, np.float32)
    keep = [a.copy() for a in (x, s, b, m, v)]
    y = batch_normalization(x, s, b, m, v)
    assert isinstance(y, np.ndarray)
    for a, k in zip((x, s, b, m, v), keep):
        np.testing.assert_array_equal(a, k)


def test_batchnorm_errors():
    x = rand(2, 3, 4)
    ok = [rand(3) for _ in range(4)]
    with pytest.raises(KernelError, match="scale"):
        batch_normalization(x, rand(4), *ok[1:])
    with pytest.raises(KernelError, match="input_var"):
        batch_normalization(x, *ok[:3], rand(2))
    with pytest.raises(KernelError, match="rank"):
        batch_normalization(rand(3), *ok)
    with pytest.raises(KernelError, match="floating"):
        batch_normalization(x.astype(np.int32), *ok)


# ----------------------------------------------------------------------------- InstanceNormalization


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 2, 3, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_instancenorm(shape, dtype):
    c, nd = shape[1], len(shape)
    x, s, b = rand(*shape, dtype=dtype, scale=3, offset=2), rand(c, dtype=dtype), rand(c, dtype=dtype)
    y = instance_normalization(x, s, b, epsilon=1e-4)
    xd = x.astype(np.float64)
    axes = tuple(range(2, nd))
    want = (xd - xd.mean(axes, keepdims=True)) / np.sqrt(xd.var(axes, keepdims=True) + 1e-4)
    close(y, want * chan(s, nd) + chan(b, nd), dtype)


def test_instancenorm_errors():
    with pytest.raises(KernelError, match="scale"):
        instance_normalization(rand(2, 3, 4), rand(2), rand(3))


# ----------------------------------------------------------------------------- LRN


def lrn_ref(x, size, alpha, beta, bias):
    xd = x.astype(np.float64)
    c = x.shape[1]
    sq = np.zeros_like(xd)
    lo_off, hi_off = (size - 1) // 2, -(-(size - 1) // 2)
    for ch in range(c):
        lo, hi = max(0, ch - lo_off), min(c - 1, ch + hi_off)
        sq[:, ch] = (xd[:, lo : hi + 1] ** 2).sum(axis=1)
    return xd / (bias + alpha / size * sq) ** beta


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 9])
@pytest.mark.parametrize("c", [1, 3, 6])
def test_lrn(size, c):
    x = rand(2, c, 3, 4)
    close(lrn(x, size=size, alpha=0.01, beta=0.6, bias=2.0), lrn_ref(x, size, 0.01, 0.6, 2.0), np.float32)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_lrn_defaults_dtypes(dtype):
    x = rand(1, 5, 4, dtype=dtype, scale=5)
    close(lrn(x, size=3), lrn_ref(x, 3, 1e-4, 0.75, 1.0), dtype)


def test_lrn_errors():
    with pytest.raises(KernelError, match="size"):
        lrn(rand(1, 3, 2), size=0)
    with pytest.raises(KernelError, match="rank"):
        lrn(rand(3), size=3)


# ----------------------------------------------------------------------------- LpNormalization


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_lp_normalization(p, axis):
    x = rand(3, 4, 5)
    x[1, :, 2] = 0  # a zero vector along axis 1
    x[:, 2, 3] = 0  # ... and along axis 0
    xd = x.astype(np.float64)
    norm = np.linalg.norm(xd, ord=p, axis=axis, keepdims=True)
    want = np.where(norm == 0, 0.0, xd / np.where(norm == 0, 1, norm))
    close(lp_normalization(x, axis=axis, p=p), want, np.float32)


def test_lp_normalization_defaults_and_errors():
    x = rand(2, 3, dtype=np.float64)
    close(lp_normalization(x), x / np.sqrt((x * x).sum(-1, keepdims=True)), np.float64)
    with pytest.raises(KernelError, match="p must"):
        lp_normalization(x, p=3)
    with pytest.raises(KernelError, match="axis"):
        lp_normalization(x, axis=2)


# ----------------------------------------------------------------------------- MeanVarianceNormalization


@pytest.mark.parametrize(
    "axes,shape", [((0, 2, 3), (2, 3, 4, 5)), ((1,), (3, 4)), ((-1, -2), (2, 3, 4)), ((0, 1, 2), (2, 3, 4))]
)
def test_mvn(axes, shape):
    x = rand(*shape, scale=2, offset=1)
    xd = x.astype(np.float64)
    ax = tuple(a % len(shape) for a in axes)
    mean = xd.mean(ax, keepdims=True)
    std = np.sqrt((xd**2).mean(ax, keepdims=True) - mean**2)
    close(mean_variance_normalization(x, axes=axes), (xd - mean) / (std + 1e-9), np.float32, rtol=1e-4, atol=1e-5)


def test_mvn_default_axes():
    x = rand(2, 3, 2, 2)
    xd = x.astype(np.float64)
    mean = xd.mean((0, 2, 3), keepdims=True)
    std = xd.std((0, 2, 3), keepdims=True)
    close(mean_variance_normalization(x), (xd - mean) / (std + 1e-9), np.float32)
    with pytest.raises(KernelError, match="axis"):
        mean_variance_normalization(rand(2, 3), axes=(0, 2))


# ----------------------------------------------------------------------------- LayerNormalization


def ln_ref(x, scale, bias, axis, eps):
    xd = x.astype(np.float64)
    axes = tuple(range(axis % x.ndim, x.ndim))
    mean = xd.mean(axes, keepdims=True)
    inv = 1 / np.sqrt(xd.var(axes, keepdims=True) + eps)
    y = (xd - mean) * inv * scale + (0 if bias is None else bias)
    return y, mean, inv


@pytest.mark.parametrize(
    "shape,axis",
    [
        ((2, 3, 4, 5), 0),
        ((2, 3, 4, 5), 2),
        ((2, 3, 4, 5), -1),
        ((2, 3, 4, 5), -3),
        ((3, 7), 1),
        ((3, 7), -2),
        ((6,), 0),
    ],
)
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_normalization(shape, axis, with_bias):
    x = rand(*shape, scale=2, offset=0.5)
    nshape = shape[axis % len(shape) :]
    s = rand(*nshape)
    b = rand(*nshape) if with_bias else None
    y, mean, inv = layer_normalization(x, s, b, axis=axis, epsilon=1e-3)
    wy, wm, wi = ln_ref(x, s, b, axis, 1e-3)
    close(y, wy, np.float32)
    close(mean, wm, np.float32)
    close(inv, wi, np.float32)


def test_layer_normalization_broadcast_scale_and_stash_types():
    x = rand(2, 3, 4, dtype=np.float64)
    s = rand(4, dtype=np.float64)  # broadcasts over the normalized (3, 4)
    y, mean, inv = layer_normalization(x, s, axis=1, stash_type=11)
    wy, wm, wi = ln_ref(x, s, None, 1, 1e-5)
    close(y, wy, np.float64)
    close(mean, wm, np.float64)
    close(inv, wi, np.float64)
    # stash_type 1 with a float64 input: statistics in float32
    y, mean, inv = layer_normalization(x, s, axis=1)
    assert mean.dtype == np.float32 and inv.dtype == np.float32 and y.dtype == np.float64
    np.testing.assert_allclose(y, wy, rtol=1e-5, atol=1e-5)


def test_layer_normalization_float16():
    x = rand(3, 8, dtype=np.float16)
    s = rand(8, dtype=np.float16)
    y, mean, inv = layer_normalization(x, s)
    assert mean.dtype == np.float32 and inv.dtype == np.float32
    close(y, ln_ref(x, s.astype(np.float64), None, -1, 1e-5)[0], np.float16, rtol=1e-2, atol=1e-2)


def test_layer_normalization_errors():
    x = rand(2, 3, 4)
    with pytest.raises(KernelError, match="axis"):
        layer_normalization(x, rand(4), axis=3)
    with pytest.raises(KernelError, match="Scale"):
        layer_normalization(x, rand(3))
    with pytest.raises(KernelError, match="stash_type"):
        layer_normalization(x, rand(4), stash_type=7)


# ----------------------------------------------------------------------------- GroupNormalization


@pytest.mark.parametrize("shape,groups", [((2, 6, 4, 3), 3), ((2, 6, 5), 1), ((3, 4, 2, 2), 4), ((2, 4), 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_group_normalization(shape, groups, dtype):
    n, c = shape[:2]
    x, s, b = rand(*shape, dtype=dtype, scale=2, offset=1), rand(c, dtype=dtype), rand(c, dtype=dtype)
    y = group_normalization(x, s, b, num_groups=groups, epsilon=1e-4, stash_type=11 if dtype == np.float64 else 1)
    xg = x.astype(np.float64).reshape(n, groups, -1)
    want = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-4)).reshape(shape)
    close(y, want * chan(s, len(shape)) + chan(b, len(shape)), dtype)


def test_group_normalization_errors():
    x = rand(2, 6, 3)
    with pytest.raises(KernelError, match="num_groups"):
        group_normalization(x, rand(6), rand(6), num_groups=4)
    with pytest.raises(KernelError, match="scale"):
        group_normalization(x, rand(3), rand(6), num_groups=3)


# ----------------------------------------------------------------------------- RMSNormalization


@pytest.mark.parametrize("shape,axis", [((2, 3, 4), -1), ((2, 3, 4), 1), ((2, 3, 4), 0), ((5, 6), -2)])
def test_rms_normalization(shape, axis):
    x = rand(*shape, scale=2)
    s = rand(*shape[axis % len(shape) :])
    xd = x.astype(np.float64)
    axes = tuple(range(axis % len(shape), len(shape)))
    want = xd / np.sqrt((xd**2).mean(axes, keepdims=True) + 1e-3) * s
    close(rms_normalization(x, s, axis=axis, epsilon=1e-3), want, np.float32)


def test_rms_normalization_output_takes_scale_dtype():
    x = rand(2, 4)
    s = rand(4, dtype=np.float64)
    y = rms_normalization(x, s)
    assert y.dtype == np.float64
    with pytest.raises(KernelError, match="scale"):
        rms_normalization(x, rand(3))


# ----------------------------------------------------------------------------- ONNX adapters


def _onnx_run(op, opset, inputs, attrs, n_out):
    onnx = pytest.importorskip("onnx")
    from onnx import helper as oh

    import stdops.onnx

    names = [f"i{k}" for k in range(len(inputs))]
    outs = [f"o{k}" for k in range(n_out)]
    node = oh.make_node(op, names, outs, **attrs)
    tp = {np.dtype(np.float32): onnx.TensorProto.FLOAT, np.dtype(np.float64): onnx.TensorProto.DOUBLE}
    g = oh.make_graph(
        [node],
        "g",
        [oh.make_tensor_value_info(nm, tp[a.dtype], a.shape) for nm, a in zip(names, inputs)],
        [oh.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outs],
    )
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    res = stdops.onnx.load(m).run(dict(zip(names, inputs)))
    return [res[o] for o in outs]


@pytest.mark.parametrize(
    "opset,attrs", [(9, {}), (7, {"spatial": 1}), (6, {"is_test": 0}), (1, {"consumed_inputs": [0, 0, 0, 1, 1]})]
)
def test_adapter_batchnorm_training_outputs(opset, attrs):
    x, s, b, m = rand(3, 2, 4), rand(2), rand(2), rand(2)
    v = np.abs(rand(2)) + np.float32(0.5)
    y, rm, rv, sm, sv = _onnx_run("BatchNormalization", opset, [x, s, b, m, v], attrs, 5)
    xd = x.astype(np.float64)
    bm, bv = xd.mean((0, 2)), xd.var((0, 2))
    close(y, (xd - chan(bm, 3)) / np.sqrt(chan(bv, 3) + 1e-5) * chan(s, 3) + chan(b, 3), np.float32)
    close(rm, 0.9 * m + 0.1 * bm, np.float32)
    close(rv, 0.9 * v + 0.1 * bv, np.float32)
    close(sm, bm, np.float32)
    close(sv, 1 / np.sqrt(bv + 1e-5), np.float32)


@pytest.mark.parametrize(
    "opset,attrs",
    [(9, {}), (7, {}), (6, {"is_test": 1}), (6, {}), (1, {"is_test": 1, "consumed_inputs": [0, 0, 0, 1, 1]})],
)
def test_adapter_batchnorm_inference(opset, attrs):
    x, s, b, m = rand(2, 3, 4), rand(3), rand(3), rand(3)
    v = np.abs(rand(3)) + np.float32(0.5)
    (y,) = _onnx_run("BatchNormalization", opset, [x, s, b, m, v], attrs, 1)
    close(y, (x - chan(m, 3)) / np.sqrt(chan(v, 3) + 1e-5) * chan(s, 3) + chan(b, 3), np.float32)


def test_adapter_batchnorm_not_spatial():
    x, s, b, m = rand(2, 3, 4), rand(3, 4), rand(3, 4), rand(3, 4)
    v = np.abs(rand(3, 4)) + np.float32(0.5)
    (y,) = _onnx_run("BatchNormalization", 7, [x, s, b, m, v], {"spatial": 0}, 1)
    close(y, (x - m) / np.sqrt(v + 1e-5) * s + b, np.float32)


def test_adapter_instancenorm_1():
    x, s, b = rand(2, 3, 4), rand(3), rand(3)
    (y,) = _onnx_run("InstanceNormalization", 1, [x, s, b], {"consumed_inputs": [0, 0, 0]}, 1)
    xd = x.astype(np.float64)
    want = (xd - xd.mean(2, keepdims=True)) / np.sqrt(xd.var(2, keepdims=True) + 1e-5)
    close(y, want * chan(s, 3) + chan(b, 3), np.float32)


def test_adapter_groupnorm_18_per_group_scale():
    x, s, b = rand(2, 6, 5), rand(3), rand(3)
    (y,) = _onnx_run("GroupNormalization", 18, [x, s, b], {"num_groups": 3}, 1)
    xg = x.astype(np.float64).reshape(2, 3, -1)
    norm = (xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5)
    want = (norm * s[None, :, None] + b[None, :, None]).reshape(x.shape)
    close(y, want, np.float32)
