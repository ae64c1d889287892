"""Param spaces of the convolution family (ncnn-operators.txt: Convolution*, ConvolutionDepthWise*,
Deconvolution*, DeconvolutionDepthWise*, DeformableConv2D) for the param-space fuzzer (fuzz_engine.py)."""

from __future__ import annotations

import math

import numpy as np

from .fuzz_engine import Ctx, Space

#: activation_type 0..6 with the params each takes (ncnn-operators.txt, "activation")
ACT_PARAMS = {0: None, 1: None, 2: lambda c: [c.choice([0.1, -0.3, 0.0])], 3: lambda c: [-0.5, c.choice([0.5, 1.5])],
              4: None, 5: None, 6: lambda c: [c.choice([0.2, 1 / 6]), 0.5]}  # fmt: skip


def fix_activation(ctx: Ctx, type_name: str = "activation_type", params_name: str = "activation_params") -> None:
    """activation_params as the drawn activation_type takes them (none for 0/1/4/5)."""
    t = ctx.get(type_name)
    make = ACT_PARAMS.get(t)
    if make is None:
        ctx.params.pop(params_name, None)
    else:
        ctx.params[params_name] = [float(v) for v in make(ctx)]


ACTIVATION_CHOICES = {"activation_type": [0, 1, 2, 3, 4, 5, 6], "activation_params": [None]}

_AX = ("w", "h", "d")
_K = {"w": "kernel_w", "h": "kernel_h", "d": "kernel_d"}
_S = {"w": "stride_w", "h": "stride_h", "d": "stride_d"}
_D = {"w": "dilation_w", "h": "dilation_h", "d": "dilation_d"}
_PB = {"w": "pad_left", "h": "pad_top", "d": "pad_front"}
_PE = {"w": "pad_right", "h": "pad_bottom", "d": "pad_behind"}
_OP = {"w": "output_pad_right", "h": "output_pad_bottom", "d": "output_pad_behind"}
_OUT = {"w": "output_w", "h": "output_h", "d": "output_d"}


def _scale_weights(ctx: Ctx, declared: list) -> list[np.ndarray]:
    out = []
    for w in declared:
        n = int(w.size)
        if w.name == "weight_data" and ctx.extra.get("int8_weights"):
            out.append(ctx.rng.integers(-127, 128, n).astype(np.int8))
        elif w.name in ("weight_data_int8_scales", "bottom_blob_int8_scales"):
            out.append(ctx.rng.uniform(20, 60, n).astype(np.float32))
        elif w.name == "top_blob_int8_scales":
            out.append(ctx.rng.uniform(2, 10, n).astype(np.float32))
        else:
            out.append(ctx.rng.uniform(-1, 1, n).astype(np.float32))
    return out


def conv_space(nd: int, depthwise: bool, deconv: bool, int8: bool, dynamic: bool) -> Space:
    axes = _AX[:nd]
    choices: dict = {
        "num_output": [1, 2, 3, 4],
        "bias_term": [0, 1],
        "weight_data_size": [None],  # set by fix
        "group": [1, 2, 3],
        "int8_scale_term": [0, 0, 1, 2, 101, 102] if depthwise else [0, 0, 1, 101],
        "pad_value": [0.0, 0.5, -1.0],
        "dynamic_weight": [0, 1],
        **ACTIVATION_CHOICES,
    }
    for a in axes:
        choices[_K[a]] = [1, 2, 3]
        choices[_S[a]] = [1, 2, 3]
        choices[_D[a]] = [1, 2]
        choices[_PB[a]] = [0, 1, 2, -233, -234]
        choices[_PE[a]] = [0, 1, 2]
        choices[_OP[a]] = [0, 1]
        choices[_OUT[a]] = [None]

    def fix(ctx: Ctx) -> bool:
        rng = ctx.rng
        g = int(ctx.get("group")) if depthwise else 1
        M = g * max(1, int(ctx.get("num_output")) // g or 1)
        cin = g * int(rng.integers(1, 3))
        if depthwise and rng.random() < 0.4:
            cin = M = g
        ctx.params["num_output"] = M
        k = {a: int(ctx.get(_K[a])) or 1 for a in axes}
        s = {a: int(ctx.get(_S[a])) for a in axes}
        d = {a: int(ctx.get(_D[a])) for a in axes}
        for a in axes:
            ctx.params[_K[a]] = k[a]
        # pads: SAME (-233 / -234 on every side) or explicit >= 0, as ncnn documents them
        same = ctx.get("pad_left") in (-233, -234)
        for a in axes:
            if same:
                ctx.params[_PB[a]] = ctx.params[_PE[a]] = ctx.get("pad_left")
            else:
                for n in (_PB[a], _PE[a]):
                    if ctx.has(n) and ctx.params[n] < 0:
                        ctx.params[n] = int(rng.integers(0, 3))
        if deconv:
            sp = {a: int(rng.integers(1, 6)) for a in axes}
            full = {a: (sp[a] - 1) * s[a] + d[a] * (k[a] - 1) + 1 for a in axes}
            if same:
                for a in axes:  # SAME pads crop the full output down to output_w/h/d
                    ctx.params[_OUT[a]] = int(rng.integers(max(1, full[a] - 3), full[a] + 1))
            else:  # explicit pads that leave something of the full output (resolved Refs included)
                for a in axes:
                    cap = max(0, (full[a] - 1) // 2)
                    for n in (_PB[a], _PE[a]):
                        v = int(ctx.get(n))
                        if v > cap or ctx.has(n):
                            ctx.params[n] = min(v, cap, 2)
        else:
            sp = {a: d[a] * (k[a] - 1) + 1 + int(rng.integers(0, 6)) for a in axes}
        ctx.shape = [cin] + [sp[a] for a in reversed(axes)]
        ctx.params["weight_data_size"] = M * (cin // g) * math.prod(k.values())
        term = int(ctx.get("int8_scale_term")) if int8 else 0
        if term and ctx.get("dynamic_weight"):
            ctx.params["dynamic_weight"] = 0
        if term:
            ctx.extra["int8_weights"] = rng.random() < 0.35
            ctx.extra["tol"] = (1e-3, 1e-3) if term < 100 else (1.0, 0.0)  # requantized: one step at a tie
        fix_activation(ctx)
        if dynamic and ctx.get("dynamic_weight"):
            kk = tuple(k[a] for a in reversed(axes))
            if deconv:
                wt = ctx.f32(cin, M // g, *kk, lo=-1, hi=1)
            else:
                wt = ctx.f32(M, cin // g, *kk, lo=-1, hi=1)
            ctx.extra["dynamic"] = [wt] + ([ctx.f32(M, lo=-1, hi=1)] if ctx.get("bias_term") else [])
            if rng.random() < 0.5:  # ncnn takes the sizes from the weight blob: converters write 0 here
                ctx.params["num_output"] = 0
                ctx.params["weight_data_size"] = 0
                for a in axes:
                    ctx.params.pop(_K[a], None)
        return True

    def inputs(ctx: Ctx) -> list[np.ndarray]:
        x = ctx.f32(*ctx.shape)
        if len(ctx.shape) == nd + 1 and ctx.shape[0] == 1 and nd < 3 and ctx.rng.random() < 0.2:
            x = x[0]  # a blob one rank short is one channel
        return [x] + ctx.extra.get("dynamic", [])

    return Space(ranks=(nd + 1,), choices=choices, fix=fix, inputs=inputs, weights=_scale_weights)


def deformable_space() -> Space:
    choices = {
        "num_output": [1, 2, 3],
        "kernel_w": [1, 2, 3],
        "kernel_h": [1, 2, 3],
        "dilation_w": [1, 2],
        "dilation_h": [1, 2],
        "stride_w": [1, 2],
        "stride_h": [1, 2],
        "pad_left": [0, 1, 2],
        "pad_right": [0, 1, 2],
        "pad_top": [0, 1, 2],
        "pad_bottom": [0, 1, 2],
        "bias_term": [0, 1],
        "weight_data_size": [None],
        **ACTIVATION_CHOICES,
    }

    def fix(ctx: Ctx) -> bool:
        rng = ctx.rng
        kw, kh = int(ctx.get("kernel_w")) or 1, int(ctx.get("kernel_h")) or 1
        ctx.params["kernel_w"], ctx.params["kernel_h"] = kw, kh
        dw, dh = int(ctx.get("dilation_w")), int(ctx.get("dilation_h"))
        sw, sh = int(ctx.get("stride_w")), int(ctx.get("stride_h"))
        pl, pr, pt, pb = (int(ctx.get(n)) for n in ("pad_left", "pad_right", "pad_top", "pad_bottom"))
        cin, cout = int(rng.integers(1, 4)), int(ctx.get("num_output")) or 1
        ctx.params["num_output"] = cout
        H = dh * (kh - 1) + 1 + int(rng.integers(0, 6))
        W = dw * (kw - 1) + 1 + int(rng.integers(0, 6))
        oh = (H + pt + pb - dh * (kh - 1) - 1) // sh + 1
        ow = (W + pl + pr - dw * (kw - 1) - 1) // sw + 1
        ctx.shape = [cin, H, W]
        ctx.params["weight_data_size"] = cout * cin * kh * kw
        ctx.extra["offset"] = ctx.f32(2 * kh * kw, oh, ow, lo=-2.5, hi=2.5)
        if rng.random() < 0.6:
            ctx.extra["mask"] = rng.uniform(0, 1, (kh * kw, oh, ow)).astype(np.float32)
        fix_activation(ctx)
        return True

    def inputs(ctx: Ctx) -> list[np.ndarray]:
        ins = [ctx.f32(*ctx.shape), ctx.extra["offset"]]
        return ins + ([ctx.extra["mask"]] if "mask" in ctx.extra else [])

    return Space(ranks=(3,), choices=choices, fix=fix, inputs=inputs)


CONV_SPACES = {
    name: conv_space(nd, dw, de, i8, dyn)
    for name, nd, dw, de, i8, dyn in [
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
    ]
}
CONV_SPACES["DeformableConv2D"] = deformable_space()
