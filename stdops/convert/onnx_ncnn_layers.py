"""ONNX ops -> ncnn layers, the ones with weights and windows: Conv, ConvTranspose, Gemm, MatMul, pooling,
normalization, reductions, Resize, LSTM / GRU / RNN (registered in onnx_ncnn_ops.OPS).

Weights are re-laid out into ncnn's order: convolution weights are ONNX's (M, C/group, *k); deconvolution
weights (C, M/group, *k) become (group, M/group, C/group, *k); recurrent weights go from ONNX gate order
(LSTM i o f c, GRU z r h) to ncnn's (LSTM I F O G, GRU R U N), the inverse of the front end's mapping in
stdops/ncnn/layers/rnn.py. Pads are made explicit from the static shapes (auto_pad, output_shape).
"""

from __future__ import annotations

import numpy as np

from .onnx_ncnn_ops import F32, NodeCtx, canonical, emits

_K = {1: [1], 2: [1, 11], 3: [1, 11, 21]}  # kernel ids, innermost axis first
_D = {1: [2], 2: [2, 12], 3: [2, 12, 22]}
_S = {1: [3], 2: [3, 13], 3: [3, 13, 23]}
_PB = {1: [4], 2: [4, 14], 3: [4, 14, 24]}
_PE = {1: [15], 2: [15, 16], 3: [15, 16, 17]}


def _ints(ctx: NodeCtx, name: str, n: int, default: int) -> list[int]:
    v = ctx.attrs.get(name)
    return [int(x) for x in v] if v else [default] * n


def _pads(ctx: NodeCtx, sp, kernel, strides, dilations) -> tuple[list[int], list[int]]:
    """(begin, end) pads outermost first, auto_pad resolved on the static input size."""
    nd = len(sp)
    auto = ctx.attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        b, e = [], []
        for i, k, s, d in zip(sp, kernel, strides, dilations):
            out = -(-i // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - i)
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            b.append(lo)
            e.append(total - lo)
        return b, e
    if auto == "VALID":
        return [0] * nd, [0] * nd
    p = _ints(ctx, "pads", 2 * nd, 0)
    return p[:nd], p[nd:]


def _window_params(nd, kernel, strides, dilations, b, e) -> dict:
    params = {}
    for ax in range(nd):  # params list the innermost axis first
        o = nd - 1 - ax
        params[_K[nd][o]], params[_S[nd][o]], params[_D[nd][o]] = kernel[ax], strides[ax], dilations[ax]
        params[_PB[nd][o]], params[_PE[nd][o]] = b[ax], e[ax]
    return params


def _batch_one(ctx: NodeCtx) -> tuple[int, ...]:
    shape = ctx.shape(0)
    if shape[0] != 1:
        raise ctx.fail(f"a batch of {shape[0]}: ncnn blobs hold one sample")
    return shape


@emits("Conv")
def conv(ctx: NodeCtx) -> None:
    shape = _batch_one(ctx)
    nd = len(shape) - 2
    w = ctx.const(1).astype(F32)
    M, kernel = w.shape[0], list(w.shape[2:])
    strides, dilations = _ints(ctx, "strides", nd, 1), _ints(ctx, "dilations", nd, 1)
    b, e = _pads(ctx, shape[2:], kernel, strides, dilations)
    grp = int(ctx.attrs.get("group", 1))
    kind = {1: "1D", 2: "", 3: "3D"}[nd]
    params = {0: M, 5: int(ctx.has(2)), 6: int(w.size), **_window_params(nd, kernel, strides, dilations, b, e)}
    if grp > 1:
        params[7] = grp
    weights = [w.reshape(-1)] + ([ctx.const(2).astype(F32).reshape(-1)] if ctx.has(2) else [])
    t = ("ConvolutionDepthWise" if grp > 1 else "Convolution") + kind
    ctx.put(0, ctx.layer(t, [ctx.blob(0)], params, weights)[0])


@emits("ConvTranspose")
def conv_transpose(ctx: NodeCtx) -> None:
    shape = _batch_one(ctx)
    nd = len(shape) - 2
    w = ctx.const(1).astype(F32)  # (C, M/group, *k)
    grp = int(ctx.attrs.get("group", 1))
    C, Mg, kernel = w.shape[0], w.shape[1], list(w.shape[2:])
    strides, dilations = _ints(ctx, "strides", nd, 1), _ints(ctx, "dilations", nd, 1)
    opad = _ints(ctx, "output_padding", nd, 0)
    out_sp = ctx.out_shape()[2:]
    if "output_shape" in ctx.attrs or "auto_pad" in ctx.attrs:  # the pads follow from the sizes
        auto = ctx.attrs.get("auto_pad", b"SAME_UPPER")
        b: list[int] = []
        e: list[int] = []
        for i, k, s, d, op_, o in zip(shape[2:], kernel, strides, dilations, opad, out_sp):
            total = s * (i - 1) + op_ + (k - 1) * d + 1 - o
            lo = total // 2 if auto in (b"SAME_UPPER", "SAME_UPPER") else total - total // 2
            b.append(lo)
            e.append(total - lo)
    else:
        pads = _ints(ctx, "pads", 2 * nd, 0)
        b, e = pads[:nd], pads[nd:]
    if min(b + e) < 0:
        raise ctx.fail("an output larger than the full deconvolution")
    Cg = C // grp
    wn = w.reshape((grp, Cg, Mg) + tuple(kernel)).swapaxes(1, 2)  # ncnn: (group, M/group, C/group, *k)
    params = {0: Mg * grp, 5: int(ctx.has(2)), 6: int(w.size), **_window_params(nd, kernel, strides, dilations, b, e)}
    for ax in range(nd):
        params[{1: [18], 2: [18, 19], 3: [18, 19, 20]}[nd][nd - 1 - ax]] = opad[ax]
    if grp > 1:
        params[7] = grp
    weights = [np.ascontiguousarray(wn).reshape(-1)] + ([ctx.const(2).astype(F32).reshape(-1)] if ctx.has(2) else [])
    t = ("DeconvolutionDepthWise" if grp > 1 else "Deconvolution") + {1: "1D", 2: "", 3: "3D"}[nd]
    ctx.put(0, ctx.layer(t, [ctx.blob(0)], params, weights)[0])


def _inner_product(ctx: NodeCtx, a_shape, weight: np.ndarray, bias: np.ndarray | None) -> None:
    """rows @ weight^T (+ bias): a blob of ncnn shape (K,) or (rows, K)."""
    N, K = weight.shape
    rows = int(np.prod(a_shape)) // K
    x = ctx.blob(0, (K,) if rows == 1 else (rows, K))
    params = {0: N, 1: int(bias is not None), 2: int(weight.size)}
    ws = [weight.astype(F32).reshape(-1)] + ([bias.astype(F32).reshape(-1)] if bias is not None else [])
    ctx.put(0, ctx.layer("InnerProduct", [x], params, ws)[0])


@emits("Gemm")
def gemm(ctx: NodeCtx) -> None:
    alpha, beta = float(ctx.attrs.get("alpha", 1.0)), float(ctx.attrs.get("beta", 1.0))
    if int(ctx.attrs.get("transA", 0)) or not ctx.is_const(1) or ctx.is_const(0):
        raise ctx.fail("only x @ W (+ C) with a constant W has an ncnn InnerProduct form")
    B = ctx.const(1).astype(F32)
    W = B if int(ctx.attrs.get("transB", 0)) else B.T  # (N, K)
    N = W.shape[0]
    bias = None
    if ctx.has(2):
        c = ctx.const(2).astype(F32)
        if c.size not in (1, N) or (c.ndim == 2 and c.shape[0] != 1):
            raise ctx.fail(f"C of shape {c.shape} is not one bias per output")
        bias = np.broadcast_to(c.reshape(-1), (N,)) * F32(beta)
    if alpha != 1.0:
        W = W * F32(alpha)
    _inner_product(ctx, ctx.shape(0), np.ascontiguousarray(W), None if bias is None else np.ascontiguousarray(bias))


@emits("MatMul")
def matmul(ctx: NodeCtx) -> None:
    if ctx.is_const(1) and ctx.const(1).ndim == 2 and not ctx.is_const(0):
        _inner_product(ctx, ctx.shape(0), np.ascontiguousarray(ctx.const(1).astype(F32).T), None)
        return
    a = ctx.memory_data(ctx.const(0)) if ctx.is_const(0) else ctx.blob(0)
    b = ctx.memory_data(ctx.const(1)) if ctx.is_const(1) else ctx.blob(1)
    ctx.put(0, ctx.layer("MatMul", [a, b], {})[0])


# ----------------------------------------------------------------------------- pooling
@emits("MaxPool", "AveragePool")
def pool(ctx: NodeCtx) -> None:
    shape = _batch_one(ctx)
    nd = len(shape) - 2
    kernel = [int(k) for k in ctx.attrs["kernel_shape"]]
    strides = _ints(ctx, "strides", nd, 1)
    if _ints(ctx, "dilations", nd, 1) != [1] * nd:
        raise ctx.fail("dilated pooling has no ncnn form")
    if ctx.node.op_type == "MaxPool" and len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise ctx.fail("MaxPool's indices output has no ncnn form")
    b, e = _pads(ctx, shape[2:], kernel, strides, [1] * nd)
    ids_k, ids_s = {1: [1], 2: [1, 11], 3: [1, 11, 21]}[nd], {1: [2], 2: [2, 12], 3: [2, 12, 22]}[nd]
    ids_b, ids_e = {1: [3], 2: [3, 13], 3: [3, 13, 23]}[nd], {1: [14], 2: [14, 15], 3: [14, 15, 16]}[nd]
    params = {0: 0 if ctx.node.op_type == "MaxPool" else 1, 5: 0 if int(ctx.attrs.get("ceil_mode", 0)) else 1}
    for ax in range(nd):
        o = nd - 1 - ax
        params[ids_k[o]], params[ids_s[o]], params[ids_b[o]], params[ids_e[o]] = kernel[ax], strides[ax], b[ax], e[ax]
    params[6] = int(ctx.attrs.get("count_include_pad", 0))
    t = {1: "Pooling1D", 2: "Pooling", 3: "Pooling3D"}[nd]
    ctx.put(0, ctx.layer(t, [ctx.blob(0)], params)[0])


@emits("GlobalAveragePool", "GlobalMaxPool")
def global_pool(ctx: NodeCtx) -> None:
    shape = _batch_one(ctx)
    t = {3: "Pooling1D", 4: "Pooling", 5: "Pooling3D"}.get(len(shape))
    if t is None:
        raise ctx.fail(f"global pooling of a rank-{len(shape)} tensor")
    ctx.put(0, ctx.layer(t, [ctx.blob(0)], {0: int(ctx.node.op_type == "GlobalAveragePool"), 4: 1})[0])


# ----------------------------------------------------------------------------- normalization
@emits("BatchNormalization")
def batch_norm(ctx: NodeCtx) -> None:
    _batch_one(ctx)
    scale, bias, mean, var = (ctx.const(i).astype(F32) for i in (1, 2, 3, 4))
    params = {0: int(scale.size), 1: float(ctx.attrs.get("epsilon", 1e-5))}
    ctx.put(0, ctx.layer("BatchNorm", [ctx.blob(0)], params, [scale, mean, var, bias])[0])


@emits("InstanceNormalization")
def instance_norm(ctx: NodeCtx) -> None:
    _batch_one(ctx)
    gamma, beta = ctx.const(1).astype(F32), ctx.const(2).astype(F32)
    params = {0: int(gamma.size), 1: float(ctx.attrs.get("epsilon", 1e-5)), 2: 1}
    ctx.put(0, ctx.layer("InstanceNorm", [ctx.blob(0)], params, [gamma, beta])[0])


@emits("LayerNormalization")
def layer_norm(ctx: NodeCtx) -> None:
    shape = ctx.shape(0)
    axis = int(ctx.attrs.get("axis", -1))
    axis = axis + len(shape) if axis < 0 else axis
    part = shape[axis:]
    size = int(np.prod(part))
    gamma = np.broadcast_to(ctx.const(1).astype(F32), part).reshape(-1)
    beta = np.broadcast_to(ctx.const(2).astype(F32), part).reshape(-1) if ctx.has(2) else np.zeros(size, F32)
    params = {0: size, 1: float(ctx.attrs.get("epsilon", 1e-5)), 2: 1}
    ctx.put(
        0, ctx.layer("LayerNorm", [ctx.blob(0)], params, [np.ascontiguousarray(gamma), np.ascontiguousarray(beta)])[0]
    )


_REDUCE = {
    "ReduceSum": 0,
    "ReduceSumSquare": 2,
    "ReduceMean": 3,
    "ReduceMax": 4,
    "ReduceMin": 5,
    "ReduceProd": 6,
    "ReduceL1": 7,
    "ReduceL2": 8,
    "ReduceLogSum": 9,
    "ReduceLogSumExp": 10,
}


@emits(*_REDUCE)
def reduce(ctx: NodeCtx) -> None:
    r = len(ctx.shape(0))
    axes = ctx.const(1).reshape(-1).tolist() if ctx.has(1) else ctx.attrs.get("axes")
    if axes is None or len(axes) == 0:
        if int(ctx.attrs.get("noop_with_empty_axes", 0)):
            raise ctx.fail("an empty reduction")
        axes = list(range(r))
    nax = sorted({ctx.axis(int(a)) for a in axes if (int(a) % r) != 0 or len(canonical(ctx.shape(0))) == r})
    params = {0: _REDUCE[ctx.node.op_type], 1: 0, 3: nax, 4: int(ctx.attrs.get("keepdims", 1)), 5: 1}
    ctx.put(0, ctx.layer("Reduction", [ctx.blob(0)], params)[0])


# ----------------------------------------------------------------------------- Resize
@emits("Resize")
def resize(ctx: NodeCtx) -> None:
    shape, out = _batch_one(ctx), ctx.out_shape()
    if len(shape) != 4 or out[:2] != shape[:2]:
        raise ctx.fail("only the h and w of a (1, C, H, W) tensor resize in ncnn")
    dec = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in ctx.attrs.items()}
    mode, ct = dec.get("mode", "nearest"), dec.get("coordinate_transformation_mode", "half_pixel")
    params = {3: int(out[2]), 4: int(out[3])}
    if mode == "nearest" and ct == "asymmetric" and dec.get("nearest_mode", "round_prefer_floor") == "floor":
        params[0] = 1
    elif mode == "linear" and ct in ("half_pixel", "pytorch_half_pixel", "align_corners"):
        params[0] = 2
        params[6] = int(ct == "align_corners")
    elif (
        mode == "cubic"
        and ct in ("half_pixel", "align_corners")
        and float(ctx.attrs.get("cubic_coeff_a", -0.75)) == -0.75
    ):
        params[0] = 3
        params[6] = int(ct == "align_corners")
    else:
        raise ctx.fail(f"Resize mode {mode!r} with {ct!r} coordinates has no ncnn Interp form")
    ctx.put(0, ctx.layer("Interp", [ctx.blob(0)], params)[0])


# ----------------------------------------------------------------------------- recurrent
def _recurrent(ctx: NodeCtx, gates: int, order: list[int]) -> None:
    op = ctx.node.op_type
    if ctx.has(4):
        raise ctx.fail("sequence_lens has no ncnn form")
    direction = ctx.attrs.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if "activations" in ctx.attrs or "clip" in ctx.attrs or (op == "LSTM" and int(ctx.attrs.get("input_forget", 0))):
        raise ctx.fail("custom activations, clip or input_forget have no ncnn form")
    if op == "LSTM" and ctx.has(7):
        raise ctx.fail("peephole weights have no ncnn form")
    if op == "GRU" and int(ctx.attrs.get("linear_before_reset", 0)) != 1:
        raise ctx.fail("a GRU without linear_before_reset has no ncnn form (ncnn's is linear before reset)")
    T, B, I = ctx.shape(0)
    if B != 1:
        raise ctx.fail(f"a batch of {B}: ncnn sequences hold one")
    W, R = ctx.const(1).astype(F32), ctx.const(2).astype(F32)
    D, H = W.shape[0], W.shape[1] // gates
    Bb = ctx.const(3).astype(F32) if ctx.has(3) else np.zeros((D, 2 * gates * H), F32)
    wx = W.reshape(D, gates, H, I)[:, order]
    wh = R.reshape(D, gates, H, H)[:, order]
    wb, rb = Bb[:, : gates * H].reshape(D, gates, H), Bb[:, gates * H :].reshape(D, gates, H)
    if op == "GRU":  # ncnn rows R, U, WN, BN (the front end's rnn.py)
        bias = np.stack([wb[:, 1] + rb[:, 1], wb[:, 0] + rb[:, 0], wb[:, 2], rb[:, 2]], axis=1)
    else:
        bias = (wb + rb)[:, order]
    params = {0: H, 1: int(wx.size), 2: {"forward": 0, "reverse": 1, "bidirectional": 2}[direction]}
    if op == "LSTM":
        params[3] = H
    n_states = 2 if op == "LSTM" else 1
    outs = [o for o in ctx.node.output]
    want_states = any(k < len(outs) and outs[k] in ctx.needed for k in range(1, 1 + n_states))
    bottoms = [ctx.blob(0, (T, I))]
    state_inputs = [5, 6] if op == "LSTM" else [5]
    zero_states = all(not ctx.has(i) or (ctx.is_const(i) and not ctx.const(i).any()) for i in state_inputs)
    if want_states or not zero_states:
        for i in state_inputs:
            if ctx.has(i) and not ctx.is_const(i):
                bottoms.append(ctx.blob(i, (D, H)))
            else:
                v = ctx.const(i).reshape(D, H) if ctx.has(i) else np.zeros((D, H), F32)
                bottoms.append(ctx.memory_data(v))
    ws = [wx.reshape(-1), np.ascontiguousarray(bias).reshape(-1), wh.reshape(-1)]
    tops = ctx.layer(op, bottoms, params, ws, n_tops=1 + (n_states if len(bottoms) > 1 else 0))
    ctx.put(0, tops[0])  # Y (T, D, 1, H) holds ncnn's (T, D * H) in order
    for k in range(1, 1 + n_states):
        if k < len(outs) and outs[k] in ctx.needed:
            ctx.put(k, tops[k])


@emits("LSTM")
def lstm(ctx: NodeCtx) -> None:
    _recurrent(ctx, 4, [0, 2, 1, 3])


@emits("GRU")
def gru(ctx: NodeCtx) -> None:
    _recurrent(ctx, 3, [1, 0, 2])


@emits("RNN")
def rnn(ctx: NodeCtx) -> None:
    _recurrent(ctx, 1, [0])
