"""Single-layer ncnn cases for the ncnn -> ONNX converter: (type, params, weights, inputs, n_out) with the
weights in the layer's load order. They cover each emitter's branches (ranks, pad modes, fused activations,
broadcasting forms, int8) with random values from a seeded generator."""

from __future__ import annotations

import numpy as np

from stdops.ncnn.spec import LAYERS, resolve_params

ACTS = [(0, []), (1, []), (2, [0.1]), (3, [-0.5, 0.7]), (4, []), (5, []), (6, [0.2, 0.5])]


def f32(rng, *shape, lo=None, hi=None):
    if lo is not None:
        return rng.uniform(lo, hi, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def auto_weights(rng, type_name, params, n_in=1, n_out=1):
    """Random float32 weights of the sizes the declaration gives."""
    spec = LAYERS[type_name]
    p = resolve_params(spec, dict(params), type_name, None, n_in, n_out)
    return [f32(rng, int(w.size)) for w in spec.weights(p)]


def case(rng, type_name, params, inputs, weights=None, n_out=1):
    if weights is None:
        weights = auto_weights(rng, type_name, params, len(inputs), n_out)
    return (type_name, params, weights, inputs, n_out)


def shapes(rng, ranks=(1, 2, 3, 4)):
    r = int(rng.choice(ranks))
    return tuple(int(v) for v in rng.integers(1, 6, r))


# --------------------------------------------------------------------------------------------- elementwise
def elementwise_cases(rng):
    out = []
    plain = ["AbsVal", "Sigmoid", "TanH", "BNLL", "Softplus", "Erf", "Mish", "Swish", "Noop", "DeepCopy"]
    for t in plain:
        for _ in range(2):
            out.append(case(rng, t, {}, [f32(rng, *shapes(rng))]))
    withp = {
        "ReLU": [{}, {0: 0.1}],
        "CELU": [{}, {0: 0.5}, {0: 0.0}],
        "ELU": [{}, {0: 0.7}],
        "SELU": [{}, {0: 1.2, 1: 0.9}],
        "Clip": [{0: -0.5, 1: 0.8}, {}],
        "Shrink": [{}, {0: 0.2, 1: 0.3}],
        "HardSigmoid": [{}, {0: 0.3, 1: 0.4}],
        "HardSwish": [{}, {0: 1.0 / 6, 1: 0.5}],
        "GELU": [{}, {0: 1}],
        "Threshold": [{}, {0: 0.3}],
        "Dropout": [{}, {0: 0.7}],
        "Power": [{0: 2.0, 1: 0.5, 2: 0.3}, {0: 1.0}, {0: 3.0, 1: -1.5}],
    }
    for t, plist in withp.items():
        for params in plist:
            out.append(case(rng, t, params, [f32(rng, *shapes(rng))]))
    for params in ({}, {0: 2.0}, {0: -1.0, 1: 0.5, 2: 0.2}, {0: 3.0, 1: 2.0, 2: -1.0}):
        out.append(case(rng, "Exp", params, [f32(rng, *shapes(rng), lo=-2, hi=2)]))
    for params in ({}, {0: 10.0}, {0: -1.0, 1: 2.0, 2: 0.5}, {0: 2.0, 1: 0.5, 2: 3.0}):
        out.append(case(rng, "Log", params, [f32(rng, *shapes(rng), lo=0.1, hi=4)]))
    for r in (1, 2, 3, 4):
        x = f32(rng, *([3] + [int(v) for v in rng.integers(1, 5, r - 1)]))
        out.append(case(rng, "PReLU", {0: 3}, [x]))
        out.append(case(rng, "PReLU", {0: 1}, [x]))
    for axis, shape in ((0, (6,)), (0, (4, 3)), (1, (3, 5)), (-1, (2, 3, 6)), (1, (2, 4, 3, 3)), (0, (7, 2))):
        out.append(case(rng, "GLU", {0: axis}, [f32(rng, *shape)]))
    for axis, shape in ((0, (6,)), (0, (4, 3)), (1, (3, 5)), (2, (2, 3, 6)), (-1, (2, 4, 3, 3)), (1, (2, 4, 3))):
        out.append(case(rng, "Softmax", {0: axis, 1: 1}, [f32(rng, *shape)]))
    # UnaryOp: every op, inputs inside each op's domain
    domains = {5: (0.1, 4), 6: (0.1, 4), 8: (0.1, 4), 12: (-0.9, 0.9), 13: (-0.9, 0.9), 15: (0.5, 3), 17: (0.1, 4)}
    domains.update({11: (-1.2, 1.2), 25: (1.1, 4), 26: (-0.9, 0.9), 27: (-0.5, 3), 21: (-2, 2), 7: (-3, 3)})
    for op in range(28):
        lo, hi = domains.get(op, (-3, 3))
        x = f32(rng, *shapes(rng), lo=lo, hi=hi)
        if op in (2, 3, 18, 19):  # away from the rounding ties
            x = (np.round(x * 4) / 4 + 0.1).astype(np.float32)
        out.append(case(rng, "UnaryOp", {0: op}, [x]))
    return out


def binary_cases(rng):
    out = []
    domain = {6: (0.5, 2), 9: (0.5, 2), 3: (0.5, 2), 8: (0.5, 2), 12: (0.5, 3), 13: (0.5, 3), 15: (0.5, 3)}
    domain.update({16: (0.5, 3), 17: (0.5, 3), 18: (0.5, 3)})
    pairs = [
        ((3, 4, 5), (3, 4, 5)),
        ((3, 4, 5), (3,)),
        ((3, 4, 5), (5,)),
        ((4, 5), (4,)),
        ((4, 5), (5,)),
        ((3, 4, 5), (3, 4)),
        ((2, 3, 4, 5), (2, 3, 4)),
        ((2, 3, 4, 5), (2,)),
        ((3, 1, 5), (3, 4, 1)),
        ((6,), (1,)),
        ((3,), (3, 4, 5)),
    ]
    for op in range(19):
        lo, hi = domain.get(op, (-2, 2))
        a_shape, b_shape = pairs[op % len(pairs)]
        a, b = f32(rng, *a_shape, lo=lo, hi=hi), f32(rng, *b_shape, lo=lo, hi=hi)
        out.append(case(rng, "BinaryOp", {0: op}, [a, b]))
        s = float(rng.uniform(lo, hi))
        out.append(case(rng, "BinaryOp", {0: op, 1: 1, 2: s}, [f32(rng, *shapes(rng), lo=lo, hi=hi)]))
    for op, coeffs in ((0, []), (1, []), (1, [0.5, -2.0, 1.5]), (2, [])):
        shape = shapes(rng)
        params = {0: op} if not coeffs else {0: op, 1: coeffs}
        out.append(case(rng, "Eltwise", params, [f32(rng, *shape) for _ in range(3)]))
    for r in (1, 2, 3, 4):
        shape = (3,) + tuple(int(v) for v in rng.integers(1, 5, r - 1))
        out.append(case(rng, "Scale", {0: 3, 1: 1}, [f32(rng, *shape)]))
        out.append(case(rng, "Scale", {0: 3}, [f32(rng, *shape)]))
        out.append(case(rng, "Scale", {0: -233}, [f32(rng, *shape), f32(rng, 3)], weights=[]))
        out.append(case(rng, "Bias", {0: 3}, [f32(rng, *shape)]))
        w = [f32(rng, 3), f32(rng, 3), f32(rng, 3, lo=0.1, hi=2), f32(rng, 3)]
        out.append(case(rng, "BatchNorm", {0: 3, 1: 1e-3}, [f32(rng, *shape)], weights=w))
    return out


def cast_quant_cases(rng):
    out = []
    for shape in ((5,), (3, 4), (2, 3, 4)):
        x = f32(rng, *shape) * 3
        out.append(case(rng, "Cast", {0: 1, 1: 2}, [x]))
        out.append(case(rng, "Cast", {0: 1, 1: 4}, [x]))
        out.append(case(rng, "Cast", {0: 1, 1: 1}, [x]))
    for shape, n in (((7,), 1), ((3, 5), 3), ((3, 4, 5), 3), ((2, 3, 4, 5), 1)):
        x = f32(rng, *shape) * 40
        scales = f32(rng, n, lo=0.5, hi=3)
        out.append(case(rng, "Quantize", {0: n}, [x], [scales]))
        acc = np.round(f32(rng, *shape) * 1000).astype(np.float32)
        out.append(case(rng, "Dequantize", {0: n, 1: n}, [acc], [scales * 1e-3, f32(rng, n)]))
        out.append(case(rng, "Dequantize", {0: n}, [acc], [scales * 1e-3]))
        t, a = ACTS[n % len(ACTS)]
        params = {0: n, 1: n, 2: n, 3: t, 4: a} if a else {0: n, 1: n, 2: n, 3: t}
        out.append(case(rng, "Requantize", params, [acc], [scales * 1e-3, scales * 10, f32(rng, n)]))
    return out


# --------------------------------------------------------------------------------------------- shape
def shape_cases(rng):
    out = []
    for axis, shapes_ in (
        (0, [(3,), (4,)]),
        (0, [(2, 3), (4, 3)]),
        (1, [(2, 3), (2, 5)]),
        (-1, [(2, 3, 4), (2, 3, 1)]),
    ):
        out.append(case(rng, "Concat", {0: axis}, [f32(rng, *s) for s in shapes_]))
    out.append(case(rng, "Concat", {0: 1}, [f32(rng, 2, 3, 4, 5), f32(rng, 2, 2, 4, 5), f32(rng, 2, 1, 4, 5)]))
    for params, shape, n in (
        ({0: [2, 3, -233], 1: 0}, (8,), 3),
        ({0: [1, -233], 1: 1}, (3, 5), 2),
        ({0: [2, 4], 1: -1}, (2, 3, 6), 2),
        ({2: [2, -1], 1: 0}, (6, 3, 2), 3),
        ({0: [-233, -233, -233], 1: 2}, (2, 3, 6, 2), 3),
    ):
        out.append(case(rng, "Slice", params, [f32(rng, *shape)], n_out=n))
    out.append(case(rng, "Split", {}, [f32(rng, 3, 4)], n_out=3))
    crops = [
        ({0: 1, 3: 3}, (7,)),
        ({0: 1, 1: 2, 3: 3, 4: 2}, (5, 6)),
        ({0: 1, 1: 1, 2: 1, 3: 2, 4: 3, 5: 2}, (4, 5, 6)),
        ({0: 1, 1: 1, 13: 1, 2: 0, 3: 2, 4: 2, 14: 2, 5: 1}, (2, 4, 5, 6)),
        ({9: [1, -3], 10: [-1, -233], 11: [0, 2]}, (4, 5, 6)),
        ({0: 1, 6: 2, 3: -233, 4: -233}, (3, 7)),
        ({19: "1", 20: "-(0w,1)", 21: "-1"}, (3, 5, 6)),
    ]
    for params, shape in crops:
        out.append(case(rng, "Crop", params, [f32(rng, *shape)]))
    out.append(case(rng, "Crop", {0: 1, 1: 1}, [f32(rng, 3, 6, 7), f32(rng, 2, 3, 4)]))
    for params, shape in (
        ({0: -1}, (3, 4)),
        ({0: 6, 1: -1}, (3, 4)),
        ({0: 2, 1: 3, 2: -1}, (2, 3, 4)),
        ({0: 2, 1: 2, 11: 3, 2: -1}, (3, 4, 4)),
        ({0: 0, 1: -1}, (2, 3, 4)),
    ):
        out.append(case(rng, "Reshape", params, [f32(rng, *shape)]))
    out.append(case(rng, "Flatten", {}, [f32(rng, 2, 3, 4)]))
    for t, shape in ((1, (3, 4)), (0, (3, 4)), (3, (2, 3, 4)), (5, (2, 3, 4)), (2, (2, 3, 4)), (17, (2, 3, 4, 5))):
        out.append(case(rng, "Permute", {0: t}, [f32(rng, *shape)]))
    for params, shape in (
        ({0: 1}, (3, 1)),
        ({2: 1, 1: 1}, (1, 1, 4)),
        ({3: [0, -1]}, (1, 3, 1)),
        ({3: [1]}, (2, 1, 3, 4)),
    ):
        out.append(case(rng, "Squeeze", params, [f32(rng, *shape)]))
    for params, shape in (({3: [0]}, (4,)), ({3: [-1]}, (2, 3)), ({3: [0, 2]}, (3, 4))):
        out.append(case(rng, "ExpandDims", params, [f32(rng, *shape)]))
    for params, shape in (
        ({0: 0, 1: 3}, (4,)),
        ({0: 1, 1: 2}, (2, 3)),
        ({2: [2, 1, 3]}, (2, 3)),
        ({0: 2, 1: 2}, (2, 3, 4)),
    ):
        out.append(case(rng, "Tile", params, [f32(rng, *shape)]))
    for params, shape in (({0: [0]}, (5,)), ({0: [1]}, (3, 4)), ({0: [0, -1]}, (2, 3, 4)), ({0: [1, 2]}, (2, 3, 4, 5))):
        out.append(case(rng, "Flip", params, [f32(rng, *shape)]))
    for mode in (0, 1):
        out.append(case(rng, "PixelShuffle", {0: 2, 1: mode}, [f32(rng, 8, 3, 4)]))
        out.append(case(rng, "Reorg", {0: 2, 1: mode}, [f32(rng, 3, 4, 6)]))
    for params, shape in (({0: 2}, (6, 3, 4)), ({0: 3, 1: 1}, (6, 2, 2)), ({0: 2}, (4, 2, 3, 2))):
        out.append(case(rng, "ShuffleChannel", params, [f32(rng, *shape)]))
    out.append(case(rng, "CopyTo", {0: 1, 1: 2}, [f32(rng, 5, 6), f32(rng, 2, 3)]))
    out.append(case(rng, "CopyTo", {9: [1, 0, 2], 11: [0, 1, 2]}, [f32(rng, 3, 4, 5), f32(rng, 2, 4, 2)]))
    for k, shape in ((0, (4,)), (1, (3,)), (-2, (3,)), (0, (3, 4)), (1, (4, 3)), (-1, (3, 3))):
        out.append(case(rng, "Diag", {0: k}, [f32(rng, *shape)]))
    for params in ({0: 5}, {0: 3, 1: 2}, {0: 2, 1: 3, 2: 4}, {0: 2, 1: 2, 11: 3, 2: 2}):
        out.append(("MemoryData", params, auto_weights(rng, "MemoryData", params, 0), [], 1))
    pads = [
        ({0: 1, 1: 2, 2: 1, 3: 0, 5: 0.5}, (3, 4, 5)),
        ({2: 2, 3: 1, 4: 1}, (5,)),
        ({0: 1, 1: 1, 2: 2, 3: 2, 4: 2}, (4, 5)),
        ({0: 1, 2: 1, 7: 1, 8: 2, 4: 0, 5: -1.0}, (3, 4, 5)),
        ({0: 1, 2: 1, 7: 1, 8: 1, 4: 1}, (2, 3, 4, 5)),
        ({0: 1, 1: 1, 2: 1, 3: 1, 6: 3}, (3, 4, 5)),
    ]
    for params, shape in pads:
        out.append(case(rng, "Padding", params, [f32(rng, *shape)]))
    out.append(case(rng, "Packing", {0: 4, 1: 1}, [f32(rng, 5, 3)]))
    out.append(case(rng, "Packing", {0: 4}, [f32(rng, 5, 3)]))
    return out


# --------------------------------------------------------------------------------------------- conv
K_IDS = {1: [1], 2: [1, 11], 3: [1, 11, 21]}
S_IDS = {1: [3], 2: [3, 13], 3: [3, 13, 23]}
D_IDS = {1: [2], 2: [2, 12], 3: [2, 12, 22]}
PB_IDS = {1: [4], 2: [4, 14], 3: [4, 14, 24]}
PE_IDS = {1: [15], 2: [15, 16], 3: [15, 16, 17]}


def conv_case(rng, i, type_name, nd, depthwise, deconv):
    k = [int(rng.integers(1, 4)) for _ in range(nd)]
    s = [int(rng.integers(1, 3)) for _ in range(nd)]
    d = [int(rng.integers(1, 3)) for _ in range(nd)]
    g = int(rng.choice([1, 2, 3])) if depthwise else 1
    cin, cout = g * int(rng.integers(1, 3)), g * int(rng.integers(1, 3))
    params = {0: cout, 5: int(i % 2 == 0)}
    for a in range(nd):
        params[K_IDS[nd][a]], params[S_IDS[nd][a]], params[D_IDS[nd][a]] = k[a], s[a], d[a]
    form = i % 4
    if form == 0:
        for a in range(nd):
            params[PB_IDS[nd][a]] = int(rng.integers(0, 3 if not deconv else k[a]))
            params[PE_IDS[nd][a]] = int(rng.integers(0, 3 if not deconv else k[a]))
    elif form in (1, 2) and not deconv:
        params[4] = -233 if form == 1 else -234
    if not deconv and nd != 3 and form in (0, 1) and i % 3 == 1:
        params[18] = float(rng.uniform(-2, 2))
    if depthwise:
        params[7] = g
    t, a = ACTS[i % len(ACTS)]
    params[9] = t
    if a:
        params[10] = a
    sp = [int(rng.integers(dd * (kk - 1) + 1, dd * (kk - 1) + 7)) for kk, dd in zip(k, d)]
    if deconv and form in (1, 2):  # output size with SAME_UPPER / SAME_LOWER
        params[4] = -233 if form == 1 else -234
        out_ids = {1: [20], 2: [20, 21], 3: [25, 26, 27]}[nd]
        for a in range(nd):  # at most the natural size (the wheel clamps larger ones)
            natural = s[a] * (sp[a] - 1) + d[a] * (k[a] - 1) + 1
            params[out_ids[a]] = int(rng.integers(max(1, natural - 2), natural + 1))
    if deconv and form == 3:
        op_ids = {1: [18], 2: [18, 19], 3: [18, 19, 20]}[nd]
        for a in range(nd):
            params[op_ids[a]] = int(rng.integers(0, s[a]))
    x = f32(rng, cin, *reversed(sp))
    nw = cout * (cin // g) * int(np.prod(k))
    params[6] = nw
    return case(rng, type_name, params, [x])


def conv_cases(rng):
    out = []
    variants = [
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
    ]
    for t, nd, dw, de in variants:
        for i in range(8):
            out.append(conv_case(rng, i, t, nd, dw, de))
    # dynamic weights
    for t, nd in (("Convolution", 2), ("Convolution1D", 1)):
        x = f32(rng, 3, *([6] * nd))
        wt = f32(rng, 4, 3, *([3] * nd))
        params = {0: 4, 1: 3, 5: 1, 19: 1, 4: 1}
        out.append((t, params, [], [x, wt, f32(rng, 4)], 1))
    out.append(("Deconvolution", {0: 4, 1: 3, 5: 0, 28: 1, 3: 2}, [], [f32(rng, 3, 4, 5), f32(rng, 3, 4, 3, 3)], 1))
    # a blob one rank short, the flat 1x1 InnerProduct path
    out.append(case(rng, "Convolution", {0: 2, 1: 3, 6: 18}, [f32(rng, 6, 7)]))
    out.append(case(rng, "Convolution", {0: 5, 1: 1, 5: 1, 6: 30, 9: 1}, [f32(rng, 6)]))
    # int8 convolution: float weights quantized, int8 weights, requantized top
    for term, shape in ((1, (3, 6, 7)), (101, (3, 5, 5))):
        w = f32(rng, 4 * 3 * 9)
        params = {0: 4, 1: 3, 4: 1, 5: 1, 6: 4 * 3 * 9, 8: term, 9: 1}
        ws = [w, f32(rng, 4), f32(rng, 4, lo=20, hi=60), np.array([30.0], np.float32)]
        if term > 100:
            ws.append(np.array([5.0], np.float32))
        out.append(("Convolution", params, ws, [f32(rng, *shape)], 1))
    w8 = rng.integers(-127, 128, 6 * 9).astype(np.int8)
    params = {0: 6, 1: 3, 4: -233, 6: 6 * 9, 7: 6, 8: 1}
    out.append(
        (
            "ConvolutionDepthWise",
            params,
            [w8, f32(rng, 6, lo=20, hi=60), np.array([25.0], np.float32)],
            [f32(rng, 6, 5, 5)],
            1,
        )
    )
    # and float depthwise weights, quantized per group by the converter (a generator of its own: the cases
    # after it keep their values)
    own = np.random.default_rng(20260112)
    out.append(
        (
            "ConvolutionDepthWise",
            params,
            [f32(own, 6 * 9), f32(own, 6, lo=20, hi=60), np.array([25.0], np.float32)],
            [f32(own, 6, 5, 5)],
            1,
        )
    )
    # DeformableConv2D: offsets, with and without mask
    for mask in (False, True):
        c, h, w_, k = 2, 6, 7, 3
        oh, ow = h - k + 1 + 2, w_ - k + 1 + 2
        params = {0: 3, 1: k, 4: 1, 5: 1, 6: 3 * c * k * k, 9: 1}
        ins = [f32(rng, c, h, w_), f32(rng, 2 * k * k, oh, ow)]
        if mask:
            ins.append(f32(rng, k * k, oh, ow, lo=0, hi=1))
        out.append(case(rng, "DeformableConv2D", params, ins))
    for params, shape in (
        ({1: 2, 11: 3, 3: 1, 13: 2}, (2, 5, 6)),
        ({1: 3, 4: 1, 18: 0.5}, (2, 4, 5)),
        ({1: 2, 2: 2, 4: -233}, (3, 5, 5)),
        ({1: 3, 4: -234, 3: 2}, (1, 6, 7)),
    ):
        out.append(case(rng, "Unfold", params, [f32(rng, *shape)]))
    for kw, kh, sw, sh, pl, ow, oh, c in ((2, 2, 1, 1, 0, 5, 4, 2), (3, 2, 2, 1, 1, 6, 5, 1)):
        nw = (ow + 2 * pl - kw) // sw + 1
        nh = (oh + 2 * pl - kh) // sh + 1
        params = {1: kw, 11: kh, 3: sw, 13: sh, 4: pl, 20: ow, 21: oh}
        out.append(case(rng, "Fold", params, [f32(rng, c * kw * kh, nw * nh)]))
    return out


def pool_cases(rng):
    out = []
    kk = {1: [1], 2: [1, 11], 3: [1, 11, 21]}
    ss = {1: [2], 2: [2, 12], 3: [2, 12, 22]}
    pb = {1: [3], 2: [3, 13], 3: [3, 13, 23]}
    pe = {1: [14], 2: [14, 15], 3: [14, 15, 16]}
    oo = {1: [8], 2: [8, 18], 3: [8, 18, 28]}
    for t, nd in (("Pooling1D", 1), ("Pooling", 2), ("Pooling3D", 3)):
        for i in range(24):
            params = {0: i % 2}
            kind = (i // 2) % 6
            k = [int(rng.integers(1, 4)) for _ in range(nd)]
            s = [int(rng.integers(1, 4)) for _ in range(nd)]
            sp = [int(rng.integers(kv, kv + 6)) for kv in k]
            if kind < 4:
                params[5] = kind
                for a in range(nd):
                    params[kk[nd][a]], params[ss[nd][a]] = k[a], s[a]
                    if kind in (0, 1) or i % 5 == 0:
                        params[pb[nd][a]] = int(rng.integers(0, k[a]))
                        params[pe[nd][a]] = int(rng.integers(0, k[a]))
                params[6] = int(rng.integers(0, 2))
            elif kind == 4:
                params[4] = 1
            else:
                params[7] = 1
                for a in range(nd):
                    params[oo[nd][a]] = int(rng.integers(1, sp[a] + 2))
            out.append(case(rng, t, params, [f32(rng, int(rng.integers(1, 4)), *reversed(sp))]))
    out.append(case(rng, "Pooling", {0: 0, 1: 2, 2: 2}, [f32(rng, 5, 6)]))  # one rank short
    for include in (0, 1):
        out.append(case(rng, "StatisticsPooling", {0: include}, [f32(rng, 3, 4, 5)]))
        out.append(case(rng, "StatisticsPooling", {0: include}, [f32(rng, 2, 3, 4, 5)]))
    return out


def spp_cases(rng):
    """SPP is compiled out of the wheel: these run against the front end (a NumPy reference)."""
    return [case(rng, "SPP", {0: t, 1: h}, [f32(rng, 2, 7, 9)]) for t in (0, 1) for h in (1, 3)]


def kv_cache_cases(rng):
    """The wheel keeps its k/v caches in a packed layout of its own: these run against the front end, whose
    cache semantics tests/ncnn/test_attention.py checks against the wheel ([past; current] rows)."""
    E, H = 8, 2
    mha = case(
        rng,
        "MultiHeadAttention",
        {0: E, 1: H, 2: E * E, 7: 1},
        [f32(rng, 2, E), f32(rng, E, 3), f32(rng, E, 3)],
        n_out=3,
    )
    cross = case(
        rng,
        "MultiHeadAttention",
        {0: E, 1: H, 2: E * E, 7: 1},
        [f32(rng, 2, E), f32(rng, 4, E), f32(rng, E, 3), f32(rng, E, 3)],
        n_out=3,
    )
    sd = [f32(rng, 2, 3, 4), f32(rng, 2, 2, 4), f32(rng, 2, 2, 4), f32(rng, 2, 3, 4), f32(rng, 2, 3, 4)]
    return [mha, cross, case(rng, "SDPA", {7: 1}, sd, n_out=3)]


def argmax_cases(rng):
    """ArgMax is compiled out of the wheel: these run against the front end (a NumPy reference)."""
    x = f32(rng, 3, 4, 5)
    return [case(rng, "ArgMax", {0: v, 1: k}, [x]) for v in (0, 1) for k in (1, 3)]
