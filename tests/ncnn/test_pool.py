"""ncnn pooling and padding layers against the official wheel: Pooling, Pooling1D, Pooling3D (max/avg, pad
modes 0..3, avgpool_count_include_pad, global, adaptive), StatisticsPooling, Padding (constant / replicate /
reflect, per-channel values, front/behind); SPP against a NumPy reference (the wheel lacks it)."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import KernelError, ModelFormatError

from . import wheel

needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")

N_CASES = 24


def check(type_name, params, weights, inputs):
    ours = sn.run_layer(type_name, params, weights, inputs)
    theirs = wheel.wheel_run(type_name, params, weights, inputs)
    wheel.assert_close(ours, theirs, what=f"{type_name} {params}")


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ids per axis, innermost first (w, h, d)
K_IDS = {1: [1], 2: [1, 11], 3: [1, 11, 21]}
S_IDS = {1: [2], 2: [2, 12], 3: [2, 12, 22]}
PB_IDS = {1: [3], 2: [3, 13], 3: [3, 13, 23]}
PE_IDS = {1: [14], 2: [14, 15], 3: [14, 15, 16]}
O_IDS = {1: [8], 2: [8, 18], 3: [8, 18, 28]}


def pool_case(rng, i, nd):
    params = {0: i % 2}  # max / avg
    kind = (i // 2) % 6  # 0..3: pad modes; 4: global; 5: adaptive
    k = [int(rng.integers(1, 4)) for _ in range(nd)]
    s = [int(rng.integers(1, 4)) for _ in range(nd)]
    sp = [int(rng.integers(kk, kk + 7)) for kk in k]  # w, h, d
    if kind < 4:
        params[5] = kind
        for a in range(nd):
            params[K_IDS[nd][a]] = k[a]
            params[S_IDS[nd][a]] = s[a]
            if kind in (0, 1) or i % 5 == 0:  # the pad params also matter for the SAME modes' averages
                params[PB_IDS[nd][a]] = int(rng.integers(0, k[a]))
                params[PE_IDS[nd][a]] = int(rng.integers(0, k[a]))
        params[6] = int(rng.integers(0, 2))
    elif kind == 4:
        params[4] = 1
    else:
        params[7] = 1
        for a in range(nd):
            params[O_IDS[nd][a]] = int(rng.integers(1, sp[a] + 2))
        if nd > 1 and i % 4 == 1:
            params[O_IDS[nd][1]] = -233  # keep that axis
    x = f32(rng, int(rng.integers(1, 4)), *reversed(sp))
    return params, [x]


@needs_wheel
@pytest.mark.parametrize("type_name,nd", [("Pooling1D", 1), ("Pooling", 2), ("Pooling3D", 3)])
def test_pooling_matches_wheel(type_name, nd):
    rng = np.random.default_rng(40 + nd)
    for i in range(2 * N_CASES):
        params, inputs = pool_case(rng, i, nd)
        if nd == 1 and params.get(8) == -233:
            continue
        check(type_name, params, [], inputs)


@needs_wheel
@pytest.mark.parametrize(
    "params",
    [
        {0: 0, 1: 2, 2: 2, 3: 3, 5: 1},
        {0: 1, 1: 2, 2: 2, 3: 3, 5: 1},
        {0: 1, 1: 2, 2: 2, 3: 3, 5: 1, 6: 1},
        {0: 0, 1: 2, 2: 3, 3: 2, 5: 0},
        {0: 1, 1: 2, 2: 3, 3: 2, 5: 0},
        {0: 1, 1: 1, 2: 3, 5: 2},
        {0: 1, 1: 1, 2: 3, 5: 3, 3: 1},
        {0: 0, 1: 1, 2: 2, 5: 3},
    ],
)
def test_pooling_degenerate_windows_match_wheel(params):
    """Windows wholly in the padding (max: -FLT_MAX, average without the pads: 0/0 = NaN) and SAME totals
    below zero (kernel < stride: ncnn crops)."""
    x = f32(np.random.default_rng(8), 2, 4, 5)
    check("Pooling", params, [], [x])


@needs_wheel
@pytest.mark.parametrize(
    "type_name,params,shape",
    [("Pooling", {0: 0, 1: 2, 2: 2}, (6, 7)), ("Pooling", {0: 1, 4: 1}, (6, 7)), ("Pooling1D", {0: 1, 1: 2}, (7,))],
)
def test_blob_one_rank_short_is_one_channel(type_name, params, shape):
    check(type_name, params, [], [f32(np.random.default_rng(5), *shape)])


def test_max_pooling_window_in_padding_is_flt_max():
    x = -np.ones((1, 2, 2), np.float32)
    y = sn.run_layer("Pooling", {0: 0, 1: 2, 2: 2, 3: 2, 5: 1}, [], [x])[0]
    assert y[0, 0, 0] == -np.finfo(np.float32).max and y[0, 1, 1] == -1


@needs_wheel
@pytest.mark.parametrize(
    "params", [{0: 0, 1: 3, 2: 2, 3: 1, 5: 1}, {0: 0, 1: 3, 2: 2, 3: 1, 5: 0}, {0: 0, 1: 2, 2: 1, 5: 2}]
)
def test_max_pooling_minus_inf_at_the_border_and_inside_matches_wheel(params):
    """-inf inputs: a window reaching ncnn's -FLT_MAX padding gives -FLT_MAX, one inside the input -inf (stdops pads
    with -inf and raises the border windows: both must come out as the wheel's)."""
    x = f32(np.random.default_rng(9), 2, 9, 11)
    x[0, :4, :4] = -np.inf  # the top-left windows: real taps all -inf, padding around them
    x[1, 3:8, 4:9] = -np.inf  # interior windows of -inf only
    check("Pooling", params, [], [x])


# ----------------------------------------------------------------------------- SPP
def spp_reference(x, pooling_type, levels):
    """SPP by hand: per level, bins of ceil(size / bins) over the zero-padded input."""
    C, H, W = x.shape
    out = []
    for lv in range(levels):
        bins = 2**lv
        kh, kw = int(np.ceil(H / bins)), int(np.ceil(W / bins))
        ph, pw = (kh * bins - H + 1) // 2, (kw * bins - W + 1) // 2
        xp = np.zeros((C, H + 2 * ph, W + 2 * pw), np.float64)
        xp[:, ph : ph + H, pw : pw + W] = x
        y = np.empty((C, bins, bins))
        for i in range(bins):
            for j in range(bins):
                win = xp[:, i * kh : (i + 1) * kh, j * kw : (j + 1) * kw]
                y[:, i, j] = win.max(axis=(1, 2)) if pooling_type == 0 else win.sum(axis=(1, 2)) / (kh * kw)
        out.append(y.ravel())
    return np.concatenate(out)


def test_spp_matches_numpy_reference():
    rng = np.random.default_rng(9)
    for i in range(N_CASES):
        ptype, levels = i % 2, 1 + i % 4
        x = f32(rng, int(rng.integers(1, 4)), int(rng.integers(1, 13)), int(rng.integers(1, 13)))
        if i % 5 == 0:
            x = -np.abs(x)  # the zero padding wins max bins at the border, as in ncnn
        y = sn.run_layer("SPP", {0: ptype, 1: levels}, [], [x])[0]
        assert y.dtype == np.float32 and y.shape == (x.shape[0] * (4**levels - 1) // 3,)
        np.testing.assert_allclose(y, spp_reference(x, ptype, levels), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- StatisticsPooling
@needs_wheel
def test_statistics_pooling_matches_wheel():
    rng = np.random.default_rng(10)
    for i in range(N_CASES):
        shape = (int(rng.integers(1, 5)), int(rng.integers(1, 6)), int(rng.integers(1, 7)))
        if i % 3 == 2:
            shape = (shape[0], int(rng.integers(1, 4))) + shape[1:]
        elif i % 6 == 1:
            shape = shape[1:]  # a 2d blob is one channel
        x = (f32(rng, *shape) * 3 + 1).astype(np.float32)
        check("StatisticsPooling", {0: i % 2}, [], [x])


# ----------------------------------------------------------------------------- Padding
@needs_wheel
def test_padding_matches_wheel():
    rng = np.random.default_rng(11)
    for i in range(2 * N_CASES):
        dims = 1 + i % 4
        ptype = (i // 4) % 3
        shape = tuple(int(rng.integers(3, 6)) for _ in range(dims))
        x = f32(rng, *shape)
        params = {4: ptype}
        top, bottom, left, right, front, behind = (int(v) for v in rng.integers(0, 3, 6))
        params.update({2: left, 3: right})
        if dims >= 2:
            params.update({0: top, 1: bottom})
        if dims >= 3:
            params.update({7: front, 8: behind})
        weights = []
        if ptype == 0:
            params[5] = float(rng.uniform(-3, 3))
            if dims >= 3 and i % 8 in (2, 3):
                n = shape[0] + front + behind if dims == 3 else shape[0]
                params[6] = n
                weights = [f32(rng, n)]
        check("Padding", params, weights, [x])


def test_padding_and_pooling_bad_params():
    rng = np.random.default_rng(0)
    x = f32(rng, 2, 4, 4)
    with pytest.raises(ModelFormatError, match=r"param 4 \(type\): a float literal"):
        sn.run_layer("Padding", {4: 1.0}, [], [x])
    with pytest.raises(ModelFormatError, match="per_channel_pad_data"):
        sn.run_layer("Padding", {6: 4, 0: 1}, [f32(rng, 3)], [x])
    with pytest.raises(KernelError, match="type 3"):
        sn.run_layer("Padding", {4: 3, 0: 1}, [], [x])
    with pytest.raises(KernelError, match="negative pads"):
        sn.run_layer("Padding", {0: -1}, [], [x])
    with pytest.raises(ModelFormatError, match=r"param 1 \(kernel_w\): a float literal"):
        sn.run_layer("Pooling", {1: 2.5}, [], [x])
    with pytest.raises(KernelError, match="pooling_type 2"):
        sn.run_layer("Pooling", {0: 2, 1: 2}, [], [x])
    with pytest.raises(KernelError, match="larger than the padded input"):
        sn.run_layer("Pooling", {1: 7, 5: 1}, [], [x])
    with pytest.raises(KernelError, match="takes a 3d blob"):
        sn.run_layer("Pooling", {1: 2}, [], [x[0, 0]])
    with pytest.raises(KernelError, match="takes a 4d blob"):
        sn.run_layer("Pooling3D", {1: 2}, [], [x])
