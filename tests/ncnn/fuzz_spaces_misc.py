"""Param spaces of the resampling, int8, spectral and detection layers (Interp, GridSample, Fold, Unfold,
Quantize, Dequantize, Requantize, Spectrogram, InverseSpectrogram, DetectionOutput, PriorBox, Proposal,
YoloDetectionOutput, Yolov3DetectionOutput, ROIAlign, ROIPooling, PSROIPooling) for the fuzzer."""

from __future__ import annotations

import numpy as np

from .fuzz_engine import Ctx, Space
from .fuzz_spaces_conv import ACTIVATION_CHOICES, fix_activation

SPACES: dict[str, Space] = {}


def _ins(ctx: Ctx) -> list[np.ndarray]:
    return ctx.extra["ins"]


# ----------------------------------------------------------------------------- Interp
def _interp_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    rt = int(ctx.get("resize_type"))
    if rt not in (1, 2, 3):
        ctx.params["resize_type"] = rt = 2
    if rt == 1:
        ctx.params.pop("align_corner", None)
    h, w = (int(v) for v in rng.integers(2, 9, 2))
    x = ctx.f32(int(rng.integers(1, 4)), h, w)
    for n in ("height_scale", "width_scale", "output_height", "output_width", "dynamic_target_size", "size_expr"):
        ctx.params.pop(n, None)
    form = ctx.choice(["scale", "size", "2d", "1d", "dynamic", "expr"])
    ins = [x]
    scales = [0.5, 0.75, 1.0, 1.5, 2.0, 2.7, 3.0, 0.4]
    if form == "scale":
        ctx.params["height_scale"], ctx.params["width_scale"] = ctx.choice(scales), ctx.choice(scales)
    elif form == "size":
        lo = 2 if (rt == 3 or ctx.get("align_corner")) else 1
        ctx.params["output_height"], ctx.params["output_width"] = (int(v) for v in rng.integers(lo, 13, 2))
    elif form == "2d":  # w only
        ins = [x[0]]
        if rng.random() < 0.5:
            ctx.params.update(width_scale=ctx.choice(scales), height_scale=1.0)
        else:
            ctx.params.update(output_width=int(rng.integers(2, 13)), output_height=1)
    elif form == "1d":  # channels filled with each value
        ins = [ctx.f32(int(rng.integers(1, 6)))]
        ctx.params["output_height"], ctx.params["output_width"] = (int(v) for v in rng.integers(1, 5, 2))
    elif form == "dynamic":  # the size of a second bottom
        ctx.params["dynamic_target_size"] = 1
        ins.append(ctx.choice([ctx.f32(1, 7, 9), ctx.f32(7, 9), ctx.f32(3, 3, 4), ctx.f32(8)]))
    else:
        ctx.params["size_expr"] = ctx.choice(["*(0w,2),+(0h,3)", "//(*(0w,3),2)", "+(0w,1),0h"])
    ctx.extra["ins"] = ins


SPACES["Interp"] = Space(
    choices={
        "resize_type": [1, 2, 3],
        "height_scale": [None],
        "width_scale": [None],
        "output_height": [None],
        "output_width": [None],
        "dynamic_target_size": [None],
        "align_corner": [0, 1],
        "size_expr": [None],
    },
    fix=_interp_fix,
    inputs=_ins,
)


def _gridsample_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    st = int(ctx.get("sample_type"))
    pf = int(ctx.get("permute_fusion"))
    c = int(rng.integers(1, 4))
    if st != 3 and rng.random() < 0.25:
        x = ctx.f32(c, 3, 4, 5)
        g = rng.uniform(-1.3, 1.3, (2, 3, 4, 3)).astype(np.float32)
    else:
        x = ctx.f32(c, int(rng.integers(3, 7)), int(rng.integers(3, 7)))
        g = rng.uniform(-1.3, 1.3, (int(rng.integers(2, 6)), int(rng.integers(2, 6)), 2)).astype(np.float32)
        if rng.random() < 0.2:  # on the pixel grid and half-way between
            g = (np.round(g * 8) / 8).astype(np.float32)
    if pf:
        g = np.ascontiguousarray(np.moveaxis(g, -1, 0))
    ctx.extra["ins"] = [x, g]


SPACES["GridSample"] = Space(
    choices={"sample_type": [1, 2, 3], "padding_mode": [1, 2, 3], "align_corner": [0, 1], "permute_fusion": [0, 1]},
    fix=_gridsample_fix,
    inputs=_ins,
)

_FOLD_CHOICES = {
    "kernel_w": [1, 2, 3],
    "kernel_h": [1, 2, 3],
    "dilation_w": [1, 2],
    "dilation_h": [1, 2],
    "stride_w": [1, 2],
    "stride_h": [1, 2],
    "pad_left": [0, 1],
    "pad_right": [0, 1],
    "pad_top": [0, 1],
    "pad_bottom": [0, 1],
}


def _fold_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    kw, kh = int(ctx.get("kernel_w")) or 1, int(ctx.get("kernel_h")) or 1
    ctx.params["kernel_w"] = kw
    dw, dh, sw, sh = (int(ctx.get(n)) for n in ("dilation_w", "dilation_h", "stride_w", "stride_h"))
    pl, pr, pt, pb = (int(ctx.get(n)) for n in ("pad_left", "pad_right", "pad_top", "pad_bottom"))
    ow = int(rng.integers(dw * (kw - 1) + 1, 9)) if dw * (kw - 1) + 1 < 9 else dw * (kw - 1) + 1
    ow = max(ow, 4)
    oh = max(int(rng.integers(4, 9)), dh * (kh - 1) + 1)
    ctx.params["output_w"] = ow
    if ctx.has("output_h") or kh != kw or rng.random() < 0.7:
        ctx.params["output_h"] = oh
    else:
        oh = ow
    nw = (ow + pl + pr - (dw * (kw - 1) + 1)) // sw + 1
    nh = (oh + pt + pb - (dh * (kh - 1) + 1)) // sh + 1
    c = int(rng.integers(1, 4))
    if ctx.has("num_output"):
        ctx.params["num_output"] = c * kw * kh
    ctx.extra["ins"] = [ctx.f32(c * kw * kh, nw * nh)]


SPACES["Fold"] = Space(
    choices={**_FOLD_CHOICES, "num_output": [0], "output_w": [None], "output_h": [None]}, fix=_fold_fix, inputs=_ins
)


def _unfold_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    kw, kh = int(ctx.get("kernel_w")) or 1, int(ctx.get("kernel_h")) or 1
    ctx.params["kernel_w"] = kw
    if ctx.get("pad_left") in (-233, -234):
        for n in ("pad_right", "pad_top", "pad_bottom"):
            ctx.params[n] = ctx.get("pad_left")
    else:
        for n in ("pad_right", "pad_top", "pad_bottom"):
            if ctx.has(n) and ctx.params[n] < 0:
                ctx.params[n] = 0
    dw, dh = int(ctx.get("dilation_w")), int(ctx.get("dilation_h"))
    h = dh * (kh - 1) + 1 + int(rng.integers(0, 5))
    w = dw * (kw - 1) + 1 + int(rng.integers(0, 5))
    c = int(rng.integers(1, 4))
    if ctx.has("num_output"):  # ncnn's Unfold reads it but sizes the output from the kernel and channels
        ctx.params["num_output"] = ctx.choice([0, c * kw * kh])
    ctx.extra["ins"] = [ctx.f32(c, h, w)]


SPACES["Unfold"] = Space(
    choices={
        **_FOLD_CHOICES,
        "pad_left": [0, 1, 2, -233, -234],
        "pad_right": [0, 1, 2],
        "pad_top": [0, 1, 2],
        "pad_bottom": [0, 1, 2],
        "pad_value": [0.0, 0.5, -2.0],
        "num_output": [0],
    },
    fix=_unfold_fix,
    inputs=_ins,
)


# ----------------------------------------------------------------------------- int8
def _per(ctx: Ctx) -> int:
    """One value, or one per row / channel."""
    return ctx.shape[0] if ctx.rank >= 2 and ctx.rng.random() < 0.5 else 1


def _quantize_fix(ctx: Ctx) -> None:
    ctx.params["scale_data_size"] = _per(ctx)
    ctx.extra["scale_range"] = (10, 120)


def _scaled_weights(ctx: Ctx, declared: list) -> list[np.ndarray]:
    out = []
    for w in declared:
        n = int(w.size)
        lo, hi = ctx.extra.get(w.name, ctx.extra.get("scale_range", (0.5, 2)) if "scale" in w.name else (-1, 1))
        out.append(ctx.rng.uniform(lo, hi, n).astype(np.float32))
    return out


SPACES["Quantize"] = Space(
    choices={"scale_data_size": [None]},
    fix=_quantize_fix,
    inputs=lambda ctx: [(ctx.rng.standard_normal(ctx.shape) * 2).astype(np.float32)],
    weights=_scaled_weights,
    atol=0,
    rtol=0,
)


def _int32_input(ctx: Ctx) -> list[np.ndarray]:
    x = ctx.rng.integers(-20000, 20000, ctx.shape).astype(np.int32)
    ctx.extra["wheel_inputs"] = [x.view(np.float32)]  # the wheel reads the blob's bits as int32
    return [x]


def _dequantize_fix(ctx: Ctx) -> None:
    ctx.params["scale_data_size"] = _per(ctx)
    if ctx.has("bias_data_size"):
        ctx.params["bias_data_size"] = _per(ctx) if ctx.params["bias_data_size"] else 0
    ctx.extra["scale_range"] = (1e-4, 1e-2)


SPACES["Dequantize"] = Space(
    choices={"scale_data_size": [None], "bias_data_size": [0, 1]},
    fix=_dequantize_fix,
    inputs=_int32_input,
    weights=_scaled_weights,
)


def _requantize_fix(ctx: Ctx) -> None:
    ctx.params["scale_in_data_size"] = _per(ctx)
    ctx.params["scale_out_data_size"] = _per(ctx)
    if ctx.has("bias_data_size"):
        ctx.params["bias_data_size"] = _per(ctx) if ctx.params["bias_data_size"] else 0
    ctx.extra["scale_in_data"] = (1e-4, 1e-3)
    ctx.extra["scale_out_data"] = (20, 100)
    fix_activation(ctx)


def _act64(v: np.ndarray, t: int, a: list) -> np.ndarray:
    """ncnn's activation_type 0..6 in float64 (for the tie mask only)."""
    if t == 1:
        return np.maximum(v, 0)
    if t == 2:
        return np.where(v > 0, v, v * a[0])
    if t == 3:
        return np.clip(v, a[0], a[1])
    if t == 4:
        return 1 / (1 + np.exp(-v))
    if t == 5:
        return v * np.tanh(np.log1p(np.exp(v)))
    if t == 6:
        return v * np.clip(v * a[0] + a[1], 0, 1)
    return v


def _requantize_mask(ctx: Ctx, k: int, theirs: np.ndarray) -> np.ndarray:
    """Where float2int8's input is not within float32 noise of a .5 tie: ncnn computes x * scale_in + bias
    as one fused multiply-add where the build and CPU have FMA (one rounding, not two), so a value at a tie
    rounds either way depending on the machine."""
    x = ctx.inputs[0].astype(np.float64)
    ws = [w.astype(np.float64) for w in ctx.weights]

    def per(v):
        return v.reshape((v.size,) + (1,) * (x.ndim - 1)) if v.size > 1 else v.reshape(())

    b = per(ws[2]) if len(ws) > 2 else 0.0
    v = _act64(x * per(ws[0]) + b, int(ctx.get("activation_type")), list(ctx.get("activation_params") or [0, 0]))
    y = np.abs(v * per(ws[1]))
    return np.abs(y - np.floor(y) - 0.5) > 2e-5 * np.maximum(1.0, y)


SPACES["Requantize"] = Space(
    choices={
        "scale_in_data_size": [None],
        "scale_out_data_size": [None],
        "bias_data_size": [0, 1],
        **ACTIVATION_CHOICES,
    },
    fix=_requantize_fix,
    inputs=_int32_input,
    weights=_scaled_weights,
    mask=_requantize_mask,
    atol=0,
    rtol=0,
)


# ----------------------------------------------------------------------------- spectral
def _spectral_fix(ctx: Ctx, inverse: bool) -> None:
    rng = ctx.rng
    n_fft = int(rng.integers(2, 17))
    ctx.params["n_fft"] = n_fft
    if n_fft < 4 or ctx.has("hoplen"):  # the default hop n_fft / 4 must not be 0 (ncnn divides by it)
        ctx.params["hoplen"] = int(rng.integers(1, n_fft + 1))
    if rng.random() < 0.4:  # a window shorter than n_fft (zero-padded to it)
        ctx.params["winlen"] = int(rng.integers(1, n_fft + 1))
    if inverse:
        freqs = n_fft // 2 + 1 if rng.random() < 0.8 else n_fft
        ctx.extra["ins"] = [ctx.f32(freqs, int(rng.integers(2, 8)), 2)]
    else:
        ctx.extra["ins"] = [ctx.f32(int(rng.integers(n_fft + 1, 4 * n_fft + 8)))]
        ctx.extra["tol"] = (2e-4, 1e-4)
    if inverse:
        ctx.extra["tol"] = (2e-4, 1e-4)


_SPECTRAL = {"window_type": [0, 1, 2], "center": [0, 1], "normalized": [0, 1, 2], "n_fft": [None],
             "hoplen": [None], "winlen": [None]}  # fmt: skip
SPACES["Spectrogram"] = Space(
    choices={**_SPECTRAL, "power": [0, 1, 2], "pad_type": [0, 1, 2], "onesided": [0, 1]},
    fix=lambda ctx: _spectral_fix(ctx, False),
    inputs=_ins,
)
SPACES["InverseSpectrogram"] = Space(
    choices={**_SPECTRAL, "returns": [0, 1, 2]}, fix=lambda ctx: _spectral_fix(ctx, True), inputs=_ins
)


# ----------------------------------------------------------------------------- detection
def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)


def _boxes(rng, n):
    c = rng.uniform(0.1, 0.9, size=(n, 2))
    s = rng.uniform(0.05, 0.4, size=(n, 2))
    return np.concatenate([c - s / 2, c + s / 2], axis=1).astype(np.float32)


def _detectionoutput_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    n, c = int(rng.integers(4, 40)), int(rng.integers(2, 6))
    loc = (rng.standard_normal(n * 4) * 0.5).astype(np.float32)
    pb = _boxes(rng, n)
    if rng.random() < 0.25:  # mxnet style: num_class -233, the variances as params
        ctx.params["num_class"] = -233
        conf = _softmax(rng.standard_normal((c, n)).astype(np.float32) * 2, 0)
        prior = pb
    else:
        ctx.params["num_class"] = c
        conf = _softmax(rng.standard_normal((n, c)).astype(np.float32) * 2, 1)
        prior = np.stack([pb.ravel(), rng.uniform(0.05, 0.3, 4 * n).astype(np.float32)])
    ctx.extra["ins"] = [loc, conf, prior]


SPACES["DetectionOutput"] = Space(
    choices={
        "num_class": [None],
        "nms_threshold": [0.05, 0.3, 0.6],
        "nms_top_k": [300, 1, 3],
        "keep_top_k": [100, 1, 4],
        "confidence_threshold": [0.5, 0.05, 0.3],
        "variance0": [0.1, 0.15],
        "variance1": [0.1, 0.2],
        "variance2": [0.2, 0.25],
        "variance3": [0.2, 0.3],
    },
    fix=_detectionoutput_fix,
    inputs=_ins,
)


def _priorbox_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    fh, fw = (int(v) for v in rng.integers(1, 6, size=2))
    feat = ctx.f32(2, fh, fw)
    img = ctx.f32(3, int(rng.integers(20, 60)), int(rng.integers(20, 60)))
    mins = [float(v) for v in rng.uniform(4, 20, size=int(rng.integers(1, 3)))]
    ars = [float(v) for v in rng.uniform(0.5, 3, size=int(rng.integers(0, 3)))]
    for n in ("min_sizes", "max_sizes", "aspect_ratios", "image_width", "image_height", "step_width", "step_height"):
        ctx.params.pop(n, None)
    if rng.random() < 0.25:  # mxnet style: one bottom, image size -233, sizes relative, no max sizes
        ctx.params.update(min_sizes=[m / 40 for m in mins], aspect_ratios=[1.0] + ars, image_width=-233,
                          image_height=-233)  # fmt: skip
        for n in ("step_mmdetection", "center_mmdetection"):
            ctx.params.pop(n, None)
        if rng.random() < 0.3:
            ctx.params.update(step_width=0.3, step_height=0.25)
        ctx.extra["ins"] = [feat]
        return
    ctx.params["min_sizes"] = mins
    if ars:
        ctx.params["aspect_ratios"] = ars
    if rng.random() < 0.4:
        ctx.params["max_sizes"] = [m + float(rng.uniform(1, 10)) for m in mins]
    if rng.random() < 0.2:
        ctx.params.update(image_width=int(img.shape[2]), image_height=int(img.shape[1]))
    else:
        ctx.params.update(image_width=-233, image_height=-233)
    if rng.random() < 0.2:
        ctx.params.update(step_width=float(rng.uniform(4, 10)), step_height=float(rng.uniform(4, 10)))
    ctx.extra["ins"] = [feat, img]


SPACES["PriorBox"] = Space(
    choices={
        "min_sizes": [None],
        "max_sizes": [None],
        "aspect_ratios": [None],
        "variance0": [0.1, 0.12],
        "variance1": [0.1, 0.12],
        "variance2": [0.2, 0.22],
        "variance3": [0.2, 0.22],
        "flip": [0, 1],
        "clip": [0, 1],
        "image_width": [None],
        "image_height": [None],
        "step_width": [None],
        "step_height": [None],
        "offset": [0.0, 0.5],
        "step_mmdetection": [0, 1],
        "center_mmdetection": [0, 1],
    },
    fix=_priorbox_fix,
    inputs=_ins,
)


def _proposal_fix(ctx: Ctx) -> None:
    rng = ctx.rng
    h, w = (int(v) for v in rng.integers(2, 7, size=2))
    score = _softmax(rng.standard_normal((2, 9, h, w)).astype(np.float32) * 2, 0).reshape(18, h, w)
    bbox = (rng.standard_normal((36, h, w)) * 0.3).astype(np.float32)
    stride = int(ctx.get("feat_stride"))
    im_info = np.float32([h * stride, w * stride, float(rng.uniform(0.5, 1.5))])
    ctx.extra["ins"] = [score, bbox, im_info]
    ctx.extra["n_out"] = int(rng.integers(1, 3))


SPACES["Proposal"] = Space(
    choices={
        "feat_stride": [4, 8, 16],
        "base_size": [8, 16],
        "pre_nms_topN": [6000, 5, 20],
        "after_nms_topN": [300, 1, 6],
        "nms_thresh": [0.7, 0.3, 0.5],
        "min_size": [16, 1, 4, 10],
    },
    fix=_proposal_fix,
    inputs=_ins,
    n_out=lambda ctx: ctx.extra["n_out"],
)


def _yolo_fix(ctx: Ctx, v3: bool) -> None:
    rng = ctx.rng
    nb, nc = int(ctx.get("num_box")), int(ctx.get("num_class"))
    nin = int(rng.integers(1, 4 if v3 else 3))
    xs = []
    for _ in range(nin):
        h, w = (int(v) for v in rng.integers(1, 6, size=2))
        xs.append((rng.standard_normal((nb * (5 + nc), h, w)) * 1.5).astype(np.float32))
    if v3:
        nbias = int(rng.integers(nb, nb * nin + 2))
        ctx.params["biases"] = [float(v) for v in rng.uniform(5, 60, size=2 * nbias)]
        ctx.params["mask"] = [float(v) for v in rng.integers(0, nbias, size=nb * nin)]
        ctx.params["anchors_scale"] = [float(v) for v in rng.choice([8.0, 16.0, 32.0], size=nin)]
    else:
        ctx.params["biases"] = [float(v) for v in rng.uniform(0.5, 4, size=2 * nb)]
    ctx.extra["ins"] = xs


_YOLO = {"num_class": [1, 2, 4], "num_box": [1, 2, 3], "confidence_threshold": [0.01, 0.3, 0.6, 2.0],
         "nms_threshold": [0.45, 0.2, 0.7], "biases": [None]}  # fmt: skip
SPACES["YoloDetectionOutput"] = Space(choices=_YOLO, fix=lambda ctx: _yolo_fix(ctx, False), inputs=_ins, omit=0.1)
SPACES["Yolov3DetectionOutput"] = Space(
    choices={**_YOLO, "mask": [None], "anchors_scale": [None]}, fix=lambda ctx: _yolo_fix(ctx, True), inputs=_ins,
    omit=0.1,
)  # fmt: skip


def _roi(rng, h, w, scale):
    x1, x2 = np.sort(rng.uniform(-1, w + 1, size=2)) / scale
    y1, y2 = np.sort(rng.uniform(-1, h + 1, size=2)) / scale
    return np.float32([x1, y1, x2, y2])


def _roi_fix(ctx: Ctx, kind: str) -> None:
    rng = ctx.rng
    c, h, w = int(rng.integers(1, 4)), int(rng.integers(2, 9)), int(rng.integers(2, 9))
    scale = float(ctx.get("spatial_scale"))
    for n in ("pooled_width", "pooled_height"):
        if not ctx.get(n) or ctx.get(n) > 6:
            ctx.params[n] = int(rng.integers(1, 5))
    if kind == "ps":
        od = int(ctx.get("output_dim")) or 1
        ctx.params["output_dim"] = od
        c = od * int(ctx.get("pooled_width")) * int(ctx.get("pooled_height"))
    if kind == "align" and not ctx.get("version"):
        # ROIAlign version 0 (roialign.cpp bilinear_interpolate, x86 original_pre_calc) reads row (int)y and
        # column (int)x unchecked (only y1 / x1 are clamped), at y = hstart + (by + .5) * bin_size_h / grid
        # with hstart clipped to [0, h]: y < max(roi_y1 + roi_h, roi_h), so corners in [0, h - 1] (roi_h
        # clamped to >= 1 unaligned) keep every read in the blob. Also roialign_x86.cpp, the wheel's layer,
        # sizes pre_calc for ceil(roi_h / pooled_h) samples a bin (sampling_ratio 0) but fills
        # ceil(hend - hstart) per bin: a ROI clamped to 1 wide gives (x1 + 1) - x1 = 1 + ulp, a grid of 2 in
        # a pre_calc of 1, a heap overrun (later bins read garbage, or glibc aborts). Corners on a 1/64 grid
        # (spatial_scale a power of two: roi * scale is exact) make hend - hstart exact or >= 1/(64 * pooled)
        # away from an integer, so it never exceeds ceil(bin size).
        x1, x2 = np.sort(np.round(rng.uniform(0, w - 1, size=2) * 64) / 64) / scale
        y1, y2 = np.sort(np.round(rng.uniform(0, h - 1, size=2) * 64) / 64) / scale
        roi = np.float32([x1, y1, x2, y2])
    else:
        roi = _roi(rng, h, w, scale)
    ctx.extra["ins"] = [ctx.f32(c, h, w), roi]


SPACES["ROIPooling"] = Space(
    choices={"pooled_width": [1, 2, 3, 4, 5], "pooled_height": [1, 2, 3, 4, 5], "spatial_scale": [1.0, 0.5, 0.25]},
    fix=lambda ctx: _roi_fix(ctx, "pool"),
    inputs=_ins,
    omit=0.1,
)
SPACES["ROIAlign"] = Space(
    choices={
        "pooled_width": [1, 2, 3],
        "pooled_height": [1, 2, 3],
        "spatial_scale": [1.0, 0.5, 0.25],
        "sampling_ratio": [0, 1, 2],
        "aligned": [0, 1],
        "version": [0, 1],
    },
    fix=lambda ctx: _roi_fix(ctx, "align"),
    inputs=_ins,
    omit=0.1,
)
SPACES["PSROIPooling"] = Space(
    choices={
        "pooled_width": [1, 2, 3],
        "pooled_height": [1, 2, 3],
        "spatial_scale": [1.0, 0.5, 0.0625],
        "output_dim": [1, 2, 3],
    },
    fix=lambda ctx: _roi_fix(ctx, "ps"),
    inputs=_ins,
    omit=0.1,
)
