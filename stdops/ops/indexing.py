"""Indexing kernels: gathers, scatters, one-hot, non-zero, compress, top-k, unique, reversal.

Index inputs may be any integer dtype; negative indices count from the end of their axis;
an index outside ``[-s, s-1]`` raises :class:`KernelError` naming the op and the bad value.
Data movement is dtype-agnostic: string tensors (dtype object) pass through unchanged.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from ._registry import op
from .axes import norm_axis

_INT64_MAX = np.iinfo(np.int64).max


# ----------------------------------------------------------------------------------------- helpers
def _int_indices(indices, what: str) -> np.ndarray:
    """``indices`` as an integer ndarray (any width), or KernelError."""
    a = np.asarray(indices)
    if a.dtype.kind not in "iu":
        raise KernelError(f"{what}: indices must be an integer tensor, got {a.dtype}")
    return a


def _wrap(idx: np.ndarray, dim: int, what: str) -> np.ndarray:
    """int64 indices into an axis of size ``dim``: negatives wrapped, range checked."""
    if idx.size:
        lo, hi = idx.min(), idx.max()
        if hi >= dim or lo < -dim:
            bad = hi if hi >= dim else lo
            raise KernelError(f"{what}: index {int(bad)} out of range [{-dim}, {dim - 1}] for an axis of size {dim}")
        idx = idx.astype(np.int64, copy=False)
        if lo < 0:
            idx = np.where(idx < 0, idx + dim, idx)
    else:
        idx = idx.astype(np.int64, copy=False)
    return idx


def _along(idx: np.ndarray, axis: int) -> tuple:
    """The full advanced index selecting ``idx`` along ``axis`` and the element's own position
    on every other axis (GatherElements / ScatterElements addressing)."""
    r = idx.ndim
    key = []
    for d in range(r):  # a loop over axes
        if d == axis:
            key.append(idx)
        else:
            shape = [1] * r
            shape[d] = idx.shape[d]
            key.append(np.arange(idx.shape[d]).reshape(shape))
    return tuple(key)


_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter_into(out: np.ndarray, key: tuple, updates: np.ndarray, reduction: str, what: str) -> None:
    """out[key] = updates, or out[key] = f(out[key], updates) accumulated over duplicate keys."""
    updates = updates.astype(out.dtype, copy=False)
    if reduction == "none":
        out[key] = updates
        return
    ufunc = _REDUCTIONS.get(reduction)
    if ufunc is None:
        raise KernelError(f"{what}: unknown reduction {reduction!r} (none, add, mul, max, min)")
    ufunc.at(out, key, updates)


# ----------------------------------------------------------------------------------------- gathers
@op("onnx:Gather-1")
def gather(data, indices, /, *, axis=0):
    """output[i_0..i_{a-1}, j_0..j_{q-1}, k_{a+1}..] = data[i_0..i_{a-1}, indices[j], k_{a+1}..].

    Rank q + r - 1, dtype of ``data`` (any, strings included); integer ``indices`` (negative
    ones count from the end).
    """
    data = np.asarray(data)
    if data.ndim < 1:
        raise KernelError("Gather: data must have rank >= 1")
    ax = norm_axis(axis, data.ndim, "Gather: axis")
    idx = _wrap(_int_indices(indices, "Gather"), data.shape[ax], "Gather")
    out = np.take(data, idx.reshape(-1), axis=ax)
    return out.reshape(data.shape[:ax] + idx.shape + data.shape[ax + 1 :])


@op("onnx:GatherElements-11")
def gather_elements(data, indices, /, *, axis=0):
    """output[i..] = data[i.. with i_axis replaced by indices[i..]].

    Shape of ``indices`` (same rank as ``data``, no larger on the other axes), dtype of ``data``.
    """
    data = np.asarray(data)
    idx = _int_indices(indices, "GatherElements")
    if data.ndim < 1 or idx.ndim != data.ndim:
        raise KernelError(
            f"GatherElements: data (rank {data.ndim}) and indices (rank {idx.ndim}) must have the same rank >= 1"
        )
    ax = norm_axis(axis, data.ndim, "GatherElements: axis")
    if any(i > d for k, (i, d) in enumerate(zip(idx.shape, data.shape)) if k != ax):
        raise KernelError(
            f"GatherElements: indices shape {idx.shape} exceeds data shape {data.shape} outside axis {ax}"
        )
    idx = _wrap(idx, data.shape[ax], "GatherElements")
    return data[_along(idx, ax)]


@op("onnx:GatherND-11")
def gather_nd(data, indices, /, *, batch_dims=0):
    """output[b.., i..] = data[b.., indices[b.., i.., :], ...] (index tuples of length k).

    ``indices`` (rank q, last dimension k <= r - b) shares the leading ``batch_dims`` dimensions
    with ``data``; the output shape is ``indices.shape[:-1] + data.shape[b + k:]``, dtype of ``data``.
    """
    data = np.asarray(data)
    idx = _int_indices(indices, "GatherND")
    r, q, b = data.ndim, idx.ndim, int(batch_dims)
    if r < 1 or q < 1:
        raise KernelError(f"GatherND: data and indices must have rank >= 1 (got {r}, {q})")
    if not 0 <= b < min(q, r):
        raise KernelError(f"GatherND: batch_dims {b} must be in [0, min(rank(data), rank(indices)))")
    if data.shape[:b] != idx.shape[:b]:
        raise KernelError(f"GatherND: batch dimensions differ: data {data.shape[:b]} vs indices {idx.shape[:b]}")
    k = idx.shape[-1]
    if k > r - b:
        raise KernelError(f"GatherND: indices.shape[-1] = {k} exceeds rank(data) - batch_dims = {r - b}")
    nb = math.prod(data.shape[:b])
    m = math.prod(idx.shape[b:-1])
    flat = idx.reshape(nb, m, k)
    d = data.reshape((nb,) + data.shape[b:])
    cols = tuple(_wrap(flat[..., j], data.shape[b + j], "GatherND") for j in range(k))  # over axes
    bidx = np.broadcast_to(np.arange(nb).reshape(nb, 1), (nb, m))
    out = d[(bidx,) + cols]
    return out.reshape(idx.shape[:-1] + data.shape[b + k :])


# ---------------------------------------------------------------------------------------- scatters
@op("onnx:ScatterElements-11")
def scatter_elements(data, indices, updates, /, *, axis=0, reduction="none"):
    """output = copy(data); output[i.. with i_axis := indices[i..]] (op)= updates[i..].

    ``reduction`` none (assign), add, mul, max or min; with a reduction, duplicate indices
    accumulate. ``indices`` and ``updates`` share a shape (same rank as ``data``).
    Shape and dtype of ``data``.
    """
    data = np.asarray(data)
    idx = _int_indices(indices, "ScatterElements")
    upd = np.asarray(updates)
    if data.ndim < 1 or idx.ndim != data.ndim:
        raise KernelError(
            f"ScatterElements: data (rank {data.ndim}) and indices (rank {idx.ndim}) must have the same rank >= 1"
        )
    if upd.shape != idx.shape:
        raise KernelError(f"ScatterElements: updates shape {upd.shape} differs from indices shape {idx.shape}")
    ax = norm_axis(axis, data.ndim, "ScatterElements: axis")
    if any(i > d for k, (i, d) in enumerate(zip(idx.shape, data.shape)) if k != ax):
        raise KernelError(
            f"ScatterElements: indices shape {idx.shape} exceeds data shape {data.shape} outside axis {ax}"
        )
    idx = _wrap(idx, data.shape[ax], "ScatterElements")
    out = data.copy()
    _scatter_into(out, _along(idx, ax), upd, reduction, "ScatterElements")
    return out


@op("onnx:Scatter-9")
def scatter(data, indices, updates, /, *, axis=0):
    """Deprecated Scatter: ScatterElements without a reduction.

    Shape and dtype of ``data``.
    """
    return scatter_elements(data, indices, updates, axis=axis)


@op("onnx:ScatterND-11")
def scatter_nd(data, indices, updates, /, *, reduction="none"):
    """output = copy(data); output[indices[i.., :]] (op)= updates[i..] for each index tuple.

    ``indices.shape[-1]`` = k <= rank(data); ``updates.shape`` must be
    ``indices.shape[:-1] + data.shape[k:]``. ``reduction`` none, add, mul, max or min (duplicate
    index tuples accumulate). Shape and dtype of ``data``.
    """
    data = np.asarray(data)
    idx = _int_indices(indices, "ScatterND")
    upd = np.asarray(updates)
    if data.ndim < 1 or idx.ndim < 1:
        raise KernelError(f"ScatterND: data and indices must have rank >= 1 (got {data.ndim}, {idx.ndim})")
    k = idx.shape[-1]
    if not 1 <= k <= data.ndim:
        raise KernelError(f"ScatterND: indices.shape[-1] = {k} must be in [1, rank(data) = {data.ndim}]")
    want = idx.shape[:-1] + data.shape[k:]
    if upd.shape != want:
        raise KernelError(f"ScatterND: updates shape {upd.shape} must be {want}")
    key = tuple(_wrap(idx[..., j], data.shape[j], "ScatterND") for j in range(k))  # over axes
    out = data.copy()
    _scatter_into(out, key, upd, reduction, "ScatterND")
    return out


@op("onnx:TensorScatter-24")
def tensor_scatter(past_cache, update, write_indices=None, /, *, axis=-2, mode="linear"):
    """present = copy(past); present[b, .., w[b] + s, ..] = update[b, .., s, ..] along ``axis``.

    ``mode`` linear (positions must fit) or circular (positions modulo the cache length);
    ``write_indices`` (int64, one per batch row, default 0). Shape and dtype of ``past_cache``.
    """
    past = np.asarray(past_cache)
    upd = np.asarray(update)
    if past.ndim < 2 or upd.ndim != past.ndim:
        raise KernelError(
            f"TensorScatter: past_cache (rank {past.ndim}) and update (rank {upd.ndim}) must have the same rank >= 2"
        )
    ax = norm_axis(axis, past.ndim, "TensorScatter: axis")
    if ax == 0:
        raise KernelError("TensorScatter: axis cannot be the batch axis 0")
    if any(u != p for k, (u, p) in enumerate(zip(upd.shape, past.shape)) if k != ax):
        raise KernelError(
            f"TensorScatter: update shape {upd.shape} and past_cache shape {past.shape} must agree outside axis {ax}"
        )
    n_batch, seq, max_seq = past.shape[0], upd.shape[ax], past.shape[ax]
    if seq > max_seq:
        raise KernelError(f"TensorScatter: update sequence length {seq} exceeds the cache length {max_seq}")
    if write_indices is None:
        start = np.zeros(n_batch, np.int64)
    else:
        start = _int_indices(write_indices, "TensorScatter").astype(np.int64).reshape(-1)
        if start.size != n_batch:
            raise KernelError(f"TensorScatter: write_indices has {start.size} entries for a batch of {n_batch}")
    pos = start[:, None] + np.arange(seq, dtype=np.int64)[None, :]
    if mode == "circular":
        if max_seq == 0 and pos.size:
            raise KernelError("TensorScatter: circular write into an empty cache")
        pos = pos % max(max_seq, 1)
    elif mode == "linear":
        if pos.size and (pos.min() < 0 or pos.max() >= max_seq):
            raise KernelError(
                f"TensorScatter: write positions [{int(pos.min())}, {int(pos.max())}] "
                f"out of the cache range [0, {max_seq - 1}] (mode linear)"
            )
    else:
        raise KernelError(f"TensorScatter: unknown mode {mode!r} (linear, circular)")
    out = past.copy()
    view = np.moveaxis(out, ax, 1)  # a view: writes land in ``out``
    view[np.arange(n_batch)[:, None], pos] = np.moveaxis(upd, ax, 1).astype(out.dtype, copy=False)
    return out


# --------------------------------------------------------------------------------- selection ops
@op("onnx:OneHot-11")
def one_hot(indices, depth, values, /, *, axis=-1):
    """output[.., j (at axis), ..] = values[1] if j == indices[..] (mod depth) else values[0].

    ``depth`` one number (> 0), ``values`` = [off, on]; indices in [-depth, depth-1] (negative
    ones wrap, non-integers truncate), any other index gives an all-off row. Rank r + 1,
    dtype of ``values``.
    """
    ind = np.asarray(indices)
    dep = np.asarray(depth)
    vals = np.asarray(values)
    if dep.size != 1:
        raise KernelError(f"OneHot: depth must hold one value, got shape {dep.shape}")
    if vals.size != 2:
        raise KernelError(f"OneHot: values must be [off_value, on_value], got shape {vals.shape}")
    dv = dep.reshape(())
    if dv.dtype.kind == "f" and not np.isfinite(dv):
        raise KernelError(f"OneHot: depth must be finite, got {dv}")
    d = int(dv)
    if d < 1:
        raise KernelError(f"OneHot: depth must be positive, got {d}")
    r = ind.ndim
    a = int(axis)
    if not -(r + 1) <= a <= r:
        raise KernelError(f"OneHot: axis {a} out of range for an output of rank {r + 1}")
    a = a + r + 1 if a < 0 else a
    check_elements(ind.shape[:a] + (d,) + ind.shape[a:], "OneHot output")
    if ind.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            t = np.trunc(ind)
            valid = np.isfinite(t) & (t >= -d) & (t < d)
        ii = np.where(valid, t, 0).astype(np.int64)
    elif ind.dtype.kind in "iu":
        valid = (ind >= -d) & (ind < d)
        ii = np.where(valid, ind, 0).astype(np.int64)
    else:
        raise KernelError(f"OneHot: indices must be numeric, got {ind.dtype}")
    hot = np.where(valid, np.where(ii < 0, ii + d, ii), -1)
    mask = np.moveaxis(hot[..., None] == np.arange(d, dtype=np.int64), -1, a)
    flat = vals.reshape(2)
    return np.where(mask, flat[1:2].reshape(()), flat[0:1].reshape(())).astype(vals.dtype, copy=False)


@op("onnx:NonZero-9")
def non_zero(X, /):
    """Y[:, n] = the coordinates of the n-th non-zero element of X (row-major order).

    int64 of shape [rank, count]; a 0-d input gives shape [0, count].
    """
    x = np.asarray(X)
    if x.ndim == 0:
        return np.zeros((0, 1 if bool(x) else 0), np.int64)
    nz = np.nonzero(x)
    return np.stack(nz).astype(np.int64, copy=False).reshape(x.ndim, -1)


@op("onnx:Compress-9")
def compress(input, condition, /, *, axis=None):  # noqa: A002 - ONNX input name
    """output = the slices of input (along ``axis``, or of the flattened input) where condition.

    Like numpy.compress: a shorter ``condition`` selects nothing past its end; a longer one
    may only be False past the axis. Dtype of ``input``.
    """
    x = np.asarray(input)
    cond = np.asarray(condition)
    if cond.ndim != 1:
        raise KernelError(f"Compress: condition must be 1-D, got shape {cond.shape}")
    cond = cond.astype(bool, copy=False)
    if axis is None:
        x = x.reshape(-1)
        ax = 0
    else:
        if x.ndim < 1:
            raise KernelError("Compress: input must have rank >= 1 when axis is given")
        ax = norm_axis(axis, x.ndim, "Compress: axis")
    n = x.shape[ax]
    if cond.size > n and cond[n:].any():
        raise KernelError(f"Compress: condition selects index >= {n}, past the axis of size {n}")
    sel = np.flatnonzero(cond[:n])
    return np.take(x, sel, axis=ax)


@op("onnx:TopK-10")
def top_k(X, K, /, *, axis=-1, largest=1, sorted=1):  # noqa: A002 - ONNX attribute name
    """(Values, Indices) of the k largest (or smallest) elements along ``axis``.

    Sorted (descending for largest, ascending otherwise); equal values keep the lower index
    first. ``K`` a one-element int64 tensor in [0, dim]. Values: dtype of ``X``; Indices: int64;
    both of shape X.shape with dim ``axis`` = K. NaN counts as the largest value.
    """
    x = np.asarray(X)
    if x.ndim < 1:
        raise KernelError("TopK: input must have rank >= 1")
    ax = norm_axis(axis, x.ndim, "TopK: axis")
    kk = np.asarray(K)
    if kk.size != 1 or kk.dtype.kind not in "iu":
        raise KernelError(f"TopK: K must be one integer, got {kk.dtype} of shape {kk.shape}")
    kv = int(kk.reshape(()))
    n = x.shape[ax]
    if not 0 <= kv <= n:
        raise KernelError(f"TopK: k = {kv} out of range [0, {n}] for axis {ax}")
    if 0 < 8 * kv < n and n >= 256 and not (x.dtype.kind == "f" and np.isnan(x).any()):
        idx = np.moveaxis(_top_k_partial(np.moveaxis(x, ax, -1).reshape(-1, n), kv, largest), -1, ax).reshape(
            x.shape[:ax] + (kv,) + x.shape[ax + 1 :]
        )
    else:
        idx = _order(x, ax, largest)[(slice(None),) * ax + (slice(0, kv),)]
    idx = idx.astype(np.int64, copy=False)
    return np.take_along_axis(x, idx, axis=ax), idx


def _order(x: np.ndarray, ax: int, largest) -> np.ndarray:
    """Stable sort order along ``ax``: ascending, or descending with ties by lower index."""
    if largest:
        # stable ascending sort of the reversed axis, reversed back: descending, ties by lower index
        return (x.shape[ax] - 1) - np.flip(np.argsort(np.flip(x, ax), axis=ax, kind="stable"), ax)
    return np.argsort(x, axis=ax, kind="stable")


def _top_k_partial(x2: np.ndarray, k: int, largest) -> np.ndarray:
    """TopK indices of each row of ``x2`` [rows, n] (no NaN) for k much smaller than n: a
    partition finds the k-th value, the elements beyond it plus the first equal ones (by index)
    make exactly k per row, and only those k are sorted."""
    rows, n = x2.shape
    if largest:
        thr = np.partition(x2, n - k, axis=-1)[:, n - k : n - k + 1]
        beyond = x2 > thr
    else:
        thr = np.partition(x2, k - 1, axis=-1)[:, k - 1 : k]
        beyond = x2 < thr
    equal = x2 == thr
    room = k - beyond.sum(axis=-1, keepdims=True)
    keep = beyond | (equal & (np.cumsum(equal, axis=-1) <= room))
    cols = np.nonzero(keep)[1].reshape(rows, k)  # row-major: ascending index within each row
    order = _order(np.take_along_axis(x2, cols, axis=-1), 1, largest)
    return np.take_along_axis(cols, order, axis=-1)


@op("onnx:Unique-11")
def unique(X, /, *, axis=None, sorted=1):  # noqa: A002 - ONNX attribute name
    """(Y, indices, inverse_indices, counts): the distinct elements (or slices along ``axis``).

    Y ascending (``sorted``=1; slices compared lexicographically) or in order of first
    occurrence; indices: first occurrence in X; inverse_indices: for each element/slice of X
    its position in Y; counts. Y has the dtype of X; the other three are int64 and 1-D.
    """
    x = np.asarray(X)
    if axis is None:
        flat = x.reshape(-1)
        y, first, inv, counts = np.unique(flat, return_index=True, return_inverse=True, return_counts=True)
        take_axis = 0
    else:
        if x.ndim < 1:
            raise KernelError("Unique: input must have rank >= 1 when axis is given")
        take_axis = norm_axis(axis, x.ndim, "Unique: axis")
        moved = np.moveaxis(x, take_axis, 0)
        n = moved.shape[0]
        # value codes preserve order, so slices of codes sort like slices of values (any dtype)
        codes = np.unique(moved.reshape(-1), return_inverse=True)[1].reshape(n, -1)
        _, first, inv, counts = np.unique(codes, axis=0, return_index=True, return_inverse=True, return_counts=True)
        y = np.take(x, first, axis=take_axis)
    inv = np.asarray(inv).reshape(-1)
    if not sorted:
        order = np.argsort(first, kind="stable")
        y = np.take(y, order, axis=take_axis)
        first, counts = first[order], counts[order]
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        inv = rank[inv]
    i64 = np.int64
    return y, first.astype(i64, copy=False), inv.astype(i64, copy=False), counts.astype(i64, copy=False)


@op("onnx:ReverseSequence-10")
def reverse_sequence(input, sequence_lens, /, *, batch_axis=1, time_axis=0):  # noqa: A002
    """Y[b, t] = X[b, len[b] - 1 - t] for t < len[b], else X[b, t] (batch and time axes given).

    ``sequence_lens`` one entry per batch row, each in [0, time length]. Shape and dtype of X.
    """
    x = np.asarray(input)
    if x.ndim < 2:
        raise KernelError(f"ReverseSequence: input must have rank >= 2, got {x.ndim}")
    ba = norm_axis(batch_axis, x.ndim, "ReverseSequence: batch_axis")
    ta = norm_axis(time_axis, x.ndim, "ReverseSequence: time_axis")
    if ba == ta:
        raise KernelError("ReverseSequence: batch_axis and time_axis must differ")
    lens = _int_indices(sequence_lens, "ReverseSequence").reshape(-1).astype(np.int64)
    nb, nt = x.shape[ba], x.shape[ta]
    if lens.size != nb:
        raise KernelError(f"ReverseSequence: sequence_lens has {lens.size} entries for a batch of {nb}")
    if lens.size and (lens.min() < 0 or lens.max() > nt):
        raise KernelError(
            f"ReverseSequence: sequence lengths must be in [0, {nt}], got [{int(lens.min())}, {int(lens.max())}]"
        )
    t = np.arange(nt, dtype=np.int64)[None, :]
    src = np.where(t < lens[:, None], lens[:, None] - 1 - t, t)  # [batch, time]
    if ba > ta:
        src = src.T
    shape = [1] * x.ndim
    shape[ba], shape[ta] = nb, nt
    return np.take_along_axis(x, src.reshape(shape), axis=ta)
