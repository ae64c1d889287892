"""The ai.onnx.preview.training Gradient operator: reverse-mode differentiation prepared at load time.

``Gradient(xs..., zs...) -> dy/dx...`` (attributes ``xs``, ``zs``, ``y``): the gradient of the sum of
``y`` (the vector-Jacobian product with ones) with respect to each tensor named in ``xs``, evaluated at
the values the node receives (xs then zs, in that order).

At load time the adapter

1. takes the nodes of the enclosing graph before the Gradient node (``BindContext.earlier_nodes``) that
   lie on a path from xs/zs to y (xs and zs are cut points: their producers are not part of it);
2. builds a GraphProto with inputs xs+zs whose outputs are y and every intermediate (renamed, so the
   names cannot clash with the enclosing scope) and compiles it like a control-flow body: values of
   the enclosing scope it reads (initializers, other tensors) become extra trailing step inputs
   (``outer_inputs``);
3. binds a vector-Jacobian rule to every node that lies on a path from xs to y (a missing rule is a
   load-time error naming the node).

A run executes the forward plan once (recording every intermediate), then walks the differentiable
nodes in reverse: each rule maps the output gradients to input gradients, which are summed over all
uses of a value and summed over broadcast axes back to the value's shape.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from .._lazy import LazyModule
from .opset import BindContext, adapter

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
for _op, _fn in _SIMPLE.items():
    RULES[_op] = lambda a, opset, _fn=_fn: _fn  # type: ignore[misc]


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


# ---------------------------------------------------------------------------------------- the adapter
def _strings(ctx: BindContext, name: str, required: bool) -> list[str]:
    v = ctx.attrs.pop(name, None)
    if v is None:
        if required:
            raise ctx.error(f"missing required attribute {name}")
        return []
    if isinstance(v, str):
        return [v]
    return list(v)


@adapter("Gradient", 1, domain="ai.onnx.preview.training")
def _gradient(ctx: BindContext):
    """Gradient(xs..., zs...) -> d(sum y)/dx for each x of ``xs`` (each output optional)."""
    xs = _strings(ctx, "xs", True)
    zs = _strings(ctx, "zs", False)
    y = ctx.attrs.pop("y", None)
    if not isinstance(y, str) or not y:
        raise ctx.error("missing required attribute y")
    if ctx.attrs:
        raise ctx.error(f"unknown attribute(s) {', '.join(sorted(ctx.attrs))}")
    if not xs:
        raise ctx.error("attribute xs names no tensor")
    if ctx.n_inputs != len(xs) + len(zs):
        raise ctx.error(f"the node has {ctx.n_inputs} inputs, xs and zs name {len(xs) + len(zs)}")
    if ctx.n_outputs > len(xs):
        raise ctx.error(f"the node declares {ctx.n_outputs} outputs, xs names {len(xs)}")
    if ctx.compile_graph is None:
        raise ctx.error("Gradient needs the enclosing graph (not available here)")
    free = xs + zs
    if len(set(free)) != len(free):
        raise ctx.error("a name appears twice in xs and zs")
    cut = set(free)

    # 1. the nodes on the paths from xs/zs to y
    earlier = list(ctx.earlier_nodes)
    reach = set(cut)
    down: list[int] = []
    for k, n in enumerate(earlier):
        outs = [o for o in n.output if o]
        if cut.intersection(outs):
            continue  # a producer of an independent input is not differentiated through
        if any(i in reach for i in n.input if i):
            down.append(k)
            reach.update(outs)
    wanted = {y}
    path: list[int] = []
    for k in reversed(down):
        n = earlier[k]
        if wanted.intersection(o for o in n.output if o):
            path.append(k)
            wanted.update(i for i in n.input if i)
    path.reverse()
    path_nodes = [earlier[k] for k in path]

    # 2. the values that depend on xs, and the nodes the backward pass walks
    diff = set(xs)
    back: list[int] = []  # indices into path_nodes
    for j, n in enumerate(path_nodes):
        if n.op_type in NON_DIFFERENTIABLE or not any(i in diff for i in n.input if i):
            continue
        if n.domain not in ("", "ai.onnx"):
            raise ctx.error(f"Gradient: no derivative for {n.domain}:{n.op_type} (node {n.name or n.op_type!r})")
        if n.op_type not in RULES and n.op_type not in SELECTION:
            raise ctx.error(f"Gradient: no derivative for {n.op_type} (node {n.name or n.op_type!r})")
        if n.op_type == "Cast":
            to = _node_attrs(n).get("to")
            if to is not None and to not in (1, 10, 11, 16):  # FLOAT, FLOAT16, DOUBLE, BFLOAT16
                continue
        back.append(j)
        diff.update(o for o in n.output if o)

    # 3. the forward graph: inputs xs + zs, outputs y and every intermediate (renamed)
    prefix = f"__gradient{next(_counter)}__/"
    renamed = {o: prefix + o for n in path_nodes for o in n.output if o}

    def rn(name: str) -> str:
        return renamed.get(name, name) if name else ""

    fwd_nodes = []
    for j, n in enumerate(path_nodes):
        m = type(n)()
        m.CopyFrom(n)
        del m.input[:]
        m.input.extend(rn(i) for i in n.input)
        del m.output[:]
        m.output.extend(rn(o) for o in n.output)
        if n.op_type == "Dropout" and j in back:  # record the mask its backward rule needs
            while len(m.output) < 2:
                m.output.append("")
            if not m.output[1]:
                m.output[1] = renamed[f"#mask{j}"] = f"{prefix}#mask{j}"
        fwd_nodes.append(m)
    out_names = [rn(y)] + [v for v in renamed.values() if v != rn(y)]
    g = helper.make_graph(
        fwd_nodes,
        f"{ctx.node_name}/forward",
        [helper.make_empty_tensor_value_info(nm) for nm in free],
        [helper.make_empty_tensor_value_info(nm) for nm in out_names],
    )
    plan = ctx.compile_graph(g)
    outer = list(plan.outer_names)
    n_free = len(free)

    # 4. bind the rules
    dom_opset = ctx.opsets.get("", 1)
    kernels = {tuple(nd.outputs): nd.fn for nd in plan.nodes}
    steps = []
    for j in back:
        n = path_nodes[j]
        ins = [rn(i) for i in n.input]
        outs = list(fwd_nodes[j].output)
        if n.op_type in SELECTION:
            bw = _selection(kernels[tuple(outs)], SELECTION[n.op_type])
        else:
            bw = RULES[n.op_type](_node_attrs(n), dom_opset)
        need = [bool(i) and i in diff for i in n.input]
        steps.append((bw, ins, outs, need, n))
    y_name = rn(y)
    want_out = [i < len(ctx.output_present) and ctx.output_present[i] for i in range(len(xs))]
    n_out = max(ctx.n_outputs, 1)

    def run_gradient(*args):
        env = dict(zip(free, args[:n_free]))
        env.update(zip(outer, args[n_free:]))
        vals = dict(env)
        vals.update(plan.run(env, out_names))
        yv = np.asarray(vals[y_name])
        grads: dict[str, np.ndarray] = {y_name: np.ones(yv.shape, yv.dtype)}
        for bw, ins, outs, need, _node in reversed(steps):
            gouts = [grads.get(o) if o else None for o in outs]
            if all(gg is None for gg in gouts):
                continue
            ovals = [vals.get(o) if o else None for o in outs]
            gouts = [np.zeros_like(ov) if gg is None and ov is not None else gg for gg, ov in zip(gouts, ovals)]
            ivals = [vals[i] if i else None for i in ins]
            gins = bw(ivals, ovals, gouts, need)
            for name, nd, gi, iv in zip(ins, need, gins, ivals):
                if not nd or gi is None:
                    continue
                gi = _unbroadcast(gi, np.shape(iv))
                prev = grads.get(name)
                grads[name] = gi if prev is None else prev + gi
        result = []
        for i, x in enumerate(xs[:n_out]):
            if not want_out[i]:
                result.append(None)
                continue
            xv = np.asarray(env[x])
            gx = grads.get(x)
            result.append(np.zeros_like(xv) if gx is None else np.array(gx, dtype=xv.dtype))
        return tuple(result)

    run_gradient.outer_inputs = outer  # type: ignore[attr-defined]  # read by the graph builder
    return run_gradient
