"""ncnn convolution layers against the official wheel: Convolution*, ConvolutionDepthWise*, Deconvolution*,
DeconvolutionDepthWise*, DeformableConv2D; every pad form (explicit, -233, -234, pad_value), strides,
dilations, groups, bias on/off, every activation_type, int8, dynamic weights; and bad params."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import KernelError, ModelFormatError

from . import wheel

needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")

N_CASES = 24
ACTS = [(0, []), (1, []), (2, [0.1]), (3, [-0.5, 0.7]), (4, []), (5, []), (6, [0.2, 0.5])]


def check(type_name, params, weights, inputs, atol=1e-4, rtol=1e-4):
    ours = sn.run_layer(type_name, params, weights, inputs)
    theirs = wheel.wheel_run(type_name, params, weights, inputs)
    wheel.assert_close(ours, theirs, atol=atol, rtol=rtol, what=f"{type_name} {params}")


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _act(rng, i, params):
    t, a = ACTS[i % len(ACTS)]
    params[9] = t
    if a:
        params[10] = a


# ----------------------------------------------------------------------------- forward convolution
NAMES_K = {1: [1], 2: [1, 11], 3: [1, 11, 21]}
NAMES_S = {1: [3], 2: [3, 13], 3: [3, 13, 23]}
NAMES_D = {1: [2], 2: [2, 12], 3: [2, 12, 22]}
NAMES_PB = {1: [4], 2: [4, 14], 3: [4, 14, 24]}  # begin pads: left, top, front (w, h, d)
NAMES_PE = {1: [15], 2: [15, 16], 3: [15, 16, 17]}  # end pads: right, bottom, behind


def conv_case(rng, i, nd, depthwise, with_pad_value=True):
    """Random params/weights/input of an nd convolution that fits; ids per axis innermost first."""
    k = [int(rng.integers(1, 4)) for _ in range(nd)]
    s = [int(rng.integers(1, 3)) for _ in range(nd)]
    d = [int(rng.integers(1, 3)) for _ in range(nd)]
    g = int(rng.choice([1, 2, 3])) if depthwise else 1
    cin = g * int(rng.integers(1, 3))
    cout = g * int(rng.integers(1, 3))
    if depthwise and i % 3 == 0:
        cin = cout = g  # plain depthwise
    params = {0: cout, 5: int(i % 2 == 0)}
    for a in range(nd):
        params[NAMES_K[nd][a]] = k[a]
        params[NAMES_S[nd][a]] = s[a]
        params[NAMES_D[nd][a]] = d[a]
    form = i % 4
    if form == 0:
        for a in range(nd):
            params[NAMES_PB[nd][a]] = int(rng.integers(0, 3))
            params[NAMES_PE[nd][a]] = int(rng.integers(0, 3))
    elif form == 1:
        params[4] = -233
    elif form == 2:
        params[4] = -234
    if with_pad_value and form in (0, 1, 2) and i % 3 == 1:
        params[18] = float(rng.uniform(-2, 2))
    if depthwise:
        params[7] = g
    _act(rng, i, params)
    sp = [int(rng.integers(dd * (kk - 1) + 1, dd * (kk - 1) + 8)) for kk, dd in zip(k, d)]  # w, h, d
    x = f32(rng, cin, *reversed(sp))
    nw = cout * (cin // g) * int(np.prod(k))
    params[6] = nw
    weights = [f32(rng, nw)]
    if params[5]:
        weights.append(f32(rng, cout))
    return params, weights, [x]


CONV_VARIANTS = [
    ("Convolution", 2, False),
    ("Convolution1D", 1, False),
    ("Convolution3D", 3, False),
    ("ConvolutionDepthWise", 2, True),
    ("ConvolutionDepthWise1D", 1, True),
    ("ConvolutionDepthWise3D", 3, True),
]


@needs_wheel
@pytest.mark.parametrize("type_name,nd,depthwise", CONV_VARIANTS)
def test_convolution_matches_wheel(type_name, nd, depthwise):
    rng = np.random.default_rng(100 + len(type_name) * 7 + nd)
    for i in range(N_CASES):
        params, weights, inputs = conv_case(rng, i, nd, depthwise, with_pad_value=nd != 3)
        check(type_name, params, weights, inputs)


@needs_wheel
@pytest.mark.parametrize("type_name,nd,depthwise", [v for v in CONV_VARIANTS if v[1] != 3])
def test_convolution_dynamic_weight_matches_wheel(type_name, nd, depthwise):
    """dynamic_weight=1: the weight (and bias) arrive as bottoms; weight blob (M, C/group, *kernel)."""
    rng = np.random.default_rng(7 + nd)
    for i in range(N_CASES // 2):
        params, weights, inputs = conv_case(rng, i, nd, depthwise)
        cout, k = params[0], [params[n] for n in NAMES_K[nd]]
        cin = inputs[0].shape[0]
        g = params.get(7, 1)
        params[19] = 1
        wt = weights[0].reshape((cout, cin // g) + tuple(reversed(k)))
        ins = [inputs[0], wt] + ([weights[1]] if params[5] else [])
        check(type_name, params, [], ins)


def test_one_by_one_convolution_of_a_flat_blob_is_an_inner_product():
    rng = np.random.default_rng(3)
    wt, b, x = f32(rng, 5 * 6), f32(rng, 5), f32(rng, 6)
    y = sn.run_layer("Convolution", {0: 5, 1: 1, 5: 1, 6: 30, 9: 1}, [wt, b], [x])[0]
    np.testing.assert_allclose(y, np.maximum(wt.reshape(5, 6) @ x + b, 0), rtol=1e-5, atol=1e-6)
    if wheel.available():
        check("Convolution", {0: 5, 1: 1, 5: 1, 6: 30, 9: 1}, [wt, b], [x])


@needs_wheel
@pytest.mark.parametrize(
    "type_name,params,shape",
    [
        ("Convolution", {0: 2, 1: 3, 6: 18}, (6, 7)),
        ("Convolution1D", {0: 2, 1: 3, 6: 6}, (7,)),
        ("ConvolutionDepthWise", {0: 2, 1: 2, 6: 8, 7: 1, 4: -233}, (5, 6)),
    ],
)
def test_blob_one_rank_short_is_one_channel(type_name, params, shape):
    rng = np.random.default_rng(4)
    check(type_name, params, [f32(rng, params[6])], [f32(rng, *shape)])


# ----------------------------------------------------------------------------- int8 convolution
@needs_wheel
@pytest.mark.parametrize("type_name", ["Convolution", "ConvolutionDepthWise"])
def test_int8_convolution_matches_wheel(type_name):
    """int8_scale_term 1 / 2 (depthwise: one weight scale) / 101 / 102 (requantized int8 output); weights given
    as fp32 (quantized at load) or int8; bias and activations."""
    rng = np.random.default_rng(11 if type_name == "Convolution" else 12)
    depthwise = type_name == "ConvolutionDepthWise"
    for i in range(N_CASES):
        params, weights, inputs = conv_case(rng, i, 2, depthwise)
        cout, g = params[0], params.get(7, 1)
        terms = [1, 2, 101, 102] if depthwise else [1, 101]
        term = terms[i % len(terms)]
        params[8] = term
        nsc = (1 if term in (2, 102) else g) if depthwise else cout
        wsc = rng.uniform(20, 60, nsc).astype(np.float32)
        bsc = np.array([rng.uniform(20, 60)], np.float32)
        if i % 3 == 2:  # int8 weights as stored by ncnn2int8
            weights[0] = rng.integers(-127, 128, weights[0].size).astype(np.int8)
        weights += [wsc, bsc]
        if term > 100:
            weights.append(np.array([rng.uniform(2, 10)], np.float32))
        # requantized outputs are integers: allow one step at an exact rounding tie
        check(type_name, params, weights, inputs, atol=1e-3 if term < 100 else 1.0)


# ----------------------------------------------------------------------------- deconvolution
NAMES_OP = {1: [18], 2: [18, 19], 3: [18, 19, 20]}
NAMES_OUT = {1: [20], 2: [20, 21], 3: [25, 26, 27]}


def deconv_case(rng, i, nd, depthwise):
    k = [int(rng.integers(1, 4)) for _ in range(nd)]
    s = [int(rng.integers(1, 4)) for _ in range(nd)]
    d = [int(rng.integers(1, 3)) for _ in range(nd)]
    g = int(rng.choice([1, 2, 3])) if depthwise else 1
    cin = g * int(rng.integers(1, 3))
    cout = g * int(rng.integers(1, 3))
    if depthwise and i % 3 == 0:
        cin = cout = g
    params = {0: cout, 5: int(i % 2 == 1)}
    for a in range(nd):
        params[NAMES_K[nd][a]] = k[a]
        params[NAMES_S[nd][a]] = s[a]
        params[NAMES_D[nd][a]] = d[a]
    if depthwise:
        params[7] = g
    sp = [int(rng.integers(1, 6)) for _ in range(nd)]  # w, h, d
    full = [(n - 1) * ss + dd * (kk - 1) + 1 for n, ss, dd, kk in zip(sp, s, d, k)]
    form = i % 4
    if form == 0:  # explicit pads that leave something
        for a in range(nd):
            cap = max(0, (full[a] - 1) // 2)
            params[NAMES_PB[nd][a]] = int(rng.integers(0, min(cap, 2) + 1))
            params[NAMES_PE[nd][a]] = int(rng.integers(0, min(cap, 2) + 1))
    elif form in (1, 2):  # SAME_UPPER / SAME_LOWER down to output_w/h/d
        params[4] = -233 if form == 1 else -234
        for a in range(nd):
            params[NAMES_OUT[nd][a]] = int(rng.integers(max(1, full[a] - 3), full[a] + 1))
    if i % 3 == 1:
        for a in range(nd):
            params[NAMES_OP[nd][a]] = int(rng.integers(0, 2))
    _act(rng, i, params)
    x = f32(rng, cin, *reversed(sp))
    nw = cout * (cin // g) * int(np.prod(k))
    params[6] = nw
    weights = [f32(rng, nw)]
    if params[5]:
        weights.append(f32(rng, cout))
    return params, weights, [x]


DECONV_VARIANTS = [
    ("Deconvolution", 2, False),
    ("Deconvolution1D", 1, False),
    ("Deconvolution3D", 3, False),
    ("DeconvolutionDepthWise", 2, True),
    ("DeconvolutionDepthWise1D", 1, True),
    ("DeconvolutionDepthWise3D", 3, True),
]


@needs_wheel
@pytest.mark.parametrize("type_name,nd,depthwise", DECONV_VARIANTS)
def test_deconvolution_matches_wheel(type_name, nd, depthwise):
    rng = np.random.default_rng(200 + len(type_name) * 5 + nd)
    for i in range(N_CASES):
        params, weights, inputs = deconv_case(rng, i, nd, depthwise)
        check(type_name, params, weights, inputs)


@needs_wheel
@pytest.mark.parametrize("type_name,nd,depthwise", [v for v in DECONV_VARIANTS if v[1] != 3])
def test_deconvolution_dynamic_weight_matches_wheel(type_name, nd, depthwise):
    """dynamic_weight=1 (id 28): weight blob (C, M/group, *kernel), bias as a third bottom."""
    rng = np.random.default_rng(31 + nd)
    for i in range(N_CASES // 2):
        params, weights, inputs = deconv_case(rng, i, nd, depthwise)
        cout, k = params[0], [params[n] for n in NAMES_K[nd]]
        cin = inputs[0].shape[0]
        g = params.get(7, 1)
        params[28] = 1
        # ncnn's static layout (g, M/g, C/g, *k) -> the dynamic (C, M/g, *k)
        kk = tuple(reversed(k))
        wt = weights[0].reshape((g, cout // g, cin // g) + kk).swapaxes(1, 2).reshape((cin, cout // g) + kk)
        ins = [inputs[0], np.ascontiguousarray(wt)] + ([weights[1]] if params[5] else [])
        check(type_name, params, [], ins)


# ----------------------------------------------------------------------------- deformable
@needs_wheel
def test_deformable_conv2d_matches_wheel():
    rng = np.random.default_rng(5)
    for i in range(N_CASES):
        kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        sh, sw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        dh, dw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        pt, pb_, pl, pr = (int(v) for v in rng.integers(0, 3, 4))
        cin, cout = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        H = int(rng.integers(dh * (kh - 1) + 1, dh * (kh - 1) + 7))
        Wd = int(rng.integers(dw * (kw - 1) + 1, dw * (kw - 1) + 7))
        oh = (H + pt + pb_ - dh * (kh - 1) - 1) // sh + 1
        ow = (Wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
        params = {
            0: cout,
            1: kw,
            11: kh,
            2: dw,
            12: dh,
            3: sw,
            13: sh,
            4: pl,
            15: pr,
            14: pt,
            16: pb_,
            5: int(i % 2 == 0),
            6: cout * cin * kh * kw,
        }
        _act(rng, i, params)
        weights = [f32(rng, cout * cin * kh * kw)] + ([f32(rng, cout)] if params[5] else [])
        x = f32(rng, cin, H, Wd)
        off = f32(rng, 2 * kh * kw, oh, ow, scale=1.5)
        ins = [x, off]
        if i % 3 != 0:
            ins.append(rng.uniform(0, 1, (kh * kw, oh, ow)).astype(np.float32))
        ours = sn.run_layer("DeformableConv2D", params, weights, ins)
        theirs = wheel.wheel_run("DeformableConv2D", params, weights, ins)
        wheel.assert_close(ours, theirs, what=f"DeformableConv2D {params}")


# ----------------------------------------------------------------------------- bad params
def test_bad_params_are_clear_errors():
    rng = np.random.default_rng(0)
    x = f32(rng, 2, 5, 5)
    with pytest.raises(ModelFormatError, match=r"param 1 \(kernel_w\): a float literal"):
        sn.run_layer("Convolution", {0: 2, 1: 3.0, 6: 36}, [f32(rng, 36)], [x])
    with pytest.raises(ModelFormatError, match="weight 'weight_data' has 30 elements, the params say 36"):
        sn.run_layer("Convolution", {0: 2, 1: 3, 6: 36}, [f32(rng, 30)], [x])
    with pytest.raises(KernelError, match="not num_output"):
        sn.run_layer("Convolution", {0: 4, 1: 3, 6: 30}, [f32(rng, 30)], [x])
    with pytest.raises(KernelError, match="expect 4"):
        sn.run_layer("Convolution", {0: 2, 1: 3, 6: 72}, [f32(rng, 72)], [x])
    with pytest.raises(KernelError, match="multiple of group"):
        sn.run_layer("ConvolutionDepthWise", {0: 3, 1: 3, 6: 27, 7: 2}, [f32(rng, 27)], [x])
    with pytest.raises(KernelError, match="mix positive and negative"):
        sn.run_layer("Convolution", {0: 2, 1: 3, 4: 1, 14: -233, 6: 36}, [f32(rng, 36)], [x])
    with pytest.raises(KernelError, match="need pads -233"):
        sn.run_layer("Deconvolution", {0: 2, 1: 3, 20: 7, 6: 36}, [f32(rng, 36)], [x])
    with pytest.raises(KernelError, match="takes 2 bottoms"):
        sn.run_layer("Convolution", {0: 2, 1: 3, 6: 36, 19: 1}, [], [x])
    with pytest.raises(KernelError, match="int8 weights need int8_scale_term"):
        sn.run_layer("Convolution", {0: 2, 1: 3, 6: 36}, [np.zeros(36, np.int8)], [x])


# ----------------------------------------------------------------------------- a small net end to end
NET_TEXT = """7767517
6 6
Input                    data  0 1 0
Convolution              c1    1 1 0 1 0=8 1=3 4=1 5=1 6=216 9=1
Pooling                  p1    1 1 1 2 0=0 1=3 2=2 5=0
ConvolutionDepthWise     dw    1 1 2 3 0=8 1=3 3=2 4=-233 5=1 6=72 7=8 9=2 -23310=1,0.1
Pooling                  gp    1 1 3 4 0=1 4=1
InnerProduct             fc    1 1 4 5 0=10 1=1 2=80
"""


@needs_wheel
def test_small_convnet_through_net_matches_wheel():
    """Input -> Convolution(ReLU) -> Pooling(max) -> ConvolutionDepthWise(SAME, LeakyReLU) -> global avg
    Pooling -> InnerProduct: our Net (text .param, tagged .bin) against the wheel's Net, every blob."""
    from stdops.ncnn import param as P
    from stdops.ncnn.modelbin import ModelBinWriter

    text = NET_TEXT
    rng = np.random.default_rng(21)
    mb = ModelBinWriter()
    for n, tagged in [(216, True), (8, False), (72, True), (8, False), (80, True), (10, False)]:
        mb.write(f32(rng, n), tagged)
    bin_data = mb.getvalue()
    x = f32(rng, 3, 17, 15)
    net = sn.Net.from_bytes(text, bin_data)
    names = [str(i) for i in range(1, net.param_file.blob_count)]
    ours = net.run({"0": x}, names)
    pbin = P.write_binary(P.parse_text(text))
    theirs = wheel.wheel_net(pbin, bin_data, [x], [0], [int(n) for n in names])
    wheel.assert_close([ours[n] for n in names], theirs, what="small convnet")
