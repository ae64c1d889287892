"""ONNX ops -> ncnn layers (used by onnx_to_ncnn.py): the operators both formats share.

An emitter reads its node's attributes and inputs (constants are folded values; tensors are ncnn blobs in
their canonical layout: the ONNX shape without a batch axis of 1) and writes layers through
:class:`NodeCtx`. Axes are ONNX axes mapped onto the canonical layout; an op along the batch axis, dilated
pooling, or attributes ncnn has no param for are refused with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .common import ConversionError
from .onnx_to_ncnn import NcnnModel, _safe, canonical

OPS: dict[str, Callable[[NodeCtx], None]] = {}
F32 = np.float32


def emits(*names: str) -> Callable:
    def register(fn: Callable) -> Callable:
        for n in names:
            OPS[n] = fn
        return fn

    return register


def reshape_params(shape: Sequence[int]) -> dict:
    """w / h / d / c params of an ncnn shape (outermost first): (w,), (h, w), (c, h, w), (c, d, h, w)."""
    keys = {1: (0,), 2: (1, 0), 3: (2, 1, 0), 4: (2, 11, 1, 0)}[len(shape)]
    return {k: int(v) for k, v in zip(keys, shape)}


class NodeCtx:
    """One ONNX node being written as ncnn layers."""

    def __init__(self, out: NcnnModel, node, values, constant, blob_of, where: str, path: str | None, needed=()):
        from onnx import helper

        self.out, self.node, self.values, self.constant, self.blob_of = out, node, values, constant, blob_of
        self.where, self.path = where, path
        self.needed = set(needed)  # values some node or the graph's outputs read
        self.attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute} if node is not None else {}
        self.name = _safe(node.name or node.op_type) if node is not None else "reshape"
        self.start = len(out.layers)

    def fail(self, reason: str) -> ConversionError:
        return ConversionError(self.path, self.where, "ncnn", reason)

    # ------------------------------------------------------------------ inputs
    def n_inputs(self) -> int:
        return len(self.node.input)

    def has(self, i: int) -> bool:
        return i < len(self.node.input) and self.node.input[i] != ""

    def is_const(self, i: int) -> bool:
        return self.has(i) and self.node.input[i] in self.constant

    def const(self, i: int) -> np.ndarray:
        if not self.is_const(i):
            raise self.fail(f"input {i} must be a constant (it depends on the model's inputs)")
        return np.asarray(self.values[self.node.input[i]])

    def shape(self, i: int) -> tuple[int, ...]:
        return tuple(np.shape(self.values[self.node.input[i]]))

    def out_shape(self, k: int = 0) -> tuple[int, ...]:
        return tuple(np.shape(self.values[self.node.output[k]]))

    def blob(self, i: int, want: Sequence[int] | None = None) -> str:
        """Input i as a blob of ncnn shape ``want`` (default canonical)."""
        name = self.node.input[i]
        if name in self.constant:
            raise self.fail(f"input {i} is a constant where ncnn needs a blob")
        b = self.blob_of[name]
        target = tuple(want) if want is not None else canonical(self.shape(i))
        return self.reshape_to(b, target) if self.out.blob_shape[b] != target else b

    def reshape_to(self, blob: str, shape: Sequence[int], top: str | None = None) -> str:
        if len(shape) > 4:
            raise self.fail(f"a blob of shape {tuple(shape)} has more than 4 axes (ncnn's limit)")
        tops = [top] if top else None
        return self.out.add(
            "Reshape", f"{self.name}_reshape", [blob], reshape_params(shape), tops=tops, where=self.where
        )[0]

    def memory_data(self, value: np.ndarray) -> str:
        v = np.asarray(value, F32)
        shape = v.shape if v.ndim else (1,)
        if len(shape) > 4:
            raise self.fail(f"a constant of shape {shape} has more than 4 axes")
        params = reshape_params(shape)
        b = self.out.fresh(f"{self.name}_const")
        self.out.add("MemoryData", f"{self.name}_const", [], params, [v.reshape(-1)], tops=[b], where=self.where)
        return b

    # ------------------------------------------------------------------ layers, outputs
    def layer(self, type_name: str, bottoms: Sequence[str], params: dict, weights=(), n_tops: int = 1) -> list[str]:
        return self.out.add(type_name, self.name, bottoms, params, weights, n_tops=n_tops, where=self.where)

    def put(self, k: int, blob: str) -> None:
        """ONNX output k is ``blob`` (its elements in order); its values are checked against the record. The
        blob that gets the ONNX value's name has its canonical shape (a Reshape in between if needed), so that
        a value and its blob compare by name."""
        name = self.node.output[k]
        want = np.asarray(self.values[name], np.float64)
        got = self.out.blob_value[blob]
        if got.size != want.size:
            raise self.fail(f"output {k}: the ncnn layers give {got.shape}, ONNX {want.shape}")
        g64 = np.asarray(got, np.float64).reshape(want.shape)
        scale = np.abs(want).max() if want.size else 0.0
        err = np.abs(g64 - want).max() if want.size else 0.0
        if (
            not np.array_equal(np.isnan(g64), np.isnan(want))
            or (scale > 0 and np.nanmax(err) > 1e-4 * scale)
            or (scale == 0 and err > 0)
        ):
            raise self.fail(
                f"output {k}: the ncnn layers disagree with the ONNX op (relative error {err / (scale or 1):.3g})"
            )
        target = canonical(want.shape)
        if self.out.blob_shape[blob] != target and len(target) <= 4:
            blob = self.reshape_to(blob, target)  # a blob named after an ONNX value has its (canonical) shape
        if self.out.rename(blob, _safe(name), self.start):  # the blob keeps the ONNX value's name
            blob = _safe(name)
        self.blob_of[name] = blob

    # ------------------------------------------------------------------ axes
    def axis(self, a: int, i: int = 0) -> int:
        """ONNX axis ``a`` of input i on its canonical blob."""
        shape = self.shape(i)
        r = len(shape)
        b = a + r if a < 0 else a
        if not 0 <= b < r:
            raise self.fail(f"axis {a} is out of range for rank {r}")
        if len(canonical(shape)) == r or r < 2 or shape[0] != 1:
            return b
        if b == 0:
            raise self.fail("an op along the batch axis has no ncnn form")
        return b - 1


# ----------------------------------------------------------------------------- elementwise
_ACT: dict[str, tuple[str, Callable[[dict], dict]]] = {
    "Relu": ("ReLU", lambda a: {}),
    "LeakyRelu": ("ReLU", lambda a: {0: float(a.get("alpha", 0.01))}),
    "Sigmoid": ("Sigmoid", lambda a: {}),
    "Tanh": ("TanH", lambda a: {}),
    "Elu": ("ELU", lambda a: {0: float(a.get("alpha", 1.0))}),
    "Celu": ("CELU", lambda a: {0: float(a.get("alpha", 1.0))}),
    "Selu": (
        "SELU",
        lambda a: {
            0: float(a.get("alpha", 1.67326319217681884765625)),
            1: float(a.get("gamma", 1.05070102214813232421875)),
        },
    ),
    "HardSigmoid": ("HardSigmoid", lambda a: {0: float(a.get("alpha", 0.2)), 1: float(a.get("beta", 0.5))}),
    "HardSwish": ("HardSwish", lambda a: {0: 1.0 / 6, 1: 0.5}),
    "Softplus": ("Softplus", lambda a: {}),
    "Mish": ("Mish", lambda a: {}),
    "Erf": ("Erf", lambda a: {}),
    "Shrink": ("Shrink", lambda a: {0: float(a.get("bias", 0.0)), 1: float(a.get("lambd", 0.5))}),
    "Gelu": ("GELU", lambda a: {0: int(a.get("approximate", b"none") in (b"tanh", "tanh"))}),
}
_UNARY = {
    "Abs": 0, "Neg": 1, "Floor": 2, "Ceil": 3, "Sqrt": 5, "Exp": 7, "Log": 8, "Sin": 9, "Cos": 10, "Tan": 11,
    "Asin": 12, "Acos": 13, "Atan": 14, "Reciprocal": 15, "Round": 18, "Sign": 20, "Sinh": 22, "Asinh": 23,
    "Cosh": 24, "Acosh": 25, "Atanh": 26,
}  # fmt: skip


@emits(*_ACT)
def activation(ctx: NodeCtx) -> None:
    t, params = _ACT[ctx.node.op_type]
    ctx.put(0, ctx.layer(t, [ctx.blob(0)], params(ctx.attrs))[0])


@emits(*_UNARY)
def unary(ctx: NodeCtx) -> None:
    ctx.put(0, ctx.layer("UnaryOp", [ctx.blob(0)], {0: _UNARY[ctx.node.op_type]})[0])


@emits("Identity", "Dropout")
def identity(ctx: NodeCtx) -> None:
    ctx.put(0, ctx.blob_of[ctx.node.input[0]])


@emits("Clip")
def clip(ctx: NodeCtx) -> None:
    lo = float(ctx.const(1).reshape(-1)[0]) if ctx.has(1) else float(ctx.attrs.get("min", -3.4028234663852886e38))
    hi = float(ctx.const(2).reshape(-1)[0]) if ctx.has(2) else float(ctx.attrs.get("max", 3.4028234663852886e38))
    ctx.put(0, ctx.layer("Clip", [ctx.blob(0)], {0: lo, 1: hi})[0])


@emits("PRelu")
def prelu(ctx: NodeCtx) -> None:
    slope = ctx.const(1).astype(F32)
    shape = canonical(ctx.shape(0))
    if slope.size == 1:
        ctx.put(0, ctx.layer("PReLU", [ctx.blob(0)], {0: 1}, [slope.reshape(1)])[0])
        return
    if slope.size != shape[0] or np.prod(slope.shape) != shape[0]:
        raise ctx.fail(f"a slope of shape {slope.shape} is not one per channel")
    ctx.put(0, ctx.layer("PReLU", [ctx.blob(0)], {0: int(slope.size)}, [slope.reshape(-1)])[0])


_BINARY = {"Add": 0, "Sub": 1, "Mul": 2, "Div": 3, "Max": 4, "Min": 5, "Pow": 6}
_REVERSED = {1: 7, 3: 8, 6: 9}


@emits(*_BINARY)
def binary(ctx: NodeCtx) -> None:
    """numpy broadcasting made explicit: both operands as blobs of the output's canonical rank (numpy's
    alignment from the back), which ncnn then broadcasts axis by axis; a one-element constant is with_scalar."""
    op = _BINARY[ctx.node.op_type]
    if ctx.n_inputs() > 2:
        raise ctx.fail("more than two operands")
    O = ctx.out_shape()
    R = len(O)
    dropped = len(canonical(O)) < R
    operands: list[str | float] = []  # a blob's name, or a one-element constant as BinaryOp's scalar
    for i in (0, 1):
        s = ctx.shape(i)
        aligned = (1,) * (R - len(s)) + tuple(s)
        want = aligned[1:] if dropped else aligned
        if ctx.is_const(i):
            v = ctx.const(i)
            operands.append(float(v.reshape(-1)[0]) if v.size == 1 else ctx.memory_data(v.reshape(want)))
        else:
            operands.append(ctx.blob(i, want))
    a, b = operands
    if isinstance(b, float):
        if isinstance(a, float):
            raise ctx.fail("both operands are constants")
        y = ctx.layer("BinaryOp", [a], {0: op, 1: 1, 2: b})[0]
    elif isinstance(a, float):
        y = ctx.layer("BinaryOp", [b], {0: _REVERSED.get(op, op), 1: 1, 2: a})[0]
    else:
        y = ctx.layer("BinaryOp", [a, b], {0: op})[0]
    ctx.put(0, y)


@emits("Sum")
def sum_(ctx: NodeCtx) -> None:
    shapes = {ctx.shape(i) for i in range(ctx.n_inputs())}
    if len(shapes) != 1:
        raise ctx.fail("Sum of operands of different shapes")
    ctx.put(0, ctx.layer("Eltwise", [ctx.blob(i) for i in range(ctx.n_inputs())], {0: 1})[0])


@emits("Softmax")
def softmax(ctx: NodeCtx) -> None:
    ax = ctx.axis(int(ctx.attrs.get("axis", -1)))
    ctx.put(0, ctx.layer("Softmax", [ctx.blob(0)], {0: ax, 1: 1})[0])


# ----------------------------------------------------------------------------- shape ops
@emits("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def reshape(ctx: NodeCtx) -> None:
    """The same elements in order: a Reshape to the output's canonical shape (none when already so)."""
    b = ctx.blob_of[ctx.node.input[0]]
    want = canonical(ctx.out_shape())
    ctx.put(0, b if ctx.out.blob_shape[b] == want else ctx.reshape_to(b, want))


@emits("Transpose")
def transpose(ctx: NodeCtx) -> None:
    """Unit axes do not move elements: the permutation of the other axes, on a blob without them."""
    shape = ctx.shape(0)
    r = len(shape)
    perm = [int(p) for p in ctx.attrs.get("perm", list(range(r))[::-1])]
    keep = [a for a in range(r) if shape[a] != 1]
    moved = [p for p in perm if shape[p] != 1]
    if moved == sorted(moved):  # the element order stays
        reshape(ctx)
        return
    squeezed = tuple(shape[a] for a in keep)
    cperm = [keep.index(p) for p in moved]
    order = _permute_order(len(squeezed), cperm)
    if order is None:
        raise ctx.fail(f"perm {perm} of shape {shape} has no ncnn Permute order_type")
    ctx.put(0, ctx.layer("Permute", [ctx.blob(0, squeezed)], {0: order})[0])


def _permute_order(rank: int, perm: list[int]) -> int | None:
    """The ncnn Permute order_type that transposes a blob of this rank by ``perm`` (found by running the front
    end's Permute on a numbered blob)."""
    from .. import ncnn

    shape = tuple(range(2, 2 + rank))
    x = np.arange(int(np.prod(shape)), dtype=F32).reshape(shape)
    want = x.transpose(perm)
    for t in range({2: 2, 3: 6, 4: 24}.get(rank, 0)):
        y = ncnn.run_layer("Permute", {0: t}, [], [x])[0]
        if y.shape == want.shape and np.array_equal(y, want):
            return t
    return None


@emits("Concat")
def concat(ctx: NodeCtx) -> None:
    ax = ctx.axis(int(ctx.attrs["axis"]))
    bottoms = []
    for i in range(ctx.n_inputs()):
        bottoms.append(
            ctx.memory_data(ctx.const(i).reshape(canonical(ctx.shape(i)))) if ctx.is_const(i) else ctx.blob(i)
        )
    ctx.put(0, ctx.layer("Concat", bottoms, {0: ax})[0])


@emits("Split")
def split(ctx: NodeCtx) -> None:
    ax = ctx.axis(int(ctx.attrs.get("axis", 0)))
    sizes = [ctx.out_shape(k)[int(ctx.attrs.get("axis", 0))] for k in range(len(ctx.node.output))]
    tops = ctx.layer("Slice", [ctx.blob(0)], {0: sizes, 1: ax}, n_tops=len(sizes))
    for k, t in enumerate(tops):
        ctx.put(k, t)


@emits("Slice")
def slice_(ctx: NodeCtx) -> None:
    shape = ctx.shape(0)
    r = len(shape)
    starts, ends = ctx.const(1).reshape(-1), ctx.const(2).reshape(-1)
    axes = ctx.const(3).reshape(-1) if ctx.has(3) else np.arange(len(starts))
    steps = ctx.const(4).reshape(-1) if ctx.has(4) else np.ones(len(starts), np.int64)
    cs, ce, ca = [], [], []
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = int(a) + r if a < 0 else int(a)
        if int(st) != 1:
            raise ctx.fail("a slice with a step other than 1")
        lo, hi, _ = slice(int(s), int(e)).indices(shape[a])
        if (lo, hi) == (0, shape[a]):
            continue
        cs.append(lo)
        ce.append(hi)
        ca.append(ctx.axis(a))
    if not ca:
        ctx.put(0, ctx.blob_of[ctx.node.input[0]])
        return
    ctx.put(0, ctx.layer("Crop", [ctx.blob(0)], {9: cs, 10: ce, 11: ca})[0])


@emits("Gather")
def gather(ctx: NodeCtx) -> None:
    axis = int(ctx.attrs.get("axis", 0))
    if ctx.is_const(1) and not ctx.is_const(0):
        idx = ctx.const(1).reshape(-1).astype(np.int64)
        dim = ctx.shape(0)[axis]
        idx = np.where(idx < 0, idx + dim, idx)
        if idx.size == 0 or not np.array_equal(idx, np.arange(idx[0], idx[0] + idx.size)):
            raise ctx.fail("Gather of indices that are not one contiguous run")
        ax = ctx.axis(axis)
        ctx.put(0, ctx.layer("Crop", [ctx.blob(0)], {9: [int(idx[0])], 10: [int(idx[-1]) + 1], 11: [ax]})[0])
        return
    if ctx.is_const(0) and axis == 0 and ctx.const(0).ndim == 2:
        table = ctx.const(0).astype(F32)
        V, N = table.shape
        ids = ctx.blob(1, (int(np.prod(ctx.shape(1))),))
        ctx.put(0, ctx.layer("Embed", [ids], {0: N, 1: V, 2: 0, 3: V * N}, [table.reshape(-1)])[0])
        return
    raise ctx.fail("only a Gather of constant indices, or an embedding table lookup, has an ncnn form")


@emits("Pad")
def pad(ctx: NodeCtx) -> None:
    shape = ctx.shape(0)
    r = len(shape)
    pads = (ctx.const(1) if ctx.has(1) else np.asarray(ctx.attrs["pads"])).reshape(-1).astype(int)
    value = float(ctx.const(2).reshape(-1)[0]) if ctx.has(2) else float(ctx.attrs.get("value", 0.0))
    mode = ctx.attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    b, e = list(pads[:r]), list(pads[r:])
    if min(pads) < 0 or mode not in ("constant", "edge", "reflect"):
        raise ctx.fail(f"pads {list(pads)} / mode {mode!r} have no ncnn Padding form")
    cshape = canonical(shape)
    off = r - len(cshape)
    if off and (b[0] or e[0]):
        raise ctx.fail("padding the batch axis")
    cb, ce = b[off:], e[off:]
    nd = len(cshape)
    params: dict = {4: {"constant": 0, "edge": 1, "reflect": 2}[mode], 5: value}
    layouts: dict[int, list[tuple[int, int] | None]] = {  # the (before, after) param ids of each axis
        1: [(2, 3)],
        2: [(0, 1), (2, 3)],
        3: [(7, 8), (0, 1), (2, 3)],
        4: [None, (7, 8), (0, 1), (2, 3)],
    }
    names = layouts[nd]
    for ax, ids in enumerate(names):
        if ids is None:
            if cb[ax] or ce[ax]:
                raise ctx.fail("padding the channel axis of a 4d blob")
            continue
        params[ids[0]], params[ids[1]] = int(cb[ax]), int(ce[ax])
    ctx.put(0, ctx.layer("Padding", [ctx.blob(0)], params)[0])
