"""Control flow and the bad inputs of the NN issue: subgraphs reading outer values, a subgraph that does
not produce what the node declares, a Loop that never stops, shapes that don't fit, hostile sizes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import stdops.onnx
from stdops import limits
from stdops.errors import ModelFormatError, OpError, ResourceLimitError


def _vi(name, dtype=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    m = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs, list(inits)), opset_imports=[helper.make_opsetid("", opset)]
    )
    m.ir_version = 8
    return m


def _if_model(else_outputs=1):
    # then: y = x * w (w an outer initializer); else: y = -x (and, to break it, a second output)
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["t"])], "then", [], [_vi("t")])
    else_nodes = [helper.make_node("Neg", ["x"], ["e"])]
    else_outs = [_vi("e")]
    if else_outputs == 2:
        else_nodes.append(helper.make_node("Abs", ["x"], ["e2"]))
        else_outs.append(_vi("e2"))
    else_g = helper.make_graph(else_nodes, "else", [], else_outs)
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="branch")
    w = numpy_helper.from_array(np.array([2, 3], np.float32), "w")
    return _model([node], [_vi("c", TensorProto.BOOL, []), _vi("x", shape=[2])], [_vi("y")], [w])


def test_if_reads_outer_values():
    m = stdops.onnx.load(_if_model())
    x = np.array([1, -1], np.float32)
    np.testing.assert_array_equal(m.run({"c": np.array(True), "x": x})["y"], [2, -3])
    np.testing.assert_array_equal(m.run({"c": np.array(False), "x": x})["y"], [-1, 1])


def test_subgraph_not_producing_declared_outputs():
    with pytest.raises(ModelFormatError, match=r"'branch'.*else_branch produces 2 outputs"):
        stdops.onnx.load(_if_model(else_outputs=2))


def _loop_model(trip_count=True, cond_stays_true=True):
    # body: (i, cond, s) -> (cond', s + x, s) ; x read from the outer scope
    body_nodes = [
        helper.make_node("Add", ["s_in", "x"], ["s_out"]),
        helper.make_node("Identity", ["cond_in" if cond_stays_true else "false"], ["cond_out"]),
        helper.make_node("Identity", ["s_in"], ["scan"]),
    ]
    false = numpy_helper.from_array(np.array(False), "false")
    body = helper.make_graph(
        body_nodes,
        "body",
        [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []), _vi("s_in")],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("s_out"), _vi("scan")],
        [false],
    )
    node = helper.make_node("Loop", ["M" if trip_count else "", "cond", "s0"], ["s", "scans"], body=body, name="loop")
    m_init = numpy_helper.from_array(np.array(4, np.int64), "M")
    return _model(
        [node],
        [_vi("cond", TensorProto.BOOL, []), _vi("s0", shape=[2]), _vi("x", shape=[2])],
        [_vi("s"), _vi("scans")],
        [m_init],
    )


def test_loop_with_scan_outputs_and_outer_values():
    m = stdops.onnx.load(_loop_model())
    out = m.run({"cond": np.array(True), "s0": np.zeros(2, np.float32), "x": np.array([1, 2], np.float32)})
    np.testing.assert_array_equal(out["s"], [4, 8])
    np.testing.assert_array_equal(out["scans"], [[0, 0], [1, 2], [2, 4], [3, 6]])


def test_loop_that_never_stops_is_refused():
    m = stdops.onnx.load(_loop_model(trip_count=False))
    old = limits.set_max_loop_iterations(1000)
    try:
        with pytest.raises(ResourceLimitError, match="Loop ran 1000 iterations"):
            m.run({"cond": np.array(True), "s0": np.zeros(2, np.float32), "x": np.ones(2, np.float32)})
    finally:
        limits.set_max_loop_iterations(old)


def test_constant_of_shape_of_a_trillion_is_refused_with_a_raisable_limit():
    node = helper.make_node("ConstantOfShape", ["shape"], ["y"], name="huge")
    m = stdops.onnx.load(_model([node], [_vi("shape", TensorProto.INT64, [2])], [_vi("y")]))
    with pytest.raises(ResourceLimitError, match="above the limit"):
        m.run({"shape": np.array([10**6, 10**6], np.int64)})
    old = limits.set_max_elements(10**13)
    try:  # raising the limit lets a moderate request through (nothing near 10^12 is allocated here)
        assert m.run({"shape": np.array([3, 4], np.int64)})["y"].shape == (3, 4)
    finally:
        limits.set_max_elements(old)


def test_conv_kernel_bigger_than_input_names_the_node():
    w = numpy_helper.from_array(np.ones((1, 1, 5, 5), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv_too_big")
    m = stdops.onnx.load(_model([node], [_vi("x", shape=[1, 1, 3, 3])], [_vi("y")], [w]))
    with pytest.raises(OpError, match="conv_too_big"):
        m.run({"x": np.ones((1, 1, 3, 3), np.float32)})


def test_conv_channels_not_divisible_by_group():
    w = numpy_helper.from_array(np.ones((2, 1, 1, 1), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv_groups", group=2)
    with pytest.raises((OpError, ModelFormatError), match="conv_groups"):
        stdops.onnx.load(_model([node], [_vi("x", shape=[1, 3, 4, 4])], [_vi("y")], [w])).run(
            {"x": np.ones((1, 3, 4, 4), np.float32)}
        )


def test_hook_sees_values_inside_subgraphs():
    m = stdops.onnx.load(_loop_model())
    seen = []
    m.run(
        {"cond": np.array(True), "s0": np.zeros(2, np.float32), "x": np.array([1, 2], np.float32)},
        hook=lambda node, name, v: seen.append((node, name)),
    )
    inner = [(n, v) for n, v in seen if n.startswith("loop[")]
    assert ("loop[0]/Add_0", "s_out") in inner and ("loop[3]/Add_0", "s_out") in inner
    assert ("loop", "s") in seen  # the node's own outputs too
    seen.clear()
    mi = stdops.onnx.load(_if_model())
    mi.run({"c": np.array(False), "x": np.ones(2, np.float32)}, hook=lambda node, name, v: seen.append((node, name)))
    assert ("branch/else/Neg_0", "e") in seen
