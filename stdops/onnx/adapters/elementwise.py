"""ONNX version adapters for the elementwise kernels.

- opset-1 ops carried a ``consumed_inputs`` attribute (a memory hint without meaning): dropped;
- Add/Sub/Mul/Div/Pow/And/Or/Xor/Equal/Greater/Less before opset 7 broadcast only with
  ``broadcast=1``, aligning B to A's axes from ``axis`` (or by suffix) instead of NumPy-style;
- Clip before opset 11 took ``min``/``max`` as attributes.
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelError
from ..opset import BindContext, adapter


def _drop_consumed(ctx: BindContext):
    ctx.attrs.pop("consumed_inputs", None)
    return ctx.bind()


for _name in ("Neg", "Abs", "Reciprocal", "Sqrt", "Exp", "Log", "Floor", "Ceil", "Tanh", "Max", "Min", "Sum", "Mean"):
    adapter(_name, 1)(_drop_consumed)


def legacy_broadcast(a: np.ndarray, b: np.ndarray, broadcast: int, axis: int | None, op: str) -> np.ndarray:
    """B reshaped so that NumPy broadcasting gives the pre-opset-7 ``broadcast``/``axis`` result
    (output shape = A's shape)."""
    if not broadcast:
        if a.shape != b.shape:
            raise KernelError(f"{op}: shapes {a.shape} and {b.shape} differ and broadcast=0")
        return b
    if b.size == 1:
        return b.reshape(())
    if b.ndim > a.ndim:
        raise KernelError(f"{op}: B of shape {b.shape} cannot broadcast to A of shape {a.shape}")
    if axis is not None:
        ax = axis + a.ndim if axis < 0 else axis
        if ax < 0 or ax + b.ndim > a.ndim:
            raise KernelError(f"{op}: axis {axis} does not fit B of shape {b.shape} into A of shape {a.shape}")
        b = b.reshape(b.shape + (1,) * (a.ndim - ax - b.ndim))
        start = ax
    else:
        start = a.ndim - b.ndim
    if any(db not in (1, da) for da, db in zip(a.shape[start : start + b.ndim], b.shape[: b.ndim])):
        raise KernelError(
            f"{op}: B of shape {b.shape} does not match A of shape {a.shape}"
            + (f" at axis {axis}" if axis is not None else "")
        )
    return b


def _legacy_binary(ctx: BindContext):
    ctx.attrs.pop("consumed_inputs", None)
    broadcast = int(ctx.attrs.pop("broadcast", 0))
    axis = ctx.attrs.pop("axis", None)
    axis = None if axis is None else int(axis)
    fn = ctx.bind()
    op_type = ctx.op_type

    def run(a, b):
        a, b = np.asarray(a), np.asarray(b)
        return fn(a, legacy_broadcast(a, b, broadcast, axis, op_type))

    return run


for _name in ("Add", "Sub", "Mul", "Div"):
    adapter(_name, 1, 6)(_legacy_binary)
for _name in ("Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"):
    adapter(_name, 1)(_legacy_binary)


@adapter("Clip", 1, 6)
def _clip_attrs(ctx: BindContext):
    ctx.attrs.pop("consumed_inputs", None)
    lo, hi = ctx.attrs.pop("min", None), ctx.attrs.pop("max", None)
    fn = ctx.bind()
    lo = None if lo is None else np.asarray(lo, np.float64)
    hi = None if hi is None else np.asarray(hi, np.float64)
    return lambda x: fn(x, lo, hi)
