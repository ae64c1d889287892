"""The attention pass (stdops/optimize/attention.py) and its step (stdops/ops/attention.py ``attention_heads``):
the head-split attention of exporters becomes one step that matches onnxruntime (the oracle) and the plan as
written, with and without the compiled kernels; what must stay observable is not fused; the step's compiled
path gives the bits of its kernels' form whatever the thread count."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import stdops.ops._blas as blas
from stdops.errors import KernelError, StdopsError
from stdops.ops import _fast
from stdops.ops.attention import attention_heads
from stdops.ops.bind import bind

from .test_passes import check, model

RNG = np.random.default_rng(11)


def _f(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _heads_model(seq=10, heads=3, dh=8, outputs=("y",), extra=()):
    """benchmarks/models.py's attention: [1, S, H*dh] projections split into heads by Reshape + Transpose, K
    transposed to [1, H, dh, S], the scores scaled by a Mul, Softmax, times V, the heads merged back."""
    d = heads * dh
    nodes = []
    for n in "qkv":
        nodes.append(helper.make_node("Reshape", [n, "split"], [n + "r"]))
    nodes += [
        helper.make_node("Transpose", ["qr"], ["qt"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["kr"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["vr"], ["vt"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["qt", "kt"], ["m"]),
        helper.make_node("Mul", ["m", "c"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "vt"], ["o"]),
        helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ot", "merge"], ["y"]),
        *extra,
    ]
    consts = [
        ("split", np.array([1, seq, heads, dh], np.int64)),
        ("merge", np.array([1, seq, d], np.int64)),
        ("c", np.float32(1 / np.sqrt(dh))),
    ]
    m = model(nodes, [(n, [1, seq, d]) for n in "qkv"], list(outputs), consts)
    return m, {n: _f(1, seq, d, scale=1.5) for n in "qkv"}


def test_the_head_split_attention_is_one_step(kernels):  # noqa: F811
    m, feeds = _heads_model()
    ours = check(m, feeds, ["attention_heads"], {"transpose", "softmax_rows", "mat_mul", "mul"})
    (step,) = [n for n in ours.plan.as_run.nodes if n.kernels == ("attention_heads",)]
    a = step.bound.attrs
    assert (a["a_perm"], a["b_perm"], a["v_perm"], a["out_perm"]) == ((0, 2, 1, 3), (0, 2, 3, 1), (0, 2, 1, 3)) + (
        (0, 2, 1, 3),
    )
    assert a["scale"] == pytest.approx(1 / np.sqrt(8), rel=1e-6)


def test_timm_spelling_only_k_transposed(kernels):  # noqa: F811
    """timm's ViT: Q, K, V already [B, H, S, dh]; K^T by Transpose(0, 1, 3, 2), the output Transpose(0, 2, 1, 3)."""
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["m"]),
        helper.make_node("Mul", ["m", "c"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["o"]),
        helper.make_node("Transpose", ["o"], ["y"], perm=[0, 2, 1, 3]),
    ]
    shp = [2, 3, 7, 8]
    m = model(nodes, [(n, shp) for n in "qkv"], ["y"], [("c", np.float32(0.35))])
    ours = check(m, {n: _f(*shp, scale=2) for n in "qkv"}, ["attention_heads"], {"transpose", "softmax_rows"})
    (step,) = [n for n in ours.plan.as_run.nodes if n.kernels == ("attention_heads",)]
    assert step.bound.attrs["b_perm"] == (0, 1, 3, 2) and step.bound.attrs["out_perm"] == (0, 2, 1, 3)
    assert "a_perm" not in step.bound.attrs and "v_perm" not in step.bound.attrs


@pytest.mark.parametrize("seen", ["s", "p", "o", "kt"])
def test_a_value_read_elsewhere_stays(seen):
    """The scores, the probabilities, the product or a transposed operand asked for as a graph output: what
    the step would hide stays a value of its own."""
    m, feeds = _heads_model(outputs=("y", seen))
    ours = check(m, feeds)
    plan = ours.plan.as_run
    assert seen in plan.names()
    if seen in ("s", "p"):
        assert not any(n.kernels == ("attention_heads",) for n in plan.nodes)
    if seen == "o":  # the merge Transpose stays outside the step
        (step,) = [n for n in plan.nodes if n.kernels == ("attention_heads",)]
        assert "out_perm" not in step.bound.attrs and step.outputs == ["o"]
    if seen == "kt":  # K's Transpose stays a node, the step reads its result
        (step,) = [n for n in plan.nodes if n.kernels == ("attention_heads",)]
        assert "b_perm" not in step.bound.attrs and step.inputs[1] == "kt"


ATTRS = dict(a_perm=(0, 2, 1, 3), b_perm=(0, 2, 3, 1), v_perm=(0, 2, 1, 3), out_perm=(0, 2, 1, 3), axis=-1)


@pytest.mark.skipif(_fast.numba is None, reason="numba (the optional 'fast' extra) is not installed")
@pytest.mark.parametrize("seq,heads,dh", [(1, 1, 1), (5, 2, 3), (33, 4, 16), (130, 6, 64)])
def test_the_compiled_step_is_its_kernels_form_at_any_thread_count(monkeypatch, seq, heads, dh):
    q, k, v = (_f(1, seq, heads, dh, scale=3) for _ in range(3))
    attrs = dict(ATTRS, scale=0.3)
    want = attention_heads(q, k, v, **attrs)
    step = bind(attention_heads, attrs, (None, None, None)).fn
    got = []
    for threads in (1, 2):
        monkeypatch.setattr(blas, "_API", (lambda t=threads: t, lambda n: None))
        got.append(step(q, k, v))
    assert got[0].shape == want.shape == (1, seq, heads, dh) and got[0].flags.c_contiguous
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_allclose(got[0], want, rtol=1e-6, atol=1e-6 * float(np.abs(want).max()))


def test_shapes_the_compiled_path_does_not_take_run_the_kernels():
    """A broadcast batch axis or a softmax over another axis: the kernels' form decides (here: its result)."""
    q, k, v = _f(2, 3, 5, 4), _f(1, 3, 4, 5), _f(2, 3, 5, 6)
    step = bind(attention_heads, dict(scale=1.0, axis=-1, a_perm=(), b_perm=(), v_perm=()), (None, None, None)).fn
    np.testing.assert_allclose(step(q, k, v), attention_heads(q, k, v), rtol=1e-6)
    k2 = _f(2, 3, 4, 5)
    step = bind(attention_heads, dict(scale=1.0, axis=2), (None, None, None)).fn
    np.testing.assert_array_equal(step(q, k2, v), attention_heads(q, k2, v, axis=2))


def test_a_scale_that_is_no_positive_number_is_refused():
    with pytest.raises(StdopsError, match="positive finite"):
        bind(attention_heads, dict(ATTRS, scale=float("nan")), (None, None, None))


def _timm_qkv_model(outputs=("y",), extra=()):
    """timm's ViT: one QKV projection [B, N, 3 C] -> Reshape [B, N, 3, H, dh] -> Transpose(2, 0, 3, 1, 4) ->
    Split into three -> Squeeze -> attention."""
    b, n, h, dh = 2, 9, 3, 8
    nodes = [
        helper.make_node("Reshape", ["qkv", "shape5"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[2, 0, 3, 1, 4]),
        helper.make_node("Split", ["t", "sizes"], ["s0", "s1", "s2"], axis=0),
        *[helper.make_node("Squeeze", [f"s{i}", "zero"], [f"h{i}"]) for i in range(3)],
        helper.make_node("Transpose", ["h1"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["h0", "kt"], ["m"]),
        helper.make_node("Mul", ["m", "c"], ["sc"]),
        helper.make_node("Softmax", ["sc"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "h2"], ["o"]),
        helper.make_node("Transpose", ["o"], ["y"], perm=[0, 2, 1, 3]),
        *extra,
    ]
    consts = [
        ("shape5", np.array([b, n, 3, h, dh], np.int64)),
        ("sizes", np.array([1, 1, 1], np.int64)),
        ("zero", np.array([0], np.int64)),
        ("c", np.float32(dh**-0.5)),
    ]
    m = model(nodes, [("qkv", [b, n, 3 * h * dh])], list(outputs), consts)
    return m, {"qkv": _f(b, n, 3 * h * dh, scale=2)}


def _torch_qkv_model(outputs=("y",), extra=()):
    """torch.nn.MultiheadAttention's export: [S, 1, 3 E] -> Reshape [S, 1, 3, E] -> Unsqueeze 0 ->
    Transpose(3, 1, 2, 0, 4) -> Squeeze -> Gather 0 / 1 / 2 -> Reshape [S, H, dh] -> Transpose -> attention."""
    s, h, dh = 7, 2, 4
    e = h * dh
    nodes = [
        helper.make_node("Reshape", ["qkv", "shape4"], ["v4"]),
        helper.make_node("Unsqueeze", ["v4", "zero"], ["u"]),
        helper.make_node("Transpose", ["u"], ["t"], perm=[3, 1, 2, 0, 4]),
        helper.make_node("Squeeze", ["t", "three"], ["sq"]),
    ]
    for i, perm in enumerate(([1, 0, 2], [1, 2, 0], [1, 0, 2])):
        nodes += [
            helper.make_node("Gather", ["sq", f"i{i}"], [f"g{i}"], axis=0),
            helper.make_node("Reshape", [f"g{i}", "heads"], [f"r{i}"]),
            helper.make_node("Transpose", [f"r{i}"], [f"a{i}"], perm=perm),
        ]
    nodes += [
        helper.make_node("MatMul", ["a0", "a1"], ["m"]),
        helper.make_node("Div", ["m", "d"], ["sc"]),
        helper.make_node("Softmax", ["sc"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "a2"], ["y"]),
        *extra,
    ]
    consts = [
        ("shape4", np.array([s, 1, 3, e], np.int64)),
        ("heads", np.array([s, h, dh], np.int64)),
        ("zero", np.array([0], np.int64)),
        ("three", np.array([3], np.int64)),
        ("d", np.float32(2.0)),
        *[(f"i{i}", np.array(i, np.int64)) for i in range(3)],
    ]
    m = model(nodes, [("qkv", [s, 1, 3 * e])], list(outputs), consts)
    return m, {"qkv": _f(s, 1, 3 * e, scale=2)}


@pytest.mark.parametrize("build", [_timm_qkv_model, _torch_qkv_model], ids=["timm", "torch"])
def test_the_head_split_of_a_qkv_projection_is_views(kernels, build):  # noqa: F811
    m, feeds = build()
    ours = check(m, feeds, ["attention_heads", "transpose_view"], {"transpose", "split", "gather", "softmax_rows"})
    got = {n.kernels[0] for n in ours.plan.as_run.nodes}
    assert ("split_view" in got) == (build is _timm_qkv_model) and ("gather_view" in got) == (build is _torch_qkv_model)


@pytest.mark.parametrize("build", [_timm_qkv_model, _torch_qkv_model], ids=["timm", "torch"])
def test_a_head_value_read_elsewhere_keeps_its_copies(build):
    """The transposed projection also read by an Add (or asked for as an output): its Transpose stays a copy
    (what is read from it on the way to the attention may still be views of that copy)."""
    for outputs, extra in ((("y", "w"), [helper.make_node("Add", ["t", "t"], ["w"])]), (("y", "t"), [])):
        m, feeds = build(outputs=outputs, extra=extra)
        ours = check(m, feeds, ["attention_heads"])
        (t,) = [n for n in ours.plan.as_run.nodes if n.outputs == ["t"]]
        assert t.kernels == ("transpose",)


def test_the_view_steps_are_the_kernels_values_and_errors():
    from stdops.ops.attention import gather_view, split_view, transpose_view
    from stdops.ops.indexing import gather
    from stdops.ops.shape import split, transpose

    x = _f(3, 4, 5)
    assert np.shares_memory(transpose_view(x, perm=(2, 0, 1)), x)
    np.testing.assert_array_equal(transpose_view(x, perm=(2, 0, 1)), transpose(x, perm=(2, 0, 1)))
    np.testing.assert_array_equal(transpose_view(x), transpose(x))
    for i in (0, 2, -1, -3):
        got = gather_view(x, np.array(i, np.int64), axis=0)
        assert np.shares_memory(got, x)
        np.testing.assert_array_equal(got, gather(x, np.array(i, np.int64), axis=0))
    np.testing.assert_array_equal(gather_view(x, np.array([1, 0]), axis=1), gather(x, np.array([1, 0]), axis=1))
    for sizes, n in ((np.array([1, 3], np.int64), None), (None, 2), (None, 4)):
        want = split(x, sizes, axis=1, num_outputs=n) if sizes is None else split(x, sizes, axis=1)
        got = split_view(x, sizes, axis=1, num_outputs=n) if sizes is None else split_view(x, sizes, axis=1)
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
    for bad in (
        lambda f: f["t"](x, perm=(0, 0, 1)),
        lambda f: f["g"](x, np.array(3, np.int64), axis=0),
        lambda f: f["s"](x, np.array([2, 3], np.int64), axis=1),
    ):
        with pytest.raises(KernelError) as ours:
            bad({"t": transpose_view, "g": gather_view, "s": split_view})
        with pytest.raises(KernelError) as theirs:
            bad({"t": transpose, "g": gather, "s": split})
        assert str(ours.value) == str(theirs.value)
