"""ncnn convolution layers (ncnn-operators.txt): Convolution, Convolution1D, Convolution3D,
ConvolutionDepthWise, ConvolutionDepthWise1D, ConvolutionDepthWise3D, Deconvolution*,
DeconvolutionDepthWise*, DeformableConv2D, on the shared Conv / ConvTranspose / DeformConv kernels.

Layout: a 1D layer takes (C, W), a 2D layer (C, H, W), a 3D layer (C, D, H, W); the kernels get the
blob with a batch axis of 1. ncnn stores convolution weights as (M, C/group, *k) - ONNX's layout - and
deconvolution weights as (group, M/group, C/group, *k), transposed here once to ONNX's (C, M/group, *k).
Params list spatial values innermost first (w, h, d); the kernels want them outermost first (d, h, w).

Padding: any pad > 0 pads explicitly (convolution: with ``pad_value``); every pad -233 / -234 is
SAME_UPPER / SAME_LOWER with ncnn's rule (total = extent + (size - 1) // stride * stride - size, the odd
one at the end / the beginning). Deconvolution crops its full output by the pads, or to
``output_w/h/d`` with -233 / -234 deciding where the odd one goes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ...errors import KernelError
from ...ops import conv as convolution
from ...ops import conv_transpose, fused, linalg, quant, shape_pad
from ...ops.bind import bind
from ..activation import FUSED, fused_activation, fused_step_activation
from ..spec import P, Ref, W, layer
from .conv_geometry import _check_rank, _pad_const, _pad_mode, _pads, _same_pads, _spatial, crop_negative
from .quant import dequant_scales, int8_epilogue, int8_input, quantize_rows

_AXES = ("w", "h", "d")  # innermost first


# ----------------------------------------------------------------------------- param tables
def _conv_params(nd: int, depthwise: bool, deconv: bool, int8: bool, dynamic: bool) -> list[P]:
    """The param table of one variant, in ncnn's load order (Refs point at params declared earlier)."""
    ps = [
        P(0, "num_output", 0),
        P(1, "kernel_w", 0),
        P(2, "dilation_w", 1),
        P(3, "stride_w", 1),
        P(4, "pad_left", 0),
        P(5, "bias_term", 0),
        P(6, "weight_data_size", 0),
    ]
    if depthwise:
        ps.append(P(7, "group", 1))
    if int8:
        ps.append(P(8, "int8_scale_term", 0))
    ps += [P(9, "activation_type", 0), P(10, "activation_params", (), kind="floats")]
    if nd >= 2:
        ps += [
            P(11, "kernel_h", Ref("kernel_w")),
            P(12, "dilation_h", Ref("dilation_w")),
            P(13, "stride_h", Ref("stride_w")),
            P(14, "pad_top", Ref("pad_left")),
        ]
    ps.append(P(15, "pad_right", Ref("pad_left")))
    if nd >= 2:
        ps.append(P(16, "pad_bottom", Ref("pad_top")))
    if nd == 3:
        ps += [
            P(21, "kernel_d", Ref("kernel_w")),
            P(22, "dilation_d", Ref("dilation_w")),
            P(23, "stride_d", Ref("stride_w")),
            P(24, "pad_front", Ref("pad_left")),
            P(17, "pad_behind", Ref("pad_front")),
        ]
    if deconv:
        ps.append(P(18, "output_pad_right", 0))
        if nd >= 2:
            ps.append(P(19, "output_pad_bottom", Ref("output_pad_right")))
        if nd == 3:
            ps += [
                P(20, "output_pad_behind", Ref("output_pad_right")),
                P(25, "output_w", 0),
                P(26, "output_h", Ref("output_w")),
                P(27, "output_d", Ref("output_w")),
            ]
        else:
            ps.append(P(20, "output_w", 0))
            if nd == 2:
                ps.append(P(21, "output_h", Ref("output_w")))
        if dynamic:
            ps.append(P(28, "dynamic_weight", 0))
    else:
        ps.append(P(18, "pad_value", 0.0))
        if dynamic:
            ps.append(P(19, "dynamic_weight", 0))
    return ps


def _conv_weights(depthwise: bool) -> Callable:
    def weights(p):
        if getattr(p, "dynamic_weight", 0):
            return []
        ws = [W("weight_data", p.weight_data_size, tagged=True)]
        if p.bias_term:
            ws.append(W("bias_data", p.num_output))
        term = getattr(p, "int8_scale_term", 0)
        if term:
            if depthwise:
                n = 1 if term in (2, 102) else p.group
            else:
                n = p.num_output
            ws += [W("weight_data_int8_scales", n), W("bottom_blob_int8_scales", 1)]
            if term > 100:
                ws.append(W("top_blob_int8_scales", 1))
        return ws

    return weights


# ----------------------------------------------------------------------------- convolution
def _geometry(p, nd: int, depthwise: bool, type_name: str):
    """(num_output, group, kernel, strides, dilations) of a (de)convolution, checked. With
    dynamic_weight=1, num_output and the kernel come from the weight blob at run time (ncnn reads them
    from its shape), so their params (often 0) are not checked here."""
    M = int(p.num_output)
    g = int(getattr(p, "group", 1)) if depthwise else 1
    kernel = _spatial(p, "kernel", nd)
    strides = _spatial(p, "stride", nd)
    dilations = _spatial(p, "dilation", nd)
    dynamic = bool(getattr(p, "dynamic_weight", 0))
    if g <= 0 or (not dynamic and (M <= 0 or M % g)):
        raise KernelError(f"{type_name}: num_output {M} must be a positive multiple of group {g}")
    if (not dynamic and min(kernel) <= 0) or min(strides) <= 0 or min(dilations) <= 0:
        raise KernelError(f"{type_name}: kernel {kernel}, stride {strides} and dilation {dilations} must be >= 1")
    return M, g, kernel, strides, dilations


def _build_conv(p, w, nd: int, depthwise: bool, type_name: str, int8_build=None, flat_inner_product=None):
    """A convolution layer; ``int8_build`` builds its int8 form (variants with int8_scale_term),
    ``flat_inner_product`` its 1x1 compatibility path (2D convolution)."""
    M, g, kernel, strides, dilations = _geometry(p, nd, depthwise, type_name)
    begin, end = _pads(p, nd)
    mode = _pad_mode(begin, end, type_name)
    pad_value = float(getattr(p, "pad_value", 0.0))
    act = fused_activation(p.activation_type, p.activation_params)
    kp = math.prod(kernel)
    dynamic = bool(getattr(p, "dynamic_weight", 0))
    term = int(getattr(p, "int8_scale_term", 0))

    def geometry(xs, kern=kernel):
        """(pre-padded x, pads for the kernel) for one input."""
        if mode == "explicit":
            b, e = begin, end
        elif mode in ("upper", "lower"):
            be = _same_pads(mode, xs.shape[1:], kern, strides, dilations)
            if be is None:
                return xs, ()
            xs, b, e = crop_negative(xs, *be)
        else:
            return xs, ()
        if pad_value != 0.0 or xs.dtype == np.int8:
            return _pad_const(xs, b, e, pad_value), ()
        return xs, list(b) + list(e)

    def check_in(x):
        return _check_rank(x, nd, type_name)

    if dynamic:
        n_in = 3 if p.bias_term else 2
        if p.n_bottoms != n_in:
            raise KernelError(
                f"{type_name} with dynamic_weight=1 takes {n_in} bottoms (data, weight"
                f"{', bias' if p.bias_term else ''}), the layer has {p.n_bottoms}"
            )

        def run_dynamic(x, wt, b=None):
            xs = check_in(x).astype(np.float32, copy=False)
            wt = np.asarray(wt, np.float32)
            if wt.ndim < nd + 1 or wt.size == 0:
                raise KernelError(f"{type_name}: weight blob of shape {wt.shape} is not (M, C/group, *kernel)")
            kern = tuple(int(k) for k in wt.shape[-nd:])
            Mw = wt.shape[0]
            wk = wt.reshape((Mw, wt.size // (Mw * math.prod(kern))) + kern)
            xs2, pads = geometry(xs, kern)
            bias = None if b is None else np.asarray(b, np.float32).reshape(-1)
            y = convolution.conv(xs2[None], wk, bias, group=g, strides=strides, dilations=dilations, pads=pads)[0]
            return act(y) if act is not None else y

        return run_dynamic

    if p.n_bottoms != 1:
        raise KernelError(f"{type_name} takes 1 bottom, the layer has {p.n_bottoms}")
    wd = w["weight_data"]
    size = wd.size
    if size % (M * kp):
        raise KernelError(f"{type_name}: weight_data_size {size} is not num_output {M} x kernel {kp} x channels")
    Cg = size // (M * kp)
    if Cg == 0:
        raise KernelError(f"{type_name}: weight_data_size {size} is too small")
    # ncnn stores (M, C/group, *k) (by group: (group, M/group, C/group, *k), the same order)
    wshape = (M, Cg) + kernel
    bias = w.get("bias_data")
    bias = None if bias is None else bias.astype(np.float32)

    if wd.dtype == np.int8 and not term:
        raise KernelError(f"{type_name}: int8 weights need int8_scale_term")
    if term:
        return int8_build(
            p, w, wd, wshape, g, bias, strides, dilations, geometry, check_in, act, term, depthwise, type_name
        )

    wf = np.ascontiguousarray(wd.astype(np.float32, copy=False).reshape(wshape))
    # the weights reach the kernel's load-time preparation through the binder; SAME padding depends on
    # the input's size, so there is one binding per padding met (nets feed one size, Extractors a few)
    geo = dict(group=g, strides=strides, dilations=dilations)
    step_act = fused_step_activation(p.activation_type, p.activation_params)
    if step_act is not None:  # the activation applied in the convolution's last pass (stdops/ops/fused.py)
        geo.update(activation=step_act[0], activation_params=step_act[1])
        conv_for = _bindings(fused.conv_act, geo, (None, wf, bias))
    else:
        conv_for = _bindings(convolution.conv, geo, (None, wf, bias))
    after = None if step_act is not None else act
    inner = flat_inner_product(wf, bias) if flat_inner_product is not None and kp == 1 else None

    # pads known at load (explicit or none, padded by the kernel): the binding looked up once; a float32 blob of
    # the layer's rank and channels goes straight to it (the general way below: ~1.5 us a call more)
    fixed = None
    if mode in ("explicit", "none") and pad_value == 0.0:
        fixed = conv_for(list(begin) + list(end) if mode == "explicit" else []).fn
    f32, rank = np.dtype(np.float32), nd + 1

    def run(x):
        if fixed is not None and type(x) is np.ndarray and x.ndim == rank and x.dtype == f32 and x.shape[0] == Cg * g:
            y = fixed(x[None], wf, bias)[0]
            return after(y) if after is not None else y
        if x.ndim == 1 and inner is not None and x.size == wf[0].size:
            y = inner(x)
            return act(y) if act is not None else y
        xs = check_in(x).astype(np.float32, copy=False)
        if xs.shape[0] != Cg * g:
            raise KernelError(f"{type_name}: input has {xs.shape[0]} channels, the weights expect {Cg * g}")
        xs, pads = geometry(xs)
        y = conv_for(pads)(xs[None], wf, bias)[0]
        return after(y) if after is not None else y

    if nd == 2 and mode in ("explicit", "none") and pad_value == 0.0 and (act is None or step_act is not None):
        # the layer as one onnx:Conv-like conv_act on a batch of 1, for the ncnn plan's fusions (stdops/ncnn/fuse.py)
        run.conv_form = ConvForm(  # type: ignore[attr-defined]
            wf,
            bias,
            {
                **geo,
                "kernel_shape": kernel,
                "pads": tuple(begin) + tuple(end) if mode == "explicit" else (0,) * 4,
                "activation": step_act[0] if step_act is not None else "",
                "activation_params": tuple(step_act[1]) if step_act is not None else (),
            },
        )
    return run


class ConvForm:
    """A float32 2-D ncnn convolution layer as the shared ``conv_act`` kernel's inputs: W (M, C/group, kh, kw),
    B (M,) or None, and its attributes (onnx:Conv's, outermost first, plus the fused activation)."""

    __slots__ = ("w", "b", "attrs")

    def __init__(self, w: np.ndarray, b: np.ndarray | None, attrs: dict):
        self.w, self.b, self.attrs = w, b, attrs


def _flat_inner_product(wf: np.ndarray, bias):
    """ncnn's old compatibility path: a flat blob through a 1x1 convolution is an InnerProduct."""
    w2d = np.ascontiguousarray(wf.reshape(wf.shape[0], -1))
    step = bind(linalg.gemm, {"transB": 1}, (None, w2d, bias))
    return lambda x: step(x.astype(np.float32, copy=False)[None], w2d, bias)[0]


def _bindings(kernel, attrs: dict, constants: tuple, keep: int = 8):
    """pads -> the kernel bound with them (and the constant weights), the last ``keep`` kept."""
    bound: dict = {}

    def for_pads(pads):
        key = tuple(pads)
        b = bound.get(key)
        if b is None:
            if len(bound) >= keep:
                bound.pop(next(iter(bound)))
            b = bound[key] = bind(kernel, {**attrs, "pads": list(key)}, constants)
        return b

    return for_pads


def _build_conv_int8(
    p, w, wd, wshape, g, bias, strides, dilations, geometry, check_in, act, term, depthwise, type_name
):
    """int8 convolution: the input quantized with the bottom scale (int8 blobs pass through), weights
    quantized per output channel (by group for depthwise) unless stored int8, exact integer sums (the
    ConvInteger kernel), dequantized by 1 / (bottom_scale * weight_scale), bias, activation, and for
    int8_scale_term > 100 requantized to an int8 blob with the top scale (the shared int8 epilogue)."""
    M = wshape[0]
    wscales = w["weight_data_int8_scales"].astype(np.float32)
    bscale = np.float32(w["bottom_blob_int8_scales"][0])
    if depthwise:
        per_group = np.broadcast_to(wscales, (g,)) if wscales.size == 1 else wscales
        per_out = np.repeat(per_group, M // g)
    else:
        per_group = None
        per_out = wscales
    if wd.dtype == np.int8:
        w8 = wd.reshape(wshape)
    elif depthwise:
        w8 = quantize_rows(wd.astype(np.float32).reshape(g, -1), per_group).reshape(wshape)
    else:
        w8 = quantize_rows(wd.astype(np.float32).reshape(M, -1), per_out).reshape(wshape)
    descale = dequant_scales(per_out, bscale).reshape(M, *(1,) * (len(wshape) - 2))
    top = np.float32(w["top_blob_int8_scales"][0]) if term > 100 else None
    b = None if bias is None else bias.reshape(descale.shape)
    # exact int8 x int8 sums: the ConvInteger kernel, its weights prepared once through the binder (an int8
    # blob is always padded here, with the quantized pad value, so the kernel gets no pads)
    w8 = np.ascontiguousarray(w8)
    acc_step = bind(quant.conv_integer, dict(group=g, strides=strides, dilations=dilations), (None, w8))
    Cg = wshape[1]

    def run(x):
        xs = check_in(x)
        if xs.shape[0] != Cg * g:
            raise KernelError(f"{type_name}: input has {xs.shape[0]} channels, the weights expect {Cg * g}")
        x8, _ = geometry(int8_input(xs, bscale))
        return int8_epilogue(acc_step(x8[None], w8)[0], descale, b, act, top)

    return run


# ----------------------------------------------------------------------------- deconvolution
def _build_deconv(p, w, nd: int, depthwise: bool, type_name: str):
    M, g, kernel, strides, dilations = _geometry(p, nd, depthwise, type_name)
    begin, end = _pads(p, nd)
    allp = begin + end
    opad_names = ["output_pad_right", "output_pad_bottom", "output_pad_behind"][:nd]
    opad = tuple(int(getattr(p, n)) for n in reversed(opad_names))
    out_names = ["output_w", "output_h", "output_d"][:nd]
    outsz = tuple(int(getattr(p, n)) for n in reversed(out_names))
    act = fused_activation(p.activation_type, p.activation_params)
    if min(opad) < 0:
        raise KernelError(f"{type_name}: output pads {list(opad)} must be >= 0")
    kw: dict = dict(group=g, strides=strides, dilations=dilations, output_padding=opad)
    if any(v > 0 for v in allp):
        if any(v < 0 for v in allp):
            raise KernelError(f"{type_name}: pads {list(allp)} mix positive and negative values")
        kw["pads"] = list(begin) + list(end)
    elif all(v > 0 for v in outsz):
        if any(v == -233 for v in allp):
            kw.update(output_shape=outsz, auto_pad="SAME_UPPER")
        elif any(v == -234 for v in allp):
            kw.update(output_shape=outsz, auto_pad="SAME_LOWER")
        else:
            raise KernelError(
                f"{type_name}: output_w/h/d {list(outsz)} need pads -233 (SAME_UPPER) or -234 (SAME_LOWER)"
            )
    deconv = conv_transpose.conv_transpose

    def finish(y):
        return act(y) if act is not None else y

    if getattr(p, "dynamic_weight", 0):
        n_in = 3 if p.bias_term else 2
        if p.n_bottoms != n_in:
            raise KernelError(
                f"{type_name} with dynamic_weight=1 takes {n_in} bottoms (data, weight"
                f"{', bias' if p.bias_term else ''}), the layer has {p.n_bottoms}"
            )

        def run_dynamic(x, wt, b=None):
            xs = _check_rank(x, nd, type_name).astype(np.float32, copy=False)
            wt = np.asarray(wt, np.float32)
            if wt.ndim != nd + 2:
                raise KernelError(f"{type_name}: weight blob of shape {wt.shape} is not (C, M/group, *kernel)")
            bias = None if b is None else np.asarray(b, np.float32).reshape(-1)
            return finish(deconv(xs[None], wt, bias, **kw)[0])

        return run_dynamic

    if p.n_bottoms != 1:
        raise KernelError(f"{type_name} takes 1 bottom, the layer has {p.n_bottoms}")
    kp = math.prod(kernel)
    wd = w["weight_data"]
    size = wd.size
    if size % (M * kp) or size == 0:
        raise KernelError(f"{type_name}: weight_data_size {size} is not num_output {M} x kernel {kp} x channels")
    if wd.dtype == np.int8:
        raise KernelError(f"{type_name}: int8 weights are not supported (ncnn has no int8 deconvolution)")
    Cg = size // (M * kp)
    Mg = M // g
    # (group, M/group, C/group, *k) -> (C, M/group, *k)
    wt = np.ascontiguousarray(
        wd.astype(np.float32).reshape((g, Mg, Cg) + kernel).swapaxes(1, 2).reshape((g * Cg, Mg) + kernel)
    )
    bias = w.get("bias_data")
    bias = None if bias is None else bias.astype(np.float32)
    step = bind(conv_transpose.conv_transpose, kw, (None, wt, bias))

    def run(x):
        xs = _check_rank(x, nd, type_name).astype(np.float32, copy=False)
        if xs.shape[0] != g * Cg:
            raise KernelError(f"{type_name}: input has {xs.shape[0]} channels, the weights expect {g * Cg}")
        return finish(step(xs[None], wt, bias)[0])

    return run


# ----------------------------------------------------------------------------- declarations
def _declare(type_name: str, nd: int, depthwise: bool, deconv: bool, int8: bool, dynamic: bool) -> None:
    params = _conv_params(nd, depthwise, deconv, int8, dynamic)
    int8_build = _build_conv_int8 if int8 else None
    flat = _flat_inner_product if nd == 2 and not depthwise and not deconv else None
    if deconv:
        kernels = (conv_transpose.conv_transpose, *FUSED)

        def build(p, w):
            return _build_deconv(p, w, nd, depthwise, type_name)
    else:
        kernels = (convolution.conv, fused.conv_act, shape_pad.pad, *FUSED)
        kernels += (quant.conv_integer,) if int8 else ()
        kernels += (linalg.gemm,) if flat else ()

        def build(p, w):
            return _build_conv(p, w, nd, depthwise, type_name, int8_build, flat)

    kind = ("deconvolution" if deconv else "convolution") + (" by group" if depthwise else "")
    build.__doc__ = (
        f"{nd}D {kind} (+ bias, fused activation) on the shared "
        f"{'ConvTranspose' if deconv else 'Conv'} kernel"
        + ("; weight (and bias) as bottoms when dynamic_weight=1" if dynamic else "")
        + ("; int8 with int8_scale_term" if int8 else "")
        + "."
    )
    layer(type_name, params=params, weights=_conv_weights(depthwise), inputs=None if dynamic else 1, kernels=kernels)(
        build
    )


for _name, _nd, _dw, _de, _i8, _dyn in [
    ("Convolution", 2, False, False, True, True),
    ("Convolution1D", 1, False, False, False, True),
    ("Convolution3D", 3, False, False, False, False),
    ("ConvolutionDepthWise", 2, True, False, True, True),
    ("ConvolutionDepthWise1D", 1, True, False, False, True),
    ("ConvolutionDepthWise3D", 3, True, False, False, False),
    ("Deconvolution", 2, False, True, False, True),
    ("Deconvolution1D", 1, False, True, False, True),
    ("Deconvolution3D", 3, False, True, False, False),
    ("DeconvolutionDepthWise", 2, True, True, False, True),
    ("DeconvolutionDepthWise1D", 1, True, True, False, True),
    ("DeconvolutionDepthWise3D", 3, True, True, False, False),
]:
    _declare(_name, _nd, _dw, _de, _i8, _dyn)


@layer(
    "DeformableConv2D",
    params=[
        P(0, "num_output", 0),
        P(1, "kernel_w", 0),
        P(2, "dilation_w", 1),
        P(3, "stride_w", 1),
        P(4, "pad_left", 0),
        P(5, "bias_term", 0),
        P(6, "weight_data_size", 0),
        P(9, "activation_type", 0),
        P(10, "activation_params", (), kind="floats"),
        P(11, "kernel_h", Ref("kernel_w")),
        P(12, "dilation_h", Ref("dilation_w")),
        P(13, "stride_h", Ref("stride_w")),
        P(14, "pad_top", Ref("pad_left")),
        P(15, "pad_right", Ref("pad_left")),
        P(16, "pad_bottom", Ref("pad_top")),
    ],
    weights=lambda p: [
        W("weight_data", p.weight_data_size, tagged=True),
        *([W("bias_data", p.num_output)] if p.bias_term else []),
    ],
    inputs=None,
    kernels=(conv_transpose.deform_conv, *FUSED),
)
def deformable_conv2d(p, w):
    """Deformable 2D convolution (one offset group; offset (2*kh*kw, OH, OW) as (dy, dx) per tap, optional
    mask (kh*kw, OH, OW) as a third bottom; samples outside the input read 0) on the shared DeformConv
    kernel, + bias, fused activation."""
    M = int(p.num_output)
    kernel = (int(p.kernel_h), int(p.kernel_w))
    strides = (int(p.stride_h), int(p.stride_w))
    dilations = (int(p.dilation_h), int(p.dilation_w))
    pads = [int(p.pad_top), int(p.pad_left), int(p.pad_bottom), int(p.pad_right)]
    if M <= 0 or min(kernel) <= 0 or min(strides) <= 0 or min(dilations) <= 0 or min(pads) < 0:
        raise KernelError(
            f"DeformableConv2D: bad num_output {M} / kernel {kernel} / stride {strides} / "
            f"dilation {dilations} / pads {pads}"
        )
    if p.n_bottoms not in (2, 3):
        raise KernelError(f"DeformableConv2D takes 2 or 3 bottoms (data, offset[, mask]), the layer has {p.n_bottoms}")
    kp = kernel[0] * kernel[1]
    wd = w["weight_data"]
    if wd.size % (M * kp) or wd.size == 0:
        raise KernelError(f"DeformableConv2D: weight_data_size {wd.size} is not num_output {M} x {kp} x channels")
    if wd.dtype == np.int8:
        raise KernelError("DeformableConv2D: int8 weights are not supported (ncnn computes it in float)")
    wf = wd.astype(np.float32).reshape((M, wd.size // (M * kp)) + kernel)
    bias = w.get("bias_data")
    act = fused_activation(p.activation_type, p.activation_params)
    fn = conv_transpose.deform_conv

    def run(x, offset, mask=None):
        xs = _check_rank(x, 2, "DeformableConv2D").astype(np.float32, copy=False)
        off = np.asarray(offset, np.float32)[None]
        m = None if mask is None else np.asarray(mask, np.float32)[None]
        y = fn(xs[None], wf, off, bias, m, strides=strides, dilations=dilations, pads=pads)[0]
        return act(y) if act is not None else y

    return run
