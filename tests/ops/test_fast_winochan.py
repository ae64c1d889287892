"""The channels-in-lanes Winograd F(4x4, 3x3) (stdops/ops/_fast_winochan.py) against the NumPy F(4,3)
(winograd.Tile.conv) and the direct sum: maps not multiples of the 4 x 4 tiles, pads (asymmetric, none, larger
than 1), channel counts not multiples of 16, every register tile and its smaller tail tiles, blocks of tiles, bias
and clip, N > 1; the conv.py hook against the paths it replaces; an output's bits independent of its tile's block
and register tile."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ops import _fast, _fast_winoblock, _fast_winochan
from stdops.ops.conv import prepare_conv_weight
from stdops.ops.winograd import TILES

from .winograd_checks import check_conv_hook, check_nan_stays_in_its_tile, direct

pytestmark = pytest.mark.skipif(
    _fast.numba is None or not _fast_winochan.PACKED_OK, reason="needs numba and an AVX-512 machine"
)

RNG = np.random.default_rng(47)


# x shape, M, begin, out, clip: NR 1 (M 16, 32, maps of under 6 tiles), 3 (48), 4 (64, 128); tiles per sample from 1
# to 196, the tail register tiles (16 tiles at NR 4: 6 + 6 + 3 + 1), several blocks of tiles (64 @56: 196 tiles, blocks
# of 20)
SHAPES = [
    ((1, 16, 56, 56), 16, (1, 1), (56, 56), (0.0, None)),
    ((2, 20, 9, 11), 24, (1, 1), (9, 11), None),  # N > 1, odd sizes, channels past a vector
    ((1, 17, 13, 30), 40, (1, 0), (13, 28), (None, 0.5)),  # asymmetric padding
    ((1, 32, 28, 28), 32, (1, 1), (28, 28), (0.0, 6.0)),
    ((1, 48, 20, 20), 48, (1, 1), (20, 20), None),
    ((1, 64, 14, 14), 64, (1, 1), (14, 14), None),
    ((1, 64, 7, 7), 64, (1, 1), (7, 7), (0.0, None)),
    ((1, 64, 56, 56), 64, (1, 1), (56, 56), None),
    ((1, 16, 6, 6), 20, (0, 0), (4, 4), None),  # no padding, one tile
    ((1, 16, 10, 12), 16, (2, 3), (12, 14), None),  # pads of 2 and 3: zero rows and columns of their own
    ((3, 128, 5, 6), 128, (1, 1), (5, 6), None),
]


@pytest.mark.parametrize("xs,M,begin,out,clip", SHAPES)
@pytest.mark.parametrize("bias", [True, False])
def test_winochan_matches_numpy_f4_anddirect(xs, M, begin, out, clip, bias):
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal((M, xs[1], 3, 3)).astype(np.float32)
    b = RNG.standard_normal(M).astype(np.float32) if bias else None
    U = TILES[4].transform_weight(w, np.float32)
    y = _fast_winochan.winochan(x, _fast_winochan.pack(U), M, b, begin, out, clip)
    assert y.dtype == np.float32 and y.shape == (xs[0], M) + out
    bound = direct(np.abs(x), np.abs(w), None if b is None else np.abs(b), begin, out)
    # F(4,3)'s error within the suites' bound; an output's error scales with its whole 6 x 6 tile, so windows of
    # padding alone (pads of 2 and 3) are 0 within a rounding of their tile's neighbours
    tol = 1e-5 * bound + 1e-6 * bound.max()
    d = direct(x, w, b, begin, out)
    if clip is not None:
        d = np.clip(d, clip[0], clip[1])
    assert np.all(np.abs(y - d) <= tol)
    if max(begin) <= 1:  # the NumPy F(4,3) pads by at most what its tiles need
        ref = TILES[4].conv(x, U, begin, out)
        if b is not None:
            ref = ref + b[None, :, None, None]
        if clip is not None:
            ref = np.clip(ref, clip[0], clip[1])
        assert np.all(np.abs(y - ref) <= tol)


def test_winochan_bits_independent_of_block_and_register_tile():
    """A tile's outputs are the same sum whichever block of tiles, register tile (6, 3 or 1 tiles at NR 4) and lane it
    is in: the map shifted by whole tiles (4 rows) moves every tile to another block and register tile, and the
    outputs the two maps share are the same bits."""
    x = RNG.standard_normal((1, 64, 60, 36)).astype(np.float32)
    w = RNG.standard_normal((64, 64, 3, 3)).astype(np.float32)
    up = _fast_winochan.pack(TILES[4].transform_weight(w, np.float32))
    y = _fast_winochan.winochan(x, up, 64, None, (0, 0), (58, 34))
    ys = _fast_winochan.winochan(x[:, :, 4:], up, 64, None, (0, 0), (54, 34))
    np.testing.assert_array_equal(y[:, :, 4:], ys)


def test_winochan_nan_inf_propagate():
    check_nan_stays_in_its_tile(RNG, _fast_winochan.pack, _fast_winochan.winochan, 16)


@pytest.mark.parametrize(
    "xs,M,pads,clip",
    [
        ((1, 32, 28, 28), 32, (1, 1, 1, 1), (0.0, None)),
        ((2, 64, 15, 13), 64, (1, 0, 1, 2), None),
        ((1, 16, 27, 26), 32, (1, 1, 1, 1), (0.0, 6.0)),
    ],
)
def test_conv_hook_matches_paths_without_it(xs, M, pads, clip, monkeypatch):
    """conv.py's dispatch takes the path for its shapes, and it agrees with the paths it replaces."""
    check_conv_hook(monkeypatch, RNG, _fast_winochan, xs, M, pads, clip, (_fast_winoblock,))


def test_takes_only_its_shapes():
    def cw(C, M, k=3, group=1):
        return prepare_conv_weight(RNG.standard_normal((M, C // group, k, k)).astype(np.float32), group)

    ok = dict(n=2, out=(14, 14), strides=(1, 1), dilations=(1, 1))
    assert _fast_winochan.takes(cw(64, 64), **ok)
    assert not _fast_winochan.takes(cw(8, 64), **ok)  # too few channels
    assert not _fast_winochan.takes(cw(256, 256), **ok)  # U past L2
    assert not _fast_winochan.takes(cw(24, 24), **ok)  # half-empty vectors
    assert not _fast_winochan.takes(cw(64, 64, 5), **ok)
    assert not _fast_winochan.takes(cw(64, 64, group=2), **ok)
    assert not _fast_winochan.takes(cw(64, 64), **{**ok, "strides": (2, 2)})
    assert not _fast_winochan.takes(cw(64, 64), **{**ok, "dilations": (2, 2)})
    assert not _fast_winochan.takes(cw(64, 64), **{**ok, "out": (4, 4)})  # one tile: U's bytes cost more than it saves
    assert _fast_winochan.takes(cw(64, 64), **{**ok, "out": (8, 5)})  # 4 tiles


def test_winochan_parts_give_the_same_bits_at_1_and_2_threads(monkeypatch):
    """Split in 2 parts over each sample's tiles when the caller has 2 threads: every output the same sum either way."""
    from stdops.ops import _blas

    monkeypatch.setattr(_fast_winochan, "_SPLIT_FLOPS", 0)  # parts even for this small layer
    x = RNG.standard_normal((2, 32, 21, 19)).astype(np.float32)
    w = RNG.standard_normal((48, 32, 3, 3)).astype(np.float32)
    up = _fast_winochan.pack(TILES[4].transform_weight(w, np.float32))
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(_fast_winochan.winochan(x, up, 48, None, (1, 1), (21, 19), (0.0, None)))
    assert np.array_equal(results[0], results[1])
    monkeypatch.setattr(_fast_winochan, "_SPLIT_FLOPS", 1 << 60)  # and without parts
    np.testing.assert_array_equal(_fast_winochan.winochan(x, up, 48, None, (1, 1), (21, 19), (0.0, None)), results[0])
