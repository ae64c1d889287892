"""ncnn Reduction and CumulativeSum against the official wheel; ArgMax (compiled out of the wheel)
against a NumPy reference; bad params."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import KernelError, ModelFormatError
from stdops.ncnn.layers.reduce import REDUCTION_NAMES

from .test_activation import SHAPES, compare, needs_wheel, rand_shape


def _reduction_input(rng, name, shape):
    if name == "prod":
        return rng.uniform(0.7, 1.3, shape).astype(np.float32) * rng.choice([-1, 1], shape).astype(np.float32)
    if name == "logsum":
        return rng.uniform(0.1, 3, shape).astype(np.float32)
    return rng.uniform(-3, 3, shape).astype(np.float32)


@needs_wheel
@pytest.mark.parametrize("operation", range(11), ids=REDUCTION_NAMES)
def test_reduction(operation):
    name = REDUCTION_NAMES[operation]
    rng = np.random.default_rng(500 + operation)
    cases = []
    for k in range(30):
        shape = SHAPES[k % len(SHAPES)] if k < 8 else rand_shape(rng)
        nd = len(shape)
        params = {0: operation} if k else {}
        if k % 3 == 0:
            params[1] = 1  # reduce_all (the default)
        else:
            n = int(rng.integers(1, nd + 1))
            axes = [int(a) for a in rng.choice(nd, n, replace=False)]
            axes = [a - nd if rng.integers(0, 2) else a for a in axes]  # negative axes too
            params.update({1: 0, 3: axes, 5: 1})
        if k % 2:
            params[4] = 1  # keepdims
        if k % 5 == 4:
            params[2] = float(rng.uniform(-2, 2))  # coeff
        cases.append(("Reduction", params, [], [_reduction_input(rng, name, shape)]))
    assert compare(cases, atol=1e-4, rtol=1e-4) == 30


def test_reduction_shapes_and_errors():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    (y,) = sn.run_layer("Reduction", {}, [], [x])
    assert y.shape == (1,) and y[0] == x.sum()
    (y,) = sn.run_layer("Reduction", {4: 1}, [], [x])
    assert y.shape == (1, 1, 1)
    (y,) = sn.run_layer("Reduction", {0: 3, 1: 0, 3: [-1], 5: 1, 2: 2.0}, [], [x])
    np.testing.assert_allclose(y, 2 * x.mean(axis=-1))
    (y,) = sn.run_layer("Reduction", {0: 0, 1: 0, 3: [], 5: 1, 2: 3.0}, [], [x])  # no axes: elementwise part
    np.testing.assert_allclose(y, 3 * x)
    with pytest.raises(ValueError, match="fixbug0=1"):
        sn.run_layer("Reduction", {1: 0, 3: [0]}, [], [x])
    with pytest.raises(ValueError, match="operation 11"):
        sn.run_layer("Reduction", {0: 11}, [], [x])
    with pytest.raises(KernelError, match="axis 3 is out of range"):
        sn.run_layer("Reduction", {1: 0, 3: [3], 5: 1}, [], [x])
    with pytest.raises(ModelFormatError, match=r"param 2 \(coeff\): expected a float"):
        sn.run_layer("Reduction", {2: "a"}, [], [x])
    with pytest.raises(ModelFormatError, match="a float element was given for an int array"):
        sn.run_layer("Reduction", {1: 0, 3: [0.5], 5: 1}, [], [x])


@needs_wheel
def test_cumulativesum():
    rng = np.random.default_rng(600)
    cases = []
    for k in range(28):
        shape = SHAPES[k % len(SHAPES)] if k < 8 else rand_shape(rng)
        nd = len(shape)
        axis = int(rng.integers(-nd, nd)) if nd > 1 else int(rng.integers(-1, 3))  # 1d ignores axis
        cases.append(("CumulativeSum", {0: axis} if k else {}, [], [rng.uniform(-2, 2, shape).astype(np.float32)]))
    assert compare(cases) == 28
    with pytest.raises(KernelError, match="out of range"):
        sn.run_layer("CumulativeSum", {0: 2}, [], [np.ones((2, 2), np.float32)])


def _argmax_reference(x, topk, out_max_val):
    """Largest first; among equal values the higher flat index first (ncnn sorts (value, index) pairs
    in descending order)."""
    flat = x.reshape(-1).astype(np.float64)
    order = sorted(range(flat.size), key=lambda i: (flat[i], i), reverse=True)[:topk]
    idx = np.array(order, np.float32)
    if out_max_val:
        return np.stack([flat[order].astype(np.float32), idx])
    return idx.reshape(1, topk)


def test_argmax_against_numpy_reference():
    rng = np.random.default_rng(700)
    for k in range(40):
        shape = SHAPES[k % len(SHAPES)] if k < 8 else rand_shape(rng)
        x = rng.uniform(-3, 3, shape).astype(np.float32)
        if k % 3 == 0:
            x = np.round(x)  # many ties
        n = x.size
        topk = 1 if k % 4 == 0 else int(rng.integers(1, n + 1))
        omv = k % 2
        params = {} if k == 0 else {0: omv, 1: topk}
        if k == 0:
            topk, omv = 1, 0
        (y,) = sn.run_layer("ArgMax", params, [], [x])
        np.testing.assert_array_equal(y, _argmax_reference(x, topk, omv), err_msg=f"case {k}")
        assert y.dtype == np.float32
    with pytest.raises(KernelError, match="topk=5"):
        sn.run_layer("ArgMax", {1: 5}, [], [np.ones(3, np.float32)])
    with pytest.raises(ValueError, match="topk=0"):
        sn.run_layer("ArgMax", {1: 0}, [], [np.ones(3, np.float32)])
