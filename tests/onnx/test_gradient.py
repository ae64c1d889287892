"""The ai.onnx.preview.training Gradient operator: every vector-Jacobian rule against central finite
differences (float64, small random inputs), broadcasting, values used twice, outer values, optional
outputs, and the load-time errors."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import stdops.onnx
from stdops.errors import ModelFormatError

TRAIN = helper.make_opsetid("ai.onnx.preview.training", 1)
R = np.random.default_rng(0)


def _r(*shape, lo=-1.0, hi=1.0):
    return R.uniform(lo, hi, shape).astype(np.float64)


def _away(*shape):
    """Values with |v| in [0.3, 1]: no kinks of Relu/Abs/Clip nearby."""
    return _r(*shape, lo=0.3, hi=1.0) * R.choice([-1.0, 1.0], shape)


def _vi(name, arr):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.asarray(arr).dtype), np.shape(arr))


def _model(nodes, feeds, outputs, inits=None, opset=17):
    g = helper.make_graph(
        nodes,
        "g",
        [_vi(n, v) for n, v in feeds.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in (inits or {}).items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), TRAIN])
    m.ir_version = 8
    return m


def _grad_node(xs, zs=(), y="y", inputs=None, outputs=None, name="grad"):
    kw = {"zs": list(zs)} if zs else {}
    return helper.make_node(
        "Gradient",
        list(inputs or [*xs, *zs]),
        outputs or [f"d_{x}" for x in xs],
        domain="ai.onnx.preview.training",
        name=name,
        xs=list(xs),
        y=y,
        **kw,
    )


def _numeric(fwd, feeds, x, eps=1e-6):
    """Central finite differences of sum(y) with respect to feeds[x]."""
    base = feeds[x]
    grad = np.zeros_like(base)
    flat = grad.reshape(-1)
    for i in range(base.size):  # test oracle: a loop over the few elements of a tiny input
        vals = []
        for s in (eps, -eps):
            v = base.copy().reshape(-1)
            v[i] += s
            vals.append(float(np.sum(fwd.run({**feeds, x: v.reshape(base.shape)})["y"])))
        flat[i] = (vals[0] - vals[1]) / (2 * eps)
    return grad


def _check(nodes, feeds, xs, zs=(), inits=None, opset=17, rtol=1e-6, atol=1e-7):
    m = stdops.onnx.load(_model([*nodes, _grad_node(xs, zs)], feeds, ["y", *[f"d_{x}" for x in xs]], inits, opset))
    out = m.run(feeds)
    fwd = stdops.onnx.load(_model(nodes, feeds, ["y"], inits, opset))
    for x in xs:
        got = out[f"d_{x}"]
        assert got.dtype == feeds[x].dtype and got.shape == feeds[x].shape, x
        np.testing.assert_allclose(got, _numeric(fwd, feeds, x), rtol=rtol, atol=atol, err_msg=x)
    return out


N = helper.make_node

# (id, nodes, feeds, xs, zs, inits, opset): y must be the graph value differentiated
CASES = [
    ("add_bcast_row", [N("Add", ["a", "b"], ["y"])], {"a": _r(2, 3), "b": _r(3)}, "ab", "", None, 17),
    ("add_bcast_col", [N("Add", ["a", "b"], ["y"])], {"a": _r(2, 3), "b": _r(2, 1)}, "ab", "", None, 17),
    ("sub_bcast", [N("Sub", ["a", "b"], ["y"])], {"a": _r(3), "b": _r(2, 3)}, "ab", "", None, 17),
    ("mul_bcast", [N("Mul", ["a", "b"], ["y"])], {"a": _r(2, 3), "b": _r(1, 3)}, "ab", "", None, 17),
    ("mul_scalar", [N("Mul", ["a", "b"], ["y"])], {"a": _r(2, 3), "b": _r()}, "ab", "", None, 17),
    ("div", [N("Div", ["a", "b"], ["y"])], {"a": _r(2, 3), "b": _away(2, 3)}, "ab", "", None, 17),
    ("div_bcast", [N("Div", ["a", "b"], ["y"])], {"a": _r(2, 3), "b": _away(2, 1)}, "ab", "", None, 17),
    ("neg", [N("Neg", ["a"], ["t"]), N("Mul", ["t", "b"], ["y"])], {"a": _r(4), "b": _r(4)}, "a", "b", None, 17),
    ("identity", [N("Identity", ["a"], ["t"]), N("Mul", ["t", "t"], ["y"])], {"a": _r(4)}, "a", "", None, 17),
    ("matmul", [N("MatMul", ["a", "b"], ["y"])], {"a": _r(2, 3), "b": _r(3, 4)}, "ab", "", None, 17),
    ("matmul_batch_bcast", [N("MatMul", ["a", "b"], ["y"])], {"a": _r(2, 2, 3), "b": _r(3, 4)}, "ab", "", None, 17),
    (
        "matmul_batch_both",
        [N("MatMul", ["a", "b"], ["y"])],
        {"a": _r(2, 1, 2, 3), "b": _r(3, 3, 2)},
        "ab",
        "",
        None,
        17,
    ),
    ("matmul_vec_mat", [N("MatMul", ["a", "b"], ["y"])], {"a": _r(3), "b": _r(2, 3, 4)}, "ab", "", None, 17),
    ("matmul_mat_vec", [N("MatMul", ["a", "b"], ["y"])], {"a": _r(2, 3), "b": _r(3)}, "ab", "", None, 17),
    (
        "gemm_plain",
        [N("Gemm", ["a", "b", "c"], ["y"])],
        {"a": _r(2, 3), "b": _r(3, 4), "c": _r(2, 4)},
        "abc",
        "",
        None,
        17,
    ),
    (
        "gemm_trans_alpha_beta",
        [N("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)],
        {"a": _r(3, 2), "b": _r(4, 3), "c": _r(4)},
        "abc",
        "",
        None,
        17,
    ),
    (
        "gemm_no_c",
        [N("Gemm", ["a", "b"], ["y"], transB=1, alpha=-1.5)],
        {"a": _r(2, 3), "b": _r(4, 3)},
        "ab",
        "",
        None,
        17,
    ),
    ("relu", [N("Relu", ["a"], ["y"])], {"a": _away(2, 3)}, "a", "", None, 17),
    ("sigmoid", [N("Sigmoid", ["a"], ["y"])], {"a": _r(2, 3)}, "a", "", None, 17),
    ("tanh", [N("Tanh", ["a"], ["y"])], {"a": _r(2, 3)}, "a", "", None, 17),
    ("exp", [N("Exp", ["a"], ["y"])], {"a": _r(2, 3)}, "a", "", None, 17),
    ("log", [N("Log", ["a"], ["y"])], {"a": _r(2, 3, lo=0.5, hi=2.0)}, "a", "", None, 17),
    ("sqrt", [N("Sqrt", ["a"], ["y"])], {"a": _r(2, 3, lo=0.5, hi=2.0)}, "a", "", None, 17),
    (
        "pow_const_exponent",
        [N("Pow", ["a", "e"], ["y"])],
        {"a": _r(2, 3, lo=0.5, hi=2.0)},
        "a",
        "",
        {"e": np.array(3.0)},
        17,
    ),
    ("pow_int_exponent", [N("Pow", ["a", "e"], ["y"])], {"a": _r(2, 3)}, "a", "", {"e": np.array(2, np.int64)}, 17),
    ("pow_both", [N("Pow", ["a", "b"], ["y"])], {"a": _r(2, 3, lo=0.5, hi=2.0), "b": _r(3)}, "ab", "", None, 17),
    (
        "reshape",
        [N("Reshape", ["a", "s"], ["t"]), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 3)},
        "a",
        "",
        {"s": np.array([3, 2], np.int64), "w": _r(3, 2)},
        17,
    ),
    (
        "transpose_perm",
        [N("Transpose", ["a"], ["t"], perm=[1, 2, 0]), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 3, 4)},
        "a",
        "",
        {"w": _r(3, 4, 2)},
        17,
    ),
    (
        "transpose_default",
        [N("Transpose", ["a"], ["t"]), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 3, 4)},
        "a",
        "",
        {"w": _r(4, 3, 2)},
        17,
    ),
    (
        "flatten",
        [N("Flatten", ["a"], ["t"], axis=2), N("MatMul", ["t", "w"], ["y"])],
        {"a": _r(2, 3, 2)},
        "a",
        "",
        {"w": _r(2, 3)},
        17,
    ),
    (
        "squeeze_input",
        [N("Squeeze", ["a", "ax"], ["t"]), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 1, 3)},
        "a",
        "",
        {"ax": np.array([1], np.int64), "w": _r(2, 3)},
        17,
    ),
    (
        "squeeze_attr",
        [N("Squeeze", ["a"], ["t"], axes=[0]), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(1, 3)},
        "a",
        "",
        {"w": _r(3)},
        11,
    ),
    (
        "unsqueeze",
        [N("Unsqueeze", ["a", "ax"], ["t"]), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 3)},
        "a",
        "",
        {"ax": np.array([0, -1], np.int64), "w": _r(1, 2, 3, 1)},
        17,
    ),
    (
        "reducesum_input_nokeep",
        [N("ReduceSum", ["a", "ax"], ["t"], keepdims=0), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 3, 4)},
        "a",
        "",
        {"ax": np.array([-1, 0], np.int64), "w": _r(3)},
        17,
    ),
    (
        "reducesum_attr_keep",
        [N("ReduceSum", ["a"], ["t"], axes=[1]), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 3)},
        "a",
        "",
        {"w": _r(2, 1)},
        11,
    ),
    (
        "reducesum_all",
        [N("ReduceSum", ["a"], ["t"], keepdims=0), N("Mul", ["t", "t"], ["y"])],
        {"a": _r(2, 3)},
        "a",
        "",
        None,
        17,
    ),
    (
        "reducemean_attr",
        [N("ReduceMean", ["a"], ["t"], axes=[0], keepdims=0), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 3)},
        "a",
        "",
        {"w": _r(3)},
        17,
    ),
    (
        "reducemean_input",
        [N("ReduceMean", ["a", "ax"], ["t"]), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 3, 2)},
        "a",
        "",
        {"ax": np.array([1, 2], np.int64), "w": _r(2, 1, 1)},
        18,
    ),
    (
        "softmax_axis",
        [N("Softmax", ["a"], ["t"], axis=1), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 3, 2)},
        "a",
        "",
        {"w": _r(2, 3, 2)},
        17,
    ),
    (
        "softmax_default",
        [N("Softmax", ["a"], ["t"]), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 3)},
        "a",
        "",
        {"w": _r(2, 3)},
        17,
    ),
    (
        "softmax_opset11_2d",
        [N("Softmax", ["a"], ["t"], axis=1), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 3, 2)},
        "a",
        "",
        {"w": _r(2, 3, 2)},
        11,
    ),
    (
        "logsoftmax",
        [N("LogSoftmax", ["a"], ["t"], axis=0), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(3, 2)},
        "a",
        "",
        {"w": _r(3, 2)},
        17,
    ),
    (
        "concat",
        [N("Concat", ["a", "b", "z"], ["t"], axis=-1), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 1), "b": _r(2, 3), "z": _r(2, 2)},
        "ab",
        "z",
        {"w": _r(2, 6)},
        17,
    ),
    (
        "cast_double",
        [N("Cast", ["a"], ["t"], to=TensorProto.DOUBLE), N("Mul", ["t", "t"], ["y"])],
        {"a": _r(3)},
        "a",
        "",
        None,
        17,
    ),
    ("abs", [N("Abs", ["a"], ["t"]), N("Mul", ["t", "w"], ["y"])], {"a": _away(2, 3)}, "a", "", {"w": _r(2, 3)}, 17),
    (
        "clip_inputs",
        [N("Clip", ["a", "lo", "hi"], ["t"]), N("Mul", ["t", "w"], ["y"])],
        {"a": np.array([-0.9, -0.4, 0.1, 0.35, 0.8])},
        "a",
        "",
        {"lo": np.array(-0.5), "hi": np.array(0.5), "w": _r(5)},
        17,
    ),
    (
        "clip_min_only",
        [N("Clip", ["a", "lo"], ["t"]), N("Mul", ["t", "w"], ["y"])],
        {"a": np.array([-0.9, -0.4, 0.1, 0.8])},
        "a",
        "",
        {"lo": np.array(-0.5), "w": _r(4)},
        17,
    ),
    (
        "clip_bounds_differentiated",
        [N("Clip", ["a", "lo", "hi"], ["t"]), N("Mul", ["t", "w"], ["y"])],
        {"a": np.array([-0.9, -0.4, 0.1, 0.8]), "lo": np.array(-0.5), "hi": np.array(0.5)},
        ["a", "lo", "hi"],
        "",
        {"w": _r(4)},
        17,
    ),
    (
        "clip_attrs_opset6",
        [N("Clip", ["a"], ["t"], min=-0.5, max=0.5), N("Mul", ["t", "w"], ["y"])],
        {"a": np.array([-0.9, -0.4, 0.1, 0.8])},
        "a",
        "",
        {"w": _r(4)},
        6,
    ),
    (
        "sum_mean_variadic",
        [N("Sum", ["a", "b", "a"], ["s"]), N("Mean", ["s", "b"], ["y"])],
        {"a": _r(2, 3), "b": _r(3)},
        "ab",
        "",
        None,
        17,
    ),
    ("reciprocal", [N("Reciprocal", ["a"], ["y"])], {"a": _away(4)}, "a", "", None, 17),
    ("leaky_relu", [N("LeakyRelu", ["a"], ["y"], alpha=0.2)], {"a": _away(4)}, "a", "", None, 17),
    (
        "sin_cos_softplus",
        [N("Sin", ["a"], ["s"]), N("Cos", ["s"], ["c"]), N("Softplus", ["c"], ["y"])],
        {"a": _r(4)},
        "a",
        "",
        None,
        17,
    ),
    (
        "expand",
        [N("Expand", ["a", "s"], ["t"]), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(3, 1)},
        "a",
        "",
        {"s": np.array([2, 3, 4], np.int64), "w": _r(2, 3, 4)},
        17,
    ),
    (
        "where",
        [N("Where", ["c", "a", "b"], ["y"])],
        {"a": _r(2, 3), "b": _r(3)},
        "ab",
        "",
        {"c": np.array([[True, False, True], [False, False, True]])},
        17,
    ),
    (
        "max_min",
        [N("Max", ["a", "b", "z"], ["m"]), N("Min", ["m", "b"], ["y"])],
        {"a": _r(2, 3), "b": _r(3), "z": _r(2, 1)},
        "ab",
        "z",
        None,
        17,
    ),
    ("prelu", [N("PRelu", ["a", "s"], ["y"])], {"a": _away(2, 3), "s": _r(3)}, ["a", "s"], "", None, 17),
    (
        "elu_erf_hardsigmoid_softsign",
        [
            N("Elu", ["a"], ["e"], alpha=0.7),
            N("Erf", ["e"], ["f"]),
            N("HardSigmoid", ["f"], ["h"], alpha=0.3),
            N("Softsign", ["h"], ["y"]),
        ],
        {"a": _away(5)},
        "a",
        "",
        None,
        17,
    ),
    (
        "reduce_sumsquare_l2",
        [N("ReduceSumSquare", ["a", "ax"], ["s"]), N("ReduceL2", ["a", "a0"], ["l"]), N("Mul", ["s", "l"], ["y"])],
        {"a": _r(2, 3)},
        "a",
        "",
        {"ax": np.array([1], np.int64), "a0": np.array([0], np.int64)},
        18,
    ),
    (
        "reduce_max_min",
        [N("ReduceMax", ["a"], ["m"], axes=[1]), N("ReduceMin", ["a"], ["n"], axes=[0]), N("Mul", ["m", "n"], ["y"])],
        {"a": _r(2, 3)},
        "a",
        "",
        None,
        17,
    ),
    (
        "slice",
        [N("Slice", ["a", "st", "en", "ax", "sp"], ["t"]), N("Mul", ["t", "t"], ["y"])],
        {"a": _r(4, 5)},
        "a",
        "",
        {
            "st": np.array([3, 1], np.int64),
            "en": np.array([0, 5], np.int64),
            "ax": np.array([0, 1], np.int64),
            "sp": np.array([-1, 2], np.int64),
        },
        17,
    ),
    (
        "gather_repeated",
        [N("Gather", ["a", "i"], ["t"], axis=1), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 3)},
        "a",
        "",
        {"i": np.array([[0, 2], [2, -3]], np.int64), "w": _r(2, 2, 2)},
        17,
    ),
    (
        "gather_elements_nd",
        [N("GatherElements", ["a", "i"], ["t"], axis=0), N("GatherND", ["a", "j"], ["u"]), N("Mul", ["t", "u"], ["y"])],
        {"a": _r(3, 2)},
        "a",
        "",
        {"i": np.array([[2, 0], [2, 2]], np.int64), "j": np.array([[1, 1], [0, 0]], np.int64)},
        17,
    ),
    (
        "tile",
        [N("Tile", ["a", "r"], ["t"]), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 1)},
        "a",
        "",
        {"r": np.array([2, 3], np.int64), "w": _r(4, 3)},
        17,
    ),
    (
        "split_one_output_unused",
        [N("Split", ["a", "sp"], ["s0", "s1", "s2"], axis=1), N("Mul", ["s0", "s2"], ["y"])],
        {"a": _r(2, 5)},
        "a",
        "",
        {"sp": np.array([2, 1, 2], np.int64)},
        17,
    ),
    (
        "pad_constant_value",
        [N("Pad", ["a", "p", "v"], ["t"]), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(2, 2)},
        "a",
        "",
        {"p": np.array([1, 0, 0, 2], np.int64), "v": np.array(3.0), "w": _r(3, 4)},
        17,
    ),
    (
        "pad_reflect",
        [N("Pad", ["a", "p"], ["t"], mode="reflect"), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(3)},
        "a",
        "",
        {"p": np.array([2, 1], np.int64), "w": _r(6)},
        17,
    ),
    (
        "pad_attr_opset2",
        [N("Pad", ["a"], ["t"], pads=[1, 1], value=1.0), N("Mul", ["t", "w"], ["y"])],
        {"a": _r(3)},
        "a",
        "",
        {"w": _r(5)},
        2,
    ),
    (
        "trilu_compress_depth",
        [
            N("Trilu", ["a"], ["t"]),
            N("DepthToSpace", ["t"], ["d"], blocksize=2),
            N("Compress", ["d", "c"], ["k"], axis=2),
            N("Mul", ["k", "w"], ["y"]),
        ],
        {"a": _r(1, 4, 2, 2)},
        "a",
        "",
        {"c": np.array([True, False, True, True]), "w": _r(1, 1, 3, 4)},
        17,
    ),
    (
        "space_to_depth_reverse_sequence",
        [
            N("SpaceToDepth", ["a"], ["s"], blocksize=2),
            N("Reshape", ["s", "sh"], ["r"]),
            N("ReverseSequence", ["r", "L"], ["t"], batch_axis=1, time_axis=0),
            N("Mul", ["t", "w"], ["y"]),
        ],
        {"a": _r(1, 1, 2, 4)},
        "a",
        "",
        {"sh": np.array([4, 2], np.int64), "L": np.array([3, 1], np.int64), "w": _r(4, 2)},
        17,
    ),
    (
        "mlp",
        [
            N("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
            N("Tanh", ["h"], ["a"]),
            N("MatMul", ["a", "w2"], ["o"]),
            N("Softmax", ["o"], ["p"]),
            N("Log", ["p"], ["lp"]),
            N("Mul", ["lp", "t"], ["m"]),
            N("ReduceMean", ["m"], ["y"], keepdims=0),
        ],
        {"w1": _r(4, 3), "b1": _r(4), "w2": _r(4, 2), "x": _r(5, 3), "t": _r(5, 2)},
        ["w1", "b1", "w2"],
        ["x", "t"],
        None,
        17,
    ),
]


@pytest.mark.parametrize("nodes,feeds,xs,zs,inits,opset", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_matches_finite_differences(nodes, feeds, xs, zs, inits, opset):
    _check(nodes, feeds, list(xs), list(zs), inits, opset)


def test_value_used_twice_and_through_two_paths():
    # y = (x * x + x) * w: dy/dx = (2x + 1) * w, with x reaching y along three uses
    x, w = _r(2, 3), _r(3)
    nodes = [N("Mul", ["x", "x"], ["s"]), N("Add", ["s", "x"], ["t"]), N("Mul", ["t", "w"], ["y"])]
    out = _check(nodes, {"x": x, "w": w}, ["x", "w"])
    np.testing.assert_allclose(out["d_x"], (2 * x + 1) * w, rtol=1e-12)
    np.testing.assert_allclose(out["d_w"], (x * x + x).sum(0), rtol=1e-12)


def test_float32_stays_float32_and_outer_values():
    # w is an initializer, e = Exp(u) is computed from a graph input that is neither in xs nor zs
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    u = np.array([0.5, -1, 2], np.float32)
    w = np.array([1.5, -2, 0.25], np.float32)
    nodes = [N("Exp", ["u"], ["e"]), N("Mul", ["x", "w"], ["t"]), N("Mul", ["t", "e"], ["y"])]
    m = stdops.onnx.load(_model([*nodes, _grad_node(["x"])], {"x": x, "u": u}, ["y", "d_x"], {"w": w}))
    out = m.run({"x": x, "u": u})
    assert out["d_x"].dtype == np.float32 and out["y"].dtype == np.float32
    np.testing.assert_allclose(out["d_x"], np.broadcast_to(w * np.exp(u), x.shape), rtol=1e-6)


def test_cast_float32_to_double_and_back():
    x = np.array([1, -2, 3], np.float32)
    nodes = [
        N("Cast", ["x"], ["d"], to=TensorProto.DOUBLE),
        N("Mul", ["d", "d"], ["s"]),
        N("Cast", ["s"], ["y"], to=TensorProto.FLOAT),
    ]
    out = stdops.onnx.load(_model([*nodes, _grad_node(["x"])], {"x": x}, ["d_x"])).run({"x": x})
    assert out["d_x"].dtype == np.float32
    np.testing.assert_allclose(out["d_x"], 2 * x)


def test_zs_and_skipped_output():
    a, b, z = _r(3), _r(3), _r(3)
    nodes = [N("Mul", ["a", "b"], ["t"]), N("Mul", ["t", "z"], ["y"])]
    g = _grad_node(["a", "b"], ["z"], outputs=["", "d_b"])
    out = stdops.onnx.load(_model([*nodes, g], {"a": a, "b": b, "z": z}, ["d_b"])).run({"a": a, "b": b, "z": z})
    np.testing.assert_allclose(out["d_b"], a * z)


def test_gradient_at_other_values_and_wrt_intermediate():
    # xs names h = Exp(x), an intermediate; the node's input h1 is the value the gradient is taken at
    x, h1 = _r(3), _r(3)
    nodes = [N("Exp", ["x"], ["h"]), N("Mul", ["h", "h"], ["y"])]
    g = _grad_node(["h"], inputs=["h1"], outputs=["dy_dh"])
    out = stdops.onnx.load(_model([*nodes, g], {"x": x, "h1": h1}, ["dy_dh"])).run({"x": x, "h1": h1})
    np.testing.assert_allclose(out["dy_dh"], 2 * h1)


def test_y_independent_of_x_gives_zeros():
    a, b = _r(2), _r(2)
    nodes = [N("Neg", ["b"], ["y"])]
    out = stdops.onnx.load(_model([*nodes, _grad_node(["a", "b"])], {"a": a, "b": b}, ["d_a", "d_b"])).run(
        {"a": a, "b": b}
    )
    np.testing.assert_array_equal(out["d_a"], np.zeros(2))
    np.testing.assert_array_equal(out["d_b"], -np.ones(2))


def test_shape_feeding_reshape_is_not_differentiated():
    x = _r(2, 3)
    nodes = [
        N("Mul", ["x", "x"], ["s"]),
        N("Flatten", ["s"], ["f"], axis=0),
        N("Shape", ["x"], ["sh"]),
        N("Reshape", ["f", "sh"], ["y"]),
    ]
    out = _check(nodes, {"x": x}, ["x"])
    np.testing.assert_allclose(out["d_x"], 2 * x)


def test_op_without_rule_only_on_zs_path_is_fine():
    x, z = _r(3), _r(3)
    nodes = [N("Atan", ["z"], ["t"]), N("Mul", ["x", "t"], ["y"])]
    out = stdops.onnx.load(_model([*nodes, _grad_node(["x"], ["z"])], {"x": x, "z": z}, ["d_x"])).run({"x": x, "z": z})
    np.testing.assert_allclose(out["d_x"], np.arctan(z))


def test_unsupported_op_refused_at_load():
    nodes = [N("Atan", ["x"], ["t"], name="the_atan"), N("Mul", ["t", "t"], ["y"])]
    with pytest.raises(ModelFormatError, match=r"no derivative for Atan \(node 'the_atan'\)"):
        stdops.onnx.load(_model([*nodes, _grad_node(["x"])], {"x": _r(3)}, ["d_x"]))


@pytest.mark.parametrize(
    "node,match",
    [
        (_grad_node(["x"], inputs=["x", "x"]), "2 inputs"),
        (helper.make_node("Gradient", ["x"], ["d"], domain="ai.onnx.preview.training", xs=["x"]), "attribute y"),
        (
            helper.make_node("Gradient", ["x"], ["d"], domain="ai.onnx.preview.training", xs=["x"], y="y", foo=1),
            "unknown attribute",
        ),
        (_grad_node(["x"], outputs=["d1", "d2"]), "2 outputs"),
    ],
)
def test_bad_gradient_nodes(node, match):
    with pytest.raises(ModelFormatError, match=match):
        stdops.onnx.load(_model([N("Neg", ["x"], ["y"]), node], {"x": _r(3)}, ["y"]))


def test_gradient_inside_a_subgraph():
    # the then-branch differentiates its own nodes; x and w come from the enclosing scope
    x, w = _r(3), _r(3)
    then_nodes = [
        N("Mul", ["x", "w"], ["t"]),
        N("Mul", ["t", "x"], ["y_in"]),
        _grad_node(["x"], y="y_in", outputs=["dx_in"]),
    ]
    then_g = helper.make_graph(then_nodes, "then", [], [helper.make_empty_tensor_value_info("dx_in")])
    else_g = helper.make_graph([N("Identity", ["x"], ["e"])], "else", [], [helper.make_empty_tensor_value_info("e")])
    node = N("If", ["c"], ["dx"], then_branch=then_g, else_branch=else_g)
    m = _model([node], {"c": np.array(True), "x": x}, ["dx"], {"w": w})
    out = stdops.onnx.load(m).run({"c": np.array(True), "x": x})
    np.testing.assert_allclose(out["dx"], 2 * x * w)


@pytest.mark.parametrize("training", [False, True])
def test_dropout(training):
    x = _r(400) + 2.0
    nodes = [N("Dropout", ["x", "r", "tm"], ["y"])]
    inits = {"r": np.array(0.25), "tm": np.array(training)}
    out = stdops.onnx.load(_model([*nodes, _grad_node(["x"])], {"x": x}, ["d_x"], inits)).run({"x": x})
    if not training:
        np.testing.assert_array_equal(out["d_x"], np.ones(400))
    else:  # the mask of the forward run: each element dropped (0) or kept and scaled by 1 / (1 - 0.25)
        kept = out["d_x"] != 0
        np.testing.assert_allclose(out["d_x"][kept], 1 / 0.75)
        assert 200 < kept.sum() < 400
