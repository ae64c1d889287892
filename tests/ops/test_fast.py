"""The compiled kernels (stdops/ops/_fast.py, the optional ``fast`` extra) against their NumPy references:
the same kernel entry points with the compiled path turned off."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from stdops.ops import _fast, _fast_winoblock, _fast_winochan, conv_paths
from stdops.ops.conv import conv_forward, prepare_conv_weight

pytestmark = pytest.mark.skipif(_fast.numba is None, reason="numba (the optional 'fast' extra) is not installed")

RNG = np.random.default_rng(23)

# x shape, group, multiplier, kernel, strides, dilations, pads, clip
DEPTHWISE = [
    ((1, 6, 10, 9), 6, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), None),
    ((2, 4, 9, 8), 4, 2, (3, 3), (2, 3), (1, 1), (0, 1, 2, 0), (0.0, None)),
    ((1, 5, 11, 10), 5, 1, (3, 2), (1, 1), (2, 3), (2, 0, 1, 1), (None, 0.5)),
    ((1, 8, 15, 17), 8, 1, (5, 5), (2, 2), (1, 1), (2, 2, 2, 2), (0.0, 6.0)),
    ((1, 3, 7, 7), 3, 3, (7, 7), (1, 1), (1, 1), (3, 3, 3, 3), None),
    ((2, 16, 28, 28), 16, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (0.0, 6.0)),
    ((1, 4, 4, 5), 4, 1, (1, 1), (3, 2), (1, 1), (0, 0, 0, 0), None),
    ((1, 2, 6, 6), 2, 1, (3, 3), (1, 1), (1, 1), (0, 0, 0, 0), None),  # no padding
    ((1, 5, 9, 11), 5, 1, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (0.0, 6.0)),  # stride 2, odd width, pad 1
    ((1, 3, 40, 37), 3, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), None),  # planes larger than one chunk
    ((2, 7, 6, 6), 7, 1, (5, 5), (1, 1), (2, 2), (4, 4, 4, 4), (-1.0, 1.0)),  # small map: channels-last, dilated
    ((1, 40, 7, 7), 40, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (0.0, 6.0)),  # small map, 3 x 3 in registers
    ((1, 40, 7, 7), 40, 1, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), (0.0, 6.0)),  # small map, 5 x 5 rows in registers
    ((2, 24, 13, 12), 24, 1, (5, 5), (2, 2), (1, 1), (2, 1, 2, 2), None),  # ... stride 2, asymmetric pads
    ((2, 6, 50, 52), 6, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (0.0, 6.0)),  # 3 x 3 stride 1: wide rows into Y
    ((1, 4, 20, 53), 4, 1, (3, 3), (1, 1), (1, 1), (2, 0, 0, 1), None),  # ... asymmetric pads
    ((1, 5, 9, 8), 5, 1, (3, 3), (1, 1), (1, 1), (0, 2, 1, 0), (-0.5, None)),  # ... narrow, asymmetric
    # ops/_fast_depthwise.py: 3 x 3 stride 2 in registers (even widths split as uint64 pairs), rows of 3 or 5 taps
    ((1, 3, 34, 36), 3, 1, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (0.0, 6.0)),
    ((2, 2, 33, 35), 2, 1, (3, 3), (2, 2), (1, 1), (0, 1, 1, 0), None),  # odd width, asymmetric pads
    ((1, 2, 34, 38), 2, 1, (3, 3), (2, 2), (1, 1), (0, 0, 1, 1), (None, 0.5)),  # even width, no leading pads
    ((1, 4, 12, 11), 4, 1, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), (0.0, None)),  # 5 x 5 stride 1
    ((1, 3, 30, 28), 3, 1, (5, 5), (2, 2), (1, 1), (2, 1, 1, 2), None),  # 5 x 5 stride 2, even width
    ((1, 4, 33, 20), 4, 1, (5, 3), (2, 1), (1, 1), (2, 1, 2, 1), (-1.0, 1.0)),  # rows of 3 taps, strides 2, 1
    ((1, 2, 70, 70), 2, 1, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), None),  # planes larger than one chunk
]


@pytest.fixture
def compiled():
    prev = _fast.set_enabled(True)
    yield
    _fast.set_enabled(prev)


# ops/_fast_dwtiles.py's register tiles (float32, 3 x 3 and 5 x 5, strides 1 and 2, on AVX-512): tiles of 8 (stride
# 1) or 4 (stride 2) output rows x 16 columns, with and without the border checks
DEPTHWISE_TILES = [
    (
        (1, 3, 40, 41),
        3,
        1,
        (3, 3),
        (1, 1),
        (1, 1),
        (1, 1, 1, 1),
        (0.0, 6.0),
    ),  # tiles inside the plane and at its borders
    ((2, 2, 37, 50), 2, 1, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), None),  # stride 2, batch 2, odd height
    ((1, 3, 45, 67), 3, 1, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), (-1.0, 1.0)),  # 5 x 5, odd width
    ((1, 2, 43, 71), 2, 1, (5, 5), (2, 2), (1, 1), (2, 2, 2, 2), (0.0, None)),  # 5 x 5 stride 2, odd width
    ((1, 4, 7, 7), 4, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (0.0, 6.0)),  # fewer rows than a tile
    ((1, 3, 3, 2), 3, 1, (3, 3), (1, 1), (1, 1), (2, 3, 2, 3), None),  # pads wider than the plane
    ((1, 2, 20, 35), 2, 1, (3, 3), (2, 2), (1, 1), (0, 0, 1, 1), None),  # TF's SAME at stride 2: pads after only
    ((1, 2, 9, 19), 2, 1, (5, 5), (2, 2), (1, 1), (0, 3, 4, 1), (None, 0.5)),  # asymmetric pads
    ((1, 2, 18, 33), 2, 1, (3, 3), (1, 1), (1, 1), (0, 0, 0, 0), None),  # no padding: a 31-wide output
    ((3, 5, 14, 14), 5, 1, (5, 5), (2, 2), (1, 1), (1, 1, 2, 2), (0.0, 6.0)),  # batch 3
    # AVX2's plain stores of a part tile's rows write past the row onto outputs stored later (never past the plane):
    # 3-wide rows (a store covers the next two rows too), 7 x 7 and 14 x 14 planes (MobileNetV2's) in a batch
    ((2, 4, 6, 3), 4, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (0.0, 6.0)),
    ((1, 3, 11, 6), 3, 1, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), None),
    ((2, 6, 14, 14), 6, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (0.0, 6.0)),
    ((1, 5, 14, 14), 5, 1, (5, 5), (2, 2), (1, 1), (2, 2, 2, 2), None),
]


@pytest.mark.parametrize("xs,g,mult,k,s,d,pads,clip", DEPTHWISE + DEPTHWISE_TILES)
# (dtype, tiles): float32 with the register tiles and without them (the planar kernels, as on machines without
# AVX-512); float64 always takes the planar kernels (the tiles are float32 only)
@pytest.mark.parametrize(
    "dtype,tiles", [(np.float32, True), (np.float32, False), (np.float64, True)], ids=["f32-tiles", "f32-planar", "f64"]
)
@pytest.mark.parametrize("bias", [False, True])
def test_depthwise_compiled_matches_numpy(xs, g, mult, k, s, d, pads, clip, dtype, bias, tiles, compiled, monkeypatch):
    """Every compiled depthwise kernel against the NumPy path; ``tiles`` False: the float32 layers the register tiles
    take run on the planar kernels instead (as on machines without AVX-512)."""
    from stdops.ops import _fast_dwtiles

    if not tiles:
        monkeypatch.setattr(_fast_dwtiles, "TILES_OK", False)
    elif dtype == np.float32 and not _fast_dwtiles.TILES_OK:
        pytest.skip("the register tiles need AVX-512")
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal((g * mult, 1) + k).astype(dtype)
    b = RNG.standard_normal(g * mult).astype(dtype) if bias else None
    cw = prepare_conv_weight(w, g, s, d)
    kw = dict(strides=s, dilations=d, pads=pads, clip=clip)
    y_fast = conv_forward(x, cw, b, **kw)
    _fast.set_enabled(False)
    y_ref = conv_forward(x, prepare_conv_weight(w, g, s, d), b, **kw)
    assert y_fast.dtype == y_ref.dtype and y_fast.shape == y_ref.shape
    absb = None if b is None else np.abs(b)
    bound = conv_forward(np.abs(x), prepare_conv_weight(np.abs(w), g, s, d), absb, strides=s, dilations=d, pads=pads)
    tol = 1e-6 if dtype == np.float32 else 1e-14  # the two add the same terms in different orders
    assert np.all(np.abs(y_fast - y_ref) <= tol * np.abs(bound) + 1e-30)


def test_depthwise_compiled_non_finite(compiled):
    """inf/NaN inputs and weights: padding taps count as 0 * w (0 * inf is NaN), as in the NumPy path."""
    x = RNG.standard_normal((1, 3, 6, 7)).astype(np.float32)
    x[0, 0, 2, 3], x[0, 1, 0, 0] = np.inf, np.nan
    w = RNG.standard_normal((3, 1, 3, 3)).astype(np.float32)
    w[2, 0, 0, 0] = np.inf
    kw = dict(pads=(1, 1, 1, 1), clip=(0.0, 6.0))
    y_fast = conv_forward(x, prepare_conv_weight(w, 3), None, **kw)
    _fast.set_enabled(False)
    with np.errstate(invalid="ignore"):  # the NumPy path's GEMM meets the NaN and inf on purpose
        y_ref = conv_forward(x, prepare_conv_weight(w, 3), None, **kw)
    np.testing.assert_array_equal(np.isnan(y_fast), np.isnan(y_ref))
    np.testing.assert_allclose(y_fast, y_ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("k,s", [((3, 3), (2, 2)), ((5, 5), (1, 1)), ((3, 3), (1, 1)), ((5, 5), (2, 2))])
@pytest.mark.parametrize("tiles", [True, False])
def test_depthwise_taps_non_finite(k, s, tiles, compiled, monkeypatch):
    """The same for the register tiles (ops/_fast_dwtiles.py) and, without them, ops/_fast_depthwise.py's kernels
    (maps above the channels-last threshold): inf and NaN at the borders and inside, an infinite weight against the
    padding."""
    from stdops.ops import _fast_dwtiles

    if tiles and not _fast_dwtiles.TILES_OK:
        pytest.skip("the register tiles need AVX-512")
    if not tiles:
        monkeypatch.setattr(_fast_dwtiles, "TILES_OK", False)
    rng = np.random.default_rng(k[0] * 10 + s[0])  # its own: the module's RNG state depends on the tests run before
    x = rng.standard_normal((1, 3, 36, 34)).astype(np.float32)
    x[0, 0, 2, 3], x[0, 1, 0, 0], x[0, 2, 35, 33] = np.inf, np.nan, -np.inf
    w = rng.standard_normal((3, 1) + k).astype(np.float32)
    w[2, 0, 0, 0] = np.inf
    p = k[0] // 2
    kw = dict(strides=s, pads=(p, p, p, p), clip=(0.0, 6.0))
    y_fast = conv_forward(x, prepare_conv_weight(w, 3, s), None, **kw)
    _fast.set_enabled(False)
    with np.errstate(invalid="ignore"):
        y_ref = conv_forward(x, prepare_conv_weight(w, 3, s), None, **kw)
    np.testing.assert_array_equal(np.isnan(y_fast), np.isnan(y_ref))
    # the same products in another order: within the rounding of the sum of their magnitudes (25 products of
    # N(0, 1) values reach ~2.6e-6 apart on some seeds: a fixed 1e-6 passed or failed by the tests run before)
    finite = np.isfinite(y_ref)
    xb, wb = (np.where(np.isfinite(a), np.abs(a), 0).astype(np.float32) for a in (x, w))
    bound = conv_forward(xb, prepare_conv_weight(wb, 3, s), None, **kw | {"clip": None})
    assert np.all(np.abs(y_fast - y_ref)[finite] <= 1e-6 * bound[finite] + 1e-30)
    np.testing.assert_array_equal(y_fast[~finite], y_ref[~finite])


@pytest.mark.parametrize(
    "k,s,C,bias", [((3, 3), (1, 1), 7, True), ((5, 5), (2, 2), 6, False), ((3, 3), (2, 2), 2, True)]
)
def test_depthwise_tiles_same_bits_at_1_and_2_threads(k, s, C, bias, compiled, monkeypatch):
    """At 2 threads one sample's channels go in 2 parts (here from any size): the same bits, the bias and the
    activation on the right channels."""
    from stdops.ops import _blas, _fast_dwtiles

    if not _fast_dwtiles.TILES_OK:
        pytest.skip("the register tiles need AVX-512 or AVX2")
    monkeypatch.setattr(_fast_dwtiles, "SPLIT_TAPS", 0)
    calls: list = []
    real = _fast_dwtiles.run_parts
    monkeypatch.setattr(_fast_dwtiles, "run_parts", lambda parts, **kw: calls.append(len(parts)) or real(parts, **kw))
    rng = np.random.default_rng(C)
    x = rng.standard_normal((1, C, 19, 21)).astype(np.float32)
    w = rng.standard_normal((C, 1) + k).astype(np.float32)
    b = rng.standard_normal(C).astype(np.float32) if bias else None
    p = k[0] // 2
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(conv_forward(x, prepare_conv_weight(w, C, s), b, strides=s, pads=(p, p, p, p), clip=(0.0, 6.0)))
    assert calls == [2]
    np.testing.assert_array_equal(results[0], results[1])
    _fast.set_enabled(False)
    want = conv_forward(x, prepare_conv_weight(w, C, s), b, strides=s, pads=(p, p, p, p), clip=(0.0, 6.0))
    np.testing.assert_allclose(results[1], want, rtol=1e-5, atol=1e-5)


def test_depthwise_compiled_does_not_modify_inputs(compiled):
    x = RNG.standard_normal((1, 4, 8, 8)).astype(np.float32)
    w = RNG.standard_normal((4, 1, 3, 3)).astype(np.float32)
    xc, wc = x.copy(), w.copy()
    conv_forward(x, prepare_conv_weight(w, 4), None, pads=(1, 1, 1, 1), clip=(0.0, 1.0))
    np.testing.assert_array_equal(x, xc)
    np.testing.assert_array_equal(w, wc)


WINOGRAD = [
    ((1, 16, 28, 28), 24, (1, 1, 1, 1), None),
    ((2, 8, 13, 11), 5, (1, 1, 1, 1), (0.0, None)),  # partial tiles on both axes, batch 2
    ((1, 3, 9, 10), 4, (0, 2, 1, 0), (None, 0.25)),  # asymmetric padding
    ((1, 4, 6, 7), 3, (0, 0, 0, 0), (0.0, 6.0)),  # no padding
    ((1, 6, 5, 4), 2, (2, 1, 2, 1), None),  # more padding than a tile's overlap
    ((1, 32, 14, 14), 40, (1, 1, 1, 1), (0.0, None)),  # a ResNet layer3 shape, scaled down
    ((2, 24, 14, 14), 36, (1, 1, 1, 1), (0.0, 6.0)),  # ... batch 2 (F(2,3): rows of 7 tiles, the junk skipped)
    ((1, 2, 3, 3), 3, (1, 1, 1, 1), None),  # one partial tile per axis
    ((1, 3, 2, 1), 2, (2, 2, 2, 2), (0.0, None)),  # a 2 x 1 map, every tile mostly padding
    ((2, 5, 17, 37), 6, (1, 0, 2, 1), (-0.5, 0.5)),  # rows of 10 tiles (9 and a partial), more padding below
    # 256 input channels: F(4,3)'s products by the packed kernel too (float32; from 128 on)
    ((2, 256, 6, 28), 20, (1, 1, 1, 1), (0.0, None)),  # rows of 7 tiles (F(4,3)), batch 2
    ((1, 256, 9, 30), 33, (0, 1, 1, 0), None),  # rows of 8 tiles, asymmetric padding
]


@pytest.mark.parametrize("xs,M,pads,clip", WINOGRAD)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("tile", [4, 2])
def test_winograd_compiled_matches_numpy(xs, M, pads, clip, dtype, bias, tile, compiled, monkeypatch):
    """F(4x4, 3x3) (ops/_fast.py) and F(2x2, 3x3) (ops/_fast_wino2.py) with the compiled transforms against
    winograd.Tile.conv (NumPy), both forced (the stem and direct kernels, which take small maps and few channels
    first, turned off)."""
    import stdops.ops.conv as conv_mod
    from stdops.ops import _fast_stem, _fast_wino2

    monkeypatch.setattr(conv_mod, "choose_tile", lambda *a: tile)
    monkeypatch.setattr(_fast_stem, "USE", False)
    monkeypatch.setattr(_fast_winoblock, "USE", False)  # the blocked F(4,3) (test_fast_winoblock.py)
    monkeypatch.setattr(_fast_winochan, "USE", False)  # F(4,3), channels in the lanes (test_fast_winochan.py)
    monkeypatch.setattr(conv_paths, "_PACKED_MAX_OUT", 0)
    calls = []
    for mod, name in ((_fast, "winograd"), (_fast_wino2, "winograd2")):
        monkeypatch.setattr(mod, name, lambda *a, f=getattr(mod, name), **k: calls.append(f) or f(*a, **k))
    # an RNG of its own (the module's one gave each case the data of whatever ran before it on its xdist worker)
    rng = np.random.default_rng(zlib.crc32(repr((xs, M, pads, clip, bias, tile)).encode()))
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((M, xs[1], 3, 3)).astype(dtype)
    b = rng.standard_normal(M).astype(dtype) if bias else None
    kw = dict(pads=pads, clip=clip)
    y_fast = conv_forward(x, prepare_conv_weight(w), b, **kw)
    assert len(calls) == 1  # the compiled transforms ran
    _fast.set_enabled(False)
    y_ref = conv_forward(x, prepare_conv_weight(w), b, **kw)
    assert y_fast.dtype == y_ref.dtype and y_fast.shape == y_ref.shape
    absb = None if b is None else np.abs(b)
    bound = conv_forward(np.abs(x), prepare_conv_weight(np.abs(w)), absb, pads=pads)
    # the transforms' sums in another order; F(4,3)'s transforms amplify rounding on short sums (3 channels, partial
    # tiles: up to 1.15e-5 of the magnitude bound over 150 seeds of these cases, F(2,3) and deep sums below 2.5e-6)
    tol = 3e-5 if dtype == np.float32 else 1e-13
    assert np.all(np.abs(y_fast - y_ref) <= tol * bound + 1e-30)


@pytest.mark.parametrize(
    "xs,M,pads,dtype",
    [
        ((1, 64, 56, 56), 64, (1, 1, 1, 1), np.float32),  # ResNet's layer1 (F(4,3): products by OpenBLAS)
        ((1, 128, 28, 28), 128, (1, 1, 1, 1), np.float32),  # layer2 (F(4,3), packed products)
        ((2, 256, 14, 14), 64, (1, 1, 1, 1), np.float32),  # F(2,3) packed, rows of 7 tiles, batch 2
        ((2, 24, 23, 17), 20, (2, 1, 0, 1), np.float32),  # partial tiles, more padding above than a tile's overlap
        ((1, 130, 13, 30), 33, (0, 1, 1, 2), np.float32),  # packed, no padding above, odd tile rows
        ((1, 16, 19, 9), 8, (1, 0, 2, 1), np.float64),  # float64 (OpenBLAS)
    ],
)
@pytest.mark.parametrize("tile", [4, 2])
def test_winograd_row_parts_give_the_same_bits_at_1_and_2_threads(xs, M, pads, dtype, tile, compiled, monkeypatch):
    """F(4,3) and F(2,3) split over tile rows (each part its own transforms and products): the same bits at 1 and
    2 threads (products by OpenBLAS: in the same parts at 1 thread, one after the other), and the convolution."""
    import stdops.ops.conv as conv_mod
    from stdops.ops import _blas, _fast_stem

    monkeypatch.setattr(conv_mod, "choose_tile", lambda *a: tile)
    monkeypatch.setattr(_fast_stem, "USE", False)  # shallow layers: Winograd, not the stem kernel
    monkeypatch.setattr(_fast_winoblock, "USE", False)  # the blocked F(4,3) (test_fast_winoblock.py)
    monkeypatch.setattr(_fast_winochan, "USE", False)  # F(4,3), channels in the lanes (test_fast_winochan.py)
    monkeypatch.setattr(conv_paths, "_PACKED_MAX_OUT", 0)  # small maps: Winograd, not the direct kernel
    monkeypatch.setattr(_fast, "_ROW_SPLIT_FLOPS", 0)  # parts even for the small layers
    parts = []
    monkeypatch.setattr(_fast, "run_parts", lambda ps, f=_fast.run_parts: parts.append(len(ps)) or f(ps))
    x = RNG.standard_normal(xs).astype(dtype)
    w = RNG.standard_normal((M, xs[1], 3, 3)).astype(dtype)
    b = RNG.standard_normal(M).astype(dtype)
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(conv_forward(x, prepare_conv_weight(w), b, pads=pads, clip=(0.0, None)))
    assert parts and parts[-1] == 2  # the 2-thread run was split (Winograd ran)
    assert np.array_equal(results[0], results[1])
    _fast.set_enabled(False)
    y_ref = conv_forward(x, prepare_conv_weight(w), b, pads=pads, clip=(0.0, None))
    bound = conv_forward(np.abs(x), prepare_conv_weight(np.abs(w)), np.abs(b), pads=pads)
    tol = 1e-5 if dtype == np.float32 else 1e-13  # the transforms' sums in another order
    assert np.all(np.abs(results[1] - y_ref) <= tol * bound + 1e-30)


# x shape, M, kernel, strides, dilations, pads: the compiled im2col (ops/_fast_windows.py), float32, group 1
IM2COL = [
    ((1, 3, 40, 38), 8, (7, 7), (2, 2), (1, 1), (3, 3, 3, 3)),  # a stem
    ((1, 5, 17, 19), 6, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    ((1, 4, 12, 13), 3, (3, 2), (1, 3), (2, 1), (0, 2, 1, 0)),
    ((1, 3, 9, 9), 2, (5, 5), (3, 3), (1, 1), (0, 0, 0, 0)),
]


@pytest.mark.parametrize("xs,M,k,s,d,pads", IM2COL)
@pytest.mark.parametrize("blocks", [False, True])
def test_im2col_compiled_matches_numpy(xs, M, k, s, d, pads, blocks, compiled, monkeypatch):
    from stdops.ops import _fast_stem, _fast_windows

    monkeypatch.setattr(conv_paths, "_PACKED_MAX_OUT", 0)  # small maps take the direct kernel (tested below)
    monkeypatch.setattr(conv_paths, "_PACKED_MAX_OUT_S2", 0)  # ... and stride-2 windows on mid-sized ones
    monkeypatch.setattr(_fast_stem, "USE", False)  # the stem kernel takes these (tests/ops/test_fast_stem.py)
    monkeypatch.setattr(_fast_winoblock, "USE", False)  # the blocked F(4,3) (test_fast_winoblock.py)
    monkeypatch.setattr(_fast_winochan, "USE", False)  # F(4,3), channels in the lanes (test_fast_winochan.py)

    if blocks:  # blocks of a few output rows, the blocks as parts
        monkeypatch.setattr(_fast_windows, "_ONE_BLOCK", 0)
        monkeypatch.setattr(_fast_windows, "_BLOCK_VALUES", 3 * xs[1] * k[0] * k[1] * 4)
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal((M, xs[1]) + k).astype(np.float32)
    b = RNG.standard_normal(M).astype(np.float32)
    kw = dict(strides=s, dilations=d, pads=pads, clip=(0.0, None))
    y_fast = conv_forward(x, prepare_conv_weight(w), b, **kw)
    _fast.set_enabled(False)
    y_ref = conv_forward(x, prepare_conv_weight(w), b, **kw)
    assert y_fast.shape == y_ref.shape
    bound = conv_forward(np.abs(x), prepare_conv_weight(np.abs(w)), np.abs(b), strides=s, dilations=d, pads=pads)
    assert np.all(np.abs(y_fast - y_ref) <= 1e-6 * bound)


# x shape, M, kernel, strides, dilations, pads, clip: the compiled direct convolution (ops/_fast_conv.py), float32,
# group 1, small maps
PACKED = [
    ((1, 64, 7, 7), 64, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (0.0, None)),  # a ResNet layer4 3x3, scaled down
    ((2, 40, 9, 11), 33, (3, 3), (2, 2), (1, 1), (1, 0, 1, 2), None),  # batch 2, M and P off the tile sizes
    ((1, 300, 6, 5), 40, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (-0.5, 0.5)),  # 1x1, K past one chunk (256)
    ((1, 96, 9, 9), 70, (1, 1), (2, 2), (1, 1), (0, 0, 0, 0), None),  # a ResNet downsample
    ((1, 64, 7, 7), 40, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (0.0, None)),  # 1x1 unpadded: whole tiles only
    ((1, 3, 13, 13), 8, (7, 7), (2, 2), (1, 1), (3, 3, 3, 3), (0.0, 6.0)),  # a stem, K = 147
    ((1, 12, 10, 9), 17, (3, 2), (1, 2), (2, 1), (0, 2, 1, 0), None),  # dilated, asymmetric
    ((1, 20, 12, 10), 36, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), None),  # tiles within a row and across rows
    # rows of whole tiles (ow a multiple of 7): the inputs read in place
    ((2, 40, 14, 14), 33, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (0.0, None)),  # stride 2, batch 2, M off 32
    ((1, 24, 28, 28), 20, (3, 3), (2, 2), (1, 1), (0, 1, 1, 0), None),  # stride 2, asymmetric pads
    ((1, 30, 5, 14), 36, (3, 3), (1, 1), (1, 1), (0, 1, 0, 1), (-0.5, 0.5)),  # 3 rows of 2 tiles, no row pads
    ((1, 64, 14, 14), 48, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (0.0, 6.0)),  # few channels: no Winograd
    ((1, 8, 7, 7), 16, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2), None),  # 5 x 5
    ((1, 16, 9, 29), 40, (3, 3), (2, 2), (1, 1), (1, 0, 1, 0), None),  # stride 2, odd input sizes: 5 x 14
    ((1, 24, 56, 56), 20, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (0.0, None)),  # stride 2 on 784 outputs (ResNet's /2)
    # 1 x 1 stride 2 from 64 input channels, rows of whole tiles: read in place from the input itself
    ((1, 70, 28, 28), 24, (1, 1), (2, 2), (1, 1), (0, 0, 0, 0), (0.0, 6.0)),  # 14 x 14, M under one block
    ((2, 130, 28, 28), 40, (1, 1), (2, 2), (1, 1), (0, 0, 0, 0), None),  # batch 2, C off 16, 14 x 14
    ((1, 128, 13, 14), 33, (1, 1), (2, 2), (1, 1), (0, 0, 0, 0), (0.0, None)),  # odd height: 7 x 7
    ((1, 144, 13, 13), 20, (1, 1), (2, 2), (1, 1), (0, 0, 1, 1), (-0.5, 0.5)),  # pads after only: 7 x 7
]


@pytest.mark.parametrize("xs,M,k,s,d,pads,clip", PACKED)
@pytest.mark.parametrize("bias", [False, True])
def test_direct_packed_matches_numpy(xs, M, k, s, d, pads, clip, bias, compiled, monkeypatch):
    import stdops.ops.conv as conv_mod
    from stdops.ops import _fast_conv, _fast_pointwise, _fast_stem

    monkeypatch.setattr(_fast_stem, "USE", False)  # the stem kernel takes these (tests/ops/test_fast_stem.py)
    monkeypatch.setattr(_fast_winoblock, "USE", False)  # the blocked F(4,3) (test_fast_winoblock.py)
    monkeypatch.setattr(_fast_winochan, "USE", False)  # F(4,3), channels in the lanes (test_fast_winochan.py)
    # the 1 x 1 kernel takes 7 x 7 maps on AVX2 (its MIN_P 49: tests/ops/test_fast_pointwise.py)
    monkeypatch.setattr(_fast_pointwise, "TILES_OK", False)

    if not _fast_conv.TILES_OK:
        pytest.skip("the packed kernel needs AVX-512 or AVX2 + FMA")

    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal((M, xs[1]) + k).astype(np.float32)
    b = RNG.standard_normal(M).astype(np.float32) if bias else None
    kw = dict(strides=s, dilations=d, pads=pads, clip=clip)
    cw = prepare_conv_weight(w)
    y_fast = conv_forward(x, cw, b, **kw)
    assert cw._packed is not None  # the shape took the compiled path
    _fast.set_enabled(False)
    assert not conv_mod.direct_packed(cw, 2, y_fast.shape[2:], s, d)
    y_ref = conv_forward(x, prepare_conv_weight(w), b, **kw)
    assert y_fast.dtype == y_ref.dtype == np.float32 and y_fast.shape == y_ref.shape
    bound = conv_forward(
        np.abs(x), prepare_conv_weight(np.abs(w)), None if b is None else np.abs(b), **kw | {"clip": None}
    )
    assert np.all(np.abs(y_fast - y_ref) <= 1e-6 * bound + 1e-30)  # the same products, summed in another order


@pytest.mark.parametrize("xs,M,pads", [((1, 256, 7, 7), 128, (1, 1, 1, 1)), ((2, 128, 14, 14), 128, (1, 1, 1, 1))])
def test_packed_paths_give_the_same_bits_at_1_and_2_threads(xs, M, pads, compiled, monkeypatch):
    """The direct kernel (7 x 7) and F(2,3)'s products (14 x 14, batch 2: tile rows skipping their junk column)
    split in parts over channels / tile positions when the caller has 2 threads: every output the same sum either
    way."""
    from stdops.ops import _blas, _fast_conv

    if not _fast_conv.TILES_OK:
        pytest.skip("the packed kernel needs AVX-512 or AVX2 + FMA")
    monkeypatch.setattr(_fast_conv, "_SPLIT_FLOPS", 0)  # parts even for these small layers
    monkeypatch.setattr(_fast_winochan, "USE", False)  # F(4,3) in lanes takes 128 @14 first (no parts)
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal((M, xs[1], 3, 3)).astype(np.float32)
    b = RNG.standard_normal(M).astype(np.float32)
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        cw = prepare_conv_weight(w)
        results.append(conv_forward(x, cw, b, pads=pads, clip=(0.0, None)))
        assert (("packed", 2) in cw._wino) == (xs[2] == 14)  # 14 x 14: F(2,3) on the packed kernel
    assert np.array_equal(results[0], results[1])


@pytest.mark.parametrize("xs,M,k,s,pads", [(xs, M, k, s, p) for xs, M, k, s, d, p, _ in PACKED if d == (1, 1)])
def test_direct_packed_in_place_reads_give_the_gathered_bits(xs, M, k, s, pads, compiled, monkeypatch):
    """Rows of whole tiles read the inputs in place (a table of tap offsets), the others gather them into tiles:
    the same products in the same order, so the same bits; a shape with ow a multiple of 7 takes the first."""
    from stdops.ops import _fast_conv

    if not _fast_conv.TILES_OK:
        pytest.skip("the packed kernel needs AVX-512 or AVX2 + FMA")
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal((M, xs[1]) + k).astype(np.float32).reshape(M, -1)
    b = RNG.standard_normal(M).astype(np.float32)
    wp = _fast_conv.pack_weight(w)
    from stdops.ops._window import geometry

    geo = geometry(xs[2:], k, s, (1, 1), pads, "NOTSET")
    calls, plane = [], []
    monkeypatch.setattr(_fast_conv, "_taps_layout", lambda *a, f=_fast_conv._taps_layout: calls.append(a) or f(*a))
    monkeypatch.setattr(_fast_conv, "_plane_layout", lambda *a, f=_fast_conv._plane_layout: plane.append(a) or f(*a))
    args = (x, wp, M, k, s, (1, 1), geo.begin, geo.out, b, (0.0, None))
    y_in_place = _fast_conv.conv2d_packed(*args)
    flat = k == (1, 1) and s == (1, 1) and not any(pads)  # 1 x 1 on the input itself: neither
    # 1 x 1 stride 2, unpadded before: the input itself (no copy)
    pointwise = k == (1, 1) and s == (2, 2) and geo.begin == (0, 0) and geo.out[1] % 7 == 0
    assert bool(plane) == pointwise
    assert bool(calls) == (not flat and not pointwise and geo.out[1] % 7 == 0 and s[0] == s[1] and s[0] in (1, 2))
    monkeypatch.setattr(_fast_conv, "_IN_PLACE", False)
    assert np.array_equal(y_in_place, _fast_conv.conv2d_packed(*args))


def test_direct_packed_propagates_nan_and_keeps_inputs(compiled):
    x = RNG.standard_normal((1, 16, 5, 5)).astype(np.float32)
    x[0, 3, 2, 2] = np.nan
    w = RNG.standard_normal((8, 16, 3, 3)).astype(np.float32)
    xc, wc = x.copy(), w.copy()
    y = conv_forward(x, prepare_conv_weight(w), None, pads=(1, 1, 1, 1), clip=(0.0, 1.0))
    assert np.isnan(y[0, :, 1:4, 1:4]).all() and not np.isnan(y[0, :, 0, 0]).any()  # NaN reaches its 3 x 3 window
    np.testing.assert_array_equal(x, xc)
    np.testing.assert_array_equal(w, wc)


# x shape, kernel, strides, dilations, pads, ceil_mode
MAXPOOL = [
    ((1, 6, 17, 16), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 0),
    ((2, 3, 9, 11), (2, 3), (1, 2), (2, 1), (0, 1, 1, 0), 1),
    ((1, 2, 10, 10), (3, 3), (3, 3), (1, 1), (0, 0, 0, 0), 1),
    ((1, 4, 7, 5), (1, 1), (2, 1), (1, 1), (0, 0, 0, 0), 0),
    ((1, 3, 15, 13), (3, 3), (2, 2), (1, 1), (0, 1, 1, 0), 1),  # 3 wide at stride 2 (separable), odd, ceil
    ((2, 2, 9, 12), (5, 3), (1, 2), (1, 1), (2, 1, 2, 1), 0),  # ... kh 5 at row stride 1
    ((1, 2, 5, 6), (3, 3), (2, 2), (1, 1), (3, 0, 3, 1), 1),  # ... rows of windows in the padding only
    ((2, 3, 21, 75), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 0),  # ... rows of 5 vectors and a part, 38 outputs
    ((1, 2, 12, 34), (2, 3), (2, 2), (1, 1), (0, 0, 1, 1), 1),  # ... 2-row windows, 17 outputs (one lane over)
]


@pytest.mark.parametrize("xs,k,s,d,pads,ceil", MAXPOOL)
def test_max_pool_compiled_matches_numpy(xs, k, s, d, pads, ceil, compiled):
    from stdops.ops.pool import max_pool_values

    x = RNG.standard_normal(xs).astype(np.float32)
    x.reshape(-1)[::7] = np.nan
    x.reshape(-1)[::11] = np.inf
    x.reshape(-1)[::13] = -np.inf
    kw = dict(kernel_shape=k, strides=s, dilations=d, pads=pads, ceil_mode=ceil)
    y_fast = max_pool_values(x, **kw)
    _fast.set_enabled(False)
    y_ref = max_pool_values(x, **kw)
    np.testing.assert_array_equal(y_fast, y_ref)  # a maximum is exact


@pytest.mark.parametrize(
    "xs,k,s,pads",
    [
        ((1, 64, 112, 112), (3, 3), (2, 2), (1, 1, 1, 1)),  # ResNet's
        ((2, 5, 17, 14), (3, 3), (2, 2), (0, 1, 2, 1)),  # odd rows, batch 2, asymmetric padding
        ((1, 3, 21, 40), (2, 3), (3, 2), (1, 0, 1, 1)),  # 2-row windows, row stride 3
    ],
)
def test_max_pool_row_parts_give_the_same_bits_at_1_and_2_threads(xs, k, s, pads, compiled, monkeypatch):
    """3-wide / 2 max pooling split over output rows at 2 threads: the same maxima (NaN included) as at 1 thread
    and as NumPy's."""
    from stdops.ops import _blas, _fast_windows
    from stdops.ops.pool import max_pool_values

    monkeypatch.setattr(_fast_windows, "_POOL_SPLIT_VALUES", 0)
    parts = []
    monkeypatch.setattr(
        _fast_windows, "run_parts", lambda ps, f=_fast_windows.run_parts: parts.append(len(ps)) or f(ps)
    )
    x = RNG.standard_normal(xs).astype(np.float32)
    x.reshape(-1)[::7] = np.nan
    x.reshape(-1)[::13] = -np.inf
    kw = dict(kernel_shape=k, strides=s, pads=pads)
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(max_pool_values(x, **kw))
    assert parts == [2]
    np.testing.assert_array_equal(results[0], results[1])
    _fast.set_enabled(False)
    np.testing.assert_array_equal(results[1], max_pool_values(x, **kw))


@pytest.mark.skipif(_fast.numba is None, reason="numba (the optional 'fast' extra) is not installed")
@pytest.mark.parametrize(
    "P,H,W,kh,sh,pt,pl",
    [
        (4, 112, 112, 3, 2, 1, 1),
        (3, 17, 23, 3, 2, 1, 0),
        (2, 9, 8, 2, 1, 0, 1),
        (3, 30, 31, 3, 3, 2, 1),
        (2, 5, 40, 1, 1, 0, 0),
        (2, 6, 35, 3, 2, 4, 2),
    ],
)
def test_max_pool_3_wide_vector_rows_equal_the_loops_bit_for_bit(P, H, W, kh, sh, pt, pl):
    """The 16-lane 3 x 3 / 2 kernel (_maxpool_w3s2_lanes) against the loops it replaces on AVX-512: the same
    maxima in the same order, so the same bits (NaN payloads, the sign of a zero)."""
    from stdops.ops._fast_windows import _maxpool_w3s2, _maxpool_w3s2_lanes

    x = RNG.standard_normal((P, H, W)).astype(np.float32)
    x.reshape(-1)[5::97] = np.nan
    x.reshape(-1)[9::89] = np.float32(np.nan) * -1  # another payload (the sign bit)
    x.reshape(-1)[7::13] = -0.0
    x.reshape(-1)[3::17] = 0.0
    oh, ow = (H + 2 * pt - kh) // sh + 1, (W + 2 * pl - 3) // 2 + 1
    y1, y2 = np.empty((P, oh, ow), np.float32), np.full((P, oh, ow), 7.0, np.float32)
    _maxpool_w3s2(x, kh, sh, pt, pl, y1)
    _maxpool_w3s2_lanes(x, kh, sh, pt, pl, y2)
    np.testing.assert_array_equal(y1.view(np.uint32), y2.view(np.uint32))


# T, B, I, H, direction, initial states
LSTM = [
    (7, 1, 5, 4, "forward", False),
    (6, 3, 4, 8, "bidirectional", True),
    (5, 2, 3, 6, "reverse", True),
    (1, 1, 16, 33, "forward", True),
]


@pytest.mark.parametrize("T,B,I,H,direction,states", LSTM)
def test_lstm_compiled_loop_matches_numpy(T, B, I, H, direction, states, compiled):
    """The compiled LSTM time loop (ops/_fast_rnn.py) against the NumPy loop on the shared cells."""
    from stdops.ops.rnn import lstm

    D = 2 if direction == "bidirectional" else 1
    x = RNG.standard_normal((T, B, I)).astype(np.float32)
    w = (RNG.standard_normal((D, 4 * H, I)) * 0.5).astype(np.float32)
    r = (RNG.standard_normal((D, 4 * H, H)) * 0.5).astype(np.float32)
    b = RNG.standard_normal((D, 8 * H)).astype(np.float32)
    h0 = RNG.standard_normal((D, B, H)).astype(np.float32) if states else None
    c0 = RNG.standard_normal((D, B, H)).astype(np.float32) if states else None
    got = lstm(x, w, r, b, None, h0, c0, direction=direction)
    _fast.set_enabled(False)
    want = lstm(x, w, r, b, None, h0, c0, direction=direction)
    for g, e in zip(got, want):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_row_steps_compiled_match_their_kernels(compiled):
    """softmax_rows and layer_norm_rows (ops/fused.py, compiled per row) against Softmax and LayerNormalization."""
    from stdops.ops.activation import softmax
    from stdops.ops.bind import bind
    from stdops.ops.fused import layer_norm_rows, softmax_rows
    from stdops.ops.norm import layer_normalization

    x = (RNG.standard_normal((3, 5, 37)) * 20).astype(np.float32)
    x[0, 0, 3], x[0, 1, :] = np.nan, -np.inf
    x[1, 2, 7] = np.inf
    x[1, 3, 5] = x[2, 0, 36] = -np.inf  # a -inf among finite values: 0 there, the row finite
    with np.errstate(invalid="ignore"):
        got = bind(softmax_rows, {"axis": -1}).fn(x)
        want = softmax(x, axis=-1)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    for rows, length in ((7, 128), (3, 16), (2, 1), (5, 200)):  # lengths around the 16 partial sums
        z = (RNG.standard_normal((rows, length)) * 5).astype(np.float32)
        np.testing.assert_allclose(bind(softmax_rows, {"axis": -1}).fn(z), softmax(z, axis=-1), rtol=2e-6, atol=1e-7)
    y = RNG.standard_normal((4, 6, 33)).astype(np.float32) * 3 + 1
    s, b = RNG.standard_normal(33).astype(np.float32), RNG.standard_normal(33).astype(np.float32)
    for bias in (b, None):
        step = bind(layer_norm_rows, {"epsilon": 1e-3}, (None, s, bias))
        assert step.prepared
        got = step.fn(y, s, bias)
        want = layer_normalization(y, s, bias, epsilon=1e-3)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("params", [(2**0.5, 1.0), (0.5**0.5, 0.0)], ids=["divides", "multiplies"])
def test_gelu_epilogue_matches_the_erf_chain(params, compiled):
    """The compiled erf GELU (a rational erf, ops/_fast_epilogue.py) against the exported chain through the
    kernels (Div or Mul, Erf, Add, Mul, Mul): the whole float32 range, the bias per column, NaN and infinities."""
    from stdops.ops import _fast_epilogue
    from stdops.ops.fused import Activation

    act = Activation("gelu", params)
    x = np.linspace(-12, 12, 200_001, dtype=np.float32)
    x = np.concatenate([x, [np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38, -3e38, 1e-30, -1e-30]]).astype(np.float32)
    x = np.concatenate([x, np.zeros(-x.size % 96, np.float32)]).reshape(-1, 96)
    b = (RNG.standard_normal(96) * 2).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        want = act.reference(x + b)
        got = _fast_epilogue.epilogue(x.copy(), b, act.code(), None, (0, 0.0, 0.0), -1)
    assert got.dtype == np.float32
    assert np.array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    assert np.array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    # the Erf kernel is within 1.3e-7 of the exact GELU relative to max(1, |x|); the rational within 2.4e-7
    err = np.abs(got[fin].astype(np.float64) - want[fin]) / np.maximum(1.0, np.abs((x + b)[fin]))
    assert err.max() < 4e-7


def test_softmax_rows_scale_and_a_leading_nan(compiled):
    """softmax_rows(X, scale=s) (the attention scale the optimizer moves into the step) against Softmax of the
    Mul; a NaN first in its row (the maximum's starting value) or later makes the row NaN, as in the kernel."""
    from stdops.ops.activation import softmax
    from stdops.ops.bind import bind
    from stdops.ops.elementwise import mul
    from stdops.ops.fused import softmax_rows

    x = (RNG.standard_normal((2, 6, 131)) * 4).astype(np.float32)
    x[0, 0, 0] = x[1, 2, 77] = np.nan
    x[1, 3, 4] = -np.inf
    for s in (0.125, 0.3535534, 1.0, 3.0):
        with np.errstate(invalid="ignore"):
            got = bind(softmax_rows, {"axis": -1, "scale": s}).fn(x)
            want = softmax(mul(x, np.array(s, np.float32)), axis=-1)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert np.isnan(got[0, 0]).all() and np.isnan(got[1, 2]).all() and got[1, 3, 4] == 0.0
        # s (x - max) and s x - s max round apart by an ulp of the logits (here up to ~50): exp's relative error
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    "shape,code,residual,bias_axis",
    [((1, 7, 23, 29), "silu", False, 1), ((3, 5, 17, 19), "sigmoid", True, 1), ((37, 53), "silu", True, -1)],
)
def test_epilogue_same_bits_at_1_and_2_threads(shape, code, residual, bias_axis, compiled, monkeypatch):
    """At 2 threads an epilogue with an exp goes in 2 parts over its rows (here from any size, the cut mid-sample):
    the same bits, each row its channel's bias."""
    from stdops.ops import _blas, _fast_epilogue
    from stdops.ops.fused import Activation

    monkeypatch.setattr(_fast_epilogue, "SPLIT_VALUES", 0)
    calls: list = []
    real = _blas.run_parts
    monkeypatch.setattr(_blas, "run_parts", lambda parts, **kw: calls.append(len(parts)) or real(parts, **kw))
    rng = np.random.default_rng(len(shape))
    y = (rng.standard_normal(shape) * 4).astype(np.float32)
    b = rng.standard_normal(shape[1] if bias_axis == 1 else shape[-1]).astype(np.float32)
    r = rng.standard_normal(shape).astype(np.float32) if residual else None
    act = Activation(code, ()).code()
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(_fast_epilogue.epilogue(y.copy(), b, act, r, (0, 0.0, 0.0), bias_axis))
    assert calls == [2]
    np.testing.assert_array_equal(results[0], results[1])
    pre = y + (b.reshape((1, -1) + (1,) * (len(shape) - 2)) if bias_axis == 1 else b)
    want = Activation(code, ()).reference(pre) + (r if residual else 0)
    np.testing.assert_allclose(results[1], want, rtol=1e-5, atol=1e-6)
