"""The ONNX front end and the graph plan: loading, binding, running, and every bad input a user can cause."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import stdops
import stdops.onnx
from stdops.errors import InputError, ModelFormatError, OpError, StdopsError, UnsupportedOp


def _model(nodes, inputs, outputs, inits=(), opset=17, extra_opsets=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])
    m.ir_version = 8
    return m


def _vi(name, dtype=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def _chain():
    """y = relu(x + b) * 2, with an intermediate and an unused second output."""
    b = numpy_helper.from_array(np.array([1, -1, 0.5], np.float32), "b")
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    nodes = [
        helper.make_node("Add", ["x", "b"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["r"], name="relu"),
        helper.make_node("Mul", ["r", "two"], ["y"], name="mul"),
        helper.make_node("Neg", ["x"], ["n"], name="neg"),
    ]
    return _model(nodes, [_vi("x", shape=[2, 3])], [_vi("y", shape=[2, 3]), _vi("n", shape=[2, 3])], [b, two])


X = np.array([[0, 1, -2], [3, -4, 5]], np.float32)


def test_run_api_and_info():
    m = stdops.onnx.load(_chain())
    assert m.input_names == ["x"] and m.output_names == ["y", "n"]
    assert m.inputs[0].dtype == np.float32 and m.inputs[0].shape == (2, 3)
    out = m.run({"x": X})
    np.testing.assert_array_equal(out["y"], np.maximum(X + [1, -1, 0.5], 0) * 2)
    assert out["y"].dtype == np.float32
    assert m.op_histogram() == {"Add": 1, "Mul": 1, "Neg": 1, "Relu": 1}
    assert m.parameter_count() == 4


def test_any_intermediate_and_only_what_is_needed():
    m = stdops.onnx.load(_chain())
    seen = []
    out = m.run({"x": X}, outputs=["s"], hook=lambda node, name, v: seen.append(node))
    np.testing.assert_array_equal(out["s"], X + [1, -1, 0.5])
    assert seen == ["add"]  # relu, mul and neg are not needed for "s"


def test_hook_sees_every_value_and_intermediates_are_released():
    m = stdops.onnx.load(_chain())
    seen = {}
    m.run({"x": X}, hook=lambda node, name, v: seen.setdefault(name, v.copy()))
    assert set(seen) == {"s", "r", "y", "n"}
    steps = m.plan.schedule()
    released = {m.plan.slot_name(s) for st in steps for s in st.release}
    assert {"s", "r"} <= released and not ({"y", "n", "b", "two"} & released)


def test_backend_run_graph_order_and_cache():
    model = _chain()
    y, n = stdops.onnx.run(model, [X])
    np.testing.assert_array_equal(n, -X)
    y2, _ = stdops.onnx.run(model, [X + 1])
    np.testing.assert_array_equal(y2, np.maximum(X + 1 + [1, -1, 0.5], 0) * 2)


def test_load_from_path_and_bytes(tmp_path):
    p = tmp_path / "chain.onnx"
    p.write_bytes(_chain().SerializeToString())
    for src in (p, str(p), p.read_bytes()):
        out = stdops.onnx.load(src).run({"x": X})
        np.testing.assert_array_equal(out["n"], -X)
    assert isinstance(stdops.load(p), stdops.onnx.Model)


def test_empty_optional_input_and_several_opsets():
    nodes = [helper.make_node("Clip", ["x", "", "hi"], ["y"], name="clip")]
    hi = numpy_helper.from_array(np.array(1.5, np.float32), "hi")
    m = _model(nodes, [_vi("x", shape=[2, 3])], [_vi("y")], [hi], extra_opsets=[helper.make_opsetid("ai.onnx.ml", 3)])
    out = stdops.onnx.load(m).run({"x": X})
    np.testing.assert_array_equal(out["y"], np.minimum(X, 1.5))


def test_version_binding_picks_newest_entry_not_above_opset():
    from stdops.onnx.opset import resolve

    since, kernel, _ = resolve("", "Relu", 21)
    assert since <= 21 and kernel.name == "relu"
    with pytest.raises(UnsupportedOp):
        resolve("", "NoSuchOp", 21)


# ---------------------------------------------------------------------- bad input
def test_truncated_file_names_the_file(tmp_path):
    data = _chain().SerializeToString()
    p = tmp_path / "cut.onnx"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError) as e:
        stdops.onnx.load(p)
    assert str(p) in str(e.value)


def test_corrupt_and_non_onnx_files(tmp_path):
    p = tmp_path / "junk.onnx"
    p.write_bytes(b"\xff\xfe not a protobuf at all \x00\x01")
    with pytest.raises(ModelFormatError, match="junk.onnx"):
        stdops.onnx.load(p)
    q = tmp_path / "empty.onnx"
    q.write_bytes(b"")
    with pytest.raises(ModelFormatError, match="no graph"):
        stdops.onnx.load(q)
    with pytest.raises(ModelFormatError, match="cannot read"):
        stdops.onnx.load(tmp_path / "missing.onnx")


def test_unknown_op_and_domain_name_the_node():
    m = _model([helper.make_node("FrobnicateX", ["x"], ["y"], name="frob")], [_vi("x")], [_vi("y")])
    with pytest.raises(UnsupportedOp, match=r"'frob'.*FrobnicateX"):
        stdops.onnx.load(m)
    m = _model(
        [helper.make_node("Relu", ["x"], ["y"], name="r", domain="com.example")],
        [_vi("x")],
        [_vi("y")],
        extra_opsets=[helper.make_opsetid("com.example", 1)],
    )
    with pytest.raises(UnsupportedOp, match="com.example:Relu"):
        stdops.onnx.load(m)
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r", domain="org.nowhere")], [_vi("x")], [_vi("y")])
    with pytest.raises(ModelFormatError, match="opset_import"):
        stdops.onnx.load(m)


def test_missing_and_unknown_attributes_name_the_node():
    m = _model([helper.make_node("Transpose", ["x"], ["y"], name="tr", permutation=[1, 0])], [_vi("x")], [_vi("y")])
    with pytest.raises(ModelFormatError, match=r"'tr'.*unknown attribute.*permutation"):
        stdops.onnx.load(m)
    m = _model([helper.make_node("Concat", ["x", "x"], ["y"], name="cat")], [_vi("x")], [_vi("y")])
    with pytest.raises(ModelFormatError, match=r"'cat'.*missing required attribute.*axis"):
        stdops.onnx.load(m)


def test_dangling_input_and_missing_output():
    m = _model([helper.make_node("Relu", ["nowhere"], ["y"], name="r")], [_vi("x")], [_vi("y")])
    with pytest.raises(ModelFormatError, match=r"'r'.*'nowhere'"):
        stdops.onnx.load(m)
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x")], [_vi("z")])
    with pytest.raises(ModelFormatError, match="'z'"):
        stdops.onnx.load(m)


@pytest.mark.parametrize(
    "feeds,match",
    [
        ({"x": X, "extra": X}, "no input named 'extra'"),
        ({}, "missing input"),
        ({"x": X.astype(np.float64)}, "expects dtype float32, got float64"),
        ({"x": X[:1]}, r"expects shape \[2, 3\]"),
        ({"x": X[None]}, "expects rank 2"),
    ],
)
def test_bad_feeds(feeds, match):
    m = stdops.onnx.load(_chain())
    with pytest.raises(InputError, match=match):
        m.run(feeds)


def test_kernel_failure_names_the_node():
    m = _model(
        [helper.make_node("Add", ["x", "z"], ["y"], name="bad_add")],
        [_vi("x", shape=None), _vi("z", shape=None)],
        [_vi("y")],
    )
    with pytest.raises(OpError, match=r"'bad_add' \(Add\)"):
        stdops.onnx.load(m).run({"x": np.ones((2, 3), np.float32), "z": np.ones((4, 5), np.float32)})


def test_errors_are_stdops_errors():
    for cls in (ModelFormatError, UnsupportedOp, OpError, InputError):
        assert issubclass(cls, StdopsError)


# ---------------------------------------------------------------------- CLI
def _cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "stdops.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_cli_bad_model_is_one_line_exit_2(tmp_path):
    p = tmp_path / "junk.onnx"
    p.write_bytes(b"garbage")
    r = _cli("run", str(p))
    assert r.returncode == 2, r.stderr
    assert "junk.onnx" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = _cli("--debug", "run", str(p))
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_cli_run_info_ops_demo(tmp_path):
    p = tmp_path / "chain.onnx"
    p.write_bytes(_chain().SerializeToString())
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "out"
    r = _cli("run", str(p), "--input", f"x={tmp_path / 'x.npy'}", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "(2, 3)" in r.stdout and "float32" in r.stdout
    np.testing.assert_array_equal(np.load(out / "n.npy"), -X)
    r = _cli("info", str(p))
    assert r.returncode == 0 and "Relu" in r.stdout and "parameters: 4" in r.stdout
    r = _cli("ops")
    assert r.returncode == 0 and "gather_nd" in r.stdout
    r = _cli("demo")
    assert r.returncode == 0, r.stderr
    assert "probabilities" in r.stdout and "label" in r.stdout


def test_initializer_listed_as_input_is_an_optional_feed():
    w = numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w")
    m = _model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [_vi("x", shape=[3]), _vi("w", shape=[3])],
        [_vi("y")],
        [w],
    )
    model = stdops.onnx.load(m)
    assert model.input_names == ["x"]
    x = np.zeros(3, np.float32)
    np.testing.assert_array_equal(model.run({"x": x})["y"], [1, 2, 3])
    np.testing.assert_array_equal(model.run({"x": x, "w": np.ones(3, np.float32)})["y"], [1, 1, 1])


def test_model_local_function_is_inlined_with_attribute_references():
    # a local function "ScaledRelu"(x) = Relu(x) * scale, scale from a float attribute with a reference
    scale_attr = helper.make_attribute("value_float", 0.0)
    scale_attr.ref_attr_name = "scale"
    body = [
        helper.make_node("Constant", [], ["s"]),
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Mul", ["r", "s"], ["y"]),
    ]
    body[0].attribute.append(scale_attr)
    f = helper.make_function(
        "local.fn", "ScaledRelu", ["x"], ["y"], body, [helper.make_opsetid("", 17)], attributes=["scale"]
    )
    call = helper.make_node("ScaledRelu", ["x"], ["y"], name="call", domain="local.fn", scale=3.0)
    g = helper.make_graph([call], "g", [_vi("x", shape=[2, 3])], [_vi("y", shape=[2, 3])])
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local.fn", 1)], functions=[f]
    )
    out = stdops.onnx.load(m).run({"x": X})
    np.testing.assert_allclose(out["y"], np.maximum(X, 0) * 3)


def test_recursive_local_function_is_refused():
    body = [helper.make_node("Loopy", ["x"], ["y"], domain="local.fn")]
    f = helper.make_function(
        "local.fn", "Loopy", ["x"], ["y"], body, [helper.make_opsetid("", 17), helper.make_opsetid("local.fn", 1)]
    )
    g = helper.make_graph([helper.make_node("Loopy", ["x"], ["y"], domain="local.fn")], "g", [_vi("x")], [_vi("y")])
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local.fn", 1)], functions=[f]
    )
    with pytest.raises(ModelFormatError, match="recursive"):
        stdops.onnx.load(m)


def test_cli_ops_lists_ncnn_layers_and_mdf_functions():
    r = _cli("ops", "-f", "ncnn")
    assert r.returncode == 0 and "Convolution" in r.stdout and "MultiHeadAttention" in r.stdout
    r = _cli("ops", "--layer", "Convolution")
    assert r.returncode == 0 and "num_output" in r.stdout and "kernel_h" in r.stdout
    r = _cli("ops", "-f", "mdf")
    assert r.returncode == 0 and "drift_diffusion" in r.stdout
