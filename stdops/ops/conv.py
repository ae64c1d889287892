"""Convolution kernels: Conv and CausalConvWithState (ConvTranspose, Col2Im and DeformConv live in
conv_transpose.py, the integer ConvInteger and QLinearConv in quant.py).

Conv runs through BLAS, picking per shape:

- 1x1: a plain GEMM on the input itself (no copy at stride 1; a constant bias rides in the GEMM
  when copying X with a row of ones costs less than a pass over Y);
- dense 3x3 stride-1: Winograd F(4x4, 3x3) or F(2x2, 3x3), the tile chosen per shape (winograd.py;
  small maps and few channels keep the direct sum);
- one input channel per group (depthwise, with or without a channel multiplier): the taps of
  each channel gathered as contiguous runs and reduced by a small batched GEMM, in cache blocks,
  B riding in the GEMM as a row of ones; wide 2-D maps at row stride 1 compute 4 output rows per
  GEMM column (6 input rows x kw taps), gathering 4.5 instead of 9 values per output;
- otherwise im2col (a strided window view of the padded input, copied once; wide images gather
  contiguous runs over stride phases instead) and ONE GEMM per group (and sample).

Weights are rearranged by :func:`prepare_conv_weight`, once at load time when W is a constant (the
kernel's ``prepare``: an ONNX initializer, an ncnn weight, an MDF constant). float16/bfloat16 compute in
float32; float32 stays float32.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from ._blas import matmul
from ._registry import op
from ._window import (
    FlatTaps,
    Geometry,
    check_float,
    check_rank,
    geometry,
    ints,
    pad_input,
    prod,
    tap_slices,
    windows,
)
from .activation import swish
from .dtypes import compute_dtype, float_input
from .winograd import TILES, choose_tile


class ConvWeight:
    """W (M, C/group, *kernel) rearranged for the GEMM / tap-wise paths, in the compute dtype."""

    __slots__ = ("w", "group", "dtype", "M", "Cg", "kernel", "_mat", "_wino", "bias_src", "matb", "exact", "_dwrows")

    def __init__(self, w: np.ndarray, group: int, dtype=None, exact: bool = False):
        if w.ndim < 3:
            raise KernelError(f"W must have shape (M, C/group, k1, ...), got shape {w.shape}")
        group = int(group)
        if group < 1:
            raise KernelError(f"group must be >= 1, got {group}")
        self.w, self.group = w, group
        self.dtype = np.dtype(dtype) if dtype is not None else compute_dtype(w.dtype)
        self.M, self.Cg = int(w.shape[0]), int(w.shape[1])
        self.kernel = tuple(int(k) for k in w.shape[2:])
        if self.M % group:
            raise KernelError(f"W has {self.M} output channels, not divisible by group={group}")
        self._mat: np.ndarray | None = None
        self._wino: dict = {}  # tile size -> transformed weights (see wino)
        self._dwrows: dict = {}  # (m, strides, dilations) -> the depthwise row-block weights (see _dw_rows_weight)
        self.bias_src: np.ndarray | None = None  # a constant bias
        self.matb: np.ndarray | None = None  # the GEMM weights with it folded into the GEMM (see fold_bias)
        self.exact = exact  # integer-valued data: only paths that add exact products (no Winograd)

    @property
    def mat(self) -> np.ndarray:
        """(group, M/group, C/group * prod(kernel)), C-contiguous: the GEMM's left operand."""
        if self._mat is None:
            g = self.group
            self._mat = np.ascontiguousarray(self.w.reshape(g, self.M // g, -1), dtype=self.dtype)
        return self._mat

    def wino(self, m: int) -> np.ndarray:
        """(n^2, M, C): the Winograd F(m x m, 3 x 3) transform G g G^T of each 3x3 filter (group 1),
        computed once per tile size and kept."""
        u = self._wino.get(m)
        if u is None:
            u = self._wino[m] = TILES[m].transform_weight(self.w, self.dtype)
        return u

    def winograd_tile(self, strides, dilations, out) -> int:
        """The Winograd output tile for this convolution at output size ``out`` (0: the direct sum):
        dense 3x3 stride-1 2-D float convolutions only, the tile chosen per shape (winograd.choose_tile)."""
        if (
            self.exact
            or self.kernel != (3, 3)
            or self.group != 1
            or tuple(strides) != (1, 1)
            or tuple(dilations) != (1, 1)
            or self.dtype.kind != "f"
        ):
            return 0
        return choose_tile(self.M, self.Cg, out)

    def fold_bias(self, b: np.ndarray) -> ConvWeight:
        """Fold the constant bias ``b`` into the dense GEMM as an extra column (group 1): the im2col
        path then appends a row of ones to its columns instead of adding B in a separate pass."""
        b = np.asarray(b)
        if b.shape == (self.M,):
            self.bias_src = b  # the depthwise paths cache their bias-augmented weights for it
        if self.group == 1 and b.shape == (self.M,):
            self.matb = np.ascontiguousarray(np.concatenate([self.mat[0], b.astype(self.dtype).reshape(-1, 1)], axis=1))
        return self

    def prepare(self, strides=(), dilations=(), spatial=None, pads=(), auto_pad="NOTSET") -> ConvWeight:
        """Compute now what :func:`conv_forward` will use (load-time precomputation): the GEMM layout,
        and when the input's spatial size ``spatial`` is known, the Winograd transform its shape takes.
        Without ``spatial`` the transform (4x the weights for F(4,3)) is computed at the first run of a
        shape that uses it, once: layers on small maps keep the direct sum and never pay its memory."""
        _ = self.mat
        if spatial is not None and len(spatial) == 2 and len(self.kernel) == 2:
            st = ints(strides, 2, 1, "strides")
            dl = ints(dilations, 2, 1, "dilations")
            m = self.winograd_tile(st, dl, geometry(spatial, self.kernel, st, dl, pads, auto_pad).out)
            if m:
                self.wino(m)
        return self


def prepare_conv_weight(
    w: np.ndarray, group: int = 1, strides=(), dilations=(), spatial=None, pads=(), auto_pad="NOTSET"
) -> ConvWeight:
    """W rearranged once for :func:`conv_forward` (see ConvWeight.prepare for ``spatial``)."""
    return ConvWeight(w, group).prepare(strides, dilations, spatial, pads, auto_pad)


_FLAT_IM2COL = True
_DW_BLOCK = 1 << 18  # elements of the depthwise column block (1 MiB of float32)


def conv_forward(
    x: np.ndarray,
    cw: ConvWeight,
    b=None,
    *,
    kernel_shape=(),
    strides=(),
    dilations=(),
    pads=(),
    auto_pad="NOTSET",
    clip=None,
) -> np.ndarray:
    """The convolution of x (N, C, *sp) with prepared weights; returns a new array of cw.dtype.

    ``clip=(lo, hi)`` (either may be None) fuses a following Clip / ReLU / ReLU6: the depthwise paths
    apply it in the copy that drops their junk columns (no extra pass), the others in place."""
    if clip is not None:
        clip = tuple(None if v is None else cw.dtype.type(v) for v in clip)
        if clip == (None, None):
            clip = None
    y = _conv_forward(x, cw, b, kernel_shape, strides, dilations, pads, auto_pad, clip)
    if clip is not None and not (cw.Cg == 1 and cw.group > 1):
        np.clip(y, *clip, out=y)
    return y


def _conv_forward(x, cw, b, kernel_shape, strides, dilations, pads, auto_pad, clip):
    n = check_rank(x)
    if len(cw.kernel) != n:
        raise KernelError(f"W has {len(cw.kernel)} spatial axes, X has {n} (X {x.shape}, W {cw.w.shape})")
    if kernel_shape is not None and len(kernel_shape) and tuple(int(k) for k in kernel_shape) != cw.kernel:
        raise KernelError(f"kernel_shape {list(kernel_shape)} does not match W's spatial shape {list(cw.kernel)}")
    N, C = x.shape[:2]
    g, M, Cg, kernel = cw.group, cw.M, cw.Cg, cw.kernel
    if C != Cg * g:
        raise KernelError(f"X has {C} channels but W expects C/group * group = {Cg} * {g} = {Cg * g}")
    strides = ints(strides, n, 1, "strides")
    dilations = ints(dilations, n, 1, "dilations")
    geo = geometry(x.shape[2:], kernel, strides, dilations, pads, auto_pad)
    out = geo.out
    P = prod(out)
    dt = cw.dtype
    # pads and dilations are the model's word: the output and the padded input every path below allocates
    # are bounded first (stdops.limits)
    item = np.dtype(dt).itemsize
    check_elements((N, C, *(d + lo + hi for d, lo, hi in zip(x.shape[2:], geo.begin, geo.end))), "padded input", item)
    check_elements((N, M, *out), "Conv output", item)
    xc = x if x.dtype == dt else x.astype(dt)
    if b is not None:
        b = np.asarray(b)
        if b.shape != (M,):
            raise KernelError(f"B must have shape ({M},), got {b.shape}")

    if Cg == 1 and g > 1:  # depthwise (and depthwise with a channel multiplier): taps
        return _depthwise(xc, cw, geo, strides, dilations, b, clip)  # B in the GEMM, clip in the crop
    elif n == 2 and (wt := cw.winograd_tile(strides, dilations, out)):
        y = TILES[wt].conv(xc, cw.wino(wt), geo.begin, out)
    elif all(k == 1 for k in kernel):  # 1x1: a plain GEMM on the (strided) input
        xs = pad_input(xc, geo.begin, geo.end)
        if any(s != 1 for s in strides):
            xs = xs[tap_slices((0,) * n, dilations, strides, out)]
        # a constant bias rides in the GEMM as a column of W times a row of ones appended to X when
        # copying X costs less than a pass over Y (more outputs than inputs) or X is copied anyway
        if b is not None and g == 1 and b is cw.bias_src and (M > C or not xs.flags.c_contiguous):
            xb = np.empty((N, C + 1, P), dt)
            np.copyto(xb[:, :C].reshape(xs.shape), xs)
            xb[:, C] = 1
            y = matmul(cw.matb, xb[0] if N == 1 else xb)
            return y.reshape((N, M) + out)
        if not xs.flags.c_contiguous:
            xs = np.ascontiguousarray(xs)
        wm = cw.mat
        if g == 1:
            y = matmul(wm[0], xs.reshape(N, C, P))
        else:
            y = matmul(wm, xs.reshape(N, g, Cg, P))
        y = y.reshape((N, M) + out)
    else:  # im2col + one GEMM per group (and sample)
        kp = prod(kernel)
        check_elements((N, C * kp, P), "Conv im2col buffer")
        wm = cw.mat
        # wide rows: gather contiguous runs over stride phases (junk columns cropped after the GEMM)
        ft = None
        if n >= 2 and _FLAT_IM2COL and out[-1] >= 96 and Cg * kp >= 2 * M // g:  # measured on 1-thread BLAS
            tail = tuple(
                -(-(d + b + e) // s) for d, b, e, s in zip(xc.shape[3:], geo.begin[1:], geo.end[1:], strides[1:])
            )
            if prod(tail) <= 1.08 * prod(out[1:]):
                ft = FlatTaps(xc, geo, kernel, strides, dilations)
        fold = b is not None and g == 1 and b is cw.bias_src  # bias as a row of ones times a column
        K = C * kp
        if ft is not None:
            L = ft.L
            cols = np.empty((N, K + fold, L), dt)
            c4 = cols[:, :K].reshape((N, C, kp, L))
            view = ft.all_runs()
            if view is not None:
                np.copyto(c4.reshape((N, C) + kernel + (L,)), view.reshape((N, C) + kernel + (L,)))
            else:
                for t in range(kp):
                    np.copyto(c4[:, :, t], ft.run(t).reshape(N, C, L))
            if fold:
                cols[:, K] = 1
                y = matmul(cw.matb, cols)
            else:
                y = matmul(wm, cols.reshape(N, g, Cg * kp, L))
            y = ft.crop(y, (N, M))
        else:
            xp = pad_input(xc, geo.begin, geo.end)
            cols = np.empty((N, K + fold, P), dt)
            np.copyto(cols[:, :K].reshape((N, C) + kernel + out), windows(xp, kernel, strides, dilations, out))
            if fold:
                cols[:, K] = 1
                y = matmul(cw.matb, cols[0] if N == 1 else cols)
            elif g == 1:
                y = matmul(wm[0], cols[0] if N == 1 else cols)
            else:
                y = matmul(wm, cols.reshape(N, g, Cg * kp, P))
            y = y.reshape((N, M) + out)
        if fold:
            return y
    if b is not None:
        y += b.astype(dt, copy=False).reshape((M,) + (1,) * n)
    return y


_DW_ROWS = 4  # output rows per depthwise row block (measured: 4 beats 3, 5, 6, 8, 12)
_DW_ROWS_MIN_RUN = 96  # the row-block GEMM needs this many columns per plane to beat the per-channel GEMV


def _dw_weight(cw: ConvWeight, m: int, strides, dilations, b) -> np.ndarray:
    """The depthwise GEMM weights, (group, M/group * m, K), with B as one more column when given.

    m == 0: the per-tap layout (taps, K = prod(kernel)). m >= 1 (2-D): m output rows per column;
    row (j, i) (multiplier j, output row i of the block) holds w[j, ky, kx] at column
    (i * sh + ky * dh) * kw + kx of K = nD * kw, zeros elsewhere. Cached on ``cw`` (with B only
    when B is the constant the adapter prepared)."""
    key = (m, tuple(strides), tuple(dilations), b is not None)
    cache = b is None or b is cw.bias_src
    wm = cw._dwrows.get(key) if cache else None
    if wm is not None:
        return wm
    g, mg = cw.group, cw.M // cw.group
    if b is not None:
        wm = _dw_weight(cw, m, strides, dilations, None)
        bc = np.repeat(b.astype(cw.dtype).reshape(g, mg), max(m, 1), axis=1).reshape(g, -1, 1)
        wm = np.ascontiguousarray(np.concatenate([wm, bc], axis=2))
    elif m == 0:
        wm = cw.mat
    else:
        (kh, kw), (sh, _), (dh, _) = cw.kernel, strides, dilations
        nD = (m - 1) * sh + (kh - 1) * dh + 1
        w = cw.w.reshape(g, mg, kh, kw).astype(cw.dtype)
        wm = np.zeros((g, mg, m, nD, kw), cw.dtype)
        for i in range(m):
            for ky in range(kh):
                wm[:, :, i, i * sh + ky * dh] = w[:, :, ky]
        wm = wm.reshape(g, mg * m, nD * kw)
    if cache:
        cw._dwrows[key] = wm
    return wm


def _dw_rows_plan(xshape, geo, kernel, strides):
    """(m, G): G blocks of m output rows for the row-block depthwise path, or None when the
    per-tap path is faster (strided rows; short planes, where per-plane GEMM calls dominate)."""
    if len(kernel) != 2 or strides[0] != 1:
        return None
    m = _DW_ROWS
    G = -(-geo.out[0] // m)  # the last block may be partial
    Qw = -(-(xshape[3] + geo.begin[1] + geo.end[1]) // strides[1])
    if G * Qw < _DW_ROWS_MIN_RUN or m < 2:
        return None
    return m, G


_ZEROS: dict = {}


def _zeros(n: int, dt) -> np.ndarray:
    """A shared read-only zero vector of at least n elements (dot(x, zeros) is 0 iff x is finite)."""
    z = _ZEROS.get(np.dtype(dt))
    if z is None or z.size < n:
        z = np.zeros(max(n, 1 << 16), dt)
        z.flags.writeable = False
        _ZEROS[np.dtype(dt)] = z
    return z[:n]


def _dw_reduce(runs, wall, NG, rows, K, L, bias, dt):
    """y (NG, rows, L) = wall (NG, rows, K [+1]) @ cols (NG, K [+1], L) in cache-sized channel blocks;
    ``runs`` fills cols[:, :K] of a block; a bias adds a row of ones (set once)."""
    y = np.empty((NG, rows, L), dt)
    Kb = K + bool(bias)
    block = max(1, _DW_BLOCK // (Kb * L))
    cols = np.empty((min(block, NG), Kb, L), dt)
    if bias:
        cols[:, K] = 1
    for c0 in range(0, NG, block):
        c1 = min(NG, c0 + block)
        cb = cols[: c1 - c0]
        runs(cb[:, :K], c0, c1)
        matmul(wall[c0:c1], cb, out=y[c0:c1])
    return y


def _depthwise(xc: np.ndarray, cw: ConvWeight, geo, strides, dilations, b=None, clip=None) -> np.ndarray:
    """C/group == 1: y[n, c, j] = b[c, j] + sum over taps of w[c, j, tap] * x[n, c, window(tap)].

    The padded input is split into stride phases laid out flat per channel, so that every tap
    reads one contiguous run per channel (output rows computed at the phase width, cropped at
    the end); the runs are gathered into columns per channel and reduced with one batched GEMM
    (faster than a multiply-add pass per tap, which is memory bound), B riding in it as a row of
    ones. Wide 2-D maps at row stride 1 compute m output rows per column (:func:`_depthwise_rows`).
    """
    N, C = xc.shape[:2]
    g, mg, kernel, dt = cw.group, cw.M // cw.group, cw.kernel, cw.dtype
    M, out, NG = g * mg, geo.out, N * g
    rows = _dw_rows_plan(xc.shape, geo, kernel, strides)
    yr = None if rows is None else _depthwise_rows(xc, cw, geo, strides, dilations, rows[0], rows[1], b)
    if yr is not None:
        m = rows[0]
        yr = yr[..., : out[1]]  # (N, g, mg, m, G, OW)
        y = np.empty((N, M) + out, dt)
        Gf, rem = divmod(out[0], m)  # full row blocks, rows of the last partial one
        # un-block the rows and drop the junk columns in one copy (clipping on the way)
        _copy_clip(
            y[:, :, : Gf * m].reshape(N, g, mg, Gf, m, out[1]), yr[:, :, :, :, :Gf].transpose(0, 1, 2, 4, 3, 5), clip
        )
        if rem:
            _copy_clip(y[:, :, Gf * m :].reshape(N, g, mg, rem, out[1]), yr[:, :, :, :rem, Gf], clip)
        return y
    ft = FlatTaps(xc, geo, kernel, strides, dilations)
    L, kp = ft.L, prod(kernel)
    wm = _dw_weight(cw, 0, strides, dilations, b)
    wall = wm if N == 1 else np.tile(wm, (N, 1, 1))  # weights of row n * g + c
    view = ft.all_runs()

    def runs(cb, c0, c1):  # cb[c, tap, :] = the contiguous run of plane c0 + c that tap reads
        if view is not None:
            np.copyto(cb.reshape((c1 - c0,) + kernel + (L,)), view[c0:c1])
        else:
            for t in range(kp):
                np.copyto(cb[:, t], ft.run(t, slice(c0, c1)))

    y = _dw_reduce(runs, wall, NG, mg, kp, L, b is not None, dt)
    y = y.reshape((N, M, out[0]) + ft.tail)
    if len(out) > 1 and ft.tail != tuple(out[1:]):  # drop the junk columns (clipping on the way)
        src = y[(Ellipsis,) + tuple(slice(0, o) for o in out[1:])]
        y = np.empty((N, M) + out, dt)
        _copy_clip(y, src, clip)
    elif clip is not None:
        np.clip(y, *clip, out=y)
    return y


def _copy_clip(dst, src, clip):
    if clip is None:
        np.copyto(dst, src)
    else:
        np.clip(src, *clip, out=dst)


def _depthwise_rows(xc: np.ndarray, cw: ConvWeight, geo, strides, dilations, m: int, G: int, b=None):
    """Depthwise 2-D convolution at row stride 1, m output rows per GEMM column: output row
    g * m + i of a plane reads padded rows g * m + D with D = i + ky * dh < nD. The padded input is
    split into m row phases (and sw column phases) laid out flat, so that each (D, kx) reads ONE
    contiguous run per plane for all g; the runs form (nD * kw, G * Qw) columns that one small GEMM
    (M/g * m, nD * kw) per plane reduces. Gathers nD * kw / m values per output instead of kh * kw,
    and the GEMM runs at BLAS speed instead of a GEMV's. Returns (N, g, M/g, m, G, Qw) rows, or None
    when X holds an inf or NaN (the per-tap path then keeps them inside their windows)."""
    N, C = xc.shape[:2]
    (kh, kw), (sh, sw), (dh, dw) = cw.kernel, strides, dilations
    g, mg, dt = cw.group, cw.M // cw.group, cw.dtype
    P = m * sh
    nD = (m - 1) * sh + (kh - 1) * dh + 1
    Gr = G + (nD - 1) // P  # phase rows the runs read (plus FlatTaps' spare row)
    OW = geo.out[1]
    end_h = max(0, Gr * P - xc.shape[2] - geo.begin[0])
    pgeo = Geometry(geo.begin, (end_h, geo.end[1]), (G, OW), (1, 1), (end_h, geo.end[1]))
    ft = FlatTaps(xc, pgeo, (1, 1), (P, sw), (1, 1))
    flat = ft.flat  # (P * sw, N * C, Q0 * Qw): phase (p, a) = padded rows p + q * P, cols a + qc * sw
    fl = flat.reshape(-1)
    with np.errstate(invalid="ignore"):
        finite = np.dot(fl, _zeros(fl.size, dt)) == 0
    if not finite:
        return None  # an inf/NaN input: its zero weights for the block's other rows would give 0 * inf = NaN
    Qw = ft.row[0]
    GQ, K, NG, isz = G * Qw, nD * kw, N * g, flat.itemsize
    wm = _dw_weight(cw, m, strides, dilations, b)
    wall = wm if N == 1 else np.tile(wm, (N, 1, 1))
    # one strided view per (D range sharing a row offset r0, kx): consecutive row phases; at
    # column stride 1 all kx at once (runs at off + kx * dw). Built once, sliced per block.
    views = []
    for r0 in range((nD - 1) // P + 1):
        d0, d1 = r0 * P, min(nD, (r0 + 1) * P)
        for kx in [slice(None)] if sw == 1 else range(kw):
            off = r0 * Qw + (0 if sw == 1 else (kx * dw) // sw)
            base = flat[(d0 % P) * sw + (0 if sw == 1 else (kx * dw) % sw), :, off:]
            shape, st = (NG, d1 - d0), (base.strides[0], sw * flat.strides[0])
            if sw == 1:
                shape, st = shape + (kw,), st + (dw * isz,)
            src = np.lib.stride_tricks.as_strided(base, shape + (GQ,), st + (isz,), writeable=False)
            views.append(((slice(None), slice(d0, d1), kx), src))

    def runs(cb, c0, c1):
        c4 = cb.reshape(c1 - c0, nD, kw, GQ)
        for idx, src in views:
            np.copyto(c4[idx], src[c0:c1])

    y = _dw_reduce(runs, wall, NG, mg * m, K, GQ, b is not None, dt)
    return y.reshape(N, g, mg, m, G, Qw)


def prepare_conv(constants: tuple, attrs: dict):
    """Load time, when W is a constant float tensor: its GEMM-ready layout, computed once, and a constant
    B of W's dtype folded into the GEMM. Returns the step ``(x, w, b=None) -> y``, or None (W not known,
    or not a weight the fast paths take: the kernel then reports the problem when the node runs)."""
    w = constants[1] if len(constants) > 1 else None
    if not isinstance(w, np.ndarray) or w.dtype.kind != "f" or w.ndim < 3:
        return None
    geo = {a: v for a, v in attrs.items() if a != "group"}
    group = attrs.get("group", 1)
    try:
        cw = prepare_conv_weight(w, group, geo.get("strides", ()), geo.get("dilations", ()))
    except KernelError:
        return None
    b0 = constants[2] if len(constants) > 2 else None
    if isinstance(b0, np.ndarray) and b0.dtype == w.dtype:
        cw.fold_bias(b0)  # a constant bias rides in the GEMM (conv_forward checks it is this array)
    wdt = w.dtype

    def conv_prepared(x, w_, b=None):
        if x.dtype != wdt:  # a dtype mismatch: the plain kernel decides
            return conv(x, w_, b, **attrs)
        y = conv_forward(x, cw, b, **geo)
        return y if y.dtype == wdt else y.astype(wdt)

    return conv_prepared


@op("onnx:Conv-1", prepare=prepare_conv)
def conv(x, w, b=None, /, *, auto_pad="NOTSET", dilations=(), group=1, kernel_shape=(), pads=(), strides=()):
    """Y[n, m] = B[m] + sum_{c in group(m), k} W[m, c, k] * Xpad[n, c, o * strides + k * dilations].

    X (N, C, D1..Dn), W (M, C/group, k1..kn), B (M,); Y (N, M, O1..On) with
    O = floor((D + pad_begin + pad_end - ((k - 1) * dilation + 1)) / stride) + 1 (auto_pad SAME_*:
    O = ceil(D / stride), padding split with the odd one at the end (UPPER) or beginning (LOWER);
    VALID: no padding). Float dtypes; Y has X's dtype (float16/bfloat16 computed in float32).
    """
    check_float(x, "X")
    if w.dtype != x.dtype:
        raise KernelError(f"W dtype {w.dtype} differs from X dtype {x.dtype}")
    y = conv_forward(
        x,
        ConvWeight(w, group),
        b,
        kernel_shape=kernel_shape,
        strides=strides,
        dilations=dilations,
        pads=pads,
        auto_pad=auto_pad,
    )
    return y if y.dtype == x.dtype else y.astype(x.dtype)


# --------------------------------------------------------------------------- CausalConvWithState


@op("onnx:CausalConvWithState-27")
def causal_conv_with_state(input, weight, bias=None, past_state=None, /, *, activation="none"):  # noqa: A002
    """Y[b, c, t] = act(bias[c] + sum_j W[c, 0, j] * P[b, c, t + j]), P = concat(past_state or
    zeros (B, C, k-1), input) along the last axis; present_state = the last k-1 positions of P.

    input (B, C, L), weight (C, 1, k), bias (C,), past_state (B, C, k-1); act is identity
    ("none") or SiLU ("silu" / "swish"). Outputs: Y (B, C, L) and present_state (B, C, k-1),
    the dtype of input.
    """
    x = float_input(input, "CausalConvWithState", "input")
    w = float_input(weight, "CausalConvWithState", "weight")
    if x.ndim != 3:
        raise KernelError(f"CausalConvWithState: input must have shape (B, C, L), got {x.shape}")
    B, C, L = x.shape
    if w.ndim != 3 or w.shape[0] != C or w.shape[1] != 1 or w.shape[2] < 1:
        raise KernelError(f"CausalConvWithState: weight must have shape ({C}, 1, k), got {w.shape}")
    k = int(w.shape[2])
    act = str(activation).lower()
    if act not in ("none", "silu", "swish"):
        raise KernelError(f"CausalConvWithState: activation must be 'none', 'silu' or 'swish', got {activation!r}")
    wt = compute_dtype(x.dtype)
    if past_state is None:
        past = np.zeros((B, C, k - 1), wt)
    else:
        past = np.asarray(past_state)
        if past.shape != (B, C, k - 1):
            raise KernelError(f"CausalConvWithState: past_state must have shape {(B, C, k - 1)}, got {past.shape}")
        past = past.astype(wt, copy=False)
    padded = np.concatenate([past, x.astype(wt, copy=False)], axis=2)
    b = None
    if bias is not None:
        b = np.asarray(bias)
        if b.shape != (C,):
            raise KernelError(f"CausalConvWithState: bias must have shape ({C},), got {b.shape}")
    if L == 0:
        y = np.zeros((B, C, 0), wt)
    else:
        y = conv_forward(padded, ConvWeight(w, C, wt), b)  # depthwise, no padding: length L
    if act != "none":
        y = swish(y)
    present = padded[:, :, padded.shape[2] - (k - 1) :]
    return y.astype(x.dtype, copy=False), np.ascontiguousarray(present).astype(x.dtype, copy=False)
