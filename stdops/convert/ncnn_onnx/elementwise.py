"""Elementwise ncnn layers -> ONNX: activations, UnaryOp, BinaryOp (ncnn's own broadcasting made explicit),
Eltwise, Scale, Bias, BatchNorm, Softmax, Cast and the int8 layers Quantize / Dequantize / Requantize.

Semantics are those of the ncnn front end (stdops/ncnn/layers/activation.py, arith.py, quant.py); where
ONNX has no op (atan2, IEEE remainder, logaddexp, ncnn's int8 rounding) the formula is written out, in
float64 where the loader computes in float64.
"""

from __future__ import annotations

import math

import numpy as np

from ...ncnn.layers.arith import ncnn_broadcast_shapes
from .base import F32, LayerCtx, affine, emits, float2int8, fused_activation


def _simple(op: str, **attrs):
    def emit(ctx: LayerCtx) -> None:
        ctx.put(0, ctx.g.op(op, [ctx.x()], **attrs))

    return emit


for _t, _op in (
    ("AbsVal", "Abs"),
    ("Sigmoid", "Sigmoid"),
    ("TanH", "Tanh"),
    ("BNLL", "Softplus"),
    ("Softplus", "Softplus"),
    ("Erf", "Erf"),
    ("Mish", "Mish"),
):
    emits(_t)(_simple(_op))


@emits("ReLU")
def relu(ctx: LayerCtx) -> None:
    s = float(ctx.p.slope)
    ctx.put(0, ctx.g.op("Relu", [ctx.x()]) if s == 0.0 else ctx.g.op("LeakyRelu", [ctx.x()], alpha=s))


@emits("CELU")
def celu(ctx: LayerCtx) -> None:
    a = float(ctx.p.alpha)
    ctx.put(0, ctx.g.op("Relu", [ctx.x()]) if a == 0.0 else ctx.g.op("Celu", [ctx.x()], alpha=a))


@emits("ELU")
def elu(ctx: LayerCtx) -> None:
    ctx.put(0, ctx.g.op("Elu", [ctx.x()], alpha=float(ctx.p.alpha)))


@emits("SELU")
def selu(ctx: LayerCtx) -> None:
    ctx.put(0, ctx.g.op("Selu", [ctx.x()], alpha=float(ctx.p.alpha), gamma=float(ctx.p.lambda_)))


@emits("Clip")
def clip(ctx: LayerCtx) -> None:
    g = ctx.g
    ctx.put(0, g.op("Clip", [ctx.x(), g.scalar(ctx.p.min), g.scalar(ctx.p.max)]))


@emits("Shrink")
def shrink(ctx: LayerCtx) -> None:
    ctx.put(0, ctx.g.op("Shrink", [ctx.x()], bias=float(ctx.p.bias), lambd=float(ctx.p.lambd)))


@emits("HardSigmoid")
def hardsigmoid(ctx: LayerCtx) -> None:
    ctx.put(0, ctx.g.op("HardSigmoid", [ctx.x()], alpha=float(ctx.p.alpha), beta=float(ctx.p.beta)))


@emits("HardSwish")
def hardswish(ctx: LayerCtx) -> None:
    ctx.put(0, fused_activation(ctx, ctx.x(), 6, [ctx.p.alpha, ctx.p.beta]))


@emits("Swish")
def swish(ctx: LayerCtx) -> None:
    ctx.put(0, ctx.g.op("Mul", [ctx.x(), ctx.g.op("Sigmoid", [ctx.x()])]))


@emits("GELU")
def gelu(ctx: LayerCtx) -> None:
    ctx.put(0, ctx.g.op("Gelu", [ctx.x()], approximate="tanh" if ctx.p.fast_gelu else "none"))


@emits("Threshold")
def threshold(ctx: LayerCtx) -> None:
    g = ctx.g
    ctx.put(0, g.cast(g.op("Greater", [ctx.x(), g.scalar(ctx.p.threshold)]), np.float32))


@emits("Dropout")
def dropout(ctx: LayerCtx) -> None:
    s = float(ctx.p.scale)
    ctx.put(0, ctx.x() if s == 1.0 else ctx.g.op("Mul", [ctx.x(), ctx.g.scalar(s)]))


@emits("Exp")
def exp(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    lin = affine(g, ctx.x(), p.scale, p.shift)
    ctx.put(0, g.op("Exp", [lin]) if p.base == -1.0 else g.op("Pow", [g.scalar(p.base), lin]))


@emits("Log")
def log(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    y = g.op("Log", [affine(g, ctx.x(), p.scale, p.shift)])
    if p.base != -1.0:
        y = g.op("Mul", [y, g.scalar(F32(1) / np.log(F32(p.base)))])
    ctx.put(0, y)


@emits("Power")
def power(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    ctx.put(0, g.op("Pow", [affine(g, ctx.x(), p.scale, p.shift), g.scalar(p.power)]))


@emits("PReLU")
def prelu(ctx: LayerCtx) -> None:
    g, slope = ctx.g, ctx.w["slope"]
    if ctx.p.num_slope == 1:
        s = np.asarray(slope[:1], F32)
    else:
        s = ctx.per_axis0(slope, ctx.rank())
    ctx.put(0, g.op("PRelu", [ctx.x(), g.const(s, stem="slope")]))


@emits("GLU")
def glu(ctx: LayerCtx) -> None:
    g, shape = ctx.g, ctx.in_shapes[0]
    ax = 1 if len(shape) == 1 else ctx.axis(ctx.p.axis)
    n = (1, *shape)[ax] // 2
    a = g.slice(ctx.x(), [0], [n], [ax])
    b = g.slice(ctx.x(), [n], [2 * n], [ax])
    ctx.put(0, g.op("Mul", [a, g.op("Sigmoid", [b])]))


@emits("Softmax")
def softmax(ctx: LayerCtx) -> None:
    ax = 1 if ctx.rank() == 1 else ctx.axis(ctx.p.axis)
    ctx.put(0, ctx.g.op("Softmax", [ctx.x()], axis=ax))


# --------------------------------------------------------------------------------------------- UnaryOp
def _unary(ctx: LayerCtx, op_type: int, x: str) -> str:
    g = ctx.g
    direct = {
        0: "Abs",
        1: "Neg",
        2: "Floor",
        3: "Ceil",
        5: "Sqrt",
        7: "Exp",
        8: "Log",
        9: "Sin",
        10: "Cos",
        11: "Tan",
        12: "Asin",
        13: "Acos",
        14: "Atan",
        15: "Reciprocal",
        16: "Tanh",
        18: "Round",
        20: "Sign",
        22: "Sinh",
        23: "Asinh",
        24: "Cosh",
        25: "Acosh",
        26: "Atanh",
    }
    if op_type in direct:
        return g.op(direct[op_type], [x])
    if op_type == 4:
        return g.op("Mul", [x, x])
    if op_type == 6:
        return g.op("Reciprocal", [g.op("Sqrt", [x])])
    if op_type == 17:  # log10 in float64, as numpy's float32 log10 is correctly rounded
        d = g.cast(x, np.float64)
        return g.cast(g.op("Div", [g.op("Log", [d]), g.scalar(math.log(10.0), np.float64)]), np.float32)
    if op_type == 19:  # trunc: toward zero
        neg = g.op("Less", [x, g.scalar(0.0)])
        return g.op("Where", [neg, g.op("Ceil", [x]), g.op("Floor", [x])])
    if op_type in (21, 27):  # expm1 / log1p in float64 (exact enough near 0, unlike float32 exp - 1)
        d = g.cast(x, np.float64)
        one = g.scalar(1.0, np.float64)
        y = g.op("Sub", [g.op("Exp", [d]), one]) if op_type == 21 else g.op("Log", [g.op("Add", [d, one])])
        return g.cast(y, np.float32)
    raise ctx.fail(f"UnaryOp op_type {op_type} is not one of 0..27")


@emits("UnaryOp")
def unaryop(ctx: LayerCtx) -> None:
    ctx.put(0, _unary(ctx, int(ctx.p.op_type), ctx.x()))


# --------------------------------------------------------------------------------------------- BinaryOp
def _atan2(g, y: str, x: str) -> str:
    """atan2(y, x) from Atan of the quotient and the quadrant."""
    zero = g.scalar(0.0)
    base = g.op("Atan", [g.op("Div", [y, x])])
    pi = g.op("Where", [g.op("GreaterOrEqual", [y, zero]), g.scalar(math.pi), g.scalar(-math.pi)])
    r = g.op("Where", [g.op("Less", [x, zero]), g.op("Add", [base, pi]), base])
    half = g.op(
        "Where",
        [
            g.op("Greater", [y, zero]),
            g.scalar(math.pi / 2),
            g.op("Where", [g.op("Less", [y, zero]), g.scalar(-math.pi / 2), zero]),
        ],
    )
    return g.op("Where", [g.op("Equal", [x, zero]), half, r])


def _binary(ctx: LayerCtx, op_type: int, a: str, b: str) -> str:
    g = ctx.g
    reversed_ops = {7: 1, 8: 3, 9: 6, 11: 10, 13: 12, 16: 15, 18: 17}
    if op_type in reversed_ops:
        return _binary(ctx, reversed_ops[op_type], b, a)
    direct = {0: "Add", 1: "Sub", 2: "Mul", 3: "Div", 4: "Max", 5: "Min", 6: "Pow"}
    if op_type in direct:
        return g.op(direct[op_type], [a, b])
    if op_type == 10:
        return _atan2(g, a, b)
    if op_type == 12:
        return g.op("Mod", [a, b], fmod=1)
    if op_type == 14:  # logaddexp = max + log(1 + exp(-|a - b|)), in float64
        a64, b64 = g.cast(a, np.float64), g.cast(b, np.float64)
        d = g.op("Neg", [g.op("Abs", [g.op("Sub", [a64, b64])])])
        t = g.op("Log", [g.op("Add", [g.scalar(1.0, np.float64), g.op("Exp", [d])])])
        return g.cast(g.op("Add", [g.op("Max", [a64, b64]), t]), np.float32)
    if op_type == 15:
        return g.op("Floor", [g.op("Div", [a, b])])
    if op_type == 17:  # IEEE remainder: a - rint(a / b) * b in float64
        a64, b64 = g.cast(a, np.float64), g.cast(b, np.float64)
        n = g.op("Round", [g.op("Div", [a64, b64])])
        return g.cast(g.op("Sub", [a64, g.op("Mul", [n, b64])]), np.float32)
    raise ctx.fail(f"BinaryOp op_type {op_type} is not one of 0..18")


@emits("BinaryOp")
def binaryop(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    if p.with_scalar:
        ctx.put(0, _binary(ctx, int(p.op_type), ctx.x(), g.scalar(p.b)))
        return
    sa, sb = ncnn_broadcast_shapes(ctx.in_shapes[0], ctx.in_shapes[1])
    a = ctx.x(0) if sa == ctx.in_shapes[0] else g.reshape(ctx.x(0), (1, *sa))
    b = ctx.x(1) if sb == ctx.in_shapes[1] else g.reshape(ctx.x(1), (1, *sb))
    ctx.put(0, _binary(ctx, int(p.op_type), a, b))


@emits("Eltwise")
def eltwise(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    xs = ctx.ins
    if p.op_type == 0:
        y = xs[0]
        for x in xs[1:]:
            y = g.op("Mul", [y, x])
    elif p.op_type == 2:
        y = g.op("Max", xs)
    elif not p.coeffs:
        y = g.op("Sum", xs)
    else:
        y = g.op("Mul", [xs[0], g.scalar(p.coeffs[0])])
        for x, c in zip(xs[1:], p.coeffs[1:]):
            y = g.op("Add", [y, g.op("Mul", [x, g.scalar(c)])])
    ctx.put(0, y)


# ------------------------------------------------------------------------------------ Scale, Bias, BN
@emits("Scale")
def scale(ctx: LayerCtx) -> None:
    g, r = ctx.g, ctx.rank()
    if ctx.p.scale_data_size == -233:
        s = g.reshape(ctx.x(1), (1, -1) + (1,) * (r - 1))
        ctx.put(0, g.op("Mul", [ctx.x(), s]))
        return
    y = g.op("Mul", [ctx.x(), g.const(ctx.per_axis0(ctx.w["scale"], r), stem="scale")])
    if "bias" in ctx.w:
        y = g.op("Add", [y, g.const(ctx.per_axis0(ctx.w["bias"], r), stem="bias")])
    ctx.put(0, y)


@emits("Bias")
def bias(ctx: LayerCtx) -> None:
    g, b, r = ctx.g, ctx.w["bias"], ctx.rank()
    v = np.asarray(b[:1], F32) if r <= 2 else ctx.per_axis0(b, r)
    ctx.put(0, g.op("Add", [ctx.x(), g.const(v, stem="bias")]))


@emits("BatchNorm")
def batchnorm(ctx: LayerCtx) -> None:
    g, w = ctx.g, ctx.w
    eps = F32(ctx.p.eps)
    var = np.where(np.sqrt(w["var"] + eps) == 0, F32(1e-8) - eps, w["var"]).astype(F32)  # the loader's guard
    ins = [ctx.x()] + [g.const(np.asarray(a, F32), stem=n) for n, a in (("slope", w["slope"]), ("bias", w["bias"]))]
    ins += [g.const(np.asarray(w["mean"], F32), stem="mean"), g.const(var, stem="var")]
    ctx.put(0, g.op("BatchNormalization", ins, epsilon=float(eps)))


# --------------------------------------------------------------------------------------------- Cast
@emits("Cast")
def cast(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    have, want = np.dtype(ctx.in_dtypes[0]), np.dtype(ctx.out_dtypes[0])
    if have == want:
        ctx.put(0, ctx.x())
        return
    x = ctx.x()
    if p.type_to == 3:
        ctx.put(0, float2int8(g, ctx.as_float(), -128, 127))
        return
    if have != np.float32:
        x = g.cast(x, np.float32)
    ctx.put(0, x if want == np.float32 else g.cast(x, want))


@emits("Packing")
def packing(ctx: LayerCtx) -> None:
    g = ctx.g
    extra = ctx.out_shapes[0][0] - ctx.in_shapes[0][0]
    if extra == 0:
        ctx.put(0, ctx.x())
        return
    r = ctx.rank()
    pads = [0] * (r + 1) * 2
    pads[r + 1 + 1] = extra  # end of ncnn axis 0
    zero = g.const(np.zeros((), ctx.in_dtypes[0]), stem="zero")
    ctx.put(0, g.op("Pad", [ctx.x(), g.ints(pads, "pads"), zero]))


# --------------------------------------------------------------------------------------------- int8
def _table(ctx: LayerCtx, table: np.ndarray, stem: str) -> str:
    """A Quantize/Dequantize table: one value, or one per row (2d) / channel (3d, 4d)."""
    t = np.asarray(table, F32)
    if t.size == 1:
        return ctx.g.const(t.reshape(()), stem=stem)
    if ctx.rank() < 2 or t.size != ctx.in_shapes[0][0]:
        raise ctx.fail(f"{stem} has {t.size} values for a blob of shape {ctx.in_shapes[0]}")
    return ctx.g.const(ctx.per_axis0(t, ctx.rank()), stem=stem)


@emits("Quantize")
def quantize(ctx: LayerCtx) -> None:
    g = ctx.g
    v = g.op("Mul", [ctx.as_float(), _table(ctx, ctx.w["scale_data"], "scale")])
    ctx.put(0, float2int8(g, v))


@emits("Dequantize")
def dequantize(ctx: LayerCtx) -> None:
    g = ctx.g
    y = g.op("Mul", [ctx.as_float(), _table(ctx, ctx.w["scale_data"], "scale")])
    if "bias_data" in ctx.w:
        y = g.op("Add", [y, _table(ctx, ctx.w["bias_data"], "bias")])
    ctx.put(0, y)


@emits("Requantize")
def requantize(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    v = g.op("Mul", [ctx.as_float(), _table(ctx, ctx.w["scale_in_data"], "scale_in")])
    if "bias_data" in ctx.w:
        v = g.op("Add", [v, _table(ctx, ctx.w["bias_data"], "bias")])
    v = fused_activation(ctx, v, p.activation_type, p.activation_params)
    ctx.put(0, float2int8(g, g.op("Mul", [v, _table(ctx, ctx.w["scale_out_data"], "scale_out")])))
