"""The compiled inverted-residual block (ops/fused_blocks.py expand_depthwise_project on ops/_fast_blocks.py): the
bits of the three prepared steps it replaces (each on the kernel conv.py picks for it), and the plain form (NumPy,
the compiled path off) within the GEMM's rounding. The channels-last block (ops/_fast_blockcl.py), which takes the
small maps first, is off here (tests/ops/test_fast_blockcl.py)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from stdops.ops import _fast, _fast_blockcl, _fast_blocks, _fast_dwtiles, _fast_pointwise, fused, fused_blocks

pytestmark = pytest.mark.skipif(
    not (_fast_pointwise.TILES_OK and _fast_dwtiles.TILES_OK),
    reason="the compiled block needs numba and the pointwise and depthwise tiles (AVX-512 or AVX2)",
)

RNG = np.random.default_rng(2026)


@pytest.fixture(autouse=True)
def _planar_block(monkeypatch):
    monkeypatch.setattr(_fast_blockcl, "USE", False)


# x shape, expanded channels, projected channels, depthwise kernel, stride, pads, activations (expansion,
# depthwise, projection, post), residual
BLOCKS = [
    ((1, 24, 20, 20), 144, 24, 3, 1, (1, 1, 1, 1), ("clip", (0, 6)), ("clip", (0, 6)), ("", ()), ("", ()), True),
    ((2, 16, 23, 21), 50, 20, 3, 2, (1, 1, 1, 1), ("relu", ()), ("clip", (0, 6)), ("", ()), ("", ()), False),
    ((1, 64, 7, 7), 100, 70, 3, 1, (1, 1, 1, 1), ("clip", (0, 6)), ("clip", (0, 6)), ("", ()), ("", ()), True),
    ((2, 70, 9, 7), 72, 64, 3, 2, (1, 0, 1, 1), ("relu", ()), ("", ()), ("clip", (-1, 1)), ("", ()), False),
    # 5 x 5, MobileNetV3's and EfficientNet's activations, a post-activation after the residual
    ((1, 96, 9, 9), 66, 30, 5, 1, (2, 2, 2, 2), ("hard_swish", (1 / 6, 0.5)), ("silu", ()), ("", ()), ("relu", ()), 1),
    ((1, 32, 12, 12), 66, 40, 3, 1, (1, 1, 1, 1), ("", ()), ("relu", ()), ("sigmoid", ()), ("", ()), True),
]


def _defaults():
    sig = inspect.signature(fused_blocks.expand_depthwise_project)
    return {n: p.default for n, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY}


def _case(xs, M, M3, k, s, pads, a1, a2, a3, post, res, bias):
    x = RNG.standard_normal(xs).astype(np.float32) * np.float32(2)
    w1 = RNG.standard_normal((M, xs[1], 1, 1)).astype(np.float32)
    w2 = RNG.standard_normal((M, 1, k, k)).astype(np.float32)
    w3 = (RNG.standard_normal((M3, M, 1, 1)) / np.sqrt(M)).astype(np.float32)
    bs = [RNG.standard_normal(n).astype(np.float32) if bias else None for n in (M, M, M3)]
    out = [(n + pads[i] + pads[i + 2] - k) // s + 1 for i, n in enumerate(xs[2:])]
    r = RNG.standard_normal((xs[0], M3, *out)).astype(np.float32) if res else None
    attrs = dict(
        activation=a1[0],
        activation_params=a1[1],
        dw_group=M,
        dw_kernel_shape=(k, k),
        dw_strides=(s, s),
        dw_pads=pads,
        dw_activation=a2[0],
        dw_activation_params=a2[1],
        pw_activation=a3[0],
        pw_activation_params=a3[1],
        post_activation=post[0],
        post_activation_params=post[1],
    )
    return (x, w1, w2, w3, *bs, r), attrs


@pytest.mark.parametrize("case", BLOCKS, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-s{c[4]}")
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("round_floats", [None, 1], ids=["rounds-by-map", "rounds-of-6"])
def test_block_is_its_three_steps_bit_for_bit(case, bias, round_floats, monkeypatch):
    monkeypatch.setattr(_fast, "_enabled", True)
    if round_floats is not None:
        monkeypatch.setattr(_fast_pointwise, "ROUND_FLOATS", round_floats)
    args, attrs = _case(*case, bias)
    x, w1, w2, w3, b1, b2, b3, r = args
    step = fused_blocks.prepare_expand_depthwise_project((None, w1, w2, w3, b1, b2, b3), _defaults() | attrs)
    calls = []
    real = _fast_blocks.InvertedResidual.__call__
    monkeypatch.setattr(_fast_blocks.InvertedResidual, "__call__", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = step(*args)
    # the compiled block runs where the depthwise tiles take the layer (on AVX2 not 5 x 5 at stride 1)
    tiles = _fast_dwtiles.tiles_apply(np.dtype(np.float32), 1, (case[3], case[3]), (case[4], case[4]), (1, 1))
    assert bool(calls) == tiles, "the compiled block runs on these shapes"
    defaults = dict(fused.conv_act.__kwdefaults__)
    e1 = fused.prepare_conv_act((None, w1, b1), defaults | dict(activation=attrs["activation"],
                                activation_params=attrs["activation_params"]))  # fmt: skip
    dw = {a[3:]: v for a, v in attrs.items() if a.startswith("dw_")}
    e2 = fused.prepare_conv_act((None, w2, b2), defaults | dw)
    p = dict(activation=attrs["pw_activation"], activation_params=attrs["pw_activation_params"])
    p |= dict(post_activation=attrs["post_activation"], post_activation_params=attrs["post_activation_params"])
    e3 = fused.prepare_conv_act((None, w3, b3), defaults | p)
    want = e3(e2(e1(x, w1, b1), w2, b2), w3, b3, r)  # the three prepared steps the block replaces
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert x.flags.writeable and (r is None or r.flags.writeable)
    monkeypatch.setattr(_fast, "_enabled", False)
    ref = fused_blocks.expand_depthwise_project(*args, **attrs)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * float(np.abs(ref).max()))


def test_block_residual_it_does_not_take_runs_the_steps(monkeypatch):
    """A residual that broadcasts (or of another dtype) is the steps' to add: the same answer as the chain."""
    monkeypatch.setattr(_fast, "_enabled", True)
    args, attrs = _case(*BLOCKS[0], True)
    x, w1, w2, w3, b1, b2, b3, r = args
    step = fused_blocks.prepare_expand_depthwise_project((None, w1, w2, w3, b1, b2, b3), _defaults() | attrs)
    row = r[:, :, :1, :].copy()  # broadcasts over the rows
    got = step(x, w1, w2, w3, b1, b2, b3, row)
    full = step(x, w1, w2, w3, b1, b2, b3, np.ascontiguousarray(np.broadcast_to(row, r.shape)))
    np.testing.assert_array_equal(got, full)


def test_block_same_bits_at_1_and_2_threads(monkeypatch):
    from stdops.ops import _blas

    monkeypatch.setattr(_fast, "_enabled", True)
    monkeypatch.setattr(_fast_pointwise, "_SPLIT_FLOPS", 0)
    monkeypatch.setattr(_fast_pointwise, "_BLOCK_SPLIT_FLOPS", 0)  # the block in 2 parts too
    args, attrs = _case(*BLOCKS[0], True)
    x, w1, w2, w3, b1, b2, b3, r = args
    step = fused_blocks.prepare_expand_depthwise_project((None, w1, w2, w3, b1, b2, b3), _defaults() | attrs)
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(step(*args))
    assert np.array_equal(results[0], results[1])
