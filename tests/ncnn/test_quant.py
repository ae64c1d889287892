"""ncnn int8 layers against the official wheel: Quantize (round half away from zero, saturate to +-127),
Dequantize and Requantize (int32 accumulators in, per-tensor or per-row/channel scales and biases, fused
activations); the rounding helper on its ties; bad params."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import KernelError, ModelFormatError
from stdops.ncnn.layers.quant import float2int8

from . import wheel

needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")

N_CASES = 24
ACTS = [(0, []), (1, []), (2, [0.1]), (3, [-0.5, 0.7]), (4, []), (5, []), (6, [0.2, 0.5])]


def shape_of(rng, dims):
    return tuple(int(rng.integers(1, 6)) for _ in range(dims))


def table(rng, x_shape, i, lo, hi):
    """One value, or (every other case, when the blob has rows/channels) one per row/channel."""
    n = x_shape[0] if (len(x_shape) >= 2 and i % 2) else 1
    return rng.uniform(lo, hi, n).astype(np.float32)


@needs_wheel
def test_quantize_matches_wheel():
    rng = np.random.default_rng(1)
    for i in range(N_CASES):
        shape = shape_of(rng, 1 + i % 4)
        x = (rng.standard_normal(shape) * 2).astype(np.float32)
        scale = table(rng, shape, i, 10, 120)  # large scales saturate
        ours = sn.run_layer("Quantize", {0: scale.size}, [scale], [x])
        assert ours[0].dtype == np.int8
        theirs = wheel.wheel_run("Quantize", {0: scale.size}, [scale], [x])
        wheel.assert_close(ours, theirs, atol=0, rtol=0, what=f"Quantize {shape}")


@needs_wheel
def test_dequantize_matches_wheel():
    """The bottom is int32 (the wheel reads the blob's bits as int)."""
    rng = np.random.default_rng(2)
    for i in range(N_CASES):
        shape = shape_of(rng, 1 + i % 4)
        x = rng.integers(-20000, 20000, shape).astype(np.int32)
        scale = table(rng, shape, i, 1e-4, 1e-2)
        params = {0: scale.size}
        weights = [scale]
        if i % 3:
            bias = table(rng, shape, i // 3, -1, 1)
            params[1] = bias.size
            weights.append(bias)
        ours = sn.run_layer("Dequantize", params, weights, [x])
        theirs = wheel.wheel_run("Dequantize", params, weights, [x.view(np.float32)])
        wheel.assert_close(ours, theirs, what=f"Dequantize {params} {shape}")


@needs_wheel
def test_requantize_matches_wheel():
    rng = np.random.default_rng(3)
    for i in range(N_CASES):
        shape = shape_of(rng, 1 + i % 4)
        x = rng.integers(-20000, 20000, shape).astype(np.int32)
        s_in = table(rng, shape, i, 1e-4, 1e-3)
        s_out = table(rng, shape, i + (i // 4), 20, 100)
        params = {0: s_in.size, 1: s_out.size}
        weights = [s_in, s_out]
        if i % 3:
            bias = table(rng, shape, i // 3, -1, 1)
            params[2] = bias.size
            weights.append(bias)
        t, a = ACTS[i % len(ACTS)]
        params[3] = t
        if a:
            params[4] = a
        ours = sn.run_layer("Requantize", params, weights, [x])
        assert ours[0].dtype == np.int8
        theirs = wheel.wheel_run("Requantize", params, weights, [x.view(np.float32)])
        wheel.assert_close(ours, theirs, atol=0, rtol=0, what=f"Requantize {params} {shape}")


def test_float2int8_rounds_half_away_from_zero_and_saturates():
    v = np.array([0.5, -0.5, 1.5, -1.5, 2.5, 0.49999997, -0.49999997, 126.6, 127.5, 300, -300, -127.4], np.float32)
    np.testing.assert_array_equal(float2int8(v), [1, -1, 2, -2, 3, 0, 0, 127, 127, 127, -127, -127])


def test_bad_params_are_clear_errors():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(ModelFormatError, match=r"param 0 \(scale_data_size\): a float literal"):
        sn.run_layer("Quantize", {0: 1.0}, [np.ones(1, np.float32)], [x])
    with pytest.raises(ModelFormatError, match="has 2 elements, the params say 3"):
        sn.run_layer("Quantize", {0: 3}, [np.ones(2, np.float32)], [x])
    with pytest.raises(KernelError, match="scale_data has 2 values"):
        sn.run_layer("Quantize", {0: 2}, [np.ones(2, np.float32)], [x])
    with pytest.raises(ModelFormatError, match="loads 3 weights"):
        sn.run_layer("Requantize", {2: 3}, [np.ones(1, np.float32)] * 2, [x.astype(np.int32)])
