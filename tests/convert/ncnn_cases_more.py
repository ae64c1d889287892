"""Single-layer ncnn cases, continued (see ncnn_cases.py): normalization, reductions, dense, attention,
recurrent, resampling, spectral and detection layers; ``all_cases`` gathers both modules' cases."""

from __future__ import annotations

import numpy as np

from .ncnn_cases import (
    ACTS,
    binary_cases,
    case,
    cast_quant_cases,
    conv_cases,
    elementwise_cases,
    f32,
    pool_cases,
    shape_cases,
)


# --------------------------------------------------------------------------------------------- norm, reduce
def norm_cases(rng):
    out = []
    for shape, size in (((6,), 6), ((3, 6), 6), ((2, 3, 6), 6), ((2, 3, 4, 5), 20), ((2, 3, 4), 12)):
        for t in ("LayerNorm", "RMSNorm"):
            out.append(case(rng, t, {0: size, 1: 1e-5, 2: 1}, [f32(rng, *shape)]))
            out.append(case(rng, t, {0: size, 1: 1e-3, 2: 0}, [f32(rng, *shape)]))
    for shape, grp in (((6,), 3), ((6, 5), 2), ((6, 4, 5), 3), ((4, 2, 3, 5), 2)):
        out.append(case(rng, "GroupNorm", {0: grp, 1: shape[0], 2: 1e-4, 3: 1}, [f32(rng, *shape)]))
    out.append(case(rng, "GroupNorm", {0: 2, 1: 4, 3: 0}, [f32(rng, 4, 3, 3)]))
    for shape in ((3, 4, 5), (2, 3, 4, 5)):
        out.append(case(rng, "InstanceNorm", {0: shape[0], 1: 1e-4, 2: 1}, [f32(rng, *shape)]))
        out.append(case(rng, "InstanceNorm", {0: shape[0], 2: 0}, [f32(rng, *shape)]))
    for params in ({0: 0, 1: 5}, {0: 0, 1: 4, 2: 0.5, 3: 0.6, 4: 2.0}, {0: 1, 1: 3}, {0: 1, 1: 2, 2: 0.3}):
        out.append(case(rng, "LRN", params, [f32(rng, 6, 5, 5)]))
    for nv in (0, 1):
        for ac in (0, 1):
            out.append(case(rng, "MVN", {0: nv, 1: ac, 2: 1e-3}, [f32(rng, 3, 4, 5)]))
    for sp, sh, ch, mode in ((1, 0, 1, 0), (1, 1, 0, 1), (0, 0, 1, 2), (1, 0, 0, 0), (0, 1, 1, 1)):
        params = {0: sp, 1: sh, 2: 1e-3, 3: 1 if sh else 3, 4: ch, 9: mode}
        out.append(case(rng, "Normalize", params, [f32(rng, 3, 4, 5)]))
    reds = [
        ({1: 1}, (3, 4, 5)),
        ({1: 0, 3: [1], 5: 1}, (3, 4, 5)),
        ({1: 0, 3: [0, 2], 4: 1, 5: 1}, (3, 4, 5)),
        ({1: 0, 3: [-1], 5: 1}, (2, 3, 4, 5)),
        ({1: 1, 4: 1}, (4, 5)),
        ({1: 0}, (4, 5)),
        ({}, (6,)),
    ]
    for op in range(11):
        params, shape = reds[op % len(reds)]
        x = f32(rng, *shape, lo=0.2, hi=1.5) if op in (6, 9) else f32(rng, *shape)
        out.append(case(rng, "Reduction", {0: op, 2: 0.7 if op % 2 else 1.0, **params}, [x]))
    for axis, shape in ((0, (6,)), (1, (3, 4)), (-1, (2, 3, 4)), (2, (2, 3, 4, 5))):
        out.append(case(rng, "CumulativeSum", {0: axis}, [f32(rng, *shape)]))
    return out


# --------------------------------------------------------------------------------------------- dense
def dense_cases(rng):
    out = []
    for i, shape in enumerate(((6,), (4, 6), (2, 3, 1), (2, 1, 3, 1))):
        K = int(np.prod(shape)) if len(shape) != 2 else shape[1]
        t, a = ACTS[i % len(ACTS)]
        params = {0: 5, 1: i % 2, 2: 5 * K, 9: t, **({10: a} if a else {})}
        out.append(case(rng, "InnerProduct", params, [f32(rng, *shape)]))
    # int8 InnerProduct: float weights quantized, int8 weights
    for stored_int8 in (False, True):
        K, M = 6, 4
        w = rng.integers(-127, 128, M * K).astype(np.int8) if stored_int8 else f32(rng, M * K)
        ws = [w, f32(rng, M), f32(rng, M, lo=20, hi=60), np.array([30.0], np.float32)]
        out.append(("InnerProduct", {0: M, 1: 1, 2: M * K, 8: 1}, ws, [f32(rng, 3, K)], 1))
    gemms = [
        ({}, [(3, 4), (4, 5)]),
        ({2: 1, 3: 1, 0: 0.5, 1: 2.0}, [(4, 3), (5, 4), (3, 5)]),
        ({5: 1, 8: 5, 9: 4, 3: 1}, [(3, 4)]),
        ({4: 1, 7: 3, 9: 4}, [(4, 5)]),
        ({5: 1, 6: 1, 7: 3, 8: 5, 9: 4, 10: 4}, [(3, 4)]),
        ({5: 1, 6: 1, 7: 3, 8: 5, 9: 4, 10: 1}, [(3, 4)]),
        ({5: 1, 6: 1, 7: 3, 8: 5, 9: 4, 10: 3, 14: 1}, [(3, 4)]),
        ({5: 1, 6: 1, 7: 3, 8: 5, 9: 4, 10: 0, 11: 1}, [(3, 4)]),
        ({}, [(3, 4), (4, 5), (5,)]),
        ({}, [(3, 4), (4, 5), (3, 1)]),
        ({}, [(4,), (4, 5)]),
    ]
    for params, shapes_ in gemms:
        out.append(case(rng, "Gemm", params, [f32(rng, *s) for s in shapes_]))
    mms = [((3, 4), (4, 5), 0), ((4,), (4, 5), 0), ((3, 4), (4,), 0), ((2, 3, 4), (4, 5), 0), ((2, 3, 4), (2, 5, 4), 1)]
    mms += [((2, 2, 3, 4), (2, 2, 4, 3), 0), ((4,), (4,), 0), ((3, 4), (5, 4), 1)]
    for a, b, tb in mms:
        out.append(case(rng, "MatMul", {0: tb}, [f32(rng, *a), f32(rng, *b)]))
    for int8 in (False, True):
        V, N, T = 7, 4, 6
        ids = rng.integers(-2, V + 2, T).astype(np.float32)
        params = {0: N, 1: V, 2: 1, 3: N * V, **({18: 1} if int8 else {})}
        w = rng.integers(-127, 128, N * V).astype(np.int8) if int8 else f32(rng, N * V)
        ws = [w, f32(rng, N)] + ([np.array([40.0], np.float32)] if int8 else [])
        out.append(("Embed", params, ws, [ids], 1))
    return out


def attention_cases(rng):
    out = []
    E, H = 8, 2
    for i in range(4):
        qdim, kdim, vdim = (E, E, E) if i < 2 else (6, 5, 7)
        params = {0: E, 1: H, 2: E * qdim, 3: kdim, 4: vdim}
        src, dst = 3, 4
        if i == 0:
            ins = [f32(rng, src, qdim)]
            params[3] = params[4] = qdim
        else:
            ins = [f32(rng, src, qdim), f32(rng, dst, kdim), f32(rng, dst, vdim)]
        if i % 2:
            params[5] = 1
            ins.append(f32(rng, src, dst if i else src))
        out.append(case(rng, "MultiHeadAttention", params, ins))
    for i, (heads, groups) in enumerate(((2, 2), (4, 2), (3, 1))):
        params = {6: 0.0 if i else 0.3}
        ins = [f32(rng, heads, 3, 4), f32(rng, groups, 5, 4), f32(rng, groups, 5, 6)]
        if i == 1:
            params[5] = 1
            ins.append(f32(rng, 3, 5))
        out.append(case(rng, "SDPA", params, ins))
    for inter in (0, 1):
        out.append(case(rng, "RotaryEmbed", {0: inter}, [f32(rng, 2, 5, 6), f32(rng, 7, 3), f32(rng, 7, 3)]))
    for eq, shapes_ in (
        ("ik,kj->ij", [(3, 4), (4, 5)]),
        ("ikj->ijk", [(2, 3, 4)]),
        ("ii", [(4, 4)]),
        ("ij->i", [(3, 4)]),
    ):
        out.append(case(rng, "Einsum", {0: [ord(c) for c in eq]}, [f32(rng, *s) for s in shapes_]))
    return out


def rnn_cases(rng):
    out = []
    T, I = 5, 4
    for t, gates in (("RNN", 1), ("GRU", 3), ("LSTM", 4)):
        for direction in (0, 1, 2):
            H = 3
            D = 2 if direction == 2 else 1
            params = {0: H, 1: H * gates * I * D, 2: direction}
            out.append(case(rng, t, params, [f32(rng, T, I)]))
        n_state = 2 if t == "LSTM" else 1
        params = {0: 3, 1: 3 * gates * I, 2: 0}
        states = [f32(rng, 1, 3) for _ in range(n_state)]
        out.append(case(rng, t, params, [f32(rng, T, I), *states], n_out=1 + n_state))
    # LSTM with a projection (hidden_size != num_output)
    for direction in (0, 2):
        D = 2 if direction == 2 else 1
        params = {0: 2, 1: 3 * 4 * I * D, 2: direction, 3: 3}
        out.append(case(rng, "LSTM", params, [f32(rng, T, I)]))
    return out


# --------------------------------------------------------------------------------------------- resample etc.
def resample_cases(rng):
    out = []
    x3 = f32(rng, 2, 5, 6)
    interps = [
        ({0: 1, 1: 2.0, 2: 2.0}, [x3]),
        ({0: 1, 3: 7, 4: 4}, [x3]),
        ({0: 2, 1: 1.5, 2: 0.75}, [x3]),
        ({0: 2, 3: 8, 4: 9, 6: 1}, [x3]),
        ({0: 3, 3: 7, 4: 10}, [x3]),
        ({0: 3, 1: 2.0, 2: 1.4, 6: 1}, [x3]),
        ({0: 2, 4: 9, 3: 1}, [x3[0]]),
        ({0: 1, 3: 3, 4: 4}, [f32(rng, 4)]),
        ({0: 2, 5: 1}, [x3, f32(rng, 1, 7, 9)]),
        ({0: 2, 9: "*(0w,2),+(0h,3)"}, [x3]),
    ]
    for params, ins in interps:
        out.append(case(rng, "Interp", params, ins))
    for k in range(12):
        st, pad, ac, pf = 1 + k % 3, 1 + (k // 3) % 3, (k // 2) % 2, int(k >= 9)
        x = f32(rng, 2, 5, 6)
        g = rng.uniform(-1.2, 1.2, (3, 4, 2)).astype(np.float32)
        if pf:
            g = np.ascontiguousarray(np.moveaxis(g, -1, 0))
        out.append(case(rng, "GridSample", {0: st, 1: pad, 2: ac, 3: pf}, [x, g]))
    g5 = rng.uniform(-1.2, 1.2, (2, 3, 4, 3)).astype(np.float32)
    out.append(case(rng, "GridSample", {0: 1, 1: 2, 2: 0}, [f32(rng, 2, 3, 4, 5), g5]))
    return out


def spectral_cases(rng):
    out = []
    for power in (0, 1, 2):
        for wt, center, norm, onesided in ((0, 1, 0, 1), (1, 1, 1, 1), (2, 0, 2, 0)):
            params = {0: 8, 1: power, 2: 2, 3: 8 if wt != 2 else 6, 4: wt, 5: center, 6: 2, 7: norm, 8: onesided}
            out.append(case(rng, "Spectrogram", params, [f32(rng, 20)]))
    for returns in (0, 1, 2):
        for wt, center, norm, freqs in ((1, 1, 0, 5), (2, 0, 1, 8), (1, 1, 2, 5)):
            params = {0: 8, 1: returns, 2: 2, 4: wt, 5: center, 7: norm}
            out.append(case(rng, "InverseSpectrogram", params, [f32(rng, freqs, 7, 2)]))
    return out


def detection_cases(rng):
    out = []
    feat, img = f32(rng, 4, 3, 4), f32(rng, 3, 30, 40)
    pb = {
        0: [8.0, 16.0],
        1: [12.0, 24.0],
        2: [2.0],
        3: 0.1,
        4: 0.1,
        5: 0.2,
        6: 0.2,
        7: 1,
        8: 1,
        9: -233,
        10: -233,
        13: 0.5,
    }
    out.append(case(rng, "PriorBox", pb, [feat, img]))
    out.append(case(rng, "PriorBox", {**pb, 9: 300, 10: 300, 11: 8.0, 12: 8.0}, [feat]))
    x = f32(rng, 3, 8, 9)
    xs = f32(rng, 2 * 2 * 3, 8, 9)
    for roi in ([1.0, 2.0, 5.0, 6.4], [0.0, 0.0, 8.0, 7.0], [2.2, 0.4, 6.1, 6.5]):
        params = {0: 3, 1: 2, 2: 1.0, 3: 2}
        out.append(case(rng, "PSROIPooling", params, [xs, np.array(roi, np.float32)]))
        # pooled sizes 1 and 3, roi sizes no multiple of them: otherwise the wheel starts some bins a cell
        # early (a fast-math reciprocal; see tests/ncnn/test_detection.py)
        out.append(case(rng, "ROIPooling", {0: 3, 1: 1 + 2 * (roi[0] > 0), 2: 1.0}, [x, np.array(roi, np.float32)]))
        for aligned in (0, 1):
            params = {0: 3, 1: 2, 2: 0.5, 3: 2, 4: aligned, 5: 1}
            out.append(case(rng, "ROIAlign", params, [x, np.array(roi, np.float32) * 2]))
    return out


def all_cases(seed: int = 14):
    rng = np.random.default_rng(seed)
    out = []
    for make in (
        elementwise_cases,
        binary_cases,
        cast_quant_cases,
        shape_cases,
        conv_cases,
        pool_cases,
        norm_cases,
        dense_cases,
        attention_cases,
        rnn_cases,
        resample_cases,
        spectral_cases,
        detection_cases,
    ):
        out += make(rng)
    return out
