"""ai.onnx.ml scoring kernels: the post transforms (shared with the tree ensembles), the linear models
(LinearRegressor, LinearClassifier) and the SVMs (SVMRegressor, SVMClassifier).

Where the spec is silent, behaviour follows onnxruntime (documented per kernel).
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import op
from .activation import sigmoid, softmax
from .ml import _floats, _numeric_2d

# --------------------------------------------------------------------------- post transforms (shared with ml_trees)

TRANSFORMS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}


def _softmax_zero_rows(v: np.ndarray) -> np.ndarray:
    """Softmax over the non-zero scores of a row; zero scores stay 0; an all-zero row gives 0.5."""
    nz = np.abs(v) > 1e-7
    mx = v.max(axis=-1, keepdims=True)
    e = np.where(nz, np.exp(np.where(nz, v - mx, 0)), 0)
    s = e.sum(axis=-1, keepdims=True)
    return np.where(s == 0, v.dtype.type(0.5), e / np.where(s == 0, 1, s))


def post_transform_scores(v: np.ndarray, transform: int) -> np.ndarray:
    """NONE 0, SOFTMAX 1, LOGISTIC 2, SOFTMAX_ZERO 3, PROBIT 4 applied to scores (N, T)."""
    t = int(transform)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        if t == 0:
            return v
        if t == 1:
            return softmax(v, axis=-1)
        if t == 2:
            return sigmoid(v)
        if t == 3:
            return _softmax_zero_rows(v)
        if t == 4:
            import scipy.special

            return scipy.special.ndtri(v).astype(v.dtype, copy=False)
    raise KernelError(f"post_transform must be 0..4 (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT), got {transform}")


def _enum(value, table: dict, what: str, name: str) -> int:
    v = str(value).upper()
    if v not in table:
        raise KernelError(f"{what}: {name} must be one of {', '.join(table)}, got {value!r}")
    return table[v]


def _linear_scores(x: np.ndarray, coefficients, intercepts, rows: int | None, opname: str) -> np.ndarray:
    """X (N, F) @ W^T + b with W the coefficients as (rows, F) (rows inferred when None)."""
    w = np.asarray(coefficients if coefficients is not None else [], np.float64).reshape(-1)
    f = x.shape[1]
    if rows is None:
        if f == 0 or w.size % f:
            raise KernelError(f"{opname}: {w.size} coefficients do not split into rows of {f} features")
        rows = w.size // f
    if w.size != rows * f:
        raise KernelError(f"{opname}: expected {rows} x {f} coefficients, got {w.size}")
    xf = _floats(x)
    s = xf @ w.reshape(rows, f).T.astype(xf.dtype)
    if intercepts is not None and len(intercepts):
        b = np.asarray(intercepts, xf.dtype).reshape(-1)
        if b.size not in (1, rows):
            raise KernelError(f"{opname}: {b.size} intercepts for {rows} outputs")
        s = s + b
    return s


@op("onnx-ml:LinearRegressor-1")
def linear_regressor(X, /, *, coefficients=None, intercepts=None, post_transform="NONE", targets=1):
    """Y = post_transform(X W^T + intercepts), W = coefficients as (targets, F).

    X (N, F) or (F,) numeric; Y (N, targets) float32.
    """
    x = _numeric_2d(X, "LinearRegressor")
    t = _enum(post_transform, TRANSFORMS, "LinearRegressor", "post_transform")
    s = _linear_scores(x, coefficients, intercepts, int(targets), "LinearRegressor").astype(np.float32)
    return post_transform_scores(s, t).astype(np.float32, copy=False)


@op("onnx-ml:LinearClassifier-1")
def linear_classifier(
    X,
    /,
    *,
    classlabels_ints=None,
    classlabels_strings=None,
    coefficients,
    intercepts=None,
    multi_class=0,
    post_transform="NONE",
):
    """Z = post_transform(X W^T + intercepts), W = coefficients as (E, F); Y = labels[argmax Z].

    With two labels and one row of coefficients the score s is the second class's: p = s
    (LOGISTIC: sigmoid(s), PROBIT: probit(s); a softmax of one score is skipped), Z = (1 - p, p),
    Y = the second label where p > 0 (LOGISTIC: p > 0.5). With one row and one label (or none),
    Y = label (1) where the score is >= 0 (NONE) / 0.5 (other transforms), else 0 (the empty
    string). multi_class is not used (as in onnxruntime).
    X (N, F) or (F,) numeric; Y (N,) int64 or strings; Z (N, E) float32.
    """
    x = _numeric_2d(X, "LinearClassifier")
    t = _enum(post_transform, TRANSFORMS, "LinearClassifier", "post_transform")
    if classlabels_ints is not None and classlabels_strings is not None:
        raise KernelError("LinearClassifier: only one of classlabels_ints and classlabels_strings may be given")
    labels = (
        np.asarray(classlabels_strings, dtype=object)
        if classlabels_strings is not None
        else np.asarray(classlabels_ints if classlabels_ints is not None else [], np.int64)
    )
    s = _linear_scores(x, coefficients, intercepts, None, "LinearClassifier").astype(np.float32)
    if s.shape[1] == 1 and labels.size == 2:  # binary: one score, the second class's
        p = post_transform_scores(s, t) if t in (2, 4) else s  # softmax of one score is skipped
        hit = p[:, 0] > (0.5 if t == 2 else 0.0)
        return labels[hit.astype(np.int64)], np.concatenate([1 - p, p], axis=1).astype(np.float32)
    z = post_transform_scores(s, t).astype(np.float32, copy=False)
    if z.shape[1] > 1:
        if labels.size != z.shape[1]:
            raise KernelError(f"LinearClassifier: {labels.size} class labels for {z.shape[1]} score columns")
        return labels[np.argmax(z, axis=1)] if z.shape[0] else labels[:0], z
    hit = z[:, 0] >= (0.0 if t == 0 else 0.5)
    if labels.dtype == object:
        lab = labels[0] if labels.size else ""
        return np.where(hit, lab, "").astype(object), z
    return np.where(hit, labels[0] if labels.size else 1, 0).astype(np.int64), z


# --------------------------------------------------------------------------- SVMRegressor, maps


def svm_kernel(x: np.ndarray, sv: np.ndarray, kernel_type: str, kernel_params) -> np.ndarray:
    """K[n, j] = k(x_n, sv_j): LINEAR x.sv, POLY (gamma x.sv + coef0)^degree, RBF exp(-gamma |x-sv|^2),
    SIGMOID tanh(gamma x.sv + coef0); kernel_params = (gamma, coef0, degree)."""
    gamma, coef0, degree = (list(kernel_params) + [0.0, 0.0, 0.0])[:3] if kernel_params else (0.0, 0.0, 0.0)
    k = str(kernel_type).upper()
    dot = x @ sv.T
    if k == "LINEAR":
        return dot
    if k == "POLY":
        return (gamma * dot + coef0) ** int(degree)
    if k == "SIGMOID":
        return np.tanh(gamma * dot + coef0)
    if k == "RBF":
        d2 = (x * x).sum(1)[:, None] - 2 * dot + (sv * sv).sum(1)[None, :]
        return np.exp(-gamma * np.maximum(d2, 0))
    raise KernelError(f"SVM: kernel_type must be LINEAR, POLY, RBF or SIGMOID, got {kernel_type!r}")


@op("onnx-ml:SVMRegressor-1")
def svm_regressor(
    X,
    /,
    *,
    coefficients=None,
    kernel_params=None,
    kernel_type="LINEAR",
    n_supports=0,
    one_class=0,
    post_transform="NONE",
    rho=None,
    support_vectors=None,
):
    """s = sum_j coefficients[j] k(x, support_vectors[j]) + rho[0] (with n_supports = 0: the linear
    s = x . coefficients + rho[0]); Y = post_transform(s), or sign(s) in {1, -1} when one_class.

    X (N, F) or (F,) numeric; Y (N, 1) float32. Computed in float64.
    """
    x = _numeric_2d(X, "SVMRegressor").astype(np.float64)
    t = _enum(post_transform, TRANSFORMS, "SVMRegressor", "post_transform")
    c = np.asarray(coefficients if coefficients is not None else [], np.float64).reshape(-1)
    r = float(rho[0]) if rho is not None and len(rho) else 0.0
    f = x.shape[1]
    ns = int(n_supports)
    if ns > 0:
        sv = np.asarray(support_vectors if support_vectors is not None else [], np.float64).reshape(-1)
        if sv.size != ns * f or c.size != ns:
            raise KernelError(
                f"SVMRegressor: {ns} support vectors need {ns * f} support_vectors values and {ns} "
                f"coefficients, got {sv.size} and {c.size}"
            )
        s = svm_kernel(x, sv.reshape(ns, f), kernel_type, kernel_params) @ c + r
    else:
        if c.size != f:
            raise KernelError(f"SVMRegressor: a linear SVM needs {f} coefficients, got {c.size}")
        s = x @ c + r
    s = s.reshape(-1, 1)
    if int(one_class):
        return np.where(s > 0, 1.0, -1.0).astype(np.float32)
    return post_transform_scores(s.astype(np.float32), t).astype(np.float32, copy=False)


# --------------------------------------------------------------------------- SVMClassifier


def _pairwise_coupling(r: np.ndarray) -> np.ndarray:
    """Class probabilities p (N, k) from pairwise probabilities r[n, i, j] = P(i | i or j), by the
    fixed-point iteration of Wu, Lin and Weng (2004) (the one libsvm uses), for all samples at once:
    minimize p^T Q p with Q[t, t] = sum_{j != t} r[j, t]^2, Q[t, j] = -r[j, t] r[t, j]."""
    n, k = r.shape[:2]
    off = ~np.eye(k, dtype=bool)
    rt = np.swapaxes(r, 1, 2)
    Q = -rt * r * off
    Q[:, np.arange(k), np.arange(k)] = ((rt**2) * off).sum(axis=2)
    p = np.full((n, k), 1.0 / k)
    eps = 0.005 / k
    active = np.ones(n, bool)
    for _ in range(max(100, k)):  # iterations of the solver, vectorized over samples
        Qp = np.einsum("nij,nj->ni", Q, p)
        pQp = (p * Qp).sum(axis=1)
        active &= np.abs(Qp - pQp[:, None]).max(axis=1) >= eps
        if not active.any():
            break
        a = active[:, None]
        for t in range(k):
            diff = (pQp - Qp[:, t]) / Q[:, t, t]
            diff = np.where(active, diff, 0.0)
            p[:, t] += diff
            pQp = (pQp + diff * (diff * Q[:, t, t] + 2 * Qp[:, t])) / (1 + diff) ** 2
            p = np.where(a, p / (1 + diff)[:, None], p)
            Qp = np.where(a, (Qp + diff[:, None] * Q[:, t, :]) / (1 + diff)[:, None], Qp)
    return p


@op("onnx-ml:SVMClassifier-1")
def svm_classifier(
    X,
    /,
    *,
    classlabels_ints=None,
    classlabels_strings=None,
    coefficients=None,
    kernel_params=None,
    kernel_type="LINEAR",
    post_transform="NONE",
    prob_a=None,
    prob_b=None,
    rho=None,
    support_vectors=None,
    vectors_per_class=None,
):
    """One-vs-one SVM (libsvm layout): for classes i < j (pair p),
    d_p = rho[p] + sum_{v in i} coef[j-1, v] k(x, sv_v) + sum_{v in j} coef[i, v] k(x, sv_v);
    d_p > 0 votes for i, else j. With prob_a/prob_b, Z = class probabilities coupled from the
    pairwise 1 - sigmoid(d_p prob_a[p] + prob_b[p]), else Z = the decision values; post_transform
    is applied to Z; Y = the class with most votes (first on ties), as onnxruntime.
    Without support vectors (vectors_per_class empty) the model is linear: Z[e] = x . coef[e] + rho[0],
    Y = argmax Z. With one decision value d (two classes) Z = (-d, d) (NONE, LOGISTIC: of that
    pair), (1 - d, d) for SOFTMAX / SOFTMAX_ZERO (a softmax of one value is skipped).
    X (N, F) numeric; Y (N,) int64 or strings; Z float32.
    """
    x = _numeric_2d(X, "SVMClassifier").astype(np.float64)
    t = _enum(post_transform, TRANSFORMS, "SVMClassifier", "post_transform")
    if classlabels_ints is not None and classlabels_strings is not None:
        raise KernelError("SVMClassifier: only one of classlabels_ints and classlabels_strings may be given")
    labels = (
        np.asarray(classlabels_strings, dtype=object)
        if classlabels_strings is not None
        else np.asarray(classlabels_ints if classlabels_ints is not None else [], np.int64)
    )
    E = max(labels.size, 1)
    c = np.asarray(coefficients if coefficients is not None else [], np.float64).reshape(-1)
    r = np.asarray(rho if rho is not None else [0.0], np.float64).reshape(-1)
    vpc = np.asarray(vectors_per_class if vectors_per_class is not None else [], np.int64).reshape(-1)
    V, (N, F) = int(vpc.sum()), x.shape
    votes = None
    if V > 0:
        if vpc.size != E or (vpc < 0).any():
            raise KernelError(f"SVMClassifier: vectors_per_class must have one count per class ({E})")
        sv = np.asarray(support_vectors if support_vectors is not None else [], np.float64).reshape(-1)
        P = E * (E - 1) // 2
        if sv.size != V * F or c.size != (E - 1) * V or r.size < P:
            raise KernelError(
                f"SVMClassifier: {V} support vectors of {F} features need {V * F} support_vectors, "
                f"{(E - 1) * V} coefficients and {P} rho values; got {sv.size}, {c.size}, {r.size}"
            )
        kmat = svm_kernel(x, sv.reshape(V, F), kernel_type, kernel_params)  # (N, V)
        coef = c.reshape(E - 1, V)
        start = np.concatenate([[0], np.cumsum(vpc)])
        dec = np.empty((N, P))
        votes = np.zeros((N, E), np.int64)
        p = 0
        for i in range(E):  # over class pairs
            si = slice(start[i], start[i + 1])
            for j in range(i + 1, E):
                sj = slice(start[j], start[j + 1])
                dec[:, p] = r[p] + kmat[:, si] @ coef[j - 1, si] + kmat[:, sj] @ coef[i, sj]
                votes[:, i] += dec[:, p] > 0
                votes[:, j] += dec[:, p] <= 0
                p += 1
    else:
        if c.size != E * F:
            raise KernelError(f"SVMClassifier: a linear SVM needs {E} x {F} coefficients, got {c.size}")
        dec = x @ c.reshape(E, F).T + r[0]
    pa = np.asarray(prob_a if prob_a is not None else [], np.float64).reshape(-1)
    pb = np.asarray(prob_b if prob_b is not None else [], np.float64).reshape(-1)
    if pa.size and V > 0:
        if pa.size != dec.shape[1] or pb.size != pa.size:
            raise KernelError(f"SVMClassifier: prob_a and prob_b need {dec.shape[1]} values each")
        pair = np.clip(1 - sigmoid(dec * pa + pb), 1e-7, 1 - 1e-7)
        rr = np.zeros((N, E, E))
        iu, ju = np.triu_indices(E, 1)
        rr[:, iu, ju] = pair
        rr[:, ju, iu] = 1 - pair
        z = post_transform_scores(_pairwise_coupling(rr).astype(np.float32), t)
        idx = np.argmax(votes, axis=1)
    else:
        z = dec
        if votes is not None:
            idx = np.argmax(votes, axis=1)
        elif z.shape[1] == 1:
            idx = (z[:, 0] > 0).astype(np.int64)
        else:
            idx = np.argmax(z, axis=1)
        if z.shape[1] == 1 and labels.size == 2 and t in (1, 3):  # a softmax of one value is skipped
            z = np.concatenate([1 - z, z], axis=1).astype(np.float32)
        else:
            if z.shape[1] == 1 and labels.size == 2:
                z = np.concatenate([-z, z], axis=1)
            z = post_transform_scores(z.astype(np.float32), t)
    if labels.size == 0:
        return idx.astype(np.int64), z.astype(np.float32)
    if idx.size and idx.max() >= labels.size:
        raise KernelError(f"SVMClassifier: {labels.size} class labels for class index {idx.max()}")
    return labels[idx], z.astype(np.float32)
