"""The compiled stem convolution (stdops/ops/_fast_stem.py) against the NumPy im2col reference (conv.py with the
compiled path turned off), through the same entry point, conv_forward."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ops import _fast, _fast_conv, _fast_stem, _fast_winochan
from stdops.ops.conv import conv_forward, prepare_conv_weight

pytestmark = [
    pytest.mark.skipif(_fast.numba is None, reason="numba (the optional 'fast' extra) is not installed"),
    pytest.mark.skipif(not _fast_stem.TILES_OK, reason="the stem kernel's register tiles need AVX-512 or AVX2"),
]

RNG = np.random.default_rng(31)

_AVX512_ONLY = pytest.mark.skipif(not _fast_conv.AVX512, reason="the AVX-512 limits (AVX2 has its own)")
_AVX2_ONLY = pytest.mark.skipif(_fast_conv.AVX512, reason="the AVX2 limits (AVX-512 has its own)")

# x shape, M, kernel, strides, pads (top, left, bottom, right)
STEMS = [
    ((1, 3, 40, 38), 64, (7, 7), (2, 2), (3, 3, 3, 3)),  # ResNet's stem, scaled down: ow 19 (one full vector + 3)
    ((1, 3, 36, 36), 16, (3, 3), (2, 2), (1, 1, 1, 1)),  # MobileNet's
    ((2, 3, 33, 35), 24, (3, 3), (2, 2), (0, 1, 1, 0)),  # batch 2, odd sizes, asymmetric pads (TF SAME-style)
    ((1, 3, 30, 70), 13, (3, 3), (1, 1), (1, 1, 1, 1)),  # stride 1, M off the 8-channel blocks, ow 70
    ((1, 1, 9, 5), 3, (3, 3), (1, 1), (2, 0, 1, 2)),  # one channel, M below one block, ow 5 < 16
    ((1, 4, 17, 47), 8, (5, 5), (2, 1), (2, 1, 0, 2)),  # mixed strides, 5 x 5
    ((1, 3, 21, 34), 5, (7, 3), (1, 2), (3, 1, 3, 1)),  # rectangular kernel, mixed strides the other way
    ((3, 2, 12, 32), 9, (3, 3), (2, 2), (0, 0, 0, 0)),  # unpadded, ow 15 (one vector, a lane short), batch 3
    ((1, 17, 10, 13), 10, (3, 3), (1, 1), (1, 1, 1, 1)),  # K = 153, near STEM_MAX_K, ow 13
    ((1, 3, 224, 224), 16, (3, 3), (2, 2), (1, 1, 1, 1)),  # the real MobileNetV3 stem (112 = 7 vectors)
    ((1, 1, 6, 6), 2, (7, 7), (2, 2), (3, 3, 3, 3)),  # a map smaller than the kernel, 3 x 3 outputs (K 49)
    ((1, 2, 11, 13), 4, (5, 5), (2, 2), (2, 2, 1, 2)),  # even left padding at stride 2, odd width
    ((1, 3, 12, 14), 6, (3, 3), (1, 1), (0, 0, 0, 0)),  # stride 1 unpadded
    ((2, 5, 13, 20), 9, (3, 3), (1, 1), (2, 1, 0, 2)),  # batch 2 at column stride 1 (the padding zeroed once)
    ((3, 3, 15, 18), 7, (5, 3), (2, 1), (1, 2, 2, 0)),  # ... row stride 2, batch 3
    # deeper sums (DEEP): stride 1 on at most 784 / 196 outputs, stride 2
    ((1, 32, 20, 21), 16, (3, 3), (1, 1), (1, 1, 1, 1)),  # K 288 on 20 x 21 (AVX2: STEM_MAX_K)
    pytest.param(  # K 900 at stride 2 on 15 x 15 outputs (AVX2's DEEP only)
        (1, 100, 29, 30), 12, (3, 3), (2, 2), (1, 1, 1, 1), marks=_AVX2_ONLY
    ),
    ((1, 64, 14, 14), 20, (3, 3), (1, 1), (1, 1, 1, 1)),  # K 576 on 14 x 14
    ((2, 40, 27, 27), 24, (3, 3), (2, 2), (1, 0, 1, 1)),  # K 360 at stride 2 (14 x 13 outputs)
]


@pytest.fixture
def compiled():
    prev = _fast.set_enabled(True)
    yield
    _fast.set_enabled(prev)


def y_shape(xs, k, s, pads):
    return tuple((xs[2 + i] + pads[i] + pads[2 + i] - k[i]) // s[i] + 1 for i in range(2))


def _reference(x, w, b, kw, group=1):
    prev = _fast.set_enabled(False)
    try:
        return conv_forward(x, prepare_conv_weight(w, group), b, **kw)
    finally:
        _fast.set_enabled(prev)


@pytest.mark.parametrize("xs,M,k,s,pads", STEMS)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("clip", [None, (0.0, 6.0), (None, 0.25)])
def test_stem_matches_numpy(xs, M, k, s, pads, bias, clip, compiled, monkeypatch):
    monkeypatch.setattr(_fast_winochan, "USE", False)  # conv.py's first choice for some of these (3x3 stride 1)
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal((M, xs[1]) + k).astype(np.float32)
    b = RNG.standard_normal(M).astype(np.float32) if bias else None
    kw = dict(strides=s, pads=pads, clip=clip)
    cw = prepare_conv_weight(w)
    assert _fast_stem.takes(cw, 2, y_shape(xs, k, s, pads), s, (1, 1))
    y = conv_forward(x, cw, b, **kw)
    assert cw._stem is not None  # the shape took the stem path
    ref = _reference(x, w, b, kw)
    assert y.dtype == ref.dtype == np.float32 and y.shape == ref.shape
    bound = _reference(np.abs(x), np.abs(w), None if b is None else np.abs(b), kw | {"clip": None})
    assert np.all(np.abs(y - ref) <= 1e-6 * bound + 1e-30)  # the same products, summed in another order


def test_stem_parts_give_the_same_bits_at_1_and_2_threads(compiled, monkeypatch):
    """Split in 2 parts over output rows when the caller has 2 threads: every output the same sum either way."""
    from stdops.ops import _blas

    monkeypatch.setattr(_fast_stem, "_SPLIT_FLOPS", 0)  # parts even for this small layer
    x = RNG.standard_normal((2, 3, 45, 41)).astype(np.float32)
    w = RNG.standard_normal((20, 3, 7, 7)).astype(np.float32)
    b = RNG.standard_normal(20).astype(np.float32)
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(conv_forward(x, prepare_conv_weight(w), b, strides=(2, 2), pads=(3, 3, 3, 3), clip=(0.0, None)))
    assert np.array_equal(results[0], results[1])
    bound = _reference(np.abs(x), np.abs(w), np.abs(b), dict(strides=(2, 2), pads=(3, 3, 3, 3)))
    ref = _reference(x, w, b, dict(strides=(2, 2), pads=(3, 3, 3, 3), clip=(0.0, None)))
    assert np.all(np.abs(results[1] - ref) <= 1e-6 * bound)


def test_stem_propagates_nan_through_clip_and_keeps_inputs(compiled):
    x = RNG.standard_normal((1, 3, 20, 20)).astype(np.float32)
    x[0, 1, 7, 9] = np.nan
    x[0, 2, 0, 0] = np.inf
    w = RNG.standard_normal((8, 3, 3, 3)).astype(np.float32)
    xc, wc = x.copy(), w.copy()
    cw = prepare_conv_weight(w)
    y = conv_forward(x, cw, None, pads=(1, 1, 1, 1), clip=(0.0, 1.0))
    assert cw._stem is not None
    assert np.isnan(y[0, :, 6:9, 8:11]).all()  # NaN reaches its 3 x 3 window and the clip keeps it
    with np.errstate(invalid="ignore"):
        ref = _reference(x, w, None, dict(pads=(1, 1, 1, 1), clip=(0.0, 1.0)))
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
    with np.errstate(invalid="ignore"):
        bound = _reference(np.abs(x), np.abs(w), None, dict(pads=(1, 1, 1, 1)))
    num = ~np.isnan(ref)  # the same products summed in another order: within the sum of their magnitudes
    assert np.all(np.abs(y - ref)[num] <= 1e-6 * bound[num] + 1e-30)
    np.testing.assert_array_equal(x, xc)
    np.testing.assert_array_equal(w, wc)


# x shape, M, groups, strides: RegNetY's 8-channel groups (stride 2 on 56-wide rows; 7 x 7 maps, narrower than
# _MIN_WIDTH), groups of fewer outputs than a channel block, of two blocks, batch 2, 5 x 5
GROUPED = [
    ((1, 48, 30, 28), 48, 6, (2, 2), (3, 3)),
    ((1, 440, 7, 7), 440, 55, (1, 1), (3, 3)),
    ((2, 24, 9, 11), 12, 3, (1, 1), (3, 3)),
    ((1, 16, 10, 10), 32, 2, (2, 2), (3, 3)),
    ((1, 12, 13, 17), 18, 3, (1, 2), (5, 5)),
]


@pytest.mark.parametrize("xs,M,G,s,k", GROUPED)
@pytest.mark.parametrize("bias", [False, True])
def test_grouped_stem_matches_numpy(xs, M, G, s, k, bias, compiled):
    """A grouped convolution (more than one channel a group) through the stem's tiles, group by group."""
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal((M, xs[1] // G) + k).astype(np.float32)
    b = RNG.standard_normal(M).astype(np.float32) if bias else None
    pads = (k[0] // 2, k[1] // 2) * 2
    kw = dict(strides=s, pads=pads, clip=(0.0, 6.0))
    cw = prepare_conv_weight(w, G)
    y = conv_forward(x, cw, b, **kw)
    assert cw._stem is not None  # the shape took the stem path
    ref = _reference(x, w, b, kw, G)
    assert y.dtype == ref.dtype == np.float32 and y.shape == ref.shape
    bound = _reference(np.abs(x), np.abs(w), None if b is None else np.abs(b), kw | {"clip": None}, G)
    assert np.all(np.abs(y - ref) <= 1e-6 * bound + 1e-30)


@pytest.mark.parametrize(
    "w_shape,strides,dilations,group,dtype",
    [
        ((8, 3, 3, 3), (3, 3), (1, 1), 1, np.float32),  # stride 3
        ((8, 3, 3, 3), (1, 1), (2, 2), 1, np.float32),  # dilated
        pytest.param(  # K = 180 > STEM_MAX_K, rows of 10 (AVX2: DEEP's 196 outputs at any width)
            (8, 20, 3, 3), (1, 1), (1, 1), 1, np.float32, marks=_AVX512_ONLY
        ),
        ((8, 3, 3, 3), (2, 2), (1, 1), 1, np.float64),  # float64
        ((8, 1, 3, 3), (2, 2), (1, 1), 8, np.float32),  # depthwise (one channel a group: its own kernels)
        ((8, 3, 1, 1), (1, 1), (1, 1), 1, np.float32),  # 1 x 1
        pytest.param(  # K = 72 on rows of 10: the packed kernel's (AVX-512; AVX2 has no packed kernel: any width)
            (8, 8, 3, 3), (1, 1), (1, 1), 1, np.float32, marks=_AVX512_ONLY
        ),
    ],
)
def test_stem_declines_what_it_does_not_take(w_shape, strides, dilations, group, dtype, compiled):
    w = RNG.standard_normal(w_shape).astype(dtype)
    cw = prepare_conv_weight(w, group)
    x = RNG.standard_normal((1, w_shape[1] * group, 10, 10)).astype(dtype)
    p = w_shape[2] // 2
    out = tuple((10 + 2 * p - (w_shape[2] - 1) * d - 1) // s + 1 for s, d in zip(strides, dilations))
    assert not _fast_stem.takes(cw, 2, out, strides, dilations)
    conv_forward(x, cw, None, strides=strides, dilations=dilations, pads=(p,) * 4)
    assert cw._stem is None


@pytest.mark.parametrize(
    "C,out,strides,on_avx512,on_avx2",
    [
        (17, (56, 56), (1, 1), True, True),  # K 153 <= STEM_MAX_K: any map
        (18, (56, 56), (1, 1), False, True),  # K 162 on more than 784 outputs (AVX2: STEM_MAX_K 288)
        (32, (56, 56), (1, 1), False, True),  # K 288
        (33, (56, 56), (1, 1), False, False),
        (48, (28, 28), (1, 1), True, False),  # K 432 on 784 (AVX-512's DEEP only)
        (49, (28, 28), (1, 1), False, False),
        (64, (14, 14), (1, 1), True, True),  # K 576 on 196
        (65, (14, 14), (1, 1), False, False),
        (64, (14, 14), (2, 2), True, True),  # stride 2: K 576 on 196
        (65, (14, 14), (2, 2), False, True),  # (AVX2: K 1152 on 784)
        (128, (14, 14), (2, 2), False, True),
        (129, (14, 14), (2, 2), False, False),
        (64, (28, 28), (2, 2), False, True),  # AVX-512: the packed direct kernel (conv_paths.py _PACKED_MAX_OUT_S2)
        (64, (28, 29), (2, 2), False, False),
        (40, (28, 28), (2, 1), False, False),  # mixed strides: STEM_MAX_K only
    ],
)
def test_stem_depth_limits(C, out, strides, on_avx512, on_avx2, compiled):
    cw = prepare_conv_weight(np.ones((8, C, 3, 3), np.float32))
    assert _fast_stem.takes(cw, 2, out, strides, (1, 1)) is (on_avx512 if _fast_conv.AVX512 else on_avx2)


def test_stem_off_with_the_compiled_path():
    prev = _fast.set_enabled(False)
    try:
        w = np.ones((8, 3, 3, 3), np.float32)
        assert not _fast_stem.takes(prepare_conv_weight(w), 2, (16, 16), (2, 2), (1, 1))
    finally:
        _fast.set_enabled(prev)
