"""Arithmetic layers (ncnn-operators.txt): UnaryOp, BinaryOp (with ncnn's own broadcasting), Eltwise,
Scale, Bias, BatchNorm, Cast, Packing, MemoryData, Diag.

Per-"channel" parameters (Scale, BatchNorm, PReLU) apply along the blob's axis 0: per element of a 1d
blob, per row of a 2d blob, per channel of a 3d/4d blob.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import KernelError
from ...limits import check_elements
from ...ops import cast as casts
from ...ops import elementwise, norm, shape_gen, shape_pad
from ...ops.lowp import types
from ..spec import P, W, layer

_F32 = np.float32


# --------------------------------------------------------------------------- UnaryOp


def _unary_table() -> dict[int, Callable[[np.ndarray], np.ndarray]]:
    mul, recip, sqrt, sign = elementwise.mul, elementwise.reciprocal, elementwise.sqrt, elementwise.sign

    def np_unary(ufunc):
        def run(x):
            with np.errstate(all="ignore"):
                return ufunc(x)

        return run

    def sign_ncnn(x):  # NaN gives 0 in ncnn
        s = sign(x)
        return np.where(np.isnan(s), _F32(0), s) if s.size and np.isnan(s).any() else s

    return {
        0: elementwise.abs_,
        1: elementwise.neg,
        2: elementwise.floor,
        3: elementwise.ceil,
        4: lambda x: mul(x, x),
        5: sqrt,
        6: lambda x: recip(sqrt(x)),
        7: elementwise.exp,
        8: elementwise.log,
        9: elementwise.sin,
        10: elementwise.cos,
        11: elementwise.tan,
        12: elementwise.asin,
        13: elementwise.acos,
        14: elementwise.atan,
        15: recip,
        16: elementwise.tanh,
        17: np_unary(np.log10),
        18: elementwise.round_,
        19: np_unary(np.trunc),
        20: sign_ncnn,
        21: np_unary(np.expm1),
        22: elementwise.sinh,
        23: elementwise.asinh,
        24: elementwise.cosh,
        25: elementwise.acosh,
        26: elementwise.atanh,
        27: np_unary(np.log1p),
    }


UNARY_NAMES = (
    "abs neg floor ceil square sqrt rsqrt exp log sin cos tan asin acos atan reciprocal tanh "
    "log10 round trunc sign expm1 sinh asinh cosh acosh atanh log1p"
).split()


@layer(
    "UnaryOp",
    params=[P(0, "op_type", 0)],
    kernels=(
        elementwise.abs_,
        elementwise.acos,
        elementwise.acosh,
        elementwise.asin,
        elementwise.asinh,
        elementwise.atan,
        elementwise.atanh,
        elementwise.ceil,
        elementwise.cos,
        elementwise.cosh,
        elementwise.exp,
        elementwise.floor,
        elementwise.log,
        elementwise.mul,
        elementwise.neg,
        elementwise.reciprocal,
        elementwise.round_,
        elementwise.sign,
        elementwise.sin,
        elementwise.sinh,
        elementwise.sqrt,
        elementwise.tan,
        elementwise.tanh,
    ),
)
def unaryop(p, w):
    """y = op(x): 0 abs, 1 neg, 2 floor, 3 ceil, 4 square, 5 sqrt, 6 rsqrt, 7 exp, 8 log, 9 sin, 10 cos,
    11 tan, 12 asin, 13 acos, 14 atan, 15 reciprocal, 16 tanh, 17 log10, 18 round (half to even),
    19 trunc, 20 sign, 21 expm1, 22 sinh, 23 asinh, 24 cosh, 25 acosh, 26 atanh, 27 log1p."""
    table = _unary_table()
    if p.op_type not in table:
        raise ValueError(f"UnaryOp op_type {p.op_type} is not one of 0..{len(table) - 1}")
    return table[p.op_type]


# --------------------------------------------------------------------------- BinaryOp


def _ieee_remainder(a, b):
    """C's remainderf: a - n * b with n = a / b rounded half to even (exact, via float64)."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(all="ignore"):
        return (a64 - np.rint(a64 / b64) * b64).astype(_F32)


def _np_binary(ufunc):
    def run(a, b):
        with np.errstate(all="ignore"):
            return np.asarray(ufunc(a, b), _F32)

    return run


def _binary_table() -> dict[int, Callable[[np.ndarray, np.ndarray], np.ndarray]]:
    div, mod = elementwise.div, elementwise.mod
    floor = elementwise.floor
    ops = {
        0: elementwise.add,
        1: elementwise.sub,
        2: elementwise.mul,
        3: div,
        4: elementwise.max_,
        5: elementwise.min_,
        6: elementwise.pow_,
        10: _np_binary(np.arctan2),
        12: lambda a, b: mod(a, b, fmod=1),
        14: _np_binary(np.logaddexp),
        15: lambda a, b: floor(div(a, b)),
        17: _ieee_remainder,
    }
    # reversed forms: op(b, a)
    for r, base in ((7, 1), (8, 3), (9, 6), (11, 10), (13, 12), (16, 15), (18, 17)):
        ops[r] = (lambda f: lambda a, b: f(b, a))(ops[base])
    return ops


BINARY_NAMES = (
    "add sub mul div max min pow rsub rdiv rpow atan2 ratan2 fmod rfmod logaddexp floor_divide "
    "rfloor_divide remainder rremainder"
).split()


def ncnn_broadcast_shapes(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The shapes ncnn gives A and B (numpy order, no batch axis) before broadcasting them elementwise.

    The lower-rank operand is expanded at its INNER end (the opposite of numpy's rule): a 1d operand of
    length n against a 2d (h, w) one becomes (n, 1) when n == h, else (1, n); against 3d/4d it becomes
    (n, 1, 1[, 1]) when n == c, else (1, 1[, 1], n); a 2d (h, w) becomes (h, w, 1[, 1]); a 3d (c, h, w)
    against 4d becomes (c, h, w, 1)."""

    def expand(x, other):
        n, r = len(x), len(other)
        if n >= r:
            return x
        if n == 1:
            lead = other[0]
            return (x[0],) + (1,) * (r - 1) if x[0] == lead else (1,) * (r - 1) + (x[0],)
        return x + (1,) * (r - n)

    return expand(a, b), expand(b, a)


def ncnn_binary(fn: Callable, a: np.ndarray, b: np.ndarray, what: str = "BinaryOp") -> np.ndarray:
    """fn(A, B) with ncnn's broadcasting: expand the lower-rank operand (see ncnn_broadcast_shapes); the
    output takes the larger size of every axis. Along w (the last axis) the sizes must match or one be 1.
    Along the outer axes (h, d, c) ncnn reads row / depth / channel ``min(i, size - 1)`` of each operand
    (binaryop.cpp's broadcast loop): a size-1 axis broadcasts, and a shorter one repeats its last entry."""
    shape_a, shape_b = a.shape, b.shape
    sa, sb = ncnn_broadcast_shapes(shape_a, shape_b)
    a, b = a.reshape(sa), b.reshape(sb)
    last = len(sa) - 1
    for i, (m, n) in enumerate(zip(sa, sb)):
        if m == n or m == 1 or n == 1:
            continue
        if i == last:
            raise KernelError(
                f"{what}: blob shapes {shape_a} and {shape_b} do not broadcast "
                f"(ncnn aligns them as {sa} and {sb}; w: {m} vs {n})"
            )
        out = max(m, n)
        if m < out:
            a = np.take(a, np.minimum(np.arange(out), m - 1), axis=i)
        else:
            b = np.take(b, np.minimum(np.arange(out), n - 1), axis=i)
    return fn(a, b)


@layer(
    "BinaryOp",
    params=[P(0, "op_type", 0), P(1, "with_scalar", 0), P(2, "b", 0.0)],
    inputs=None,
    kernels=(
        elementwise.add,
        elementwise.div,
        elementwise.floor,
        elementwise.max_,
        elementwise.min_,
        elementwise.mod,
        elementwise.mul,
        elementwise.pow_,
        elementwise.sub,
    ),
)
def binaryop(p, w):
    """C = op(A, B): 0 add, 1 sub, 2 mul, 3 div, 4 max, 5 min, 6 pow, 7 rsub, 8 rdiv, 9 rpow, 10 atan2,
    11 ratan2, 12 fmod, 13 rfmod, 14 logaddexp, 15 floor_divide, 16 rfloor_divide, 17 remainder
    (IEEE, half to even), 18 rremainder; r-ops swap the operands. with_scalar=1: one bottom, B = b.
    Two bottoms broadcast by ncnn's rule (ncnn_broadcast_shapes)."""
    table = _binary_table()
    if p.op_type not in table:
        raise ValueError(f"BinaryOp op_type {p.op_type} is not one of 0..{len(table) - 1}")
    fn = table[p.op_type]
    want = 1 if p.with_scalar else 2
    if p.n_bottoms != want:
        raise ValueError(f"BinaryOp with_scalar={p.with_scalar} takes {want} bottom(s), the layer has {p.n_bottoms}")
    if p.with_scalar:
        bv = np.asarray(p.b, _F32)
        return lambda a: fn(a, bv)

    def run(a, b):
        return ncnn_binary(fn, a, b)

    run.binary_form = BINARY_NAMES[p.op_type]  # what stdops/ncnn/fuse.py matches
    return run


# --------------------------------------------------------------------------- Eltwise


@layer(
    "Eltwise",
    params=[P(0, "op_type", 0), P(1, "coeffs", (), kind="floats")],
    inputs=None,
    kernels=(elementwise.add, elementwise.max_, elementwise.mul, elementwise.sum_),
)
def eltwise(p, w):
    """y = x0 * x1 * ... (op 0), sum of coeff_i * x_i (op 1; no coeffs: plain sum), max (op 2); every
    bottom has the first one's shape."""
    if p.op_type not in (0, 1, 2):
        raise ValueError(f"Eltwise op_type {p.op_type} is not one of 0 (prod), 1 (sum), 2 (max)")
    coeffs = [_F32(c) for c in p.coeffs]
    if p.op_type == 1 and coeffs and len(coeffs) < p.n_bottoms:
        raise ValueError(f"Eltwise has {p.n_bottoms} bottoms but {len(coeffs)} coeffs")
    mul, add = elementwise.mul, elementwise.add

    def check(xs):
        if not xs:
            raise KernelError("Eltwise: no bottom blobs")
        for x in xs[1:]:
            if x.shape != xs[0].shape:
                raise KernelError(f"Eltwise: bottom shapes differ: {xs[0].shape} and {x.shape}")

    if p.op_type == 0:

        def run(*xs):
            check(xs)
            y = xs[0]
            for x in xs[1:]:
                y = mul(y, x)
            return y
    elif p.op_type == 2:
        mx = elementwise.max_

        def run(*xs):
            check(xs)
            return mx(*xs)
    elif not coeffs:
        sm = elementwise.sum_

        def run(*xs):
            check(xs)
            return sm(*xs)
    else:
        cs = [np.asarray(c, _F32) for c in coeffs]

        def run(*xs):
            check(xs)
            y = mul(xs[0], cs[0])
            for x, c in zip(xs[1:], cs[1:]):
                y = add(y, mul(x, c))
            return y

    return run


# --------------------------------------------------------------------------- Scale, Bias, BatchNorm


def _along_axis0(v: np.ndarray, x: np.ndarray, what: str) -> np.ndarray:
    """v (one value per element of x's axis 0) shaped to broadcast against x. ncnn reads entry i for
    row / channel i (scale.cpp, bias.cpp), so data covering more than axis 0 (the whole blob, h * w, ...)
    uses its first entries; fewer entries than axis 0 would be read past their end: refused."""
    n = x.shape[0]
    if v.size < n:
        raise KernelError(f"{what}: {v.size} values for a blob of shape {x.shape} (axis 0 has {n})")
    return v[:n].reshape((n,) + (1,) * (x.ndim - 1))


def _count(n: int, what: str) -> int:
    """A weight count from the params: at least 1."""
    if n < 1:
        raise ValueError(f"{what}={n} must be >= 1")
    return n


def _scale_weights(p):
    if p.scale_data_size == -233:
        return []
    if p.scale_data_size < 1:
        raise ValueError(f"scale_data_size={p.scale_data_size} must be >= 1 (or -233: the scale is a second bottom)")
    return [W("scale", p.scale_data_size), *([W("bias", p.scale_data_size)] if p.bias_term else [])]


@layer(
    "Scale",
    params=[P(0, "scale_data_size", 0), P(1, "bias_term", 0)],
    weights=_scale_weights,
    inputs=None,
    kernels=(elementwise.add, elementwise.mul),
)
def scale(p, w):
    """y = x * scale + bias along axis 0 (1d: per element, 2d: per row, 3d/4d: per channel).
    scale_data_size=-233: two bottoms, the scale is the second blob (no bias)."""
    mul, add = elementwise.mul, elementwise.add
    if p.scale_data_size == -233:
        if p.bias_term:
            raise ValueError(
                "Scale with scale_data_size=-233 (scale from a second bottom) has no bias weights; bias_term must be 0"
            )
        if p.n_bottoms != 2:
            raise ValueError(f"Scale with scale_data_size=-233 takes 2 bottoms, the layer has {p.n_bottoms}")
        return lambda x, s: mul(x, _along_axis0(np.asarray(s, _F32).ravel(), x, "Scale"))
    if p.n_bottoms != 1:
        raise ValueError(f"Scale with scale weights takes 1 bottom, the layer has {p.n_bottoms}")
    s, b = w["scale"], w.get("bias")
    if b is None:
        return lambda x: mul(x, _along_axis0(s, x, "Scale"))
    return lambda x: add(mul(x, _along_axis0(s, x, "Scale")), _along_axis0(b, x, "Scale"))


@layer(
    "Bias",
    params=[P(0, "bias_data_size", 0)],
    weights=lambda p: [W("bias", _count(p.bias_data_size, "bias_data_size"))],
    kernels=(elementwise.add,),
)
def bias(p, w):
    """y = x + bias per channel of a 3d/4d blob; a 1d or 2d blob (one channel in ncnn) gets bias[0]."""
    b, add = w["bias"], elementwise.add
    b0 = np.asarray(b[0], _F32)

    def run(x):
        if x.ndim <= 2:
            return add(x, b0)
        return add(x, _along_axis0(b, x, "Bias"))

    return run


@layer(
    "BatchNorm",
    params=[P(0, "channels", 0), P(1, "eps", 0.0)],
    weights=lambda p: [W(n, _count(p.channels, "channels")) for n in ("slope", "mean", "var", "bias")],
    kernels=(norm.batch_normalization,),
)
def batchnorm(p, w):
    """y = (x - mean) / sqrt(var + eps) * slope + bias along axis 0 (1d: per element, 2d: per row,
    3d/4d: per channel); a zero sqrt(var + eps) counts as 1e-4, as in ncnn."""
    slope, mean, var, b = w["slope"], w["mean"], w["var"], w["bias"]
    eps = _F32(p.eps)
    # ncnn's guard against a zero denominator, folded into var
    var = np.where(var + eps == 0, _F32(1e-8) - eps, var).astype(_F32)  # sqrt(var + eps) == 0
    bn = norm.batch_normalization
    c = slope.size

    def run(x):
        if x.shape[0] != c:
            raise KernelError(f"BatchNorm: {c} channels for a blob of shape {x.shape} (axis 0 has {x.shape[0]})")
        return bn(x[None], slope, b, mean, var, epsilon=float(eps))[0]

    return run


# --------------------------------------------------------------------------- Cast, Packing


def cast_type(code: int) -> np.dtype:
    """ncnn Cast's type codes: 1 float32, 2 float16, 3 int8, 4 bfloat16 (imported lazily: see ops/lowp.py)."""
    if code == 4:
        return types().bfloat16
    codes: dict[int, np.dtype] = {1: np.dtype(np.float32), 2: np.dtype(np.float16), 3: np.dtype(np.int8)}
    return codes[code]


def _to_int8(x: np.ndarray) -> np.ndarray:
    """ncnn's float -> int8: round half away from zero, saturate to [-128, 127]."""
    with np.errstate(invalid="ignore"):
        r = np.trunc(x.astype(_F32) + np.where(x >= 0, _F32(0.5), _F32(-0.5)))
        return np.clip(np.nan_to_num(r, nan=0.0), -128, 127).astype(np.int8)


@layer("Cast", params=[P(0, "type_from", 0), P(1, "type_to", 0)], kernels=(casts.cast,))
def cast(p, w):
    """y = x converted to type_to: 1 float32, 2 float16, 3 int8, 4 bfloat16 (0 auto: unchanged).
    Blobs carry their type as the numpy dtype (float16, int8, ml_dtypes.bfloat16); type_from says what
    the input is and a blob of another dtype is converted from its own values. Float to float16 and
    bfloat16 round to nearest even (ncnn's vectorized paths); to int8 rounds half away from zero and
    saturates."""
    for name in ("type_from", "type_to"):
        t = getattr(p, name)
        if t not in (0, 1, 2, 3, 4):
            raise ValueError(f"Cast {name}={t} is not one of 0 (auto), 1 fp32, 2 fp16, 3 int8, 4 bf16")
    if p.type_to == 0 or p.type_from == p.type_to:
        return lambda x: x
    to = cast_type(p.type_to)
    conv = casts.cast
    if p.type_to == 3:
        return _to_int8

    def run(x):
        if x.dtype == to:
            return x
        if x.dtype != np.float32:
            x = x.astype(_F32)
        return conv(x, to=to)

    return run


@layer(
    "Packing",
    params=[
        P(0, "out_elempack", 1),
        P(1, "use_padding", 0),
        P(2, "cast_type_from", 0),
        P(3, "cast_type_to", 0),
        P(4, "storage_type_from", 0),
        P(5, "storage_type_to", 0),
    ],
    kernels=(shape_pad.pad,),
)
def packing(p, w):
    """Changes ncnn's SIMD lane packing (elempack) of a blob. Blobs here are never packed (the wheel,
    unpacked, gives the same values and shape), so this is the identity, except with use_padding=1:
    axis 0 (w of a 1d blob, h of 2d, c of 3d/4d) grows to a multiple of out_elempack, the new entries 0
    (ncnn leaves them unset)."""
    if p.out_elempack < 1:
        raise ValueError(f"Packing out_elempack={p.out_elempack} must be >= 1")
    ep = p.out_elempack
    if not p.use_padding or ep == 1:
        return lambda x: x

    def run(x):
        extra = -x.shape[0] % ep
        if not extra:
            return x
        check_elements((x.shape[0] + extra,) + x.shape[1:], "Packing output")
        pads = np.zeros(2 * x.ndim, np.int64)
        pads[x.ndim] = extra
        return shape_pad.pad(x, pads, np.zeros((), x.dtype), mode="constant")

    return run


# --------------------------------------------------------------------------- MemoryData, Diag


def _memorydata_shape(p) -> tuple[int, ...]:
    if p.d:
        return (p.c, p.d, p.h, p.w)
    if p.c:
        return (p.c, p.h, p.w)
    if p.h:
        return (p.h, p.w)
    if p.w:
        return (p.w,)
    return ()


def _memorydata_weights(p):
    shape = _memorydata_shape(p)
    if any(s < 0 for s in shape):
        raise ValueError(f"MemoryData shape {shape} has a negative size")
    if not shape:
        return []
    return [W("data", int(np.prod(shape)), tagged=(p.load_type == 0))]


@layer(
    "MemoryData",
    params=[P(0, "w", 0), P(1, "h", 0), P(11, "d", 0), P(2, "c", 0), P(21, "load_type", 1)],
    weights=_memorydata_weights,
    inputs=0,
    kernels=(shape_gen.constant,),
)
def memorydata(p, w):
    """y = the stored blob of shape (w) / (h, w) / (c, h, w) / (c, d, h, w) (by which of w, h, c, d are
    set); load_type 1 stores raw float32, 0 a tagged (fp32/fp16/int8) array. No shape: one zero."""
    if p.load_type not in (0, 1):
        raise ValueError(f"MemoryData load_type={p.load_type} must be 0 (tagged) or 1 (raw fp32)")
    shape = _memorydata_shape(p)
    if not shape:
        data = np.zeros((1,), _F32)
    else:
        data = np.asarray(w["data"]).astype(_F32).reshape(shape)
    data = shape_gen.constant(value=data)  # once, at load time
    data.setflags(write=False)
    return lambda: data


@layer(
    "Diag",
    params=[P(0, "diagonal", 0)],
    ncnn_only="no ONNX operator builds a matrix from a diagonal or reads one out (NumPy's diag does)",
)
def diag(p, w):
    """1d x: the square matrix with x on diagonal k; 2d x: its diagonal k as a 1d blob (k > 0 above the
    main diagonal, k < 0 below)."""
    k = p.diagonal

    def run(x):
        if x.ndim not in (1, 2):
            raise KernelError(f"Diag: takes a 1d or 2d blob, got shape {x.shape}")
        if x.ndim == 1:
            n = x.shape[0] + abs(k)
            check_elements((n, n), "Diag output")
            return np.ascontiguousarray(np.diag(x, k))
        # an offset beyond the matrix selects nothing; clamped, since numpy's diagonal crashes
        # (SIGSEGV) on an offset of -2**31
        return np.ascontiguousarray(np.diag(x, min(max(k, -x.shape[0]), x.shape[1])))

    return run
