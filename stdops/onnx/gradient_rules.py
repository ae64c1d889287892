"""The vector-Jacobian rules of the Gradient operator (:mod:`stdops.onnx.gradient`): per op type, a
factory called once per node at load time with the node's attributes and opset, returning the backward
step that maps the output gradients to the input gradients (shapes may still be broadcast; the adapter
sums them back)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from .._lazy import LazyModule

helper = LazyModule("onnx.helper")  # the onnx package only when a Gradient node is built

#: rule(ins, outs, gouts, need) -> one gradient (or None) per input; shapes may still be broadcast
Backward = Callable[[list, list, list, list], list]
#: factory(attrs, opset) -> Backward, called once per node at load time
RuleFactory = Callable[[dict, int], Backward]

RULES: dict[str, RuleFactory] = {}

#: ops whose outputs carry no gradient (integer/bool results, piecewise constant functions)
NON_DIFFERENTIABLE = frozenset(
    {
        "Shape",
        "Size",
        "Equal",
        "Greater",
        "Less",
        "GreaterOrEqual",
        "LessOrEqual",
        "Not",
        "And",
        "Or",
        "Xor",
        "ArgMax",
        "ArgMin",
        "IsNaN",
        "IsInf",
        "NonZero",
        "Sign",
        "Floor",
        "Ceil",
        "Round",
        "ConstantOfShape",
        "EyeLike",
        "RandomNormalLike",
        "RandomUniformLike",
        "BitwiseNot",
    }
)

_FLOAT_KINDS = "fc"
_counter = itertools.count()


def rule(*op_types: str) -> Callable[[RuleFactory], RuleFactory]:
    def register(fn: RuleFactory) -> RuleFactory:
        for t in op_types:
            RULES[t] = fn
        return fn

    return register


def _node_attrs(n) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in n.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8")
        elif isinstance(v, list):
            v = tuple(x.decode("utf-8") if isinstance(x, bytes) else x for x in v)
        out[a.name] = v
    return out


def _unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum ``g`` over the axes broadcasting added or stretched, so it has ``shape``."""
    g = np.asarray(g)
    shape = tuple(shape)
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra > 0:
        g = g.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, d in enumerate(shape) if i < g.ndim and d == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    if g.shape != shape:
        g = np.broadcast_to(g, shape)
    return g


# ---------------------------------------------------------------------------------------- elementwise
#: attribute-free rules: op -> fn(x, y, g, need) -> input gradients (x, y, g: lists of arrays)
_SIMPLE: dict[str, Callable] = {
    "Identity": lambda x, y, g, need: [g[0]] + [None] * (len(x) - 1),
    "Expand": lambda x, y, g, need: [g[0], None],  # the generic un-broadcast sums the expanded axes
    "Add": lambda x, y, g, need: [g[0], g[0]],
    "Sum": lambda x, y, g, need: [g[0]] * len(x),
    "Mean": lambda x, y, g, need: [g[0] / len(x)] * len(x),
    "Sub": lambda x, y, g, need: [g[0], -g[0] if need[1] else None],
    "Neg": lambda x, y, g, need: [-g[0]],
    "Mul": lambda x, y, g, need: [g[0] * x[1] if need[0] else None, g[0] * x[0] if need[1] else None],
    "Div": lambda x, y, g, need: [g[0] / x[1] if need[0] else None, -g[0] * y[0] / x[1] if need[1] else None],
    "Reciprocal": lambda x, y, g, need: [-g[0] * y[0] * y[0]],
    "Abs": lambda x, y, g, need: [g[0] * np.sign(x[0])],
    "Relu": lambda x, y, g, need: [g[0] * (x[0] > 0)],
    "Sigmoid": lambda x, y, g, need: [g[0] * y[0] * (1 - y[0])],
    "Tanh": lambda x, y, g, need: [g[0] * (1 - y[0] * y[0])],
    "Exp": lambda x, y, g, need: [g[0] * y[0]],
    "Log": lambda x, y, g, need: [g[0] / x[0]],
    "Sqrt": lambda x, y, g, need: [g[0] * 0.5 / y[0]],
    "Sin": lambda x, y, g, need: [g[0] * np.cos(x[0])],
    "Cos": lambda x, y, g, need: [-g[0] * np.sin(x[0])],
    "Softplus": lambda x, y, g, need: [g[0] * -np.expm1(-y[0])],  # sigmoid(x) = 1 - e^-y
    "Softsign": lambda x, y, g, need: [g[0] / np.square(1 + np.abs(x[0]))],
    "Erf": lambda x, y, g, need: [g[0] * (2 / np.sqrt(np.pi)) * np.exp(-x[0] * x[0])],
    "Where": lambda x, y, g, need: [
        None,
        np.where(x[0], g[0], 0) if need[1] else None,
        np.where(x[0], 0, g[0]) if need[2] else None,
    ],
    "PRelu": lambda x, y, g, need: [
        np.where(x[0] > 0, g[0], g[0] * x[1]),
        g[0] * np.minimum(x[0], 0) if need[1] else None,
    ],
}


def _extremum(x, y, g, need):
    """Max/Min: the gradient goes to the inputs equal to the result (split evenly between ties)."""
    hits = [np.asarray(v == y[0]) for v in x]
    count = sum(h.astype(y[0].dtype) for h in hits)
    return [g[0] * h / count if n else None for h, n in zip(hits, need)]


_SIMPLE["Max"] = _SIMPLE["Min"] = _extremum


def _attribute_free(rule: Backward) -> RuleFactory:
    """The factory of a rule that reads no attribute."""
    return lambda attrs, opset: rule


for _op, _fn in _SIMPLE.items():
    RULES[_op] = _attribute_free(_fn)


@rule("Pow")
def _pow(a, opset):
    def bw(x, y, g, need):
        base, ex = x
        ga = gb = None
        if need[0]:
            ga = (g[0] * ex * np.power(base, ex - np.asarray(1, ex.dtype))).astype(base.dtype, copy=False)
        if need[1]:
            with np.errstate(divide="ignore", invalid="ignore"):
                gb = (g[0] * y[0] * np.log(base)).astype(ex.dtype, copy=False)
        return [ga, gb]

    return bw


@rule("LeakyRelu")
def _leaky_relu(a, opset):
    alpha = a.get("alpha", 0.01)
    return lambda x, y, g, need: [np.where(x[0] > 0, g[0], g[0] * alpha)]


@rule("Elu")
def _elu(a, opset):
    alpha = a.get("alpha", 1.0)
    return lambda x, y, g, need: [np.where(x[0] > 0, g[0], g[0] * (y[0] + alpha))]


@rule("HardSigmoid")
def _hard_sigmoid(a, opset):
    alpha, beta = a.get("alpha", 0.2), a.get("beta", 0.5)

    def bw(x, y, g, need):
        t = x[0] * alpha + beta
        return [g[0] * ((t > 0) & (t < 1)) * alpha]

    return bw


@rule("Clip")
def _clip(a, opset):
    lo_attr, hi_attr = a.get("min"), a.get("max")  # Clip-1..-6: bounds are attributes

    def bw(x, y, g, need):
        xv = x[0]
        lo = x[1] if len(x) > 1 and x[1] is not None else lo_attr
        hi = x[2] if len(x) > 2 and x[2] is not None else hi_attr
        m = xv if lo is None else np.maximum(xv, lo)
        below_hi = np.ones(xv.shape, bool) if hi is None else (m <= hi)
        keep = below_hi if lo is None else ((xv >= lo) & below_hi)
        out = [g[0] * keep]
        if len(x) > 1:
            out.append(g[0] * ((xv < lo) & below_hi) if need[1] else None)
        if len(x) > 2:
            out.append(g[0] * (m > hi) if need[2] else None)
        return out

    return bw


@rule("Cast")
def _cast(a, opset):
    def bw(x, y, g, need):
        if x[0].dtype.kind not in _FLOAT_KINDS:
            return [None]
        return [g[0].astype(x[0].dtype, copy=False)]

    return bw


@rule("Dropout")
def _dropout(a, opset):
    """Inference (and every Dropout before opset 12): the identity; training: g * mask / (1 - ratio),
    with the mask the forward run recorded (the adapter names the node's mask output if it has none)."""

    def bw(x, y, g, need):
        rest = [None] * (len(x) - 1)
        training = len(x) > 2 and x[2] is not None and bool(np.asarray(x[2]).reshape(-1)[0])
        r = 0.5 if len(x) < 2 or x[1] is None else float(np.asarray(x[1]).reshape(-1)[0])
        if not training or r == 0.0:
            return [g[0]] + rest
        if r >= 1.0:
            return [np.zeros_like(g[0])] + rest
        return [g[0] * y[1] * np.asarray(1.0 / (1.0 - r), g[0].dtype)] + rest

    return bw


# ---------------------------------------------------------------------------------------- shape
@rule("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def _reshape(a, opset):
    return lambda x, y, g, need: [g[0].reshape(x[0].shape)] + [None] * (len(x) - 1)


@rule("Transpose")
def _transpose(a, opset):
    perm = a.get("perm")

    def bw(x, y, g, need):
        p = tuple(range(x[0].ndim))[::-1] if perm is None else tuple(perm)
        return [np.transpose(g[0], np.argsort(p))]

    return bw


@rule("Concat")
def _concat(a, opset):
    axis = a.get("axis", 0)

    def bw(x, y, g, need):
        ax = axis + y[0].ndim if axis < 0 else axis
        bounds = np.cumsum([v.shape[ax] for v in x])[:-1]
        parts = np.split(g[0], bounds, axis=ax)
        return [p if n else None for p, n in zip(parts, need)]

    return bw


#: data-movement ops, differentiated through their own kernel run on element indices (each output
#: element names the input element it copies); True: the op also writes constants (Pad, Trilu)
SELECTION = {
    "Slice": False,
    "Gather": False,
    "GatherElements": False,
    "GatherND": False,
    "Tile": False,
    "Split": False,
    "Compress": False,
    "DepthToSpace": False,
    "SpaceToDepth": False,
    "ReverseSequence": False,
    "Pad": True,
    "Trilu": True,
}


def _selection(fn: Callable, writes_constants: bool) -> Backward:
    def bw(x, y, g, need):
        src = x[0]
        idx = np.arange(src.size, dtype=np.int64).reshape(src.shape)
        with np.errstate(invalid="ignore"):
            picked = fn(idx, *x[1:])
            # a constant the op writes stays put when the indices shift; a copied element moves with them
            shifted = fn(idx + src.size, *x[1:]) if writes_constants else None
        picked = picked if type(picked) is tuple else (picked,)
        shifted = shifted if type(shifted) is tuple else (shifted,) * len(picked)
        gs = [gg for gg in g if gg is not None]
        gx = np.zeros(src.size, gs[0].dtype if gs else src.dtype)
        for p, q, gg in zip(picked, shifted, g):
            if gg is None:
                continue
            p, gg = np.asarray(p).reshape(-1), np.asarray(gg).reshape(-1)
            if q is not None:
                sel = (np.asarray(q).reshape(-1) - p) == src.size
                p, gg = p[sel], gg[sel]
            np.add.at(gx, p, gg)
        return [gx.reshape(src.shape)] + [None] * (len(x) - 1)

    return bw


# ---------------------------------------------------------------------------------------- linalg
@rule("MatMul")
def _matmul(a, opset):
    def bw(x, y, g, need):
        A, B = x
        gy = g[0]
        a2 = A[None, :] if A.ndim == 1 else A
        b2 = B[:, None] if B.ndim == 1 else B
        if B.ndim == 1:
            gy = gy[..., None]
        if A.ndim == 1:
            gy = gy[..., None, :]
        ga = gb = None
        if need[0]:
            ga = gy @ np.swapaxes(b2, -1, -2)
            if A.ndim == 1:
                ga = ga[..., 0, :]
        if need[1]:
            gb = np.swapaxes(a2, -1, -2) @ gy
            if B.ndim == 1:
                gb = gb[..., 0]
        return [ga, gb]

    return bw


@rule("Gemm")
def _gemm(a, opset):
    alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
    trans_a, trans_b = a.get("transA", 0), a.get("transB", 0)

    def bw(x, y, g, need):
        A, B = x[0], x[1]
        gy = g[0] * alpha if alpha != 1.0 else g[0]
        ap = A.T if trans_a else A
        bp = B.T if trans_b else B
        ga = gb = gc = None
        if need[0]:
            ga = gy @ bp.T
            ga = ga.T if trans_a else ga
        if need[1]:
            gb = ap.T @ gy
            gb = gb.T if trans_b else gb
        if len(x) > 2 and x[2] is not None and need[2]:
            gc = g[0] * beta if beta != 1.0 else g[0]
        return [ga, gb, gc][: len(x)]

    return bw


# ---------------------------------------------------------------------------------------- reductions
def _reduce_rule(kind: str) -> RuleFactory:
    """ReduceSum/Mean/SumSquare/L2/Max/Min: axes from the attribute (older opsets) or the second
    input; no axes = all of them, unless noop_with_empty_axes (then the identity)."""

    def factory(a, opset):
        noop = a.get("noop_with_empty_axes", 0)
        axes_attr = a.get("axes")

        def bw(x, y, g, need):
            xv, rest = x[0], [None] * (len(x) - 1)
            axes = axes_attr
            if axes is None and len(x) > 1 and x[1] is not None:
                axes = tuple(int(v) for v in np.asarray(x[1]).reshape(-1))
            if not axes:
                if noop:
                    return [g[0]] + rest
                axes = tuple(range(xv.ndim))
            axes = {ax + xv.ndim if ax < 0 else ax for ax in axes}
            kept = tuple(1 if i in axes else d for i, d in enumerate(xv.shape))  # keepdims 0 and 1 alike
            gk = g[0].reshape(kept)
            if kind == "sum":
                return [np.broadcast_to(gk, xv.shape)] + rest
            if kind == "mean":
                return [np.broadcast_to(gk / max(int(np.prod([xv.shape[i] for i in axes])), 1), xv.shape)] + rest
            if kind == "sumsquare":
                return [gk * 2 * xv] + rest
            yk = y[0].reshape(kept)
            if kind == "l2":
                with np.errstate(divide="ignore", invalid="ignore"):
                    return [np.where(yk == 0, 0, gk * xv / yk)] + rest
            hit = xv == yk  # max/min: to the elements equal to the result, split evenly between ties
            return [gk * hit / np.sum(hit, axis=tuple(axes), keepdims=True).astype(xv.dtype)] + rest

        return bw

    return factory


for _op, _kind in [
    ("ReduceSum", "sum"),
    ("ReduceMean", "mean"),
    ("ReduceSumSquare", "sumsquare"),
    ("ReduceL2", "l2"),
    ("ReduceMax", "max"),
    ("ReduceMin", "min"),
]:
    RULES[_op] = _reduce_rule(_kind)


def _softmax_axis(a: dict, opset: int, ndim: int) -> tuple[int, bool]:
    """(axis, coerced_2d): before opset 13 Softmax/LogSoftmax flatten the input to 2-D at ``axis``."""
    old = opset < 13
    axis = a.get("axis", 1 if old else -1)
    return (axis + ndim if axis < 0 else axis), old


def _softmax_view(a, opset, x, y, g):
    """(y, g, axis) as the op sees them: before opset 13 the input is coerced to 2-D around ``axis``."""
    ax, old = _softmax_axis(a, opset, x[0].ndim)
    yv, gv = y[0], g[0]
    if old:
        rows = int(np.prod(yv.shape[:ax]))
        yv, gv, ax = yv.reshape(rows, -1), gv.reshape(rows, -1), 1
    return yv, gv, ax


@rule("Softmax")
def _softmax(a, opset):
    def bw(x, y, g, need):
        yv, gv, ax = _softmax_view(a, opset, x, y, g)
        gx = yv * (gv - np.sum(gv * yv, axis=ax, keepdims=True))
        return [gx.reshape(x[0].shape)]

    return bw


@rule("LogSoftmax")
def _log_softmax(a, opset):
    def bw(x, y, g, need):
        yv, gv, ax = _softmax_view(a, opset, x, y, g)
        gx = gv - np.exp(yv) * np.sum(gv, axis=ax, keepdims=True)
        return [gx.reshape(x[0].shape)]

    return bw
