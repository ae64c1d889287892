"""Param spaces of the elementwise and arithmetic layers (activations, UnaryOp, BinaryOp, Eltwise, Scale,
Bias, BatchNorm, Cast, Packing, MemoryData, Diag, plumbing) for the param-space fuzzer (fuzz_engine.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .fuzz_engine import FLT_MAX, Ctx, Space

ANY = (1, 2, 3, 4)


def axis_of(ctx: Ctx) -> int:
    return int(ctx.rng.integers(-ctx.rank, ctx.rank))


def wide(lo: float, hi: float):
    def inputs(ctx: Ctx) -> list[np.ndarray]:
        return [ctx.f32(*ctx.shape, lo=lo, hi=hi)]

    return inputs


SIMPLE = ["AbsVal", "BNLL", "Erf", "Mish", "Sigmoid", "Softplus", "Swish", "TanH", "DeepCopy", "Flatten"]
SPACES: dict[str, Space] = {name: Space(inputs=wide(-8, 8)) for name in SIMPLE}
SPACES["Split"] = Space(n_out=lambda ctx: int(ctx.rng.integers(1, 4)))
SPACES["Noop"] = Space(  # any number of bottoms, each passed through as a top
    inputs=lambda ctx: [ctx.f32(*ctx.shape) for _ in range(int(ctx.rng.integers(1, 4)))],
    n_out=lambda ctx: len(ctx.inputs),
)
SPACES["Input"] = Space(choices={"w": [0, 3], "h": [0, 3], "d": [0, 2], "c": [0, 3]})

SPACES["CELU"] = Space(choices={"alpha": [0.0, 0.5, 1.0, 2.0, 0.1]}, inputs=wide(-4, 4))
SPACES["ELU"] = Space(choices={"alpha": [0.05, 0.1, 1.0, 2.0]}, inputs=wide(-4, 4))
SPACES["SELU"] = Space(choices={"alpha": [1.67326324, 0.5, 2.0], "lambda_": [1.050700987, 0.5, 2.0]})
SPACES["Clip"] = Space(choices={"min": [-FLT_MAX, -1.0, 0.0, -0.5, 1.0], "max": [FLT_MAX, 1.5, 0.0, 6.0, -1.0]})
SPACES["HardSigmoid"] = Space(choices={"alpha": [0.2, 1 / 6, 0.5], "beta": [0.5, 0.2, 0.8]}, inputs=wide(-5, 5))
SPACES["HardSwish"] = Space(choices={"alpha": [0.2, 1 / 6, 0.5], "beta": [0.5, 0.2, 0.8]}, inputs=wide(-5, 5))
SPACES["Shrink"] = Space(choices={"bias": [0.0, 0.5, 1.0], "lambd": [0.5, 0.0, 1.5]})
SPACES["Threshold"] = Space(choices={"threshold": [0.0, 0.5, -1.0]})
SPACES["Dropout"] = Space(choices={"scale": [1.0, 0.5, 2.0]})
SPACES["GELU"] = Space(choices={"fast_gelu": [0, 1]}, inputs=wide(-5, 5))
SPACES["ReLU"] = Space(choices={"slope": [0.0, 0.1, -0.2, 1.0]})
SPACES["Exp"] = Space(choices={"base": [-1.0, 2.0, 10.0, 0.5], "scale": [1.0, 0.5, -1.0, 0.0], "shift": [0.0, 0.5]})
SPACES["Log"] = Space(
    choices={"base": [-1.0, 2.0, 10.0, 3.5], "scale": [1.0, 0.5, 2.0], "shift": [0.0, 0.5]}, inputs=wide(0.05, 5)
)


def _power_inputs(ctx: Ctx) -> list[np.ndarray]:
    # a fractional power needs a positive base: scale * x + shift > 0
    x = ctx.f32(*ctx.shape, lo=0.1, hi=3.0)
    if float(ctx.get("scale")) < 0:
        x = -x
    return [x]


SPACES["Power"] = Space(
    choices={"power": [1.0, 2.0, 3.0, 0.5, -1.0, 0.0], "scale": [1.0, 0.5, -1.0], "shift": [0.0, 0.5]},
    inputs=_power_inputs,
)


def _glu_fix(ctx: Ctx) -> None:
    ax = int(ctx.get("axis"))
    if ctx.rank == 1:
        ax = 0
    if not -ctx.rank <= ax < ctx.rank:
        ctx.params["axis"] = ax = 0
    ctx.shape[ax] = ctx.choice([2, 4, 6, 5, 7])


SPACES["GLU"] = Space(choices={"axis": [axis_of, 0, -1]}, fix=_glu_fix)


def _prelu_fix(ctx: Ctx) -> None:
    ctx.params["num_slope"] = ctx.choice([1, ctx.shape[0]])


SPACES["PReLU"] = Space(choices={"num_slope": [None]}, fix=_prelu_fix, omit=0.0)


def _softmax_fix(ctx: Ctx) -> None:
    if not -ctx.rank <= int(ctx.get("axis")) < ctx.rank and ctx.rank > 1:
        ctx.params["axis"] = 0


SPACES["Softmax"] = Space(choices={"axis": [axis_of, 0], "fixbug0": [1, 1, 0]}, fix=_softmax_fix, inputs=wide(-10, 10))

# ----------------------------------------------------------------------------- UnaryOp
UNARY_DOMAIN = {5: (0.01, 9), 6: (0.05, 9), 8: (0.01, 9), 17: (0.01, 9), 12: (-0.99, 0.99), 13: (-0.99, 0.99),
                26: (-0.95, 0.95), 25: (1.0, 6), 27: (-0.9, 6), 11: (-1.4, 1.4), 7: (-6, 6), 21: (-6, 6),
                22: (-5, 5), 24: (-5, 5)}  # fmt: skip


def _unary_inputs(ctx: Ctx) -> list[np.ndarray]:
    op = int(ctx.get("op_type"))
    lo, hi = UNARY_DOMAIN.get(op, (-5, 5))
    x = ctx.f32(*ctx.shape, lo=lo, hi=hi)
    if op == 15:
        x = np.where(np.abs(x) < 0.05, np.float32(0.5), x)
    if op in (2, 3, 18, 19, 20):  # exact halves and integers
        flat = x.reshape(-1)
        k = flat.size // 3
        flat[:k] = np.round(flat[:k] * 2) / 2
    return [x]


SPACES["UnaryOp"] = Space(choices={"op_type": list(range(28))}, inputs=_unary_inputs, omit=0.05)

# ----------------------------------------------------------------------------- BinaryOp
_DIVIDING = {3, 8, 12, 13, 15, 16, 17, 18}


def _ncnn_pair(ctx: Ctx) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A shape pair from ncnn's broadcasting table (binaryop-broadcasting.md), numpy order; sometimes with
    a shorter outer axis, which ncnn reads at min(i, size - 1)."""
    rng = ctx.rng
    a = tuple(ctx.shape)
    r = len(a)
    form = int(rng.integers(0, 6))
    if form == 0:
        b = a
    elif form == 1:  # scalar-like
        b = (1,) * int(rng.integers(1, r + 1))
    elif form == 2:  # explicit broadcast: some axes 1
        b = tuple(1 if rng.random() < 0.5 else v for v in a)
    elif form == 3 and r >= 2:  # implicit, inner axes: numpy's trailing dims of a
        b = a[int(rng.integers(1, r)) :]
    elif form == 4 and r >= 2:  # 1d for the outer axis
        b = (a[0],)
    else:  # an outer axis shorter (not 1): ncnn repeats the last row / channel
        b = list(a)
        if r >= 2:
            i = int(rng.integers(0, r - 1))
            b[i] = max(1, a[i] - 1)
        b = tuple(b)
    return (b, a) if rng.random() < 0.4 else (a, b)


def _binary_inputs(ctx: Ctx) -> list[np.ndarray]:
    op = int(ctx.get("op_type"))
    with_scalar = int(ctx.get("with_scalar"))
    sa, sb = (tuple(ctx.shape), (1,)) if with_scalar else _ncnn_pair(ctx)
    a = ctx.f32(*sa, lo=-3, hi=3)
    b = ctx.f32(*sb, lo=-3, hi=3)
    if op in (6, 9):  # pow / rpow: a positive base, moderate exponents
        base, expo = (a, b) if op == 6 else (b, a)
        np.abs(base, out=base)
        base += np.float32(0.25)
        expo *= np.float32(0.7)
    if op in _DIVIDING:
        for v in (a, b):
            v[np.abs(v) < 0.2] = np.float32(0.75)
    if with_scalar:
        ctx.params["b"] = float(b.reshape(-1)[0])
        return [a]
    return [a, b]


SPACES["BinaryOp"] = Space(
    choices={"op_type": list(range(19)), "with_scalar": [0, 1], "b": [None]}, inputs=_binary_inputs, omit=0.1
)


def _eltwise_inputs(ctx: Ctx) -> list[np.ndarray]:
    n = int(ctx.rng.integers(2, 4))
    if ctx.has("coeffs"):
        ctx.params["coeffs"] = [float(ctx.choice([1.0, -0.5, 2.0, 0.25])) for _ in range(n)]
    return [ctx.f32(*ctx.shape) for _ in range(n)]


SPACES["Eltwise"] = Space(choices={"op_type": [0, 1, 2], "coeffs": [[1.0]]}, inputs=_eltwise_inputs)

# ----------------------------------------------------------------------------- per-channel data


def _scale_fix(ctx: Ctx) -> None:
    c = ctx.shape[0]
    total = int(np.prod(ctx.shape))
    form = ctx.choice(["weights", "weights", "blob", "blob_whole"])
    if form == "weights":  # scale data for axis 0, or longer (the whole blob): ncnn reads the first entries
        ctx.params["scale_data_size"] = ctx.choice([c, c, total])
    else:  # a second bottom: 1d per channel or longer, or a 2d blob read flat (h * w); a 3d / 4d blob
        # would be read across ncnn's channel padding (cstep), which is not data
        ctx.params["scale_data_size"] = -233
        ctx.params.pop("bias_term", None)
        if form == "blob":
            shape = [c]
        else:
            shape = ctx.choice([[total], [c, max(1, total // c)], list(ctx.shape[-2:]) if ctx.rank >= 2 else [total]])
            if int(np.prod(shape)) < c:
                shape = [c]
        ctx.extra["scale_blob"] = ctx.f32(*shape)


SPACES["Scale"] = Space(
    choices={"scale_data_size": [None], "bias_term": [0, 1]},
    fix=_scale_fix,
    inputs=lambda ctx: [ctx.f32(*ctx.shape)] + ([ctx.extra["scale_blob"]] if "scale_blob" in ctx.extra else []),
)


def _bias_fix(ctx: Ctx) -> None:
    ctx.params["bias_data_size"] = ctx.shape[0] if ctx.rank >= 3 else ctx.choice([1, ctx.shape[0]])


SPACES["Bias"] = Space(choices={"bias_data_size": [None]}, fix=_bias_fix, omit=0.0)


def _bn_fix(ctx: Ctx) -> None:
    ctx.params["channels"] = ctx.shape[0]


SPACES["BatchNorm"] = Space(choices={"channels": [None], "eps": [0.0, 1e-5, 1e-3]}, fix=_bn_fix)

# ----------------------------------------------------------------------------- Cast, Packing, MemoryData, Diag
_CAST_PAIRS = [(1, 2), (1, 4), (2, 1), (4, 1), (3, 1), (1, 1), (0, 0)]  # type_from 0 with a type_to: ncnn fills nothing


def _payload(values: np.ndarray) -> np.ndarray:
    """A float32 blob whose channels start with the bytes of ``values``: how the wheel receives a non-fp32 Mat."""
    p = np.zeros(values.shape, np.float32)
    if values.ndim <= 2:
        p.reshape(-1).view(np.uint8)[: values.nbytes] = values.reshape(-1).view(np.uint8)
    else:
        for q in range(values.shape[0]):
            p[q].reshape(-1).view(np.uint8)[: values[q].nbytes] = values[q].reshape(-1).view(np.uint8)
    return p


def _cast_fix(ctx: Ctx) -> None:
    tf, tt = ctx.choice(_CAST_PAIRS)
    ctx.params["type_from"], ctx.params["type_to"] = tf, tt
    x = (ctx.rng.standard_normal(ctx.shape) * ctx.choice([1.0, 100.0, 1e4, 1e5])).astype(np.float32)
    if tf == 2:
        xo = x.astype(np.float16)
        ctx.extra["wheel_inputs"] = [_payload(xo)]
    elif tf == 4:
        xo = x.astype(ml_dtypes.bfloat16)
        ctx.extra["wheel_inputs"] = [_payload(xo.view(np.uint16))]
    elif tf == 3:
        xo = ctx.rng.integers(-128, 128, ctx.shape).astype(np.int8)
        ctx.extra["wheel_inputs"] = [_payload(xo)]
    else:
        xo = x
    ctx.extra["x"] = xo


def _cast_compare(ctx: Ctx, ours: list, theirs: list) -> None:
    (y,), (t,) = ours, theirs
    assert y.shape == t.shape, f"Cast {ctx.params}: shape {y.shape} vs {t.shape}"
    if y.dtype in (np.float16, ml_dtypes.bfloat16):
        ya, ta = y.astype(np.float32), np.asarray(t).view(y.dtype).astype(np.float32)
        # ncnn's scalar tail (beyond whole SIMD groups, CPU-dependent) flushes fp16 subnormals to zero
        ok = (ya == ta) | (np.isnan(ya) & np.isnan(ta)) | ((np.abs(ya) < 6.2e-5) & (ta == 0))
        assert ok.all(), f"Cast {ctx.params}: {ya[~ok][:4]} vs {ta[~ok][:4]}"
    else:
        np.testing.assert_array_equal(
            np.asarray(y, np.float32), np.asarray(t, np.float32), err_msg=f"Cast {ctx.params}"
        )


SPACES["Cast"] = Space(
    choices={"type_from": [None], "type_to": [None]},
    fix=_cast_fix,
    inputs=lambda ctx: [ctx.extra["x"]],
    compare=_cast_compare,
)


def _packing_fix(ctx: Ctx) -> None:
    if ctx.rank >= 2 and ctx.rng.random() < 0.5:
        ctx.shape[0] = ctx.choice([4, 8, 12, 16])


def _packing_compare(ctx: Ctx, ours: list, theirs: list) -> None:
    (y,), (t,) = ours, theirs
    if isinstance(t, tuple):  # the wheel packed the blob; unpacked it is the input again
        t = t[0]
    assert y.shape == t.shape, f"Packing {ctx.params}: {y.shape} vs the wheel's {t.shape}"
    n = ctx.inputs[0].shape[0]
    np.testing.assert_allclose(y[:n], t[:n], err_msg=f"Packing {ctx.params}")  # ncnn leaves the padding unset


SPACES["Packing"] = Space(
    choices={
        "out_elempack": [1, 4, 8, 16],
        "use_padding": [0, 1],
        # read by ncnn's Vulkan path only (packing.cpp loads the cast types and ignores them on the CPU)
        "cast_type_from": [0, 1, 2, 3],
        "cast_type_to": [0, 1, 2, 3],
        "storage_type_from": [0, 1, 2],
        "storage_type_to": [0, 1, 2],
    },
    fix=_packing_fix,
    compare=_packing_compare,
    unpack=True,
)


def _memorydata_fix(ctx: Ctx) -> None:
    dims = ctx.shape
    names = {1: ["w"], 2: ["h", "w"], 3: ["c", "h", "w"], 4: ["c", "d", "h", "w"]}[ctx.rank]
    for n in ("w", "h", "d", "c"):
        ctx.params.pop(n, None)
    for n, v in zip(names, dims):
        ctx.params[n] = v


SPACES["MemoryData"] = Space(
    choices={"w": [None], "h": [None], "d": [None], "c": [None], "load_type": [1]},
    fix=_memorydata_fix,
    inputs=lambda ctx: [],
)


def _diag_fix(ctx: Ctx) -> None:
    d = int(ctx.get("diagonal"))
    if ctx.rank == 2 and not -ctx.shape[0] < d < ctx.shape[1]:
        ctx.params["diagonal"] = 0


SPACES["Diag"] = Space(ranks=(1, 2), choices={"diagonal": [0, 1, -1, 2, -2]}, fix=_diag_fix)
