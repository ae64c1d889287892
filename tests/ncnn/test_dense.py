"""ncnn dense layers against the official wheel: InnerProduct (1d..4d inputs, batched 2d, bias, every
activation, int8), Gemm (alpha/beta, transA/B, constant A/B/C with every broadcast type, C bottoms of each
shape, output_transpose, output_N1M, int8 quantize_term), MatMul (every rank pair, transB), Embed (bias,
clamped ids, int8); and bad params."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import KernelError, ModelFormatError

from . import wheel

needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")

N_CASES = 24
ACTS = [(0, []), (1, []), (2, [0.1]), (3, [-0.5, 0.7]), (4, []), (5, []), (6, [0.2, 0.5])]


def check(type_name, params, weights, inputs, atol=1e-4, n_out=1):
    ours = sn.run_layer(type_name, params, weights, inputs)
    theirs = wheel.wheel_run(type_name, params, weights, inputs, n_out=n_out)
    wheel.assert_close(ours, theirs, atol=atol, what=f"{type_name} {params}")


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ----------------------------------------------------------------------------- InnerProduct
@needs_wheel
def test_inner_product_matches_wheel():
    rng = np.random.default_rng(1)
    for i in range(N_CASES):
        dims = 1 + i % 4
        shape = tuple(int(rng.integers(1, 5)) for _ in range(dims))
        x = f32(rng, *shape)
        K = x.shape[-1] if (dims == 2 and i % 8 == 1) else x.size  # 2d: batched rows or flattened
        M = int(rng.integers(1, 9))
        if dims == 2 and i % 8 == 1:
            K = x.shape[1]
        elif dims == 2:
            x = f32(rng, shape[0], shape[1] + 1) if shape[0] > 1 else x  # width != K: flattened
            K = x.size
        t, a = ACTS[i % len(ACTS)]
        params = {0: M, 1: int(i % 3 != 0), 2: M * K, 9: t}
        if a:
            params[10] = a
        weights = [f32(rng, M * K)] + ([f32(rng, M)] if params[1] else [])
        check("InnerProduct", params, weights, [x])


@needs_wheel
def test_int8_inner_product_matches_wheel():
    rng = np.random.default_rng(2)
    for i in range(N_CASES):
        batched = i % 2 == 0
        x = f32(rng, int(rng.integers(1, 5)), int(rng.integers(2, 9))) if batched else f32(rng, 3, 2, 4)
        K = x.shape[1] if batched else x.size
        M = int(rng.integers(1, 9))
        t, a = ACTS[i % len(ACTS)]
        params = {0: M, 1: int(i % 3 != 0), 2: M * K, 8: 1, 9: t}
        if a:
            params[10] = a
        wt = f32(rng, M * K) if i % 3 else rng.integers(-127, 128, M * K).astype(np.int8)
        weights = [wt] + ([f32(rng, M)] if params[1] else [])
        weights += [rng.uniform(20, 60, M).astype(np.float32), np.array([rng.uniform(20, 60)], np.float32)]
        check("InnerProduct", params, weights, [x], atol=1e-3)


# ----------------------------------------------------------------------------- Gemm
def gemm_case(rng, i):
    M, N, K = (int(v) for v in rng.integers(1, 7, 3))
    transA, transB = i % 2, (i // 2) % 2
    cA, cB = (i // 4) % 3 == 1, (i // 4) % 3 == 2
    params = {0: float(rng.uniform(0.5, 2)), 1: float(rng.uniform(-1, 1.5)), 2: transA, 3: transB}
    weights, inputs = [], []
    A = f32(rng, *((K, M) if transA else (M, K)))
    B = f32(rng, *((N, K) if transB else (K, N)))
    if cA:
        params.update({4: 1, 7: M, 9: K})
        weights.append(A)
    else:
        inputs.append(A if i % 7 else A.reshape(A.shape[0], 1, A.shape[1]))  # a 3d (c, 1, w) A too
    if cB:
        params.update({5: 1, 8: N, 9: K})
        weights.append(B)
    else:
        inputs.append(B)
    cmode = i % 6
    if cmode == 5 and (cA or cB):  # constant C of each broadcast type
        bt = int(rng.integers(-1, 5))
        params.update({6: 1, 10: bt, 7: M, 8: N})
        shape = {-1: None, 0: (1,), 1: (M,), 2: (M, 1), 3: (M, N), 4: (1, N)}[bt]
        if shape is not None:
            weights.append(f32(rng, *shape))
    elif cmode in (1, 2, 3, 4):  # a C bottom of each shape
        shape = {1: (1,), 2: (M,), 3: (M, N), 4: (1, N)}[cmode]
        if cmode == 2 and i % 4 == 0:
            shape = (N,)
        if cmode == 3 and i % 4 == 1:
            shape = (M, 1)
        inputs.append(f32(rng, *shape))
    if i % 5 == 3:
        params[14] = 1
    if i % 7 == 2:
        params[11] = 1
    if i % 4 == 1:
        params[13] = 1  # output_elemtype fp32
    return params, weights, inputs


@needs_wheel
def test_gemm_matches_wheel():
    rng = np.random.default_rng(3)
    for i in range(2 * N_CASES):
        params, weights, inputs = gemm_case(rng, i)
        check("Gemm", params, weights, inputs)


@needs_wheel
def test_int8_gemm_matches_wheel():
    """quantize_term: bottoms A quantized per row and B per tensor with absmax scales; constant A / B stored
    int8 with their scales (the wheel's x86 Gemm reads constant A / B as int8 in this mode; a float constant
    is quantized dynamically by ncnn's reference layer, which is what we do)."""
    rng = np.random.default_rng(4)
    for i in range(N_CASES):
        params, weights, inputs = gemm_case(rng, i)
        params[18] = 2
        if params.get(4):
            weights[0] = rng.integers(-127, 128, weights[0].size).astype(np.int8)
            weights.insert(len(weights), rng.uniform(20, 60, params[7]).astype(np.float32))
        if params.get(5):
            idx = 1 if params.get(4) else 0
            weights[idx] = rng.integers(-127, 128, weights[idx].size).astype(np.int8)
        weights = reorder_int8_scales(params, weights)
        check("Gemm", params, weights, inputs, atol=1e-3)


def reorder_int8_scales(params, weights):
    """Weights in Gemm's load order: A, B, C, then A's scales, then B's scale."""
    a = weights[0] if params.get(4) else None
    rest = weights[1:] if params.get(4) else list(weights)
    a_scales = rest.pop() if params.get(4) else None
    b = rest.pop(0) if params.get(5) else None
    c = rest
    out = ([a] if a is not None else []) + ([b] if b is not None else []) + c
    if a_scales is not None:
        out.append(a_scales)
    if b is not None:
        out.append(np.array([np.random.default_rng(b.size).uniform(20, 60)], np.float32))
    return out


# ----------------------------------------------------------------------------- MatMul
@needs_wheel
def test_matmul_matches_wheel():
    rng = np.random.default_rng(5)
    pairs = [(a, b) for a in range(1, 5) for b in range(1, 5)]
    for i in range(2 * N_CASES):
        ra, rb = pairs[i % len(pairs)]
        transB = (i // len(pairs)) % 2
        M, N, K = (int(v) for v in rng.integers(1, 6, 3))
        c, d = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        batch = {1: (), 2: (), 3: (c,), 4: (d, c)}
        a_shape = (K,) if ra == 1 else batch[ra] + (M, K)
        if rb == 1:
            b_shape = (K,)
        else:
            b_shape = batch[rb] + ((N, K) if transB else (K, N))
        if ra == 4 and rb == 3 and i % 3 == 0:
            a_shape = (d, 1, M, K)  # broadcast over the outer batch axis
        if ra == 3 and rb == 3 and i % 3 == 1:
            b_shape = (1,) + b_shape[1:]
        check("MatMul", {0: transB}, [], [f32(rng, *a_shape), f32(rng, *b_shape)])


# ----------------------------------------------------------------------------- Embed
@needs_wheel
def test_embed_matches_wheel():
    """Token ids go in as int32 (the wheel reads the blob's bits as int); out-of-range ids clamp."""
    rng = np.random.default_rng(6)
    for i in range(N_CASES):
        V, N, T = int(rng.integers(1, 10)), int(rng.integers(1, 8)), int(rng.integers(1, 12))
        ids = rng.integers(-2, V + 2, T).astype(np.int32)
        params = {0: N, 1: V, 2: int(i % 2 == 0), 3: N * V}
        if i % 3 == 2:
            params[18] = 1
            weights = [rng.integers(-127, 128, N * V).astype(np.int8)]
        else:
            weights = [f32(rng, N * V)]
        if params[2]:
            weights.append(f32(rng, N))
        if params.get(18):
            weights.append(np.array([rng.uniform(10, 100)], np.float32))
        ours = sn.run_layer("Embed", params, weights, [ids])
        theirs = wheel.wheel_run("Embed", params, weights, [ids.view(np.float32)])
        wheel.assert_close(ours, theirs, what=f"Embed {params}")
    # ids given as float values (what a float32 feed holds) give the same rows
    y = sn.run_layer("Embed", {0: 2, 1: 3, 3: 6}, [np.arange(6, dtype=np.float32)], [np.array([2.0, 0.0, 5.0])])[0]
    np.testing.assert_array_equal(y, [[4, 5], [0, 1], [4, 5]])


# ----------------------------------------------------------------------------- bad params
def test_bad_params_are_clear_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ModelFormatError, match=r"param 0 \(num_output\): a float literal"):
        sn.run_layer("InnerProduct", {0: 2.0, 2: 6}, [f32(rng, 6)], [f32(rng, 3)])
    with pytest.raises(ModelFormatError, match="has 5 elements, the params say 6"):
        sn.run_layer("InnerProduct", {0: 2, 2: 6}, [f32(rng, 5)], [f32(rng, 3)])
    with pytest.raises(KernelError, match="weights expect 3"):
        sn.run_layer("InnerProduct", {0: 2, 2: 6}, [f32(rng, 6)], [f32(rng, 4)])
    with pytest.raises(KernelError, match="not a multiple of num_output"):
        sn.run_layer("InnerProduct", {0: 4, 2: 6}, [f32(rng, 6)], [f32(rng, 3)])
    with pytest.raises(KernelError, match="constantA needs constantM"):
        sn.run_layer("Gemm", {4: 1, 7: 0, 9: 2}, [], [f32(rng, 2, 2)])
    with pytest.raises(KernelError, match="K differs"):
        sn.run_layer("Gemm", {}, [], [f32(rng, 2, 3), f32(rng, 2, 2)])
    with pytest.raises(KernelError, match="takes 2 or 3 bottoms"):
        sn.run_layer("Gemm", {}, [], [f32(rng, 2, 3)])
    with pytest.raises(KernelError, match="weight block quantization"):
        sn.run_layer("Gemm", {18: 401, 5: 1, 8: 2, 9: 2, 3: 1}, [np.zeros(4, np.int8)], [f32(rng, 2, 2)])
    with pytest.raises(KernelError, match="do not chain"):
        sn.run_layer("MatMul", {}, [], [f32(rng, 2, 3), f32(rng, 2, 2)])
    with pytest.raises(ModelFormatError, match="has 5 elements, the params say 6"):
        sn.run_layer("Embed", {0: 2, 1: 3, 3: 6}, [f32(rng, 5)], [np.zeros(2, np.int32)])
    with pytest.raises(KernelError, match="smaller than input_dim"):
        sn.run_layer("Embed", {0: 2, 1: 4, 3: 6}, [f32(rng, 6)], [np.zeros(2, np.int32)])
