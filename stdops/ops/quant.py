"""Linear quantization kernels: QuantizeLinear, DequantizeLinear (per-tensor, per-axis, blocked),
DynamicQuantizeLinear, QLinearMatMul, and the integer convolutions ConvInteger and QLinearConv.

Quantized types: uint8/int8/uint16/int16 (NumPy), int4/uint4/int2/uint2, float8 (e4m3fn, e4m3fnuz,
e5m2, e5m2fnuz), float4e2m1 and float6 via ml_dtypes. Rounding is half to even; integer results
saturate to the type's range; float8 saturates to +-max finite when ``saturate`` (else the plain
conversion: NaN or inf out of range).
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import KernelError
from ._registry import op
from ._window import check_rank, prod
from .cast import to_float8, to_int, to_saturating_small_float
from .conv import ConvWeight, conv_forward
from .lowp import is_low_precision, types

_NP_INT_QTYPES = frozenset(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16))
_NP_ARITH_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))


@functools.cache
def int_range(dt: np.dtype) -> tuple[int, int]:
    """(min, max) of an integer dtype, NumPy or ml_dtypes."""
    dt = np.dtype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return int(info.min), int(info.max)
    return types().iinfo(dt)


def _is_int_type(dt: np.dtype) -> bool:
    dt = np.dtype(dt)
    return dt.kind in "iu" or dt in _NP_INT_QTYPES or (is_low_precision(dt) and dt in types().ints)


def _is_float8(dt: np.dtype) -> bool:
    return is_low_precision(dt) and dt in types().float8


def _is_small_float(dt: np.dtype) -> bool:
    """float4 E2M1 and the float6 types: no Inf/NaN codes."""
    t = types()
    return is_low_precision(dt) and dt in t.floats and dt not in t.float8 and dt not in (t.bfloat16, t.e8m0)


def _arith_dtype(dt) -> np.dtype:
    """The dtype a division/multiplication 'in the precision of dt' runs in."""
    dt = np.dtype(dt)
    return dt if dt in _NP_ARITH_FLOATS or (is_low_precision(dt) and dt == types().bfloat16) else np.dtype(np.float32)


def _as_dtype(d, what: str):
    """An output_dtype/precision attribute: 0/None = unset, else a NumPy dtype."""
    if d is None or (isinstance(d, (int, np.integer)) and int(d) == 0):
        return None
    if isinstance(d, (int, np.integer)):
        raise KernelError(f"{what} must be a dtype (the ONNX front end converts the enum), got {d}")
    return np.dtype(d)


def broadcast_param(p: np.ndarray, shape: tuple, axis: int, block_size: int, what: str) -> np.ndarray:
    """Reshape a scale/zero-point to broadcast against ``shape``: a scalar (per-tensor), a 1-D
    vector along ``axis`` (per-axis), or, with ``block_size > 0``, a tensor of the input's rank
    whose ``axis`` dimension is ceil(D / block_size), repeated block_size times (blocked)."""
    p = np.asarray(p)
    if p.size == 1 and (p.ndim <= 1 or block_size <= 0):
        return p.reshape(())
    r = len(shape)
    if not -r <= axis < r:
        raise KernelError(f"{what}: axis {axis} out of range for rank {r}")
    axis %= r
    if block_size and block_size > 0:
        if p.ndim != r:
            raise KernelError(f"{what}: blocked quantization needs a scale of rank {r}, got shape {p.shape}")
        D = shape[axis]
        for i in range(r):
            if i != axis and p.shape[i] != shape[i]:
                raise KernelError(
                    f"{what}: scale shape {p.shape} does not fit input {shape} (blocked along axis {axis})"
                )
        if p.shape[axis] != -(-D // block_size):
            raise KernelError(
                f"{what}: scale has {p.shape[axis]} blocks along axis {axis}, "
                f"expected ceil({D} / {block_size}) = {-(-D // block_size)}"
            )
        return np.repeat(p, block_size, axis=axis).take(np.arange(D), axis=axis)
    if block_size < 0:
        raise KernelError(f"{what}: block_size must be positive, got {block_size}")
    if p.ndim != 1 or p.shape[0] != shape[axis]:
        raise KernelError(
            f"{what}: scale shape {p.shape} must be a scalar or a 1-D vector of "
            f"length {shape[axis]} (axis {axis} of {shape})"
        )
    dims = [1] * r
    dims[axis] = p.shape[0]
    return p.reshape(dims)


def _same_shape(zp: np.ndarray, scale: np.ndarray) -> bool:
    """Zero point and scale must have one shape (a scalar and a 1-element vector count as one)."""
    return zp.shape == scale.shape or (zp.size == 1 and scale.size == 1)


def saturate_to(v: np.ndarray, dt: np.dtype, saturate: int = 1) -> np.ndarray:
    """Convert float values (already rounded for integer types) to quantized type ``dt``: integers clip to
    the type's range (NaN -> 0), float8 follows Cast's saturate rule, float4/float6 saturate."""
    dt = np.dtype(dt)
    if _is_int_type(dt):
        lo, hi = int_range(dt)
        return to_int(np.clip(v, lo, hi), dt)
    v = np.asarray(v, dtype=np.float32)
    if _is_float8(dt):
        return to_float8(v, dt, saturate)
    return to_saturating_small_float(v, dt)


@op("onnx:QuantizeLinear-10")
def quantize_linear(x, y_scale, y_zero_point=None, /, *, axis=1, block_size=0, output_dtype=0, precision=0, saturate=1):
    """y = saturate(round_half_even(x / y_scale) + y_zero_point).

    Per-tensor, per-axis (1-D scale along ``axis``) or blocked (``block_size``). Output dtype:
    ``y_zero_point``'s, else ``output_dtype``, else uint8. The division runs in ``precision``
    (a dtype) or in ``y_scale``'s dtype. Float8/float4 outputs skip the rounding to integers.
    """
    x = np.asarray(x)
    y_scale = np.asarray(y_scale)
    odt = _as_dtype(output_dtype, "QuantizeLinear output_dtype")
    if y_zero_point is not None:
        y_zero_point = np.asarray(y_zero_point)
        if odt is not None and odt != y_zero_point.dtype:
            raise KernelError(
                f"QuantizeLinear: output_dtype {odt} differs from y_zero_point's dtype {y_zero_point.dtype}"
            )
        odt = y_zero_point.dtype
    odt = odt or np.dtype(np.uint8)
    if not (_is_int_type(odt) or _is_float8(odt) or _is_small_float(odt)):
        raise KernelError(f"QuantizeLinear: {odt} is not a quantized type")
    if y_zero_point is not None and not _same_shape(y_zero_point, y_scale):
        raise KernelError(
            f"QuantizeLinear: y_zero_point shape {y_zero_point.shape} differs from y_scale shape {y_scale.shape}"
        )
    prec = _as_dtype(precision, "QuantizeLinear precision")
    cdt = _arith_dtype(prec if prec is not None else y_scale.dtype)
    scale = broadcast_param(y_scale, x.shape, axis, block_size, "QuantizeLinear")
    v = x.astype(cdt) / scale.astype(cdt)
    if _is_int_type(odt):
        v = np.rint(v).astype(np.float64)
        if y_zero_point is not None:
            zp = broadcast_param(y_zero_point, x.shape, axis, block_size, "QuantizeLinear")
            v = v + zp.astype(np.float64)
        return np.asarray(saturate_to(v, odt))
    v = v.astype(np.float32)
    if y_zero_point is not None:
        zp = broadcast_param(y_zero_point, x.shape, axis, block_size, "QuantizeLinear")
        v = v + zp.astype(np.float32)
    return np.asarray(saturate_to(v, odt, saturate))


@op("onnx:DequantizeLinear-10")
def dequantize_linear(x, x_scale, x_zero_point=None, /, *, axis=1, block_size=0, output_dtype=0):
    """y = (x - x_zero_point) * x_scale.

    Per-tensor, per-axis (1-D scale along ``axis``) or blocked (``block_size``). Output dtype:
    ``output_dtype`` if set, else ``x_scale``'s dtype; computed in float32 (float64 for int32 x).
    """
    x = np.asarray(x)
    x_scale = np.asarray(x_scale)
    odt = _as_dtype(output_dtype, "DequantizeLinear output_dtype") or x_scale.dtype
    if odt not in _NP_ARITH_FLOATS and not (is_low_precision(odt) and odt == types().bfloat16):
        raise KernelError(
            f"DequantizeLinear: output dtype {odt} is not float16/32/64 or bfloat16 "
            f"(set output_dtype when x_scale is float8e8m0)"
        )
    cdt = np.float64 if x.dtype in (np.dtype(np.int32), np.dtype(np.int64)) or odt == np.float64 else np.float32
    d = x.astype(cdt)
    if x_zero_point is not None:
        x_zero_point = np.asarray(x_zero_point)
        if not _same_shape(x_zero_point, x_scale):
            raise KernelError(
                f"DequantizeLinear: x_zero_point shape {x_zero_point.shape} differs from x_scale shape {x_scale.shape}"
            )
        if x_zero_point.dtype != x.dtype:
            raise KernelError(
                f"DequantizeLinear: x_zero_point dtype {x_zero_point.dtype} differs from x dtype {x.dtype}"
            )
        zp = broadcast_param(x_zero_point, x.shape, axis, block_size, "DequantizeLinear")
        d = d - zp.astype(cdt)
    scale = broadcast_param(x_scale, x.shape, axis, block_size, "DequantizeLinear")
    with np.errstate(over="ignore"):
        return np.asarray((d * scale.astype(cdt)).astype(odt))


@op("onnx:DynamicQuantizeLinear-11")
def dynamic_quantize_linear(x, /):
    """y_scale = (max(0, max x) - min(0, min x)) / 255; y_zero_point = round(sat(-min(0, min x) /
    y_scale)); y = sat(round(x / y_scale) + y_zero_point) (uint8, half to even).

    Returns (y uint8 shape of x, y_scale float32 scalar, y_zero_point uint8 scalar). An all-zero
    (or empty) x gets y_scale = 1.
    """
    x = np.asarray(x, dtype=np.float32)
    hi = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
    lo = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
    scale = np.float32(1.0) if hi == lo else np.float32((hi - lo) / np.float32(255))
    zp = np.rint(np.clip(np.float32(0) - lo / scale, 0, 255))
    y = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.uint8)
    return y, np.asarray(scale, dtype=np.float32), np.asarray(zp, dtype=np.uint8)


def _row_param(p: np.ndarray, a: np.ndarray) -> np.ndarray:
    """A per-row (a's M axis) 1-D scale/zero point -> (M, 1); anything else broadcasts as is."""
    p = np.asarray(p)
    if p.ndim == 1 and p.size > 1 and a.ndim >= 2 and p.size == a.shape[-2]:
        return p.reshape(-1, 1)
    return p


@op("onnx:QLinearMatMul-10")
def qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point, /):
    """y = saturate(round((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale) + y_zp).

    NumPy matmul shapes; scales/zero points per tensor, per row of a, per column of b. Integer
    inputs accumulate exactly; float8 inputs are dequantized to float32 first. Dtype of y_zero_point.
    """
    a, b = np.asarray(a), np.asarray(b)
    y_zero_point = np.asarray(y_zero_point)
    a_scale, b_scale, y_scale = (np.asarray(s) for s in (a_scale, b_scale, y_scale))
    if a.ndim == 0 or b.ndim == 0:
        raise KernelError("QLinearMatMul: inputs must have rank >= 1")
    odt = y_zero_point.dtype
    if _is_int_type(a.dtype) and _is_int_type(b.dtype):
        A = a.astype(np.float64) - _row_param(a_zero_point, a).astype(np.float64)
        B = b.astype(np.float64) - np.asarray(b_zero_point).astype(np.float64)
        try:
            C = np.matmul(A, B)  # exact: integer products and sums well below 2**53
        except ValueError as e:
            raise KernelError(f"QLinearMatMul: {e}") from None
        sdt = _arith_dtype(y_scale.dtype)
        mult = (_row_param(a_scale, a).astype(sdt) * b_scale.astype(sdt)) / y_scale.astype(sdt)
        v = np.rint(C * mult.astype(np.float64))
        if _is_int_type(odt):
            return np.asarray(saturate_to(v + y_zero_point.astype(np.float64), odt))
        return np.asarray(saturate_to(v + y_zero_point.astype(np.float32), odt))
    A = (a.astype(np.float32) - _row_param(a_zero_point, a).astype(np.float32)) * _row_param(a_scale, a).astype(
        np.float32
    )
    B = (b.astype(np.float32) - np.asarray(b_zero_point).astype(np.float32)) * b_scale.astype(np.float32)
    try:
        C = np.matmul(A, B)
    except ValueError as e:
        raise KernelError(f"QLinearMatMul: {e}") from None
    v = C / y_scale.astype(np.float32)
    if _is_int_type(odt):
        return np.asarray(saturate_to(np.rint(v).astype(np.float64) + y_zero_point.astype(np.float64), odt))
    return np.asarray(saturate_to(v + y_zero_point.astype(np.float32), odt))


def _int_check(t, what):
    if t.dtype not in (np.int8, np.uint8):
        raise KernelError(f"{what} must be int8 or uint8, got {t.dtype}")


def _zero_point(zp, what, m=None, per_channel=False):
    if zp is None:
        return None
    zp = np.asarray(zp)
    if zp.size == 1:
        return zp.reshape(()).astype(np.float64)
    if per_channel and zp.ndim == 1 and zp.shape[0] == m:
        return zp.astype(np.float64)
    raise KernelError(
        f"{what} must be a scalar" + (f" or have shape ({m},)" if per_channel else "") + f", got shape {zp.shape}"
    )


class IntegerWeight:
    """W - w_zero_point of an integer convolution as exact float32 (and, on demand, float64) weights,
    built once (at load time when W is a constant: the kernels' prepare)."""

    def __init__(self, w, w_zero_point, group):
        _int_check(w, "w")
        m = w.shape[0] if w.ndim else 0
        wz = _zero_point(w_zero_point, "w_zero_point", m, per_channel=True)
        wf = w.astype(np.float32)
        if wz is not None:
            wf -= (wz.reshape(wz.shape + (1,) * (w.ndim - 1)) if wz.ndim else wz).astype(np.float32)
        self.wf, self.group = wf, group
        self.k = prod(w.shape[1:])
        self.wmax = float(np.abs(wf).max(initial=0))
        self._cw: dict = {}

    def conv_weight(self, dt) -> ConvWeight:
        cw = self._cw.get(np.dtype(dt))
        if cw is None:
            cw = self._cw[np.dtype(dt)] = ConvWeight(self.wf.astype(dt), self.group, exact=True)
        return cw


def _integer_accumulate(
    x, w, x_zero_point, w_zero_point, *, group, kernel_shape, strides, dilations, pads, auto_pad, iw=None
):
    """sum (x - x_zero_point) * (w - w_zero_point) as exact integers held in floats: float32 (twice
    as fast through BLAS) when every partial sum provably stays below 2**24, else float64. ``iw``: the
    weights already prepared."""
    _int_check(x, "x")
    check_rank(x)
    iw = iw or IntegerWeight(w, w_zero_point, group)
    xz = _zero_point(x_zero_point, "x_zero_point")
    xf = x.astype(np.float32)
    if xz is not None:
        xf -= np.float32(xz)
    bound = iw.k * float(np.abs(xf).max(initial=0)) * iw.wmax
    dt = np.float64 if bound >= 2.0**24 else np.float32
    y = conv_forward(
        xf.astype(dt, copy=False),
        iw.conv_weight(dt),
        None,
        kernel_shape=kernel_shape,
        strides=strides,
        dilations=dilations,
        pads=pads,
        auto_pad=auto_pad,
    )
    return y.astype(np.float64, copy=False)


def prepare_conv_integer(constants: tuple, attrs: dict):
    """Load time, when W (and w_zero_point, if the node has one) is a constant: W - w_zero_point laid out
    once for the exact float GEMMs. Returns the step, or None."""
    w = constants[1] if len(constants) > 1 else None
    if not isinstance(w, np.ndarray) or w.dtype not in (np.int8, np.uint8) or w.ndim < 3:
        return None
    wz = constants[3] if len(constants) > 3 else None
    try:
        iw = IntegerWeight(w, wz, attrs["group"])
    except KernelError:
        return None
    geo = {a: v for a, v in attrs.items() if a != "group"}

    def conv_integer_prepared(x, w_, x_zero_point=None, w_zero_point=None):
        if w_zero_point is not wz:  # a zero point known only at run time: the plain kernel
            return conv_integer(x, w_, x_zero_point, w_zero_point, **attrs)
        acc = _integer_accumulate(x, w_, x_zero_point, None, group=attrs["group"], iw=iw, **geo)
        return acc.astype(np.int32)

    return conv_integer_prepared


@op("onnx:ConvInteger-10", prepare=prepare_conv_integer)
def conv_integer(
    x,
    w,
    x_zero_point=None,
    w_zero_point=None,
    /,
    *,
    auto_pad="NOTSET",
    dilations=(),
    group=1,
    kernel_shape=(),
    pads=(),
    strides=(),
):
    """y = Conv(x - x_zero_point, w - w_zero_point) in exact integer arithmetic (padding is x_zero_point).

    x, w int8/uint8; x_zero_point a scalar; w_zero_point a scalar or one per output channel (M,).
    y int32 (N, M, O1..On), shapes as Conv.
    """
    acc = _integer_accumulate(
        x,
        w,
        x_zero_point,
        w_zero_point,
        group=group,
        kernel_shape=kernel_shape,
        strides=strides,
        dilations=dilations,
        pads=pads,
        auto_pad=auto_pad,
    )
    return acc.astype(np.int32)


@op("onnx:QLinearConv-10")
def qlinear_conv(
    x,
    x_scale,
    x_zero_point,
    w,
    w_scale,
    w_zero_point,
    y_scale,
    y_zero_point,
    b=None,
    /,
    *,
    auto_pad="NOTSET",
    dilations=(),
    group=1,
    kernel_shape=(),
    pads=(),
    strides=(),
):
    """y = saturate(round_half_even((Conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp).

    x, w, y int8/uint8 (y has y_zero_point's dtype); w_scale/w_zero_point per tensor or per output
    channel (M,); B int32 (M,) quantized with scale x_scale * w_scale. Shapes as Conv.
    """
    acc = _integer_accumulate(
        x,
        w,
        x_zero_point,
        w_zero_point,
        group=group,
        kernel_shape=kernel_shape,
        strides=strides,
        dilations=dilations,
        pads=pads,
        auto_pad=auto_pad,
    )
    M, n = acc.shape[1], acc.ndim - 2
    if b is not None:
        b = np.asarray(b)
        if b.shape != (M,):
            raise KernelError(f"B must have shape ({M},), got {b.shape}")
        acc += b.astype(np.float64).reshape((M,) + (1,) * n)
    xs = np.asarray(x_scale, np.float32)
    ws = np.asarray(w_scale, np.float32)
    ys = np.asarray(y_scale, np.float32)
    if xs.size != 1 or ys.size != 1:
        raise KernelError("x_scale and y_scale must be scalars")
    if ws.size != 1 and ws.shape != (M,):
        raise KernelError(f"w_scale must be a scalar or have shape ({M},), got {ws.shape}")
    scale = (xs.reshape(()) * ws.reshape(-1)) / ys.reshape(())  # float32, as the scales are
    scale = scale.reshape(-1, *(1,) * n) if scale.size > 1 else scale.reshape(())
    r = acc * scale.astype(np.float64)
    ydt = np.asarray(y_zero_point).dtype if y_zero_point is not None else x.dtype
    if ydt not in (np.int8, np.uint8):
        raise KernelError(f"y_zero_point must be int8 or uint8, got {ydt}")
    if y_zero_point is not None:
        yz = np.asarray(y_zero_point)
        if yz.size != 1:
            raise KernelError(f"y_zero_point must be a scalar, got shape {yz.shape}")
        r += float(yz.reshape(()))
    info = np.iinfo(ydt)
    r = np.rint(r)
    np.clip(r, info.min, info.max, out=r)
    return r.astype(ydt)
