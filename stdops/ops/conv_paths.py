"""Which kernel a 2-D convolution takes, per shape (ops/conv.py asks, at a route's first call for a shape): the
compiled direct kernel, the packed kernel reading a 1 x 1 stride-2 input in place, the compiled 1 x 1 kernel; the
thresholds with what each measured."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import _fast, _fast_conv, _fast_pointwise
from ._window import prod

if TYPE_CHECKING:  # conv.py imports this module
    from .conv import ConvWeight

#: the compiled direct convolution takes maps of at most this many outputs per channel (measured on one AVX-512
#: core, 1 thread, in ResNet-18, against im2col + OpenBLAS: 512@7 3x3 1.85 ms against 2.9, the whole network 23.8 ms
#: against 27.7; up to 784 or every size: no gain, 25.3 and 27.4 against 24.7); 3 x 3 stride-1 layers that Winograd
#: takes keep it above _PACKED_WINOGRAD_OUT (14 x 14: F(2,3) 23.0 ms against 24.6)
_PACKED_MAX_OUT = 196
#: ... and stride-2 windows (not 1 x 1) on maps of up to this many outputs, deeper than the stem kernel's short sums
#: (measured, 1 thread, alternating whole-model runs, the same bits: ResNet-18's 64 -> 128 3x3/2 @56 against
#: ops/_fast_stem.py's DEEP path, the network 23.59 -> 23.35 ms median)
_PACKED_MAX_OUT_S2 = 784
#: (AVX2, Zen 3, alternating, 1 thread: the same values; the direct kernel instead of Winograd's packed products:
#: F(2,3) 256@14 1.5x the time, F(4,3) 128@28 1.35x, 64@56 2.0x)
_PACKED_WINOGRAD_OUT = 49
_PACKED_MIN_K = 64  # a GEMM depth (C kh kw) below this leaves the tile's loop too short


def direct_packed(cw: ConvWeight, n: int, out, strides, dilations) -> bool:
    """Whether a convolution (spatial rank n, output map ``out``) takes the compiled direct path."""
    if not (n == 2 and cw.group == 1 and cw.dtype == np.float32 and _fast.enabled() and _fast_conv.TILES_OK):
        return False
    P = prod(out)
    strided = tuple(strides) == (2, 2) and cw.kernel != (1, 1)
    if P > (_PACKED_MAX_OUT_S2 if strided else _PACKED_MAX_OUT) or cw.Cg * prod(cw.kernel) < _PACKED_MIN_K:
        return False
    return P <= _PACKED_WINOGRAD_OUT or not cw.winograd_tile(strides, dilations, out)


#: 1 x 1 stride-2 layers read in place by the packed kernel (ops/_fast_conv.py pointwise_in_place) from this many
#: input channels on, ahead of the compiled pointwise kernel (which copies the strided input first). Alternating,
#: 1 thread, against it: 64@56 -> 128 0.145 ms against 0.204 (caches flushed first: 0.337 against 0.380), 96@28 ->
#: 192 0.093 against 0.141 (cold: the same), 128@28 -> 256 0.114 against 0.140, 256@14 -> 512 0.105 against 0.156;
#: below 64 the tile's loop over K is too short (_PACKED_MIN_K)
_PACKED_PW_S2_MIN_C = 64
#: ... and inputs of at most this many values (1 MiB: every channel block reads the input again, strided, and it
#: then stays in L2): ResNet-50's 256@56 -> 512 2.47 ms against 1.91, 512@28 -> 1024 2.04 against 1.66, 1024@14 ->
#: 2048 (2^17.6 values) the same, 1.57 against 1.55
_PACKED_PW_S2_MAX_IN = 1 << 18


def pointwise_in_place(cw: ConvWeight, n: int, x_shape, geo, strides) -> bool:
    """Whether a 1 x 1 stride-2 convolution takes the packed kernel reading its input in place."""
    return (
        n == 2
        and cw.kernel == (1, 1)  # the cheap tests first: every convolution of a plan asks
        and strides == (2, 2)
        and cw.group == 1
        and cw.dtype == np.float32
        and cw.Cg >= _PACKED_PW_S2_MIN_C
        and prod(x_shape[1:]) <= _PACKED_PW_S2_MAX_IN
        and prod(geo.out) <= _PACKED_MAX_OUT_S2
        and _fast.enabled()
        and _fast_conv.TILES_OK
        and _fast_conv.pointwise_in_place(cw.kernel, geo.begin, x_shape[2:], strides, geo.out)
    )


def pointwise_compiled(cw: ConvWeight, n: int, P: int) -> bool:
    """Whether a 1 x 1 convolution of P outputs per channel takes the compiled pointwise kernel."""
    return (
        all(k == 1 for k in cw.kernel)
        and cw.group == 1
        and cw.dtype == np.float32
        and _fast.enabled()
        and _fast_pointwise.applies(cw.M, cw.Cg, P)
    )
