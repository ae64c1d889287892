"""Quantization kernels against the ONNX formulas written here."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from stdops.errors import KernelError
from stdops.ops.quant import dequantize_linear, dynamic_quantize_linear, qlinear_matmul, quantize_linear

RNG = np.random.default_rng(0)

INT_TYPES = [
    (np.uint8, 0, 255),
    (np.int8, -128, 127),
    (np.uint16, 0, 65535),
    (np.int16, -32768, 32767),
    (ml_dtypes.uint4, 0, 15),
    (ml_dtypes.int4, -8, 7),
    (ml_dtypes.uint2, 0, 3),
    (ml_dtypes.int2, -2, 1),
]


def q_ref(x, scale, zp, lo, hi):
    """round half to even, add the zero point, saturate (float64, independent of the kernel)."""
    return np.clip(np.rint(x.astype(np.float64) / scale.astype(np.float64)) + zp, lo, hi)


@pytest.mark.parametrize("dtype,lo,hi", INT_TYPES)
def test_quantize_per_tensor_int_types(dtype, lo, hi):
    x = (RNG.standard_normal((3, 5)) * 20).astype(np.float32)
    scale = np.array(0.25, np.float32)
    zp = np.array((lo + hi + 1) // 2, dtype)
    y = quantize_linear(x, scale, zp)
    assert y.dtype == np.dtype(dtype) and y.shape == x.shape
    np.testing.assert_array_equal(y.astype(np.float64), q_ref(x, scale, (lo + hi + 1) // 2, lo, hi))


def test_quantize_rounds_half_to_even_and_defaults_to_uint8():
    x = np.array([0.5, 1.5, 2.5, -0.5, 3.49, 300, -4], np.float32)
    y = quantize_linear(x, np.array(1.0, np.float32))
    assert y.dtype == np.uint8
    np.testing.assert_array_equal(y, [0, 2, 2, 0, 3, 255, 0])


@pytest.mark.parametrize("axis", [1, -2])
def test_quantize_dequantize_per_axis(axis):
    x = (RNG.standard_normal((2, 4, 3)) * 10).astype(np.float32)
    scale = RNG.uniform(0.05, 0.5, 4).astype(np.float32)
    zp = np.array([0, 3, -3, 10], np.int8)
    y = quantize_linear(x, scale, zp, axis=axis)
    want = q_ref(x, scale.reshape(1, 4, 1), zp.reshape(1, 4, 1).astype(np.float64), -128, 127)
    np.testing.assert_array_equal(y, want)
    d = dequantize_linear(y, scale, zp, axis=axis)
    assert d.dtype == np.float32
    want_d = (y.astype(np.float64) - zp.reshape(1, 4, 1)) * scale.reshape(1, 4, 1)
    np.testing.assert_allclose(d, want_d, rtol=1e-6)


@pytest.mark.parametrize("block", [2, 3])
def test_quantize_dequantize_blocked(block):
    x = (RNG.standard_normal((3, 7)) * 10).astype(np.float32)
    nb = -(-7 // block)
    scale = RNG.uniform(0.1, 1, (3, nb)).astype(np.float32)
    zp = RNG.integers(0, 9, (3, nb)).astype(np.uint8)
    cols = np.arange(7) // block
    y = quantize_linear(x, scale, zp, axis=1, block_size=block)
    np.testing.assert_array_equal(y, q_ref(x, scale[:, cols], zp[:, cols].astype(np.float64), 0, 255))
    d = dequantize_linear(y, scale, zp, axis=-1, block_size=block)
    np.testing.assert_allclose(d, (y.astype(np.float64) - zp[:, cols]) * scale[:, cols], rtol=1e-6)


@pytest.mark.parametrize(
    "fdt", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz]
)
@pytest.mark.parametrize("saturate", [0, 1])
def test_quantize_float8(fdt, saturate):
    x = np.array([0.0, 1.3, -2.7, 1e6, -1e6, np.inf, 300.0, 0.01], np.float32)
    y = quantize_linear(x, np.array(2.0, np.float32), np.zeros((), fdt), saturate=saturate)
    assert y.dtype == np.dtype(fdt)
    v = x / 2
    mx = float(ml_dtypes.finfo(fdt).max)
    want = np.clip(v, -mx, mx).astype(fdt) if saturate else v.astype(fdt)
    np.testing.assert_array_equal(y.astype(np.float32), want.astype(np.float32))
    if saturate:
        assert float(y[3]) == mx and float(y[4]) == -mx and float(y[5]) == mx


def test_quantize_float4_and_output_dtype():
    x = np.array([0.0, 1.0, 2.6, -13.0, 100.0], np.float32)
    y = quantize_linear(x, np.array(1.0, np.float32), output_dtype=np.dtype(ml_dtypes.float4_e2m1fn))
    assert y.dtype == ml_dtypes.float4_e2m1fn
    np.testing.assert_array_equal(y.astype(np.float32), [0, 1, 3, -6, 6])
    y = quantize_linear(x, np.array(1.0, np.float32), output_dtype=np.dtype(np.int8))
    assert y.dtype == np.int8


def test_quantize_precision_and_half_scale():
    x = np.array([100.0, 33.3, -7.7], np.float16)
    s = np.array(0.3, np.float16)
    y = quantize_linear(x, s, np.array(0, np.int16))
    want = np.clip(np.rint((x / s).astype(np.float64)), -32768, 32767)  # division in float16
    np.testing.assert_array_equal(y, want)
    y32 = quantize_linear(x, s, np.array(0, np.int16), precision=np.dtype(np.float32))
    np.testing.assert_array_equal(y32, np.rint(x.astype(np.float32) / s.astype(np.float32)))


def test_quantize_int32_input():
    x = np.array([-1000, 7, 250], np.int32)
    y = quantize_linear(x, np.array(4.0, np.float32), np.array(1, np.int8))
    np.testing.assert_array_equal(y, [-128, 3, 63])  # 62.5 -> 62 (half to even) + 1


@pytest.mark.parametrize(
    "args,kw",
    [
        ((np.ones(3, np.float32), np.ones(2, np.float32)), {"axis": 0}),
        ((np.ones((2, 3), np.float32), np.ones(3, np.float32)), {"axis": 2}),
        ((np.ones((2, 4), np.float32), np.ones((2, 3), np.float32)), {"axis": 1, "block_size": 2}),
        ((np.ones((2, 4), np.float32), np.ones((2, 2), np.float32)), {"axis": 1}),
        (
            (np.ones(3, np.float32), np.ones((), np.float32), np.zeros((), np.uint8)),
            {"output_dtype": np.dtype(np.int8)},
        ),
        ((np.ones(3, np.float32), np.ones((), np.float32)), {"output_dtype": np.dtype(np.float32)}),
        ((np.ones(3, np.float32), np.ones(3, np.float32), np.zeros(2, np.uint8)), {"axis": 0}),
    ],
)
def test_quantize_bad_inputs(args, kw):
    with pytest.raises(KernelError):
        quantize_linear(*args, **kw)


@pytest.mark.parametrize("dtype,lo,hi", INT_TYPES)
def test_dequantize_int_types(dtype, lo, hi):
    q = np.array([lo, hi, (lo + hi) // 2], dtype)
    zp = np.array(hi // 2, dtype)
    y = dequantize_linear(q, np.array(0.5, np.float32), zp)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, (np.array([lo, hi, (lo + hi) // 2]) - hi // 2) * 0.5)


def test_dequantize_int32_float16_and_output_dtype():
    q = np.array([-(2**30), 5, 2**30 + 3], np.int32)
    y = dequantize_linear(q, np.array(0.001, np.float32))
    np.testing.assert_allclose(y, q.astype(np.float64) * np.float64(np.float32(0.001)), rtol=1e-7)
    y = dequantize_linear(np.array([1, 2], np.uint8), np.array(0.5, np.float16))
    assert y.dtype == np.float16
    y = dequantize_linear(
        np.array([1, 2], np.uint8), np.array(0.5, np.float32), output_dtype=np.dtype(ml_dtypes.bfloat16)
    )
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y.astype(np.float32), [0.5, 1.0])


def test_dequantize_float8():
    q = np.array([1.0, -2.5, 448.0], np.float32).astype(ml_dtypes.float8_e4m3fn)
    y = dequantize_linear(q, np.array(2.0, np.float32))
    np.testing.assert_array_equal(y, [2.0, -5.0, 896.0])


def test_dequantize_bad_inputs():
    with pytest.raises(KernelError):
        dequantize_linear(np.ones(3, np.uint8), np.ones((), np.float32), np.zeros((), np.int8))
    with pytest.raises(KernelError):
        dequantize_linear(np.ones((2, 3), np.uint8), np.ones(2, np.float32), axis=1)
    with pytest.raises(KernelError):
        dequantize_linear(np.ones(3, np.uint8), np.ones((), np.float32), output_dtype=np.dtype(np.int8))


@pytest.mark.parametrize("shift", [0.0, 3.0, -3.0, -100.0])
def test_dynamic_quantize_linear(shift):
    x = (RNG.standard_normal((4, 6)) + shift).astype(np.float32)
    y, s, z = dynamic_quantize_linear(x)
    lo, hi = min(0.0, float(x.min())), max(0.0, float(x.max()))
    scale = np.float32((np.float32(hi) - np.float32(lo)) / np.float32(255))
    zp = np.rint(np.clip(-np.float32(lo) / scale, 0, 255))
    assert y.dtype == np.uint8 and s.dtype == np.float32 and z.dtype == np.uint8
    assert s.shape == () and z.shape == ()
    np.testing.assert_allclose(s, scale, rtol=1e-7)
    assert int(z) == int(zp)
    np.testing.assert_array_equal(y, np.clip(np.rint(x / scale) + zp, 0, 255))


def test_dynamic_quantize_linear_zeros():
    y, s, z = dynamic_quantize_linear(np.zeros((2, 2), np.float32))
    assert float(s) == 1.0 and int(z) == 0 and not y.any()


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("per", [False, True])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_qlinear_matmul(dtype, per, batch):
    lo, hi = (0, 255) if dtype == np.uint8 else (-128, 127)
    M, K, N = 3, 5, 4
    a = RNG.integers(lo, hi, (*batch, M, K)).astype(dtype)
    b = RNG.integers(lo, hi, (*batch, K, N)).astype(dtype)
    if per:
        a_s, a_z = RNG.uniform(0.01, 0.03, M).astype(np.float32), RNG.integers(0, 5, M).astype(dtype)
        b_s, b_z = RNG.uniform(0.01, 0.03, N).astype(np.float32), RNG.integers(0, 5, N).astype(dtype)
        A = (a.astype(np.int64) - a_z.reshape(M, 1)) * 1
        B = b.astype(np.int64) - b_z
        mult = a_s.reshape(M, 1).astype(np.float64) * b_s.astype(np.float64)
    else:
        a_s, a_z = np.array(0.02, np.float32), np.array(3, dtype)
        b_s, b_z = np.array(0.03, np.float32), np.array(2, dtype)
        A, B = a.astype(np.int64) - 3, b.astype(np.int64) - 2
        mult = np.float64(np.float32(0.02)) * np.float64(np.float32(0.03))
    y_s, y_z = np.array(0.05, np.float32), np.array(1, dtype)
    y = qlinear_matmul(a, a_s, a_z, b, b_s, b_z, y_s, y_z)
    want = np.clip(np.rint((A @ B) * mult / np.float64(np.float32(0.05))) + 1, lo, hi)
    assert y.dtype == np.dtype(dtype) and y.shape == (*batch, M, N)
    assert np.abs(y.astype(np.int64) - want).max() <= 1  # float32 vs float64 multiplier
    assert (y.astype(np.int64) == want).mean() > 0.9


def test_qlinear_matmul_float8():
    f8 = ml_dtypes.float8_e4m3fn
    a = RNG.uniform(-2, 2, (2, 3)).astype(f8)
    b = RNG.uniform(-2, 2, (3, 2)).astype(f8)
    one, zero = np.array(1.0, np.float32), np.zeros((), f8)
    y = qlinear_matmul(a, one, zero, b, one, zero, np.array(0.5, np.float32), zero)
    want = (a.astype(np.float32) @ b.astype(np.float32)) / 0.5
    assert y.dtype == np.dtype(f8)
    np.testing.assert_array_equal(y.astype(np.float32), want.astype(f8).astype(np.float32))


def test_qlinear_matmul_bad_shapes():
    with pytest.raises(KernelError):
        z = np.array(0, np.uint8)
        s = np.array(1, np.float32)
        qlinear_matmul(np.ones((2, 3), np.uint8), s, z, np.ones((2, 3), np.uint8), s, z, s, z)


# --------------------------------------------------------------------------- ONNX adapters


def _run_onnx(op, opset, attrs, feeds, out_type):
    from onnx import helper

    import stdops.onnx

    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in feeds]
    node = helper.make_node(op, [n for n, _ in feeds], ["y"], **attrs)
    out = helper.make_tensor_value_info("y", out_type, None)
    model = helper.make_model(
        helper.make_graph([node], "g", ins, [out]), opset_imports=[helper.make_opsetid("", opset)]
    )
    model.ir_version = 10
    return stdops.onnx.run(model, [a for _, a in feeds])[0]


def test_onnx_output_dtype_enums():
    from onnx import TensorProto

    x = np.array([1.0, -3.0, 200.0], np.float32)
    s = np.array(1.0, np.float32)
    y = _run_onnx("QuantizeLinear", 21, {"output_dtype": TensorProto.INT4}, [("x", x), ("s", s)], TensorProto.INT4)
    assert y.dtype == ml_dtypes.int4
    np.testing.assert_array_equal(y.astype(np.int8), [1, -3, 7])
    y = _run_onnx(
        "QuantizeLinear",
        23,
        {"precision": TensorProto.FLOAT, "output_dtype": 0},
        [("x", x), ("s", s)],
        TensorProto.UINT8,
    )
    assert y.dtype == np.uint8
    q = np.array([1, 2], np.uint8)
    y = _run_onnx(
        "DequantizeLinear", 23, {"output_dtype": TensorProto.FLOAT16}, [("q", q), ("s", s)], TensorProto.FLOAT16
    )
    assert y.dtype == np.float16
    y = _run_onnx("QuantizeLinear", 10, {}, [("x", x), ("s", s)], TensorProto.UINT8)
    np.testing.assert_array_equal(y, [1, 0, 200])
