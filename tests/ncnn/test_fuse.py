"""The ncnn plan's own fusion (stdops/ncnn/fuse.py): a 1x1 Convolution read only by a ConvolutionDepthWise runs
as one expand_depthwise step in the twin; the twin gives the plan-as-written's values (bit for bit on the compiled
path, within 1e-6 on the NumPy one), the wheel's within its tolerance, and every blob stays reachable."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ncnn import Net
from stdops.ops import _fast

from . import wheel

TAG_F32 = np.zeros(1, np.uint32).tobytes()  # a tagged weight: 4 bytes of 0, then raw float32


def _net(act1: str, act2: str, stride: int, pad: int, C: int = 8, M: int = 24, extra_reader: bool = False, seed=0):
    """Input -> 1x1 Convolution (C -> M, act1) -> 3x3 ConvolutionDepthWise (stride, pad, act2) -> 1x1 project."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((M, C, 1, 1)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(M).astype(np.float32) * 0.1
    w2 = rng.standard_normal((M, 1, 3, 3)).astype(np.float32) * 0.3
    b2 = rng.standard_normal(M).astype(np.float32) * 0.1
    w3 = rng.standard_normal((4, M, 1, 1)).astype(np.float32) * 0.3
    lines = [
        "Input in0 0 1 in0",
        f"Convolution expand 1 1 in0 e 0={M} 1=1 5=1 6={M * C} {act1}",
    ]
    if extra_reader:
        lines = lines[:1] + [lines[1].replace(" 1 1 in0 e ", " 1 1 in0 e0 ")] + ["Split split 1 2 e0 e e2"]
    lines += [
        f"ConvolutionDepthWise dw 1 1 e d 0={M} 1=3 3={stride} 4={pad} 5=1 6={M * 9} 7={M} {act2}",
        f"Convolution project 1 1 d out0 0=4 1=1 5=0 6={4 * M}",
    ]
    outs = ["out0"] + (["e2"] if extra_reader else [])
    blobs = {b for line in lines for b in line.split()[4:] if "=" not in b}
    param = f"7767517\n{len(lines)} {len(blobs)}\n" + "\n".join(lines) + "\n"
    blob = TAG_F32 + w1.tobytes() + b1.tobytes() + TAG_F32 + w2.tobytes() + b2.tobytes() + TAG_F32 + w3.tobytes()
    return param, blob, outs


ACTS = [
    ("", ""),
    ("9=3 -23310=2,0.0,6.0", "9=3 -23310=2,0.0,6.0"),
    ("9=1", "9=6 -23310=2,0.2,0.5"),
    ("9=4", "9=2 -23310=1,0.1"),
]


@pytest.fixture(params=[True, False], ids=["compiled", "numpy"])
def kernels(request):
    if request.param and _fast.numba is None:
        pytest.skip("numba (the optional 'fast' extra) is not installed")
    prev = _fast.set_enabled(request.param)
    yield request.param
    _fast.set_enabled(prev)


def _written(net: Net, feeds: dict) -> dict:
    return net.plan.run(feeds, hook=lambda node, name, value: None)  # a hook: every layer as written


@pytest.mark.parametrize("acts", ACTS, ids=["none", "relu6", "relu-hardswish", "sigmoid-leaky"])
@pytest.mark.parametrize("stride,pad,hw", [(1, 1, 17), (2, 1, 16), (2, 0, 13), (1, 0, 9)])
def test_expand_depthwise_twin_matches_the_layers(kernels, acts, stride, pad, hw):
    param, blob, _ = _net(*acts, stride, pad)
    net = Net.from_bytes(param, blob)
    twin = net.plan.fused
    assert twin is not None and [n.kernels for n in twin.nodes].count(("expand_depthwise",)) == 1
    assert len(twin.nodes) == len(net.plan.nodes) - 1
    x = np.random.default_rng(1).standard_normal((8, hw, hw + 3)).astype(np.float32)
    got, want = net.run({"in0": x}), _written(net, {"in0": x})
    a, b = got["out0"], want["out0"]
    assert a.shape == b.shape and a.dtype == b.dtype == np.float32
    if kernels:  # the compiled block computes what the two compiled steps compute
        np.testing.assert_array_equal(a, b)
    else:
        assert float(np.max(np.abs(a - b))) <= 1e-6 * float(np.max(np.abs(b)))
    if wheel.available():
        (theirs,) = wheel.wheel_net(param.encode(), blob, [x], ["in0"], ["out0"], options=wheel.EXACT_OPTIONS)
        wheel.assert_close([a], [theirs], atol=1e-4, rtol=1e-4, what="expand_depthwise twin vs the wheel")


def test_expanded_blob_stays_reachable_and_shared_blobs_are_not_fused():
    param, blob, _ = _net("9=1", "9=1", 1, 1)
    net = Net.from_bytes(param, blob)
    x = np.random.default_rng(2).standard_normal((8, 10, 10)).astype(np.float32)
    ex = net.create_extractor()
    ex.input("in0", x)
    e = ex.extract("e")  # the fused block's intermediate: the layers as written compute it
    assert e.shape == (24, 10, 10) and float(e.min()) >= 0.0  # the expansion's ReLU
    # a blob two layers read (here through a Split) is no pair: nothing to fuse
    param2, blob2, _ = _net("9=1", "9=1", 1, 1, extra_reader=True)
    net2 = Net.from_bytes(param2, blob2)
    assert net2.plan.fused is None or all(n.kernels != ("expand_depthwise",) for n in net2.plan.fused.nodes)


def test_an_input_the_block_does_not_take_runs_the_layers_as_written():
    """A 2-D blob into a one-channel expansion (ncnn reads it as 1 x H x W): the twin's step refuses it
    (PlanFallback) and the layers as written give the answer."""
    param, blob, _ = _net("9=1", "", 1, 1, C=1)
    net = Net.from_bytes(param, blob)
    assert net.plan.fused is not None
    x = np.random.default_rng(3).standard_normal((7, 9)).astype(np.float32)
    got, want = net.run({"in0": x}), _written(net, {"in0": x})
    np.testing.assert_array_equal(got["out0"], want["out0"])
    assert got["out0"].shape == (4, 7, 9)
