"""Type casts: Cast, CastLike, BitCast.

Types: bool, (u)int8..64, float16/32/64, bfloat16, the float8 family (e4m3fn, e4m3fnuz, e5m2,
e5m2fnuz, e8m0), float4e2m1, float6, int4/uint4, int2/uint2 (all via ml_dtypes, one element per
byte), and strings (numpy object arrays of ``str``; ``bytes`` elements are accepted on input).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import KernelError
from ._registry import op
from .dtypes import is_float, is_int, is_sub_byte_int

#: float8 types whose out-of-range conversion ``saturate`` controls (e8m0 has its own rules)
_F8 = frozenset(
    np.dtype(t)
    for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz)
)
_E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)
_ML_FLOATS = frozenset(
    np.dtype(t)
    for t in (
        ml_dtypes.bfloat16,
        ml_dtypes.float8_e4m3fn,
        ml_dtypes.float8_e4m3fnuz,
        ml_dtypes.float8_e5m2,
        ml_dtypes.float8_e5m2fnuz,
        ml_dtypes.float8_e8m0fnu,
        ml_dtypes.float4_e2m1fn,
        ml_dtypes.float6_e2m3fn,
        ml_dtypes.float6_e3m2fn,
    )
)
_ML_INTS = frozenset(np.dtype(t) for t in (ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2))
#: storage bits of the sub-byte types (BitCast compares bit widths)
_BITS = {
    np.dtype(ml_dtypes.int4): 4,
    np.dtype(ml_dtypes.uint4): 4,
    np.dtype(ml_dtypes.float4_e2m1fn): 4,
    np.dtype(ml_dtypes.int2): 2,
    np.dtype(ml_dtypes.uint2): 2,
    np.dtype(ml_dtypes.float6_e2m3fn): 6,
    np.dtype(ml_dtypes.float6_e3m2fn): 6,
}
_ROUND_MODES = ("up", "down", "nearest")
_NP_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))


def _dtype(to) -> np.dtype:
    """A numpy dtype from a dtype, a type or a name ('float32', 'bfloat16', 'string', ...)."""
    if isinstance(to, str):
        name = to.lower()
        if name in ("string", "str", "object"):
            return np.dtype(object)
        if hasattr(ml_dtypes, name):
            return np.dtype(getattr(ml_dtypes, name))
    try:
        return np.dtype(to)
    except TypeError as e:
        raise KernelError(f"unknown target type {to!r}") from e


def _is_string(dt: np.dtype) -> bool:
    return dt.kind in "OUS"


def _is_int(dt: np.dtype) -> bool:
    return is_int(dt) or is_sub_byte_int(dt)


# ----------------------------------------------------------------------------- strings
def _to_string(x: np.ndarray) -> np.ndarray:
    """Numbers -> their shortest round-trip text; NaN, INF, -INF for the special values; bool -> 1/0."""
    dt = x.dtype
    if is_float(dt):
        v = x if dt in _NP_FLOATS else x.astype(np.float32)
        s = v.astype(str).astype(object)
        nan, inf = np.isnan(v), np.isinf(v)
        if nan.any() or inf.any():
            s[nan] = "NaN"
            s[inf & (v > 0)] = "INF"
            s[inf & (v < 0)] = "-INF"
        return s
    if dt in _ML_INTS or dt.kind == "b":  # bool -> "1" / "0"
        x = x.astype(np.int8)
    return x.astype(str).astype(object)


def _text(x: np.ndarray) -> np.ndarray:
    """A string-like array (object of str/bytes, 'U', 'S') as a stripped numpy 'U' array."""
    if x.dtype.kind == "S":
        x = np.char.decode(x, "utf-8")
    return np.char.strip(x.astype(str))


def _from_string(x: np.ndarray, dt: np.dtype, saturate, round_mode) -> np.ndarray:
    """Parse numbers: plain or scientific notation; INF, +INF, -INF, NaN in any case."""
    s = _text(x)
    try:
        if dt.kind == "b":
            low = np.char.lower(s)
            word = (low == "true") | (low == "false")
            num = np.where(word, "0", s).astype(np.float64)
            return np.where(word, low == "true", num != 0)
        if dt.kind in "iu":
            try:
                return s.astype(dt)
            except (ValueError, OverflowError):  # "100.5" -> 100
                with np.errstate(invalid="ignore"):
                    return np.trunc(s.astype(np.float64)).astype(dt)
        f = s.astype(np.float64)
    except (ValueError, OverflowError) as e:
        raise KernelError(f"Cast: cannot parse a number from a string: {e}") from None
    return _convert(f, dt, saturate, round_mode)


# ----------------------------------------------------------------------------- float8 e8m0
def _to_e8m0(x: np.ndarray, saturate, round_mode) -> np.ndarray:
    """E8M0 keeps only an exponent: value 2**(code - 127), code 0..254, 255 is NaN.

    round_mode picks the power of two for a value between two: 'up' (away from zero), 'down'
    (toward zero) or 'nearest' (ties up). saturate clips Inf and overflow to the largest code
    (else NaN) and values below the smallest to code 0 (else NaN). The sign is ignored.
    """
    if round_mode not in _ROUND_MODES:
        raise KernelError(f"Cast: round_mode must be one of {_ROUND_MODES}, got {round_mode!r}")
    f = np.array(x, dtype=np.float32, order="C")
    bits = f.view(np.uint32)
    e = ((bits >> 23) & 0xFF).astype(np.int32)
    m = bits & 0x7FFFFF
    sub = e == 0  # zero or subnormal: below 2**-126, candidates 2**-127 (code 0) and 2**-126
    if round_mode == "up":
        inc = np.where(sub, m > 0x400000, m != 0)
        below = np.zeros(f.shape, bool)
    elif round_mode == "down":
        inc = np.zeros(f.shape, bool)
        below = sub & (m < 0x400000)
    else:
        inc = np.where(sub, m >= 0x600000, m >= 0x400000)
        below = sub & (m < 0x200000)
    code = e + inc
    special = e == 0xFF
    nan = special & (m != 0)
    inf = special & (m == 0)
    if saturate:
        code = np.minimum(code, 254)
        code = np.where(inf, 254, code)
    else:
        code = np.where((code > 254) | inf | below | (sub & (m == 0)), 255, code)
    code = np.where(nan, 255, code)
    return code.astype(np.uint8).view(_E8M0)


# ----------------------------------------------------------------------------- conversion
def _convert(x: np.ndarray, dt: np.dtype, saturate=1, round_mode="up") -> np.ndarray:
    src = x.dtype
    if src == dt:
        return x.copy()
    if _is_string(dt):
        return _to_string(x)
    if _is_string(src):
        return _from_string(x, dt, saturate, round_mode)
    if dt == _E8M0:
        return _to_e8m0(x, saturate, round_mode)
    with np.errstate(invalid="ignore", over="ignore"):
        if dt in _F8:
            if src not in _NP_FLOATS:  # ints, bool, other ml_dtypes floats: exact in float32/64
                x = x.astype(np.float32 if src.itemsize <= 2 else np.float64)
            if saturate:
                big = float(ml_dtypes.finfo(dt).max)
                x = np.clip(x, np.asarray(-big, x.dtype), np.asarray(big, x.dtype))
            return x.astype(dt)
        if dt.kind == "b":
            return x != np.zeros((), src)
        if src.kind == "b" and (dt in _ML_FLOATS or dt in _ML_INTS):
            x = x.astype(np.uint8)
        if (src in _ML_FLOATS or src in _ML_INTS) and dt not in _ML_FLOATS | _ML_INTS:
            # via a wide numpy type: ml_dtypes converts to float32/int8 exactly
            x = x.astype(np.float32 if src in _ML_FLOATS else np.int8)
        try:
            return x.astype(dt)
        except TypeError:
            return x.astype(np.float64 if is_float(src) else np.int64).astype(dt)


@op("onnx:Cast-6")
def cast(input, /, *, to, saturate=1, round_mode="up"):
    """y = input converted to the type ``to`` (a numpy dtype or its name).

    Shape of input, dtype ``to``. Floats to ints truncate toward zero; ints wrap when out of range;
    nonzero -> True. To float8: round to nearest even, and with ``saturate`` (default) +-Inf and
    out-of-range values clip to +-max (without it they become NaN, or Inf for E5M2). To E8M0:
    ``round_mode`` up/down/nearest. Strings parse plain/scientific numbers and INF/NaN (true/false
    too, for bool); numbers format as their shortest round-trip text (NaN, INF, -INF; bool 1/0).
    """
    x = np.asarray(input)
    return _convert(x, _dtype(to), saturate, round_mode)


@op("onnx:CastLike-15")
def cast_like(input, target_type, /, *, saturate=1, round_mode="up"):
    """y = Cast(input, to=target_type.dtype); see Cast.

    Shape of input, dtype of target_type.
    """
    x = np.asarray(input)
    return _convert(x, np.asarray(target_type).dtype, saturate, round_mode)


def _bits(dt: np.dtype) -> int:
    return _BITS.get(dt, dt.itemsize * 8)


@op("onnx:BitCast-26")
def bit_cast(input, /, *, to):
    """y = the bits of input reinterpreted as type ``to`` (same bit width, little endian).

    Shape of input, dtype ``to``. Strings are not allowed.
    """
    x = np.asarray(input)
    dt = _dtype(to)
    if _is_string(dt) or _is_string(x.dtype):
        raise KernelError("BitCast: string tensors cannot be bit-cast")
    if _bits(dt) != _bits(x.dtype):
        raise KernelError(f"BitCast: {x.dtype} ({_bits(x.dtype)} bits) and {dt} ({_bits(dt)} bits) differ in bit width")
    if dt.kind == "b":
        return x.view(np.uint8) != 0
    return np.array(x, order="C").view(dt)
