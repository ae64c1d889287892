"""Resampling layers against the ncnn wheel: Interp, GridSample, Fold, Unfold; plus bad params."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import KernelError, ModelFormatError

from . import wheel
from .test_shape import compare, f32, needs_wheel


def interp_cases(rng):
    cases = []
    scales = [0.5, 0.75, 1.0, 1.5, 2.0, 2.7, 3.0, 0.4]
    for k in range(48):
        rt = 1 + k % 3
        h, w = (int(v) for v in rng.integers(2, 9, 2))
        x = f32(rng, (int(rng.integers(1, 4)), h, w))
        params = {0: rt}
        if rt > 1 and (k // 3) % 2:
            params[6] = 1
        form = (k // 6) % 4
        if form == 0:  # scales
            params[1] = float(rng.choice(scales))
            params[2] = float(rng.choice(scales))
        elif form == 1:  # sizes
            params[3] = int(rng.integers(1, 13))
            params[4] = int(rng.integers(1, 13))
            if rt == 3 or params.get(6):
                params[3], params[4] = max(params[3], 2), max(params[4], 2)
        elif form == 2:  # 2d: w only
            x = x[0]
            if k % 2:
                params[2] = float(rng.choice(scales))
                params[1] = 1.0
            else:
                params[4], params[3] = int(rng.integers(2, 13)), 1
        else:  # a 1d bottom: channels filled with each value
            x = f32(rng, (int(rng.integers(1, 6)),))
            params[3], params[4] = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        cases.append((params, [x]))
    for k, (h, w) in enumerate([(1, 1), (1, 3), (2, 2), (3, 2), (2, 3), (1, 5)]):  # tiny inputs
        size = [{3: 5, 4: 6}, {1: 2.0, 2: 3.0}, {3: 1, 4: 1}, {3: 5, 4: 6, 6: 1}, {3: 1, 4: 2, 6: 1}][k % 5]
        cases += [({0: rt, **size}, [f32(rng, (2, h, w))]) for rt in (2, 3)]
    x3 = f32(rng, (2, 5, 6))
    for rt in (1, 2, 3):
        cases += [
            ({0: rt, 5: 1}, [x3, f32(rng, (1, 7, 9))]),
            ({0: rt, 5: 1, 2: 1.5, 1: 1.4}, [x3, f32(rng, (7, 9))]),
            ({0: rt, 5: 1, 6: int(rt > 1)}, [x3, f32(rng, (3, 3, 4))]),
            ({0: rt, 5: 1}, [x3, f32(rng, (8,))]),
            ({0: rt, 5: 1}, [x3[0], f32(rng, (2, 9))]),
            ({0: rt, 9: "*(0w,2),+(0h,3)"}, [x3]),
            ({0: rt, 9: "//(*(0w,3),2)"}, [x3]),
            ({0: rt, 9: "1w,1h"}, [x3, f32(rng, (4, 9))]),
            ({0: rt, 9: "+(0w,1)"}, [x3[0]]),
        ]
    return cases


def gridsample_cases(rng):
    cases = []
    for k in range(54):
        st = 1 + k % 3  # 1 bilinear, 2 nearest, 3 bicubic
        pad = 1 + (k // 3) % 3  # zeros, border, reflection
        ac = (k // 9) % 2
        pf = (k // 18) % 2
        params = {0: st, 1: pad, 2: ac, 3: pf}
        four = st != 3 and k % 4 == 1
        c = int(rng.integers(1, 4))
        if four:
            x = f32(rng, (c, 3, 4, 5))
            g = rng.uniform(-1.3, 1.3, (2, 3, 4, 3)).astype(np.float32)
            if pf:
                g = np.ascontiguousarray(np.moveaxis(g, -1, 0))
        else:
            x = f32(rng, (c, int(rng.integers(3, 7)), int(rng.integers(3, 7))))
            g = rng.uniform(-1.3, 1.3, (int(rng.integers(2, 6)), int(rng.integers(2, 6)), 2)).astype(np.float32)
            if k % 5 == 0:  # points on the pixel grid and half-way between
                g = (np.round(g * 8) / 8).astype(np.float32)
            if pf:
                g = np.ascontiguousarray(np.moveaxis(g, -1, 0))
        cases.append((params, [x, g]))
    return cases


def fold_cases(rng):
    cases = []
    for k in range(24):
        kw, kh = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        dw, dh = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        sw, sh = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        pl, pr, pt, pb = (int(v) for v in rng.integers(0, 2, 4))
        ow, oh = int(rng.integers(4, 9)), int(rng.integers(4, 9))
        nw = (ow + pl + pr - (dw * (kw - 1) + 1)) // sw + 1
        nh = (oh + pt + pb - (dh * (kh - 1) + 1)) // sh + 1
        c = int(rng.integers(1, 4))
        params = {
            0: c * kw * kh,
            1: kw,
            11: kh,
            2: dw,
            12: dh,
            3: sw,
            13: sh,
            4: pl,
            15: pr,
            14: pt,
            16: pb,
            20: ow,
            21: oh,
        }
        if k % 4 == 0:  # defaults that follow another param
            params = {1: kw, 20: ow, 4: pl, 3: sw, 2: dw}
            kh, dh, sh, pt, pb, oh = kw, dw, sw, pl, pl, ow
            nw = (ow + 2 * pl - (dw * (kw - 1) + 1)) // sw + 1
            nh = nw
        cases.append((params, [f32(rng, (c * kw * kh, nw * nh))]))
    return cases


def unfold_cases(rng):
    cases = []
    for k in range(28):
        kw, kh = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        params = {
            1: kw,
            11: kh,
            2: int(rng.integers(1, 3)),
            12: int(rng.integers(1, 3)),
            3: int(rng.integers(1, 3)),
            13: int(rng.integers(1, 3)),
        }
        m = k % 4
        if m == 0:
            params.update(
                {
                    4: int(rng.integers(0, 3)),
                    15: int(rng.integers(0, 3)),
                    14: int(rng.integers(0, 3)),
                    16: int(rng.integers(0, 3)),
                    18: float(rng.uniform(-2, 2)),
                }
            )
        elif m == 1:
            params.update({4: -233, 15: -233, 14: -233, 16: -233, 18: 0.5})
        elif m == 2:
            params.update({4: -234, 15: -234, 14: -234, 16: -234})
        else:
            params = {1: kw, 4: 1, 3: 2}  # defaults following kernel_w / pad_left / stride_w
        cases.append((params, [f32(rng, (int(rng.integers(1, 4)), int(rng.integers(5, 9)), int(rng.integers(5, 9))))]))
    return cases


CASES = {"Interp": interp_cases, "GridSample": gridsample_cases, "Fold": fold_cases, "Unfold": unfold_cases}


@needs_wheel
@pytest.mark.parametrize("type_name", sorted(CASES))
def test_matches_the_wheel(type_name):
    rng = np.random.default_rng(sum(map(ord, type_name)) + 1)
    cases = CASES[type_name](rng)
    assert len(cases) >= 20
    compare(type_name, cases)


def test_interp_nearest_uses_ncnn_index_rule():
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 5)
    (y,) = sn.run_layer("Interp", {0: 1, 3: 1, 4: 7}, [], [x])
    np.testing.assert_array_equal(y[0, 0], [0, 0, 1, 2, 2, 3, 4])  # trunc(x * 5 / 7)


def test_fold_inverts_unfold_counts():
    x = np.ones((2, 5, 6), np.float32)
    (cols,) = sn.run_layer("Unfold", {1: 3, 4: 1}, [], [x])
    assert cols.shape == (18, 30)
    (y,) = sn.run_layer("Fold", {1: 3, 4: 1, 20: 6, 21: 5}, [], [cols])
    assert y.shape == (2, 5, 6) and y[0, 2, 2] == 9 and y[0, 0, 0] == 4


@pytest.mark.parametrize(
    "type_name,params,inputs,match",
    [
        ("Interp", {0: 4}, [np.zeros((1, 2, 2), np.float32)], "resize_type"),
        ("Interp", {0: 2, 5: 1}, [np.zeros((1, 2, 2), np.float32)], "takes 2 bottoms"),
        ("Interp", {0: 2, 9: "1,2,3"}, [np.zeros((1, 2, 2), np.float32)], "1 or 2"),
        ("Interp", {0: 2, 1: 0.1, 2: 0.1}, [np.zeros((1, 2, 2), np.float32)], "not positive"),
        ("Interp", {0: 2, 1: 2}, [np.zeros((1, 1, 2, 2), np.float32)], "1d, 2d or 3d"),
        ("Interp", {0: 2, 1: 2.5}, [np.zeros((1, 2, 2), np.float32)], None),
        ("Interp", {0: 2, 1: 2.0}, [np.zeros((1, 2, 2), np.float32)] * 2, "takes 1 bottom"),
        ("GridSample", {0: 4}, [np.zeros((1, 2, 2), np.float32), np.zeros((2, 2, 2), np.float32)], "sample_type"),
        ("GridSample", {1: 0}, [np.zeros((1, 2, 2), np.float32), np.zeros((2, 2, 2), np.float32)], "padding_mode"),
        ("GridSample", {0: 3}, [np.zeros((1, 2, 2, 2), np.float32), np.zeros((2, 2, 2, 3), np.float32)], "bicubic"),
        ("GridSample", {}, [np.zeros((1, 2, 2), np.float32), np.zeros((2, 2, 3), np.float32)], "coordinates"),
        ("Fold", {1: 2, 20: 4}, [np.zeros((4, 5), np.float32)], "blocks"),
        ("Fold", {1: 0, 20: 4}, [np.zeros((4, 9), np.float32)], "kernel_w"),
        ("Unfold", {1: 9}, [np.zeros((1, 3, 3), np.float32)], "larger than"),
        ("Unfold", {1: 2, 4: -233, 15: 1}, [np.zeros((1, 3, 3), np.float32)], "pads"),
        ("Unfold", {1: 2.0}, [np.zeros((1, 3, 3), np.float32)], "float literal"),
    ],
)
def test_bad_params_and_inputs(type_name, params, inputs, match):
    if match is None:  # an int given for a float param is accepted
        sn.run_layer(type_name, params, [], inputs)
        return
    with pytest.raises((ModelFormatError, KernelError, ValueError), match=match):
        sn.run_layer(type_name, params, [], inputs)


def test_weights_are_refused():
    with pytest.raises(ModelFormatError, match="loads 0 weights"):
        sn.run_layer("Interp", {0: 2}, [np.zeros(3, np.float32)], [np.zeros((1, 2, 2), np.float32)])


@needs_wheel
def test_gridsample_nearest_rounds_half_up_like_ncnn():
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4)
    g = np.array([[[-0.5, 0.25], [0.0, 0.0], [-0.75, -1 / 3]]], np.float32)
    p = {0: 2, 1: 1, 2: 0}
    wheel.assert_close(sn.run_layer("GridSample", p, [], [x, g]), wheel.wheel_run("GridSample", p, [], [x, g]))


def test_net_with_dynamic_interp_crop_and_expressions(tmp_path):
    text = (
        "7767517\n6 7\nInput in 0 1 x\nInput in2 0 1 r\nSplit sp 1 2 x xa xb\n"
        "Interp up 2 1 xa r u 0=2 5=1\nCrop cr 2 1 u xb c 0=1 1=1\n"
        'Reshape rs 1 1 c y 6="-1"\n'
    )
    net = sn.Net.from_bytes(text)
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    r = np.zeros((1, 6, 8), np.float32)
    y = net.run({"x": x, "r": r})["y"]
    up = sn.run_layer("Interp", {0: 2, 5: 1}, [], [x, r])[0]
    np.testing.assert_array_equal(y, up[:, 1:4, 1:5].ravel())
    for binary in (False, True):  # string params survive the writers
        pp = tmp_path / ("m.param.bin" if binary else "m.param")
        net.save(pp, binary=binary)
        again = sn.Net.load(pp)
        a, b = again.input_names
        np.testing.assert_array_equal(list(again.run({a: x, b: r}).values())[0], y)


@pytest.mark.parametrize("rt", [2, 3])
def test_interp_keeps_a_nan_local(rt):
    x = np.arange(60, dtype=np.float32).reshape(2, 5, 6)
    x[0, 2, 3] = np.nan
    (y,) = sn.run_layer("Interp", {0: rt, 3: 10, 4: 12}, [], [x])
    assert 0 < np.isnan(y[0]).sum() <= 64 and not np.isnan(y[1]).any()
    x[0, 2, 3] = 7.0
    (z,) = sn.run_layer("Interp", {0: rt, 3: 10, 4: 12}, [], [x])
    np.testing.assert_allclose(np.where(np.isnan(y), z, y), z, rtol=1e-5, atol=1e-4)
