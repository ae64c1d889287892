"""Param spaces of the shape / data-movement layers (Concat, Slice, Crop, Reshape, Permute, Squeeze,
ExpandDims, Tile, Flip, PixelShuffle, Reorg, ShuffleChannel, CopyTo, Padding) for the fuzzer."""

from __future__ import annotations

import numpy as np

from .fuzz_engine import Ctx, Space

_NAMES = {1: "w", 2: "hw", 3: "chw", 4: "cdhw"}  # ncnn dim names of a numpy shape, outermost first


def _axis(ctx: Ctx, ax: int) -> int:
    """numpy axis ax, sometimes written negative."""
    return ax - ctx.rank if ctx.rng.random() < 0.35 else ax


# ----------------------------------------------------------------------------- Concat
def _concat_fix(ctx: Ctx) -> None:
    ax = int(ctx.rng.integers(0, ctx.rank))
    if ctx.has("axis"):
        ctx.params["axis"] = _axis(ctx, ax)
    else:
        ax = 0
    xs = []
    for _ in range(int(ctx.rng.integers(1, 4))):
        s = list(ctx.shape)
        s[ax] = int(ctx.rng.integers(1, 5))
        xs.append(ctx.f32(*s))
    ctx.extra["xs"] = xs


SPACES: dict[str, Space] = {}
SPACES["Concat"] = Space(choices={"axis": [0]}, fix=_concat_fix, inputs=lambda ctx: ctx.extra["xs"])


# ----------------------------------------------------------------------------- Slice
def _slice_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    ctx.shape = [int(v) for v in rng.integers(2, 8, ctx.rank)]
    ax = int(rng.integers(0, ctx.rank))
    ctx.params["axis"] = _axis(ctx, ax) if ctx.rank > 1 else ctx.choice([0, 0, 1, -1])  # 1d: always w
    if ctx.rank == 1:
        ax = 0
    dim = ctx.shape[ax]
    n = int(rng.integers(1, min(dim, 4) + 1))
    ctx.params.pop("slices", None)
    ctx.params.pop("indices", None)
    if rng.random() < 0.4:  # cut points, negative from the end
        cuts = sorted(rng.choice(np.arange(1, dim), n - 1, replace=False).tolist()) if n > 1 else []
        ctx.params["indices"] = [c - dim if rng.random() < 0.4 else c for c in cuts] or [dim]
    else:  # sizes, -233 = an equal share of the rest; the parts cover the dim (the wheel's x86 Slice
        # misplaces parts that leave a remainder along d or h of a 4d blob)
        sizes, left = [], dim
        for i in range(n):
            if i == n - 1:
                sizes.append(-233 if rng.random() < 0.4 else left)
                break
            if rng.random() < 0.4:
                sizes.append(-233)
                left -= left // (n - i)
            else:
                s = int(rng.integers(1, left - (n - i - 1) + 1))
                sizes.append(s)
                left -= s
        ctx.params["slices"] = sizes
    ctx.extra["n_out"] = n


SPACES["Slice"] = Space(
    choices={"slices": [None], "axis": [None], "indices": [None]}, fix=_slice_fix, n_out=lambda ctx: ctx.extra["n_out"]
)


# ----------------------------------------------------------------------------- Crop
_CROP_IDS = dict(w=("woffset", "outw", "woffset2"), h=("hoffset", "outh", "hoffset2"),
                 d=("doffset", "outd", "doffset2"), c=("coffset", "outc", "coffset2"))  # fmt: skip


def _crop_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    ctx.shape = [int(v) for v in rng.integers(2, 8, ctx.rank)]
    ctx.params.clear()
    form = ctx.choice(["offsets", "offsets", "numpy", "numpy", "ref", "ref_int", "expr", "expr"])
    names = _NAMES[ctx.rank]
    if form == "expr":  # starts_expr / ends_expr / axes_expr over bottom 0 (and a second bottom)
        axes = sorted(rng.choice(ctx.rank, int(rng.integers(1, ctx.rank + 1)), replace=False).tolist())
        ref = None
        if rng.random() < 0.3:
            ref = [int(rng.integers(1, n + 1)) for n in ctx.shape]
            ctx.extra["ref"] = ctx.f32(*ref)
        st, en = [], []
        for a in axes:
            n, d = ctx.shape[a], names[a]
            starts = [(0, "0"), (1, "1"), (n // 2, f"//(0{d},2)")]
            s_val, s_txt = ctx.choice([t for t in starts if t[0] < n])
            ends = [(n, f"0{d}"), (n - 1, f"-(0{d},1)"), (n - 1, "-1")]
            if ref is not None:
                ends.append((ref[a], f"1{d}"))
            ends = [t for t in ends if t[0] > s_val]
            e_val, e_txt = ctx.choice(ends) if ends else (n, f"0{d}")
            st.append(s_txt)
            en.append(e_txt)
        ctx.params["starts_expr"], ctx.params["ends_expr"] = ",".join(st), ",".join(en)
        ctx.params["axes_expr"] = ",".join(str(a - ctx.rank if rng.random() < 0.3 else a) for a in axes)
        return
    if form == "offsets":  # offsets and out sizes (-233: to the end, minus offset2); an out size past the
        # end is clamped by ncnn (min(out, size - offset - offset2))
        for nm, n in zip(names, ctx.shape):
            o, out, o2 = _CROP_IDS[nm]
            off = int(rng.integers(0, n))
            ctx.params[o] = off
            r = rng.random()
            if r < 0.3:
                ctx.params[out] = int(rng.integers(1, n - off + 1))
            elif r < 0.45:
                ctx.params[out] = n + int(rng.integers(1, 4))  # beyond the input: clamped
            elif r < 0.7:
                ctx.params[out] = -233
                ctx.params[o2] = int(rng.integers(0, n - off))
            else:
                ctx.params[out] = -233
        for nm in "cdhw":  # the out sizes of dims the blob lacks: -233 keeps the form
            ctx.params.setdefault(_CROP_IDS[nm][1], -233)
    elif form == "numpy":  # starts / ends / axes: -233 open, negative from the back, ends clamp
        axes = sorted(rng.choice(ctx.rank, int(rng.integers(1, ctx.rank + 1)), replace=False).tolist())
        starts, ends = [], []
        for a in axes:
            n = ctx.shape[a]
            s = int(rng.integers(0, n))
            e = int(rng.integers(s + 1, n + 1))
            starts.append(-233 if (s == 0 and rng.random() < 0.5) else (s - n if rng.random() < 0.3 else s))
            if e == n and rng.random() < 0.3:
                ends.append(ctx.choice([-233, 0, n + int(rng.integers(1, 5))]))  # open / whole / clamped
            else:
                ends.append(e - n if rng.random() < 0.3 else e)
        ctx.params["starts"], ctx.params["ends"] = starts, ends
        if rng.random() < 0.1 and all(e > 0 for e in ends):
            # ends written as float words (a .param.bin with float elements): ncnn reads the words as ints,
            # far past every dim, and clamps them to the dim
            ctx.params["ends"] = np.asarray(ends, np.float32)
        if rng.random() < 0.7 or len(axes) != ctx.rank:
            ctx.params["axes"] = [a - ctx.rank if rng.random() < 0.3 else a for a in axes]
    elif form == "ref":  # the size of a second bottom, at the offsets
        rshape = [int(rng.integers(1, n + 1)) for n in ctx.shape]
        for nm, n, k in zip(names, ctx.shape, rshape):
            if nm != "c" or rng.random() < 0.5:
                ctx.params[_CROP_IDS[nm][0]] = int(rng.integers(0, n - k + 1))
        if ctx.rank >= 3 and rng.random() < 0.3:
            rshape = rshape[1:]  # a reference of lower rank keeps the channels
            ctx.params.pop("coffset", None)
        ctx.extra["ref"] = ctx.f32(*rshape)
    else:  # woffset = -233: the second bottom holds the window as int32 words
        offs, outs = [], []
        for n in ctx.shape:
            k = int(rng.integers(1, n + 1))
            offs.append(int(rng.integers(0, n - k + 1)))
            outs.append(k)
        ctx.params["woffset"] = -233
        r = ctx.rank
        if r == 1:
            words = [offs[0], 0, 0, outs[0], 1, 1]
        elif r == 2:
            words = [offs[1], offs[0], 0, outs[1], outs[0], 1]
        elif r == 3:
            words = [offs[2], offs[1], offs[0], outs[2], outs[1], outs[0]]
        else:
            words = [offs[3], offs[2], offs[1], offs[0], outs[3], outs[2], outs[1], outs[0]]
        ctx.extra["ref"] = np.array(words, np.int32).view(np.float32)


SPACES["Crop"] = Space(
    choices={},
    fix=_crop_fix,
    inputs=lambda ctx: [ctx.f32(*ctx.shape)] + ([ctx.extra["ref"]] if "ref" in ctx.extra else []),
)


# ----------------------------------------------------------------------------- Reshape
def _reshape_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    ctx.shape = [int(v) for v in rng.integers(1, 6, ctx.rank)]
    total = int(np.prod(ctx.shape))
    ctx.params.clear()
    form = ctx.choice(["whc", "whc", "expr", "batch"])
    names = {1: ["w"], 2: ["w", "h"], 3: ["w", "h", "c"], 4: ["w", "h", "d", "c"]}
    if form == "whc":
        r = int(rng.integers(1, 5))
        dims = _factor(rng, total, r)  # outermost first
        vals = list(reversed(dims))  # w, h, (d,) c
        keys = names[r]
        bshape = list(reversed(ctx.shape))  # the bottom's w, h, ...
        for i, k in enumerate(keys):
            v = vals[i]
            if rng.random() < 0.25 and i < len(bshape) and r == ctx.rank and bshape[i] == v:
                v = 0  # copy the bottom's dim
            ctx.params[k] = v
        if rng.random() < 0.5:
            k = keys[int(rng.integers(len(keys)))]
            if ctx.params[k] != 0:
                ctx.params[k] = -1
        if r < 4:  # the first unset of w, h, c, d ends the shape
            ctx.params[{1: "h", 2: "c", 3: "d"}[r]] = -233
        if rng.random() < 0.1:
            ctx.params["permute"] = 1  # legacy flag, ignored
    elif form == "expr":
        r = int(rng.integers(1, 5))
        dims = list(reversed(_factor(rng, total, r)))
        items = [str(v) for v in dims]
        if rng.random() < 0.5:
            items[int(rng.integers(r))] = "-1"
        ctx.params["shape_expr"] = ",".join(items)
    else:  # batch axes (pnnx after a global pooling): the batch is a dim of 1
        r = ctx.rank
        ia = int(rng.integers(0, r + 1))
        dims = _factor(rng, total, int(rng.integers(1, 4)))
        oa = int(rng.integers(0, len(dims) + 1))
        target = dims[:oa] + [1] + dims[oa:]  # outermost first, with the batch of 1
        items = [str(v) for v in reversed(target)]
        if rng.random() < 0.5:
            items[len(items) - 1 - oa] = "0n"
        ctx.params["shape_expr"] = ",".join(items)
        ctx.params["input_batch_axis"] = ia if rng.random() < 0.7 else ia - r - 1
        ctx.params["output_batch_axis"] = oa if rng.random() < 0.7 else oa - len(target)


def _factor(rng, total: int, r: int) -> list[int]:
    """r dims (outermost first) whose product is total."""
    dims = [1] * r
    left = total
    for i in range(r - 1):
        divs = [d for d in range(1, left + 1) if left % d == 0]
        d = int(divs[int(rng.integers(len(divs)))])
        dims[i] = d
        left //= d
    dims[-1] = left
    return dims


SPACES["Reshape"] = Space(choices={}, fix=_reshape_fix)


# ----------------------------------------------------------------------------- Permute, Squeeze, ...
def _permute_fix(ctx: Ctx) -> None:
    n = {1: 1, 2: 2, 3: 6, 4: 24}[ctx.rank]
    ctx.params["order_type"] = int(ctx.rng.integers(0, n))


SPACES["Permute"] = Space(choices={"order_type": [0]}, fix=_permute_fix)


def _squeeze_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    ctx.shape = [1 if rng.random() < 0.5 else int(rng.integers(2, 5)) for _ in range(ctx.rank)]
    if ctx.has("axes"):
        ax = sorted(rng.choice(ctx.rank, int(rng.integers(1, ctx.rank + 1)), replace=False).tolist())
        ax = [a for a in ax if ctx.shape[a] == 1] or [a for a in range(ctx.rank) if ctx.shape[a] == 1][:1]
        if ax:
            ctx.params["axes"] = [_axis(ctx, a) for a in ax]
        else:
            ctx.params.pop("axes")


SPACES["Squeeze"] = Space(
    choices={"squeeze_w": [0, 1], "squeeze_h": [0, 1], "squeeze_d": [0, 1], "squeeze_c": [0, 1], "axes": [[0]]},
    fix=_squeeze_fix,
)


def _expanddims_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    n = int(rng.integers(1, 4 - ctx.rank + 1)) if ctx.rank < 4 else 0
    out = ctx.rank + n
    axes = sorted(rng.choice(out, n, replace=False).tolist())
    ctx.params["axes"] = [a - out if rng.random() < 0.3 else a for a in axes]


SPACES["ExpandDims"] = Space(ranks=(1, 2, 3), choices={"axes": [[0]]}, fix=_expanddims_fix, omit=0.0)


def _tile_fix(ctx: Ctx) -> None:
    ctx.shape = [int(v) for v in ctx.rng.integers(1, 4, ctx.rank)]
    if ctx.has("repeats"):
        ctx.params["repeats"] = [int(v) for v in ctx.rng.integers(1, 4, int(ctx.rng.integers(1, 5)))]


SPACES["Tile"] = Space(choices={"axis": [0, 1, 2, 3], "tiles": [1, 2, 3], "repeats": [[2]]}, fix=_tile_fix)


def _flip_fix(ctx: Ctx) -> None:
    axes = sorted(ctx.rng.choice(ctx.rank, int(ctx.rng.integers(1, ctx.rank + 1)), replace=False).tolist())
    ctx.params["axes"] = [_axis(ctx, a) for a in axes]


SPACES["Flip"] = Space(choices={"axes": [[0]]}, fix=_flip_fix, omit=0.0)


def _pixelshuffle_fix(ctx: Ctx) -> None:
    f = int(ctx.get("upscale_factor"))
    ctx.shape[0] = f * f * int(ctx.rng.integers(1, 4))


SPACES["PixelShuffle"] = Space(ranks=(3,), choices={"upscale_factor": [1, 2, 3], "mode": [0, 1]}, fix=_pixelshuffle_fix)


def _reorg_fix(ctx: Ctx) -> None:
    s = int(ctx.get("stride"))
    ctx.shape[1] = s * int(ctx.rng.integers(1, 4)) + (int(ctx.rng.integers(0, s)) if ctx.rng.random() < 0.2 else 0)
    ctx.shape[2] = s * int(ctx.rng.integers(1, 4)) + (int(ctx.rng.integers(0, s)) if ctx.rng.random() < 0.2 else 0)


SPACES["Reorg"] = Space(ranks=(3,), choices={"stride": [1, 2, 3], "mode": [0, 1]}, fix=_reorg_fix)


def _shuffle_fix(ctx: Ctx) -> None:
    g = int(ctx.get("group"))
    ctx.shape[0] = g * int(ctx.rng.integers(1, 4))


SPACES["ShuffleChannel"] = Space(ranks=(3, 4), choices={"group": [1, 2, 3, 4], "reverse": [0, 1]}, fix=_shuffle_fix)


def _copyto_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    ctx.params.clear()
    ctx.shape = [int(v) for v in rng.integers(2, 7, ctx.rank)]
    src = [int(rng.integers(1, n + 1)) for n in ctx.shape]
    offs = [int(rng.integers(0, n - s + 1)) for n, s in zip(ctx.shape, src)]
    if rng.random() < 0.4:
        ids = dict(w="woffset", h="hoffset", d="doffset", c="coffset")
        for nm, o in zip(_NAMES[ctx.rank], offs):
            if o or rng.random() < 0.5:
                ctx.params[ids[nm]] = o
    else:
        axes = [a for a in range(ctx.rank) if rng.random() < 0.7] or [0]
        ctx.params["starts"] = [offs[a] - ctx.shape[a] if (offs[a] and rng.random() < 0.3) else offs[a] for a in axes]
        for a in range(ctx.rank):
            if a not in axes:
                src[a] = ctx.shape[a]
        if rng.random() < 0.7 or len(axes) != ctx.rank:
            ctx.params["axes"] = [_axis(ctx, a) for a in axes]
    ctx.extra["src"] = ctx.f32(*src)


SPACES["CopyTo"] = Space(choices={}, fix=_copyto_fix, inputs=lambda ctx: [ctx.f32(*ctx.shape), ctx.extra["src"]])


def _padding_fix(ctx: Ctx) -> None:
    t = int(ctx.get("type"))
    if t != 0:  # replicate / reflect: pads within the blob (reflect needs pad < size)
        for name, ax in (("top", -2), ("bottom", -2), ("left", -1), ("right", -1), ("front", -3), ("behind", -3)):
            if ctx.has(name) and ctx.rank >= -ax:
                ctx.params[name] = min(int(ctx.params[name]), ctx.shape[ax] - 1)
        ctx.params.pop("per_channel_pad_data_size", None)
    elif ctx.has("per_channel_pad_data_size"):
        if ctx.rank >= 3:
            ctx.params["per_channel_pad_data_size"] = ctx.shape[0]
        else:
            ctx.params.pop("per_channel_pad_data_size")
    if ctx.rank < 4:
        for n in ("front", "behind"):
            ctx.params.pop(n, None)


SPACES["Padding"] = Space(
    choices={
        "top": [0, 1, 2],
        "bottom": [0, 1, 2],
        "left": [0, 1, 2],
        "right": [0, 1, 2],
        "type": [0, 1, 2],
        "value": [0.0, 1.5, -2.0],
        "per_channel_pad_data_size": [1],
        "front": [0, 1],
        "behind": [0, 1],
    },
    fix=_padding_fix,
)
