"""Dense ncnn layers -> ONNX: InnerProduct (int8 too), Gemm, MatMul, Embed, MultiHeadAttention, SDPA,
RotaryEmbed, Einsum.

These compute in ncnn's own layout (``ctx.raw``: the blob without the batch axis), following the front end
(stdops/ncnn/layers/dense.py, attention.py) step by step, and put the batch axis back at the end.
"""

from __future__ import annotations

import math

import numpy as np

from ...ncnn.layers.attention import _block_quant, _unpack_block_weight
from ...ncnn.layers.quant import dequant_scales, quantize_rows
from .base import F32, LayerCtx, emits, float2int8, fused_activation


# --------------------------------------------------------------------------------------------- InnerProduct
@emits("InnerProduct")
def inner_product(ctx: LayerCtx) -> None:
    g, p, w = ctx.g, ctx.p, ctx.w
    M = int(p.num_output)
    wd = w["weight_data"]
    K = wd.size // M
    shape = ctx.in_shapes[0]
    rows = len(shape) == 2 and shape[1] == K
    a = ctx.raw() if rows else g.reshape(ctx.x(), (1, K))
    if p.int8_scale_term:
        wsc = w["weight_data_int8_scales"].astype(F32)
        bsc = F32(w["bottom_blob_int8_scales"][0])
        w8 = wd.reshape(M, K) if wd.dtype == np.int8 else quantize_rows(wd.astype(F32).reshape(M, K), wsc)
        a8 = a if np.dtype(ctx.in_dtypes[0]) == np.int8 else float2int8(g, g.op("Mul", [a, g.scalar(bsc)]))
        acc = g.op("MatMulInteger", [a8, g.const(np.ascontiguousarray(w8.T), stem="weight_int8")])
        y = g.op("Mul", [g.cast(acc, np.float32), g.const(dequant_scales(wsc, bsc), stem="descale")])
        if "bias_data" in w:
            y = g.op("Add", [y, g.const(w["bias_data"].astype(F32), stem="bias")])
    else:
        ins = [a, g.const(wd.astype(F32).reshape(M, K), stem="weight")]
        if "bias_data" in w:
            ins.append(g.const(w["bias_data"].astype(F32), stem="bias"))
        y = g.op("Gemm", ins, transB=1)
    y = fused_activation(ctx, y, p.activation_type, p.activation_params)
    ctx.put(0, y, raw=True)


# --------------------------------------------------------------------------------------------- Gemm
def _as_matrix(shape: tuple[int, ...]) -> tuple[int, int]:
    """The front end's 2d view of a Gemm operand: (w,) -> (1, w); (c, 1, w) -> (c, w)."""
    if len(shape) == 1:
        return (1, shape[0])
    if len(shape) == 2:
        return shape
    if len(shape) == 3 and shape[1] == 1:
        return (shape[0], shape[2])
    raise ValueError(f"a Gemm operand must be 2d (or 3d with h == 1), got shape {shape}")


def _c_broadcast(c: np.ndarray, btype: int, M: int, N: int) -> np.ndarray:
    c = np.asarray(c, F32).reshape(-1)
    if btype == 0:
        return c[:1].reshape(1, 1)
    if btype in (1, 2):
        return c[:M].reshape(M, 1)
    if btype == 3:
        return c[: M * N].reshape(M, N)
    return c[:N].reshape(1, N)


def _c_type(shape: tuple[int, ...], M: int, N: int) -> int:
    """ncnn's broadcast type of a C bottom from its shape (later rules win)."""
    t = 0
    if len(shape) == 1 and shape[0] == M:
        t = 1
    if len(shape) == 1 and shape[0] == N:
        t = 4
    if shape == (M, 1):
        t = 2
    if shape == (M, N):
        t = 3
    if shape == (1, N):
        t = 4
    return t


@emits("Gemm")
def gemm(ctx: LayerCtx) -> None:
    g, p, w = ctx.g, ctx.p, ctx.w
    if p.quantize_term:
        raise ctx.fail(f"int8 Gemm (quantize_term {p.quantize_term}) quantizes its operands dynamically; not converted")
    transA, transB = int(p.transA), int(p.transB)
    k = 0
    shapes = {}
    if p.constantA:
        a_shape = (p.constantM, p.constantK) if not transA else (p.constantK, p.constantM)
        A = g.const(w["A_data"].astype(F32).reshape(a_shape), stem="A")
    else:
        a_shape = _as_matrix(ctx.in_shapes[k])
        A = g.reshape(ctx.x(k), a_shape)
        k += 1
    if p.constantB:
        b_shape = (p.constantK, p.constantN) if not transB else (p.constantN, p.constantK)
        B = g.const(w["B_data"].astype(F32).reshape(b_shape), stem="B")
    else:
        b_shape = _as_matrix(ctx.in_shapes[k])
        B = g.reshape(ctx.x(k), b_shape)
        k += 1
    shapes["M"] = a_shape[1] if transA else a_shape[0]
    shapes["N"] = b_shape[0] if transB else b_shape[1]
    M, N = shapes["M"], shapes["N"]
    C = None
    if p.constantC:
        if p.constant_broadcast_type_C != -1:
            C = g.const(_c_broadcast(w["C_data"], p.constant_broadcast_type_C, M, N), stem="C")
    elif k < len(ctx.ins):
        c_shape = ctx.in_shapes[k]
        t = _c_type(c_shape, M, N)
        n = {0: 1, 1: M, 2: M, 3: M * N, 4: N}[t]
        c = g.reshape(ctx.x(k), (-1,))
        if int(np.prod(c_shape)) != n:
            c = g.slice(c, [0], [n], [0])
        C = g.reshape(c, {0: (1, 1), 1: (M, 1), 2: (M, 1), 3: (M, N), 4: (1, N)}[t])
    alpha, beta = F32(p.alpha), F32(p.beta)
    ins = [A, B] + ([C] if C is not None else [])
    y = g.op("Gemm", ins, alpha=float(alpha), beta=float(alpha * beta), transA=transA, transB=transB)
    if p.output_transpose:
        y = g.op("Transpose", [y], perm=[1, 0])
    ctx.put(0, y, raw=True)


# --------------------------------------------------------------------------------------------- MatMul
@emits("MatMul")
def matmul(ctx: LayerCtx) -> None:
    g = ctx.g
    a, b = ctx.raw(0), ctx.raw(1)
    rb = ctx.rank(1)
    if ctx.p.transB and rb >= 2:
        b = g.op("Transpose", [b], perm=list(range(rb - 2)) + [rb - 1, rb - 2])
    ctx.put(0, g.op("MatMul", [a, b]), raw=True)


# --------------------------------------------------------------------------------------------- Embed
@emits("Embed")
def embed(ctx: LayerCtx) -> None:
    g, p, w = ctx.g, ctx.p, ctx.w
    N, V = int(p.num_output), int(p.input_dim)
    wd = w["weight_data"]
    if p.int8_scale_term:
        table = wd[: N * V].reshape(V, N).astype(F32) * (F32(1) / F32(w["weight_data_int8_scales"][0]))
    else:
        table = wd[: N * V].astype(F32).reshape(V, N)
    if "bias_data" in w:
        table = table + w["bias_data"].astype(F32)
    ids = ctx.x() if np.dtype(ctx.in_dtypes[0]).kind in "iu" else g.cast(ctx.x(), np.int64)  # trunc toward 0
    ids = g.op("Clip", [g.cast(ids, np.int64), g.scalar(0, np.int64), g.scalar(V - 1, np.int64)])
    ctx.put(0, g.op("Gather", [g.const(np.ascontiguousarray(table, F32), stem="table"), ids], axis=0))


# --------------------------------------------------------------------------------------------- attention
def _mha_roles(p, n: int) -> dict:
    """Bottom index of q, k, v, mask, cached k, cached v (the front end's rule)."""
    base = 1 + bool(p.attn_mask) + 2 * bool(p.kv_cache)
    nqkv = n - base + 1
    q, k, v = [(0, 0, 0), (0, 1, 1), (0, 1, 2)][nqkv - 1]
    r = {"q": q, "k": k, "v": v}
    nxt = nqkv
    if p.attn_mask:
        r["mask"] = nxt
        nxt += 1
    if p.kv_cache:
        r["ck"], r["cv"] = nxt, nxt + 1
    return r


@emits("MultiHeadAttention")
def multi_head_attention(ctx: LayerCtx) -> None:
    g, p, w = ctx.g, ctx.p, ctx.w
    E, Hn = int(p.embed_dim), int(p.num_heads)
    qdim = p.weight_data_size // E
    dh = E // Hn
    scale = F32(p.scale if p.scale is not None else 1.0 / math.sqrt(E // Hn))
    dims = {"q": qdim, "k": p.kdim, "v": p.vdim}
    bq = _block_quant(p.quantize_term)
    if p.quantize_term and bq is None:
        raise ctx.fail("legacy int8 MultiHeadAttention quantizes its activations dynamically; not converted")
    in_scale = {}
    if bq:
        bits, bs, has_in = bq
        rows = {"q": E, "k": E, "v": E, "out": qdim}
        K = {**dims, "out": E}
        Wd = {
            n: _unpack_block_weight(w[f"{n}_weight"], rows[n], K[n], bits, bs, w[f"{n}_weight_quantize_scales"])
            for n in ("q", "k", "v", "out")
        }
        if has_in:
            in_scale = {n: w[f"{n}_weight_input_scales"] for n in ("q", "k", "v", "out")}
    else:
        Wd = {n: w[f"{n}_weight"].astype(F32).reshape(E, dims[n]) for n in "qkv"}
        Wd["out"] = w["out_weight"].astype(F32).reshape(qdim, E)

    def project(x: str, n: str) -> str:
        if n in in_scale:
            x = g.op("Mul", [x, g.const(np.asarray(in_scale[n], F32), stem=f"{n}_input_scale")])
        bias = w[f"{n}_bias"].astype(F32)
        return g.op("Gemm", [x, g.const(Wd[n], stem=f"{n}_weight"), g.const(bias, stem=f"{n}_bias")], transB=1)

    r = _mha_roles(p, len(ctx.ins))
    src = ctx.in_shapes[r["q"]][0]
    qa = g.op("Mul", [project(ctx.raw(r["q"]), "q"), g.scalar(scale)])  # [src, E]
    has_past = bool(p.kv_cache) and int(np.prod(ctx.in_shapes[r["ck"]])) > 0

    def kv(n: str, cache: str) -> str:
        if has_past and r["q"] != r[n]:
            return ctx.raw(r[cache])  # cross attention: the cache is the projection
        t = g.op("Transpose", [project(ctx.raw(r[n]), n)], perm=[1, 0])  # [E, seq]
        return g.op("Concat", [ctx.raw(r[cache]), t], axis=1) if has_past else t

    ka, va = kv("k", "ck"), kv("v", "cv")
    dst = ctx.in_shapes[r["ck"]][-1] if has_past and r["q"] != r["k"] else None
    if dst is None:
        dst = ctx.in_shapes[r["k"]][0] + (ctx.in_shapes[r["ck"]][-1] if has_past else 0)
    qh = g.op("Transpose", [g.reshape(qa, (src, Hn, dh))], perm=[1, 0, 2])  # [H, src, dh]
    kh = g.reshape(ka, (Hn, dh, dst))
    vh = g.op("Transpose", [g.reshape(va, (Hn, dh, dst))], perm=[0, 2, 1])  # [H, dst, dh]
    s = g.op("MatMul", [qh, kh])
    if p.attn_mask:
        ms = ctx.in_shapes[r["mask"]]
        s = g.op("Add", [s, g.reshape(ctx.x(r["mask"]), (Hn, src, dst) if len(ms) == 3 else (src, dst))])
    o = g.op("MatMul", [g.op("Softmax", [s], axis=-1), vh])  # [H, src, dh]
    o = g.reshape(g.op("Transpose", [o], perm=[1, 0, 2]), (src, E))
    ctx.put(0, project(o, "out"), raw=True)
    if p.kv_cache and len(ctx.results) >= 3:
        ctx.put(1, ka, raw=True)
        ctx.put(2, va, raw=True)


@emits("SDPA")
def sdpa(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    if p.int8_scale_term:
        raise ctx.fail("int8 SDPA quantizes its activations dynamically; not converted")
    q, k, v = ctx.raw(0), ctx.raw(1), ctx.raw(2)
    heads, src, dim = ctx.in_shapes[0]
    groups, seq, _ = ctx.in_shapes[1]
    if p.kv_cache:
        pk, pv = (4, 5) if p.attn_mask else (3, 4)
        if int(np.prod(ctx.in_shapes[pk])):
            k = g.op("Concat", [g.reshape(ctx.x(pk), (groups, -1, dim)), k], axis=1)
            v = g.op("Concat", [g.reshape(ctx.x(pv), (groups, -1, ctx.in_shapes[2][2])), v], axis=1)
            seq += int(np.prod(ctx.in_shapes[pk])) // (groups * dim)
    kk, vv = k, v
    if heads != groups:
        sel = g.const((np.arange(heads) // (heads // groups)).astype(np.int64), stem="group_of_head")
        kk, vv = g.op("Gather", [k, sel], axis=0), g.op("Gather", [v, sel], axis=0)
    scale = float(p.scale) if p.scale != 0 else 1.0 / math.sqrt(dim)
    s = g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [kk], perm=[0, 2, 1])]), g.scalar(scale)])
    if p.attn_mask:
        ms = ctx.in_shapes[3]
        s = g.op("Add", [s, g.reshape(ctx.x(3), (-1, src, seq) if len(ms) == 3 else (src, seq))])
    ctx.put(0, g.op("MatMul", [g.op("Softmax", [s], axis=-1), vv]), raw=True)
    if p.kv_cache and len(ctx.results) >= 3:
        ctx.put(1, k, raw=True)
        ctx.put(2, v, raw=True)


@emits("RotaryEmbed")
def rotary_embed(ctx: LayerCtx) -> None:
    g = ctx.g
    H, S, D = ctx.in_shapes[0]
    half = D // 2
    x = ctx.raw(0)

    def cache(k: int) -> str:
        c = g.reshape(ctx.x(k), (-1, ctx.in_shapes[k][-1]))
        return g.slice(c, [0, 0], [S, half], [0, 1])

    cos, sin = cache(1), cache(2)
    if ctx.p.interleaved:
        x1 = g.slice(x, [0], [2 * half], [2], [2])
        x2 = g.slice(x, [1], [2 * half], [2], [2])
    else:
        x1 = g.slice(x, [0], [half], [2])
        x2 = g.slice(x, [half], [2 * half], [2])
    y1 = g.op("Sub", [g.op("Mul", [x1, cos]), g.op("Mul", [x2, sin])])
    y2 = g.op("Add", [g.op("Mul", [x1, sin]), g.op("Mul", [x2, cos])])
    if ctx.p.interleaved:
        y = g.reshape(
            g.op("Concat", [g.op("Unsqueeze", [t, g.ints([-1], "axes")]) for t in (y1, y2)], axis=-1), (H, S, 2 * half)
        )
    else:
        y = g.op("Concat", [y1, y2], axis=-1)
    if 2 * half != D:
        y = g.op("Concat", [y, g.slice(x, [2 * half], [D], [2])], axis=-1)
    ctx.put(0, y, raw=True)


@emits("Einsum")
def einsum(ctx: LayerCtx) -> None:
    eq = "".join(chr(c) for c in ctx.p.equation)
    if eq == "ii":
        eq = "ii->"
    ctx.put(0, ctx.g.op("Einsum", [ctx.raw(k) for k in range(len(ctx.ins))], equation=eq), raw=True)
