"""Param spaces of the normalization, pooling and reduction layers (LayerNorm, RMSNorm, GroupNorm,
InstanceNorm, LRN, MVN, Normalize, Pooling*, StatisticsPooling, Reduction, CumulativeSum) for the fuzzer."""

from __future__ import annotations

import numpy as np

from .fuzz_engine import Ctx, Space

SPACES: dict[str, Space] = {}


def shifted(scale: float, shift: float):
    def inputs(ctx: Ctx) -> list[np.ndarray]:
        return [(ctx.rng.standard_normal(ctx.shape) * scale + shift).astype(np.float32)]

    return inputs


# ----------------------------------------------------------------------------- normalization
def _affine_size_fix(ctx: Ctx) -> None:
    """affine_size: the innermost 1, 2 or 3 dims (w; w*h; w*h*d or w*h*c)."""
    s = ctx.shape
    k = int(ctx.rng.integers(1, min(ctx.rank, 3) + 1)) if ctx.rank >= 3 else 1
    ctx.params["affine_size"] = int(np.prod(s[-k:]))


SPACES["LayerNorm"] = Space(
    choices={"affine_size": [None], "eps": [1e-3, 1e-5, 0.1, 0.0], "affine": [0, 1]},
    fix=_affine_size_fix,
    inputs=shifted(2.0, 0.5),
)
SPACES["RMSNorm"] = Space(
    choices={"affine_size": [None], "eps": [1e-3, 1e-5, 0.1], "affine": [0, 1]},
    fix=_affine_size_fix,
    inputs=shifted(2.0, 0.5),
)


def _groupnorm_fix(ctx: Ctx) -> None:
    g = int(ctx.get("group"))
    ctx.shape[0] = g * int(ctx.rng.integers(1, 4))
    ctx.params["channels"] = ctx.shape[0]


SPACES["GroupNorm"] = Space(
    choices={"group": [1, 2, 3], "channels": [None], "eps": [1e-3, 1e-5], "affine": [0, 1]},
    fix=_groupnorm_fix,
    inputs=shifted(3.0, -1.0),
)


def _instancenorm_fix(ctx: Ctx) -> None:
    ctx.params["channels"] = ctx.shape[0]


SPACES["InstanceNorm"] = Space(
    ranks=(3, 4),
    choices={"channels": [None], "eps": [1e-3, 1e-5], "affine": [0, 1]},
    fix=_instancenorm_fix,
    inputs=shifted(2.0, 1.0),
)
SPACES["LRN"] = Space(
    ranks=(3,),
    choices={
        "region_type": [0, 1],
        "local_size": [1, 2, 3, 5, 6],
        "alpha": [1.0, 0.1, 2.0],
        "beta": [0.75, 0.3, 1.0],
        "bias": [1.0, 0.5, 2.0],
    },
)
SPACES["MVN"] = Space(
    ranks=(3, 4),
    choices={"normalize_variance": [0, 1], "across_channels": [0, 1], "eps": [1e-4, 1e-2]},
    inputs=shifted(2.0, 0.7),
)


def _normalize_fix(ctx: Ctx) -> None:
    ctx.params["scale_data_size"] = 1 if ctx.get("channel_shared") else ctx.shape[0]


SPACES["Normalize"] = Space(
    ranks=(3, 4),
    choices={
        "across_spatial": [0, 1],
        "channel_shared": [0, 1],
        "eps": [1e-4, 1e-2, 10.0],
        "scale_data_size": [None],
        "across_channel": [0, 1],
        "eps_mode": [0, 1, 2],
    },
    fix=_normalize_fix,
)

# ----------------------------------------------------------------------------- pooling
_AX = ("w", "h", "d")


def pool_space(nd: int) -> Space:
    axes = _AX[:nd]
    k = {"w": "kernel_w", "h": "kernel_h", "d": "kernel_d"}
    s = {"w": "stride_w", "h": "stride_h", "d": "stride_d"}
    pb = {"w": "pad_left", "h": "pad_top", "d": "pad_front"}
    pe = {"w": "pad_right", "h": "pad_bottom", "d": "pad_behind"}
    out = {"w": "out_w", "h": "out_h", "d": "out_d"}
    choices = {
        "pooling_type": [0, 1],
        "global_pooling": [0, 0, 1],
        "pad_mode": [0, 1, 2, 3],
        "avgpool_count_include_pad": [0, 1],
        "adaptive_pooling": [0, 0, 1],
    }
    for a in axes:
        choices[k[a]] = [1, 2, 3]
        choices[s[a]] = [1, 2, 3]
        choices[pb[a]] = [0, 1, 2]
        choices[pe[a]] = [0, 1, 2]
        choices[out[a]] = [None]

    def fix(ctx: Ctx) -> None:
        rng = ctx.rng
        kk = {a: int(ctx.get(k[a])) or 1 for a in axes}
        for a in axes:
            ctx.params[k[a]] = kk[a]
            for n in (pb[a], pe[a]):  # pads smaller than the kernel (a window wholly in the pads is a
                if ctx.has(n):  # corner case the degenerate-window test covers)
                    ctx.params[n] = min(int(ctx.params[n]), kk[a] - 1)
        sp = {a: int(rng.integers(kk[a], kk[a] + 7)) for a in axes}
        ctx.shape = [int(rng.integers(1, 4))] + [sp[a] for a in reversed(axes)]
        if ctx.get("adaptive_pooling"):
            ctx.params.pop("global_pooling", None)
            for a in axes:
                ctx.params[out[a]] = int(rng.integers(1, sp[a] + 2))
            if nd > 1 and rng.random() < 0.25:
                ctx.params[out["h"]] = -233  # keep that axis

    def inputs(ctx: Ctx) -> list[np.ndarray]:
        x = ctx.f32(*ctx.shape)
        if nd < 3 and ctx.shape[0] == 1 and ctx.rng.random() < 0.3:
            x = x[0]  # one rank short: one channel
        return [x]

    return Space(ranks=(nd + 1,), choices=choices, fix=fix, inputs=inputs)


SPACES["Pooling1D"] = pool_space(1)
SPACES["Pooling"] = pool_space(2)
SPACES["Pooling3D"] = pool_space(3)
SPACES["StatisticsPooling"] = Space(ranks=(3,), choices={"include_stddev": [0, 1]})

# ----------------------------------------------------------------------------- reduction


def _reduction_fix(ctx: Ctx) -> None:
    if not ctx.get("reduce_all"):
        n = int(ctx.rng.integers(0, ctx.rank + 1))
        axes = [int(a) for a in ctx.rng.choice(ctx.rank, n, replace=False)]
        ctx.params["axes"] = [a - ctx.rank if ctx.rng.random() < 0.4 else a for a in axes]
        ctx.params["fixbug0"] = 1


def _reduction_inputs(ctx: Ctx) -> list[np.ndarray]:
    op = int(ctx.get("operation"))
    if op == 6:  # prod
        x = ctx.rng.uniform(0.7, 1.3, ctx.shape) * ctx.rng.choice([-1, 1], ctx.shape)
        return [x.astype(np.float32)]
    if op in (9,):  # logsum
        return [ctx.f32(*ctx.shape, lo=0.1, hi=3)]
    return [ctx.f32(*ctx.shape, lo=-3, hi=3)]


SPACES["Reduction"] = Space(
    choices={
        "operation": list(range(11)),
        "reduce_all": [0, 1],
        "coeff": [1.0, -0.5, 2.0],
        "axes": [None],
        "keepdims": [0, 1],
        "fixbug0": [1],
    },
    fix=_reduction_fix,
    inputs=_reduction_inputs,
)


def _cumsum_fix(ctx: Ctx) -> None:
    if ctx.has("axis"):
        ctx.params["axis"] = int(ctx.rng.integers(-ctx.rank, ctx.rank))


SPACES["CumulativeSum"] = Space(choices={"axis": [0]}, fix=_cumsum_fix)
