"""Data-movement ncnn layers -> ONNX: Split, Noop, DeepCopy, Concat, Slice, Crop, Reshape, Flatten, Squeeze,
ExpandDims, Permute, Tile, Flip, PixelShuffle, Reorg, ShuffleChannel, CopyTo, Diag, MemoryData, Padding.

Shapes are static (measured by a run), so every output shape, crop window and split size is a constant.
Where a layer's element order has no single ONNX op (CopyTo, Diag, an odd Crop), the order is traced by
running the front end's own step on numbered blobs and expressed as one Gather (base.index_map).
"""

from __future__ import annotations

import itertools

import numpy as np

from .base import LayerCtx, emits, gather_elements, index_map

_INT64_MIN = -(2**63)


@emits("Split", "Noop", "DeepCopy")
def passthrough(ctx: LayerCtx) -> None:
    """Every top is a bottom (Split: the one bottom; Noop: bottom k)."""
    for k in range(len(ctx.results)):
        ctx.put(k, ctx.x(0 if ctx.type == "Split" else k))


@emits("Reshape", "Flatten", "Squeeze", "ExpandDims")
def reshape(ctx: LayerCtx) -> None:
    """The measured output shape (row-major order is ncnn's too)."""
    ctx.put(0, ctx.g.reshape(ctx.x(), (1, *ctx.out_shapes[0])))


@emits("Concat")
def concat(ctx: LayerCtx) -> None:
    if len(ctx.ins) == 1:
        ctx.put(0, ctx.x())
        return
    ax = 1 if ctx.rank() == 1 else ctx.axis(ctx.p.axis)
    ctx.put(0, ctx.g.op("Concat", ctx.ins, axis=ax))


@emits("Slice")
def slice_layer(ctx: LayerCtx) -> None:
    g, shape = ctx.g, ctx.in_shapes[0]
    r = len(shape)
    ax = 0 if r == 1 else (ctx.p.axis + r if ctx.p.axis < 0 else ctx.p.axis)
    sizes = [s[ax] for s in ctx.out_shapes]
    rest = shape[ax] - sum(sizes)
    split = sizes + ([rest] if rest > 0 else [])
    outs = g.op("Split", [ctx.x(), g.ints(split, "split")], len(split), axis=ax + 1)
    outs = [outs] if isinstance(outs, str) else outs
    ctx.put_all(outs[: len(sizes)])


def _as_slice(idx: np.ndarray, in_shape: tuple[int, ...]):
    """(starts, ends) if ``idx`` (an index map into one bottom) is a box of that bottom, else None."""
    if idx.ndim != len(in_shape) or idx.size == 0 or (idx < 0).any():
        return None
    start = np.unravel_index(int(idx.reshape(-1)[0]), in_shape)
    box = np.arange(int(np.prod(in_shape))).reshape(in_shape)[tuple(slice(s, s + n) for s, n in zip(start, idx.shape))]
    if box.shape != idx.shape or not np.array_equal(box, idx):
        return None
    return [int(s) for s in start], [int(s) + n for s, n in zip(start, idx.shape)]


@emits("Crop")
def crop(ctx: LayerCtx) -> None:
    p = ctx.p
    if len(ctx.ins) > 1 and p.woffset == -233 and not (p.starts or p.starts_expr):
        raise ctx.fail("the crop window is read from the values of the second bottom; ONNX needs it constant")
    if ctx.out_shapes[0] == ctx.in_shapes[0]:
        ctx.put(0, ctx.x())
        return
    size0 = int(np.prod(ctx.in_shapes[0]))
    idx, fill = index_map(ctx)
    box = _as_slice(idx, ctx.in_shapes[0]) if idx.max(initial=-1) < size0 else None
    if box is None:
        ctx.put(0, gather_elements(ctx, idx, fill))
        return
    starts, ends = box
    axes = [a for a in range(len(starts)) if (starts[a], ends[a]) != (0, ctx.in_shapes[0][a])]
    ctx.put(0, ctx.g.slice(ctx.x(), [starts[a] for a in axes], [ends[a] for a in axes], [a + 1 for a in axes]))


def _perm_of(idx: np.ndarray, in_shape: tuple[int, ...]) -> list[int] | None:
    """The axis permutation that turns the bottom into ``idx``'s order, if there is one."""
    base = np.arange(int(np.prod(in_shape))).reshape(in_shape)
    for perm in itertools.permutations(range(len(in_shape))):
        t = base.transpose(perm)
        if t.shape == idx.shape and np.array_equal(t, idx):
            return list(perm)
    return None


@emits("Permute")
def permute(ctx: LayerCtx) -> None:
    if ctx.out_shapes[0] == ctx.in_shapes[0] and ctx.rank() == 1:
        ctx.put(0, ctx.x())
        return
    idx, _ = index_map(ctx)
    perm = _perm_of(idx, ctx.in_shapes[0])
    if perm is None:
        raise ctx.fail(f"order_type {ctx.p.order_type} is not a transpose of a {ctx.rank()}d blob")
    if perm == sorted(perm):
        ctx.put(0, ctx.x())
        return
    ctx.put(0, ctx.g.op("Transpose", [ctx.x()], perm=[0] + [a + 1 for a in perm]))


@emits("Tile")
def tile(ctx: LayerCtx) -> None:
    g = ctx.g
    src, out = ctx.in_shapes[0], ctx.out_shapes[0]
    x = ctx.x()
    if len(out) > len(src):
        src = (1,) * (len(out) - len(src)) + src
        x = g.reshape(x, (1, *src))
    reps = [1] + [o // s for o, s in zip(out, src)]
    ctx.put(0, x if all(r == 1 for r in reps) else g.op("Tile", [x, g.ints(reps, "repeats")]))


@emits("Flip")
def flip(ctx: LayerCtx) -> None:
    axes, r = list(ctx.p.axes), ctx.rank()
    if not axes:
        ctx.put(0, ctx.x())
        return
    sel = [0] if r == 1 else sorted({a + r if a < 0 else a for a in axes})
    n = len(sel)
    ctx.put(0, ctx.g.slice(ctx.x(), [-1] * n, [_INT64_MIN] * n, [a + 1 for a in sel], [-1] * n))


@emits("PixelShuffle")
def pixel_shuffle(ctx: LayerCtx) -> None:
    g, r_ = ctx.g, int(ctx.p.upscale_factor)
    c = ctx.in_shapes[0][0]
    x = ctx.x()
    if r_ == 1:
        ctx.put(0, x)
        return
    keep = c // (r_ * r_) * r_ * r_
    if keep != c:
        x = g.slice(x, [0], [keep], [1])
    ctx.put(0, g.op("DepthToSpace", [x], blocksize=r_, mode="CRD" if ctx.p.mode == 0 else "DCR"))


@emits("Reorg")
def reorg(ctx: LayerCtx) -> None:
    g, s = ctx.g, int(ctx.p.stride)
    c, h, w = ctx.in_shapes[0]
    x = ctx.x()
    if s == 1:
        ctx.put(0, x)
        return
    oh, ow = h // s, w // s
    if (oh * s, ow * s) != (h, w):
        x = g.slice(x, [0, 0], [oh * s, ow * s], [2, 3])
    if ctx.p.mode == 1:  # channel (sh s + sw) C + c: ONNX SpaceToDepth's order
        ctx.put(0, g.op("SpaceToDepth", [x], blocksize=s))
        return
    v = g.reshape(x, (1, c, oh, s, ow, s))
    v = g.op("Transpose", [v], perm=[0, 1, 3, 5, 2, 4])
    ctx.put(0, g.reshape(v, (1, c * s * s, oh, ow)))


@emits("ShuffleChannel")
def shuffle_channel(ctx: LayerCtx) -> None:
    g, shape = ctx.g, ctx.in_shapes[0]
    c = shape[0] if len(shape) >= 3 else 1
    grp = c // ctx.p.group if ctx.p.reverse else ctx.p.group
    if grp == 1 or grp == c:
        ctx.put(0, ctx.x())
        return
    v = g.reshape(ctx.x(), (1, grp, c // grp, -1))
    v = g.op("Transpose", [v], perm=[0, 2, 1, 3])
    ctx.put(0, g.reshape(v, (1, *shape)))


@emits("CopyTo", "Diag")
def traced(ctx: LayerCtx) -> None:
    """Element order traced from the front end's step (see the module docstring)."""
    if ctx.type == "CopyTo" and ctx.in_shapes[1] == ctx.in_shapes[0]:
        ctx.put(0, ctx.x(1))
        return
    ctx.put(0, gather_elements(ctx, *index_map(ctx)))


@emits("MemoryData")
def memorydata(ctx: LayerCtx) -> None:
    data = np.asarray(ctx.layer.fn(), dtype=np.float32)
    ctx.put(0, ctx.g.const(data.reshape((1, *data.shape)), name=ctx.tops[0]))


@emits("Padding")
def padding(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    r = ctx.rank()
    b = {1: [p.left], 2: [p.top, p.left], 3: [p.front, p.top, p.left], 4: [0, p.front, p.top, p.left]}[r]
    e = {1: [p.right], 2: [p.bottom, p.right], 3: [p.behind, p.bottom, p.right], 4: [0, p.behind, p.bottom, p.right]}[r]
    if not any(b) and not any(e):
        ctx.put(0, ctx.x())
        return
    pads = g.ints([0, *b, 0, *e], "pads")
    dtype = np.dtype(ctx.in_dtypes[0])
    if p.type != 0:
        ctx.put(0, g.op("Pad", [ctx.x(), pads], mode="edge" if p.type == 1 else "reflect"))
        return
    per_channel = ctx.w.get("per_channel_pad_data")
    if per_channel is None or r < 3:
        ctx.put(0, g.op("Pad", [ctx.x(), pads, g.const(np.asarray(p.value, dtype), stem="value")]))
        return
    out = ctx.out_shapes[0]
    nc = out[0]
    fill = np.empty(out, dtype)
    fill[...] = np.asarray(per_channel[:nc], dtype).reshape((nc,) + (1,) * (r - 1))
    inside = np.zeros(out, bool)
    inside[tuple(slice(bb, bb + n) for bb, n in zip(b, ctx.in_shapes[0]))] = True
    padded = g.op("Pad", [ctx.x(), pads])
    ctx.put(0, g.op("Where", [g.const(inside[None], stem="inside"), padded, g.const(fill[None], stem="fill")]))
