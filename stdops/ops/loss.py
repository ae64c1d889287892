"""Loss kernels: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import op
from .activation import log_softmax
from .dtypes import compute_dtype, is_float

_REDUCTIONS = ("none", "sum", "mean")


def _nll(logp: np.ndarray, target, weight, ignore_index, reduction: str, what: str) -> np.ndarray:
    """The weighted NLL of log-probabilities ``logp`` [N, C, d...] at class indices ``target`` [N, d...]."""
    if reduction not in _REDUCTIONS:
        raise KernelError(f"{what}: reduction must be one of {', '.join(_REDUCTIONS)}, got {reduction!r}")
    if logp.ndim < 2:
        raise KernelError(f"{what}: input must have shape [N, C, d1, ...], got {logp.shape}")
    t = np.asarray(target)
    if t.dtype.kind not in "iu":
        raise KernelError(f"{what}: target must be an integer tensor, got {t.dtype}")
    n, c = logp.shape[:2]
    if t.shape != (n,) + logp.shape[2:]:
        raise KernelError(
            f"{what}: target shape {t.shape} does not fit input shape {logp.shape} (expected {(n,) + logp.shape[2:]})"
        )
    t = t.astype(np.int64)
    keep = np.ones(t.shape, np.bool_) if ignore_index is None else t != int(ignore_index)
    safe = np.where(keep, t, 0)
    if ((safe < 0) | (safe >= c)).any():
        bad = t[keep & ((t < 0) | (t >= c))]
        raise KernelError(f"{what}: target value {int(bad.reshape(-1)[0])} out of range [0, {c})")
    picked = np.take_along_axis(logp, safe[:, None], axis=1)[:, 0]
    if weight is not None:
        w = np.asarray(weight)
        if w.shape != (c,):
            raise KernelError(f"{what}: weight must have shape ({c},), got {w.shape}")
        ws = w.astype(logp.dtype)[safe] * keep.astype(logp.dtype)
    else:
        ws = keep.astype(logp.dtype)
    loss = -picked * ws
    if reduction == "none":
        return loss.astype(logp.dtype, copy=False)
    total = loss.sum(dtype=logp.dtype)
    if reduction == "sum":
        return np.asarray(total, logp.dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(total / ws.sum(dtype=logp.dtype), logp.dtype)


def _work(x, what: str) -> tuple[np.ndarray, np.dtype]:
    a = np.asarray(x)
    if not is_float(a.dtype):
        raise KernelError(f"{what}: input must be a float tensor, got {a.dtype}")
    # float16/bfloat16 are computed in float32 and returned in their own type
    work = a.astype(compute_dtype(a.dtype), copy=False)
    return work, a.dtype


@op("onnx:NegativeLogLikelihoodLoss-12")
def negative_log_likelihood_loss(input, target, weight=None, /, *, ignore_index=None, reduction="mean"):
    """loss[n, d...] = -input[n, target[n, d...], d...] * weight[target[n, d...]] (0 where
    target == ignore_index); reduction "none" keeps it, "sum" adds it, "mean" divides the sum by the
    sum of the applied weights.

    input [N, C, d1..dk] float, target [N, d1..dk] int32/int64, weight [C]; output [N, d1..dk]
    (none) or a scalar, dtype of input.
    """
    x, dt = _work(input, "NegativeLogLikelihoodLoss")
    out = _nll(x, target, weight, ignore_index, reduction, "NegativeLogLikelihoodLoss")
    return out.astype(dt, copy=False)


@op("onnx:SoftmaxCrossEntropyLoss-12")
def softmax_cross_entropy_loss(scores, labels, weights=None, /, *, ignore_index=None, reduction="mean"):
    """log_prob = log_softmax(scores, axis=1); output = NegativeLogLikelihoodLoss(log_prob, labels,
    weights, ignore_index, reduction).

    scores [N, C, d1..dk] float, labels [N, d1..dk] int32/int64, weights [C]. Outputs: the loss
    ([N, d1..dk] for "none", else a scalar) and log_prob (shape of scores), both in the scores' dtype.
    """
    x, dt = _work(scores, "SoftmaxCrossEntropyLoss")
    if x.ndim < 2:
        raise KernelError(f"SoftmaxCrossEntropyLoss: scores must have shape [N, C, d1, ...], got {x.shape}")
    logp = log_softmax(x, axis=1)
    out = _nll(logp, labels, weights, ignore_index, reduction, "SoftmaxCrossEntropyLoss")
    return out.astype(dt, copy=False), logp.astype(dt, copy=False)
