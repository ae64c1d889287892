"""Each optimizer pass on a small model built for it: the rewrite happens (the optimized plan's kernels say so),
the result matches onnxruntime's (the oracle) and the written plan's, and what must not be rewritten is not."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import stdops.onnx as so
from stdops.graph import Node, Plan
from stdops.ops.bind import bind
from stdops.ops.shape import reshape as reshape_kernel
from stdops.ops.shape import shape as shape_kernel
from stdops.optimize import optimize

from .test_agreement import _hook, agree

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(7)


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8):
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def check(m, feeds, expect_kernels=(), absent_kernels=()):
    ours = so.load(m)
    so_opts = ort.SessionOptions()
    so_opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so_opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    want = dict(zip(names, sess.run(None, feeds)))
    got = ours.run(feeds)
    written = ours.run(feeds, hook=_hook)
    agree(got, written)
    for k in names:
        np.testing.assert_allclose(got[k], want[k], rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(want[k]).max())))
    kernels = [n.kernels[0] for n in ours.plan.as_run.nodes if n.kernels]
    for k in expect_kernels:
        assert k in kernels, kernels
    for k in absent_kernels:
        assert k not in kernels, kernels
    return ours


def w(*shape, scale=0.3):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


X = ("x", [1, 8, 10, 10])


def conv(inp="x", out="c", cout=8, cin=8, k=3, group=1, bias=True, name="W"):
    ins = [inp, name] + ([name + "b"] if bias else [])
    inits = [(name, w(cout, cin // group, k, k))] + ([(name + "b", w(cout))] if bias else [])
    node = helper.make_node("Conv", ins, [out], pads=[k // 2] * 4, group=group)
    return node, inits


ACTIVATIONS = {
    "relu": ([helper.make_node("Relu", ["c"], ["y"])], []),
    "clip": ([helper.make_node("Clip", ["c", "lo", "hi"], ["y"])], [("lo", np.float32(0)), ("hi", np.float32(6))]),
    "leaky": ([helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.1)], []),
    "sigmoid": ([helper.make_node("Sigmoid", ["c"], ["y"])], []),
    "silu": ([helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["s", "c"], ["y"])], []),
    "hardsigmoid": ([helper.make_node("HardSigmoid", ["c"], ["y"], alpha=0.3, beta=0.4)], []),
    "hardswish": ([helper.make_node("HardSwish", ["c"], ["y"])], []),
}


@pytest.mark.parametrize("act", sorted(ACTIVATIONS))
@pytest.mark.parametrize("group", [1, 8])
def test_conv_activation_is_one_step(act, group):
    c, inits = conv(group=group)
    nodes, more = ACTIVATIONS[act]
    m = model([c, *nodes], [X], ["y"], inits + more)
    absent = {"relu", "clip", "leaky_relu", "sigmoid", "hard_sigmoid", "hard_swish", "mul", "conv"}
    check(m, {"x": w(1, 8, 10, 10, scale=3)}, ["conv_act"], absent)


def test_batchnorm_folds_into_the_conv_and_the_residual_add_and_relu_fuse():
    c, inits = conv(bias=False)
    bn = helper.make_node("BatchNormalization", ["c", "s", "b", "mu", "var"], ["n"], epsilon=1e-3)
    relu = helper.make_node("Relu", ["n"], ["r"])
    c2, inits2 = conv("r", "c2", name="W2")
    add = helper.make_node("Add", ["x", "c2"], ["a"])
    out = helper.make_node("Relu", ["a"], ["y"])
    stats = [("s", w(8) + 1), ("b", w(8)), ("mu", w(8)), ("var", np.abs(w(8)) + 0.5)]
    m = model([c, bn, relu, c2, add, out], [X], ["y"], inits + stats + inits2)
    ours = check(m, {"x": w(1, 8, 10, 10, scale=2)}, ["conv_act"], {"batch_normalization", "relu", "add"})
    assert len(ours.plan.as_run.nodes) == 2


def test_a_value_read_twice_is_not_fused_away():
    c, inits = conv()
    nodes = [c, helper.make_node("Relu", ["c"], ["y"]), helper.make_node("Sigmoid", ["c"], ["z"])]
    ours = check(so_model := model(nodes, [X], ["y", "z"], inits), {"x": w(1, 8, 10, 10)}, ["relu", "sigmoid"])
    assert so_model is not None and "c" in ours.plan.as_run.names()


def test_matmul_bias_activation_residual():
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Add", ["r", "x"], ["y"]),
    ]
    m = model(nodes, [("x", [2, 5, 16])], ["y"], [("W", w(16, 16)), ("b", w(16))])
    check(m, {"x": w(2, 5, 16, scale=2)}, ["matmul_act"], {"mat_mul", "add", "relu"})


def test_gemm_after_flatten_is_a_matmul_step():
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"]),
        helper.make_node("Gemm", ["f", "W", "C"], ["g"], transB=1, alpha=0.5),
        helper.make_node("Relu", ["g"], ["y"]),
    ]
    m = model(nodes, [("x", ["n", 4, 3])], ["y"], [("W", w(7, 12)), ("C", w(7))])
    check(m, {"x": w(3, 4, 3)}, ["matmul_act"], {"gemm", "relu"})


def test_shape_arithmetic_folds_and_transposes_cancel():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Transpose", ["x"], ["t1"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["t1"], ["t2"], perm=[0, 3, 1, 2]),
        helper.make_node("Identity", ["t2"], ["t3"]),
        helper.make_node("Reshape", ["t3", "target"], ["y"]),
    ]
    inits = [("i0", np.array(0, np.int64)), ("ax", np.array([0], np.int64)), ("minus1", np.array([-1], np.int64))]
    ours = check(model(nodes, [X], ["y"], inits), {"x": w(1, 8, 10, 10)})
    steps = ours.plan.as_run.nodes
    assert [n.kernels for n in steps if not n.check] == [("reshape",)]  # Shape..Concat folded, Transposes gone
    assert [n.inputs for n in steps if n.check] == [["x"]]  # the guard of the folded Shape


def test_a_folded_shape_that_does_not_hold_falls_back_to_the_written_plan():
    """The guard of a folded Shape: given a wrong static shape, the run is the written plan's."""
    sh, rs = bind(shape_kernel), bind(reshape_kernel)
    nodes = [
        Node("shape", "Shape", sh.fn, ["x"], ["s"], bound=sh),
        Node("r", "Reshape", rs.fn, ["x", "s"], ["y"], bound=rs),
    ]
    plan = optimize(Plan(nodes, ["x"], ["y"]), shapes={"x": (2, 3)})
    assert plan.fused is not None and plan.fused.constants()["s"].tolist() == [2, 3]
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    np.testing.assert_array_equal(plan.run({"x": x})["y"], x)
    np.testing.assert_array_equal(plan.run({"x": x[:2, :3]})["y"], x[:2, :3])


def test_an_initializer_a_feed_may_override_is_not_folded():
    """ONNX IR 3: an initializer listed as a graph input is a default the caller may replace."""
    nodes = [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    m = model(
        nodes, [("a", [3]), ("b", [3])], ["y"], [("a", np.ones(3, np.float32)), ("b", np.ones(3, np.float32))], ir=3
    )
    m.opset_import[0].version = 9
    ours = so.load(m)
    assert ours.run({})["y"].tolist() == [2, 2, 2]
    assert ours.run({"a": np.full(3, -5, np.float32)})["y"].tolist() == [0, 0, 0]


@pytest.mark.parametrize("half_first", [True, False])
def test_matmul_erf_gelu_is_one_step(half_first):
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Div", ["a", "sq2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
    ]
    if half_first:
        nodes += [helper.make_node("Mul", ["half", "e1"], ["h"]), helper.make_node("Mul", ["a", "h"], ["y"])]
    else:
        nodes += [helper.make_node("Mul", ["a", "e1"], ["h"]), helper.make_node("Mul", ["h", "half"], ["y"])]
    consts = [("sq2", np.float32(np.sqrt(2))), ("one", np.float32(1)), ("half", np.float32(0.5))]
    m = model(nodes, [("x", [3, 7, 16])], ["y"], [("W", w(16, 24)), ("b", w(24))] + consts)
    check(m, {"x": w(3, 7, 16, scale=3)}, ["matmul_act"], {"erf", "div", "mul", "add", "mat_mul"})


def test_the_other_gelu_spelling_is_one_step_too():
    """u = x * (1 / sqrt 2), and (0.5 x) * (erf(u) + 1): benchmarks/models.py's transformer."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["a"]),
        helper.make_node("Mul", ["a", "isq2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Mul", ["a", "half"], ["h"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["h", "e1"], ["y"]),
    ]
    consts = [("isq2", np.float32(1 / np.sqrt(2))), ("one", np.float32(1)), ("half", np.float32(0.5))]
    m = model(nodes, [("x", [5, 16])], ["y"], [("W", w(16, 24))] + consts)
    check(m, {"x": w(5, 16, scale=3)}, ["matmul_act"], {"erf", "mul", "add", "mat_mul"})


def test_a_weight_read_through_an_identity_is_prepared():
    """Exporters share one initializer between layers through Identity nodes: once the cancel pass removes them,
    the LayerNormalization and the Reshape see constants and are bound to their prepared (compiled) steps."""
    nodes = [
        helper.make_node("Identity", ["s0"], ["s1"]),
        helper.make_node("Identity", ["shape0"], ["shape1"]),
        helper.make_node("LayerNormalization", ["x", "s1", "b0"], ["n"], epsilon=1e-5),
        helper.make_node("Reshape", ["n", "shape1"], ["y"]),
    ]
    inits = [("s0", w(16) + 1), ("b0", w(16)), ("shape0", np.array([6, -1], np.int64))]
    m = model(nodes, [("x", [3, 4, 16])], ["y"], inits)
    ours = check(m, {"x": w(3, 4, 16, scale=2.0)}, expect_kernels=("layer_norm_rows",), absent_kernels=("identity",))
    bound = {n.kernels[0]: n.bound for n in ours.plan.as_run.nodes}
    assert bound["layer_norm_rows"].prepared and bound["reshape"].prepared


def _squeeze_excite(mul_order, act2, bias2=True, w2_out=8, project=None, batch=1, side=10):
    """GlobalAveragePool -> 1x1 Conv -> Relu -> 1x1 Conv -> act2 -> Mul by x (MobileNetV3's / EfficientNet's SE);
    ``project``: (bias, residual) of a 1x1 Conv of the result to 6 channels (+ x's first 6 channels as residual)."""
    gap = helper.make_node("GlobalAveragePool", ["x"], ["p"])
    c1 = helper.make_node("Conv", ["p", "W1", "W1b"], ["h"])
    r = helper.make_node("Relu", ["h"], ["hr"])
    c2 = helper.make_node("Conv", ["hr", "W2"] + (["W2b"] if bias2 else []), ["e"])
    a2 = {
        "hardsigmoid": [helper.make_node("HardSigmoid", ["e"], ["s"], alpha=1 / 6, beta=0.5)],
        "sigmoid": [helper.make_node("Sigmoid", ["e"], ["s"])],
    }[act2]
    mul = helper.make_node("Mul", ["x", "s"] if mul_order else ["s", "x"], ["y"])
    inits = [("W1", w(4, 8, 1, 1)), ("W1b", w(4)), ("W2", w(w2_out, 4, 1, 1))] + ([("W2b", w(w2_out))] if bias2 else [])
    nodes = [gap, c1, r, c2, *a2, mul]
    if project is not None:
        bias, residual = project
        mul.output[0] = "se"
        inits += [("W3", w(8, 8, 1, 1))] + ([("W3b", w(8))] if bias else [])
        nodes.append(helper.make_node("Conv", ["se", "W3"] + (["W3b"] if bias else []), ["c3"]))
        nodes.append(
            helper.make_node("Add", ["c3", "x"], ["y"]) if residual else helper.make_node("Relu", ["c3"], ["y"])
        )
    return model(nodes, [("x", [batch, 8, side, side])], ["y"], inits)


@pytest.mark.parametrize("mul_order,act2,bias2", [(True, "hardsigmoid", True), (False, "sigmoid", False)])
def test_squeeze_excite_is_one_step(mul_order, act2, bias2):
    m = _squeeze_excite(mul_order, act2, bias2)
    absent = {"global_average_pool", "conv_act", "conv", "relu", "hard_sigmoid", "sigmoid", "mul"}
    ours = check(m, {"x": w(1, 8, 10, 10, scale=3)}, ["squeeze_excite"], absent)
    assert len(ours.plan.as_run.nodes) == 1


def test_squeeze_excite_that_broadcasts_otherwise_is_left_alone():
    """A second convolution of one output channel scales every channel by one value: no SE step."""
    ours = check(_squeeze_excite(True, "sigmoid", w2_out=1), {"x": w(1, 8, 10, 10)}, ["mul"], ["squeeze_excite"])
    assert len(ours.plan.as_run.nodes) > 1


def test_squeeze_excite_plain_form_is_the_chain():
    """The step's plain form (what a non-float32 X runs) against onnxruntime's float64 run of the chain."""
    m = _squeeze_excite(True, "hardsigmoid")
    from stdops.ops import fused

    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    x = w(1, 8, 10, 10, scale=3)
    attrs = dict(activation="relu", post_activation="hard_sigmoid", post_activation_params=(1 / 6, 0.5))
    args = [inits[k].astype(np.float64) for k in ("W1", "W1b", "W2", "W2b")]
    got = fused.squeeze_excite(x.astype(np.float64), *args, **attrs)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias,residual,side", [(True, True, 10), (False, False, 10), (True, True, 2)])
def test_squeeze_excite_and_the_conv_after_it_are_one_step(bias, residual, side):
    """The block's product folded into the 1x1 convolution that reads it (with the residual Add or a Relu); on
    a 2 x 2 map (fewer positions than output channels) the product scales X instead of the weights."""
    m = _squeeze_excite(True, "hardsigmoid", project=(bias, residual), batch=2, side=side)
    absent = {"global_average_pool", "conv_act", "conv", "relu", "hard_sigmoid", "mul", "add", "squeeze_excite"}
    ours = check(m, {"x": w(2, 8, side, side, scale=3)}, ["squeeze_excite_conv"], absent)
    assert len(ours.plan.as_run.nodes) == 1


def _attention_scores(scaled):
    return [
        *scaled,
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"]),
    ]


@pytest.mark.parametrize(
    "spelling",
    ["both inputs", "one input", "the product", "a division", "the scalar first"],
)
def test_the_attention_scale_rides_in_the_softmax(spelling):
    """Softmax(MatMul(Q * s1, K * s2)), Softmax(MatMul(Q, K) * s) or / c: the Mul / Div nodes leave the plan, the
    softmax step takes the product of the scales (what torch and timm export)."""
    if spelling == "both inputs":
        nodes = [
            helper.make_node("Mul", ["q", "c"], ["qs"]),
            helper.make_node("Mul", ["k", "c"], ["ks"]),
            helper.make_node("MatMul", ["qs", "ks"], ["s"]),
        ]
    elif spelling == "one input":
        nodes = [helper.make_node("Mul", ["k", "c"], ["ks"]), helper.make_node("MatMul", ["q", "ks"], ["s"])]
    elif spelling == "a division":
        nodes = [helper.make_node("MatMul", ["q", "k"], ["m"]), helper.make_node("Div", ["m", "d"], ["s"])]
    elif spelling == "the scalar first":
        nodes = [helper.make_node("MatMul", ["q", "k"], ["m"]), helper.make_node("Mul", ["c0", "m"], ["s"])]
    else:
        nodes = [helper.make_node("MatMul", ["q", "k"], ["m"]), helper.make_node("Mul", ["m", "c0"], ["s"])]
    consts = [("c", np.float32(0.3535534)), ("c0", np.float32(0.125)), ("d", np.float32(8.0))]
    m = model(_attention_scores(nodes), [("q", [2, 12, 16]), ("k", [2, 16, 12]), ("v", [2, 12, 8])], ["y"], consts)
    feeds = {"q": w(2, 12, 16, scale=1), "k": w(2, 16, 12, scale=1), "v": w(2, 12, 8)}
    # the softmax step carries the scale; with the MatMuls around it, that step is the attention step
    ours = check(m, feeds, ["attention_heads"], {"mul", "div", "softmax_rows"})
    (sm,) = [n for n in ours.plan.as_run.nodes if n.kernels == ("attention_heads",)]
    want = float(np.float32(0.3535534))
    assert sm.bound.attrs["scale"] == pytest.approx(want if spelling == "one input" else 0.125, rel=1e-6)


def test_a_scale_that_is_no_positive_scalar_stays():
    """A negative or per-column scale, or a scaled value read twice, is no softmax scale: the Mul stays."""
    for c, reads_twice in ((np.float32(-0.5), False), (w(12), False), (np.float32(0.5), True)):
        nodes = [helper.make_node("MatMul", ["q", "k"], ["m"]), helper.make_node("Mul", ["m", "c"], ["s"])]
        outs = ["y", "s"] if reads_twice else ["y"]
        m = model(
            _attention_scores(nodes), [("q", [2, 12, 16]), ("k", [2, 16, 12]), ("v", [2, 12, 8])], outs, [("c", c)]
        )
        feeds = {"q": w(2, 12, 16, scale=1), "k": w(2, 16, 12, scale=1), "v": w(2, 12, 8)}
        ours = check(m, feeds, ["softmax_rows", "mul"])
        (sm,) = [n for n in ours.plan.as_run.nodes if n.kernels == ("softmax_rows",)]
        assert sm.bound.attrs.get("scale", 1.0) == 1.0


def test_a_transpose_that_moves_only_unit_axes_is_a_reshape():
    """Transpose(perm 1, 0, 2) of a [1, n, d] value (torch's batch-first to sequence-first with batch 1) keeps
    the elements' order: it becomes a Reshape (a view); a Transpose that moves two real axes stays."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
        helper.make_node("MatMul", ["t", "W"], ["m"]),
        helper.make_node("Transpose", ["m"], ["u"], perm=[2, 1, 0]),
        helper.make_node("Relu", ["u"], ["y"]),
    ]
    m = model(nodes, [("x", [1, 6, 8])], ["y"], [("W", w(8, 5))])
    ours = check(m, {"x": w(1, 6, 8)}, ["reshape", "transpose"])
    kernels = [n.kernels[0] for n in ours.plan.as_run.nodes if n.kernels]
    assert kernels.count("transpose") == 1 and kernels.index("reshape") < kernels.index("transpose")


def _inverted_residual(stride, act1, act2, read_twice=False):
    """1x1 Conv 8 -> 24 (+ act1) -> depthwise 3x3 Conv of it (+ act2) -> 1x1 Conv 24 -> 8 (+ x at stride 1):
    MobileNetV2's block on a 12 x 12 map."""
    acts = {
        "clip": lambda i, o: [helper.make_node("Clip", [i, "lo", "hi"], [o])],
        "relu": lambda i, o: [helper.make_node("Relu", [i], [o])],
        "": lambda i, o: [helper.make_node("Identity", [i], [o])],
        "silu": lambda i, o: [helper.make_node("Sigmoid", [i], [i + "s"]), helper.make_node("Mul", [i, i + "s"], [o])],
        "hardswish": lambda i, o: [helper.make_node("HardSwish", [i], [o])],
    }
    nodes = [helper.make_node("Conv", ["x", "We", "Web"], ["e"]), *acts[act1]("e", "ea")]
    nodes.append(helper.make_node("Conv", ["ea", "Wd", "Wdb"], ["d"], group=24, pads=[1] * 4, strides=[stride] * 2))
    nodes += [*acts[act2]("d", "da"), helper.make_node("Conv", ["da", "Wp"], ["p"])]
    nodes.append(helper.make_node("Add", ["x", "p"], ["y"]) if stride == 1 else helper.make_node("Relu", ["p"], ["y"]))
    outputs = ["y", "ea"] if read_twice else ["y"]
    inits = [("We", w(24, 8, 1, 1)), ("Web", w(24)), ("Wd", w(24, 1, 3, 3)), ("Wdb", w(24)), ("Wp", w(8, 24, 1, 1))]
    inits += [("lo", np.float32(0)), ("hi", np.float32(6))]
    return model(nodes, [("x", [2, 8, 12, 12])], outputs, inits)


@pytest.mark.parametrize(
    "stride,act1,act2",
    [(1, "clip", "clip"), (2, "relu", ""), (1, "", "relu"), (2, "silu", "silu"), (1, "hardswish", "relu")],
)
def test_expansion_and_its_depthwise_are_one_step(stride, act1, act2):
    ours = check(_inverted_residual(stride, act1, act2), {"x": w(2, 8, 12, 12, scale=3)}, ["expand_depthwise_project"])
    assert len(ours.plan.as_run.nodes) == 1  # the block, its projection's residual / activation included


def test_an_expansion_read_twice_keeps_its_own_step():
    m = _inverted_residual(1, "clip", "clip", read_twice=True)
    check(m, {"x": w(2, 8, 12, 12, scale=3)}, ["conv_act"], ["expand_depthwise", "expand_depthwise_project"])
