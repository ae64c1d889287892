"""Adagrad, Adam and Momentum (ai.onnx.preview.training) against the spec's pseudo code, in float64."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.errors import KernelError
from stdops.ops import training as K

RNG = np.random.default_rng(3)


def ref_adagrad(R, T, X, G, H, decay_factor=0.0, epsilon=1e-6, norm_coefficient=0.0):
    r = R / (1 + T * decay_factor)
    g = norm_coefficient * X + G
    h = H + g * g
    return X - r * g / (np.sqrt(h) + epsilon), h


def ref_adam(R, T, X, G, V, H, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0, norm_coefficient_post=0.0):
    g = norm_coefficient * X + G
    v = alpha * V + (1 - alpha) * g
    h = beta * H + (1 - beta) * g * g
    ra = R * np.sqrt(1 - beta**T) / (1 - alpha**T) if T > 0 else R
    x = X - ra * v / (np.sqrt(h) + epsilon)
    return (1 - norm_coefficient_post) * x, v, h


def ref_momentum(R, T, X, G, V, alpha, beta, mode, norm_coefficient):
    g = norm_coefficient * X + G
    b = beta if T > 0 else 1.0
    v = alpha * V + b * g
    x = X - R * v if mode == "standard" else X - R * (g + alpha * v)
    return x, v


# kernel, reference, tensors per variable, attrs
TABLE = [
    (K.adagrad, ref_adagrad, 3, {}),
    (K.adagrad, ref_adagrad, 3, {"decay_factor": 0.1, "epsilon": 1e-5, "norm_coefficient": 0.001}),
    (K.adam, ref_adam, 4, {}),
    (K.adam, ref_adam, 4, {"alpha": 0.95, "beta": 0.1, "epsilon": 1e-7, "norm_coefficient": 0.001}),
    (K.adam, ref_adam, 4, {"norm_coefficient_post": 0.01}),
    (K.momentum, ref_momentum, 3, {"alpha": 0.95, "beta": 0.1, "mode": "standard", "norm_coefficient": 0.001}),
    (K.momentum, ref_momentum, 3, {"alpha": 0.95, "beta": 1.0, "mode": "nesterov", "norm_coefficient": 0.01}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
@pytest.mark.parametrize("T", [0, 1, 7])
@pytest.mark.parametrize("shapes", [[(3,)], [(2, 3), (4,)], [()]], ids=["one", "two", "scalar"])
@pytest.mark.parametrize(
    "kernel,ref,roles,attrs", TABLE, ids=[f"{k.__name__}-{i}" for i, (k, _, _, _) in enumerate(TABLE)]
)
def test_optimizer(kernel, ref, roles, attrs, shapes, T, dtype):
    n = len(shapes)
    R = np.array(0.1, np.float32)
    tensors = []
    for role in range(roles):
        for s in shapes:
            lo = 0.0 if role == roles - 1 and kernel is not K.momentum else -1.0  # H >= 0
            tensors.append(RNG.uniform(lo, 1.0, s).astype(dtype))
    keep = [t.copy() for t in tensors]
    got = kernel(R, np.array(T, np.int64), *tensors, **attrs)
    assert isinstance(got, tuple) and len(got) == (roles - 1) * n
    for i in range(n):
        want = ref(float(R), T, *[tensors[i + k * n].astype(np.float64) for k in range(roles)], **attrs)
        for j, w in enumerate(want):
            g = got[i + j * n]
            assert g.dtype == np.dtype(dtype) and g.shape == shapes[i]
            tol = 1e-5 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    for t, k in zip(tensors, keep):
        np.testing.assert_array_equal(t, k)


def test_defaults():
    """Adam's defaults alpha 0.9, beta 0.999, epsilon 1e-6; Adagrad's epsilon 1e-6."""
    x, g, v, h = (np.array([0.5, -0.2]), np.array([0.1, 0.3]), np.array([0.0, 0.1]), np.array([0.2, 0.0]))
    got = K.adam(np.array(0.01), np.array(3), x, g, v, h)
    for a, b in zip(got, ref_adam(0.01, 3, x, g, v, h)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    got = K.adagrad(np.array(0.01), np.array(3), x, g, h)
    for a, b in zip(got, ref_adagrad(0.01, 3, x, g, h)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


M = {"alpha": 0.9, "beta": 1.0, "mode": "standard", "norm_coefficient": 0.0}
F = np.zeros(3, np.float32)


@pytest.mark.parametrize(
    "kernel,args,attrs",
    [
        (K.adagrad, (np.array(0.1), np.array(0), F, F), {}),  # not a multiple of 3
        (K.adam, (np.array(0.1), np.array(0)), {}),  # no tensors
        (K.momentum, (np.array(0.1), np.array(0), F, F, F), dict(M, mode="adam")),  # bad mode
        (K.momentum, (np.array([0.1, 0.2]), np.array(0), F, F, F), M),  # R not a scalar
        (K.momentum, (np.array(0.1), np.array(0.5), F, F, F), M),  # T not an integer
        (K.momentum, (np.array(0.1), np.array(0), F, np.zeros(4, np.float32), F), M),  # shapes
        (K.momentum, (np.array(0.1), np.array(0), np.zeros(3, np.int64), F, F), M),  # X not float
    ],
)
def test_errors(kernel, args, attrs):
    with pytest.raises(KernelError):
        kernel(*args, **attrs)
