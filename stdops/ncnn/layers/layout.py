"""Layout layers (ncnn-operators.txt): Permute, Squeeze, ExpandDims, Tile, Flip, PixelShuffle, Reorg,
ShuffleChannel, CopyTo, DeepCopy: axes reordered, added, dropped or repeated, blocks moved between
channels and space, on the shared kernels (transpose, squeeze, unsqueeze, tile, slice_, reshape,
depth_to_space, space_to_depth). Blobs and axes as in :mod:`stdops.ncnn.layers.shape`.
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelError
from ...limits import check_elements
from ...ops import shape as shapes
from ...ops import shape_pad
from ..spec import P, layer
from .shape import _AXIS_OF, _INT_MIN, _ncnn_dims, _rank, _slice, _transpose

_squeeze = shapes.squeeze
_unsqueeze = shapes.unsqueeze
_tile = shapes.tile
_d2s = shape_pad.depth_to_space
_s2d = shape_pad.space_to_depth


# ---------------------------------------------------------------------------------------- Permute
_PERM3 = ["whc", "hwc", "wch", "cwh", "hcw", "chw"]
_PERM4 = [
    "whdc",
    "hwdc",
    "wdhc",
    "dwhc",
    "hdwc",
    "dhwc",
    "whcd",
    "hwcd",
    "wchd",
    "cwhd",
    "hcwd",
    "chwd",
    "wdch",
    "dwch",
    "wcdh",
    "cwdh",
    "dcwh",
    "cdwh",
    "hdcw",
    "dhcw",
    "hcdw",
    "chdw",
    "dchw",
    "cdhw",
]


def _perm_of(order: str) -> list[int]:
    """``order`` names the sources of the output's w, h, (d,) c; the numpy perm lists them outermost first."""
    amap = _AXIS_OF[len(order)]
    return [amap[ch] for ch in reversed(order)]


@layer("Permute", params=[P(0, "order_type", 0)], kernels=(shapes.transpose,))
def permute(p, w):
    """y = the bottom with its dims reordered: order_type 0..1 for 2d (wh, hw), 0..5 for 3d
    (whc hwc wch cwh hcw chw) and 0..23 for 4d (whdc ... cdhw), each naming the sources of the output's
    w, h[, d], c; 1d passes through."""
    t = p.order_type
    if not 0 <= t < 24:
        raise ValueError(f"Permute order_type {t} is not one of 0..23")
    perms = {
        1: [0],
        2: [[0, 1], [1, 0]][t] if t < 2 else None,
        3: _perm_of(_PERM3[t]) if t < 6 else None,
        4: _perm_of(_PERM4[t]),
    }

    def run(x):
        r = _rank(x, "Permute")
        perm = perms[r]
        if perm is None:
            raise KernelError(f"Permute: order_type {t} does not exist for a {r}d bottom")
        if perm == sorted(perm):
            return x
        return _transpose(x, perm=perm)

    return run


# ---------------------------------------------------------------------------- Squeeze / ExpandDims
@layer(
    "Squeeze",
    params=[
        P(0, "squeeze_w", 0),
        P(1, "squeeze_h", 0),
        P(11, "squeeze_d", 0),
        P(2, "squeeze_c", 0),
        P(3, "axes", (), "ints"),
    ],
    kernels=(shapes.squeeze,),
)
def squeeze(p, w):
    """y = the bottom without the size-1 dims named by ``axes`` (numpy axes, negative from the back) or,
    without axes, by the squeeze_w/h/d/c flags; dims of another size stay. Squeezing every dim gives (1,)."""
    axes = list(p.axes)
    flags = dict(w=p.squeeze_w, h=p.squeeze_h, d=p.squeeze_d, c=p.squeeze_c)

    def run(x):
        r = _rank(x, "Squeeze")
        if axes:
            sel = set()
            for a in axes:
                a = a + r if a < 0 else a
                if 0 <= a < r:
                    sel.add(a)
        else:
            sel = {ax for name, ax in _AXIS_OF[r].items() if flags[name]}
        sel = sorted(a for a in sel if x.shape[a] == 1)
        if not sel:
            return x
        y = _squeeze(x, np.array(sel, np.int64))
        return y.reshape(1) if y.ndim == 0 else y

    return run


@layer("ExpandDims", params=[P(3, "axes", (), "ints")], kernels=(shapes.unsqueeze,))
def expand_dims(p, w):
    """y = the bottom with size-1 dims inserted at ``axes`` (positions in the output, negative from its
    back); at most 4 dims out."""
    axes = list(p.axes)

    def run(x):
        r = _rank(x, "ExpandDims", (1, 2, 3))
        if not axes:
            return x
        out = r + len(axes)
        if out > 4:
            raise KernelError(f"ExpandDims: {len(axes)} axes on a {r}d bottom give {out} dims (at most 4)")
        pos = [a + out if a < 0 else a for a in axes]
        if len(set(pos)) != len(pos) or any(not 0 <= a < out for a in pos):
            raise KernelError(f"ExpandDims: axes {axes} are repeated or out of range for {out} dims")
        return _unsqueeze(x, np.array(sorted(pos), np.int64))

    return run


# ------------------------------------------------------------------------------------- Tile / Flip
@layer("Tile", params=[P(0, "axis", 0), P(1, "tiles", 1), P(2, "repeats", (), "ints")], kernels=(shapes.tile,))
def tile(p, w):
    """y = the bottom repeated: ``tiles`` times along ``axis`` (0..3; an axis the bottom lacks repeats
    nothing, a 1d bottom repeats along w), or with ``repeats`` by ncnn's dim names (tile.cpp): 1 value
    w; 2 h, w; 3 d, h, w of a 4d bottom, else c, h, w; 4 c, d, h, w. The output has max(rank, count) dims,
    each ncnn dim (c, d, h, w; 1 where the bottom lacks it) times its repeat: a 3d (c, h, w) bottom with
    4 repeats gives (c rc, rd, h rh, w rw)."""
    reps_param, axis, tiles = list(p.repeats), p.axis, p.tiles
    if len(reps_param) > 4:
        raise ValueError(f"Tile: {len(reps_param)} repeats, at most 4")
    if tiles < 1 or any(r < 1 for r in reps_param):
        raise ValueError(f"Tile: repeat counts must be >= 1 (tiles {tiles}, repeats {reps_param})")
    if not 0 <= axis <= 3:
        raise ValueError(f"Tile axis {axis} is not one of 0..3 (as in ncnn, negative axes are refused)")
    n = len(reps_param)

    def run(x):
        r = _rank(x, "Tile")
        rep = dict(c=1, d=1, h=1, w=1)
        if n:
            names = {1: "w", 2: "hw", 3: "dhw" if r == 4 else "chw", 4: "cdhw"}[n]
            rep.update(zip(names, reps_param))
        elif r == 1:
            rep["w"] = tiles
        elif axis < r:
            rep[_NAMES_OF_RANK[r][axis]] = tiles
        out = max(r, n)
        if all(v == 1 for v in rep.values()) and out == r:
            return x
        dims = _ncnn_dims(x.shape)
        check_elements([dims[k] * rep[k] for k in "cdhw"], "Tile output")
        x4 = x.reshape(dims["c"], dims["d"], dims["h"], dims["w"])
        y = _tile(x4, np.array([rep["c"], rep["d"], rep["h"], rep["w"]], np.int64))
        keep = {1: (3,), 2: (2, 3), 3: (0, 2, 3), 4: (0, 1, 2, 3)}[out]
        return y.reshape(tuple(y.shape[i] for i in keep))

    return run


_NAMES_OF_RANK = {1: "w", 2: "hw", 3: "chw", 4: "cdhw"}


@layer("Flip", params=[P(0, "axes", (), "ints")], kernels=(shapes.slice_,))
def flip(p, w):
    """y = the bottom reversed along ``axes`` (negative from the back); a 1d bottom flips along w."""
    axes = list(p.axes)
    if len(axes) > 4:
        raise ValueError(f"Flip: {len(axes)} axes, at most 4")

    def run(x):
        r = _rank(x, "Flip")
        if not axes:
            return x
        if r == 1:
            sel = [0]
        else:
            sel = sorted({a + r if a < 0 else a for a in axes})
            if any(not 0 <= a < r for a in sel):
                raise KernelError(f"Flip: axes {axes} out of range for a {r}d bottom")
        n = len(sel)
        return _slice(
            x,
            np.full(n, -1, np.int64),
            np.full(n, _INT_MIN, np.int64),
            np.array(sel, np.int64),
            np.full(n, -1, np.int64),
        )

    return run


# -------------------------------------------------------------------- PixelShuffle / Reorg / Shuffle
@layer("PixelShuffle", params=[P(0, "upscale_factor", 1), P(1, "mode", 0)], kernels=(shape_pad.depth_to_space,))
def pixel_shuffle(p, w):
    """depth_to_space on a 3d bottom: (c, h, w) -> (c / r^2, h r, w r); input channel of output (oc, sh, sw)
    is oc r^2 + sh r + sw (mode 0) or (sh r + sw) oc_count + oc (mode 1)."""
    r_, mode = p.upscale_factor, p.mode
    if r_ < 1:
        raise ValueError(f"PixelShuffle upscale_factor {r_} must be >= 1")
    kmode = "CRD" if mode == 0 else "DCR"

    def run(x):
        _rank(x, "PixelShuffle", (3,))
        oc = x.shape[0] // (r_ * r_)
        if oc == 0:
            raise KernelError(f"PixelShuffle: {x.shape[0]} channels, fewer than upscale_factor^2 = {r_ * r_}")
        if r_ == 1:
            return x.copy()
        return _d2s(x[None, : oc * r_ * r_], blocksize=r_, mode=kmode)[0]

    return run


@layer("Reorg", params=[P(0, "stride", 1), P(1, "mode", 0)], kernels=(shape_pad.space_to_depth,))
def reorg(p, w):
    """space_to_depth on a 3d bottom: (c, h, w) -> (c s^2, h / s, w / s); output channel of input
    (c, sh, sw) is c s^2 + sh s + sw (mode 0) or (sh s + sw) c_count + c (mode 1)."""
    s, mode = p.stride, p.mode
    if s < 1:
        raise ValueError(f"Reorg stride {s} must be >= 1")
    kmode = "CRD" if mode == 0 else "DCR"

    def run(x):
        _rank(x, "Reorg", (3,))
        oh, ow = x.shape[1] // s, x.shape[2] // s
        if oh == 0 or ow == 0:
            raise KernelError(f"Reorg: input {x.shape} is smaller than the stride {s}")
        if s == 1:
            return x.copy()
        return _s2d(x[None, :, : oh * s, : ow * s], blocksize=s, mode=kmode)[0]

    return run


@layer("ShuffleChannel", params=[P(0, "group", 1), P(1, "reverse", 0)], kernels=(shapes.transpose,))
def shuffle_channel(p, w):
    """Channel shuffle: channels viewed as (g, c / g) are transposed to (c / g, g), with g = group, or
    g = c / group when ``reverse``."""
    group, reverse = p.group, p.reverse
    if group < 1:
        raise ValueError(f"ShuffleChannel group {group} must be >= 1")

    def run(x):
        r = _rank(x, "ShuffleChannel")
        c = x.shape[0] if r >= 3 else 1
        if c % group:
            raise KernelError(f"ShuffleChannel: {c} channels are not divisible by group {group}")
        g = c // group if reverse else group
        if g == 1 or g == c:
            return x.copy()
        # the channel axis split and merged by numpy's own views (a C-contiguous blob: no copy), the data moved once
        # by the Transpose kernel: the Reshape kernel's shape-tensor checks cost ~8 us a call (ShuffleNetV2 has 16)
        v = np.ascontiguousarray(x).reshape(g, c // g, -1)
        return _transpose(v, perm=[1, 0, 2]).reshape(x.shape)

    return run


# ------------------------------------------------------------------------------- CopyTo / DeepCopy
@layer(
    "CopyTo",
    params=[
        P(0, "woffset", 0),
        P(1, "hoffset", 0),
        P(13, "doffset", 0),
        P(2, "coffset", 0),
        P(9, "starts", (), "ints"),
        P(11, "axes", (), "ints"),
    ],
    inputs=2,
    ncnn_only="writes a blob into a region of another: ONNX has no slice assignment (ScatterND would need every index)",
)
def copy_to(p, w):
    """y = self (bottom 0) with src (bottom 1, same rank) written at the offsets: w/h/d/c offsets, or
    numpy-style ``starts`` (+ ``axes``; negative from the back, -233 = 0). A src of self's shape is y."""
    starts, axes = list(p.starts), list(p.axes)
    fixed = dict(w=p.woffset, h=p.hoffset, d=p.doffset, c=p.coffset)

    def run(x, src):
        r = _rank(x, "CopyTo")
        if src.shape == x.shape:
            return src.copy()
        if src.ndim != r:
            raise KernelError(f"CopyTo: src of shape {src.shape} has another rank than self {x.shape}")
        amap = _AXIS_OF[r]
        if starts:
            ax = [a + r if a < 0 else a for a in axes] if axes else list(range(r))
            if len(starts) < len(ax):
                raise KernelError(f"CopyTo: {len(ax)} axes but {len(starts)} starts")
            offs = dict.fromkeys(amap, 0)
            names = {v: k for k, v in amap.items()}
            for i, a in enumerate(ax):
                if r == 1:
                    a = 0
                if a in names:
                    s = 0 if starts[i] == -233 else starts[i]
                    offs[names[a]] = s if s >= 0 else x.shape[a] + s
        else:
            offs = {k: fixed[k] for k in amap}
        idx = [slice(None)] * r
        for name, a in amap.items():
            o, k = offs[name], src.shape[a]
            if o < 0 or o + k > x.shape[a]:
                raise KernelError(f"CopyTo: src {src.shape} at {name} offset {o} does not fit self {x.shape}")
            idx[a] = slice(o, o + k)
        y = x.copy()
        y[tuple(idx)] = src
        return y

    return run


@layer("DeepCopy", ncnn_only="graph plumbing, no computation: a copy of its blob (Identity does not copy)")
def deep_copy(p, w):
    """y = a copy of the bottom."""
    return lambda x: np.array(x, copy=True)
