"""Transposed and deformable convolution, Col2Im (split from conv.py).

ConvTranspose is a GEMM (W^T @ X per group) followed by a col2im scatter-add over the kernel
taps; Col2Im is that scatter-add alone; DeformConv samples the input bilinearly per tap (loops
over taps, offset groups and interpolation corners, vectorized over positions) and then runs the
same GEMM as Conv.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from ._registry import op
from ._window import AUTO_PADS, check_float, check_rank, ints, pad_pairs, prod
from .dtypes import compute_dtype


def _scatter_taps(cols: np.ndarray, full: tuple, kernel, strides, dilations, out) -> np.ndarray:
    """cols (N, X, *kernel, *out) -> (N, X, *full): sum of each tap's values at o * s + k * d."""
    N, X = cols.shape[:2]
    y = np.zeros((N, X) + tuple(full), cols.dtype)
    for tap in np.ndindex(*kernel):
        dst = (Ellipsis,) + tuple(
            slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, s, o in zip(tap, dilations, strides, out)
        )
        y[dst] += cols[(slice(None), slice(None)) + tap]
    return y


def _place(full: np.ndarray, begin, out) -> np.ndarray:
    """result[..., j] = full[..., j + begin] where it exists, 0 elsewhere (begin may be negative)."""
    sp = full.shape[2:]
    if all(b >= 0 and b + o <= f for b, o, f in zip(begin, out, sp)):
        return np.ascontiguousarray(full[(Ellipsis,) + tuple(slice(b, b + o) for b, o in zip(begin, out))])
    check_elements(full.shape[:2] + tuple(out), "ConvTranspose output")
    y = np.zeros(full.shape[:2] + tuple(out), full.dtype)
    src, dst = [], []
    for b, o, f in zip(begin, out, sp):
        j0, j1 = max(0, -b), min(o, f - b)
        if j1 <= j0:
            return y
        dst.append(slice(j0, j1))
        src.append(slice(j0 + b, j1 + b))
    y[(Ellipsis,) + tuple(dst)] = full[(Ellipsis,) + tuple(src)]
    return y


@op("onnx:ConvTranspose-1")
def conv_transpose(
    x,
    w,
    b=None,
    /,
    *,
    auto_pad="NOTSET",
    dilations=(),
    group=1,
    kernel_shape=(),
    output_padding=(),
    output_shape=(),
    pads=(),
    strides=(),
):
    """Y[n, m, i * s + k * d - pad_begin] += X[n, c, i] * W[c, m % (M/group), k] (c in m's group) + B[m].

    X (N, C, D1..Dn), W (C, M/group, k1..kn); Y (N, M, O1..On) with
    O = s * (D - 1) + output_padding + (k - 1) * d + 1 - pad_begin - pad_end; with output_shape
    (or auto_pad SAME_*: O = D * s) the total padding is derived from O and split evenly, the odd
    one at the beginning except for SAME_UPPER (an O up to stride - 1 beyond the natural size
    adds zero rows at the end, as onnxruntime does). Float dtypes; Y has X's dtype.
    """
    check_float(x, "X")
    n = check_rank(x)
    if w.ndim != n + 2:
        raise KernelError(f"W must have shape (C, M/group, k1..k{n}), got {w.shape} for X {x.shape}")
    if w.dtype != x.dtype:
        raise KernelError(f"W dtype {w.dtype} differs from X dtype {x.dtype}")
    N, C = x.shape[:2]
    group = int(group)
    if group < 1 or C % group:
        raise KernelError(f"X has {C} channels, not divisible by group={group}")
    if w.shape[0] != C:
        raise KernelError(f"W has {w.shape[0]} input channels, X has {C}")
    Mg = w.shape[1]
    M = Mg * group
    kernel = tuple(int(k) for k in w.shape[2:])
    if kernel_shape is not None and len(kernel_shape) and tuple(int(k) for k in kernel_shape) != kernel:
        raise KernelError(f"kernel_shape {list(kernel_shape)} does not match W's spatial shape {list(kernel)}")
    strides = ints(strides, n, 1, "strides")
    dilations = ints(dilations, n, 1, "dilations")
    opad = ints(output_padding, n, 0, "output_padding", minimum=0)
    if auto_pad not in AUTO_PADS:
        raise KernelError(f"auto_pad must be one of {', '.join(AUTO_PADS)}, got {auto_pad!r}")
    in_sp = x.shape[2:]
    dk = tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations))
    full = tuple(s * (i - 1) + e for s, i, e in zip(strides, in_sp, dk))
    natural = tuple(f + o for f, o in zip(full, opad))
    if output_shape is not None and len(output_shape):
        osh = tuple(int(v) for v in output_shape)
        if len(osh) == n + 2:
            osh = osh[2:]
        if len(osh) != n or any(v < 0 for v in osh):
            raise KernelError(f"output_shape {list(output_shape)} must hold {n} non-negative spatial sizes")
        target = osh
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = tuple(i * s for i, s in zip(in_sp, strides))
    else:
        target = None
    if target is not None:
        total = [nat - t for nat, t in zip(natural, target)]
        if any(t <= -s for t, s in zip(total, strides)):  # up to stride - 1 extra (zero) rows are allowed
            raise KernelError(
                f"output_shape {list(target)} does not fit input {list(in_sp)}: with these strides, "
                f"kernel and output_padding it can be at most natural + stride - 1 per axis "
                f"(natural {list(natural)})"
            )
        if auto_pad == "SAME_UPPER":
            begin = tuple(t // 2 for t in total)
        else:
            begin = tuple(t - t // 2 for t in total)
        if output_shape is not None and len(output_shape):  # an explicit size beyond the natural one
            begin = tuple(max(0, bb) if t < 0 else bb for bb, t in zip(begin, total))  # extends at the end
        out = target
    else:
        pb, pe = ((0,) * n, (0,) * n) if auto_pad == "VALID" else pad_pairs(pads, n)
        begin = pb
        out = tuple(nat - a - c for nat, a, c in zip(natural, pb, pe))
        if any(o <= 0 for o in out):
            raise KernelError(f"pads {list(pads)} leave an empty output {out}")
    check_elements((N, M) + tuple(max(f, o) for f, o in zip(full, out)), "ConvTranspose output")
    if b is not None:
        b = np.asarray(b)
        if b.shape != (M,):
            raise KernelError(f"B must have shape ({M},), got {b.shape}")
    dt = compute_dtype(x.dtype)
    kp = prod(kernel)
    Cg = C // group
    # cols[n, g, (m, k), i] = sum_c W[c, m, k] X[n, c, i]: one GEMM per group (and sample)
    wt = w.astype(dt, copy=False).reshape(group, Cg, Mg * kp).transpose(0, 2, 1)  # BLAS reads it transposed
    xg = x.astype(dt, copy=False).reshape(N, group, Cg, prod(in_sp))
    cols = np.matmul(wt, xg)  # (N, g, Mg*kp, P)
    cols = cols.reshape((N, M) + kernel + tuple(in_sp))
    if tuple(strides) == kernel and all(d == 1 for d in dilations):  # the taps tile the output exactly
        yfull = np.empty((N, M) + full, cols.dtype)
        for tap in np.ndindex(*kernel):
            yfull[(Ellipsis,) + tuple(slice(t, None, s) for t, s in zip(tap, strides))] = cols[
                (slice(None), slice(None)) + tap
            ]
    else:
        yfull = _scatter_taps(cols, full, kernel, strides, dilations, in_sp)
    y = _place(yfull, begin, out)
    if b is not None:
        y += b.astype(dt).reshape((M,) + (1,) * n)
    return y if y.dtype == x.dtype else y.astype(x.dtype)


@op("onnx:Col2Im-18")
def col2im(input, image_shape, block_shape, /, *, dilations=(), pads=(), strides=()):
    """Y[n, c, o * s + k * d - pad_begin] += input[n, c * prod(block) + k, o] (sum over overlaps).

    input (N, C * prod(block_shape), L) with L = prod over axes of the block counts
    floor((image + pads - ((block - 1) * d + 1)) / s) + 1; Y (N, C, *image_shape), input's dtype.
    """
    input = np.asarray(input)
    if input.ndim != 3:
        raise KernelError(f"input must have shape (N, C * prod(block_shape), L), got {input.shape}")
    img = tuple(int(v) for v in np.asarray(image_shape).reshape(-1))
    blk = tuple(int(v) for v in np.asarray(block_shape).reshape(-1))
    n = len(img)
    if len(blk) != n or n == 0:
        raise KernelError(f"image_shape {list(img)} and block_shape {list(blk)} must have the same length >= 1")
    if any(v <= 0 for v in blk) or any(v < 0 for v in img):
        raise KernelError(f"bad image_shape {list(img)} / block_shape {list(blk)}")
    strides = ints(strides, n, 1, "strides")
    dilations = ints(dilations, n, 1, "dilations")
    pb, pe = pad_pairs(pads, n)
    N, CK, L = input.shape
    kp = prod(blk)
    if CK % kp:
        raise KernelError(f"input dimension 1 ({CK}) is not a multiple of prod(block_shape)={kp}")
    C = CK // kp
    padded = tuple(i + a + c for i, a, c in zip(img, pb, pe))
    dk = tuple((k - 1) * d + 1 for k, d in zip(blk, dilations))
    if any(p < k for p, k in zip(padded, dk)):
        raise KernelError(f"block extent {list(dk)} is larger than the padded image {list(padded)}")
    nblk = tuple((p - k) // s + 1 for p, k, s in zip(padded, dk, strides))
    if prod(nblk) != L:
        raise KernelError(
            f"input has L={L} blocks, image/block/pads/strides/dilations give "
            f"{' x '.join(map(str, nblk))} = {prod(nblk)}"
        )
    check_elements((N, C) + padded, "Col2Im output")
    cols = input.reshape((N, C) + blk + nblk)
    if input.dtype.kind == "b":
        cols = cols.astype(np.int64)
    full = _scatter_taps(cols, padded, blk, strides, dilations, nblk)
    y = full[(Ellipsis,) + tuple(slice(a, a + i) for a, i in zip(pb, img))]
    return np.ascontiguousarray(y).astype(input.dtype, copy=False)


@op("onnx:DeformConv-19")
def deform_conv(
    x, w, offset, b=None, mask=None, /, *, dilations=(), group=1, kernel_shape=(), offset_group=1, pads=(), strides=()
):
    """Y[n, m, o] = B[m] + sum_{c in group(m), k} W[m, c, k] * mask[n, G(c), k, o] *
    bilinear(X[n, c], o * s - pad_begin + k * d + offset[n, G(c), k, :, o]).

    X (N, C, D1..Dn), W (M, C/group, k1..kn), offset (N, offset_group * prod(k) * n, O1..On)
    (per group and tap, one displacement per spatial axis), mask (N, offset_group * prod(k), O...)
    defaulting to ones; samples outside X read 0. O as Conv without auto_pad. Float dtypes;
    Y has X's dtype.
    """
    from ._window import geometry

    check_float(x, "X")
    n = check_rank(x)
    if w.ndim != n + 2:
        raise KernelError(f"W must have shape (M, C/group, k1..k{n}), got {w.shape}")
    N, C = x.shape[:2]
    M, Cg = w.shape[:2]
    group, offset_group = int(group), int(offset_group)
    if group < 1 or C != Cg * group or M % group:
        raise KernelError(f"X has {C} channels, W {w.shape} and group={group} do not fit")
    if offset_group < 1 or C % offset_group:
        raise KernelError(f"X has {C} channels, not divisible by offset_group={offset_group}")
    kernel = tuple(int(k) for k in w.shape[2:])
    if kernel_shape is not None and len(kernel_shape) and tuple(int(k) for k in kernel_shape) != kernel:
        raise KernelError(f"kernel_shape {list(kernel_shape)} does not match W's spatial shape {list(kernel)}")
    strides = ints(strides, n, 1, "strides")
    dilations = ints(dilations, n, 1, "dilations")
    geo = geometry(x.shape[2:], kernel, strides, dilations, pads)
    out = geo.out
    P, kp = prod(out), prod(kernel)
    offset = np.asarray(offset)
    if offset.shape != (N, offset_group * kp * n) + out:
        raise KernelError(f"offset must have shape {(N, offset_group * kp * n) + out}, got {offset.shape}")
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != (N, offset_group * kp) + out:
            raise KernelError(f"mask must have shape {(N, offset_group * kp) + out}, got {mask.shape}")
    if b is not None:
        b = np.asarray(b)
        if b.shape != (M,):
            raise KernelError(f"B must have shape ({M},), got {b.shape}")
    dt = compute_dtype(x.dtype)
    sp = x.shape[2:]
    S = prod(sp)
    xf = x.astype(dt, copy=False).reshape(N, C, S)
    off = offset.astype(dt, copy=False).reshape(N, offset_group, kp, n, P)
    msk = None if mask is None else mask.astype(dt, copy=False).reshape(N, offset_group, kp, P)
    mult = [prod(sp[i + 1 :]) for i in range(n)]
    # base sampling position of each output along each axis: o * s - pad_begin
    grids = np.meshgrid(
        *[np.arange(o, dtype=dt) * s - bgn for o, s, bgn in zip(out, strides, geo.begin)], indexing="ij"
    )
    base = [g.reshape(1, P) for g in grids]
    Cog = C // offset_group
    check_elements((N, C, kp, P), "DeformConv column buffer")
    cols = np.zeros((N, C, kp, P), dt)
    for t, tap in enumerate(np.ndindex(*kernel)):
        for G in range(offset_group):
            pos = [base[i] + dt.type(tap[i] * dilations[i]) + off[:, G, t, i] for i in range(n)]  # (N, P)
            lo = [np.floor(p) for p in pos]
            frac = [p - l for p, l in zip(pos, lo)]
            lo = [l.astype(np.int64) for l in lo]
            acc = np.zeros((N, Cog, P), dt)
            for corner in np.ndindex(*(2,) * n):
                wgt = np.ones((N, P), dt)
                idx = np.zeros((N, P), np.int64)
                ok = np.ones((N, P), bool)
                for i, cbit in enumerate(corner):
                    ci = lo[i] + cbit
                    wgt = wgt * (frac[i] if cbit else (1 - frac[i]))
                    ok &= (ci >= 0) & (ci < sp[i])
                    idx += np.clip(ci, 0, sp[i] - 1) * mult[i]
                wgt = np.where(ok, wgt, 0).astype(dt)
                vals = np.take_along_axis(xf[:, G * Cog : (G + 1) * Cog], idx[:, None, :], axis=2)
                acc += vals * wgt[:, None, :]
            if msk is not None:
                acc *= msk[:, G, t][:, None, :]
            cols[:, G * Cog : (G + 1) * Cog, t] = acc
    wm = np.ascontiguousarray(w.astype(dt, copy=False).reshape(group, M // group, Cg * kp))
    y = np.matmul(wm, cols.reshape(N, group, Cg * kp, P)).reshape((N, M) + out)
    if b is not None:
        y += b.astype(dt).reshape((M,) + (1,) * n)
    return y if y.dtype == x.dtype else y.astype(x.dtype)
