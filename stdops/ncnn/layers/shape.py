"""Shape and data-movement layers (ncnn-operators.txt): Concat, Slice, Crop, Reshape, Flatten (the layout
layers, Permute to DeepCopy, are in :mod:`stdops.ncnn.layers.layout`).

Blobs are numpy arrays in ncnn layout without batch: 1d (w,), 2d (h, w), 3d (c, h, w), 4d (c, d, h, w).
An ``axis`` param counts over that numpy shape (0 = outermost present dim). ncnn's w/h/d/c names map
to numpy axes per rank (``_AXIS_OF``). The data movement runs on the shared kernels (concat, split,
slice_, reshape, transpose, squeeze, unsqueeze, tile, depth_to_space, space_to_depth).
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelError
from ...ops import shape as shapes
from ...ops import shape_pad
from .. import expr as _expr
from ..spec import P, layer

_concat = shapes.concat
_split = shapes.split
_slice = shapes.slice_
_reshape = shapes.reshape
_transpose = shapes.transpose
_squeeze = shapes.squeeze
_unsqueeze = shapes.unsqueeze
_tile = shapes.tile
_d2s = shape_pad.depth_to_space
_s2d = shape_pad.space_to_depth

#: ncnn dim name -> numpy axis, per rank
_AXIS_OF = {1: {"w": 0}, 2: {"h": 0, "w": 1}, 3: {"c": 0, "h": 1, "w": 2}, 4: {"c": 0, "d": 1, "h": 2, "w": 3}}

_INT_MIN = -(2**31)


def _rank(x: np.ndarray, what: str, ranks=(1, 2, 3, 4)) -> int:
    if x.ndim not in ranks:
        raise KernelError(
            f"{what}: input of shape {x.shape} has {x.ndim} dims, expected " + " or ".join(f"{r}d" for r in ranks)
        )
    return x.ndim


def _ncnn_dims(shape) -> dict[str, int]:
    return _expr.shape_dims(shape)


def _crop(x: np.ndarray, offsets: dict[str, int], outs: dict[str, int], what: str) -> np.ndarray:
    """x[off:off+out] per ncnn dim name. As ncnn: a window of the whole input is the input (offsets
    ignored), and when every dim but c keeps its size only the c offset applies. Otherwise the window
    must lie inside the input (ncnn would read past it)."""
    amap = _AXIS_OF[x.ndim]
    size = {name: x.shape[ax] for name, ax in amap.items()}
    outs = {name: int(outs.get(name, size[name])) for name in amap}
    offs = {name: int(offsets.get(name, 0)) for name in amap}
    if all(outs[n] == size[n] for n in amap):
        return x
    if all(outs[n] == size[n] for n in amap if n != "c"):
        offs = {n: (o if n == "c" else 0) for n, o in offs.items()}
    starts, ends, axes = [], [], []
    for name, ax in amap.items():
        n, o, k = size[name], offs[name], outs[name]
        if k <= 0 or o < 0 or o + k > n:
            raise KernelError(
                f"{what}: window {name} offset {o} size {k} does not fit the input size {n} (input shape {x.shape})"
            )
        if k != n:
            starts.append(o)
            ends.append(o + k)
            axes.append(ax)
    return _slice(x, np.array(starts, np.int64), np.array(ends, np.int64), np.array(axes, np.int64))


# ----------------------------------------------------------------------------------------- Concat
@layer("Concat", params=[P(0, "axis", 0)], inputs=None, kernels=(shapes.concat,))
def concat(p, w):
    """y = the bottoms joined along ``axis`` (negative counts from the back); same rank bottoms."""
    axis = p.axis

    def run(*xs):
        if not xs:
            raise KernelError("Concat: no bottoms")
        r = xs[0].ndim
        if any(x.ndim != r for x in xs):
            raise KernelError(f"Concat: bottoms of different ranks {[x.shape for x in xs]}")
        ax = 0 if r == 1 else (axis + r if axis < 0 else axis)
        if not 0 <= ax < r:
            raise KernelError(f"Concat: axis {axis} out of range for {r}d bottoms")
        if len(xs) == 1:
            return xs[0].copy()
        return _concat(*xs, axis=ax)

    return run


# ------------------------------------------------------------------------------------------ Slice
@layer(
    "Slice",
    params=[P(0, "slices", (), "ints"), P(1, "axis", 0), P(2, "indices", (), "ints")],
    outputs=None,
    kernels=(shapes.split,),
)
def slice_layer(p, w):
    """Split the bottom along ``axis`` into n_tops parts: sizes from ``slices`` (-233 = an equal share of
    what is left), or cut points from ``indices`` (negative count from the end; the last part takes the
    rest). A 1d bottom is always split along w."""
    n = p.n_tops
    slices, indices, axis = list(p.slices), list(p.indices), p.axis
    if indices:
        if len(indices) < n - 1:
            raise ValueError(f"Slice has {n} tops but only {len(indices)} indices")
    else:
        if len(slices) < n:
            raise ValueError(f"Slice has {n} tops but {len(slices)} slices")
        if any(s < 0 and s != -233 for s in slices[:n]):
            raise ValueError(f"Slice: negative slice size in {slices}")

    def run(x):
        r = _rank(x, "Slice")
        ax = 0 if r == 1 else (axis + r if axis < 0 else axis)
        if not 0 <= ax < r:
            raise KernelError(f"Slice: axis {axis} out of range for a {r}d bottom")
        dim = x.shape[ax]
        sizes, q = [], 0
        for i in range(n):
            if indices:
                if i == n - 1:
                    s = dim - q
                else:
                    k = indices[i]
                    s = (dim + k if k < 0 else k) - q
            else:
                s = slices[i]
                if s == -233:
                    s = (dim - q) // (n - i)
            if s <= 0 or q + s > dim:
                raise KernelError(
                    f"Slice: part {i} of size {s} at {q} does not fit the dim of size {dim} (bottom shape {x.shape})"
                )
            sizes.append(s)
            q += s
        if q < dim:
            sizes.append(dim - q)
        parts = _split(x, sizes, axis=ax)  # a list of ints: the kernel's split operand without a tensor's checks
        return tuple(parts[:n])

    return run


# ------------------------------------------------------------------------------------------- Crop
CROP_PARAMS = [
    P(0, "woffset", 0),
    P(1, "hoffset", 0),
    P(13, "doffset", 0),
    P(2, "coffset", 0),
    P(3, "outw", 0),
    P(4, "outh", 0),
    P(14, "outd", 0),
    P(5, "outc", 0),
    P(6, "woffset2", 0),
    P(7, "hoffset2", 0),
    P(15, "doffset2", 0),
    P(8, "coffset2", 0),
    P(9, "starts", (), "ints"),
    P(10, "ends", (), "ints"),
    P(11, "axes", (), "ints"),
    P(19, "starts_expr", ""),
    P(20, "ends_expr", ""),
    P(21, "axes_expr", ""),
]


def _numpy_window(shape, starts, ends, axes, what):
    """ncnn's starts/ends/axes crop: -233 = open end; a negative start/end counts from the back; an
    end of 0 means the full dim; ends clamp to the dim."""
    r = len(shape)
    if axes:
        ax = [a + r if a < 0 else a for a in axes]
    else:
        ax = list(range(r))
    if len(starts) < len(ax) or len(ends) < len(ax):
        raise KernelError(f"{what}: {len(ax)} axes but {len(starts)} starts and {len(ends)} ends")
    offs, outs = {}, {}
    names = {v: k for k, v in _AXIS_OF[r].items()}
    for i, a in enumerate(ax):
        if r == 1:
            a = 0
        if a not in names:
            continue  # ncnn ignores an axis outside the rank
        n = shape[a]
        s, e = starts[i], ends[i]
        if s == -233:
            s = 0
        if e == -233:
            e = n
        o = s if s >= 0 else n + s
        k = min(n, e if e > 0 else n + e) - o
        offs[names[a]], outs[names[a]] = o, k
    return offs, outs


@layer("Crop", params=CROP_PARAMS, inputs=None, kernels=(shapes.slice_,))
def crop(p, w):
    """y = a window of the bottom. Forms, as ncnn picks them:
    - ``starts_expr``/``ends_expr`` (+ ``axes_expr``): numpy-style window from expressions over the bottoms;
    - ``starts``/``ends`` (+ ``axes``): numpy-style window (-233 open, negative from the back);
    - offsets with ``outw/outh/outd/outc`` (-233 = to the end, minus ``*offset2``);
    - none of those: a second bottom gives the size (its shape), or, with ``woffset=-233``, its int32
      contents (woffset, hoffset, [doffset,] coffset, outw, outh, [outd,] outc)."""
    use_expr = bool(p.starts_expr) and bool(p.ends_expr)
    numpy_style = (bool(p.starts) and bool(p.ends)) or use_expr
    ref_form = not numpy_style and all(
        v == 0 for v in (p.outw, p.outh, p.outd, p.outc, p.woffset2, p.hoffset2, p.doffset2, p.coffset2)
    )
    exprs = None
    if p.starts_expr or p.ends_expr or p.axes_expr:
        exprs = [_expr.parse(t) for t in (p.starts_expr, p.ends_expr, p.axes_expr)]
    expr_blobs = max((e.n_blobs for e in exprs), default=0) if exprs else 0
    two = ref_form or expr_blobs > 1
    if not two and p.n_bottoms != 1:
        raise ValueError(f"Crop with these params takes 1 bottom (as ncnn), the layer has {p.n_bottoms}")
    if two and p.n_bottoms < 2:
        if ref_form:
            raise ValueError(
                "Crop without out sizes, starts/ends or expressions takes its size from a second "
                "bottom (reference blob), the layer has 1"
            )
        raise ValueError(f"Crop expressions read {expr_blobs} bottoms, the layer has {p.n_bottoms}")
    starts, ends, axes = list(p.starts), list(p.ends), list(p.axes)
    woff, hoff, doff, coff = p.woffset, p.hoffset, p.doffset, p.coffset

    def window(x, ref):
        r = x.ndim
        if use_expr:
            blobs = [x] + ([ref] if ref is not None else [])
            st, en, ax = (e.eval(blobs) for e in exprs)
            return _numpy_window(x.shape, st, en, ax, "Crop")
        if ref is not None and woff == -233:
            data = np.ascontiguousarray(ref, np.float32).ravel().view(np.int32)
            need = {1: 4, 2: 5, 3: 6, 4: 8}[r]
            if data.size < need:
                raise KernelError(f"Crop: the reference blob holds {data.size} values, needs {need}")
            v = [int(t) for t in data[:need]]
            if r == 4:
                return dict(w=v[0], h=v[1], d=v[2], c=v[3]), dict(w=v[4], h=v[5], d=v[6], c=v[7])
            if r == 3:
                return dict(w=v[0], h=v[1], c=v[2]), dict(w=v[3], h=v[4], c=v[5])
            return dict(w=v[0], h=v[1]), dict(w=v[3], h=v[4] if r == 2 else 1)
        if ref is not None:
            rd = _ncnn_dims(ref.shape)
            outs = dict(w=rd["w"], h=rd["h"], d=rd["d"])
            outs["c"] = rd["c"] if ref.ndim == r else x.shape[0]
            return dict(w=woff, h=hoff, d=doff, c=coff), outs
        if numpy_style:
            return _numpy_window(x.shape, starts, ends, axes, "Crop")
        dims = _ncnn_dims(x.shape)
        outs = {}
        for name, off, off2, out in (
            ("w", woff, p.woffset2, p.outw),
            ("h", hoff, p.hoffset2, p.outh),
            ("d", doff, p.doffset2, p.outd),
            ("c", coff, p.coffset2, p.outc),
        ):
            k = dims[name] - off - off2
            if out != -233:
                k = min(out, k)
            outs[name] = k
        return dict(w=woff, h=hoff, d=doff, c=coff), outs

    def run(x, ref=None):
        _rank(x, "Crop")
        offs, outs = window(x, ref if two else None)
        amap = _AXIS_OF[x.ndim]
        return _crop(
            x, {k: v for k, v in offs.items() if k in amap}, {k: v for k, v in outs.items() if k in amap}, "Crop"
        )

    return run


# ---------------------------------------------------------------------------------------- Reshape
@layer(
    "Reshape",
    params=[
        P(0, "w", -233),
        P(1, "h", -233),
        P(11, "d", -233),
        P(2, "c", -233),
        P(3, "permute", 0),
        P(6, "shape_expr", ""),
        P(12, "input_batch_axis", 233),
        P(13, "output_batch_axis", 233),
    ],
    inputs=None,
    kernels=(shapes.reshape,),
)
def reshape(p, w):
    """y = the bottom's elements (row-major, ncnn layout) with shape w / (h, w) / (c, h, w) / (c, d, h, w).
    The rank is how many of w, h, d, c are set (-233 drops a dim), or the number of items of
    ``shape_expr`` (listed as w, h, d, c); 0 copies the bottom's dim of the same name, -1 takes the rest
    (1d: 0 and -1 both flatten, as ncnn's x86 layer does).
    The legacy ``permute`` flag (3) is ignored, as in current ncnn."""
    ex = _expr.parse(p.shape_expr) if p.shape_expr else None
    if p.input_batch_axis != 233 or p.output_batch_axis != 233:
        return _batch_axis_reshape(p, ex)
    if ex is not None:
        ndim = ex.n_items
        if ex.n_blobs > p.n_bottoms:
            raise ValueError(f"Reshape shape_expr reads {ex.n_blobs} bottoms, the layer has {p.n_bottoms}")
    if (ex is None or ex.n_blobs <= 1) and p.n_bottoms != 1:
        raise ValueError(f"Reshape with these params takes 1 bottom (as ncnn), the layer has {p.n_bottoms}")
    if ex is None:
        ndim = 4
        if p.d == -233:
            ndim = 3
        if p.c == -233:
            ndim = 2
        if p.h == -233:
            ndim = 1
        if p.w == -233:
            ndim = 0
    if not 1 <= ndim <= 4:
        raise ValueError(
            f"Reshape gives no output shape (w={p.w} h={p.h} d={p.d} c={p.c}"
            + (f", shape_expr {p.shape_expr!r} has {ndim} items" if ex else "")
            + ")"
        )

    def run(x, *others):
        _rank(x, "Reshape")
        if ex is not None:
            v = ex.eval([x, *others]) + [1, 1, 1]
            ow, oh = v[0], v[1] if ndim >= 2 else 1
            od = v[2] if ndim == 4 else 1
            oc = v[3] if ndim == 4 else v[2] if ndim == 3 else 1
        else:
            ow, oh, od, oc = p.w, p.h, p.d, p.c
        b = _ncnn_dims(x.shape)
        total = x.size
        w_raw = ow
        ow = b["w"] if ow == 0 else ow
        if ndim >= 2:
            oh = b["h"] if oh == 0 else oh
        if ndim >= 3:
            oc = b["c"] if oc == 0 else oc
        if ndim == 4:
            od = b["d"] if od == 0 else od

        def rest(*ds):
            prod = 1
            for t in ds:
                if t == 0:
                    raise KernelError(f"Reshape: cannot infer -1 next to a 0-sized dim (bottom {x.shape})")
                prod *= t
            return int(total / prod) if prod < 0 else total // prod

        if ndim == 1:  # ncnn (x86) flattens for 0 and -1; another w must be the element count
            shape = [total if w_raw in (0, -1) else w_raw]
        elif ndim == 2:
            ow = rest(oh) if ow == -1 else ow
            oh = rest(ow) if oh == -1 else oh
            shape = [oh, ow]
        elif ndim == 3:
            ow = rest(oc, oh) if ow == -1 else ow
            oh = rest(oc, ow) if oh == -1 else oh
            oc = rest(oh, ow) if oc == -1 else oc
            shape = [oc, oh, ow]
        else:
            ow = rest(oc, od, oh) if ow == -1 else ow
            oh = rest(oc, od, ow) if oh == -1 else oh
            od = rest(oc, oh, ow) if od == -1 else od
            oc = rest(od, oh, ow) if oc == -1 else oc
            shape = [oc, od, oh, ow]
        if any(s <= 0 for s in shape) or int(np.prod(shape)) != total:
            raise KernelError(f"Reshape: cannot reshape a blob of shape {x.shape} ({total} elements) to {tuple(shape)}")
        return _reshape(x, np.array(shape, np.int64))

    return run


def _batch_axis_reshape(p, ex):
    """Reshape with batch axes (params 12 / 13, as pnnx writes after a global pooling): ncnn's
    reshape.cpp inserts the batch (n) at ``input_batch_axis`` of the logical input shape (negative: from
    the back), reads the target (``shape_expr`` items listed innermost first, or w/h/d/c) outermost first
    with 0 copying the logical input's dim at the same place and -1 the rest, and drops
    ``output_batch_axis`` from it (that dim becomes the output's n). Blobs here have n = 1, so a batch
    axis is a dim of 1, and the output's batch dim must come out as 1."""
    ia, oa = int(p.input_batch_axis), int(p.output_batch_axis)
    if ex is None:  # the rank as ncnn's load_param counts it: the first -233 of w, h, c, d ends it
        ndim = 0 if p.w == -233 else 1 if p.h == -233 else 2 if p.c == -233 else 3 if p.d == -233 else 4
        target_raw = {0: [], 1: [p.w], 2: [p.h, p.w], 3: [p.c, p.h, p.w], 4: [p.c, p.d, p.h, p.w]}[ndim]
        if not target_raw:
            raise ValueError("Reshape with batch axes gives no output shape (w, h, d, c all -233)")
    elif ex.n_blobs > p.n_bottoms:
        raise ValueError(f"Reshape shape_expr reads {ex.n_blobs} bottoms, the layer has {p.n_bottoms}")
    if (ex is None or ex.n_blobs <= 1) and p.n_bottoms != 1:
        raise ValueError(f"Reshape with these params takes 1 bottom (as ncnn), the layer has {p.n_bottoms}")

    def run(x, *others):
        _rank(x, "Reshape")
        logical = list(x.shape)
        a = ia + x.ndim + 1 if ia < 0 else ia
        if a != 233:
            if not 0 <= a <= x.ndim:
                raise KernelError(f"Reshape: input_batch_axis {ia} is out of range for a {x.ndim}d bottom")
            logical.insert(a, 1)
        target = list(reversed(ex.eval([x, *others]))) if ex is not None else list(target_raw)
        if not 1 <= len(target) <= 5:
            raise KernelError(f"Reshape: {len(target)} output dims (1 to 5 with the batch axis)")
        o = oa + len(target) if oa < 0 else oa
        if o != 233 and not 0 <= o < len(target):
            raise KernelError(f"Reshape: output_batch_axis {oa} is out of range for {len(target)} output dims")
        shape, rest = [], None
        for i, t in enumerate(target):
            if t == 0:
                if i >= len(logical):
                    raise KernelError(f"Reshape: 0 at output dim {i} has no input dim to copy ({x.shape})")
                t = logical[i]
            if t == -1:
                if rest is not None:
                    raise KernelError("Reshape: more than one -1 in the target shape")
                rest = i
            elif t <= 0:
                raise KernelError(f"Reshape: target dim {t} at {i}")
            shape.append(t)
        known = int(np.prod([t for i, t in enumerate(shape) if i != rest]))
        if rest is not None:
            if known == 0 or x.size % known:
                raise KernelError(f"Reshape: cannot infer -1 for {x.size} elements and target {target}")
            shape[rest] = x.size // known
        if int(np.prod(shape)) != x.size:
            raise KernelError(f"Reshape: cannot reshape a blob of shape {x.shape} to {tuple(shape)} (batch axes)")
        if o != 233:
            if shape[o] != 1:
                raise KernelError(f"Reshape: the output batch dim is {shape[o]}; blobs here carry a batch of 1")
            del shape[o]
        if not 1 <= len(shape) <= 4:
            raise KernelError(f"Reshape: {len(shape)} physical output dims (1 to 4)")
        return _reshape(x, np.array(shape, np.int64))

    return run


@layer("Flatten", kernels=(shapes.reshape,))
def flatten(p, w):
    """y = the bottom's elements as a 1d blob (row-major over c, d, h, w)."""
    return lambda x: _reshape(x, np.array([-1], np.int64))
