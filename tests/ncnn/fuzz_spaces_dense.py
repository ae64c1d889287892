"""Param spaces of the dense, recurrent and attention layers (InnerProduct, Gemm, MatMul, Embed, Einsum,
LSTM, GRU, RNN, MultiHeadAttention, SDPA, RotaryEmbed) for the fuzzer."""

from __future__ import annotations

import numpy as np

from .fuzz_engine import Ctx, Space
from .fuzz_spaces_conv import ACTIVATION_CHOICES, fix_activation

SPACES: dict[str, Space] = {}


def _int8_weights(ctx: Ctx, declared: list) -> list[np.ndarray]:
    """Declared weights; int8 storage for the tagged matrices when ctx.extra["int8"] says so, positive
    quantization scales."""
    out = []
    for w in declared:
        n = int(w.size)
        if "scale" in w.name:
            lo, hi = ctx.extra.get("scale_range", (20, 60))
            out.append(ctx.rng.uniform(lo, hi, n).astype(np.float32))
        elif w.tagged and ctx.extra.get("int8") and "bias" not in w.name and w.name != "weight_hr":
            # (LSTM's projection weight_hr stays fp32: ncnn reads it as fp32 in int8 mode too)
            out.append(ctx.rng.integers(-127, 128, n).astype(np.int8))
        else:
            out.append(ctx.rng.uniform(-0.8, 0.8, n).astype(np.float32))
    return out


# ----------------------------------------------------------------------------- InnerProduct
def _ip_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    M = int(ctx.get("num_output")) or 1
    ctx.params["num_output"] = M
    batched = ctx.rank == 2 and rng.random() < 0.5  # a 2d blob whose width is num_input: rows
    K = ctx.shape[-1] if batched else int(np.prod(ctx.shape))
    if ctx.rank == 2 and not batched and rng.random() < 0.5:
        ctx.shape[-1] += 1
        K = int(np.prod(ctx.shape))
    ctx.params["weight_data_size"] = M * K
    if ctx.get("int8_scale_term"):
        ctx.params["int8_scale_term"] = 1
        ctx.extra["int8"] = rng.random() < 0.4
        ctx.extra["tol"] = (1e-3, 1e-3)
    fix_activation(ctx)


SPACES["InnerProduct"] = Space(
    choices={
        "num_output": [1, 2, 5, 8],
        "bias_term": [0, 1],
        "weight_data_size": [None],
        "int8_scale_term": [0, 0, 1],
        **ACTIVATION_CHOICES,
    },
    fix=_ip_fix,
    weights=_int8_weights,
)


# ----------------------------------------------------------------------------- Gemm
def _gemm_fix(ctx: Ctx) -> bool:
    rng = ctx.rng
    M, N, K = (int(v) for v in rng.integers(1, 7, 3))
    ta, tb = int(ctx.get("transA")), int(ctx.get("transB"))
    ca, cb = int(ctx.get("constantA")), int(ctx.get("constantB"))
    for n in ("constantM", "constantN", "constantK", "constantC", "constant_broadcast_type_C"):
        ctx.params.pop(n, None)
    ins, cw = [], {}
    A = ctx.f32(*((K, M) if ta else (M, K)))
    B = ctx.f32(*((N, K) if tb else (K, N)))
    if ca:
        ctx.params.update(constantM=M, constantK=K)
        cw["A"] = A
    else:
        ins.append(A if rng.random() < 0.8 else A.reshape(A.shape[0], 1, A.shape[1]))
    if cb:
        ctx.params.update(constantN=N, constantK=K)
        cw["B"] = B
    else:
        ins.append(B)
    if ca or cb:  # a constant C of each broadcast type, or none
        if rng.random() < 0.5:
            bt = int(rng.integers(-1, 5))
            ctx.params.update(constantC=1, constant_broadcast_type_C=bt, constantM=M, constantN=N)
            shape = {-1: None, 0: (1,), 1: (M,), 2: (M, 1), 3: (M, N), 4: (1, N)}[bt]
            if shape is not None:
                cw["C"] = ctx.f32(*shape)
    elif rng.random() < 0.6:  # a C bottom of each shape
        shape = ctx.choice([(1,), (M,), (M, N), (1, N), (N,), (M, 1)])
        ins.append(ctx.f32(*shape))
    if ctx.get("quantize_term"):
        ctx.params["quantize_term"] = 2
        ctx.extra["tol"] = (1e-3, 1e-3)
        ctx.extra["int8"] = True  # the wheel's x86 Gemm reads constant A / B as int8 in this mode
    ctx.extra["cw"] = cw
    ctx.extra["ins"] = ins
    if ctx.get("output_elemtype") not in (0, 1):
        ctx.params["output_elemtype"] = 1
    return True


def _gemm_weights(ctx: Ctx, declared: list) -> list[np.ndarray]:
    cw = ctx.extra["cw"]
    out = []
    for w in declared:
        n = int(w.size)
        key = {"A_data": "A", "B_data": "B", "C_data": "C"}.get(w.name)
        if key is None:  # the int8 scales
            out.append(ctx.rng.uniform(20, 60, n).astype(np.float32))
        elif ctx.extra.get("int8") and key in "AB":
            out.append(ctx.rng.integers(-127, 128, n).astype(np.int8))
        else:
            a = cw.get(key, np.zeros(n, np.float32)).ravel()
            out.append(a if a.size == n else ctx.f32(n))
    return out


SPACES["Gemm"] = Space(
    choices={
        "alpha": [1.0, 0.5, 2.0, -1.0],
        "beta": [1.0, 0.0, -0.5, 1.5],
        "transA": [0, 1],
        "transB": [0, 1],
        "constantA": [0, 1],
        "constantB": [0, 1],
        "constantC": [None],
        "constantM": [None],
        "constantN": [None],
        "constantK": [None],
        "constant_broadcast_type_C": [None],
        "output_N1M": [0, 1],
        "output_elempack": [0, 1],
        "output_elemtype": [0, 1],
        "output_transpose": [0, 1],
        "quantize_term": [0, 0, 0, 2],
        "constant_TILE_M": [0, 4],
        "constant_TILE_N": [0, 4],
        "constant_TILE_K": [0, 4],
    },
    fix=_gemm_fix,
    inputs=lambda ctx: ctx.extra["ins"],
    weights=_gemm_weights,
)


# ----------------------------------------------------------------------------- MatMul
def _matmul_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    ra, rb = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    tb = int(ctx.get("transB"))
    M, N, K = (int(v) for v in rng.integers(1, 6, 3))
    c, d = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    batch = {1: (), 2: (), 3: (c,), 4: (d, c)}
    a_shape = (K,) if ra == 1 else batch[ra] + (M, K)
    b_shape = (K,) if rb == 1 else batch[rb] + ((N, K) if tb else (K, N))
    if ra == 4 and rb == 3 and rng.random() < 0.3:
        a_shape = (d, 1, M, K)  # broadcast over the outer batch axis
    ctx.extra["ins"] = [ctx.f32(*a_shape), ctx.f32(*b_shape)]


SPACES["MatMul"] = Space(choices={"transB": [0, 1]}, fix=_matmul_fix, inputs=lambda ctx: ctx.extra["ins"])


# ----------------------------------------------------------------------------- Embed
def _embed_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    V, N = int(ctx.get("input_dim")) or 1, int(ctx.get("num_output")) or 1
    ctx.params.update(input_dim=V, num_output=N, weight_data_size=N * V)
    if ctx.get("int8_scale_term"):
        ctx.extra["int8"] = True
        ctx.extra["scale_range"] = (10, 100)
    ids = rng.integers(-2, V + 2, int(rng.integers(1, 12))).astype(np.int32)
    ctx.extra["ids"] = ids
    ctx.extra["wheel_inputs"] = [ids.view(np.float32)]  # the wheel reads the blob's bits as int32


SPACES["Embed"] = Space(
    choices={
        "num_output": [1, 3, 7],
        "input_dim": [1, 5, 9],
        "bias_term": [0, 1],
        "weight_data_size": [None],
        "int8_scale_term": [0, 0, 1],
    },
    fix=_embed_fix,
    inputs=lambda ctx: [ctx.extra["ids"]],
    weights=_int8_weights,
)

# ----------------------------------------------------------------------------- Einsum
EINSUM = [
    ("ij->i", [(3, 4)]),
    ("ij->ij", [(3, 4)]),
    ("ji->ij", [(3, 4)]),
    ("ik,kj->ij", [(2, 3), (3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ijk->i", [(2, 3, 4)]),
    ("ijl,ilk->ijk", [(2, 3, 4), (2, 4, 5)]),
    ("ijkl->ijk", [(2, 3, 2, 4)]),
    ("ijkm,ijml->ijkl", [(2, 2, 3, 4), (2, 2, 4, 3)]),
    ("ii", [(4, 4)]),
    ("i,i->i", [(5,), (5,)]),
    ("ij,ij->i", [(3, 4), (3, 4)]),
    ("kj,ik->ij", [(3, 4), (2, 3)]),
    ("ijk->ij", [(2, 3, 4)]),
    ("ikj->ij", [(2, 3, 4)]),
    ("ijk,k->ij", [(2, 3, 4), (4,)]),
    ("im,mk,kj->ij", [(2, 3), (3, 2), (2, 4)]),
    ("mi,mj->ij", [(3, 2), (3, 4)]),
    ("ijkl->i", [(2, 3, 2, 2)]),
    ("ijkl,ijkl->ij", [(2, 3, 2, 2), (2, 3, 2, 2)]),
]


def _einsum_fix(ctx: Ctx) -> None:
    eq, shapes = ctx.choice(EINSUM)
    # the sizes of each letter drawn afresh, consistent over the operands
    letters = {ch: int(ctx.rng.integers(1, 5)) for ch in set(eq) if ch.isalpha()}
    if eq == "ii":
        letters["i"] = max(letters["i"], 2)
    ops = eq.split("->")[0].split(",")
    ctx.params["equation"] = [ord(c) for c in eq]
    ctx.extra["ins"] = [ctx.f32(*[letters[ch] for ch in op]) for op in ops]
    del shapes


SPACES["Einsum"] = Space(choices={"equation": [None]}, fix=_einsum_fix, inputs=lambda ctx: ctx.extra["ins"])


# ----------------------------------------------------------------------------- LSTM / GRU / RNN
_GATES = {"LSTM": (4, 4), "GRU": (3, 4), "RNN": (1, 1)}  # weight gates, bias rows


def recurrent_space(type_name: str) -> Space:
    gates, _ = _GATES[type_name]
    n_states = 2 if type_name == "LSTM" else 1

    def fix(ctx: Ctx) -> None:
        rng = ctx.rng
        D = 2 if ctx.get("direction") == 2 else 1
        O = int(ctx.get("num_output")) or 1
        ctx.params["num_output"] = O
        H = O
        if type_name == "LSTM" and ctx.has("hidden_size"):
            H = int(ctx.params["hidden_size"]) or O  # a projection when H != O
            ctx.params["hidden_size"] = H
        T, size = int(rng.integers(1, 7)), int(rng.integers(1, 6))
        ctx.params["weight_data_size"] = size * H * gates * D
        ctx.shape = [T, size]
        if ctx.get("int8_scale_term"):
            ctx.params["int8_scale_term"] = 1
            ctx.extra.update(int8=True, scale_range=(50, 200), tol=(1e-3, 1e-3))
        states = []
        if rng.random() < 0.5:  # initial states as bottoms: (D, O) [and (D, H)], or 1d for one direction
            shapes = [(D, O), (D, H)][:n_states]
            if D == 1 and rng.random() < 0.3:
                shapes = [(O,), (H,)][:n_states]
            states = [ctx.f32(*s, lo=-0.5, hi=0.5) for s in shapes]
        ctx.extra["states"] = states
        ctx.extra["n_out"] = 1 + n_states if rng.random() < 0.5 else 1  # the final states as tops, or not

    return Space(
        ranks=(2,),
        choices={
            "num_output": [1, 2, 4, 5],
            "weight_data_size": [None],
            "direction": [0, 1, 2],
            "hidden_size": [1, 3, 6],
            "int8_scale_term": [0, 0, 0, 1],
        },
        fix=fix,
        inputs=lambda ctx: [ctx.f32(*ctx.shape)] + ctx.extra["states"],
        weights=_int8_weights,
        n_out=lambda ctx: ctx.extra["n_out"],
    )


for _t in ("LSTM", "GRU", "RNN"):
    SPACES[_t] = recurrent_space(_t)


# ----------------------------------------------------------------------------- MultiHeadAttention
def _proj(x, w, b):
    return (x.astype(np.float64) @ w.astype(np.float64).reshape(b.size, -1).T + b).astype(np.float32)


def _mha_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    heads = int(ctx.get("num_heads")) or 1
    E = heads * int(rng.integers(1, 4))
    n_qkv = int(rng.integers(1, 4))
    qdim = int(rng.integers(1, 7))
    kdim, vdim = (qdim, qdim) if n_qkv == 1 else (int(rng.integers(1, 7)), int(rng.integers(1, 7)))
    if n_qkv == 2:
        vdim = kdim
    cache = int(ctx.get("kv_cache"))
    if cache:
        ctx.params.pop("quantize_term", None)  # the cache tops are float projections
        mode = int(rng.integers(0, 3))  # empty cache, self-attention with a past, cross-attention with a cache
        n_qkv = 1 if mode != 2 else int(rng.integers(2, 4))
        if mode != 2:
            kdim = vdim = qdim
        elif n_qkv == 2:
            vdim = kdim
    ctx.params.update(num_heads=heads, embed_dim=E, weight_data_size=E * qdim, kdim=kdim, vdim=vdim)
    if ctx.get("quantize_term"):
        ctx.params["quantize_term"] = 1
        ctx.extra.update(int8=True, scale_range=(50, 150), tol=(2e-3, 2e-3))
    src = int(rng.integers(1, 5))
    cur = src if n_qkv == 1 else int(rng.integers(1, 5))
    has_mask = int(ctx.get("attn_mask"))
    ctx.extra.update(heads=heads, E=E, qdim=qdim, kdim=kdim, vdim=vdim, src=src, cur=cur, n_qkv=n_qkv)
    ctx.extra["q"] = ctx.f32(src, qdim)
    ctx.extra["kv"] = [ctx.f32(cur, kdim), ctx.f32(cur, vdim)][: n_qkv - 1]
    ctx.extra["mask_per_head"] = rng.random() < 0.5
    ctx.extra["has_mask"] = has_mask
    ctx.extra["mode"] = mode if cache else None
    ctx.extra["past"] = int(rng.integers(1, 4))


def _mha_mask(ctx: Ctx, dst: int) -> list[np.ndarray]:
    if not ctx.extra["has_mask"]:
        return []
    h, src = ctx.extra["heads"], ctx.extra["src"]
    return [ctx.f32(h, src, dst) if ctx.extra["mask_per_head"] else ctx.f32(src, dst)]


def _mha_inputs(ctx: Ctx) -> list[np.ndarray]:
    """Without a cache: q[, k[, v]][, mask]. With one (the wheel keeps its cache in a packed layout of
    its own): the equivalent case without a cache goes to the wheel (past rows prepended to k / v)."""
    q, mode = ctx.extra["q"], ctx.extra["mode"]
    if mode is None:
        return [q] + ctx.extra["kv"] + _mha_mask(ctx, ctx.extra["cur"])
    ctx.extra["cache_mode"] = mode
    return [q]  # completed in _mha_weights, which knows the projection weights


def _mha_weights(ctx: Ctx, declared: list) -> list[np.ndarray]:
    ws = _int8_weights(ctx, declared)
    mode = ctx.extra["mode"]
    if mode is None:
        return ws
    wq, bq, wk, bk, wv, bv = ws[:6]
    q = ctx.extra["q"]
    past = ctx.extra["past"]
    qdim, kdim, vdim = ctx.extra["qdim"], ctx.extra["kdim"], ctx.extra["vdim"]
    if mode == 0:
        dst, ref = ctx.extra["src"], [q]
        caches = [np.zeros((0,), np.float32)] * 2
        own_kv = []
    elif mode == 1:
        xp = ctx.f32(past, qdim)
        dst = past + ctx.extra["src"]
        full = np.concatenate([xp, q])
        ref = [q, full, full]
        caches = [_proj(xp, wk, bk).T.copy(), _proj(xp, wv, bv).T.copy()]
        own_kv = []
    else:
        xk, xv = ctx.f32(past, kdim), ctx.f32(past, vdim)
        dst = past
        ref = [q, xk, xv]
        caches = [_proj(xk, wk, bk).T.copy(), _proj(xv, wv, bv).T.copy()]
        own_kv = [ctx.f32(2, kdim), ctx.f32(2, vdim)][: ctx.extra["n_qkv"] - 1]
    mask = _mha_mask(ctx, dst)
    ctx.inputs[:] = [q] + own_kv + mask + caches
    ref_params = {k: v for k, v in ctx.ids().items() if k != 7}
    ctx.extra["wheel_case"] = (ref_params, ws, ref + mask, 1)
    ctx.extra["n_out"] = 3
    return ws


def _mha_compare(ctx: Ctx, ours: list, theirs: list) -> None:
    from . import wheel

    tol = ctx.extra.get("tol", (1e-4, 1e-4))
    wheel.assert_close(ours[:1], theirs[:1], atol=tol[0], rtol=tol[1], what=f"MultiHeadAttention {ctx.params}")


SPACES["MultiHeadAttention"] = Space(
    choices={
        "embed_dim": [None],
        "num_heads": [1, 2, 3],
        "weight_data_size": [None],
        "kdim": [None],
        "vdim": [None],
        "attn_mask": [0, 1],
        "scale": [0.25, 0.5, 1.0],
        "kv_cache": [0, 1],
        "quantize_term": [0, 0, 0, 1],
    },
    fix=_mha_fix,
    inputs=_mha_inputs,
    weights=_mha_weights,
    compare=_mha_compare,
    n_out=lambda ctx: 1,
)


# ----------------------------------------------------------------------------- SDPA
def _sdpa_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    groups = int(rng.integers(1, 3))
    heads = groups * int(rng.integers(1, 3))
    dim, vdim = int(rng.integers(1, 7)), int(rng.integers(1, 7))
    src, cur = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    q, k, v = ctx.f32(heads, src, dim), ctx.f32(groups, cur, dim), ctx.f32(groups, cur, vdim)
    has_mask = int(ctx.get("attn_mask"))
    per_head = rng.random() < 0.5
    if ctx.get("int8_scale_term"):
        ctx.params["int8_scale_term"] = 1
        ctx.extra["tol"] = (2e-3, 2e-3)
    if ctx.get("scale") == 0.0:
        ctx.params.pop("scale", None)
    if not ctx.get("kv_cache"):
        mask = [ctx.f32(heads, src, cur) if per_head else ctx.f32(src, cur)] if has_mask else []
        ctx.extra["ins"] = [q, k, v] + mask
        ctx.extra["n_out"] = 1
        return
    # a kv cache: past k / v are prepended; the wheel (its own cache is a packed layout) runs the
    # equivalent case without a cache on [past; current]
    past = 0 if rng.random() < 0.25 else int(rng.integers(1, 4))
    pk, pv = ctx.f32(groups, past, dim), ctx.f32(groups, past, vdim)
    fk, fv = np.concatenate([pk, k], axis=1), np.concatenate([pv, v], axis=1)
    mask = [ctx.f32(heads, src, past + cur) if per_head else ctx.f32(src, past + cur)] if has_mask else []
    caches = [pk, pv] if past else [np.zeros((0,), np.float32)] * 2
    ctx.extra["ins"] = [q, k, v] + mask + caches
    ctx.extra["n_out"] = 3
    ref_params = {k_: v_ for k_, v_ in ctx.ids().items() if k_ != 7}
    ctx.extra["wheel_case"] = (ref_params, [], [q, fk, fv] + mask, 1)
    ctx.extra["want_kv"] = (fk, fv)


def _sdpa_compare(ctx: Ctx, ours: list, theirs: list) -> None:
    from . import wheel

    tol = ctx.extra.get("tol", (1e-4, 1e-4))
    wheel.assert_close(ours[:1], theirs[:1], atol=tol[0], rtol=tol[1], what=f"SDPA {ctx.params}")
    if "want_kv" in ctx.extra:  # the cache tops: [past; current] k and v
        np.testing.assert_array_equal(ours[1], ctx.extra["want_kv"][0])
        np.testing.assert_array_equal(ours[2], ctx.extra["want_kv"][1])


SPACES["SDPA"] = Space(
    choices={"attn_mask": [0, 1], "scale": [0.0, 0.3, 1.0], "kv_cache": [0, 1], "int8_scale_term": [0, 0, 1]},
    fix=_sdpa_fix,
    inputs=lambda ctx: ctx.extra["ins"],
    compare=_sdpa_compare,
    n_out=lambda ctx: ctx.extra["n_out"],
)


def _rotary_fix(ctx: Ctx) -> None:
    heads, seq, half = (int(v) for v in ctx.rng.integers(1, 5, size=3))
    ctx.extra["ins"] = [ctx.f32(heads, seq, 2 * half), ctx.f32(seq, half), ctx.f32(seq, half)]


SPACES["RotaryEmbed"] = Space(choices={"interleaved": [0, 1]}, fix=_rotary_fix, inputs=lambda ctx: ctx.extra["ins"])
