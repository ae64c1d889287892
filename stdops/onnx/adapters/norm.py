"""ONNX version adapters for the norm kernels.

- BatchNormalization-1/6/7/9: no ``training_mode`` attribute. Training mode is a node with more
  than one output (and ``is_test=0`` for -1/-6); its outputs are Y, running mean, running var,
  saved mean (the batch mean) and saved var (the batch's inverse standard deviation
  1/sqrt(var + epsilon), as Caffe2 and onnxruntime define it). ``spatial=0`` (-1..-7) normalizes
  per activation: X is flattened to (N, C*D1*...*Dn) and the statistics to (C*D1*...*Dn,).
  ``consumed_inputs`` (-1) is a legacy hint and ignored.
- InstanceNormalization-1: ``consumed_inputs`` ignored.
- GroupNormalization-18: scale and bias per group (num_groups,) instead of per channel; no
  stash_type (statistics in float32, float64 for float64 inputs).
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelError
from ...ops.dtypes import compute_dtype
from ..opset import adapter


def _flatten_params(params, nfeat):
    out = []
    for p in params:
        p = np.asarray(p)
        if p.size != nfeat:
            raise KernelError(
                f"BatchNormalization (spatial=0): a parameter of shape {p.shape} "
                f"does not have C*D1*...*Dn = {nfeat} elements"
            )
        out.append(p.reshape(nfeat))
    return out


@adapter("BatchNormalization", 1, 6, 7, 9)
def _batchnorm_legacy(ctx):
    ctx.attrs.pop("consumed_inputs", None)
    is_test = int(ctx.attrs.pop("is_test", 0))
    spatial = int(ctx.attrs.pop("spatial", 1))
    eps = float(ctx.attrs.get("epsilon", 1e-5))
    training = ctx.n_outputs > 1 and not is_test
    if not training:
        fn = ctx.bind(training_mode=0)
        if spatial:
            return fn

        def infer_per_activation(X, scale, B, mean, var):
            X = np.asarray(X)
            if X.ndim < 2:
                return fn(X, scale, B, mean, var)  # the kernel reports the bad rank
            n, nfeat = X.shape[0], int(np.prod(X.shape[1:]))
            s, b, m, v = _flatten_params((scale, B, mean, var), nfeat)
            return fn(X.reshape(n, nfeat), s, b, m, v).reshape(X.shape)

        return infer_per_activation

    fn = ctx.bind(training_mode=1)

    def train(X, scale, B, mean, var):
        X = np.asarray(X)
        shape = X.shape
        if not spatial and X.ndim >= 2:
            n = shape[0]
            nfeat = int(np.prod(shape[1:]))
            scale, B, mean, var = _flatten_params((scale, B, mean, var), nfeat)
            X = X.reshape(n, nfeat)
        y, running_mean, running_var = fn(X, scale, B, mean, var)
        wt = compute_dtype(X.dtype).type
        axes = (0,) + tuple(range(2, X.ndim))
        xw = X.astype(wt, copy=False)
        bmean = xw.mean(axis=axes)
        d = xw - bmean.reshape((1, -1) + (1,) * (X.ndim - 2))
        bvar = np.mean(d * d, axis=axes)
        saved_inv_std = wt(1) / np.sqrt(bvar + wt(eps))
        sdt = np.asarray(mean).dtype
        return (y.reshape(shape), running_mean, running_var, bmean.astype(sdt), saved_inv_std.astype(sdt))

    return train


@adapter("InstanceNormalization", 1)
def _instancenorm_1(ctx):
    ctx.attrs.pop("consumed_inputs", None)
    return ctx.bind()


@adapter("GroupNormalization", 18)
def _groupnorm_18(ctx):
    if "num_groups" not in ctx.attrs:
        raise ctx.error("missing required attribute num_groups")
    g = int(ctx.attrs["num_groups"])
    fn32 = ctx.bind(stash_type=1)
    fn64 = ctx.bind(stash_type=11)

    def call(X, scale, bias):
        X = np.asarray(X)
        if X.ndim < 2:
            raise KernelError(f"GroupNormalization: X must have rank >= 2, got shape {X.shape}")
        c = X.shape[1]
        if g < 1 or c % g:
            raise KernelError(f"GroupNormalization: num_groups {g} must be a positive divisor of the channel count {c}")
        scale, bias = np.asarray(scale), np.asarray(bias)
        if scale.shape != (g,) or bias.shape != (g,):
            raise KernelError(
                f"GroupNormalization-18: scale and bias must have shape ({g},), got {scale.shape} and {bias.shape}"
            )
        fn = fn64 if X.dtype == np.float64 else fn32
        return fn(X, np.repeat(scale, c // g), np.repeat(bias, c // g))

    return call
