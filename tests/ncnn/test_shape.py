"""Shape and data-movement layers against the ncnn wheel: Concat, Slice, Crop, Reshape, Flatten, Permute,
Squeeze, ExpandDims, Tile, Flip, PixelShuffle, Reorg, ShuffleChannel, CopyTo, DeepCopy; plus bad params."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import KernelError, ModelFormatError

from . import wheel

needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")


# ------------------------------------------------------------------ helpers (also used by test_resample/expr)
def f32(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.standard_normal(tuple(int(s) for s in shape)).astype(np.float32)


def rand_shape(rng: np.random.Generator, rank: int, lo: int = 1, hi: int = 6) -> list[int]:
    return [int(v) for v in rng.integers(lo, hi + 1, rank)]


def compare(type_name: str, cases: Sequence[tuple], atol: float = 1e-4, rtol: float = 1e-4) -> int:
    """Run every case (params, inputs[, n_out]) through stdops and the wheel; fail listing every
    mismatch. Returns the number of cases."""
    failures: list[str] = []
    for k, case in enumerate(cases):
        params, inputs = case[0], [np.ascontiguousarray(x, np.float32) for x in case[1]]
        n_out = case[2] if len(case) > 2 else 1
        what = f"{type_name} case {k} params={params} inputs={[x.shape for x in inputs]}"
        try:
            theirs = wheel.wheel_run(type_name, params, [], inputs, n_out=n_out)
        except wheel.OracleError as e:
            failures.append(f"{what}: the wheel failed: {str(e)[-300:]}")
            continue
        try:
            ours = sn.run_layer(type_name, params, [], inputs, num_outputs=n_out)
            wheel.assert_close(ours, theirs, atol=atol, rtol=rtol, what=what)
        except Exception as e:  # noqa: BLE001 - collected and reported together
            failures.append(f"{what}: {type(e).__name__}: {str(e)[:600]}")
    assert not failures, f"{len(failures)} of {len(cases)} cases differ:\n" + "\n".join(failures)
    return len(cases)


def ours(type_name: str, params: dict[int, Any], inputs, n_out: int | None = None):
    return sn.run_layer(type_name, params, [], [np.ascontiguousarray(x, np.float32) for x in inputs], n_out)


# ------------------------------------------------------------------------------------------ cases
def concat_cases(rng):
    cases = []
    for k in range(24):
        r = 1 + k % 4
        base = rand_shape(rng, r)
        ax = int(rng.integers(0, r))
        axis = ax - r if k % 3 == 0 else ax
        n = int(rng.integers(1, 4))
        xs = []
        for _ in range(n):
            s = list(base)
            s[ax] = int(rng.integers(1, 5))
            xs.append(f32(rng, s))
        cases.append(({0: axis}, xs))
    return cases


def slice_cases(rng):
    cases = []
    for k in range(26):
        r = 1 + k % 4
        shape = rand_shape(rng, r, 2, 7)
        ax = int(rng.integers(0, r))
        axis = ax - r if k % 3 == 1 else ax
        dim = shape[ax]
        n = int(rng.integers(1, min(dim, 4) + 1))
        if k % 2 == 0:
            cuts = sorted(rng.choice(np.arange(1, dim), n - 1, replace=False).tolist()) if n > 1 else []
            idx = [c - dim if rng.random() < 0.4 else c for c in cuts]
            params = {2: idx or [dim], 1: axis}
        else:
            sizes = []
            left = dim
            # parts need not cover the dim (the wheel's x86 layer gets that wrong for 4d along d or h)
            short = k % 5 == 3 and left > n and not (r == 4 and ax in (1, 2))
            for i in range(n):
                if rng.random() < 0.4 and (i < n - 1 or not short):
                    sizes.append(-233)
                    left -= left // (n - i)
                else:
                    s = int(rng.integers(1, left - (n - i - 1) + 1)) if i < n - 1 else left
                    if short and i == n - 1 and left >= 2:
                        s = left - 1
                    sizes.append(s)
                    left -= s
            params = {0: sizes, 1: axis}
        if r == 1:
            params[1] = 0 if k % 8 else 1  # a 1d bottom is split along w whatever the axis
        cases.append((params, [f32(rng, shape)], n))
    return cases


def crop_cases(rng):
    cases = []
    names = {1: "w", 2: "hw", 3: "chw", 4: "cdhw"}
    pid = dict(w=(0, 3, 6), h=(1, 4, 7), d=(13, 14, 15), c=(2, 5, 8))
    for k in range(16):  # offsets + out sizes (-233 = to the end)
        r = 1 + k % 4
        shape = rand_shape(rng, r, 2, 7)
        params = {3: -233, 4: -233, 14: -233, 5: -233}
        for name, n in zip(names[r], shape):
            o_id, out_id, o2_id = pid[name]
            off = int(rng.integers(0, n))
            params[o_id] = off
            if rng.random() < 0.5:
                params[out_id] = int(rng.integers(1, n - off + 1))
            elif rng.random() < 0.5:
                params[o2_id] = int(rng.integers(0, n - off))
        cases.append((params, [f32(rng, shape)]))
    for k in range(16):  # numpy style starts / ends / axes
        r = 1 + k % 4
        shape = rand_shape(rng, r, 2, 7)
        axes = sorted(rng.choice(r, int(rng.integers(1, r + 1)), replace=False).tolist())
        starts, ends = [], []
        for a in axes:
            n = shape[a]
            s = int(rng.integers(0, n))
            e = int(rng.integers(s + 1, n + 1))
            starts.append(-233 if (s == 0 and rng.random() < 0.5) else (s - n if rng.random() < 0.3 else s))
            ends.append(
                -233 if (e == n and rng.random() < 0.5) else (0 if e == n else e - n) if rng.random() < 0.4 else e
            )
        params = {9: starts, 10: ends}
        if k % 3 or len(axes) != r:
            params[11] = [a - r if rng.random() < 0.3 else a for a in axes]
        cases.append((params, [f32(rng, shape)]))
    # expressions over bottom 0 (one bottom) and bottom 1 (two bottoms)
    x3 = f32(rng, (5, 6, 7))
    cases += [
        ({19: "1", 20: "-1", 21: "0"}, [x3]),
        ({19: "1,2", 20: "-(0h,1),//(0w,2)", 21: "1,2"}, [x3]),
        ({19: "0,0,0", 20: "-233,3,-2", 21: "0,1,2"}, [x3]),
        ({19: "//(0c,2)", 20: "0c", 21: "-3"}, [x3]),
        ({19: "0", 20: "1w", 21: "-1"}, [x3, f32(rng, (2, 3))]),
        ({19: "1,0", 20: "1c,+(1h,1)", 21: "0,1"}, [x3, f32(rng, (4, 3, 2))]),
        ({19: "1", 20: "-1", 21: "0"}, [f32(rng, (9,))]),
        ({19: "2,1", 20: "-1,0d", 21: "0,1"}, [f32(rng, (4, 3, 5, 6))]),
    ]
    # reference blob: its shape, or (woffset = -233) its int32 contents
    cases += [
        ({0: 1, 1: 2, 2: 1}, [x3, f32(rng, (3, 3, 4))]),
        ({0: 2, 1: 1}, [x3, f32(rng, (3, 5))]),
        ({0: 1}, [f32(rng, (8,)), f32(rng, (5,))]),
        ({0: 1, 1: 1}, [f32(rng, (6, 7)), f32(rng, (2, 4))]),
        ({0: 1, 1: 1, 13: 1, 2: 1}, [f32(rng, (3, 4, 5, 6)), f32(rng, (2, 2, 3, 4))]),
        ({0: 1, 1: 1, 13: 1}, [f32(rng, (3, 4, 5, 6)), f32(rng, (2, 3, 4))]),
        ({0: 1, 1: 2}, [x3, f32(rng, (3,))]),
        ({0: 1, 1: 2, 2: 2}, [x3, f32(rng, (3, 6, 7))]),  # h and w whole: only the c offset applies
        ({0: -233}, [x3, np.array([1, 2, 1, 3, 2, 4], np.int32).view(np.float32)]),
        ({0: -233}, [f32(rng, (6, 7)), np.array([2, 1, 0, 4, 3], np.int32).view(np.float32)]),
        ({0: -233}, [f32(rng, (3, 4, 5, 6)), np.array([1, 0, 2, 1, 3, 2, 2, 2], np.int32).view(np.float32)]),
    ]
    return cases


def reshape_cases(rng):
    cases = []
    targets = [
        lambda s: {0: -1},
        lambda s: {0: s[-1], 1: -1},
        lambda s: {0: -1, 1: 2} if np.prod(s) % 2 == 0 else {0: -1, 1: 1},
        lambda s: {0: 0, 1: -1},
        lambda s: {0: 0, 1: 0, 2: -1},
        lambda s: {0: -1, 1: 1, 2: 1},
        lambda s: {0: 1, 1: -1, 2: 1},
        lambda s: {0: 1, 1: 1, 11: -1, 2: 1},
        lambda s: {0: 0, 1: 0, 11: 1, 2: -1},
        lambda s: {0: -1, 1: 0, 11: 1, 2: 0},
        lambda s: {0: int(np.prod(s))},
        lambda s: {0: 0},
    ]
    for k in range(36):
        r = 1 + k % 4
        shape = rand_shape(rng, r, 1, 5)
        params = targets[k % len(targets)](shape)
        cases.append((params, [f32(rng, shape)]))
    x3 = f32(rng, (3, 4, 6))
    cases += [
        ({6: "-1"}, [x3]),
        ({6: "0w,-1"}, [x3]),
        ({6: "*(0w,2),//(0h,2),0c"}, [x3]),
        ({6: "-1,*(0h,0c)"}, [x3]),
        ({6: "0w,0h,1,0c"}, [x3]),
        ({6: "0w,1c,-1"}, [x3, f32(rng, (2, 2))]),
        ({6: "-1,1w"}, [x3, f32(rng, (6,))]),
        ({0: 6, 1: 12, 3: 1}, [x3]),  # the legacy permute flag (ignored by current ncnn)
    ]
    return cases


def permute_cases(rng):
    cases = [({0: t}, [f32(rng, (3, 4))]) for t in (0, 1)]
    cases += [({0: t}, [f32(rng, (2, 3, 4))]) for t in range(6)]
    cases += [({0: t}, [f32(rng, (2, 3, 4, 5))]) for t in range(24)]
    cases += [({0: 0}, [f32(rng, (7,))])]
    return cases


def squeeze_cases(rng):
    cases = []
    for k in range(24):
        r = 1 + k % 4
        shape = [1 if rng.random() < 0.5 else int(rng.integers(2, 5)) for _ in range(r)]
        if k % 2 == 0:
            names = {1: [0], 2: [1, 0], 3: [2, 1, 0], 4: [3, 2, 1, 0]}[r]  # ids for w, h, (d), c
            ids = {1: [0], 2: [0, 1], 3: [0, 1, 2], 4: [0, 1, 11, 2]}[r]
            del names
            params = {i: int(rng.integers(0, 2)) for i in ids}
        else:
            axes = sorted(rng.choice(r, int(rng.integers(1, r + 1)), replace=False).tolist())
            params = {3: [a - r if rng.random() < 0.3 else a for a in axes]}
        cases.append((params, [f32(rng, shape)]))
    cases.append(({0: 1, 1: 1, 2: 1}, [f32(rng, (1, 1, 1))]))
    return cases


def expanddims_cases(rng):
    cases = []
    for k in range(24):
        r = 1 + k % 3
        shape = rand_shape(rng, r, 2, 5)
        n = int(rng.integers(1, 4 - r + 1 + 0)) if r < 4 else 0
        out = r + n
        axes = sorted(rng.choice(out, n, replace=False).tolist())
        axes = [a - out if rng.random() < 0.3 else a for a in axes]
        cases.append(({3: axes}, [f32(rng, shape)]))
    return cases


def tile_cases(rng):
    cases = []
    for k in range(24):
        r = 1 + k % 4
        shape = rand_shape(rng, r, 1, 4)
        if k % 2 == 0:
            cases.append(({0: int(rng.integers(0, r)), 1: int(rng.integers(1, 4))}, [f32(rng, shape)]))
        else:
            n = int(rng.integers(1, 5))
            cases.append(({2: [int(v) for v in rng.integers(1, 4, n)]}, [f32(rng, shape)]))
    # an axis outside 0..dims-1 tiles nothing (a 1d bottom always tiles along w)
    cases += [
        ({0: 2, 1: 2}, [f32(rng, (2, 3))]),
        ({0: 3, 1: 2}, [f32(rng, (2, 3, 4))]),
        ({0: 2, 1: 3}, [f32(rng, (5,))]),
        ({2: [1, 1, 1, 1]}, [f32(rng, (2, 3))]),
    ]
    return cases


def flip_cases(rng):
    cases = []
    for k in range(24):
        r = 1 + k % 4
        shape = rand_shape(rng, r, 1, 5)
        axes = sorted(rng.choice(r, int(rng.integers(1, r + 1)), replace=False).tolist())
        cases.append(({0: [a - r if rng.random() < 0.4 else a for a in axes]}, [f32(rng, shape)]))
    return cases


def pixelshuffle_cases(rng):
    cases = []
    for k in range(20):
        f = 1 + k % 3
        oc = int(rng.integers(1, 4))
        cases.append(({0: f, 1: k % 2}, [f32(rng, (oc * f * f, int(rng.integers(1, 5)), int(rng.integers(1, 5))))]))
    return cases


def reorg_cases(rng):
    cases = []
    for k in range(20):
        s = 1 + k % 3
        h = s * int(rng.integers(1, 4)) + (int(rng.integers(0, s)) if k % 4 == 3 else 0)
        w = s * int(rng.integers(1, 4)) + (int(rng.integers(0, s)) if k % 4 == 1 else 0)
        cases.append(({0: s, 1: (k // 3) % 2}, [f32(rng, (int(rng.integers(1, 4)), h, w))]))
    return cases


def shufflechannel_cases(rng):
    cases = []
    for k in range(20):
        g = int(rng.integers(1, 5))
        c = g * int(rng.integers(1, 4))
        shape = (c, 3, 4) if k % 2 == 0 else (c, 2, 3, 2)
        cases.append(({0: g, 1: (k // 2) % 2}, [f32(rng, shape)]))
    return cases


def copyto_cases(rng):
    cases = []
    names = {1: "w", 2: "hw", 3: "chw", 4: "cdhw"}
    ids = dict(w=0, h=1, d=13, c=2)
    for k in range(24):
        r = 1 + k % 4
        shape = rand_shape(rng, r, 2, 6)
        src = [int(rng.integers(1, n + 1)) for n in shape]
        offs = [int(rng.integers(0, n - s + 1)) for n, s in zip(shape, src)]
        if k % 3 == 0:
            params = {ids[nm]: o for nm, o in zip(names[r], offs)}
        else:
            axes = list(range(r))
            starts = [o - n if (o and rng.random() < 0.3) else o for o, n in zip(offs, shape)]
            params = {9: starts}
            if k % 3 == 2:
                params[11] = [a - r for a in axes]
        cases.append((params, [f32(rng, shape), f32(rng, src)]))
    x = f32(rng, (2, 3, 4))
    cases.append(({0: 1}, [x, f32(rng, (2, 3, 4))]))  # same shape: the src
    cases.append(({9: [1], 11: [-1]}, [f32(rng, (3, 4, 5)), f32(rng, (3, 4, 2))]))
    cases.append(({9: [-2, 1], 11: [0, 2]}, [f32(rng, (3, 4, 5)), f32(rng, (2, 4, 3))]))
    return cases


SHAPES = [(7,), (3, 5), (2, 3, 4), (2, 3, 4, 5)]

CASES = {
    "Concat": concat_cases,
    "Slice": slice_cases,
    "Crop": crop_cases,
    "Reshape": reshape_cases,
    "Flatten": lambda rng: [({}, [f32(rng, rand_shape(rng, 1 + k % 4))]) for k in range(20)],
    "Permute": permute_cases,
    "Squeeze": squeeze_cases,
    "ExpandDims": expanddims_cases,
    "Tile": tile_cases,
    "Flip": flip_cases,
    "PixelShuffle": pixelshuffle_cases,
    "Reorg": reorg_cases,
    "ShuffleChannel": shufflechannel_cases,
    "CopyTo": copyto_cases,
    "DeepCopy": lambda rng: [({}, [f32(rng, rand_shape(rng, 1 + k % 4))]) for k in range(20)],
}


@needs_wheel
@pytest.mark.parametrize("type_name", sorted(CASES))
def test_matches_the_wheel(type_name):
    rng = np.random.default_rng(sum(map(ord, type_name)))
    cases = CASES[type_name](rng)
    assert len(cases) >= 20
    compare(type_name, cases)


# -------------------------------------------------------------------------- semantics without the wheel
def test_slice_equal_parts_and_indices():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a, b = ours("Slice", {0: [-233, -233], 1: -1}, [x], 2)
    np.testing.assert_array_equal(a, x[..., :2])
    np.testing.assert_array_equal(b, x[..., 2:])
    a, b, c = ours("Slice", {2: [1, -1], 1: 2}, [x], 3)
    assert [t.shape[2] for t in (a, b, c)] == [1, 2, 1]


def test_reshape_zero_and_minus_one():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    (y,) = ours("Reshape", {0: 0, 1: -1}, [x])
    assert y.shape == (6, 4)
    (y,) = ours("Reshape", {6: "0w,-1,0c"}, [x])
    assert y.shape == (2, 3, 4)


def test_crop_expressions_without_axes_cover_every_axis():
    # (ncnn itself crashes on an empty axes_expr; here it means all axes, like an empty axes array)
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    (y,) = ours("Crop", {19: "0,1,1", 20: "-233,3,-1"}, [x])
    np.testing.assert_array_equal(y, x[:, 1:3, 1:4])


def test_crop_outputs_are_windows():
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    (y,) = ours("Crop", {9: [1, 1], 10: [-1, 0], 11: [1, 2]}, [x])
    np.testing.assert_array_equal(y, x[:, 1:3, 1:])
    (y,) = ours("Crop", {0: 1, 1: 2, 3: 2, 4: -233, 5: -233}, [x])
    np.testing.assert_array_equal(y, x[:, 2:, 1:3])


# ----------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "type_name,params,inputs,n_out,match",
    [
        ("Concat", {0: 1.5}, [np.zeros((2, 3), np.float32)] * 2, None, "float literal"),
        ("Slice", {0: [1, 2]}, [np.zeros((6,), np.float32)], 3, "3 tops but 2 slices"),
        ("Slice", {0: [4, 4]}, [np.zeros((6,), np.float32)], 2, "does not fit"),
        ("Slice", {1: 5, 0: [1, 1]}, [np.zeros((2, 3), np.float32)], 2, "out of range"),
        ("Reshape", {0: 7}, [np.zeros((2, 3), np.float32)], None, "cannot reshape"),
        ("Reshape", {}, [np.zeros((2, 3), np.float32)], None, "no output shape"),
        ("Reshape", {6: "+(0w"}, [np.zeros((2, 3), np.float32)], None, "ends early"),
        ("Reshape", {6: "foo(0w)"}, [np.zeros((2, 3), np.float32)], None, "unknown operator"),
        ("Reshape", {12: 0}, [np.zeros((2, 3), np.float32)], None, "batch"),
        ("Permute", {0: 30}, [np.zeros((2, 3), np.float32)], None, "order_type"),
        ("Permute", {0: 3}, [np.zeros((2, 3), np.float32)], None, "does not exist for a 2d"),
        ("ExpandDims", {3: [0, 1]}, [np.zeros((2, 3, 4), np.float32)], None, "at most 4"),
        ("ExpandDims", {3: [0, 0]}, [np.zeros((2,), np.float32)], None, "repeated"),
        ("Crop", {0: 5, 3: -233, 4: -233}, [np.zeros((3, 4), np.float32)], None, "does not fit"),
        ("Crop", {9: [5], 10: [-233], 11: [0]}, [np.zeros((3, 4), np.float32)], None, "does not fit"),
        ("Crop", {0: 1, 1: 1}, [np.zeros((3, 4), np.float32)], None, "second bottom"),
        ("Crop", {0: 1, 3: 2}, [np.zeros((3, 4), np.float32)] * 2, None, "takes 1 bottom"),
        ("Reshape", {0: -1}, [np.zeros((3, 4), np.float32)] * 2, None, "takes 1 bottom"),
        ("Reshape", {6: "1w,-1"}, [np.zeros((3, 4), np.float32)], None, "reads 2 bottoms"),
        ("PixelShuffle", {0: 2}, [np.zeros((3, 2, 2), np.float32)], None, "fewer than"),
        ("ShuffleChannel", {0: 4}, [np.zeros((6, 2, 2), np.float32)], None, "not divisible"),
        ("CopyTo", {0: 3}, [np.zeros((4,), np.float32), np.zeros((2,), np.float32)], None, "does not fit"),
        ("CopyTo", {}, [np.zeros((4,), np.float32), np.zeros((1, 2), np.float32)], None, "another rank"),
        ("Tile", {2: [1, 1, 1, 1, 2]}, [np.zeros((4,), np.float32)], None, "at most 4"),
        ("Tile", {0: -1, 1: 2}, [np.zeros((4, 3), np.float32)], None, "negative axes are refused"),
        ("Tile", {1: 0}, [np.zeros((4,), np.float32)], None, ">= 1"),
    ],
)
def test_bad_params_and_inputs(type_name, params, inputs, n_out, match):
    with pytest.raises((ModelFormatError, KernelError, ValueError), match=match):
        sn.run_layer(type_name, params, [], inputs, n_out)


def test_weights_that_do_not_exist_are_refused():
    with pytest.raises(ModelFormatError, match="loads 0 weights"):
        sn.run_layer("Concat", {}, [np.zeros(3, np.float32)], [np.zeros((2, 3), np.float32)] * 2)


def test_bad_param_file_names_the_layer():
    text = "7767517\n3 3\nInput in 0 1 x\nInput in2 0 1 y\nConcat cat 2 1 x y z 0=1.0\n"
    with pytest.raises(ModelFormatError, match=r"param 0 \(axis\): a float literal"):
        sn.Net.from_bytes(text)
    text = '7767517\n2 2\nInput in 0 1 x\nReshape r 1 1 x y 6="neg(0w)0h"\n'
    with pytest.raises(ModelFormatError, match=r"line 4 .*Reshape.*unexpected '0h'"):
        sn.Net.from_bytes(text)


def test_text_param_expression_with_commas():
    text = '7767517\n2 2\nInput in 0 1 x\nReshape r 1 1 x y 6="-1,*(0h,2)"\n'
    net = sn.Net.from_bytes(text)
    assert net.run({"x": np.zeros((2, 4, 3), np.float32)})["y"].shape == (8, 3)
    bare = "7767517\n2 2\nInput in 0 1 x\nReshape r 1 1 x y 6=-1,*(0h,2)\n"
    with pytest.raises(ModelFormatError):  # unquoted and not starting with a letter: not a string
        sn.Net.from_bytes(bare)


def test_net_with_slice_concat_reshape():
    text = (
        "7767517\n5 6\nInput in 0 1 x\nSlice s 1 2 x a b -23300=2,-233,-233 1=0\n"
        "Concat c 2 1 b a ba 0=0\nReshape r 1 1 ba y 0=-1\nFlip f 1 1 y z 0=0\n"
    )
    net = sn.Net.from_bytes(text)
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    out = net.run({"x": x})
    np.testing.assert_array_equal(out["z"], np.concatenate([x[2:], x[:2]]).ravel()[::-1])
