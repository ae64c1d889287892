"""Shape and layout kernels: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split, Slice,
Expand, Tile, Shape, Size, Identity.

Data-movement kernels work on every dtype, string tensors (dtype object) included. Shape-like inputs
(``shape``, ``axes``, ``starts`` ...) are int64 tensors in ONNX; lists and tuples are accepted too.
Generators (Constant, Range, EyeLike, ...) live in :mod:`.shape_gen`, padding and block layout ops
(Pad, CenterCropPad, DepthToSpace, SpaceToDepth) in :mod:`.shape_pad`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from ._registry import op
from .axes import int_list, int_scalar, norm_axes, norm_axis  # noqa: F401  (used by the adapters too)

__all__ = [
    "reshape",
    "flatten",
    "transpose",
    "squeeze",
    "unsqueeze",
    "concat",
    "split",
    "slice_",
    "expand",
    "tile",
    "shape",
    "size",
    "identity",
]


# --------------------------------------------------------------------------- helpers
def _arr(x, what: str = "input") -> np.ndarray:
    if x is None:
        raise KernelError(f"{what} is missing")
    return np.asarray(x)


# --------------------------------------------------------------------------- reshape family
def prepare_reshape(constants: tuple, attrs: dict):
    """Load time, ``shape`` a constant: its dimensions read once, the step one ndarray.reshape (a view, as the
    kernel's). Only a shape whose meaning does not depend on the input's dimensions is prepared (no 0 to copy,
    no -1 beside a 0); any array the reshape refuses goes to the kernel, which raises its error."""
    shape = constants[1] if len(constants) > 1 else None
    if shape is None:
        return None
    try:
        dims = tuple(int_list(shape, "shape"))
    except KernelError:
        return None
    if any(d < -1 for d in dims) or dims.count(-1) > 1 or (0 in dims and (-1 in dims or not attrs["allowzero"])):
        return None
    allowzero = attrs["allowzero"]

    def reshape_prepared(data, shape_):
        if type(data) is np.ndarray:
            try:
                return data.reshape(dims)
            except ValueError:
                pass
        return reshape(data, shape_, allowzero=allowzero)

    return reshape_prepared


@op("onnx:Reshape-5", prepare=prepare_reshape)
def reshape(data, shape, /, *, allowzero=0):
    """y = data with the shape ``shape``; a 0 copies the input dimension (unless ``allowzero``),
    one -1 is inferred from the element count.

    Same dtype as ``data``; ``shape`` is an int64 1-D tensor; element counts must agree.
    """
    x = _arr(data, "data")
    dims = int_list(shape, "shape")
    if not allowzero:
        for i, d in enumerate(dims):
            if d == 0:
                if i >= x.ndim:
                    raise KernelError(
                        f"shape {dims}: 0 at position {i} has no input dimension to copy (input shape {x.shape})"
                    )
                dims[i] = x.shape[i]
    if any(d < -1 for d in dims):
        raise KernelError(f"shape {dims}: negative dimension other than -1")
    n_infer = dims.count(-1)
    if n_infer > 1:
        raise KernelError(f"shape {dims}: at most one dimension may be -1")
    if n_infer:
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        if allowzero and 0 in dims:
            raise KernelError(f"shape {dims}: with allowzero=1, 0 and -1 cannot be combined")
        if known == 0 or x.size % known:
            raise KernelError(f"cannot reshape {x.shape} ({x.size} elements) to {dims}")
        dims[dims.index(-1)] = x.size // known
    if int(np.prod(dims, dtype=np.int64)) != x.size:
        raise KernelError(f"cannot reshape {x.shape} ({x.size} elements) to {dims}")
    return x.reshape(dims)


@op("onnx:Flatten-1")
def flatten(input, /, *, axis=1):
    """y = input reshaped to (prod(shape[:axis]), prod(shape[axis:])).

    ``axis`` in [-r, r] (negative counts from the back). Same dtype as the input; always 2-D.
    """
    x = input if type(input) is np.ndarray else _arr(input)
    r = x.ndim
    a = int(axis)
    if not -r <= a <= r:
        raise KernelError(f"axis {a} is out of range [-{r}, {r}] for rank {r}")
    if a < 0:
        a += r
    # Python integers (a network's Flatten runs with the caches cold, after its largest layers: np.prod's
    # two reductions were 50 us of ResNet-18's run)
    return x.reshape(math.prod(x.shape[:a]), math.prod(x.shape[a:]))


@op("onnx:Transpose-1")
def transpose(data, /, *, perm=None):
    """y = data with its axes permuted: y.shape[i] = data.shape[perm[i]] (default: reversed).

    Same dtype as ``data``.
    """
    x = _arr(data, "data")
    if perm is None:
        return x.transpose().copy()
    p = int_list(perm, "perm")
    if sorted(p) != list(range(x.ndim)):
        raise KernelError(f"perm {p} is not a permutation of the {x.ndim} axes of shape {x.shape}")
    return x.transpose(p).copy()


@op("onnx:Squeeze-13")
def squeeze(data, axes=None, /):
    """y = data without the size-1 dimensions listed in ``axes`` (all size-1 dimensions if omitted).

    Same dtype as ``data``; a listed axis whose size is not 1 is an error.
    """
    x = _arr(data, "data")
    if axes is None:
        return x.reshape([d for d in x.shape if d != 1])
    ax = norm_axes(axes, x.ndim)
    bad = [a for a in ax if x.shape[a] != 1]
    if bad:
        raise KernelError(f"cannot squeeze axes {bad} of shape {x.shape}: size is not 1")
    return x.reshape([d for i, d in enumerate(x.shape) if i not in ax])


@op("onnx:Unsqueeze-13")
def unsqueeze(data, axes, /):
    """y = data with size-1 dimensions inserted at ``axes`` (positions in the output).

    Output rank = rank(data) + len(axes); axes in [-out_rank, out_rank-1], no repeats. Same dtype.
    """
    x = _arr(data, "data")
    if axes is None:
        raise KernelError("axes is missing")
    ax_in = int_list(axes, "axes")
    out_rank = x.ndim + len(ax_in)
    ax = set(norm_axes(ax_in, out_rank))
    it = iter(x.shape)
    return x.reshape([1 if i in ax else next(it) for i in range(out_rank)])


@op("onnx:Concat-4")
def concat(*inputs, axis):
    """y = the inputs joined along ``axis`` (negative counts from the back).

    All inputs have the same rank, dtype and shape except along ``axis``.
    """
    if not inputs:
        raise KernelError("Concat needs at least one input")
    xs = [_arr(x, f"input {i}") for i, x in enumerate(inputs)]
    r = xs[0].ndim
    if r == 0:
        raise KernelError("cannot concatenate 0-d tensors")
    a = norm_axis(axis, r)
    for i, x in enumerate(xs):
        if x.ndim != r or x.shape[:a] != xs[0].shape[:a] or x.shape[a + 1 :] != xs[0].shape[a + 1 :]:
            raise KernelError(f"input {i} has shape {x.shape}, which does not fit {xs[0].shape} outside axis {a}")
    dt = xs[0].dtype
    if any(x.dtype != dt for x in xs):
        raise KernelError(f"inputs have different dtypes: {sorted({str(x.dtype) for x in xs})}")
    return np.concatenate(xs, axis=a)


@op("onnx:Split-18")
def split(input, split=None, /, *, axis=0, num_outputs=None, n_outputs=None):
    """outputs[i] = input[..., o_i : o_i + split[i], ...] along ``axis``, o_i = sum(split[:i]).

    Without ``split``: ``num_outputs`` (or, failing that, ``n_outputs``, the node's output count, which
    the front end binds) parts of size ceil(d / n), the last one smaller; without ``num_outputs`` the
    parts must be equal. Returns a tuple of arrays of the input dtype.
    """
    x = _arr(input)
    a = norm_axis(axis, x.ndim)
    d = x.shape[a]
    if split is not None:
        sizes = int_list(split, "split")
        if any(s < 0 for s in sizes):
            raise KernelError(f"split {sizes} has negative sizes")
        if sum(sizes) != d:
            raise KernelError(f"split {sizes} sums to {sum(sizes)}, axis {a} has size {d}")
        if n_outputs is not None and len(sizes) != int(n_outputs):
            raise KernelError(f"split has {len(sizes)} entries for {n_outputs} outputs")
    else:
        n = num_outputs if num_outputs is not None else n_outputs
        if n is None:
            raise KernelError("Split needs the split sizes, num_outputs, or the number of outputs")
        n = int(n)
        if n < 1:
            raise KernelError(f"cannot split into {n} outputs")
        # num_outputs is the node's output count (Split-18): a file that says otherwise must not make us build
        # the parts it names (2**31 empty slices of a 0-length axis)
        if num_outputs is not None and n_outputs is not None and n != int(n_outputs):
            raise KernelError(f"num_outputs {n} differs from the node's {n_outputs} outputs")
        check_elements((n,), "Split outputs")
        if num_outputs is None and d % n:
            raise KernelError(f"axis {a} of size {d} does not split into {n} equal parts")
        chunk = -(-d // n)
        last = d - chunk * (n - 1)
        if last < 0:
            raise KernelError(f"axis {a} of size {d} cannot be split into {n} parts of {chunk}")
        sizes = [chunk] * (n - 1) + [last]
    bounds = list(itertools.accumulate(sizes, initial=0))  # (np.cumsum of a short list: ~3 us more a call)
    idx = [slice(None)] * x.ndim
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        idx[a] = slice(lo, hi)
        out.append(x[tuple(idx)].copy())
    return tuple(out)


@op("onnx:Slice-10")
def slice_(data, starts, ends, axes=None, steps=None, /):
    """y = data[starts[i]:ends[i]:steps[i]] along each axes[i] (ONNX clamping rules).

    Negative starts/ends count from the back; starts clamp to [0, d] (step > 0) or [0, d-1] (step < 0),
    ends to [0, d] or [-1, d-1]. axes default to 0..len(starts)-1, steps to 1; step 0 is an error.
    Same dtype as ``data``.
    """
    x = _arr(data, "data")
    st = int_list(starts, "starts")
    en = int_list(ends, "ends")
    if len(st) != len(en):
        raise KernelError(f"starts ({len(st)}) and ends ({len(en)}) differ in length")
    ax = list(range(len(st))) if axes is None else norm_axes(axes, x.ndim)
    sp = [1] * len(st) if steps is None else int_list(steps, "steps")
    if len(ax) != len(st) or len(sp) != len(st):
        raise KernelError(f"starts, ends, axes, steps lengths differ: {len(st)}, {len(en)}, {len(ax)}, {len(sp)}")
    if any(a >= x.ndim for a in ax):
        raise KernelError(f"{len(st)} starts for a tensor of rank {x.ndim}")
    idx = [slice(None)] * x.ndim
    for a, s, e, step in zip(ax, st, en, sp):
        d = x.shape[a]
        if step == 0:
            raise KernelError(f"step 0 on axis {a}")
        if s < 0:
            s += d
        if e < 0:
            e += d
        if step > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
            idx[a] = slice(s, e, step)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
            idx[a] = slice(s, e if e >= 0 else None, step) if s >= 0 else slice(0, 0)
    return x[tuple(idx)].copy()


@op("onnx:Expand-8")
def expand(input, shape, /):
    """y = input broadcast against ``shape`` (numpy rules: input * ones(shape)).

    Output shape = broadcast(input.shape, shape), which may differ from ``shape``. Same dtype.
    """
    x = _arr(input)
    dims = int_list(shape, "shape")
    if any(d < 0 for d in dims):
        raise KernelError(f"shape {dims} has negative dimensions")
    try:
        out = np.broadcast_shapes(x.shape, tuple(dims))
    except ValueError:
        raise KernelError(f"cannot expand shape {x.shape} to {dims}") from None
    check_elements(out, "Expand output")
    return np.array(np.broadcast_to(x, out), copy=True)


@op("onnx:Tile-6")
def tile(input, repeats, /):
    """y = input repeated repeats[i] times along each axis i (numpy.tile without broadcasting).

    len(repeats) = rank(input), repeats >= 0. Same dtype.
    """
    x = _arr(input)
    reps = int_list(repeats, "repeats")
    if len(reps) != x.ndim:
        raise KernelError(f"repeats {reps} must have one entry per axis of shape {x.shape}")
    if any(r < 0 for r in reps):
        raise KernelError(f"repeats {reps} has negative entries")
    check_elements([d * r for d, r in zip(x.shape, reps)], "Tile output")
    return np.tile(x, reps) if x.ndim else x.copy()


@op("onnx:Shape-1")
def shape(data, /, *, start=0, end=None):
    """y = data.shape[start:end] as int64 (start/end clamped to [0, r] after adding r to negatives).

    1-D int64.
    """
    dims = np.shape(data)
    return np.array(dims[slice(int(start), None if end is None else int(end))], dtype=np.int64)


@op("onnx:Size-1")
def size(data, /):
    """y = the number of elements of ``data``. 0-d int64."""
    return np.array(np.size(data), dtype=np.int64)


@op("onnx:Identity-1")
def identity(input, /):
    """y = input. Any type: a tensor, a sequence (list) or an empty optional (None) passes unchanged."""
    return input
