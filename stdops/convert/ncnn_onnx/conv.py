"""Convolution-family ncnn layers -> ONNX: Convolution / ConvolutionDepthWise (1D, 2D, 3D; int8), Deconvolution /
DeconvolutionDepthWise (1D, 2D, 3D), DeformableConv2D, Unfold, Fold.

ncnn stores convolution weights as ONNX does, (M, C/group, *k); deconvolution weights as (group, M/group,
C/group, *k), transposed here to ONNX's (C, M/group, *k), as the front end does (stdops/ncnn/layers/conv.py).
SAME pads (-233 / -234) are resolved with ncnn's rule on the measured input size into explicit pads (a
negative total crops first, as ncnn's border copy does). int8 convolution (int8_scale_term) quantizes the
input with ncnn's rounding, sums exactly with ConvInteger and dequantizes per output channel.
"""

from __future__ import annotations

import math

import numpy as np

from ...ncnn.layers.conv_geometry import crop_negative, same_pads
from ...ncnn.layers.quant import dequant_scales, quantize_rows
from ..onnx_build import Attrs
from .base import F32, LayerCtx, emits, float2int8, fused_activation, gather_elements, index_map

_AXES = ("w", "h", "d")


def _spatial(p, stem: str, nd: int) -> tuple[int, ...]:
    """A per-axis param outermost first (d, h, w)[-nd:]."""
    return tuple(int(getattr(p, f"{stem}_{a}")) for a in reversed(_AXES[:nd]))


def _pads(p, nd: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    names = [("pad_left", "pad_right"), ("pad_top", "pad_bottom"), ("pad_front", "pad_behind")][:nd]
    return (
        tuple(int(getattr(p, b)) for b, _ in reversed(names)),
        tuple(int(getattr(p, e)) for _, e in reversed(names)),
    )


def _crop_box(shape: tuple[int, ...], begin, end) -> tuple[list[int], list[int], tuple, tuple]:
    """ncnn's crop of negative pads on a (C, *sp) blob: (starts, ends) of the kept box over the spatial axes
    and the pads left (>= 0), from the front end's own crop on a numbered blob."""
    numbered = np.arange(int(np.prod(shape))).reshape(shape)
    kept, b, e = crop_negative(numbered, begin, end)
    start = np.unravel_index(int(kept.reshape(-1)[0]), shape) if kept.size else (0,) * len(shape)
    starts = [int(s) for s in start[1:]]
    return starts, [s + n for s, n in zip(starts, kept.shape[1:])], tuple(b), tuple(e)


def conv_input_pads(ctx: LayerCtx, x: str, shape: tuple[int, ...], kernel, strides, dilations, nd: int):
    """(x cropped if needed, begin pads, end pads) of a convolution input of ncnn shape ``shape`` (C, *sp):
    explicit pads, or ncnn's SAME rule for pads -233 / -234; () pads when there are none."""
    begin, end = _pads(ctx.p, nd)
    allp = begin + end
    if any(v > 0 for v in allp):
        if any(v < 0 for v in allp):
            raise ctx.fail(f"pads {list(allp)} mix positive and negative values")
        return x, begin, end
    if all(v == -233 for v in allp) or all(v == -234 for v in allp):
        mode = "upper" if allp[0] == -233 else "lower"
        totals = [d * (k - 1) + 1 + (i - 1) // s * s - i for i, k, s, d in zip(shape[1:], kernel, strides, dilations)]
        be = same_pads(totals, mode, depth_upper=nd == 3)
        if be is None:
            return x, (), ()
        b, e = be
        if min(b) < 0 or min(e) < 0:
            starts, ends, b, e = _crop_box(shape, b, e)
            axes = list(range(2, 2 + nd))
            x = ctx.g.slice(x, starts, ends, axes)
        return x, b, e
    return x, (), ()


def _pad_const(ctx: LayerCtx, x: str, begin, end, value, dtype) -> str:
    pads = [0, 0, *begin, 0, 0, *end]
    return ctx.g.op("Pad", [x, ctx.g.ints(pads, "pads"), ctx.g.const(np.asarray(value, dtype), stem="pad_value")])


def _conv_rank_input(ctx: LayerCtx, nd: int) -> tuple[str, tuple[int, ...]]:
    """The data bottom as (1, C, *sp); a blob one rank short is one channel, as in ncnn."""
    shape = ctx.in_shapes[0]
    if len(shape) == nd:
        return ctx.g.reshape(ctx.x(), (1, 1, *shape)), (1, *shape)
    if len(shape) != nd + 1:
        raise ctx.fail(f"takes a {nd + 1}d blob, got shape {shape}")
    return ctx.x(), shape


def _convolution(ctx: LayerCtx, nd: int, depthwise: bool) -> None:
    g, p, w = ctx.g, ctx.p, ctx.w
    M = int(p.num_output)
    grp = int(getattr(p, "group", 1)) if depthwise else 1
    kernel, strides, dilations = (_spatial(p, s, nd) for s in ("kernel", "stride", "dilation"))
    kp = math.prod(kernel)
    pad_value = float(getattr(p, "pad_value", 0.0))
    term = int(getattr(p, "int8_scale_term", 0))

    if getattr(p, "dynamic_weight", 0):
        wshape = ctx.in_shapes[1]
        kern = tuple(int(k) for k in wshape[-nd:])
        Mw = wshape[0]
        weight = g.reshape(ctx.x(1), (Mw, int(np.prod(wshape)) // (Mw * math.prod(kern)), *kern))
        bias = g.reshape(ctx.x(2), (-1,)) if p.bias_term else None
        kernel = kern
    else:
        wd = w["weight_data"]
        Cg = wd.size // (M * kp)
        wshape = (M, Cg) + kernel
        # ncnn's compatibility path: a flat blob through a 1x1 convolution is an InnerProduct
        if nd == 2 and kp == 1 and not depthwise and not term and ctx.rank() == 1 and ctx.in_shapes[0][0] == Cg:
            ins = [ctx.x(), g.const(wd.astype(F32).reshape(M, Cg), stem="weight")]
            if "bias_data" in w:
                ins.append(g.const(w["bias_data"].astype(F32), stem="bias"))
            y = g.op("Gemm", ins, transB=1)
            ctx.put(0, fused_activation(ctx, y, p.activation_type, p.activation_params))
            return
        if term:
            _convolution_int8(ctx, nd, depthwise, wshape, grp, kernel, strides, dilations, pad_value, term)
            return
        weight = g.const(wd.astype(F32).reshape(wshape), stem="weight")
        bias = g.const(w["bias_data"].astype(F32), stem="bias") if "bias_data" in w else None
    x, shape = _conv_rank_input(ctx, nd)
    x, b, e = conv_input_pads(ctx, x, shape, kernel, strides, dilations, nd)
    pads = None
    if b:
        if pad_value != 0.0:
            x = _pad_const(ctx, x, b, e, pad_value, F32)
        else:
            pads = list(b) + list(e)
    ins = [x, weight] + ([bias] if bias is not None else [])
    y = g.op(
        "Conv", ins, kernel_shape=list(kernel), strides=list(strides), dilations=list(dilations), pads=pads, group=grp
    )
    ctx.put(0, fused_activation(ctx, y, p.activation_type, p.activation_params))


def _convolution_int8(ctx, nd, depthwise, wshape, grp, kernel, strides, dilations, pad_value, term) -> None:
    """The front end's int8 convolution: x8 = float2int8(x * bottom_scale) (int8 blobs as they are), exact
    integer sums (ConvInteger on the values shifted by 128 to uint8, zero point 128), times
    1 / (bottom_scale * weight_scale), + bias, activation; term > 100 requantizes with the top scale."""
    g, p, w = ctx.g, ctx.p, ctx.w
    M = wshape[0]
    wscales = w["weight_data_int8_scales"].astype(F32)
    bscale = F32(w["bottom_blob_int8_scales"][0])
    if depthwise:  # one scale per group
        row_scales = np.broadcast_to(wscales, (grp,)) if wscales.size == 1 else wscales
        per_out = np.repeat(row_scales, M // grp)
        rows = grp
    else:  # one per output channel
        row_scales = per_out = wscales
        rows = M
    wd = w["weight_data"]
    if wd.dtype == np.int8:
        w8 = wd.reshape(wshape)
    else:
        w8 = quantize_rows(wd.astype(F32).reshape(rows, -1), row_scales).reshape(wshape)
    descale = dequant_scales(per_out, bscale).reshape((1, M) + (1,) * nd)
    x, shape = _conv_rank_input(ctx, nd)
    if np.dtype(ctx.in_dtypes[0]) == np.int8:
        x8 = x
    else:
        x8 = float2int8(g, g.op("Mul", [x, g.scalar(bscale)]))
    x8, b, e = conv_input_pads(ctx, x8, shape, kernel, strides, dilations, nd)
    if b:
        x8 = _pad_const(ctx, x8, b, e, np.clip(np.trunc(pad_value), -128, 127), np.int8)
    x_u8 = g.cast(g.op("Add", [g.cast(x8, np.int32), g.scalar(128, np.int32)]), np.uint8)
    w_u8 = g.const((w8.astype(np.int32) + 128).astype(np.uint8), stem="weight_u8")
    zp = g.const(np.asarray(128, np.uint8), stem="zero_point")
    acc = g.op(
        "ConvInteger",
        [x_u8, w_u8, zp, zp],
        kernel_shape=list(kernel),
        strides=list(strides),
        dilations=list(dilations),
        group=grp,
    )
    y = g.op("Mul", [g.cast(acc, np.float32), g.const(descale, stem="descale")])
    if "bias_data" in w:
        y = g.op("Add", [y, g.const(w["bias_data"].astype(F32).reshape((1, M) + (1,) * nd), stem="bias")])
    y = fused_activation(ctx, y, p.activation_type, p.activation_params)
    if term > 100:
        y = float2int8(g, g.op("Mul", [y, g.scalar(w["top_blob_int8_scales"][0])]))
    ctx.put(0, y)


def _deconvolution(ctx: LayerCtx, nd: int, depthwise: bool) -> None:
    g, p, w = ctx.g, ctx.p, ctx.w
    M = int(p.num_output)
    grp = int(getattr(p, "group", 1)) if depthwise else 1
    kernel, strides, dilations = (_spatial(p, s, nd) for s in ("kernel", "stride", "dilation"))
    opad_names = ["output_pad_right", "output_pad_bottom", "output_pad_behind"][:nd]
    opad = [int(getattr(p, n)) for n in reversed(opad_names)]
    if getattr(p, "dynamic_weight", 0):
        wt_shape = ctx.in_shapes[1]
        if len(wt_shape) != nd + 2:
            raise ctx.fail(f"a weight blob of shape {wt_shape} is not (C, M/group, *kernel)")
        kernel = tuple(wt_shape[-nd:])
        weight = g.reshape(ctx.x(1), wt_shape)
        bias = g.reshape(ctx.x(2), (-1,)) if p.bias_term else None
    else:
        kp = math.prod(kernel)
        wd = w["weight_data"]
        Cg = wd.size // (M * kp)
        Mg = M // grp
        wt = wd.astype(F32).reshape((grp, Mg, Cg) + kernel).swapaxes(1, 2).reshape((grp * Cg, Mg) + kernel)
        weight = g.const(np.ascontiguousarray(wt), stem="weight")
        bias = g.const(w["bias_data"].astype(F32), stem="bias") if "bias_data" in w else None
    x, shape = _conv_rank_input(ctx, nd)
    begin, end = _pads(p, nd)
    extend = [0] * nd  # rows of zeros (then bias) beyond the natural size, as the front end's kernel adds
    if any(v > 0 for v in begin + end):
        pads = list(begin) + list(end)
    else:  # no pads, or an output size with SAME_UPPER / SAME_LOWER: explicit pads from the measured size
        out_sp = ctx.out_shapes[0][-nd:]
        upper = -233 in begin + end
        pads_b, pads_e = [], []
        for ax, (i, k, s, d, op_, o) in enumerate(zip(shape[1:], kernel, strides, dilations, opad, out_sp)):
            total = s * (i - 1) + op_ + (k - 1) * d + 1 - o
            lo = total // 2 if upper else total - total // 2
            if total < 0:
                lo = max(0, lo)
            pads_b.append(lo)
            pads_e.append(max(0, total - lo))
            extend[ax] = max(0, lo - total)
        pads = pads_b + pads_e
    attrs: Attrs = dict(
        kernel_shape=list(kernel),
        strides=list(strides),
        dilations=list(dilations),
        pads=pads,
        output_padding=opad,
        group=grp,
    )
    if any(extend):
        y = g.op("ConvTranspose", [x, weight], **attrs)
        y = g.op("Pad", [y, g.ints([0] * (nd + 2) + [0, 0, *extend], "pads")])
        if bias is not None:
            y = g.op("Add", [y, g.reshape(bias, (1, -1) + (1,) * nd)])
    else:
        y = g.op("ConvTranspose", [x, weight] + ([bias] if bias is not None else []), **attrs)
    ctx.put(0, fused_activation(ctx, y, p.activation_type, p.activation_params))


def _declare(type_name: str, nd: int, depthwise: bool, deconv: bool) -> None:
    def emit(ctx: LayerCtx) -> None:
        (_deconvolution if deconv else _convolution)(ctx, nd, depthwise)

    emits(type_name)(emit)


for _name, _nd, _dw, _de in [
    ("Convolution", 2, False, False),
    ("Convolution1D", 1, False, False),
    ("Convolution3D", 3, False, False),
    ("ConvolutionDepthWise", 2, True, False),
    ("ConvolutionDepthWise1D", 1, True, False),
    ("ConvolutionDepthWise3D", 3, True, False),
    ("Deconvolution", 2, False, True),
    ("Deconvolution1D", 1, False, True),
    ("Deconvolution3D", 3, False, True),
    ("DeconvolutionDepthWise", 2, True, True),
    ("DeconvolutionDepthWise1D", 1, True, True),
    ("DeconvolutionDepthWise3D", 3, True, True),
]:
    _declare(_name, _nd, _dw, _de)


@emits("DeformableConv2D")
def deformable_conv2d(ctx: LayerCtx) -> None:
    g, p, w = ctx.g, ctx.p, ctx.w
    M = int(p.num_output)
    kernel = (int(p.kernel_h), int(p.kernel_w))
    kp = kernel[0] * kernel[1]
    wd = w["weight_data"]
    weight = g.const(wd.astype(F32).reshape((M, wd.size // (M * kp)) + kernel), stem="weight")
    x, _ = _conv_rank_input(ctx, 2)
    ins = [x, weight, ctx.x(1)]
    ins.append(g.const(w["bias_data"].astype(F32), stem="bias") if "bias_data" in w else "")
    if len(ctx.ins) > 2:
        ins.append(ctx.x(2))
    while ins[-1] == "":
        ins.pop()
    y = g.op(
        "DeformConv",
        ins,
        kernel_shape=list(kernel),
        strides=[int(p.stride_h), int(p.stride_w)],
        dilations=[int(p.dilation_h), int(p.dilation_w)],
        pads=[int(p.pad_top), int(p.pad_left), int(p.pad_bottom), int(p.pad_right)],
    )
    ctx.put(0, fused_activation(ctx, y, p.activation_type, p.activation_params))


@emits("Unfold")
def unfold(ctx: LayerCtx) -> None:
    """im2col is pure data movement (with pad_value where the window leaves the blob): one traced Gather."""
    ctx.put(0, gather_elements(ctx, *index_map(ctx)))


@emits("Fold")
def fold(ctx: LayerCtx) -> None:
    g, p = ctx.g, ctx.p
    maxk = int(p.kernel_w) * int(p.kernel_h)
    rows = ctx.in_shapes[0][0]
    x = ctx.x()
    c = rows // maxk
    if c * maxk != rows:
        x = g.slice(x, [0], [c * maxk], [1])
    y = g.op(
        "Col2Im",
        [x, g.ints([p.output_h, p.output_w], "image_shape"), g.ints([p.kernel_h, p.kernel_w], "block_shape")],
        dilations=[int(p.dilation_h), int(p.dilation_w)],
        pads=[int(p.pad_top), int(p.pad_left), int(p.pad_bottom), int(p.pad_right)],
        strides=[int(p.stride_h), int(p.stride_w)],
    )
    ctx.put(0, y)
