"""The registry of ncnn -> ONNX emitters and the per-layer context they work on (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..common import ConversionError
from ..onnx_build import GraphBuilder

#: ncnn layer type -> emitter(ctx)
EMIT: dict[str, Callable[[LayerCtx], None]] = {}
#: ncnn layer type -> why it has no ONNX form (refused with this reason)
NO_ONNX_FORM: dict[str, str] = {}

F32 = np.float32
FLT_MAX = float(np.finfo(np.float32).max)


def emits(*types: str) -> Callable:
    def register(fn: Callable) -> Callable:
        for t in types:
            if t in EMIT:
                raise ValueError(f"ncnn layer {t} has two ONNX emitters")
            EMIT[t] = fn
        return fn

    return register


class LayerCtx:
    """One layer being converted (see the module docstring)."""

    def __init__(
        self,
        g: GraphBuilder,
        layer: Any,
        ins: Sequence[str],
        in_shapes: Sequence[tuple[int, ...]],
        in_dtypes: Sequence[np.dtype],
        out_shapes: Sequence[tuple[int, ...]],
        out_dtypes: Sequence[np.dtype],
        path: str | None,
    ):
        self.g = g
        self.layer = layer
        self.p = layer.params
        self.w = layer.weights
        self.ins = list(ins)
        self.in_shapes = [tuple(s) for s in in_shapes]
        self.in_dtypes = list(in_dtypes)
        self.out_shapes = [tuple(s) for s in out_shapes]
        self.out_dtypes = list(out_dtypes)
        self.path = path
        self.tops = list(layer.decl.tops)
        self.results: list[str | None] = [None] * len(out_shapes)
        self._raw: dict[int, str] = {}

    # ------------------------------------------------------------------ facts
    @property
    def type(self) -> str:
        return self.layer.type

    @property
    def where(self) -> str:
        return self.layer.decl.where

    def rank(self, k: int = 0) -> int:
        return len(self.in_shapes[k])

    def fail(self, reason: str) -> ConversionError:
        return ConversionError(self.path, self.where, "ONNX", reason)

    # ------------------------------------------------------------------ values
    def x(self, k: int = 0) -> str:
        """Bottom k in ONNX layout (1, *ncnn shape)."""
        return self.ins[k]

    def raw(self, k: int = 0) -> str:
        """Bottom k without the batch axis (its ncnn shape)."""
        if k not in self._raw:
            self._raw[k] = self.g.reshape(self.ins[k], self.in_shapes[k])
        return self._raw[k]

    def as_float(self, k: int = 0) -> str:
        """Bottom k as float32 (int8 / int32 / float16 blobs read by value)."""
        if np.dtype(self.in_dtypes[k]) == np.float32:
            return self.ins[k]
        return self.g.cast(self.ins[k], np.float32)

    def put(self, k: int, value: str, raw: bool = False) -> None:
        """``value`` is top k (``raw``: in ncnn layout, reshaped to (1, *shape) here)."""
        if raw:
            value = self.g.reshape(value, (1, *self.out_shapes[k]))
        self.results[k] = value

    def put_all(self, values: Sequence[str], raw: bool = False) -> None:
        for k, v in enumerate(values[: len(self.results)]):
            self.put(k, v, raw)

    # ------------------------------------------------------------------ shapes
    def axis(self, a: int, k: int = 0) -> int:
        """An ncnn axis of bottom k (negative from the back) as an ONNX axis (batch = 0)."""
        r = self.rank(k)
        b = a + r if a < 0 else a
        if not 0 <= b < r:
            raise self.fail(f"axis {a} is out of range for a {r}d blob")
        return b + 1

    def per_axis0(self, v: np.ndarray, rank: int) -> np.ndarray:
        """Values one per element of ncnn axis 0, shaped to broadcast against (1, *shape)."""
        return np.asarray(v, F32).reshape((1, -1) + (1,) * (rank - 1))


def fused_activation(ctx: LayerCtx, y: str, activation_type: int, params: Sequence[float]) -> str:
    """ncnn's activation_type 0..6 as ONNX ops (the loader's rule in stdops/ncnn/activation.py)."""
    g, t, p = ctx.g, int(activation_type), [float(v) for v in params]
    if t == 0:
        return y
    if t == 1:
        return g.op("Relu", [y])
    if t == 2:
        return g.op("LeakyRelu", [y], alpha=p[0] if p else 0.0)
    if t == 3:
        lo = g.scalar(p[0] if len(p) > 0 else -np.inf)
        hi = g.scalar(p[1] if len(p) > 1 else np.inf)
        return g.op("Clip", [y, lo, hi])
    if t == 4:
        return g.op("Sigmoid", [y])
    if t == 5:
        return g.op("Mish", [y])
    if t == 6:
        hs = g.op("HardSigmoid", [y], alpha=p[0] if len(p) > 0 else 0.2, beta=p[1] if len(p) > 1 else 0.5)
        return g.op("Mul", [y, hs])
    raise ctx.fail(f"activation_type {t} is not one of 0..6")


def float2int8(g: GraphBuilder, v: str, lo: int = -127, hi: int = 127) -> str:
    """ncnn's float -> int8 of a float32 value: round half away from zero, saturate (stdops.ncnn.layers.quant).
    The rounding runs in float64, where adding 0.5 to a float32 value is exact."""
    d = g.cast(v, np.float64)
    r = g.op("Mul", [g.op("Floor", [g.op("Add", [g.op("Abs", [d]), g.scalar(0.5, np.float64)])]), g.op("Sign", [d])])
    r = g.op("Max", [g.op("Min", [r, g.scalar(hi, np.float64)]), g.scalar(lo, np.float64)])
    return g.cast(r, np.int8)


def affine(g: GraphBuilder, x: str, scale: float, shift: float) -> str:
    """shift + x * scale in float32 (x itself when scale 1 and shift 0)."""
    if scale != 1.0:
        x = g.op("Mul", [x, g.scalar(scale)])
    if shift != 0.0:
        x = g.op("Add", [x, g.scalar(shift)])
    return x


#: index maps are computed in float32 by running the layer on numbered blobs: exact below 2**24
_OFFSET = 2**23


def index_map(ctx: LayerCtx, top: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Where each element of top ``top`` of a data-movement layer comes from, traced by running the front
    end's own step on blobs numbered from 1 and again from 2**23 + 1 (across all bottoms, in order): an
    element that moves with the numbering is the bottom element of that number, one that does not is a
    constant the layer writes (padding, the zeros off a diagonal). Returns (index, fill): index -1 where
    ``fill`` holds the constant."""
    sizes = [int(np.prod(s)) for s in ctx.in_shapes]
    if sum(sizes) >= _OFFSET:
        raise ctx.fail(f"the bottoms hold {sum(sizes)} elements, too many to trace the layer's element order")

    def run(first: int) -> np.ndarray:
        blobs, start = [], first
        for s, n in zip(ctx.in_shapes, sizes):
            blobs.append((start + np.arange(n, dtype=np.float64)).astype(F32).reshape(s))
            start += n
        out = ctx.layer.fn(*blobs)
        return np.asarray(out[top] if isinstance(out, tuple) else out, np.float64)

    a, b = run(1), run(_OFFSET + 1)
    moved = (b - a) == _OFFSET
    return np.where(moved, a - 1, -1).astype(np.int64), np.where(moved, 0.0, a).astype(F32)


def gather_elements(ctx: LayerCtx, idx: np.ndarray, fill: np.ndarray | None = None) -> str:
    """The tensor whose elements are the bottoms' flattened elements at ``idx`` (-1: the ``fill`` value
    there, default 0), shaped (1, *idx.shape)."""
    g = ctx.g
    parts = [g.reshape(x, (-1,)) for x in ctx.ins]
    dtype = np.dtype(ctx.in_dtypes[0])
    flat_idx = idx.reshape(-1)
    holes = flat_idx < 0
    if holes.any():
        values = np.zeros(flat_idx.shape, dtype) if fill is None else np.asarray(fill, dtype).reshape(-1)
        table, where = np.unique(values[holes], return_inverse=True)
        parts.append(g.const(table.astype(dtype), stem="fill"))
        flat_idx = flat_idx.copy()
        flat_idx[holes] = sum(int(np.prod(s)) for s in ctx.in_shapes) + where.reshape(-1)
    flat = parts[0] if len(parts) == 1 else g.op("Concat", parts, axis=0)
    y = g.op("Gather", [flat, g.const(flat_idx.astype(np.int64), stem="index")], axis=0)
    return g.reshape(y, (1, *idx.shape))
