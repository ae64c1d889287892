"""The blocked Winograd F(4x4, 3x3) (stdops/ops/_fast_winoblock.py) against the NumPy F(4,3) (winograd.Tile.conv) and
the direct sum: maps not multiples of the 4 x 4 tiles or of the 16-tile blocks, pads, channels not multiples of 16,
bias and clip, N > 1; the conv.py hook against the plan with the path off; bits independent of the block a tile is
in."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ops import _fast, _fast_winoblock, _fast_winochan
from stdops.ops.winograd import TILES

from .winograd_checks import check_conv_hook, check_nan_stays_in_its_tile, direct

pytestmark = pytest.mark.skipif(
    _fast.numba is None or not _fast_winoblock.PACKED_OK, reason="needs numba and an AVX-512 machine"
)

RNG = np.random.default_rng(31)


# x shape, M, begin, out, clip
SHAPES = [
    ((1, 16, 56, 56), 16, (1, 1), (56, 56), (0.0, None)),
    ((2, 5, 9, 11), 7, (1, 1), (9, 11), None),  # N > 1, odd sizes, channels past the register tile
    ((1, 17, 13, 30), 40, (1, 0), (13, 28), (None, 0.5)),  # asymmetric padding
    ((1, 32, 28, 28), 32, (1, 1), (28, 28), (0.0, 6.0)),
    ((1, 3, 6, 6), 20, (0, 0), (4, 4), None),  # no padding, one tile
    ((1, 64, 14, 14), 64, (1, 1), (14, 14), None),
]


@pytest.mark.parametrize("xs,M,begin,out,clip", SHAPES)
@pytest.mark.parametrize("bias", [True, False])
def test_winoblock_matches_numpy_f4(xs, M, begin, out, clip, bias):
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal((M, xs[1], 3, 3)).astype(np.float32)
    b = RNG.standard_normal(M).astype(np.float32) if bias else None
    U = TILES[4].transform_weight(w, np.float32)
    y = _fast_winoblock.winoblock(x, _fast_winoblock.pack(U), M, b, begin, out, clip)
    assert y.dtype == np.float32 and y.shape == (xs[0], M) + out
    ref = TILES[4].conv(x, U, begin, out)
    if b is not None:
        ref = ref + b[None, :, None, None]
    if clip is not None:
        ref = np.clip(ref, clip[0], clip[1])
    bound = direct(np.abs(x), np.abs(w), None if b is None else np.abs(b), begin, out)
    assert np.all(np.abs(y - ref) <= 1e-5 * bound + 1e-30)
    d = direct(x, w, b, begin, out)
    if clip is not None:
        d = np.clip(d, clip[0], clip[1])
    assert np.all(np.abs(y - d) <= 1e-5 * bound + 1e-30)  # F(4,3)'s error within the suites' bound


def test_winoblock_bits_independent_of_block():
    """A tile's outputs are the same sum in whichever 16-tile block (and lane) it is: the map shifted by whole tiles
    (4 rows) puts every tile in another block and lane, the outputs they share are the same bits."""
    x = RNG.standard_normal((1, 24, 40, 36)).astype(np.float32)
    w = RNG.standard_normal((24, 24, 3, 3)).astype(np.float32)
    up = _fast_winoblock.pack(TILES[4].transform_weight(w, np.float32))
    y = _fast_winoblock.winoblock(x, up, 24, None, (0, 0), (38, 34))
    ys = _fast_winoblock.winoblock(x[:, :, 4:], up, 24, None, (0, 0), (34, 34))
    np.testing.assert_array_equal(y[:, :, 4:], ys)


def test_winoblock_nan_inf_propagate():
    check_nan_stays_in_its_tile(RNG, _fast_winoblock.pack, _fast_winoblock.winoblock, 8)


@pytest.mark.parametrize(
    "xs,M,pads,clip",
    [
        ((1, 32, 28, 28), 32, (1, 1, 1, 1), (0.0, None)),
        ((2, 24, 30, 29), 20, (1, 0, 1, 2), None),
        ((1, 16, 27, 26), 32, (1, 1, 1, 1), (0.0, 6.0)),
    ],
)
def test_conv_hook_matches_plan_without_it(xs, M, pads, clip, monkeypatch):
    """conv.py's dispatch takes the path for its shapes, and it agrees with the paths it replaces."""
    monkeypatch.setattr(_fast_winochan, "USE", False)  # the path conv.py tries first for these channel counts
    check_conv_hook(monkeypatch, RNG, _fast_winoblock, xs, M, pads, clip, ())
