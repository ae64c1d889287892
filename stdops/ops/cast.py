"""Type casts: Cast, CastLike, BitCast.

Types: bool, (u)int8..64, float16/32/64, bfloat16, the float8 family (e4m3fn, e4m3fnuz, e5m2,
e5m2fnuz, e8m0), float4e2m1, float6, int4/uint4, int2/uint2 (ml_dtypes storage, one element per
byte), and strings (numpy object arrays of ``str``; ``bytes`` elements are accepted on input).

Every result the ONNX Cast spec defines is computed here, not left to a conversion library: ml_dtypes
and NumPy are used only to store values and to round values that are in range (their results for NaN,
Inf and out-of-range values are unspecified and have changed between releases: ml_dtypes 0.7 turned
float -> int4 overflow into 0 where 0.5 wrapped). The rules (ONNX Cast, "conversion among numerical
types" and the float 8 tables):

- to an integer type (any width, sub-byte included): from an integer, discard the higher bits and
  reinterpret in two's complement (the spec's fixed-point rule, 200 -> -56 for int8); from a float,
  truncate toward zero, then the same wrap. The spec leaves float overflow undefined; we choose the
  wrap so that float and integer sources agree (int4(9.0) == int4(9) == -7). NaN and +-Inf become 0.
- to float8 E4M3FN/E4M3FNUZ/E5M2/E5M2FNUZ: round to nearest even; with ``saturate`` +-Inf and values
  whose rounding exceeds the largest finite value become +-max, without it NaN (E5M2: +-Inf).
- to float4 E2M1 and float6 (no Inf or NaN codes): round to nearest even, saturate to +-max;
  NaN has no code and the spec names none: it becomes 0.
- to IEEE floats (float16/32/64, bfloat16): round to nearest even, +-Inf when out of range.
- to bool: zero (+-0.0) is False, everything else (NaN too) True.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import op
from .dtypes import is_float, is_int, is_sub_byte_int
from .lowp import is_low_precision, types

_ROUND_MODES = ("up", "down", "nearest")
_NP_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))


def _dtype(to) -> np.dtype:
    """A numpy dtype from a dtype, a type or a name ('float32', 'bfloat16', 'string', ...)."""
    if isinstance(to, str):
        name = to.lower()
        if name in ("string", "str", "object"):
            return np.dtype(object)
        ml = types().module
        if hasattr(ml, name):
            return np.dtype(getattr(ml, name))
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
    if dt.kind == "b" or _is_int(dt) and is_low_precision(dt):  # bool -> "1" / "0"; sub-byte via int8
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
    return code.astype(np.uint8).view(types().e8m0)


# ----------------------------------------------------------------------------- conversion
def _int_width(dt: np.dtype) -> tuple[int, bool]:
    """(bits, signed) of an integer dtype."""
    if is_low_precision(dt):
        lo, _ = types().iinfo(dt)
        return types().bits[dt], lo < 0
    return dt.itemsize * 8, dt.kind == "i"


def to_int(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Truncate floats toward zero (NaN, +-Inf -> 0), then keep the low ``bits`` bits, two's complement."""
    bits, signed = _int_width(dt)
    store = np.dtype(np.int8 if signed else np.uint8) if is_low_precision(dt) else dt
    src = x.dtype
    if is_float(src):
        f = x.astype(np.float64)  # exact for every float source type
        lo, hi = (-(2.0 ** (bits - 1)), 2.0 ** (bits - 1)) if signed else (0.0, 2.0**bits)
        if f.size == 0 or (np.isfinite(f).all() and f.min() > lo - 1 and f.max() < hi):
            return np.trunc(f).astype(store).astype(dt, copy=False)  # all in range: plain truncation
        with np.errstate(invalid="ignore"):
            t = np.trunc(np.where(np.isfinite(f), f, 0.0))
            r = np.fmod(t, 2.0**64)  # exact: the residue modulo 2**64, with the sign of t
        neg = r < 0
        u = np.where(neg, -r, r).astype(np.uint64)  # |r| < 2**64, so exact
        u = np.where(neg, np.uint64(0) - u, u)  # two's complement of a negative residue
    elif src.kind == "b":
        u = x.astype(np.uint64)
    else:  # an integer: its bits, sign-extended to 64
        u = x.astype(np.int64 if (src.kind == "i" or is_low_precision(src)) else np.uint64).view(np.uint64)
    if bits == 64:
        return u.view(np.int64 if signed else np.uint64).astype(dt, copy=False)
    low = u & np.uint64((1 << bits) - 1)
    if signed:
        v = low.astype(np.int64) - np.where(low >= np.uint64(1 << (bits - 1)), np.int64(1 << bits), np.int64(0))
    else:
        v = low
    return v.astype(store).astype(dt, copy=False)


def _wide_float(x: np.ndarray) -> np.ndarray:
    """x as float32/float64, exactly (bool and integers through float64; float16/32/64 unchanged)."""
    src = x.dtype
    if src in _NP_FLOATS:
        return x
    if is_low_precision(src) and src in types().floats:
        return x.astype(np.float32)
    return x.astype(np.float64)


def _largest(dt: np.dtype) -> tuple[float, float, bool]:
    """(largest finite value, the next value below it, whether its code's last mantissa bit is 1)."""
    ml = types().module
    mx = ml.finfo(dt).max
    code = np.array(mx, dtype=dt).view(np.uint8)
    below = float(np.array(code - np.uint8(1), np.uint8).view(dt).astype(np.float64))
    return float(mx), below, bool(code & 1)


def to_float8(x: np.ndarray, dt: np.dtype, saturate) -> np.ndarray:
    """Round to nearest even into E4M3FN/E4M3FNUZ/E5M2/E5M2FNUZ; overflow per the ONNX Cast tables."""
    f = _wide_float(x)
    mx, below, max_is_odd = _largest(dt)
    with np.errstate(invalid="ignore", over="ignore"):
        y = np.clip(f, -mx, mx).astype(dt)  # in range: the library's round-to-nearest-even
        if saturate:
            return y  # +-Inf and anything rounding past max clip to +-max; NaN stays NaN
        a = np.abs(f)
        half_way = mx + (mx - below) / 2  # beyond it, rounding to nearest passes max
        over = (a > half_way) | ((a == half_way) & max_is_odd)  # a tie goes to the even code
        if over.any():
            e5m2 = dt == np.dtype(types().module.float8_e5m2)
            fill = np.where(f > 0, np.inf, -np.inf) if e5m2 else np.full(f.shape, np.nan)
            y = np.where(over, fill.astype(dt), y)
    return y


def to_saturating_small_float(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """float4 E2M1 / float6: round to nearest even, +-Inf and overflow saturate to +-max, NaN -> 0."""
    f = _wide_float(x)
    mx = float(types().module.finfo(dt).max)
    with np.errstate(invalid="ignore"):
        return np.clip(np.where(np.isnan(f), 0.0, f), -mx, mx).astype(dt)


def _convert(x: np.ndarray, dt: np.dtype, saturate=1, round_mode="up") -> np.ndarray:
    src = x.dtype
    if src == dt:
        return x.copy()
    if _is_string(dt):
        return _to_string(x)
    if _is_string(src):
        return _from_string(x, dt, saturate, round_mode)
    if dt.kind == "b":
        return _wide_float(x) != 0 if is_low_precision(src) else x != np.zeros((), src)
    if _is_int(dt):
        return to_int(x, dt)
    if is_low_precision(dt):
        t = types()
        if dt == t.e8m0:
            return _to_e8m0(x, saturate, round_mode)
        if dt in t.float8:
            return to_float8(x, dt, saturate)
        if dt != t.bfloat16:
            return to_saturating_small_float(x, dt)
        return _wide_float(x).astype(dt)  # bfloat16: IEEE-like, +-Inf out of range
    with np.errstate(invalid="ignore", over="ignore"):
        return (_wide_float(x) if is_low_precision(src) else x).astype(dt)


@op("onnx:Cast-6")
def cast(input, /, *, to, saturate=1, round_mode="up"):
    """y = input converted to the type ``to`` (a numpy dtype or its name).

    Shape of input, dtype ``to``. The module docstring states every rule: floats to ints truncate toward
    zero and, like ints, wrap when out of range (NaN, +-Inf -> 0); nonzero -> True; to float8 round to
    nearest even, and with ``saturate`` (default) +-Inf and out-of-range values clip to +-max (without it
    NaN, or Inf for E5M2); float4/float6 saturate; to E8M0: ``round_mode`` up/down/nearest. Strings parse
    plain/scientific numbers and INF/NaN (true/false too, for bool); numbers format as their shortest
    round-trip text (NaN, INF, -INF; bool 1/0).
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
    return types().bits.get(dt, dt.itemsize * 8) if is_low_precision(dt) else dt.itemsize * 8


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
