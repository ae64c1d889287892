"""The channels-last inverted-residual block (ops/_fast_blockcl.py, through ops/fused_blocks.py's
expand_depthwise_project): where it runs, it agrees with the plain form (NumPy, the compiled path off) and with the
planar block (ops/_fast_blocks.py) within float32 rounding, gives the same bits at 1 and 2 threads, and leaves its
inputs alone; where it does not apply, the planar block or the steps run."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ops import _blas, _fast, _fast_blockcl, _fast_conv, fused_blocks

from .test_fast_blocks import _case, _defaults

pytestmark = pytest.mark.skipif(
    _fast.numba is None or not _fast_conv.PACKED_OK,
    reason="the channels-last block needs numba and AVX-512 (ops/_fast_rowtiles.py's register tiles)",
)

CLIP6, NONE = ("clip", (0, 6)), ("", ())
# x shape, expanded channels, projected channels, kernel, stride, pads, activations (expansion, depthwise,
# projection, post), residual
BLOCKS = [
    # MobileNetV2's blocks from 28 x 28 down
    ((1, 32, 28, 28), 192, 32, 3, 1, (1, 1, 1, 1), CLIP6, CLIP6, NONE, NONE, True),
    ((1, 32, 28, 28), 192, 64, 3, 2, (1, 1, 1, 1), CLIP6, CLIP6, NONE, NONE, False),
    ((1, 64, 14, 14), 384, 64, 3, 1, (1, 1, 1, 1), CLIP6, CLIP6, NONE, NONE, True),
    ((1, 96, 14, 14), 576, 160, 3, 2, (1, 1, 1, 1), CLIP6, CLIP6, NONE, NONE, False),
    ((1, 160, 7, 7), 960, 160, 3, 1, (1, 1, 1, 1), CLIP6, CLIP6, NONE, NONE, True),
    # channel counts off the 16s (padded lanes), two samples, odd maps, rows of 10 and 3 (tiles of 7 + 2 + 1, 2 + 1)
    ((2, 24, 10, 10), 144, 40, 3, 1, (1, 1, 1, 1), ("relu", ()), CLIP6, NONE, NONE, False),
    ((2, 16, 23, 21), 50, 20, 3, 2, (1, 1, 1, 1), ("relu", ()), CLIP6, NONE, NONE, False),
    ((1, 70, 9, 7), 72, 64, 3, 2, (1, 0, 1, 1), ("relu", ()), NONE, ("clip", (-1, 1)), NONE, True),
    ((1, 64, 5, 3), 128, 32, 3, 1, (1, 1, 1, 1), NONE, NONE, NONE, NONE, True),
    # unpadded: the map shrinks by two
    ((1, 48, 12, 12), 96, 24, 3, 1, (0, 0, 0, 0), CLIP6, CLIP6, NONE, NONE, False),
]


def _prepare(args, attrs, use: bool, monkeypatch):
    monkeypatch.setattr(_fast_blockcl, "USE", use)
    x, w1, w2, w3, b1, b2, b3, _ = args
    return fused_blocks.prepare_expand_depthwise_project((None, w1, w2, w3, b1, b2, b3), _defaults() | attrs)


def _spy(monkeypatch) -> list:
    calls: list = []
    real = _fast_blockcl.ChannelsLastBlock.__call__
    monkeypatch.setattr(_fast_blockcl.ChannelsLastBlock, "__call__", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def _close(got, want):
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * float(np.abs(want).max()))


@pytest.mark.parametrize("case", BLOCKS, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-s{c[4]}")
@pytest.mark.parametrize("bias", [False, True])
def test_channels_last_block_agrees_with_the_plain_form_and_the_planar_block(case, bias, monkeypatch):
    monkeypatch.setattr(_fast, "_enabled", True)
    args, attrs = _case(*case, bias)
    x0 = args[0].copy()
    calls = _spy(monkeypatch)
    got = _prepare(args, attrs, True, monkeypatch)(*args)
    assert calls, "the channels-last block runs on these shapes"
    np.testing.assert_array_equal(args[0], x0)
    planar = _prepare(args, attrs, False, monkeypatch)(*args)
    assert len(calls) == 1
    _close(got, planar)
    monkeypatch.setattr(_fast, "_enabled", False)
    _close(got, fused_blocks.expand_depthwise_project(*args, **attrs))


@pytest.mark.parametrize(
    "case",
    [
        # 5 x 5, a non-clip activation, a post-activation, a map past MAX_POSITIONS: not this path
        ((1, 32, 12, 12), 66, 40, 5, 1, (2, 2, 2, 2), CLIP6, CLIP6, NONE, NONE, False),
        ((1, 32, 12, 12), 66, 40, 3, 1, (1, 1, 1, 1), ("hard_swish", (1 / 6, 0.5)), CLIP6, NONE, NONE, False),
        ((1, 32, 12, 12), 66, 40, 3, 1, (1, 1, 1, 1), CLIP6, CLIP6, NONE, ("relu", ()), True),
        ((1, 16, 30, 30), 32, 16, 3, 1, (1, 1, 1, 1), CLIP6, CLIP6, NONE, NONE, True),
    ],
    ids=["5x5", "hard_swish", "post", "30x30"],
)
def test_blocks_it_does_not_take_run_the_other_paths(case, monkeypatch):
    monkeypatch.setattr(_fast, "_enabled", True)
    args, attrs = _case(*case, True)
    calls = _spy(monkeypatch)
    got = _prepare(args, attrs, True, monkeypatch)(*args)
    assert not calls
    monkeypatch.setattr(_fast, "_enabled", False)
    _close(got, fused_blocks.expand_depthwise_project(*args, **attrs))


@pytest.mark.parametrize("case", BLOCKS, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-s{c[4]}-p{c[5][0]}{c[5][1]}")
def test_channels_last_block_same_bits_at_1_and_2_threads(case, monkeypatch):
    """At 2 threads (here from any size) a batch goes in 2 parts over its samples, one sample in 2 parts over its
    output rows (each half expanding the input rows it reads): the same bits."""
    monkeypatch.setattr(_fast, "_enabled", True)
    monkeypatch.setattr(_fast_blockcl, "SPLIT_FLOPS", 0)
    args, attrs = _case(*case, True)
    step = _prepare(args, attrs, True, monkeypatch)
    calls = []
    real = _blas.run_parts
    monkeypatch.setattr(_fast_blockcl, "run_parts", lambda parts, **kw: calls.append(len(parts)) or real(parts, **kw))
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(step(*args))
    assert calls == [2]
    np.testing.assert_array_equal(results[0], results[1])


def test_channels_last_block_compiled_off_runs_the_steps(monkeypatch):
    """With the compiled extra turned off after load, the prepared step gives the plain form's values."""
    args, attrs = _case(*BLOCKS[2], True)
    monkeypatch.setattr(_fast, "_enabled", True)
    step = _prepare(args, attrs, True, monkeypatch)
    calls = _spy(monkeypatch)
    monkeypatch.setattr(_fast, "_enabled", False)
    got = step(*args)
    assert not calls
    _close(got, fused_blocks.expand_depthwise_project(*args, **attrs))
