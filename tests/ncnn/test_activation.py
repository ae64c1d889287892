"""ncnn activation layers and Softmax against the official wheel (randomized, seeded), and bad params.

Many cases share one wheel process: ``wheel.wheel_batch`` writes every case as its own Input(s) + layer
into one model, so a few forks cover hundreds of cases (test_arith and test_reduce use it too).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import KernelError, ModelFormatError

from . import quirks, wheel

needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")

Case = wheel.Case
wheel_batch = wheel.wheel_batch


def ours(case: Case) -> list[np.ndarray]:
    type_name, params, weights, inputs = case[:4]
    n_out = case[4] if len(case) > 4 else None
    return sn.run_layer(type_name, params, weights, inputs, n_out)


def compare(cases: Sequence[Case], atol=1e-4, rtol=1e-4) -> int:
    """Run every case here and in the wheel; assert_close each. Returns the number compared."""
    theirs = wheel_batch(cases)
    for k, (case, th) in enumerate(zip(cases, theirs)):
        what = f"case {k}: {case[0]} {case[1]} shapes {[np.shape(x) for x in case[3]]}"
        for t in th:
            if isinstance(t, Exception):
                raise AssertionError(f"{what}: the wheel failed: {t}")
        mask = quirks.compare_mask(case[0], case[1], case[3])
        wheel.assert_close(ours(case), th, atol=atol, rtol=rtol, what=what, masks=[mask])
    return len(cases)


SHAPES = [(7,), (16,), (5, 6), (3, 9), (4, 3, 5), (2, 7, 8), (3, 2, 4, 5), (2, 3, 3, 4)]


def rand_shape(rng) -> tuple[int, ...]:
    nd = int(rng.integers(1, 5))
    return tuple(int(v) for v in rng.integers(1, 7, nd))


def rand_x(rng, shape, lo=-4.0, hi=4.0) -> np.ndarray:
    return rng.uniform(lo, hi, shape).astype(np.float32)


# --------------------------------------------------------------------------- parameter-free activations

SIMPLE = ["ReLU", "Sigmoid", "TanH", "AbsVal", "BNLL", "Softplus", "Erf", "Mish", "Swish"]


@needs_wheel
@pytest.mark.parametrize("type_name", SIMPLE)
def test_simple_activations(type_name):
    rng = np.random.default_rng(6000 + SIMPLE.index(type_name))
    cases = []
    for k in range(24):
        shape = SHAPES[k % len(SHAPES)] if k < 8 else rand_shape(rng)
        params = {0: float(rng.uniform(0.01, 0.5))} if type_name == "ReLU" and k % 2 else {}
        cases.append((type_name, params, [], [rand_x(rng, shape, -8, 8)]))
    assert compare(cases) == 24


def _param_cases(rng, type_name, make_params, n=24, lo=-4.0, hi=4.0):
    cases = []
    for k in range(n):
        shape = SHAPES[k % len(SHAPES)] if k < 8 else rand_shape(rng)
        cases.append((type_name, make_params(k, rng), [], [rand_x(rng, shape, lo, hi)]))
    return cases


PARAMETRIC = {
    "CELU": lambda k, r: (
        {} if k == 0 else {0: 0.0} if k == 1 else {0: float(r.choice([0.5, 1.0, 2.0, r.uniform(0.1, 3)]))}
    ),
    "ELU": lambda k, r: {} if k == 0 else {0: float(r.uniform(0.05, 2))},
    "SELU": lambda k, r: {} if k == 0 else {0: float(r.uniform(0.5, 2)), 1: float(r.uniform(0.5, 2))},
    "Clip": lambda k, r: (
        [{}, {0: -1.0}, {1: 1.5}][k]
        if k < 3
        else {0: float(r.uniform(-3, 0)), 1: float(r.uniform(0, 3))}
        if k % 5
        else {0: 1.0, 1: -1.0}
    ),
    "HardSigmoid": lambda k, r: {} if k == 0 else {0: float(r.uniform(0.1, 0.5)), 1: float(r.uniform(0.2, 0.8))},
    "HardSwish": lambda k, r: (
        {} if k == 0 else {0: float(r.choice([1 / 6, r.uniform(0.1, 0.5)])), 1: float(r.uniform(0.2, 0.8))}
    ),
    "Shrink": lambda k, r: {} if k == 0 else {0: float(r.uniform(0, 1)), 1: float(r.uniform(0, 2))},
    "Threshold": lambda k, r: {} if k == 0 else {0: float(r.uniform(-2, 2))},
    "Dropout": lambda k, r: {} if k == 0 else {0: float(r.choice([1.0, r.uniform(0.1, 2)]))},
    "GELU": lambda k, r: {} if k == 0 else {0: int(k % 2)},
    "Exp": lambda k, r: (
        [{}, {0: -1.0, 1: 0.5, 2: 0.25}, {0: 2.0}, {0: 10.0, 1: 0.3}][k % 4]
        if k < 8
        else {0: float(r.choice([-1.0, r.uniform(0.5, 3)])), 1: float(r.uniform(-1, 1)), 2: float(r.uniform(-1, 1))}
    ),
    "Power": lambda k, r: (
        {}
        if k == 0
        else {
            0: float(r.choice([2.0, 3.0, 0.5, r.uniform(-2, 3)])),
            1: float(r.uniform(0.1, 1)),
            2: float(r.uniform(4.5, 6)),
        }
    ),
}


@needs_wheel
@pytest.mark.parametrize("type_name", sorted(PARAMETRIC))
def test_parametric_activations(type_name):
    rng = np.random.default_rng(sum(map(ord, type_name)))
    cases = _param_cases(rng, type_name, PARAMETRIC[type_name])
    assert compare(cases) == 24


@needs_wheel
def test_log_layer():
    rng = np.random.default_rng(5)

    def params(k, r):
        if k == 0:
            return {}
        return {
            0: float(r.choice([-1.0, 2.0, 10.0, r.uniform(1.5, 5)])),
            1: float(r.uniform(0.2, 2)),
            2: float(r.uniform(0.1, 1)),
        }

    cases = _param_cases(rng, "Log", params, lo=0.01, hi=5.0)
    assert compare(cases) == 24


@needs_wheel
def test_glu():
    rng = np.random.default_rng(6)
    cases = []
    for k in range(28):
        nd = 1 + k % 4
        shape = [int(v) for v in rng.integers(1, 6, nd)]
        axis = int(rng.integers(-nd, nd))
        shape[axis] = int(rng.choice([2, 4, 6, 5, 7]))  # odd lengths drop their last element
        params = {} if k == 0 else {0: axis}
        if nd == 1 and k % 2:
            params = {0: 3}  # ignored for 1d
        cases.append(("GLU", params, [], [rand_x(rng, tuple(shape))]))
    assert compare(cases) == 28


@needs_wheel
def test_prelu():
    rng = np.random.default_rng(7)
    cases = []
    for k in range(24):
        shape = SHAPES[k % len(SHAPES)] if k < 8 else rand_shape(rng)
        n = 1 if k % 3 == 0 else shape[0]
        slopes = rng.uniform(-0.5, 1.5, n).astype(np.float32)
        cases.append(("PReLU", {0: n}, [slopes], [rand_x(rng, shape)]))
    assert compare(cases) == 24


@needs_wheel
def test_softmax():
    rng = np.random.default_rng(8)
    cases = []
    for k in range(32):
        nd = 1 + k % 4
        shape = tuple(int(v) for v in rng.integers(1, 7, nd))
        axis = int(rng.integers(-nd, nd))
        if k < 4:
            params = {}  # axis 0, fixbug0 0
        elif nd == 1:
            params = {0: int(rng.integers(-1, 3)), 1: 1}
        else:
            params = {0: axis, 1: 1}
        cases.append(("Softmax", params, [], [rand_x(rng, shape, -10, 10)]))
    assert compare(cases) == 32


# --------------------------------------------------------------------------- bad params


def test_bad_params():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ModelFormatError, match=r"param 0 \(fast_gelu\): a float literal"):
        sn.run_layer("GELU", {0: 1.5}, [], [x])
    with pytest.raises(ModelFormatError, match=r"param 0 \(alpha\): expected a float"):
        sn.run_layer("ELU", {0: "x"}, [], [x])
    with pytest.raises(ModelFormatError, match="has 3 elements, the params say 2"):
        sn.run_layer("PReLU", {0: 2}, [np.ones(3, np.float32)], [x])
    with pytest.raises(ValueError, match="fixbug0=1"):
        sn.run_layer("Softmax", {0: 1}, [], [x])
    with pytest.raises(KernelError, match="out of range"):
        sn.run_layer("Softmax", {0: 2, 1: 1}, [], [x])
    with pytest.raises(ValueError, match="num_slope=0 must be >= 1"):
        sn.run_layer("PReLU", {}, [], [x])
    with pytest.raises(KernelError, match="3 slopes"):
        sn.run_layer("PReLU", {0: 3}, [np.ones(3, np.float32)], [x])
    with pytest.raises(KernelError, match="out of range"):
        sn.run_layer("GLU", {0: -3}, [], [x])


def test_softmax_fixbug0_in_a_param_file():
    text = "7767517\n2 2\nInput in 0 1 x\nSoftmax sm 1 1 x y 0=1\n"
    with pytest.raises(ModelFormatError, match=r"line 4 .*fixbug0=1"):
        sn.Net.from_bytes(text)


def test_float32_out():
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    for t, params in [
        ("Exp", {0: 2.0, 1: 0.5}),
        ("Log", {0: 10.0, 2: 5.0}),
        ("Power", {0: 2.0, 2: 4.0}),
        ("GELU", {}),
        ("HardSwish", {}),
        ("Threshold", {}),
        ("Dropout", {0: 0.5}),
        ("CELU", {0: 0.0}),
        ("GLU", {0: 2}),
        ("Softmax", {0: -1, 1: 1}),
        ("Clip", {0: -1.0}),
    ]:
        (y,) = sn.run_layer(t, params, [], [x])
        assert y.dtype == np.float32, t
