"""ai.onnx.preview.training kernels: the optimizers Adagrad, Adam and Momentum.

Each node updates n tensors at once: the inputs are R, T, then n tensors per role (X1..Xn,
G1..Gn, ...), the outputs n tensors per role (X1_new..Xn_new, ...). Scalar factors are computed
in float64 and applied in each tensor's own dtype (float32 stays float32).
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import op


def _scalars(R, T, opname: str) -> tuple[float, int]:
    r, t = np.asarray(R), np.asarray(T)
    if r.size != 1 or r.dtype.kind != "f":
        raise KernelError(f"{opname}: R must be a float scalar, got dtype {r.dtype} shape {r.shape}")
    if t.size != 1 or t.dtype.kind not in "iu":
        raise KernelError(f"{opname}: T must be an int64 scalar, got dtype {t.dtype} shape {t.shape}")
    return float(r.reshape(-1)[0]), int(t.reshape(-1)[0])


def _groups(inputs, roles: int, opname: str, names: str) -> list[tuple[np.ndarray, ...]]:
    """Split the variadic tensors into per-tensor tuples (X_i, G_i, ...)."""
    if not inputs or len(inputs) % roles:
        raise KernelError(
            f"{opname}: expects {roles} tensors ({names}) per optimized tensor after R and T, got {len(inputs)}"
        )
    n = len(inputs) // roles
    arrs = [np.asarray(a) for a in inputs]
    out = []
    for i in range(n):
        g = tuple(arrs[i + k * n] for k in range(roles))
        x = g[0]
        if x.dtype.kind != "f":
            raise KernelError(f"{opname}: tensor {i + 1} must be float, got {x.dtype}")
        try:
            np.broadcast_shapes(*(a.shape for a in g))
        except ValueError:
            raise KernelError(
                f"{opname}: tensor {i + 1}: the shapes of {names} ({', '.join(str(a.shape) for a in g)})"
                f" do not broadcast"
            ) from None
        out.append(tuple(a.astype(x.dtype, copy=False) for a in g))
    return out


@op("onnx-training:Adagrad-1")
def adagrad(R, T, /, *inputs, decay_factor=0.0, epsilon=1e-6, norm_coefficient=0.0):
    """r = R / (1 + T * decay_factor); G' = norm_coefficient * X + G; H_new = H + G'^2;
    X_new = X - r * G' / (sqrt(H_new) + epsilon).

    Inputs R (float scalar), T (int64 scalar), X1..Xn, G1..Gn, H1..Hn; outputs X1_new..Xn_new,
    H1_new..Hn_new, each with its X's shape and dtype.
    """
    r, t = _scalars(R, T, "Adagrad")
    groups = _groups(inputs, 3, "Adagrad", "X, G, H")
    lr = r / (1.0 + t * float(decay_factor))
    xs, hs = [], []
    for x, g, h in groups:
        c = x.dtype.type
        gr = c(norm_coefficient) * x + g
        h_new = h + gr * gr
        xs.append(x - c(lr) * gr / (np.sqrt(h_new) + c(epsilon)))
        hs.append(h_new)
    return (*xs, *hs)


@op("onnx-training:Adam-1")
def adam(R, T, /, *inputs, alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.0, norm_coefficient_post=0.0):
    """G' = norm_coefficient * X + G; V_new = alpha V + (1 - alpha) G'; H_new = beta H + (1 - beta) G'^2;
    R' = R sqrt(1 - beta^T) / (1 - alpha^T) if T > 0 else R;
    X_new = (1 - norm_coefficient_post) (X - R' V_new / (sqrt(H_new) + epsilon)).

    Inputs R, T, X1..Xn, G1..Gn, V1..Vn, H1..Hn; outputs X_new (n), V_new (n), H_new (n), each
    with its X's shape and dtype.
    """
    r, t = _scalars(R, T, "Adam")
    groups = _groups(inputs, 4, "Adam", "X, G, V, H")
    a, b = float(alpha), float(beta)
    lr = r * np.sqrt(1.0 - b**t) / (1.0 - a**t) if t > 0 else r
    xs, vs, hs = [], [], []
    for x, g, v, h in groups:
        c = x.dtype.type
        gr = c(norm_coefficient) * x + g
        v_new = c(a) * v + c(1.0 - a) * gr
        h_new = c(b) * h + c(1.0 - b) * gr * gr
        x_new = x - c(lr) * v_new / (np.sqrt(h_new) + c(epsilon))
        xs.append(c(1.0 - float(norm_coefficient_post)) * x_new)
        vs.append(v_new)
        hs.append(h_new)
    return (*xs, *vs, *hs)


@op("onnx-training:Momentum-1")
def momentum(R, T, /, *inputs, alpha, beta, mode, norm_coefficient):
    """G' = norm_coefficient * X + G; V_new = alpha V + (beta if T > 0 else 1) G';
    X_new = X - R V_new ("standard") or X - R (G' + alpha V_new) ("nesterov").

    Inputs R, T, X1..Xn, G1..Gn, V1..Vn; outputs X1_new..Xn_new, V1_new..Vn_new, each with its X's
    shape and dtype.
    """
    r, t = _scalars(R, T, "Momentum")
    if mode not in ("standard", "nesterov"):
        raise KernelError(f"Momentum: mode must be 'standard' or 'nesterov', got {mode!r}")
    groups = _groups(inputs, 3, "Momentum", "X, G, V")
    bt = float(beta) if t > 0 else 1.0
    xs, vs = [], []
    for x, g, v in groups:
        c = x.dtype.type
        gr = c(norm_coefficient) * x + g
        v_new = c(alpha) * v + c(bt) * gr
        step = v_new if mode == "standard" else gr + c(alpha) * v_new
        xs.append(x - c(r) * step)
        vs.append(v_new)
    return (*xs, *vs)
