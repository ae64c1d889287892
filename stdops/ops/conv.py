"""Convolution kernels: Conv, ConvInteger, QLinearConv (ConvTranspose, Col2Im and DeformConv live in
conv_transpose.py).

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

Weights are rearranged by :func:`prepare_conv_weight` (the ONNX adapter calls it once at load
time when W is an initializer). float16/bfloat16 compute in float32; float32 stays float32.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from . import _fast
from ._blas import matmul
from ._registry import op
from ._window import (
    FlatTaps,
    check_float,
    check_rank,
    compute_dtype,
    geometry,
    ints,
    pad_input,
    prod,
    tap_slices,
    windows,
)
from .depthwise import bias_array, depthwise
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
        self._mat = None
        self._wino: dict = {}  # tile size -> transformed weights (see wino)
        self._dwrows = {}  # (m, strides, dilations) -> the depthwise row-block weights (see _dw_rows_weight)
        self.bias_src = self.matb = None  # a constant bias folded into the GEMM (see fold_bias)
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

    def dw_taps(self) -> np.ndarray:
        """(M, kh, kw) depthwise weights in the compute dtype, for the compiled kernel (ops/_fast.py)."""
        if "taps" not in self._dwrows:
            self._dwrows["taps"] = np.ascontiguousarray(self.w.reshape((self.M,) + self.kernel), dtype=self.dtype)
        return self._dwrows["taps"]

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
    if type(y) is tuple:  # (y, True): the path applied B and the clip itself
        return y[0]
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
        return depthwise(xc, cw, geo, strides, dilations, b, clip)  # B in the GEMM, clip in the crop
    elif n == 2 and (wt := cw.winograd_tile(strides, dilations, out)):
        if wt == 4 and _fast.enabled():  # compiled transforms (ops/_fast.py), B and the clip in the output one
            return _fast.winograd(TILES[wt], xc, cw.wino(wt), bias_array(b, dt), geo.begin, out, clip), True
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


@op("onnx:Conv-1")
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


def _int_check(t, what):
    if t.dtype not in (np.int8, np.uint8):
        raise KernelError(f"{what} must be int8 or uint8, got {t.dtype}")


def _zero_point(zp, what, m=None, per_channel=False):
    if zp is None:
        return None
    zp = np.asarray(zp)
    if zp.size == 1:
        return zp.reshape(()).astype(np.float64)
    if per_channel and zp.ndim == 1 and zp.shape[0] == m:
        return zp.astype(np.float64)
    raise KernelError(
        f"{what} must be a scalar" + (f" or have shape ({m},)" if per_channel else "") + f", got shape {zp.shape}"
    )


def _integer_accumulate(x, w, x_zero_point, w_zero_point, *, group, kernel_shape, strides, dilations, pads, auto_pad):
    """sum (x - x_zero_point) * (w - w_zero_point) as exact integers held in floats: float32 (twice
    as fast through BLAS) when every partial sum provably stays below 2**24, else float64."""
    _int_check(x, "x")
    _int_check(w, "w")
    check_rank(x)
    m = w.shape[0] if w.ndim else 0
    xz = _zero_point(x_zero_point, "x_zero_point")
    wz = _zero_point(w_zero_point, "w_zero_point", m, per_channel=True)
    xf = x.astype(np.float32)
    if xz is not None:
        xf -= np.float32(xz)
    wf = w.astype(np.float32)
    if wz is not None:
        wf -= (wz.reshape(wz.shape + (1,) * (w.ndim - 1)) if wz.ndim else wz).astype(np.float32)
    k = prod(w.shape[1:])
    bound = k * float(np.abs(xf).max(initial=0)) * float(np.abs(wf).max(initial=0))
    if bound >= 2.0**24:
        xf, wf = xf.astype(np.float64), wf.astype(np.float64)
    y = conv_forward(
        xf,
        ConvWeight(wf, group, exact=True),
        None,
        kernel_shape=kernel_shape,
        strides=strides,
        dilations=dilations,
        pads=pads,
        auto_pad=auto_pad,
    )
    return y.astype(np.float64, copy=False)


@op("onnx:ConvInteger-10")
def conv_integer(
    x,
    w,
    x_zero_point=None,
    w_zero_point=None,
    /,
    *,
    auto_pad="NOTSET",
    dilations=(),
    group=1,
    kernel_shape=(),
    pads=(),
    strides=(),
):
    """y = Conv(x - x_zero_point, w - w_zero_point) in exact integer arithmetic (padding is x_zero_point).

    x, w int8/uint8; x_zero_point a scalar; w_zero_point a scalar or one per output channel (M,).
    y int32 (N, M, O1..On), shapes as Conv.
    """
    acc = _integer_accumulate(
        x,
        w,
        x_zero_point,
        w_zero_point,
        group=group,
        kernel_shape=kernel_shape,
        strides=strides,
        dilations=dilations,
        pads=pads,
        auto_pad=auto_pad,
    )
    return acc.astype(np.int32)


@op("onnx:QLinearConv-10")
def qlinear_conv(
    x,
    x_scale,
    x_zero_point,
    w,
    w_scale,
    w_zero_point,
    y_scale,
    y_zero_point,
    b=None,
    /,
    *,
    auto_pad="NOTSET",
    dilations=(),
    group=1,
    kernel_shape=(),
    pads=(),
    strides=(),
):
    """y = saturate(round_half_even((Conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp).

    x, w, y int8/uint8 (y has y_zero_point's dtype); w_scale/w_zero_point per tensor or per output
    channel (M,); B int32 (M,) quantized with scale x_scale * w_scale. Shapes as Conv.
    """
    acc = _integer_accumulate(
        x,
        w,
        x_zero_point,
        w_zero_point,
        group=group,
        kernel_shape=kernel_shape,
        strides=strides,
        dilations=dilations,
        pads=pads,
        auto_pad=auto_pad,
    )
    M, n = acc.shape[1], acc.ndim - 2
    if b is not None:
        b = np.asarray(b)
        if b.shape != (M,):
            raise KernelError(f"B must have shape ({M},), got {b.shape}")
        acc += b.astype(np.float64).reshape((M,) + (1,) * n)
    xs = np.asarray(x_scale, np.float32)
    ws = np.asarray(w_scale, np.float32)
    ys = np.asarray(y_scale, np.float32)
    if xs.size != 1 or ys.size != 1:
        raise KernelError("x_scale and y_scale must be scalars")
    if ws.size != 1 and ws.shape != (M,):
        raise KernelError(f"w_scale must be a scalar or have shape ({M},), got {ws.shape}")
    scale = (xs.reshape(()) * ws.reshape(-1)) / ys.reshape(())  # float32, as the scales are
    scale = scale.reshape(-1, *(1,) * n) if scale.size > 1 else scale.reshape(())
    r = acc * scale.astype(np.float64)
    ydt = np.asarray(y_zero_point).dtype if y_zero_point is not None else x.dtype
    if ydt not in (np.int8, np.uint8):
        raise KernelError(f"y_zero_point must be int8 or uint8, got {ydt}")
    if y_zero_point is not None:
        yz = np.asarray(y_zero_point)
        if yz.size != 1:
            raise KernelError(f"y_zero_point must be a scalar, got shape {yz.shape}")
        r += float(yz.reshape(()))
    info = np.iinfo(ydt)
    r = np.rint(r)
    np.clip(r, info.min, info.max, out=r)
    return r.astype(ydt)


from . import conv_transpose  # noqa: E402,F401  (registers ConvTranspose, Col2Im, DeformConv)
