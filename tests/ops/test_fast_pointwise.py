"""The compiled 1 x 1 convolution (stdops/ops/_fast_pointwise.py) against its NumPy reference: conv_forward with the
compiled path turned off (one GEMM by OpenBLAS)."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ops import _fast, _fast_conv, _fast_dwtiles, _fast_pointwise
from stdops.ops.conv import conv_forward, pointwise_compiled, prepare_conv_weight

pytestmark = [
    pytest.mark.skipif(_fast.numba is None, reason="numba (the optional 'fast' extra) is not installed"),
    pytest.mark.skipif(not _fast_pointwise.TILES_OK, reason="the pointwise kernel needs AVX-512 or AVX2 + FMA"),
]
#: the fused expansion + depthwise block also needs the depthwise tiles (ops/_fast_dwtiles.py: AVX-512 so far)
needs_block = pytest.mark.skipif(
    not (_fast_pointwise.TILES_OK and _fast_dwtiles.TILES_OK), reason="the fused block needs the depthwise tiles"
)

RNG = np.random.default_rng(31)

# x shape, M, strides, pads, clip: M off the 6-channel blocks, positions off the 64-position blocks and the 16 lanes
POINTWISE = [
    ((1, 16, 16, 16), 24, (1, 1), (0, 0, 0, 0), (0.0, 6.0)),  # whole blocks of positions (256)
    ((1, 3, 11, 13), 7, (1, 1), (0, 0, 0, 0), None),  # 143 positions: a partial block with a partial vector
    ((2, 24, 12, 10), 13, (1, 1), (0, 0, 0, 0), (None, 0.5)),  # batch 2
    ((1, 1, 10, 11), 1, (1, 1), (0, 0, 0, 0), (-1.0, None)),  # one channel in and out
    ((1, 40, 21, 20), 96, (2, 2), (0, 0, 0, 0), (0.0, None)),  # stride 2 (a ResNet downsample): the input copied
    ((1, 8, 10, 12), 10, (1, 1), (1, 0, 2, 1), None),  # padded 1 x 1: the borders are the bias alone
    ((1, 300, 14, 14), 20, (1, 1), (0, 0, 0, 0), (0.0, 6.0)),  # K past MAX_K on a small map
    ((1, 160, 17, 18), 33, (1, 1), (0, 0, 0, 0), None),  # K = 160, 306 positions
    ((1, 5, 10, 10), 6, (1, 1), (0, 0, 0, 0), None),  # exactly MIN_P positions, one channel block
    # a last vector of 1 or 2 lanes takes the tile with the channels in the lanes; 13 and 7 channels: a pair of
    # channel blocks and a lone one, rows masked
    ((1, 20, 7, 7), 13, (1, 1), (0, 0, 0, 0), (0.0, 6.0)),
    ((2, 24, 5, 10), 7, (1, 1), (0, 0, 0, 0), None),
    ((1, 9, 9, 9), 20, (1, 1), (0, 0, 0, 0), None),  # 81 = 64 + 16 + 1: a whole vector before the lone lane
    ((1, 12, 5, 13), 6, (1, 1), (0, 0, 0, 0), (0.0, 6.0)),  # 65 = 64 + 1: the lane alone in its column block
]


def _bound(x, w, b, kw):
    return conv_forward(
        np.abs(x), prepare_conv_weight(np.abs(w)), None if b is None else np.abs(b), **kw | {"clip": None}
    )


@pytest.mark.parametrize("xs,M,s,pads,clip", POINTWISE)
@pytest.mark.parametrize("bias", [False, True])
def test_pointwise_compiled_matches_numpy(xs, M, s, pads, clip, bias, monkeypatch):
    monkeypatch.setattr(_fast, "_enabled", True)
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal((M, xs[1], 1, 1)).astype(np.float32)
    b = RNG.standard_normal(M).astype(np.float32) if bias else None
    kw = dict(strides=s, pads=pads, clip=clip)
    cw = prepare_conv_weight(w)
    if b is not None:
        cw.fold_bias(b)
    y_fast = conv_forward(x, cw, b, **kw)
    assert cw._pw is not None  # the shape took the compiled kernel
    monkeypatch.setattr(_fast, "_enabled", False)
    assert not pointwise_compiled(cw, 2, y_fast.shape[2] * y_fast.shape[3])
    y_ref = conv_forward(x, prepare_conv_weight(w), b, **kw)
    assert y_fast.dtype == y_ref.dtype == np.float32 and y_fast.shape == y_ref.shape
    # the same products summed in another order: within a few ulp of the sum of their magnitudes
    assert np.all(np.abs(y_fast - y_ref) <= 1e-6 * _bound(x, w, b, kw) + 1e-30)


def test_pointwise_layer_thresholds():
    """The kernel takes small K on any map of at least MIN_P positions, large K only on small maps."""
    assert _fast_pointwise.applies(96, 16, 112 * 112)
    assert _fast_pointwise.applies(96, 576, 14 * 14)
    assert not _fast_pointwise.applies(128, 512, 28 * 28)  # OpenBLAS's rate
    assert _fast_pointwise.applies(1280, 320, 7 * 7)  # 7 x 7 maps: the lanes tile for the 49th position
    assert not _fast_pointwise.applies(1280, 320, 6 * 6)  # under MIN_P
    if _fast_conv.AVX512:  # up to K = 1024 on small maps
        assert _fast_pointwise.applies(320, 960, 7 * 7) and not _fast_pointwise.applies(320, 1280, 7 * 7)
    else:  # AVX2: 7 x 7 maps up to K = 672
        assert not _fast_pointwise.applies(160, 960, 7 * 7)


@pytest.mark.parametrize("late", [False, True], ids=["bias-first", "bias-last"])
def test_pointwise_whole_and_masked_vectors_same_bits(late):
    """A position's sum is the same whether a whole vector or a masked last one computes it (AVX2 runs whole
    vectors through a tile without masks, a last one of at most 8 lanes through a 12-channel tile): 49 to 77
    positions against the same columns inside 80."""
    x = RNG.standard_normal((1, 20, 80)).astype(np.float32)
    w = RNG.standard_normal((15, 20)).astype(np.float32)
    bp = np.zeros(18, np.float32)
    bp[:15] = RNG.standard_normal(15)
    wp = _fast_pointwise.pack_weight(w)

    def run(xs):
        y = np.empty((1, 15, xs.shape[2]), np.float32)
        span = _fast_pointwise._ACT_BLOCKS * _fast_pointwise._COLS
        e, kb = np.empty(span, np.float32), np.empty(span, np.int32)
        f = np.float32
        _fast_pointwise._pointwise_cols(wp, xs, bp, True, f(-1), f(1), 0, f(0), f(0), y, 0, xs.shape[2], e, e, kb, late)
        return y

    whole = run(x)
    for p in (49, 63, 66, 70, 77):
        np.testing.assert_array_equal(run(np.ascontiguousarray(x[:, :, :p])), whole[:, :, :p])


def test_pointwise_7x7_where_taken(monkeypatch):
    """Maps of 49 positions (AVX2 takes them up to K = 672): the compiled kernel against the GEMM."""
    monkeypatch.setattr(_fast, "_enabled", True)
    x = RNG.standard_normal((1, 40, 7, 7)).astype(np.float32)
    w = RNG.standard_normal((30, 40, 1, 1)).astype(np.float32)
    b = RNG.standard_normal(30).astype(np.float32)
    cw = prepare_conv_weight(w)
    if not pointwise_compiled(cw, 2, 49):
        pytest.skip("this ISA's thresholds leave 7 x 7 maps to other kernels")
    y_fast = conv_forward(x, cw, b, clip=(0.0, 6.0))
    monkeypatch.setattr(_fast, "_enabled", False)
    y_ref = conv_forward(x, prepare_conv_weight(w), b, clip=(0.0, 6.0))
    kw = dict(strides=(1, 1), pads=(0, 0, 0, 0), clip=None)
    assert np.all(np.abs(y_fast - y_ref) <= 1e-6 * _bound(x, w, b, kw) + 1e-30)


def test_pointwise_same_bits_at_1_and_2_threads(monkeypatch):
    """Split in 2 parts over the positions (every output the same sum whichever thread computes it)."""
    from stdops.ops import _blas

    monkeypatch.setattr(_fast, "_enabled", True)
    monkeypatch.setattr(_fast_pointwise, "_SPLIT_FLOPS", 0)
    x = RNG.standard_normal((1, 24, 19, 17)).astype(np.float32)
    w = RNG.standard_normal((30, 24, 1, 1)).astype(np.float32)
    b = RNG.standard_normal(30).astype(np.float32)
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(conv_forward(x, prepare_conv_weight(w), b, clip=(0.0, 6.0)))
    assert np.array_equal(results[0], results[1])


@pytest.mark.parametrize("M", [50, 12, 7])
def test_pointwise_small_map_same_bits_at_1_and_2_threads(M, monkeypatch):
    """A map of fewer than 2 column blocks, one sample: split in 2 parts over the channel blocks (the last one
    partial where M is no multiple of the tile's rows), every output the same sum, its bias and clip."""
    from stdops.ops import _blas

    monkeypatch.setattr(_fast, "_enabled", True)
    monkeypatch.setattr(_fast_pointwise, "_SPLIT_FLOPS", 0)
    calls: list = []
    real = _fast_pointwise.run_parts
    monkeypatch.setattr(_fast_pointwise, "run_parts", lambda parts, **kw: calls.append(len(parts)) or real(parts, **kw))
    x = RNG.standard_normal((1, 40, 7, 9)).astype(np.float32)
    w = RNG.standard_normal((M, 40, 1, 1)).astype(np.float32)
    b = RNG.standard_normal(M).astype(np.float32)
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(conv_forward(x, prepare_conv_weight(w), b, clip=(0.0, 6.0)))
    assert calls == [2]
    assert np.array_equal(results[0], results[1])
    want = np.clip(np.einsum("mk,kp->mp", w[:, :, 0, 0], x[0].reshape(40, -1)) + b[:, None], 0, 6).reshape(1, M, 7, 9)
    np.testing.assert_allclose(results[1], want, rtol=1e-5, atol=1e-5)


def test_pointwise_non_finite_and_inputs_kept(monkeypatch):
    """NaN and inf reach exactly the outputs whose sums hold them (inf - inf and 0 * inf are NaN), as OpenBLAS's
    GEMM gives; the clip keeps NaN; the inputs are not modified."""
    monkeypatch.setattr(_fast, "_enabled", True)
    x = RNG.standard_normal((1, 6, 12, 13)).astype(np.float32)
    x[0, 2, 3, 4], x[0, 4, 10, 0], x[0, 0, 11, 12] = np.nan, np.inf, -np.inf
    w = RNG.standard_normal((9, 6, 1, 1)).astype(np.float32)
    w[5, 3, 0, 0] = np.inf
    xc, wc = x.copy(), w.copy()
    y_fast = conv_forward(x, prepare_conv_weight(w), None, clip=(0.0, 6.0))
    np.testing.assert_array_equal(x, xc)
    np.testing.assert_array_equal(w, wc)
    monkeypatch.setattr(_fast, "_enabled", False)
    with np.errstate(invalid="ignore"):
        y_ref = conv_forward(x, prepare_conv_weight(w), None, clip=(0.0, 6.0))
    np.testing.assert_array_equal(np.isnan(y_fast), np.isnan(y_ref))
    assert np.isnan(y_fast[0, :, 3, 4]).all()  # the NaN reaches every output channel at its position
    np.testing.assert_allclose(y_fast, y_ref, rtol=1e-5, atol=1e-5)


# x shape, expanded channels, depthwise kernel, strides, pads, activations (expansion, depthwise): the fused
# expansion + depthwise step (ops/fused_blocks.py on ops/_fast_pointwise.py pointwise_depthwise)
EXPAND_DEPTHWISE = [
    ((1, 16, 20, 20), 96, 3, 2, (1, 1, 1, 1), ("clip", (0.0, 6.0)), ("clip", (0.0, 6.0))),  # 4 rounds of 24
    ((2, 5, 11, 13), 30, 3, 1, (1, 1, 1, 1), ("relu", ()), ("", ())),  # a partial round, batch 2, odd sizes
    ((1, 8, 15, 14), 20, 5, 2, (2, 2, 2, 2), ("", ()), ("relu", ())),  # 5 x 5 stride 2, one partial round
    ((1, 7, 12, 12), 49, 5, 1, (2, 1, 2, 3), ("clip", (-1.0, 1.0)), ("clip", (float("nan"), 0.5))),  # asymmetric
    ((2, 6, 9, 9), 12, 3, 1, (1, 1, 1, 1), ("clip", (0.0, 6.0)), ("relu", ())),  # 81 positions: AVX-512 runs the chain
    ((1, 16, 16, 16), 48, 3, 2, (1, 1, 1, 1), ("silu", ()), ("silu", ())),  # EfficientNet's activations
    ((1, 8, 14, 14), 30, 5, 1, (2, 2, 2, 2), ("hard_swish", (1 / 6, 0.5)), ("sigmoid", ())),  # MobileNetV3's
    # small maps with deep inputs: the expansion summed as ops/_fast_conv.py's direct kernel does (bias last)
    ((1, 64, 7, 7), 100, 3, 1, (1, 1, 1, 1), ("clip", (0.0, 6.0)), ("clip", (0.0, 6.0))),  # MobileNetV2's 7 x 7
    ((2, 70, 5, 6), 38, 3, 2, (1, 0, 1, 1), ("relu", ()), ("", ())),  # batch 2, stride 2, odd sizes and pads
    ((1, 96, 9, 9), 50, 5, 1, (2, 2, 2, 2), ("hard_swish", (1 / 6, 0.5)), ("silu", ())),  # 5 x 5, activations
]


def _expand_depthwise_case(xs, M, k, s, pads, act1, act2, bias):
    from stdops.ops import fused_blocks

    x = RNG.standard_normal(xs).astype(np.float32) * np.float32(2)
    w1 = RNG.standard_normal((M, xs[1], 1, 1)).astype(np.float32)
    w2 = RNG.standard_normal((M, 1, k, k)).astype(np.float32)
    b1 = RNG.standard_normal(M).astype(np.float32) if bias else None
    b2 = RNG.standard_normal(M).astype(np.float32) if bias else None
    attrs = dict(
        activation=act1[0],
        activation_params=act1[1],
        dw_group=M,
        dw_kernel_shape=(k, k),
        dw_strides=(s, s),
        dw_pads=pads,
        dw_activation=act2[0],
        dw_activation_params=act2[1],
    )
    step = fused_blocks.prepare_expand_depthwise((None, w1, w2, b1, b2), _defaults(fused_blocks) | attrs)
    return fused_blocks, step, (x, w1, w2, b1, b2), attrs


def _defaults(fused_blocks):
    import inspect

    sig = inspect.signature(fused_blocks.expand_depthwise)
    return {n: p.default for n, p in sig.parameters.items() if p.kind is p.KEYWORD_ONLY}


@needs_block
@pytest.mark.parametrize("xs,M,k,s,pads,act1,act2", EXPAND_DEPTHWISE)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("round_floats", [None, 1], ids=["rounds-by-map", "rounds-of-6"])
def test_expand_depthwise_is_its_two_steps_bit_for_bit(xs, M, k, s, pads, act1, act2, bias, round_floats, monkeypatch):
    """The compiled block computes what the two prepared conv_act steps (each on its compiled kernel) compute, bit
    for bit, whatever its rounds of expanded channels (all of them on these maps, or 6 a round: the fewest, at
    any scratch size); the plain form (NumPy, the compiled path off) within the GEMM's rounding."""
    monkeypatch.setattr(_fast, "_enabled", True)
    if round_floats is not None:
        monkeypatch.setattr(_fast_pointwise, "ROUND_FLOATS", round_floats)
        assert _fast_pointwise.round_channels(M, xs[2] * xs[3]) == 6
    fb, step, args, attrs = _expand_depthwise_case(xs, M, k, s, pads, act1, act2, bias)
    calls = []
    real = _fast_pointwise.PointwiseDepthwise.__call__
    monkeypatch.setattr(_fast_pointwise.PointwiseDepthwise, "__call__", lambda *a: calls.append(1) or real(*a))
    got = step(*args)
    # the block where the pointwise kernel applies, or on small maps where the direct one does (deep sums), and the
    # depthwise tiles take the depthwise layer (ops/_fast_dwtiles.py tiles_apply)
    P = xs[2] * xs[3]
    tiles = _fast_dwtiles.tiles_apply(np.dtype(np.float32), 1, (k, k), (s, s), (1, 1))
    assert bool(calls) == (tiles and (_fast_pointwise.applies(M, xs[1], P) or (xs[1] >= 64 and _fast_conv.TILES_OK)))
    from stdops.ops import fused

    x, w1, w2, b1, b2 = args
    defaults = dict(fused.conv_act.__kwdefaults__)
    expand = fused.prepare_conv_act((None, w1, b1), defaults | dict(activation=act1[0], activation_params=act1[1]))
    dw = fused.prepare_conv_act((None, w2, b2), defaults | {a[3:]: v for a, v in attrs.items() if a.startswith("dw_")})
    chain = dw(expand(x, w1, b1), w2, b2)  # the two prepared steps the block replaces
    assert got.dtype == np.float32 and got.shape == chain.shape
    np.testing.assert_array_equal(got, chain)
    monkeypatch.setattr(_fast, "_enabled", False)
    ref = fb.expand_depthwise(*args, **attrs)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * float(np.abs(ref).max()))


@needs_block
@pytest.mark.parametrize("round_floats", [None, 4000])
def test_expand_depthwise_same_bits_at_1_and_2_threads(round_floats, monkeypatch):
    """Split in 2 parts of rounds (each part one round of 48 channels, or 4000 floats: rounds of 6 of 400 values)."""
    from stdops.ops import _blas

    monkeypatch.setattr(_fast, "_enabled", True)
    monkeypatch.setattr(_fast_pointwise, "_SPLIT_FLOPS", 0)
    monkeypatch.setattr(_fast_pointwise, "_BLOCK_SPLIT_FLOPS", 0)  # the block in 2 parts too
    if round_floats is not None:
        monkeypatch.setattr(_fast_pointwise, "ROUND_FLOATS", round_floats)
    assert _fast_pointwise.round_channels(96, 400, 2) == (48 if round_floats is None else 6)
    _, step, args, _ = _expand_depthwise_case((1, 16, 20, 20), 96, 3, 2, (1, 1, 1, 1), ("clip", (0, 6)), ("", ()), True)
    results = []
    for count in (1, 2):
        monkeypatch.setattr(_blas, "threads", lambda count=count: count)
        results.append(step(*args))
    assert np.array_equal(results[0], results[1])


@needs_block
@pytest.mark.parametrize("order", ["lead-first", "other-first"])
def test_expand_depthwise_shared_rounds_same_bits(order, monkeypatch):
    """The (sample, round) units claimed from a shared counter give the bits of the rounds run in order, whichever
    call takes them: one call all of them and the other none (either being the lead, which then finds them done)."""
    monkeypatch.setattr(_fast, "_enabled", True)
    monkeypatch.setattr(_fast_pointwise, "ROUND_FLOATS", 4000)  # rounds of 6 channels of 400 values: 16 a sample
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 16, 20, 20)).astype(np.float32)
    w1 = rng.standard_normal((96, 16)).astype(np.float32)
    wd = rng.standard_normal((96, 3, 3)).astype(np.float32)
    b1, b2 = rng.standard_normal(96).astype(np.float32), rng.standard_normal(96).astype(np.float32)
    block = _fast_pointwise.PointwiseDepthwise(_fast_pointwise.pack_weight(w1), 96, b1, (True, 0.0, 6.0), wd, b2,
                                               (2, 2), (True, 0.0, 6.0))  # fmt: skip
    want = block(x, (1, 1), (10, 10))
    _, rb, pt, pl, rounds, _ = block._plan(x.shape, (1, 1), (10, 10))
    y = np.empty_like(want)
    args = (x, *block._pw, *block._dw, block.stride, pt, pl, *block._after, y, rb, False, 0, rounds)
    sync = np.zeros(2, np.int64)
    kernel = _fast_pointwise._pointwise_depthwise
    leads = (True, False) if order == "lead-first" else (False, True)
    assert all(kernel(*args, sync, lead) for lead in leads)
    assert list(sync) == [2 * rounds + 2, 2 * rounds]  # every unit once, each call one claim past the end
    np.testing.assert_array_equal(y, want)


def test_round_channels():
    """Rounds fill ROUND_FLOATS of scratch in whole tiles of channels, at least one tile, at most every channel
    (per part)."""
    rc, mr = _fast_pointwise.round_channels, _fast_pointwise._MR
    assert rc(96, 112 * 112) == _fast_pointwise.ROUND_FLOATS // (112 * 112) // mr * mr
    assert rc(960, 49) == 960 and rc(961, 49) == 966 and rc(960, 49, 2) == 480
    assert rc(30, 10**7) == mr


# activation (ops/fused.py's names and parameters): applied by the compiled 1 x 1 and depthwise kernels per tile
TILE_ACTIVATIONS = [
    ("silu", ()),
    ("sigmoid", ()),
    ("hard_swish", (1 / 6, 0.5)),
    ("hard_sigmoid", (0.2, 0.5)),
    ("leaky_relu", (0.1,)),
    ("gelu", (2**0.5, 1.0)),
]


@pytest.mark.parametrize("act", TILE_ACTIVATIONS, ids=lambda a: a[0])
@pytest.mark.parametrize("layer", ["pointwise", "depthwise"])
def test_activation_in_the_kernels_is_the_epilogue_bit_for_bit(act, layer, monkeypatch):
    """The compiled 1 x 1 and depthwise kernels with a following activation (what the fused block applies while
    the outputs are in cache) give what their output through the epilogue pass gives, bit for bit: the same
    function of each value, over spans that cross column blocks, planes and the 2 parts of a split."""
    from stdops.ops import _fast_dwtiles, _fast_epilogue, fused

    if layer == "depthwise" and not _fast_dwtiles.TILES_OK:
        pytest.skip("the depthwise tiles need AVX-512")
    code = fused.activation_of(*act).code()
    none = (False, 0.0, 0.0)
    monkeypatch.setattr(_fast_pointwise, "_SPLIT_FLOPS", 0)  # 2 parts (the second from a column block inside)
    if layer == "pointwise":
        x = RNG.standard_normal((2, 12, 31, 13)).astype(np.float32).reshape(2, 12, -1) * np.float32(3)
        x[0, 1, 7] = np.nan
        w = RNG.standard_normal((20, 12)).astype(np.float32)
        b = RNG.standard_normal(20).astype(np.float32)
        wp = _fast_pointwise.pack_weight(w)
        got = _fast_pointwise.pointwise(x, wp, 20, b, none, code)
        want = _fast_pointwise.pointwise(x, wp, 20, b, none)
    else:
        x = RNG.standard_normal((2, 40, 13, 11)).astype(np.float32) * np.float32(3)
        x[1, 3, 2, 2] = np.inf
        w = RNG.standard_normal((40, 3, 3)).astype(np.float32)
        args = (x, w, None, (1, 1), (1, 1), (13, 11), none)
        got = _fast_dwtiles.depthwise_tiles(*args, code)
        want = _fast_dwtiles.depthwise_tiles(*args)
    want = _fast_epilogue.epilogue(want, None, code, None, (0, 0.0, 0.0))
    np.testing.assert_array_equal(got, want)
