"""Convolution kernels: Conv and CausalConvWithState (ConvTranspose, Col2Im and DeformConv live in
conv_transpose.py, the integer ConvInteger and QLinearConv in quant.py).

Conv runs through BLAS, picking per shape:

- 1x1: a plain GEMM on the input itself (no copy at stride 1; a constant bias rides in the GEMM
  when copying X with a row of ones costs less than a pass over Y); with the compiled extra on AVX-512, maps of
  at least 100 positions with few input channels (or up to 1024 on maps up to 16 x 16) take a compiled kernel
  that sums every output in registers, bias and clip included (ops/_fast_pointwise.py: OpenBLAS is slow at
  small K); stride-2 ones with at least 64 input channels on rows of whole tiles (ResNet's downsamples) take the
  packed direct kernel reading the input in place instead (ops/_fast_conv.py: no strided copy);
- dense 3x3 stride-1: Winograd F(4x4, 3x3) or F(2x2, 3x3), the tile chosen per shape (winograd.py;
  small maps and few channels keep the direct sum); with the compiled extra on AVX-512, 16 to 128 channels on any
  map take F(4,3) with channels in the vector lanes, every stage in cache (ops/_fast_winochan.py);
- one input channel per group (depthwise, with or without a channel multiplier): the taps of
  each channel gathered as contiguous runs and reduced by a small batched GEMM, in cache blocks,
  B riding in the GEMM as a row of ones; wide 2-D maps at row stride 1 compute 4 output rows per
  GEMM column (6 input rows x kw taps), gathering 4.5 instead of 9 values per output;
- small maps (at most 196 outputs per channel, float32, group 1, the compiled extra): a compiled direct
  convolution that sums every product in registers over tiles of 7 positions x 32 channels, its weights packed
  at the first run and streamed once (ops/_fast_conv.py; 3x3 stride-1 maps Winograd takes above 7 x 7 stay there);
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
from ..limits import get as limits_in_force
from . import _fast, _fast_conv, _fast_pointwise, _fast_stem, _fast_windows, _fast_wino2
from . import _fast_winoblock as _winoblock  # the blocked F(4,3) for few channels (_conv_forward, ConvRoutes)
from . import _fast_winochan as _winochan  # F(4,3) with channels in the lanes, 16..64 of them (the same)
from ._blas import matmul
from ._registry import op
from ._window import (
    FlatTaps,
    check_float,
    check_rank,
    geometry,
    ints,
    pad_input,
    prod,
    tap_slices,
    windows,
)
from .conv_paths import direct_packed, pointwise_compiled, pointwise_in_place
from .depthwise import bias_array, depthwise
from .dtypes import compute_dtype
from .winograd import TILES, choose_tile


class ConvWeight:
    """W (M, C/group, *kernel) rearranged for the GEMM / tap-wise paths, in the compute dtype."""

    __slots__ = (
        "w",
        "group",
        "dtype",
        "M",
        "Cg",
        "kernel",
        "_mat",
        "_wino",
        "bias_src",
        "matb",
        "exact",
        "_dwrows",
        "checked",
        "_packed",
        "_stem",
        "_pw",
    )

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
        self.checked: dict = {}  # (input shape, attributes, limits) -> their checked geometry (see _conv_forward)
        self._packed: np.ndarray | None = None  # the compiled direct path's weights (see packed)
        self._stem: np.ndarray | None = None  # the compiled stem path's weights (see stem_packed)
        self._pw: np.ndarray | None = None  # the compiled 1 x 1 path's weights (see pw_packed)

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

    def wino_packed(self, m: int) -> np.ndarray:
        """wino(m) packed for the compiled products (ops/_fast_conv.py), float32, computed once per tile size."""
        key = ("packed", m)
        if key not in self._wino:
            self._wino[key] = _fast_conv.pack_winograd(self.wino(m))
        return self._wino[key]

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

    def packed(self) -> np.ndarray:
        """The GEMM weights (group 1, float32) packed for the compiled direct convolution (ops/_fast_conv.py),
        computed at the first run of a shape that takes it."""
        if self._packed is None:
            self._packed = _fast_conv.pack_weight(self.mat[0])
        return self._packed

    def stem_packed(self) -> np.ndarray:
        """The GEMM weights (float32, each group's) packed for the compiled stem convolution (ops/_fast_stem.py)."""
        if self._stem is None:
            self._stem = _fast_stem.pack_weight(self.mat[0] if self.group == 1 else self.mat)
        return self._stem

    def pw_packed(self) -> np.ndarray:
        """The 1 x 1 weights (group 1, float32) packed for the compiled pointwise kernel (ops/_fast_pointwise.py),
        computed at the first run of a shape that takes it."""
        if self._pw is None:
            self._pw = _fast_pointwise.pack_weight(self.mat[0])
        return self._pw

    def dw_taps(self) -> np.ndarray:
        """(M, kh, kw) depthwise weights in the compute dtype, for the compiled kernel (ops/_fast.py)."""
        if "taps" not in self._dwrows:
            self._dwrows["taps"] = np.ascontiguousarray(self.w.reshape((self.M,) + self.kernel), dtype=self.dtype)
        return self._dwrows["taps"]

    def dw_taps_last(self) -> np.ndarray:
        """(kh, kw, M) depthwise weights, channels innermost (the compiled small-map kernel's layout)."""
        if "taps_last" not in self._dwrows:
            self._dwrows["taps_last"] = np.ascontiguousarray(self.dw_taps().transpose(1, 2, 0))
        return self._dwrows["taps_last"]

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
_WINO_PACKED = True  # F(2,3)'s products by the packed kernel (ops/_fast_conv.py)
#: F(4,3)'s products by the packed kernel from this many input channels (alternating, 1 thread, against OpenBLAS:
#: 256@28 2.6 ms against 3.6; 128@28 a tie with warm caches, 4-8% faster with the caches flushed before each call
#: (as inside a network), ResNet-18 1-5% faster; 64@56 1.22 against 1.00, cold 1.46 against 1.19). The same on AVX2
#: (Zen 3, its 16-channel tiles): 128@28 0.78x OpenBLAS's time, 64@56 1.24x
_F4_PACKED_MIN_C = 128


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
    y, done = _conv_forward_parts(
        x,
        cw,
        b,
        dict(kernel_shape=kernel_shape, strides=strides, dilations=dilations, pads=pads, auto_pad=auto_pad),
        clip,
    )
    if clip is not None and done != "bias+clip":
        lo, hi = (None if v is None else cw.dtype.type(v) for v in clip)
        if lo is not None or hi is not None:
            np.clip(y, lo, hi, out=y)
    return y


def _conv_forward_parts(x, cw, b, geo: dict, clip=None, defer_bias: bool = False):
    """(y, done): the convolution with what the path applied itself: "bias+clip" (the bias and ``clip``: the
    depthwise and compiled Winograd paths, in their last copy), "bias" (the bias only: it rode in the GEMM or
    was added), or "" (``defer_bias``: the bias is the caller's to add, in a pass it makes anyway)."""
    if clip is not None:
        clip = tuple(None if v is None else cw.dtype.type(v) for v in clip)
        if clip == (None, None):
            clip = None
    return _conv_forward(
        x,
        cw,
        b,
        geo.get("kernel_shape", ()),
        geo.get("strides", ()),
        geo.get("dilations", ()),
        geo.get("pads", ()),
        geo.get("auto_pad", "NOTSET"),
        clip,
        defer_bias,
    )


def _conv_checks(x, cw, kernel_shape, strides, dilations, pads, auto_pad):
    """(spatial rank, strides, dilations, geometry) of a call, every attribute and size checked."""
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
    # pads and dilations are the model's word: the output and the padded input every path allocates are
    # bounded first (stdops.limits)
    item = np.dtype(cw.dtype).itemsize
    check_elements((N, C, *(d + lo + hi for d, lo, hi in zip(x.shape[2:], geo.begin, geo.end))), "padded input", item)
    check_elements((N, M, *geo.out), "Conv output", item)
    return n, strides, dilations, geo


def _tup(v):
    return v if v is None or type(v) is tuple else tuple(v)


def _conv_forward(x, cw, b, kernel_shape, strides, dilations, pads, auto_pad, clip, defer_bias=False):
    # a model runs the same shapes again and again: the checks and the geometry of a call are kept per input
    # shape and attributes (and limits in force), so that a repeated call goes straight to its path
    key = (x.shape, _tup(kernel_shape), _tup(strides), _tup(dilations), _tup(pads), auto_pad, limits_in_force())
    known = cw.checked.get(key)
    if known is None:
        known = _conv_checks(x, cw, kernel_shape, strides, dilations, pads, auto_pad)
        if len(cw.checked) > 64:
            cw.checked.clear()
        cw.checked[key] = known
    n, strides, dilations, geo = known
    N, C = x.shape[:2]
    g, M, Cg, kernel = cw.group, cw.M, cw.Cg, cw.kernel
    out = geo.out
    P = prod(out)
    dt = cw.dtype
    xc = x if x.dtype == dt else x.astype(dt)
    if b is not None:
        b = np.asarray(b)
        if b.shape != (M,):
            raise KernelError(f"B must have shape ({M},), got {b.shape}")

    if Cg == 1 and g > 1:  # depthwise (and depthwise with a channel multiplier): taps
        return depthwise(xc, cw, geo, strides, dilations, b, clip), "bias+clip"  # B in the GEMM, clip in the crop
    elif _winochan.takes(cw, n, out, strides, dilations):  # 16..64 channels: F(4,3), channels in the lanes
        return _winochan.conv(xc, cw, b, geo.begin, out, clip), "bias+clip"
    elif _winoblock.takes(cw, n, out, strides, dilations):  # few channels: blocked F(4,3), in cache
        return _winoblock.conv(xc, cw, bias_array(b, dt), geo.begin, out, clip), "bias+clip"
    elif _fast_stem.takes(
        cw, n, out, strides, dilations
    ):  # short sums (stems): compiled, in registers (ops/_fast_stem.py)
        y = _fast_stem.conv2d_stem(xc, cw.stem_packed(), M, kernel, strides, geo.begin, out, b, clip, cw.group)
        return y, "bias+clip"
    elif pointwise_in_place(cw, n, x.shape, geo, strides):  # 1x1/2: the input read in place (ops/_fast_conv.py)
        y = _fast_conv.conv2d_packed(xc, cw.packed(), M, kernel, strides, dilations, geo.begin, out, b, clip)
        return y, "bias+clip"
    elif pointwise_compiled(cw, n, P):  # 1x1, few input channels or a mid-sized map: compiled register tiles
        xs = pad_input(xc, geo.begin, geo.end)
        if any(s != 1 for s in strides):
            xs = xs[tap_slices((0,) * n, dilations, strides, out)]
        xs = np.ascontiguousarray(xs).reshape(N, C, P)
        y = _fast_pointwise.pointwise(xs, cw.pw_packed(), M, b, _fast._clip_args(clip, dt))
        return y.reshape((N, M) + out), "bias+clip"
    elif direct_packed(
        cw, n, out, strides, dilations
    ):  # small maps: compiled, the weights streamed once (ops/_fast_conv.py)
        y = _fast_conv.conv2d_packed(xc, cw.packed(), M, kernel, strides, dilations, geo.begin, out, b, clip)
        return y, "bias+clip"
    elif n == 2 and (wt := cw.winograd_tile(strides, dilations, out)):
        if wt == 4 and _fast.enabled():  # compiled transforms (ops/_fast.py), B and the clip in the output one
            up = cw.wino_packed(4) if dt == np.float32 and Cg >= _F4_PACKED_MIN_C and _fast_conv.TILES_OK else None
            y = _fast.winograd(TILES[wt], xc, cw.wino(wt), bias_array(b, dt), geo.begin, out, clip, up)
            return y, "bias+clip"
        if wt == 2 and _fast.enabled():  # the same for F(2x2, 3x3) (ops/_fast_conv.py)
            up = cw.wino_packed(2) if dt == np.float32 and _WINO_PACKED and _fast_conv.TILES_OK else None
            y = _fast_wino2.winograd2(TILES[2], xc, cw.wino(2), bias_array(b, dt), geo.begin, out, clip, up)
            return y, "bias+clip"
        y = TILES[wt].conv(xc, cw.wino(wt), geo.begin, out)
    elif all(k == 1 for k in kernel):  # 1x1: a plain GEMM on the (strided) input
        xs = pad_input(xc, geo.begin, geo.end)
        if any(s != 1 for s in strides):
            xs = xs[tap_slices((0,) * n, dilations, strides, out)]
        # a constant bias rides in the GEMM as a column of W times a row of ones appended to X when
        # copying X costs less than a pass over Y (more outputs than inputs) or X is copied anyway; also when the
        # caller would add it (defer_bias): a fused step then has the bits of the convolution alone
        if b is not None and g == 1 and b is cw.bias_src and (M > C or not xs.flags.c_contiguous):
            xb = np.empty((N, C + 1, P), dt)
            np.copyto(xb[:, :C].reshape(xs.shape), xs)
            xb[:, C] = 1
            y = matmul(cw.matb, xb[0] if N == 1 else xb)
            return y.reshape((N, M) + out), "bias"
        if not xs.flags.c_contiguous:
            xs = np.ascontiguousarray(xs)
        wm = cw.mat
        if g == 1:
            y = matmul(wm[0], xs.reshape(N, C, P))
        else:
            y = matmul(wm, xs.reshape(N, g, Cg, P))
        y = y.reshape((N, M) + out)
    elif n == 2 and g == 1 and N == 1 and dt == np.float32 and _fast.enabled() and strides[1] <= 16:
        # compiled im2col in cache-sized blocks of output rows, one GEMM per block (ops/_fast_windows.py)
        y = _fast_windows.conv2d_blocked(xc, cw.mat[0], kernel, strides, dilations, geo.begin, out)
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
        fold = b is not None and g == 1 and b is cw.bias_src  # bias: a row of ones x a column (deferred too: above)
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
            return y, "bias"
    if b is None:
        return y, "bias"
    if defer_bias:
        return y, ""
    y += b.astype(dt, copy=False).reshape((M,) + (1,) * n)
    return y, "bias"


class ConvRoutes:
    """A prepared convolution's path per input shape, its arguments bound: a model runs the same shapes again and
    again, and picking the path (the checks, the geometry, five rules on the shape) cost ~3 us a call, more than some
    layers' kernels (ResNet-style ncnn fixture at 224 x 224, its kernels stubbed out: see the commit). ``geo``: the
    fixed attributes (onnx:Conv's, without group), ``clip`` the fused clip. A call ``(x, b, defer_bias)`` with x of
    cw's dtype returns ``(y, done)`` as :func:`_conv_forward_parts`; a bias other than the one a route was made for
    (or a path without a bound form) goes the general way, with the same bits."""

    __slots__ = ("cw", "geo", "clip", "_routes")

    def __init__(self, cw: ConvWeight, geo: dict, clip=None):
        self.cw = cw
        self.geo = (
            _tup(geo.get("kernel_shape", ())),
            _tup(geo.get("strides", ())),
            _tup(geo.get("dilations", ())),
            _tup(geo.get("pads", ())),
            geo.get("auto_pad", "NOTSET"),
        )
        if clip is not None:
            clip = tuple(None if v is None else cw.dtype.type(v) for v in clip)
            if clip == (None, None):
                clip = None
        self.clip = clip
        self._routes: dict = {}

    def __call__(self, x, b, defer_bias: bool = False):
        key = (x.shape, defer_bias, _fast.enabled())
        r = self._routes.get(key)
        limits = limits_in_force()
        if r is None or r[2] is not limits:  # the limits object compared, not hashed (~0.5 us a call)
            r = self._route(x.shape, b, defer_bias) + (limits,)
            if len(self._routes) > 64:
                self._routes.clear()
            self._routes[key] = r
        fn, b0, _ = r
        if fn is not None and b is b0 and x.dtype == self.cw.dtype:
            return fn(x)
        return _conv_forward(x, self.cw, b, *self.geo, self.clip, defer_bias)

    def _route(self, x_shape, b, defer_bias: bool):
        """(fn(x) -> (y, done), the bias it was bound with), fn None for the general way."""
        cw, clip = self.cw, self.clip
        n, strides, dilations, geo = _conv_checks(_Shaped(x_shape), cw, *self.geo)
        if b is not None and (not isinstance(b, np.ndarray) or b.shape != (cw.M,)):
            return None, b  # the general way reports it
        M, kernel, out = cw.M, cw.kernel, geo.out
        dt = cw.dtype
        done = "bias+clip"
        if cw.Cg == 1 and cw.group > 1:
            return (lambda x: (depthwise(x, cw, geo, strides, dilations, b, clip), done)), b
        if _winochan.takes(cw, n, out, strides, dilations):  # _conv_forward's order of the paths
            chan = _winochan.conv_call(x_shape, cw, b, geo.begin, out, clip)
            return (lambda x: (chan(x), done)), b
        if _winoblock.takes(cw, n, out, strides, dilations):
            bb = bias_array(b, dt)
            return (lambda x: (_winoblock.conv(x, cw, bb, geo.begin, out, clip), done)), b
        if _fast_stem.takes(cw, n, out, strides, dilations):
            stem = _fast_stem.stem_call(
                x_shape, cw.stem_packed(), M, kernel, strides, geo.begin, out, b, clip, cw.group
            )
            return (lambda x: (stem(x), done)), b
        in_place = pointwise_in_place(cw, n, x_shape, geo, strides)
        if not in_place and pointwise_compiled(cw, n, prod(out)):
            N, C, P = x_shape[0], x_shape[1], prod(out)
            pw = _fast_pointwise.pointwise_call((N, C, P), cw.pw_packed(), M, b, _fast._clip_args(clip, dt))
            padded = any(geo.begin) or any(geo.end)
            taps = tap_slices((0,) * n, dilations, strides, out) if any(s != 1 for s in strides) else None
            ymshape = (N, M) + out

            def pointwise(x):
                xs = pad_input(x, geo.begin, geo.end) if padded else x
                if taps is not None:
                    xs = xs[taps]
                if not xs.flags.c_contiguous:
                    xs = np.ascontiguousarray(xs)
                return pw(xs.reshape(N, C, P)).reshape(ymshape), done

            return pointwise, b
        if in_place or direct_packed(cw, n, out, strides, dilations):
            call = _fast_conv.packed_call(x_shape, cw.packed(), M, kernel, strides, dilations, geo.begin, out, b, clip)
            return (lambda x: (call(x), done)), b
        wt = cw.winograd_tile(strides, dilations, out) if n == 2 else 0
        if wt == 4 and _fast.enabled():
            up = cw.wino_packed(4) if dt == np.float32 and cw.Cg >= _F4_PACKED_MIN_C and _fast_conv.TILES_OK else None
            u, bb, tile4 = cw.wino(4), bias_array(b, dt), TILES[4]
            return (lambda x: (_fast.winograd(tile4, x, u, bb, geo.begin, out, clip, up), done)), b
        if wt == 2 and _fast.enabled():
            up = cw.wino_packed(2) if dt == np.float32 and _WINO_PACKED and _fast_conv.TILES_OK else None
            u, bb, tile2 = cw.wino(2), bias_array(b, dt), TILES[2]
            return (lambda x: (_fast_wino2.winograd2(tile2, x, u, bb, geo.begin, out, clip, up), done)), b
        return None, b


class _Shaped:
    """A stand-in with only a shape, for checking a call's geometry before an input of that shape exists."""

    __slots__ = ("shape", "ndim")

    def __init__(self, shape):
        self.shape, self.ndim = shape, len(shape)


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
    routes = ConvRoutes(cw, geo)

    def conv_prepared(x, w_, b=None):
        if x.dtype != wdt:  # a dtype mismatch: the plain kernel decides
            return conv(x, w_, b, **attrs)
        y = routes(x, b)[0]
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
