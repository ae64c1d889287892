"""Type casts (stdops.ops.cast) and their ONNX adapters, against independent formulas written here."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import stdops.onnx
from stdops.errors import KernelError
from stdops.ops import cast as C

F8 = {  # name: (dtype, exponent bits, mantissa bits, bias, kind)
    "e4m3fn": (ml_dtypes.float8_e4m3fn, 4, 3, 7, "fn"),
    "e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, 4, 3, 8, "fnuz"),
    "e5m2": (ml_dtypes.float8_e5m2, 5, 2, 15, "ieee"),
    "e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, 5, 2, 16, "fnuz"),
}


def _decode(code: int, eb: int, mb: int, bias: int, kind: str) -> float:
    """The value of one float8 code, from the format's definition."""
    sign = -1.0 if code >> 7 else 1.0
    e = (code >> mb) & ((1 << eb) - 1)
    m = code & ((1 << mb) - 1)
    if kind == "fnuz" and code == 0x80:
        return np.nan
    if kind == "fn" and e == (1 << eb) - 1 and m == (1 << mb) - 1:
        return np.nan
    if kind == "ieee" and e == (1 << eb) - 1:
        return sign * np.inf if m == 0 else np.nan
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - mb)
    return sign * (1 + m / 2**mb) * 2.0 ** (e - bias)


def _f8_ref(x: np.ndarray, name: str, saturate: bool) -> np.ndarray:
    """Round to nearest, ties to the even code; saturate or overflow per the ONNX Cast table."""
    dt, eb, mb, bias, kind = F8[name]
    codes = np.arange(256)
    vals = np.array([_decode(int(c), eb, mb, bias, kind) for c in codes])
    finite = np.isfinite(vals)
    fmax = vals[finite].max()
    half_ulp = (fmax - np.sort(vals[finite])[-2]) / 2  # beyond fmax + half_ulp, RNE overflows
    nan_code = 0x80 if kind == "fnuz" else 0x7F
    out = []
    for v in x.astype(np.float64).ravel():
        if np.isnan(v):
            out.append(nan_code)
            continue
        if abs(v) > fmax:
            if saturate or abs(v) < fmax + half_ulp:
                v = np.sign(v) * fmax
            elif kind == "ieee":
                out.append(0x7C if v > 0 else 0xFC)
                continue
            else:
                out.append(nan_code if kind == "fnuz" or v > 0 else 0xFF)
                continue
        d = np.where(finite, np.abs(vals - v), np.inf)
        best = np.flatnonzero(d == d.min())
        if len(best) > 1:  # a tie: the code with an even mantissa (prefer +0 / the sign of v)
            even = [c for c in best if c % 2 == 0]
            best = even or best
            same_sign = [c for c in best if (c >> 7) == (v < 0 or (v == 0 and np.signbit(v)))]
            best = same_sign or best
        out.append(int(best[0]))
    return np.array(out, np.uint8).reshape(x.shape).view(dt)


VALS = np.array(
    [
        0.47892547,
        0.48033667,
        0.5,
        1.0625,
        1.1875,
        3.25,
        300.0,
        447.0,
        465.0,
        60000.0,
        1e6,
        1e-7,
        -0.0000001,
        -1e6,
        0.0,
        -0.0,
        2.0**-9,
        2.0**-10,
        2.0**-17,
        np.nan,
        np.inf,
        -np.inf,
    ],
    np.float32,
)


def _bits_equal(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    g, w = got.view(np.uint8), want.view(np.uint8)
    gn, wn = np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(gn, wn)
    np.testing.assert_array_equal(g[~gn], w[~wn])


@pytest.mark.parametrize("name", sorted(F8))
@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("src", [np.float32, np.float16, np.float64])
def test_to_float8(name, saturate, src):
    with np.errstate(over="ignore"):
        x = VALS.astype(src)
    dt = F8[name][0]
    _bits_equal(C.cast(x, to=dt, saturate=saturate), _f8_ref(x, name, bool(saturate)))


@pytest.mark.parametrize("name", sorted(F8))
@pytest.mark.parametrize("dst", [np.float32, np.float16, np.float64])
def test_from_float8(name, dst):
    dt, eb, mb, bias, kind = F8[name]
    codes = np.arange(256, dtype=np.uint8)
    want = np.array([_decode(int(c), eb, mb, bias, kind) for c in codes]).astype(dst)
    got = C.cast(codes.view(dt), to=dst)
    assert got.dtype == dst
    np.testing.assert_array_equal(got, want)


def test_float8_from_ints_and_bool():
    x = np.array([0, 1, 3, 17, 1000, -1000], np.int32)
    _bits_equal(C.cast(x, to=ml_dtypes.float8_e4m3fn), _f8_ref(x.astype(np.float32), "e4m3fn", True))
    _bits_equal(
        C.cast(np.array([True, False]), to=ml_dtypes.float8_e5m2),
        _f8_ref(np.array([1.0, 0.0], np.float32), "e5m2", True),
    )


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("src", [np.float32, np.float16])
def test_to_e8m0(round_mode, src):
    x = np.array([0.124, 0.25, 0.5, 1.1, 1.5, 1.6, 2.0, 3.0, 4.0, 8.0, 1000.0], src)
    lg = np.log2(x.astype(np.float64))
    e = {
        "up": np.ceil(lg),
        "down": np.floor(lg),
        "nearest": np.where(x >= 1.5 * 2.0 ** np.floor(lg), np.floor(lg) + 1, np.floor(lg)),
    }[round_mode]
    want = (e + 127).astype(np.uint8)
    got = C.cast(x, to=ml_dtypes.float8_e8m0fnu, round_mode=round_mode)
    assert got.dtype == ml_dtypes.float8_e8m0fnu
    np.testing.assert_array_equal(got.view(np.uint8), want)
    np.testing.assert_array_equal(C.cast(got, to=np.float32), (2.0 ** (want.astype(np.float64) - 127)))


def test_e8m0_saturation_and_specials():
    x = np.array([np.nan, np.inf, 3e38, 0.0], np.float32)
    sat = C.cast(x, to=ml_dtypes.float8_e8m0fnu, saturate=1).view(np.uint8)
    np.testing.assert_array_equal(sat, [255, 254, 254, 0])
    non = C.cast(x, to=ml_dtypes.float8_e8m0fnu, saturate=0, round_mode="nearest").view(np.uint8)
    np.testing.assert_array_equal(non, [255, 255, 255, 255])
    with pytest.raises(KernelError):
        C.cast(x, to=ml_dtypes.float8_e8m0fnu, round_mode="sideways")


@pytest.mark.parametrize(
    "dt, bits, signed",
    [(ml_dtypes.int4, 4, True), (ml_dtypes.uint4, 4, False), (ml_dtypes.int2, 2, True), (ml_dtypes.uint2, 2, False)],
)
@pytest.mark.parametrize("src", [np.float32, np.float16, np.int8, np.int64])
def test_to_sub_byte_ints_wrap(dt, bits, signed, src):
    v = np.arange(-9, 16)
    x = v.astype(src)
    m = v % (1 << bits)
    want = np.where(signed & (m >= 1 << (bits - 1)), m - (1 << bits), m)
    got = C.cast(x, to=dt)
    assert got.dtype == dt
    np.testing.assert_array_equal(got.astype(np.int64), want)
    np.testing.assert_array_equal(C.cast(got, to=np.float32), want.astype(np.float32))
    np.testing.assert_array_equal(C.cast(got, to=np.int8), want.astype(np.int8))


def test_float4e2m1():
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float64)
    x = np.array([0.48, 0.25, 1.05, -3.5, -8, 9, 1e6, -0.0, 2.5, 5.0, 0.01], np.float32)
    want = []
    for v in x.astype(np.float64):
        a = min(abs(v), 6.0)
        d = np.abs(grid - a)
        best = np.flatnonzero(d == d.min())
        want.append(np.copysign(grid[best[-1] if len(best) == 1 else [b for b in best if b % 2 == 0][0]], v))
    got = C.cast(x, to=ml_dtypes.float4_e2m1fn)
    assert got.dtype == ml_dtypes.float4_e2m1fn
    np.testing.assert_array_equal(C.cast(got, to=np.float32), np.array(want, np.float32))


# ----------------------------------------------------------------------------- ordinary numeric casts
NUM = [
    np.bool_,
    np.int8,
    np.uint8,
    np.int16,
    np.uint16,
    np.int32,
    np.uint32,
    np.int64,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
]


@pytest.mark.parametrize("src, dst", list(itertools.product(NUM, NUM)))
def test_numeric_casts(src, dst):
    vals = [0, 1, 2, 7, 100, 127] + ([] if np.dtype(src).kind == "u" else [-1, -5, -100])
    if np.dtype(src).kind == "f":
        vals += [0.5, 2.75, -3.25]
    if src is np.bool_:
        vals = [0, 1]
    with np.errstate(over="ignore"):  # 2**64 etc. overflow float16 to inf, one more case of the rule
        x = np.array(vals, np.float64).astype(src)
    x64 = x.astype(np.float64)
    dk = np.dtype(dst)
    if dk.kind == "b":
        want = x64 != 0
    elif dk.kind in "iu":
        bits = dk.itemsize * 8
        t = [int(v) % (1 << bits) for v in np.trunc(x64)]  # the spec's two's complement wrap
        want = np.array([v - (1 << bits) if dk.kind == "i" and v >= 1 << (bits - 1) else v for v in t], dtype=object)
        if np.dtype(src).kind == "f" and dk.kind == "u":
            keep = x64 >= 0  # float -> unsigned out of range is undefined
            x, want = x[keep], want[keep]
        want = want.astype(dst)
    else:
        want = x64.astype(dst)
    got = C.cast(x, to=dst)
    assert got.dtype == dk and got.shape == x.shape
    np.testing.assert_array_equal(got, want)


def test_float_specials_and_bfloat16():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.333333343, 65520.0], np.float32)
    got = C.cast(x, to=np.float16)
    np.testing.assert_array_equal(got, np.array([1.0, np.nan, np.inf, -np.inf, 0.33325195, np.inf], np.float16))
    bf = C.cast(x, to=ml_dtypes.bfloat16)
    bits = x.view(np.uint32).astype(np.uint64)
    rne = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
    rne[1] = bf.view(np.uint16)[1]  # any NaN
    assert np.isnan(bf[1].astype(np.float32))
    np.testing.assert_array_equal(bf.view(np.uint16), rne)
    np.testing.assert_array_equal(
        C.cast(bf, to=np.float32).view(np.uint32)[[0, 2, 3]], (rne.astype(np.uint32) << 16)[[0, 2, 3]]
    )


def test_same_type_is_a_copy_and_names_are_accepted():
    x = np.arange(3, dtype=np.float32)
    y = C.cast(x, to=np.float32)
    assert y is not x and y.dtype == np.float32
    assert C.cast(x, to="float16").dtype == np.float16
    assert C.cast(x, to="bfloat16").dtype == ml_dtypes.bfloat16
    assert C.cast(x, to="string").dtype == object
    with pytest.raises(KernelError):
        C.cast(x, to="nonsense")


# ----------------------------------------------------------------------------- strings
def test_to_string():
    x = np.array([0.47892547, 1.5, -2.0, 1e-7, np.nan, np.inf, -np.inf], np.float32)
    got = C.cast(x, to=object)
    assert got.dtype == object
    assert list(got[:4]) == ["0.47892547", "1.5", "-2.0", "1e-07"]
    assert list(got[4:]) == ["NaN", "INF", "-INF"]
    for v, s in zip(x[:4], got[:4]):
        assert np.float32(float(s)) == v  # round trip
    assert list(C.cast(np.array([3, -7], np.int64), to=object)) == ["3", "-7"]
    assert list(C.cast(np.array([True, False]), to=object)) == ["1", "0"]
    assert list(C.cast(C.cast(np.array([True, False]), to=object), to=np.bool_)) == [True, False]


@pytest.mark.parametrize("dst", [np.float32, np.float64, np.float16])
def test_string_to_float(dst):
    s = np.array(
        ["3.14", "1000", "1e-5", "1E8", "-2.5e+3", "INF", "+INF", "inf", "-INF", "-Inf", "NaN", "nan", " 7 "], object
    )
    with np.errstate(over="ignore"):
        want = np.array(
            [3.14, 1000, 1e-5, 1e8, -2500, np.inf, np.inf, np.inf, -np.inf, -np.inf, np.nan, np.nan, 7], np.float64
        ).astype(dst)
    got = C.cast(s, to=dst)
    assert got.dtype == dst
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(C.cast(s.astype(bytes).astype(object), to=dst), want)  # bytes elements


def test_string_to_int_and_bool():
    s = np.array(["100", "-3", "100.5", "7"], object)
    np.testing.assert_array_equal(C.cast(s, to=np.int32), np.array([100, -3, 100, 7], np.int32))
    np.testing.assert_array_equal(
        C.cast(np.array(["1", "0", "true", "False"], object), to=np.bool_), [True, False, True, False]
    )
    with pytest.raises(KernelError):
        C.cast(np.array(["Hello World!"], object), to=np.float32)


def test_string_to_float8_saturates():
    got = C.cast(np.array(["1e6", "-INF", "0.5"], object), to=ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(C.cast(got, to=np.float32), [448.0, -448.0, 0.5])


# ----------------------------------------------------------------------------- CastLike / BitCast
def test_cast_like():
    x = np.array([1.7, -2.2, 1e6], np.float32)
    got = C.cast_like(x, np.zeros((0,), np.int16))
    np.testing.assert_array_equal(got[:2], np.array([1, -2], np.int16))
    assert got.dtype == np.int16
    f8 = C.cast_like(x, np.zeros(1, ml_dtypes.float8_e5m2), saturate=0)
    assert np.isinf(f8[2].astype(np.float32))


@pytest.mark.parametrize(
    "src, dst",
    [
        (np.float32, np.int32),
        (np.int32, np.float32),
        (np.float64, np.int64),
        (np.uint32, np.int32),
        (np.int8, np.uint8),
        (np.uint16, np.int16),
        (np.float16, np.uint16),
        (ml_dtypes.bfloat16, np.int16),
        (np.uint8, ml_dtypes.float8_e4m3fn),
    ],
)
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
def test_bit_cast(src, dst, shape):
    raw = np.random.default_rng(3).integers(0, 256, (int(np.prod(shape)) * np.dtype(src).itemsize,), np.uint8)
    x = np.frombuffer(raw.tobytes(), dtype=src).reshape(shape)
    got = C.bit_cast(x, to=dst)
    assert got.dtype == dst and got.shape == shape
    assert got.tobytes() == x.tobytes()


def test_bit_cast_bool_sub_byte_and_errors():
    np.testing.assert_array_equal(C.bit_cast(np.array([True, False]), to=np.uint8), np.array([1, 0], np.uint8))
    np.testing.assert_array_equal(C.bit_cast(np.array([1, 0], np.uint8), to=np.bool_), [True, False])
    got = C.bit_cast(np.array([-1, 7, -8], ml_dtypes.int4), to=ml_dtypes.uint4)
    np.testing.assert_array_equal(got.astype(np.int64), [15, 7, 8])
    for bad in [(np.float32, np.int64), (np.int8, np.int16), (ml_dtypes.int4, np.int8)]:
        with pytest.raises(KernelError):
            C.bit_cast(np.zeros(2, bad[0]), to=bad[1])
    with pytest.raises(KernelError):
        C.bit_cast(np.array(["a"], object), to=np.int64)


# ----------------------------------------------------------------------------- ONNX adapters
def _run(node, x, opset, out_type):
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
        [helper.make_tensor_value_info("y", out_type, None)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return stdops.onnx.run(m, [x])[0]


@pytest.mark.parametrize("opset", [6, 9, 13, 19, 21, 24, 25])
def test_onnx_cast_enum(opset):
    x = np.array([1.5, -2.5, 300.0], np.float32)
    got = _run(helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32), x, opset, TensorProto.INT32)
    np.testing.assert_array_equal(got, np.array([1, -2, 300], np.int32))
    assert got.dtype == np.int32


def test_onnx_cast_1_type_name():
    x = np.array([1.5, -2.5], np.float32)
    got = _run(helper.make_node("Cast", ["x"], ["y"], to="DOUBLE"), x, 1, TensorProto.DOUBLE)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, x.astype(np.float64))


def test_onnx_cast_saturate_and_bitcast():
    x = np.array([1e6, 0.5], np.float32)
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E4M3FN, saturate=0)
    got = _run(node, x, 19, TensorProto.FLOAT8E4M3FN)
    assert got.dtype == ml_dtypes.float8_e4m3fn and np.isnan(got[0].astype(np.float32))
    got = _run(helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT32), x, 26, TensorProto.INT32)
    np.testing.assert_array_equal(got, x.view(np.int32))


@pytest.mark.parametrize(
    "dt",
    [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
    + [ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2],
)
@pytest.mark.parametrize("src", [np.float64, np.float32, np.float16])
def test_float_to_int_out_of_range_rule(dt, src):
    """Our rule where the ONNX spec leaves float -> int overflow undefined (stdops/ops/cast.py): truncate
    toward zero, keep the low bits in two's complement; NaN and +-Inf give 0. Checked with Python integers."""
    vals = [np.nan, np.inf, -np.inf, 1e10, -1e10, 2.0**63, -(2.0**63), 2.0**64 + 2**12, 300.7, -129.9, 65504.0, -7.5]
    with np.errstate(over="ignore"):  # 2**64 etc. overflow float16 to inf, one more case of the rule
        x = np.array(vals, np.float64).astype(src)
    dt = np.dtype(dt)
    bits = {np.dtype(ml_dtypes.int4): 4, np.dtype(ml_dtypes.uint4): 4}.get(dt) or (
        2 if dt in (np.dtype(ml_dtypes.int2), np.dtype(ml_dtypes.uint2)) else dt.itemsize * 8
    )
    signed = dt.kind == "i" or dt in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.int2))
    want = []
    for v in x.astype(np.float64):
        if not np.isfinite(v):
            want.append(0)
            continue
        m = int(v) % (1 << bits)  # int() truncates toward zero; Python's % is the exact residue
        want.append(m - (1 << bits) if signed and m >= 1 << (bits - 1) else m)
    with np.errstate(invalid="ignore"):
        got = C.cast(x, to=dt)
    assert got.dtype == dt
    assert [int(g) for g in got.astype(np.int64 if signed or bits < 64 else np.uint64)] == want


@pytest.mark.parametrize("name", list(F8))
def test_float8_overflow_without_saturate_follows_the_table(name):
    """The no-saturate table, decided by us (not the conversion library): past max + half an ulp is NaN
    (E5M2: +-Inf); a tie at exactly that point goes to the even code."""
    dt, eb, mb, bias, kind = F8[name]
    x = np.array([1e6, -1e6, np.inf, -np.inf, np.nan, 0.5, -0.0], np.float32)
    got = C.cast(x, to=dt, saturate=0).astype(np.float64)
    want = _f8_ref(x, name, saturate=False).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok], want[ok])
    sat = C.cast(x, to=dt, saturate=1).astype(np.float64)
    mx = float(ml_dtypes.finfo(dt).max)
    np.testing.assert_array_equal(sat[:4], [mx, -mx, mx, -mx])
