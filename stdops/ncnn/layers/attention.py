"""Attention layers (ncnn-operators.txt: MultiHeadAttention, SDPA, RotaryEmbed, Einsum) on the shared kernels.

MultiHeadAttention: blobs are 2d [seq, dim]; the projections are Gemm, the heads the shared Attention
kernel (scale applied to the projected q as ncnn does, the kernel's own scale 1); the k/v caches are
[embed_dim, seq] (ncnn keeps them transposed). SDPA: q [heads, seq, dim], k/v [groups, seq, dim] (GQA),
past k/v prepended along seq. Legacy int8 MultiHeadAttention (quantize_term 1..399) and int8 SDPA run
ncnn's dynamic-quantization arithmetic, written here (no shared kernel computes it).
"""

from __future__ import annotations

import math

import numpy as np

from ...ops import activation, attention, linalg
from ...ops.bind import bind
from ..spec import P, Ref, W, layer
from .rnn import _round_int8

_F32 = np.float32


def _quant(v: np.ndarray, axis=None):
    """ncnn's dynamic int8 quantization: scale 127 / absmax (1 when absmax is 0) over ``axis``."""
    absmax = np.abs(v).max(axis=axis, keepdims=axis is not None) if v.size else _F32(0)
    absmax = np.asarray(absmax, _F32)
    scale = np.where(absmax == 0, _F32(1), _F32(127) / np.where(absmax == 0, _F32(1), absmax)).astype(_F32)
    return _round_int8(v * scale), scale


def _softmax_rows(s: np.ndarray) -> np.ndarray:
    return activation.softmax(s, axis=-1)


def _int8_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b of two int8-valued arrays (batched), exact: the MatMulInteger kernel, as float32."""
    return linalg.mat_mul_integer(a.astype(np.int8), b.astype(np.int8)).astype(_F32)


# --------------------------------------------------------------------------- MultiHeadAttention


def _mha_roles(p, n: int) -> dict:
    """Bottom index of q, k, v, attn_mask, cached k, cached v for a layer with n bottoms (ncnn's rule)."""
    base = 1 + bool(p.attn_mask) + 2 * bool(p.kv_cache)  # bottoms besides q/k/v
    nqkv = n - base + 1
    if nqkv not in (1, 2, 3):
        raise ValueError(
            f"MultiHeadAttention with attn_mask={p.attn_mask} kv_cache={p.kv_cache} takes "
            f"{base}..{base + 2} bottoms, got {n}"
        )
    q, k, v = [(0, 0, 0), (0, 1, 1), (0, 1, 2)][nqkv - 1]
    r = {"q": q, "k": k, "v": v, "n_qkv": nqkv}
    nxt = nqkv
    if p.attn_mask:
        r["mask"] = nxt
        nxt += 1
    if p.kv_cache:
        r["ck"], r["cv"] = nxt, nxt + 1
    return r


def _block_quant(qt: int):
    """(bits, block_size, has_input_scale) for a weight block quantize_term (4xx/6xx/8xx), else None."""
    bits, fmt, code = qt // 100, qt % 100 // 10, qt % 10
    if bits in (4, 6, 8) and fmt in (0, 1) and 0 <= code <= 2:
        return bits, (32, 64, 128)[code], fmt == 1
    return None


def _packed(k: int, bits: int) -> int:
    return (k * bits + 7) // 8


def _mha_weights(p):
    E = p.embed_dim
    if E <= 0 or p.num_heads <= 0 or E % p.num_heads:
        raise ValueError(f"embed_dim {E} must be a positive multiple of num_heads {p.num_heads}")
    if p.weight_data_size <= 0 or p.weight_data_size % E:
        raise ValueError(f"weight_data_size {p.weight_data_size} is not a positive multiple of embed_dim {E}")
    qdim = p.weight_data_size // E
    qt = p.quantize_term
    bq = _block_quant(qt)
    if qt < 0 or qt in (4, 5, 6) or (qt >= 400 and bq is None):
        raise ValueError(
            f"quantize_term {qt} is not supported (0, legacy int8 1..399 except 4..6, or weight "
            f"block quantization bits*100 + input_scale*10 + block_code with bits 4/6/8)"
        )
    K = {"q": qdim, "k": p.kdim, "v": p.vdim, "out": E}
    rows = {"q": E, "k": E, "v": E, "out": qdim}
    if bq:
        bits, bs, has_in = bq
        ws = []
        for n in ("q", "k", "v", "out"):
            ws += [W(f"{n}_weight", _packed(K[n], bits) * rows[n], True), W(f"{n}_bias", rows[n])]
        ws += [W(f"{n}_weight_quantize_scales", -(-K[n] // bs) * rows[n]) for n in ("q", "k", "v", "out")]
        if has_in:
            ws += [W(f"{n}_weight_input_scales", K[n]) for n in ("q", "k", "v", "out")]
        return ws
    ws = []
    for n in ("q", "k", "v", "out"):
        ws += [W(f"{n}_weight", rows[n] * K[n], True), W(f"{n}_bias", rows[n])]
    if qt:
        ws += [
            W("q_weight_int8_scales", E),
            W("k_weight_int8_scales", E),
            W("v_weight_int8_scales", E),
            W("out_weight_int8_scale", 1),
        ]
    return ws


def _unpack_block_weight(packed: np.ndarray, rows: int, k: int, bits: int, bs: int, scales: np.ndarray):
    """Weight [rows, k] from bit-packed signed integers (little-endian bit order) and per-block scales
    [rows, ceil(k / bs)]: w = q * (1 / scale)."""
    nb = _packed(k, bits)
    if packed.dtype != np.int8:
        raise ValueError("block quantized weights must be stored as tagged int8 bytes")
    b = np.frombuffer(np.ascontiguousarray(packed).tobytes(), np.uint8).reshape(rows, nb).astype(np.uint32)
    off = np.arange(k) * bits
    byte, shift = off // 8, off % 8
    nxt = np.where(byte + 1 < nb, byte + 1, byte)
    v = b[:, byte] | np.where(byte + 1 < nb, b[:, nxt] << 8, 0)
    q = ((v >> shift) & ((1 << bits) - 1)).astype(np.int32)
    sign = 1 << (bits - 1)
    q = (q ^ sign) - sign
    descale = (_F32(1) / scales.reshape(rows, -1).astype(_F32))[:, np.arange(k) // bs]
    return (q.astype(_F32) * descale).astype(_F32)


@layer(
    "MultiHeadAttention",
    params=[
        P(0, "embed_dim", 0),
        P(1, "num_heads", 1),
        P(2, "weight_data_size", 0),
        P(3, "kdim", Ref("embed_dim")),
        P(4, "vdim", Ref("embed_dim")),
        P(5, "attn_mask", 0),
        P(6, "scale", None, kind="float"),
        P(7, "kv_cache", 0),
        P(18, "quantize_term", 0),
    ],
    weights=_mha_weights,
    inputs=None,
    outputs=None,
    kernels=(attention.attention, attention.attention_heads, linalg.gemm, linalg.mat_mul_integer, activation.softmax),
)
def multi_head_attention(p, w):
    """q' = (q Wq^T + bq) * scale, k' = k Wk^T + bk, v' = v Wv^T + bv (k'/v' appended to the caches);
    per head softmax(q' k'^T + mask) v'; y = heads Wo^T + bo. Bottoms q[, k[, v]][, mask][, cache_k, cache_v];
    tops y[, k', v'] (kv_cache)."""
    E, Hn = p.embed_dim, p.num_heads
    qdim = p.weight_data_size // E
    dh = E // Hn
    scale = _F32(p.scale if p.scale is not None else 1.0 / math.sqrt(E // Hn))
    gemm = linalg.gemm
    sdpa_kernel = attention.attention
    dims = {"q": qdim, "k": p.kdim, "v": p.vdim}
    bq = _block_quant(p.quantize_term)
    int8 = bool(p.quantize_term) and bq is None
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
        Wm = {n: Wd[n] for n in "qkv"}
        Wo = Wd["out"]
    else:
        Wm = {n: w[f"{n}_weight"].reshape(E, dims[n]) for n in "qkv"}
        Wo = w["out_weight"].reshape(qdim, E)
    Bm = {n: w[f"{n}_bias"] for n in "qkv"}
    bo = w["out_bias"]
    if int8:
        W8 = {n: np.ascontiguousarray(Wm[n].T, dtype=np.int8) for n in "qkv"}
        S8 = {n: w[f"{n}_weight_int8_scales"] for n in "qkv"}
        Wo8 = np.ascontiguousarray(Wo.T, dtype=np.int8)
        so8 = _F32(w["out_weight_int8_scale"][0])

    def project(x, n):
        if x.ndim != 2 or x.shape[1] != dims[n]:
            raise ValueError(f"MultiHeadAttention {n} must be a 2d blob [seq, {dims[n]}], got shape {x.shape}")
        if int8:
            xq, xs = _quant(x)
            acc = _int8_products(xq, W8[n])
            return acc * (_F32(1) / (S8[n][None, :] * xs)) + Bm[n]
        if n in in_scale:
            x = x * in_scale[n]
        return gemm(x, Wm[n], Bm[n], transB=1)

    # self-attention in float32 (one bottom, no mask, no cache): the three projections as one GEMM on Wq Wk Wv
    # stacked (prepared once), the heads by the shared attention step reading q', k', v' in place as views of it
    # (ops/attention.py attention_heads: one compiled softmax pass, the output written in [seq, heads, dh] order),
    # the output projection a GEMM. ncnn's order: q' scaled after its bias, the scores then unscaled
    # (the zoo's transformer_encoder, 4 heads of 128 x 64, E 256, AMD Zen 4, 1 thread: 1.9 -> 1.37 ms a layer,
    # `stdops profile` medians)
    qkv_step = out_step = heads = None
    if not int8 and not bq and qdim == p.kdim == p.vdim == E:
        wqkv = np.ascontiguousarray(np.concatenate([Wm[n] for n in "qkv"], axis=0).T, _F32)  # (E, 3E)
        bqkv = np.ascontiguousarray(np.concatenate([Bm[n] for n in "qkv"]), _F32)
        wo_t, bo32 = np.ascontiguousarray(Wo.T, _F32), np.asarray(bo, _F32)
        qkv_step = bind(linalg.gemm, {}, (None, wqkv, bqkv))
        out_step = bind(linalg.gemm, {}, (None, wo_t, bo32))
        perm = (1, 0, 2)
        heads = bind(attention.attention_heads, dict(a_perm=perm, b_perm=(1, 2, 0), v_perm=perm, out_perm=perm))

    def self_attention(x):
        src = x.shape[0]
        qkv = qkv_step(x, wqkv, bqkv)  # [src, 3E]
        q = qkv[:, :E]
        q *= scale
        split = [t.reshape(src, Hn, dh) for t in (q, qkv[:, E : 2 * E], qkv[:, 2 * E :])]
        o = heads(*split)  # [src, Hn, dh]
        return out_step(o.reshape(src, E), wo_t, bo32)

    def step(*b):
        if heads is not None and len(b) == 1 and b[0].ndim == 2 and b[0].shape[1] == E and b[0].dtype == _F32:
            if not (p.attn_mask or p.kv_cache):
                return self_attention(b[0])
        r = _mha_roles(p, len(b))
        q, k, v = b[r["q"]], b[r["k"]], b[r["v"]]
        src = q.shape[0]
        qa = project(q, "q") * scale  # [src, E]
        past = b[r["ck"]] if p.kv_cache else None
        pv = b[r["cv"]] if p.kv_cache else None
        has_past = past is not None and past.size > 0
        if has_past and past.ndim != 2 or has_past and past.shape[0] != E:
            raise ValueError(f"MultiHeadAttention cache must be [{E}, seq], got shape {past.shape}")
        if has_past and r["q"] != r["k"]:
            ka = np.asarray(past, _F32)  # cross attention: the cache is k'
        else:
            ka = project(k, "k").T
            if has_past:
                ka = np.concatenate([past, ka], axis=1)
        if has_past and r["q"] != r["v"]:
            va = np.asarray(pv, _F32)
        else:
            va = project(v, "v").T
            if has_past:
                va = np.concatenate([pv, va], axis=1)
        dst = ka.shape[1]
        mask = None
        if p.attn_mask:
            m = b[r["mask"]]
            mask = m.reshape(Hn, src, dst) if m.ndim == 3 else m.reshape(src, dst)
        qh = qa.reshape(src, Hn, dh).transpose(1, 0, 2)  # [H, src, dh]
        kh = ka.reshape(Hn, dh, dst)  # [H, dh, dst]
        vh = va.reshape(Hn, dh, dst)
        if int8:
            o = _mha_int8_core(qh, kh, vh, mask)  # [src, E]
            oq, os_ = _quant(o, axis=1)
            y = _int8_products(oq, Wo8) * (_F32(1) / (so8 * os_)) + bo
        else:
            m4 = None if mask is None else mask[None] if mask.ndim == 3 else mask
            o = sdpa_kernel(qh[None], kh.transpose(0, 2, 1)[None], vh.transpose(0, 2, 1)[None], m4, scale=1.0)[0][0]
            o = o.transpose(1, 0, 2).reshape(src, E)
            if "out" in in_scale:
                o = o * in_scale["out"]
            y = gemm(o, Wo, bo, transB=1)
        if p.kv_cache and p.n_tops >= 3:
            return y, np.ascontiguousarray(ka), np.ascontiguousarray(va)
        return y

    return step


def _mha_int8_core(qh, kh, vh, mask):
    """ncnn's int8 head arithmetic: q quantized per position, k and v per head, softmax(qk) per row."""
    Hn, src, dh = qh.shape
    qq, qs = _quant(qh, axis=2)  # [H, src, dh], [H, src, 1]
    kflat = kh.reshape(Hn, -1)
    kq, ks = _quant(kflat, axis=1)  # per head
    kq = kq.reshape(kh.shape)
    s = _int8_products(qq, kq) * (_F32(1) / (qs * ks[:, :, None]))  # [H, src, dst]
    if mask is not None:
        s = s + mask
    a = _softmax_rows(s)
    aq, as_ = _quant(a, axis=2)
    vq, vs = _quant(vh.reshape(Hn, -1), axis=1)
    vq = vq.reshape(vh.shape)  # [H, dh, dst]
    o = _int8_products(aq, vq.transpose(0, 2, 1)) * (_F32(1) / (as_ * vs[:, :, None]))
    return o.transpose(1, 0, 2).reshape(src, Hn * dh)


# --------------------------------------------------------------------------- SDPA


@layer(
    "SDPA",
    params=[P(5, "attn_mask", 0), P(6, "scale", 0.0), P(7, "kv_cache", 0), P(18, "int8_scale_term", 0)],
    inputs=None,
    outputs=None,
    kernels=(attention.attention, linalg.mat_mul_integer, activation.softmax),
)
def sdpa(p, w):
    """y[h] = softmax(q[h] k[g]^T * scale + mask) v[g], g = h / (heads / groups); scale 0 means
    1/sqrt(dim). Bottoms q, k, v[, mask][, past_k, past_v]; tops y[, k, v] (kv_cache: with the past)."""
    sdpa_kernel = attention.attention
    int8 = bool(p.int8_scale_term)

    def step(*b):
        want = 3 + bool(p.attn_mask) + 2 * bool(p.kv_cache)
        if len(b) != want:
            raise ValueError(
                f"SDPA with attn_mask={p.attn_mask} kv_cache={p.kv_cache} takes {want} bottoms, got {len(b)}"
            )
        q, k, v = b[0], b[1], b[2]
        if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
            raise ValueError(f"SDPA takes 3d q, k, v, got shapes {q.shape}, {k.shape}, {v.shape}")
        mask = b[3] if p.attn_mask else None
        if p.kv_cache:
            pk, pv = b[4 if p.attn_mask else 3], b[5 if p.attn_mask else 4]
            if pk.size:
                k = np.concatenate([pk.reshape(k.shape[0], -1, k.shape[2]), k], axis=1)
                v = np.concatenate([pv.reshape(v.shape[0], -1, v.shape[2]), v], axis=1)
        heads, src, dim = q.shape
        if heads % k.shape[0]:
            raise ValueError(f"SDPA: {heads} query heads do not split into {k.shape[0]} key/value groups")
        scale = float(p.scale) if p.scale != 0 else 1.0 / math.sqrt(dim)
        if mask is not None:
            mask = mask.reshape(-1, src, k.shape[1]) if mask.ndim == 3 else mask
        if int8:
            y = _sdpa_int8(q, k, v, mask, _F32(scale))
        else:
            m4 = None if mask is None else mask[None] if mask.ndim == 3 else mask
            y = sdpa_kernel(q[None], k[None], v[None], m4, scale=scale)[0][0]
        if p.kv_cache and p.n_tops >= 3:
            return y, np.ascontiguousarray(k), np.ascontiguousarray(v)
        return y

    return step


def _sdpa_int8(q, k, v, mask, scale):
    """ncnn's int8 SDPA: q quantized per position, k/v per group, softmax rows per position."""
    heads, src, dim = q.shape
    per = heads // k.shape[0]
    kq, ks = _quant(k.reshape(k.shape[0], -1), axis=1)
    vq, vs = _quant(v.reshape(v.shape[0], -1), axis=1)
    kq, vq = kq.reshape(k.shape), vq.reshape(v.shape)
    g = np.arange(heads) // per
    qq, qs = _quant(q, axis=2)
    s = _int8_products(qq, kq[g].transpose(0, 2, 1)) * (_F32(1) / (qs * ks[g][:, :, None])) * scale
    if mask is not None:
        s = s + mask
    a = _softmax_rows(s)
    aq, as_ = _quant(a, axis=2)
    return _int8_products(aq, vq[g]) * (_F32(1) / (as_ * vs[g][:, :, None]))


# --------------------------------------------------------------------------- RotaryEmbed


@layer("RotaryEmbed", params=[P(0, "interleaved", 0)], inputs=3, kernels=(attention.rotary_embedding,))
def rotary_embed(p, w):
    """Per head and position: (x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos), pairs the two halves of the
    dim (interleaved 0) or even/odd channels (1). x [heads, seq, dim]; cos/sin [seq, dim/2]."""
    rot = attention.rotary_embedding
    inter = int(bool(p.interleaved))

    def step(x, cos, sin):
        if x.ndim != 3:
            raise ValueError(f"RotaryEmbed takes a 3d blob [heads, seq, dim], got shape {x.shape}")
        s, half = x.shape[1], x.shape[2] // 2
        c = np.asarray(cos, _F32).reshape(-1, cos.shape[-1])[:s, :half]
        sn = np.asarray(sin, _F32).reshape(-1, sin.shape[-1])[:s, :half]
        return rot(x[None], c[None], sn[None], interleaved=inter)[0]

    return step


# --------------------------------------------------------------------------- Einsum

_LETTERS = "ijklmnopqrstuvwx"


@layer("Einsum", params=[P(0, "equation", [], kind="ints")], inputs=None, kernels=(linalg.einsum,))
def einsum(p, w):
    """y = einsum(equation) with the equation given as character codes: input letters i..x, the output
    written i, ij, ijk or ijkl (summation over every other letter). "ii" is the trace (y [1])."""
    try:
        eq = "".join(chr(c) for c in p.equation)
    except (ValueError, OverflowError):
        raise ValueError("equation holds a value that is not a character code") from None
    kern = linalg.einsum
    if eq == "ii":
        return lambda x: (
            np.asarray(kern(np.asarray(x, _F32), equation="ii->"), _F32).reshape(1) if x.ndim == 2 else _bad_trace(x)
        )
    if "->" not in eq:
        raise ValueError(f"equation {eq!r} has no '->'")
    lhs, rhs = eq.split("->", 1)
    terms = lhs.split(",")
    if rhs not in ("i", "ij", "ijk", "ijkl"):
        raise ValueError(f"equation {eq!r}: the output must be written i, ij, ijk or ijkl")
    if any(not t or any(c not in _LETTERS for c in t) for t in terms):
        raise ValueError(f"equation {eq!r}: input letters must be in i..x")
    if any(c not in lhs for c in rhs):
        raise ValueError(f"equation {eq!r}: every output letter must appear in an input")
    equation = f"{','.join(terms)}->{rhs}"

    def step(*xs):
        if len(xs) != len(terms):
            raise ValueError(f"equation {eq!r} takes {len(terms)} bottoms, got {len(xs)}")
        for t, x in zip(terms, xs):
            if len(t) != x.ndim:
                raise ValueError(f"equation term {t!r} does not fit a blob of shape {x.shape}")
        return np.asarray(kern(*[np.asarray(x, _F32) for x in xs], equation=equation), _F32)

    return step


def _bad_trace(x):
    raise ValueError(f"the trace equation 'ii' takes a 2d blob, got shape {x.shape}")
