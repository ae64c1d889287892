"""The prepared matmul_act step (stdops/ops/fused.py: one GEMM and the compiled epilogue, its arguments
converted at load) against the chain of kernels it replaces (MatMul, Add, the activation kernels, Add): with
and without a bias, activations before and after the residual, residuals of the output's shape (contiguous,
strided, another dtype) or broadcasting, X of 1 to 3 dimensions, shapes no multiple of any block size, and the
compiled path on and off."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ops.bind import bind
from stdops.ops.elementwise import add
from stdops.ops.fused import Activation, matmul_act
from stdops.ops.linalg import mat_mul

RNG = np.random.default_rng(131)

ACTS = [
    ("", ()),
    ("relu", ()),
    ("clip", (-0.5, 0.75)),
    ("leaky_relu", (0.2,)),
    ("sigmoid", ()),
    ("silu", ()),
    ("gelu", (2**0.5, 1.0)),
]


def _chain(x, w, b, r, act, post):
    y = mat_mul(x, w)
    if b is not None:
        y = add(y, b)
    if act[0]:
        y = Activation(*act).reference(y)
    if r is not None:
        y = add(y, r)
    if post[0]:
        y = Activation(*post).reference(y)
    return y


def _attrs(act, post):
    return {
        "activation": act[0],
        "activation_params": act[1],
        "post_activation": post[0],
        "post_activation_params": post[1],
    }


@pytest.mark.parametrize("act", ACTS, ids=[a[0] or "none" for a in ACTS])
@pytest.mark.parametrize("x_shape", [(37,), (5, 37), (2, 13, 37)], ids=["1d", "2d", "batch"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
def test_prepared_step_matches_the_kernels(act, x_shape, with_bias, kernels):
    w = RNG.standard_normal((37, 19)).astype(np.float32)
    b = RNG.standard_normal(19).astype(np.float32) if with_bias else None
    x = RNG.standard_normal(x_shape).astype(np.float32)
    step = bind(matmul_act, _attrs(act, ("", ())), (None, w, b)).fn
    got = step(x, w, b)
    want = _chain(x, w, b, None, act, ("", ()))
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("post", [("", ()), ("relu", ()), ("sigmoid", ())], ids=["none", "relu", "sigmoid"])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "float64", "broadcast", "python_list"])
def test_prepared_step_with_a_residual(post, layout, kernels):
    w = RNG.standard_normal((21, 70)).astype(np.float32)
    b = RNG.standard_normal(70).astype(np.float32)
    x = RNG.standard_normal((3, 9, 21)).astype(np.float32)
    full = RNG.standard_normal((3, 9, 140)).astype(np.float32)
    r = {
        "contiguous": np.ascontiguousarray(full[..., :70]),
        "strided": full[..., ::2],
        "float64": full[..., :70].astype(np.float64),
        "broadcast": full[0, :1, :70],
        "python_list": full[0, 0, :70].tolist(),
    }[layout]
    kept = np.array(r, copy=True)
    step = bind(matmul_act, _attrs(("relu", ()), post), (None, w, b)).fn
    got = step(x, w, b, r)
    want = _chain(x, w, b, np.asarray(r) if layout == "python_list" else r, ("relu", ()), post)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want.astype(got.dtype), rtol=2e-6, atol=2e-6)
    np.testing.assert_array_equal(np.asarray(r), kept)  # inputs never written


def test_prepared_step_keeps_nan_and_inf(kernels):
    w = RNG.standard_normal((8, 16)).astype(np.float32)
    b = RNG.standard_normal(16).astype(np.float32)
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    x[1, 3], x[2, 5] = np.nan, np.inf
    step = bind(matmul_act, _attrs(("clip", (0.0, 6.0)), ("", ())), (None, w, b)).fn
    with np.errstate(invalid="ignore"):
        got = step(x, w, b)
        want = _chain(x, w, b, None, ("clip", (0.0, 6.0)), ("", ()))
    assert np.array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=2e-6, atol=2e-6)
