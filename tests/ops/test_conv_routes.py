"""ops/conv.py's ConvRoutes (a prepared convolution's path bound per input shape) against the general way,
_conv_forward: the same (y, done), bit for bit, for every compiled path, a second shape and back, another bias
object, a deferred bias, and a change of the limits in force."""

from __future__ import annotations

import numpy as np
import pytest

from stdops import limits
from stdops.errors import ResourceLimitError
from stdops.ops import conv

RNG = np.random.default_rng(13)

# (C, M, group, kernel, strides, pads, H, W): pointwise compiled, 1x1/2 in place, 1x1/2 compiled after a strided
# copy, stem 3x3/1 and 3x3/2, the packed direct kernel (rows and gathered), Winograd F(2,3) and F(4,3), depthwise
CASES = [
    (16, 32, 1, (1, 1), (1, 1), (0, 0, 0, 0), 28, 28),
    (64, 64, 1, (1, 1), (2, 2), (0, 0, 0, 0), 14, 14),
    (16, 32, 1, (1, 1), (2, 2), (0, 0, 0, 0), 56, 56),
    (16, 16, 1, (3, 3), (1, 1), (1, 1, 1, 1), 30, 29),
    (3, 16, 1, (7, 7), (2, 2), (3, 3, 3, 3), 45, 50),
    (64, 64, 1, (3, 3), (2, 2), (1, 1, 1, 1), 14, 14),
    (64, 48, 1, (3, 3), (1, 1), (1, 1, 1, 1), 5, 6),
    (32, 32, 1, (3, 3), (1, 1), (1, 1, 1, 1), 21, 19),
    (128, 64, 1, (3, 3), (1, 1), (1, 1, 1, 1), 28, 28),
    (24, 24, 24, (3, 3), (2, 2), (1, 0, 1, 2), 17, 23),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("clip", [None, (0.0, None), (0.0, 6.0)])
def test_routes_same_bits_as_the_general_way(case, clip):
    C, M, g, k, s, pads, H, W = case
    w = RNG.standard_normal((M, C // g) + k).astype(np.float32)
    b = RNG.standard_normal(M).astype(np.float32)
    cw = conv.ConvWeight(w, g)
    cw.fold_bias(b)
    geo = dict(strides=s, pads=pads)
    routes = conv.ConvRoutes(cw, geo, clip)
    shapes = [(1, C, H, W), (2, C, H + 3, W + 1), (1, C, H, W)]
    for shape in shapes:
        x = RNG.standard_normal(shape).astype(np.float32)
        for bias in (b, b.copy(), None):
            for defer in (False, True):
                y, done = routes(x, bias, defer)
                y0, done0 = conv._conv_forward(x, cw, bias, (), s, (), pads, "NOTSET", routes.clip, defer)
                assert done == done0
                np.testing.assert_array_equal(y, y0)
    # strided input (a view): the paths copy or read it as they do without routes
    x = RNG.standard_normal((1, C, H, 2 * W)).astype(np.float32)[..., ::2]
    y, _ = routes(x, b)
    y0, _ = conv._conv_forward(x, cw, b, (), s, (), pads, "NOTSET", routes.clip)
    np.testing.assert_array_equal(y, y0)


def test_routes_follow_the_limits_in_force():
    w = RNG.standard_normal((8, 4, 3, 3)).astype(np.float32)
    routes = conv.ConvRoutes(conv.ConvWeight(w, 1), dict(pads=(1, 1, 1, 1)))
    x = RNG.standard_normal((1, 4, 20, 20)).astype(np.float32)
    routes(x, None)
    with limits.override(max_elements=100), pytest.raises(ResourceLimitError):
        routes(x, None)
    assert routes(x, None)[0].shape == (1, 8, 20, 20)
