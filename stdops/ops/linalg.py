"""Linear algebra: MatMul, Gemm, Einsum, Det, MatMulInteger.

float16/bfloat16 products accumulate in float32 and round once; float32 stays float32 (BLAS);
integer products keep their dtype (MatMulInteger: int32).
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import KernelError
from . import _fast, _fast_gemm
from ._blas import matmul
from ._registry import op
from .dtypes import compute_dtype, is_float, widened


def _same_dtype(name: str, *xs: np.ndarray) -> np.dtype:
    dt = xs[0].dtype
    for x in xs[1:]:
        if x.dtype != dt:
            raise KernelError(f"{name}: inputs have different dtypes ({dt} and {x.dtype})")
    if dt.kind in "OSUb":
        raise KernelError(f"{name}: unsupported dtype {dt}")
    return dt


def _matmul(a: np.ndarray, b: np.ndarray, name: str = "MatMul") -> np.ndarray:
    if a.ndim == 0 or b.ndim == 0:
        raise KernelError(f"{name}: inputs must have rank >= 1, got shapes {a.shape} and {b.shape}")
    ka = a.shape[-1]
    kb = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if ka != kb:
        raise KernelError(f"{name}: inner dimensions differ: {a.shape} x {b.shape}")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise KernelError(f"{name}: batch dimensions do not broadcast: {a.shape} x {b.shape}") from None
    if a.ndim > 2 and b.ndim == 2 and a.dtype.kind == "f":
        # a stack of matrices times one matrix is ONE GEMM on the rows (numpy.matmul runs one small
        # product per batch entry: a transformer's (T, 1, d) @ (d, n) is T GEMVs)
        y = matmul(a.reshape(-1, ka), b)
        return y.reshape(a.shape[:-1] + (b.shape[1],))
    return matmul(a, b)


@op("onnx:MatMul-1")
def mat_mul(A, B, /):
    """Y = A @ B with numpy.matmul semantics: batch dimensions broadcast; a 1-D A is a row
    vector and a 1-D B a column vector, their added axis removed from the result.

    Dtype of A and B (which must match).
    """
    A, B = np.asarray(A), np.asarray(B)
    dt = _same_dtype("MatMul", A, B)
    y = _matmul(widened(A), widened(B))
    return np.asarray(y if y.dtype == dt else y.astype(dt))


def _gemm_scale(y: np.ndarray, alpha: float) -> np.ndarray:
    if alpha == 1.0:
        return y
    if y.dtype.kind == "f":
        y *= np.asarray(alpha, y.dtype)
        return y
    return (y * alpha).astype(y.dtype)


def _gemm_c(C, beta: float, mn: tuple[int, int], wdt: np.dtype) -> np.ndarray:
    """beta * C in the accumulation dtype, checked to broadcast to (M, N)."""
    C = np.asarray(C)
    try:
        ok = np.broadcast_shapes(C.shape, mn) == mn
    except ValueError:
        ok = False
    if not ok:
        raise KernelError(f"Gemm: C of shape {C.shape} does not broadcast to {mn}")
    c = widened(C)
    if beta != 1.0:
        c = c * np.asarray(beta, wdt) if wdt.kind == "f" else (c * beta).astype(wdt)
    return c.astype(wdt, copy=False)


def prepare_gemm(constants: tuple, attrs: dict):
    """Load time, when B is a constant 2-D float tensor: B' (transposed when transB) laid out contiguous
    in the accumulation dtype, once; a constant C of B's dtype scaled by beta once (a C known only at run
    time is scaled per call). Returns the step ``(A, B, C=None) -> Y``, or None (B not known)."""
    b = constants[1] if len(constants) > 1 else None
    if not isinstance(b, np.ndarray) or b.ndim != 2 or not is_float(b.dtype):
        return None
    alpha, beta, transA = float(attrs["alpha"]), float(attrs["beta"]), attrs["transA"]
    bp = np.ascontiguousarray(widened(b).T if attrs["transB"] else widened(b))
    c0 = constants[2] if len(constants) > 2 else None
    c_const = isinstance(c0, np.ndarray) and c0.dtype == b.dtype
    cp: dict = {}  # (M, N) -> beta * C, computed at the first run of each output shape
    dt = b.dtype
    tiled = bp if _fast_gemm.takes(bp) else None  # ops/_fast_gemm.py's register tiles (one row: numpy's GEMV)

    def gemm_prepared(A, B, C=None):
        A = np.asarray(A)
        if A.dtype != dt or A.ndim != 2:
            return gemm(A, B, C, **attrs)
        a = widened(A).T if transA else widened(A)
        if a.shape[1] != bp.shape[0]:
            return gemm(A, B, C, **attrs)  # the kernel reports the mismatch
        if tiled is not None and _fast.enabled():
            y = _gemm_scale(_fast_gemm.gemm(a, tiled), alpha)
        else:
            y = _gemm_scale(matmul(a, bp), alpha)
        if C is not None:
            c = cp.get(y.shape) if c_const else None
            if c is None:
                c = _gemm_c(C, beta, y.shape, y.dtype)
                if c_const:
                    cp[y.shape] = c
            y += c
        return y if y.dtype == dt else y.astype(dt)

    return gemm_prepared


@op("onnx:Gemm-7", prepare=prepare_gemm)
def gemm(A, B, C=None, /, *, alpha=1.0, beta=1.0, transA=0, transB=0):
    """Y = alpha * A' @ B' + beta * C, A' = A.T if transA, B' = B.T if transB.

    A' is (M, K), B' is (K, N); C (optional) broadcasts unidirectionally to (M, N).
    Shape (M, N), dtype of A.
    """
    A, B = np.asarray(A), np.asarray(B)
    dt = _same_dtype("Gemm", A, B)
    if A.ndim != 2 or B.ndim != 2:
        raise KernelError(f"Gemm: A and B must be 2-D, got shapes {A.shape} and {B.shape}")
    a = widened(A).T if transA else widened(A)
    b = widened(B).T if transB else widened(B)
    if a.shape[1] != b.shape[0]:
        raise KernelError(f"Gemm: inner dimensions differ: A' {a.shape} x B' {b.shape}")
    y = _gemm_scale(matmul(a, b), alpha)  # a fresh array: scaled and biased in place
    if C is not None:
        y += _gemm_c(C, beta, (a.shape[0], b.shape[1]), y.dtype)
    return y if y.dtype == dt else y.astype(dt)


def _einsum_operands(equation: str, n: int) -> str:
    eq = equation.replace(" ", "")
    lhs = eq.split("->")[0]
    if eq.count("->") > 1 or lhs.count(",") + 1 != n:
        raise KernelError(f"Einsum: equation {equation!r} does not fit {n} input(s)")
    return eq


@functools.lru_cache(maxsize=256)
def _einsum_path(eq: str, shapes: tuple) -> list:
    """The contraction order numpy picks for these shapes, computed once per (equation, shapes)."""
    dummies = [np.broadcast_to(np.zeros((), np.float32), s) for s in shapes]
    return np.einsum_path(eq, *dummies, optimize="greedy")[0]


@op("onnx:Einsum-12")
def einsum(*Inputs, equation):
    """Y[out] = sum over the indices not in out of prod_i Inputs_i[term_i] (Einstein summation,
    explicit '->' or implicit output, '...' broadcasting).

    Dtype of the inputs (which must match).
    """
    xs = [np.asarray(x) for x in Inputs]
    if not xs:
        raise KernelError("Einsum: needs at least one input")
    dt = _same_dtype("Einsum", *xs)
    eq = _einsum_operands(equation, len(xs))
    try:
        ws = [widened(x) for x in xs]
        path = _einsum_path(eq, tuple(x.shape for x in ws)) if len(ws) > 1 else False
        y = np.einsum(eq, *ws, optimize=path)
    except ValueError as e:
        raise KernelError(f"Einsum: {equation!r}: {e}") from None
    y = np.asarray(y)
    return y if y.dtype == dt else y.astype(dt)


@op("onnx:Det-11")
def det(X, /):
    """Y = det(X[..., :, :]) for every square matrix in the batch.

    X is (*, M, M); Y is (*), dtype of X.
    """
    X = np.asarray(X)
    if X.ndim < 2 or X.shape[-1] != X.shape[-2]:
        raise KernelError(f"Det: input must be (*, M, M), got shape {X.shape}")
    if not is_float(X.dtype):
        raise KernelError(f"Det: unsupported dtype {X.dtype}")
    x = X.astype(compute_dtype(X.dtype), copy=False)
    y = np.asarray(np.linalg.det(x))
    return y if y.dtype == X.dtype else y.astype(X.dtype)


def _zero_point(zp, x: np.ndarray, row: bool, name: str) -> np.ndarray | int:
    if zp is None:
        return 0
    zp = np.asarray(zp)
    if zp.dtype != x.dtype:
        raise KernelError(f"MatMulInteger: {name} dtype {zp.dtype} differs from its input's {x.dtype}")
    zp = zp.astype(np.int32)
    if zp.ndim == 1 and zp.size > 1 and row and x.ndim >= 2:
        if zp.size != x.shape[-2]:
            raise KernelError(f"MatMulInteger: {name} has {zp.size} values for {x.shape[-2]} rows")
        return zp.reshape(-1, 1)  # one per row of A
    if zp.ndim == 1 and zp.size > 1 and not row and zp.size != x.shape[-1]:
        raise KernelError(f"MatMulInteger: {name} has {zp.size} values for {x.shape[-1]} columns")
    return zp


@op("onnx:MatMulInteger-10")
def mat_mul_integer(A, B, a_zero_point=None, b_zero_point=None, /):
    """Y = (A - a_zero_point) @ (B - b_zero_point), exact in int32, numpy.matmul shapes.

    A and B int8/uint8; a_zero_point scalar or one per row of A, b_zero_point scalar or one per
    column of B. Dtype int32.
    """
    A, B = np.asarray(A), np.asarray(B)
    for n, x in (("A", A), ("B", B)):
        if x.dtype not in (np.int8, np.uint8):
            raise KernelError(f"MatMulInteger: {n} must be int8 or uint8, got {x.dtype}")
    a = A.astype(np.int32) - _zero_point(a_zero_point, A, True, "a_zero_point")
    b = B.astype(np.int32) - _zero_point(b_zero_point, B, False, "b_zero_point")
    k = a.shape[-1] if a.ndim else 0
    if k and k * 255 * 255 < 2**53:  # float64 BLAS is exact for these integers
        y = _matmul(a.astype(np.float64), b.astype(np.float64), "MatMulInteger")
        return np.asarray(y).astype(np.int64).astype(np.int32)
    return np.asarray(_matmul(a, b, "MatMulInteger")).astype(np.int32)
