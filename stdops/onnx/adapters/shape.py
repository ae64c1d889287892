"""ONNX version adapters for the shape kernels.

Older versions held as attributes what newer ones take as inputs (Reshape-1 ``shape``, Squeeze-1 and
Unsqueeze-1 ``axes``, Split-2 ``split``, Slice-1 ``starts``/``ends``/``axes``, Pad-2 ``pads``/``value``);
Concat-1 had a default axis of 1; Tile-1 tiled one axis; EyeLike's ``dtype`` is a TensorProto enum;
Split needs the node's output count; Constant's ``sparse_value`` is densified here.
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelError
from ...ops.axes import int_scalar
from ..opset import BindContext, adapter


def _int_tensor(v, what: str) -> np.ndarray:
    """Split-1's ``split`` and Tile-1's ``tiles``/``axis`` inputs are typed T (float in the spec):
    accept integral floats as int64."""
    a = np.asarray(v)
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
            raise KernelError(f"{what} must hold whole numbers, got {a.tolist()}")
        a = a.astype(np.int64)
    return a


def _ints_attr(ctx: BindContext, name: str, required: bool = True):
    if name not in ctx.attrs:
        if required:
            raise ctx.error(f"missing required attribute {name}")
        return None
    return np.asarray(list(ctx.attrs.pop(name)), dtype=np.int64)


@adapter("Reshape", 1)
def _reshape_attr(ctx: BindContext):
    """Reshape-1: ``shape`` is an attribute; ``consumed_inputs`` is a legacy hint to drop."""
    ctx.attrs.pop("consumed_inputs", None)
    shape = _ints_attr(ctx, "shape")
    fn = ctx.bind()
    return lambda data: fn(data, shape)


@adapter("Squeeze", 1)
def _squeeze_attr(ctx: BindContext):
    """Squeeze-1 and -11: ``axes`` is an optional attribute."""
    axes = _ints_attr(ctx, "axes", required=False)
    fn = ctx.bind()
    return lambda data: fn(data, axes)


@adapter("Unsqueeze", 1)
def _unsqueeze_attr(ctx: BindContext):
    """Unsqueeze-1 and -11: ``axes`` is a required attribute."""
    axes = _ints_attr(ctx, "axes")
    fn = ctx.bind()
    return lambda data: fn(data, axes)


@adapter("Concat", 1)
def _concat_default_axis(ctx: BindContext):
    """Concat-1: ``axis`` is optional and defaults to 1."""
    ctx.attrs.setdefault("axis", 1)
    return ctx.bind()


@adapter("Split", 1, 2)
def _split_attr(ctx: BindContext):
    """Split-1, -2 and -11: ``split`` is an attribute (Split-1 also accepts it as a second input)."""
    split = _ints_attr(ctx, "split", required=False)
    ctx.attrs.setdefault("axis", 0)
    fn = ctx.bind(n_outputs=ctx.n_outputs)
    if ctx.since == 1 and ctx.n_inputs > 1 and ctx.input_present[1]:
        if split is not None:
            raise ctx.error("split is given both as an attribute and as an input")
        return lambda x, s: fn(x, None if s is None else _int_tensor(s, "split"))
    return lambda x, *_: fn(x, split)


@adapter("Split", 13, 18)
def _split_outputs(ctx: BindContext):
    """Split-13 and -18: the kernel needs the node's output count for an equal split."""
    return ctx.bind(n_outputs=ctx.n_outputs)


@adapter("Slice", 1)
def _slice_attr(ctx: BindContext):
    """Slice-1: ``starts``, ``ends`` and ``axes`` are attributes; no steps."""
    starts = _ints_attr(ctx, "starts")
    ends = _ints_attr(ctx, "ends")
    axes = _ints_attr(ctx, "axes", required=False)
    fn = ctx.bind()
    return lambda data: fn(data, starts, ends, axes)


@adapter("Tile", 1)
def _tile_one_axis(ctx: BindContext):
    """Tile-1: inputs (input, tiles, axis) repeat the input ``tiles`` times along one ``axis``."""
    fn = ctx.bind()

    def tile_1(x, tiles, axis):
        x = np.asarray(x)
        a = int_scalar(_int_tensor(axis, "axis"), "axis")
        if not -x.ndim <= a < x.ndim:
            raise KernelError(f"axis {a} is out of range for rank {x.ndim}")
        reps = np.ones(x.ndim, dtype=np.int64)
        reps[a] = int_scalar(_int_tensor(tiles, "tiles"), "tiles")
        return fn(x, reps)

    return tile_1


@adapter("Pad", 1, 2)
def _pad_attr(ctx: BindContext):
    """Pad-1 (``paddings``) and Pad-2 (``pads``): the pads and the float ``value`` are attributes."""
    name = "paddings" if ctx.since == 1 else "pads"
    pads = _ints_attr(ctx, name)
    value = float(ctx.attrs.pop("value", 0.0))
    fn = ctx.bind()

    def pad_attr(data):
        x = np.asarray(data)
        cv = np.asarray(value).astype(x.dtype) if x.dtype.kind in "fcbiu" else None
        return fn(x, pads, cv)

    return pad_attr


@adapter("Constant", 1)
def _constant(ctx: BindContext):
    """Constant: a sparse_value (SparseTensorProto) is densified once, at load time."""
    sv = ctx.attrs.get("sparse_value")
    if sv is not None and not isinstance(sv, np.ndarray):
        ctx.attrs.pop("sparse_value")
        if "value" in ctx.attrs:
            raise ctx.error("Constant has both value and sparse_value")
        ctx.attrs["value"] = _densify(ctx, sv)
    fn = ctx.bind()
    return lambda: fn()


def _densify(ctx: BindContext, sp) -> np.ndarray:
    try:
        from onnx import numpy_helper

        values = numpy_helper.to_array(sp.values)
        indices = numpy_helper.to_array(sp.indices).astype(np.int64)
        dims = [int(d) for d in sp.dims]
    except Exception as e:  # noqa: BLE001 - whatever it is, the model is at fault
        raise ctx.error(f"sparse_value cannot be read ({e})") from None
    from ...limits import check_elements

    check_elements(dims, "Constant sparse_value")
    dense = np.zeros(int(np.prod(dims, dtype=np.int64)), dtype=values.dtype)
    n = int(values.size)
    if indices.ndim == 2 and indices.shape == (n, len(dims)):
        flat = np.ravel_multi_index(tuple(indices.T), dims) if n else np.zeros(0, np.int64)
    elif indices.ndim == 1 and indices.size == n:
        flat = indices
    else:
        raise ctx.error(f"sparse_value indices of shape {indices.shape} do not fit {n} values")
    if n and (flat.min() < 0 or flat.max() >= dense.size):
        raise ctx.error("sparse_value indices are out of range")
    dense[flat] = values.reshape(-1)
    return dense.reshape(dims)


@adapter("EyeLike", 9)
def _eye_like_dtype(ctx: BindContext):
    """EyeLike: ``dtype`` is a TensorProto enum; convert it to a numpy dtype."""
    ctx.dtype_attr("dtype", None)
    return ctx.bind()
