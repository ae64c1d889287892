"""MultiHeadAttention, SDPA, RotaryEmbed and Einsum against the ncnn wheel."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import ModelFormatError

from . import wheel

N = 24
needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")


def _f(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _check(type_name, params, weights, inputs, n_out=1, atol=1e-4, rtol=1e-4):
    ours = sn.run_layer(type_name, params, weights, inputs, n_out)
    theirs = wheel.wheel_run(type_name, params, weights, inputs, n_out)
    wheel.assert_close(ours, theirs, atol=atol, rtol=rtol, what=f"{type_name} {params} {[np.shape(x) for x in inputs]}")


def _mha_setup(rng, n_qkv, int8, same_dims=False):
    heads = int(rng.integers(1, 4))
    E = heads * int(rng.integers(1, 4))
    qdim = int(rng.integers(1, 7))
    if n_qkv == 1 or same_dims:
        kdim = vdim = qdim
    elif n_qkv == 2:
        kdim = vdim = int(rng.integers(1, 7))
    else:
        kdim, vdim = int(rng.integers(1, 7)), int(rng.integers(1, 7))

    def wmat(n):
        if int8:
            return rng.integers(-127, 128, size=n).astype(np.int8)
        return _f(rng, n, scale=0.5)

    weights = [
        wmat(E * qdim),
        _f(rng, E, scale=0.2),
        wmat(E * kdim),
        _f(rng, E, scale=0.2),
        wmat(E * vdim),
        _f(rng, E, scale=0.2),
        wmat(qdim * E),
        _f(rng, qdim, scale=0.2),
    ]
    if int8:
        weights += [rng.uniform(50, 150, E).astype(np.float32) for _ in range(3)]
        weights += [np.float32([rng.uniform(50, 150)])]
    params = {0: E, 1: heads, 2: E * qdim, 3: kdim, 4: vdim}
    if int8:
        params[18] = 1
    return params, weights, heads, E, qdim, kdim, vdim


def mha_case(i, int8=False):
    """Cases without a kv cache (the wheel keeps its cache in a packed layout of its own)."""
    rng = np.random.default_rng(7000 + i + (300 if int8 else 0))
    n_qkv = 1 + i % 3
    params, weights, heads, E, qdim, kdim, vdim = _mha_setup(rng, n_qkv, int8)
    has_mask = (i // 3) % 2
    params[5] = has_mask
    if i % 4 == 3:
        params[6] = float(rng.uniform(0.1, 1.0))
    src = int(rng.integers(1, 5))
    cur = src if n_qkv == 1 else int(rng.integers(1, 5))
    inputs = [_f(rng, src, qdim), _f(rng, cur, kdim), _f(rng, cur, vdim)][:n_qkv]
    if has_mask:
        inputs.append(_f(rng, heads, src, cur) if i % 2 else _f(rng, src, cur))
    return params, weights, inputs, 1


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_multiheadattention(i):
    _check("MultiHeadAttention", *mha_case(i))


@needs_wheel
@pytest.mark.parametrize("i", range(8))
def test_multiheadattention_int8(i):
    params, weights, inputs, n_out = mha_case(i, int8=True)
    _check("MultiHeadAttention", params, weights, inputs, n_out, atol=2e-3, rtol=2e-3)


@needs_wheel
@pytest.mark.parametrize("heads,E", [(1, 4), (2, 4), (3, 6)])
def test_multiheadattention_defaults(heads, E):
    """kdim = vdim = embed_dim and scale = 1/sqrt(embed_dim / num_heads) by default."""
    rng = np.random.default_rng(E * 10 + heads)
    weights = [_f(rng, n, scale=0.5) for n in (E * E, E, E * E, E, E * E, E, E * E, E)]
    _check("MultiHeadAttention", {0: E, 1: heads, 2: E * E}, weights, [_f(rng, 3, E)])


BLOCK_TERMS = [800, 801, 802, 810, 600, 611, 400, 412, 800, 600, 400, 810]


def _dequant_reference(packed, rows, k, bits, bs, scales):
    """Independent bit-by-bit unpacking (python loops over a few hundred values)."""
    raw = packed.view(np.uint8).reshape(rows, -1)
    out = np.zeros((rows, k), np.float64)
    for r in range(rows):
        bitstr = "".join(format(int(b), "08b")[::-1] for b in raw[r])  # little-endian bit order
        for j in range(k):
            v = int(bitstr[j * bits : (j + 1) * bits][::-1], 2)
            if v >= 1 << (bits - 1):
                v -= 1 << bits
            out[r, j] = v / scales.reshape(rows, -1)[r, j // bs]
    return out


@needs_wheel
@pytest.mark.parametrize("i", range(len(BLOCK_TERMS)))
def test_multiheadattention_block_quantized(i):
    """Weight-only block quantization (bits*100 + input_scale*10 + block_code): packed signed weights and
    per-block scales, against the wheel's fp32 layer on the dequantized weights (the wheel 1.0.20261020
    returns NaN for every block-quantized MultiHeadAttention, so it cannot be the oracle here)."""
    qt = BLOCK_TERMS[i]
    bits, has_in, bs = qt // 100, qt % 100 // 10, (32, 64, 128)[qt % 10]
    rng = np.random.default_rng(7900 + i)
    heads = int(rng.integers(1, 3))
    E = heads * int(rng.integers(1, 4))
    big = i >= 8
    qdim, kdim, vdim = (int(v) for v in rng.integers(1, 7 if not big else 140, size=3))
    K = {"q": qdim, "k": kdim, "v": vdim, "out": E}
    rows = {"q": E, "k": E, "v": E, "out": qdim}
    packed, biases, scales, ins = {}, {}, {}, {}
    weights = []
    for n in ("q", "k", "v", "out"):
        packed[n] = rng.integers(-128, 128, size=(K[n] * bits + 7) // 8 * rows[n]).astype(np.int8)
        biases[n] = _f(rng, rows[n], scale=0.2)
        weights += [packed[n], biases[n]]
    for n in ("q", "k", "v", "out"):
        scales[n] = rng.uniform(20, 200, -(-K[n] // bs) * rows[n]).astype(np.float32)
        weights.append(scales[n])
    if has_in:
        for n in ("q", "k", "v", "out"):
            ins[n] = rng.uniform(0.5, 2.0, K[n]).astype(np.float32)
            weights.append(ins[n])
    params = {0: E, 1: heads, 2: E * qdim, 3: kdim, 4: vdim, 18: qt, 5: i % 2}
    src, cur = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    inputs = [_f(rng, src, qdim), _f(rng, cur, kdim), _f(rng, cur, vdim)]
    if i % 2:
        inputs.append(_f(rng, src, cur))
    ours = sn.run_layer("MultiHeadAttention", params, weights, inputs)
    fw = []
    for n in ("q", "k", "v", "out"):
        wd = _dequant_reference(packed[n], rows[n], K[n], bits, bs, scales[n])
        if has_in:
            wd = wd * ins[n][None, :]
        fw += [wd.astype(np.float32).ravel(), biases[n]]
    ref_params = {k: v for k, v in params.items() if k != 18}
    theirs = wheel.wheel_run("MultiHeadAttention", ref_params, fw, inputs)
    wheel.assert_close(ours, theirs, atol=1e-4, rtol=1e-4, what=f"block quantized MHA {params}")


def _proj(x, w, b):
    return (x.astype(np.float64) @ w.astype(np.float64).reshape(b.size, -1).T + b).astype(np.float32)


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_multiheadattention_kv_cache(i):
    """The cache path against the wheel without a cache: self-attention with past k'/v' equals q attending
    to [past; current] rows; cross-attention with a cache uses it as k'/v'; the cache tops are k'/v'^T."""
    rng = np.random.default_rng(7600 + i)
    mode = i % 3  # 0: empty cache, 1: self-attention with a past, 2: cross-attention with a cache
    n_qkv = 1 if mode != 2 else 2 + (i // 3) % 2
    params, weights, heads, E, qdim, kdim, vdim = _mha_setup(rng, n_qkv, False, same_dims=mode == 1)
    has_mask = (i // 2) % 2
    params.update({5: has_mask, 7: 1})
    src, past = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    wq, bq, wk, bk, wv, bv = weights[:6]
    q = _f(rng, src, qdim)
    if mode == 0:
        dst = src
        ref_inputs, caches = [q], [np.zeros((0,), np.float32)] * 2
        want_k, want_v = _proj(q, wk, bk).T, _proj(q, wv, bv).T
    elif mode == 1:
        xp = _f(rng, past, qdim)
        dst = past + src
        full = np.concatenate([xp, q])
        ref_inputs = [q, full, full]
        caches = [_proj(xp, wk, bk).T.copy(), _proj(xp, wv, bv).T.copy()]
        want_k, want_v = _proj(full, wk, bk).T, _proj(full, wv, bv).T
    else:
        xk, xv = _f(rng, past, kdim), _f(rng, past, vdim)
        dst = past
        ref_inputs = [q, xk, xv]
        caches = [_proj(xk, wk, bk).T.copy(), _proj(xv, wv, bv).T.copy()]
        want_k, want_v = caches
    mask = [_f(rng, heads, src, dst) if i % 4 == 1 else _f(rng, src, dst)] if has_mask else []
    own = [q] + ([_f(rng, 2, kdim), _f(rng, 2, vdim)][: n_qkv - 1] if mode == 2 else []) + mask + caches
    ours = sn.run_layer("MultiHeadAttention", params, weights, own, 3)
    ref_params = {k: v for k, v in params.items() if k != 7}
    theirs = wheel.wheel_run("MultiHeadAttention", ref_params, weights, ref_inputs + mask)
    wheel.assert_close(ours[:1], theirs, what=f"MultiHeadAttention kv cache mode {mode} {params}")
    wheel.assert_close(ours[1:], [want_k, want_v], atol=1e-4, what="cache tops")
    if mode == 0:  # the wheel takes an empty cache too: its attention output must agree
        theirs = wheel.wheel_run("MultiHeadAttention", params, weights, own, 3)
        wheel.assert_close(ours[:1], theirs[:1], what="MultiHeadAttention empty cache")


def sdpa_case(i, int8=False):
    rng = np.random.default_rng(8000 + i + (300 if int8 else 0))
    groups = int(rng.integers(1, 3))
    heads = groups * int(rng.integers(1, 3))
    dim, vdim = int(rng.integers(1, 7)), int(rng.integers(1, 7))
    src, cur = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    has_mask = i % 2
    params = {5: has_mask}
    if i % 3 == 1:
        params[6] = float(rng.uniform(0.1, 1.0))
    if int8:
        params[18] = 1
    inputs = [_f(rng, heads, src, dim), _f(rng, groups, cur, dim), _f(rng, groups, cur, vdim)]
    if has_mask:
        inputs.append(_f(rng, heads, src, cur) if (i // 4) % 2 else _f(rng, src, cur))
    return params, [], inputs, 1


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_sdpa(i):
    _check("SDPA", *sdpa_case(i))


@needs_wheel
@pytest.mark.parametrize("i", range(8))
def test_sdpa_int8(i):
    params, weights, inputs, n_out = sdpa_case(i, int8=True)
    _check("SDPA", params, weights, inputs, n_out, atol=2e-3, rtol=2e-3)


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_sdpa_kv_cache(i):
    """Past k/v are prepended: the wheel without a cache on [past; current] is the reference (its own
    cache is a packed layout); an empty past is compared with the wheel's cache path directly."""
    rng = np.random.default_rng(8600 + i)
    params, _, inputs, _ = sdpa_case(i, int8=i % 6 == 5)
    q, k, v = inputs[:3]
    mask = inputs[3:]
    past = 0 if i % 4 == 0 else int(rng.integers(1, 4))
    pk, pv = _f(rng, k.shape[0], past, k.shape[2]), _f(rng, v.shape[0], past, v.shape[2])
    fk, fv = np.concatenate([pk, k], axis=1), np.concatenate([pv, v], axis=1)
    if mask:
        m = mask[0]
        mask = [np.concatenate([_f(rng, *m.shape[:-1], past), m], axis=-1)]
    tol = 2e-3 if 18 in params else 1e-4
    own = [q, k, v] + mask + ([pk, pv] if past else [np.zeros((0,), np.float32)] * 2)
    ours = sn.run_layer("SDPA", {**params, 7: 1}, [], own, 3)
    theirs = wheel.wheel_run("SDPA", params, [], [q, fk, fv] + mask)
    wheel.assert_close(ours[:1], theirs, atol=tol, rtol=tol, what=f"SDPA kv cache {params} past {past}")
    np.testing.assert_array_equal(ours[1], fk)
    np.testing.assert_array_equal(ours[2], fv)
    if not past:
        theirs = wheel.wheel_run("SDPA", {**params, 7: 1}, [], own, 3)
        wheel.assert_close(ours[:1], theirs[:1], atol=tol, rtol=tol, what="SDPA empty cache")


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_rotaryembed(i):
    rng = np.random.default_rng(9000 + i)
    heads, seq, half = (int(v) for v in rng.integers(1, 5, size=3))
    x = _f(rng, heads, seq, 2 * half)
    cos, sin = _f(rng, seq, half), _f(rng, seq, half)
    params = {0: i % 2} if i else {}
    _check("RotaryEmbed", params, [], [x, cos, sin])


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


@needs_wheel
@pytest.mark.parametrize("i", range(len(EINSUM)))
def test_einsum(i):
    eq, shapes = EINSUM[i]
    rng = np.random.default_rng(9500 + i)
    inputs = [_f(rng, *s) for s in shapes]
    params = {0: [ord(c) for c in eq]}
    _check("Einsum", params, [], inputs)


@pytest.mark.parametrize("eq", ["ij->ji", "ij->j", "ij->", "ij->ijk", "ijk->ik", "iy->i", "ij", "j->ij"])
def test_einsum_refuses_what_the_wheel_refuses(eq):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises((ModelFormatError, ValueError), match="equation"):
        sn.run_layer("Einsum", {0: [ord(c) for c in eq]}, [], [a])


def test_bad_params_and_weights():
    q = np.zeros((2, 4), np.float32)
    with pytest.raises(ModelFormatError, match="float literal"):
        sn.run_layer("MultiHeadAttention", {0: 4.0, 2: 16}, [], [q])
    with pytest.raises(ModelFormatError, match="has 3 elements"):
        sn.run_layer(
            "MultiHeadAttention",
            {0: 4, 1: 2, 2: 16},
            [np.zeros(3, np.float32)] + [np.zeros(n, np.float32) for n in (4, 16, 4, 16, 4, 16, 4)],
            [q],
        )
    with pytest.raises((ModelFormatError, ValueError), match="multiple of num_heads"):
        sn.run_layer("MultiHeadAttention", {0: 4, 1: 3, 2: 16}, [], [q])
    with pytest.raises(ValueError, match="takes 4 bottoms"):
        sn.run_layer("SDPA", {5: 1}, [], [np.zeros((1, 2, 3), np.float32)] * 3)
    with pytest.raises(ModelFormatError, match="float element"):
        sn.run_layer("Einsum", {0: [105.5]}, [], [q])
