"""ncnn dense layers (ncnn-operators.txt): InnerProduct, Gemm, MatMul, Embed, on the shared Gemm / MatMul /
Gather kernels.

InnerProduct: weight (num_output, num_input); a 2d blob whose width is num_input is a batch of rows
(output (H, num_output)), any other blob is flattened (output (num_output,)). Gemm follows ncnn's own rules:
y = alpha * (A' B' + beta * C) with A (M, K), B (K, N) after the transposes, constant A/B/C from the
weights, C broadcast by ``constant_broadcast_type_C`` (0 scalar, 1 / 2 per row, 3 full, 4 per column) or,
for a C bottom, by its shape; ``output_transpose`` gives (N, M), ``output_N1M`` a 3d (M, 1, N) blob.
int8 (``int8_scale_term`` / Gemm ``quantize_term``) follows ncnn: int8 x int8 -> int32 products, dequantized
by 1 / (scale_a * scale_b).
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelError
from ...ops import indexing, linalg
from ...ops.bind import bind
from ..activation import FUSED, fused_activation, fused_step_activation
from ..spec import P, W, layer
from .quant import dequant_scales, float2int8, int8_epilogue, int8_input, quantize_rows


class DenseForm:
    """A float32 InnerProduct layer (or a Gemm of that form) as a fused step takes it: W (num_output, num_input),
    B (num_output,) or None, and its activation as (name, params) of stdops/ops/fused.py ("" for none);
    ``flat``: a blob of num_input values of another rank is read as one row (InnerProduct's rule; a Gemm's rows
    are a 2-D blob's only)."""

    __slots__ = ("w", "b", "activation", "flat")

    def __init__(self, w: np.ndarray, b: np.ndarray | None, activation: tuple[str, tuple[float, ...]], flat=True):
        self.w, self.b, self.activation, self.flat = w, b, activation, flat


# ----------------------------------------------------------------------------- InnerProduct
@layer(
    "InnerProduct",
    params=[
        P(0, "num_output", 0),
        P(1, "bias_term", 0),
        P(2, "weight_data_size", 0),
        P(8, "int8_scale_term", 0),
        P(9, "activation_type", 0),
        P(10, "activation_params", (), kind="floats"),
    ],
    weights=lambda p: [
        W("weight_data", p.weight_data_size, tagged=True),
        *([W("bias_data", p.num_output)] if p.bias_term else []),
        *([W("weight_data_int8_scales", p.num_output), W("bottom_blob_int8_scales", 1)] if p.int8_scale_term else []),
    ],
    kernels=(linalg.gemm, linalg.mat_mul_integer, *FUSED),
)
def inner_product(p, w):
    """y = activation(W x + b): a 2d blob of width num_input row by row, any other blob flattened. On the
    shared Gemm kernel; int8 with int8_scale_term (input quantized with the bottom scale, weights per
    output row)."""
    M = int(p.num_output)
    wd = w["weight_data"]
    if M <= 0 or wd.size % M or wd.size == 0:
        raise KernelError(f"InnerProduct: weight_data_size {wd.size} is not a multiple of num_output {M}")
    K = wd.size // M
    bias = w.get("bias_data")
    bias = None if bias is None else bias.astype(np.float32)
    act = fused_activation(p.activation_type, p.activation_params)

    def rows(x):
        if x.ndim == 2 and x.shape[1] == K:
            return x, False
        if x.size != K:
            raise KernelError(
                f"InnerProduct: input of shape {x.shape} has {x.size} values, the weights expect "
                f"{K} (or a 2d blob of width {K})"
            )
        return x.reshape(1, K), True

    if p.int8_scale_term:
        wsc = w["weight_data_int8_scales"].astype(np.float32)
        bsc = np.float32(w["bottom_blob_int8_scales"][0])
        w8 = wd.reshape(M, K) if wd.dtype == np.int8 else quantize_rows(wd.astype(np.float32).reshape(M, K), wsc)
        w8t = np.ascontiguousarray(w8.T)
        descale = dequant_scales(wsc, bsc)

        def run_int8(x):
            a, flat = rows(x)
            y = int8_epilogue(linalg.mat_mul_integer(int8_input(a, bsc), w8t), descale, bias, act)
            return y[0] if flat else y

        return run_int8

    if wd.dtype == np.int8:
        raise KernelError("InnerProduct: int8 weights need int8_scale_term")
    wk = np.ascontiguousarray(wd.astype(np.float32).reshape(M, K))
    step = bind(linalg.gemm, {"transB": 1}, (None, wk, bias))  # W^T laid out GEMM-ready, once

    def run(x):
        a, flat = rows(x)
        y = step(a.astype(np.float32, copy=False), wk, bias)
        if act is not None:
            y = act(y)
        return y[0] if flat else y

    step_act = fused_step_activation(p.activation_type, p.activation_params)
    if act is None or step_act is not None:  # for the ncnn plan's fusions (stdops/ncnn/fuse.py)
        run.dense_form = DenseForm(wk, bias, step_act or ("", ()))
    return run


# ----------------------------------------------------------------------------- Gemm
def _gemm_weights(p):
    ws = []
    M, N, K = p.constantM, p.constantN, p.constantK
    if p.quantize_term >= 4:
        raise KernelError(f"Gemm: quantize_term {p.quantize_term} (weight block quantization) is not supported")
    if p.constantA and (M <= 0 or K <= 0):
        raise KernelError("Gemm: constantA needs constantM and constantK")
    if p.constantB and (N <= 0 or K <= 0):
        raise KernelError("Gemm: constantB needs constantN and constantK")
    if p.constantA:
        ws.append(W("A_data", M * K, tagged=True))
    if p.constantB:
        ws.append(W("B_data", N * K, tagged=True))
    if p.constantC and p.constant_broadcast_type_C != -1:
        n = {0: 1, 1: M, 2: M, 3: M * N, 4: N}.get(p.constant_broadcast_type_C)
        if n is None:
            raise KernelError(f"constant_broadcast_type_C {p.constant_broadcast_type_C} is not -1..4")
        ws.append(W("C_data", n, tagged=True))
    if p.quantize_term:
        if p.constantA:
            ws.append(W("A_data_int8_scales", M))
        if p.constantB:
            ws.append(W("B_data_int8_scales", 1))
    return ws


def _as_matrix(x: np.ndarray, what: str) -> np.ndarray:
    """A Gemm operand as 2d: (w,) -> (1, w); (c, 1, w) -> (c, w)."""
    if x.ndim == 1:
        return x.reshape(1, -1)
    if x.ndim == 2:
        return x
    if x.ndim == 3 and x.shape[1] == 1:
        return x.reshape(x.shape[0], x.shape[2])
    raise KernelError(f"Gemm: {what} must be 2d (or 3d with h == 1), got shape {x.shape}")


def _c_broadcast(c: np.ndarray, btype: int, M: int, N: int) -> np.ndarray:
    """C as an array broadcastable to (M, N) by ncnn's broadcast type."""
    c = c.astype(np.float32, copy=False).reshape(-1)
    if btype == 0:
        return c[:1].reshape(1, 1)
    if btype in (1, 2):
        if c.size < M:
            raise KernelError(f"Gemm: C has {c.size} values, per-row broadcast needs M={M}")
        return c[:M].reshape(M, 1)
    if btype == 3:
        if c.size < M * N:
            raise KernelError(f"Gemm: C has {c.size} values, needs M*N={M * N}")
        return c[: M * N].reshape(M, N)
    if c.size < N:
        raise KernelError(f"Gemm: C has {c.size} values, per-column broadcast needs N={N}")
    return c[:N].reshape(1, N)


def _c_type_from_shape(c: np.ndarray, M: int, N: int) -> int:
    """ncnn's broadcast type of a C bottom from its shape (later rules win; no match reads C[0])."""
    t = 0
    if c.ndim == 1 and c.shape[0] == 1:
        t = 0
    if c.ndim == 1 and c.shape[0] == M:
        t = 1
    if c.ndim == 1 and c.shape[0] == N:
        t = 4
    if c.ndim == 2 and c.shape == (M, 1):
        t = 2
    if c.ndim == 2 and c.shape == (M, N):
        t = 3
    if c.ndim == 2 and c.shape == (1, N):
        t = 4
    return t


@layer(
    "Gemm",
    params=[
        P(0, "alpha", 1.0),
        P(1, "beta", 1.0),
        P(2, "transA", 0),
        P(3, "transB", 0),
        P(4, "constantA", 0),
        P(5, "constantB", 0),
        P(6, "constantC", 0),
        P(7, "constantM", 0),
        P(8, "constantN", 0),
        P(9, "constantK", 0),
        P(10, "constant_broadcast_type_C", 0),
        P(11, "output_N1M", 0),
        P(12, "output_elempack", 0),
        P(13, "output_elemtype", 0),
        P(14, "output_transpose", 0),
        P(18, "quantize_term", 0),
        P(20, "constant_TILE_M", 0),
        P(21, "constant_TILE_N", 0),
        P(22, "constant_TILE_K", 0),
    ],
    weights=_gemm_weights,
    inputs=None,
    kernels=(linalg.gemm, linalg.mat_mul_integer),
)
def gemm(p, w):
    """y = alpha * (A' B' + beta * C), A' = A^T if transA, B' = B^T if transB, A' (M, K), B' (K, N); constant
    A / B / C from the weights (constantM/N/K), the others bottoms in order A, B, C. Output (M, N),
    (N, M) with output_transpose, (M, 1, N) / (N, 1, M) with output_N1M; always float32. On the shared Gemm
    kernel; quantize_term 1..3: int8 with ncnn's dynamic per-row (A) / per-tensor (B) absmax scales."""
    alpha, beta = np.float32(p.alpha), np.float32(p.beta)
    transA, transB = int(p.transA), int(p.transB)
    cA, cB, cC = bool(p.constantA), bool(p.constantB), bool(p.constantC)
    M, N, K = int(p.constantM), int(p.constantN), int(p.constantK)
    qt = int(p.quantize_term)
    if qt >= 4:
        raise KernelError(f"Gemm: quantize_term {qt} (weight block quantization) is not supported")
    if cA and (M <= 0 or K <= 0):
        raise KernelError("Gemm: constantA needs constantM and constantK")
    if cB and (N <= 0 or K <= 0):
        raise KernelError("Gemm: constantB needs constantN and constantK")
    btype_c = int(p.constant_broadcast_type_C)
    if cC and not -1 <= btype_c <= 4:
        raise KernelError(f"Gemm: constant_broadcast_type_C {btype_c} is not -1..4")
    n_needed = (0 if cA else 1) + (0 if cB else 1)
    n_max = n_needed + (0 if cC else 1)
    if p.n_bottoms < n_needed or p.n_bottoms > n_max:
        raise KernelError(
            f"Gemm with constantA={int(cA)} constantB={int(cB)} constantC={int(cC)} takes "
            f"{n_needed}" + (f" or {n_max}" if n_max != n_needed else "") + f" bottoms, the layer has "
            f"{p.n_bottoms}"
        )
    A_const = B_const = C_const = None
    if cA:
        a = w["A_data"]
        A_const = a.reshape((M, K) if not transA else (K, M))
    if cB:
        b = w["B_data"]
        B_const = b.reshape((K, N) if not transB else (N, K))
    if cC and btype_c != -1:
        C_const = w["C_data"].astype(np.float32)
    a_scales = w.get("A_data_int8_scales")
    b_scale = w.get("B_data_int8_scales")
    out_t, n1m = int(p.output_transpose), int(p.output_N1M)

    def operands(xs):
        xs = list(xs)
        A = A_const if cA else _as_matrix(xs.pop(0), "A")
        B = B_const if cB else _as_matrix(xs.pop(0), "B")
        C = xs.pop(0) if xs else None
        return A, B, C

    def shape_out(y):
        if out_t:
            y = y.T
        y = np.ascontiguousarray(y, dtype=np.float32)
        if n1m:
            y = y.reshape(y.shape[0], 1, y.shape[1])
        return y

    def c_for(C, Mx, Nx):
        if cC:
            return None if C_const is None else _c_broadcast(C_const, btype_c, Mx, Nx)
        if C is None:
            return None
        C = np.asarray(C, np.float32)
        return _c_broadcast(C, _c_type_from_shape(C, Mx, Nx), Mx, Nx)

    if qt:

        def quant_rows_dyn(a):
            """ncnn's dynamic quantization of each row: scale 127 / absmax (1 for an all-zero row)."""
            amax = np.abs(a).max(axis=1) if a.shape[1] else np.zeros(a.shape[0], np.float32)
            sc = np.where(amax == 0, np.float32(1), np.float32(127) / np.where(amax == 0, 1, amax)).astype(np.float32)
            return float2int8(a * sc[:, None]), sc

        def run_int8(*xs):
            A, B, C = operands(xs)
            A = A.T if transA else A
            if A.dtype == np.int8:
                if a_scales is None:
                    raise KernelError("Gemm: an int8 A blob needs constant A scales")
                a8, asc = A, a_scales.astype(np.float32)
            else:
                a8, asc = quant_rows_dyn(A.astype(np.float32, copy=False))
            B0 = B  # quantized before the transpose, one scale for the whole tensor
            if B0.dtype == np.int8:
                if b_scale is None:
                    raise KernelError("Gemm: an int8 B blob needs a constant B scale")
                b8, bsc = B0, np.float32(b_scale[0])
            else:
                bmax = np.float32(np.abs(B0).max()) if B0.size else np.float32(0)
                bsc = np.float32(1) if bmax == 0 else np.float32(127) / bmax
                b8 = float2int8(B0.astype(np.float32) * bsc)
            b8 = b8.T if transB else b8
            if a8.shape[1] != b8.shape[0]:
                raise KernelError(f"Gemm: A' {a8.shape} and B' {b8.shape} do not chain")
            Mx, Nx = a8.shape[0], b8.shape[1]
            descale = (np.float32(1) / (asc.astype(np.float32) * bsc)).astype(np.float32)
            Cb = c_for(C, Mx, Nx)
            y = int8_epilogue(linalg.mat_mul_integer(a8, b8), descale[:, None], None if Cb is None else Cb * beta)
            return shape_out((y * alpha).astype(np.float32))

        return run_int8

    if (A_const is not None and A_const.dtype == np.int8) or (B_const is not None and B_const.dtype == np.int8):
        raise KernelError("Gemm: int8 constant A/B need quantize_term")
    if A_const is not None:
        A_const = A_const.astype(np.float32)
    if B_const is not None:
        B_const = np.ascontiguousarray(B_const, dtype=np.float32)
    # a constant B reaches the kernel's load-time preparation through the binder
    gemm_step = bind(
        linalg.gemm, dict(alpha=float(alpha), beta=float(alpha * beta), transA=transA, transB=transB), (None, B_const)
    )

    def run(*xs):
        A, B, C = operands(xs)
        A = A.astype(np.float32, copy=False)
        B = B.astype(np.float32, copy=False)
        Mx = A.shape[1] if transA else A.shape[0]
        Nx = B.shape[0] if transB else B.shape[1]
        Ka = A.shape[0] if transA else A.shape[1]
        Kb = B.shape[1] if transB else B.shape[0]
        if Ka != Kb:
            raise KernelError(f"Gemm: A' is ({Mx}, {Ka}) and B' is ({Kb}, {Nx}): K differs")
        Cb = c_for(C, Mx, Nx)
        y = gemm_step(A, B, Cb)
        return shape_out(y)

    # x W^T + b of one 2-D bottom (pnnx's nn.Linear): an InnerProduct's form for the ncnn plan's fusions
    # (stdops/ncnn/fuse.py: the activation layer after it in the GEMM's epilogue)
    plain = alpha == 1 and not (transA or cA or out_t or n1m) and p.n_bottoms == 1 and B_const is not None
    c_row = C_const is None or (btype_c == 4 and beta == 1 and C_const.size >= N)  # no C, or one per column
    if plain and c_row:
        wk = np.ascontiguousarray(B_const if transB else B_const.T)  # (N, K)
        bias = None if C_const is None else np.ascontiguousarray(C_const.reshape(-1)[:N])
        run.dense_form = DenseForm(wk, bias, ("", ()), flat=False)
    return run


# ----------------------------------------------------------------------------- MatMul
@layer("MatMul", params=[P(0, "transB", 0)], inputs=2, kernels=(linalg.mat_mul,))
def matmul(p, w):
    """y = A @ B' (B' = B with its last two axes swapped when transB and B has >= 2 dims), numpy matmul
    broadcasting over the batch axes; a 1d x 1d product is a 1d blob of one value. On the shared MatMul
    kernel."""
    transB = int(p.transB)
    mm = linalg.mat_mul

    def run(a, b):
        a = a.astype(np.float32, copy=False)
        b = b.astype(np.float32, copy=False)
        if transB and b.ndim >= 2:
            b = np.swapaxes(b, -1, -2)
        ka = a.shape[-1]
        kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
        if ka != kb:
            raise KernelError(f"MatMul: A {a.shape} and B{'^T' if transB else ''} {b.shape} do not chain")
        try:
            y = mm(a, b)
        except ValueError as e:
            raise KernelError(f"MatMul: A {a.shape} and B {b.shape}: {e}") from None
        return np.ascontiguousarray(np.asarray(y, np.float32).reshape(1) if y.ndim == 0 else y)

    return run


# ----------------------------------------------------------------------------- Embed
@layer(
    "Embed",
    params=[
        P(0, "num_output", 0),
        P(1, "input_dim", 0),
        P(2, "bias_term", 0),
        P(3, "weight_data_size", 0),
        P(18, "int8_scale_term", 0),
    ],
    weights=lambda p: [
        W("weight_data", p.weight_data_size, tagged=True),
        *([W("bias_data", p.num_output)] if p.bias_term else []),
        *([W("weight_data_int8_scales", 1)] if p.int8_scale_term else []),
    ],
    kernels=(indexing.gather,),
)
def embed(p, w):
    """y[i] = weight[clamp(x[i], 0, input_dim - 1)] (+ bias): a 1d blob of token ids (by value) in, a 2d
    (words, num_output) blob out. On the shared Gather kernel; int8 weights are scaled by
    1 / weight_data_int8_scale."""
    N, V = int(p.num_output), int(p.input_dim)
    wd = w["weight_data"]
    if N <= 0 or V <= 0 or wd.size < N * V:
        raise KernelError(f"Embed: weight_data_size {wd.size} is smaller than input_dim {V} x num_output {N}")
    if p.int8_scale_term:
        if wd.dtype != np.int8:
            raise KernelError("Embed: int8_scale_term needs int8 weights")
        descale = np.float32(1) / np.float32(w["weight_data_int8_scales"][0])
        table = wd[: N * V].reshape(V, N).astype(np.float32) * descale
    else:
        if wd.dtype == np.int8:
            raise KernelError("Embed: int8 weights need int8_scale_term")
        table = wd[: N * V].astype(np.float32).reshape(V, N)
    bias = w.get("bias_data")
    if bias is not None:
        table = table + bias.astype(np.float32)
    table = np.ascontiguousarray(table, np.float32)
    gather = indexing.gather

    def run(x):
        if x.ndim != 1:
            raise KernelError(f"Embed takes a 1d blob of token ids, got shape {x.shape}")
        ids = x if x.dtype.kind in "iu" else np.trunc(x)
        ids = np.clip(ids.astype(np.int64), 0, V - 1)
        return gather(table, ids, axis=0)

    return run
