"""Normalization layers against the ncnn wheel: LayerNorm, RMSNorm, GroupNorm, InstanceNorm, LRN, MVN, Normalize."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import ModelFormatError

from . import wheel

N = 20
needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")


def _f(rng, *shape, scale=1.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32)


def _shape(rng, dims, lo=1, hi=6):
    return tuple(int(v) for v in rng.integers(lo, hi, size=dims))


def _check(type_name, params, weights, inputs, n_out=1, atol=1e-4, rtol=1e-4):
    ours = sn.run_layer(type_name, params, weights, inputs, n_out)
    theirs = wheel.wheel_run(type_name, params, weights, inputs, n_out)
    wheel.assert_close(ours, theirs, atol=atol, rtol=rtol, what=f"{type_name} {params}")


def _layernorm_case(i, type_name):
    rng = np.random.default_rng(1000 + i + (500 if type_name == "RMSNorm" else 0))
    dims = 1 + i % 4
    shape = _shape(rng, dims, 1, 7)
    x = _f(rng, *shape, scale=2.0, shift=0.5)
    if dims <= 2:
        size = shape[-1]
    elif dims == 3:
        size = [shape[-1], shape[-1] * shape[-2]][i // 4 % 2]
    else:
        size = [shape[-1], shape[-1] * shape[-2], shape[-1] * shape[-2] * shape[-3]][i // 4 % 3]
    affine = int(i % 5 != 4)
    params = {0: size, 1: float(rng.choice([1e-3, 1e-5, 0.1])), 2: affine}
    if type_name == "RMSNorm":
        weights = [_f(rng, size)] if affine else []
    else:
        weights = [_f(rng, size), _f(rng, size)] if affine else []
    return params, weights, [x]


@needs_wheel
@pytest.mark.parametrize("type_name", ["LayerNorm", "RMSNorm"])
@pytest.mark.parametrize("i", range(N))
def test_layernorm_rmsnorm(type_name, i):
    _check(type_name, *_layernorm_case(i, type_name))


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_groupnorm(i):
    rng = np.random.default_rng(2000 + i)
    dims = 1 + i % 4
    group = int(rng.choice([1, 2, 3]))
    cpg = int(rng.integers(1, 4))
    c = group * cpg
    shape = (c,) + _shape(rng, dims - 1, 1, 6)
    x = _f(rng, *shape, scale=3.0, shift=-1.0)
    affine = int(i % 3 != 2)
    params = {0: group, 1: c, 2: float(rng.choice([1e-3, 1e-5])), 3: affine}
    weights = [_f(rng, c), _f(rng, c)] if affine else []
    _check("GroupNorm", params, weights, [x])


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_instancenorm(i):
    rng = np.random.default_rng(3000 + i)
    dims = 3 + i % 2
    shape = _shape(rng, dims, 1, 7)
    c = shape[0]
    x = _f(rng, *shape, scale=2.0, shift=1.0)
    affine = int(i % 4 != 3)
    params = {0: c, 1: float(rng.choice([1e-3, 1e-5])), 2: affine}
    weights = [_f(rng, c), _f(rng, c)] if affine else []
    _check("InstanceNorm", params, weights, [x])


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_lrn(i):
    rng = np.random.default_rng(4000 + i)
    region = i % 2
    x = _f(rng, *_shape(rng, 3, 2, 8))
    params = {
        0: region,
        1: int(rng.integers(1, 7)),
        2: float(rng.uniform(0.1, 2.0)),
        3: float(rng.uniform(0.3, 1.0)),
        4: float(rng.uniform(0.5, 2.0)),
    }
    if i == 0:
        params = {}
    _check("LRN", params, [], [x])


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_mvn(i):
    rng = np.random.default_rng(5000 + i)
    x = _f(rng, *_shape(rng, 3 + i % 2, 1, 7), scale=2.0, shift=0.7)
    params = {0: (i // 2) % 2, 1: (i // 4) % 2, 2: float(rng.choice([1e-4, 1e-2]))}
    _check("MVN", params, [], [x])


@needs_wheel
@pytest.mark.parametrize("i", range(N + 4))
def test_normalize(i):
    rng = np.random.default_rng(6000 + i)
    x = _f(rng, *_shape(rng, 3 + i % 2, 1, 6))
    if i % 7 == 3:
        x[:] = 0  # eps decides everything
    spatial, channel = [(1, 1), (1, 0), (0, 1), (0, 0)][(i // 2) % 4]
    shared = (i // 8) % 2
    c = x.shape[0]
    n = 1 if shared else c
    params = {0: spatial, 4: channel, 1: shared, 2: float(rng.choice([1e-4, 1e-2, 10.0])), 3: n, 9: i % 3}
    _check("Normalize", params, [_f(rng, n)], [x])


def test_normalize_default_across_channel():
    # ncnn's across_channel default is 1: a per-position L2 normalization
    x = np.arange(1, 13, dtype=np.float32).reshape(3, 2, 2)
    y = sn.run_layer("Normalize", {3: 1, 1: 1}, [np.float32([2.0])], [x])[0]
    np.testing.assert_allclose(y, 2 * x / np.sqrt((x * x).sum(0) + 1e-4), rtol=1e-6)


def test_bad_params_and_weights():
    x = np.ones((2, 3, 4), np.float32)
    with pytest.raises(ModelFormatError, match="float literal"):
        sn.run_layer("LayerNorm", {0: 4.0}, [np.ones(4, np.float32)] * 2, [x])
    with pytest.raises(ModelFormatError, match="has 3 elements"):
        sn.run_layer("LayerNorm", {0: 4}, [np.ones(3, np.float32), np.ones(4, np.float32)], [x])
    with pytest.raises(ModelFormatError, match="loads 2 weights"):
        sn.run_layer("GroupNorm", {0: 1, 1: 2}, [np.ones(2, np.float32)], [x])
    with pytest.raises(ModelFormatError, match="float literal"):
        sn.run_layer("LRN", {1: 2.5}, [], [x])
    with pytest.raises(ValueError, match="groups"):
        sn.run_layer("GroupNorm", {0: 4, 1: 2, 3: 0}, [], [x])
