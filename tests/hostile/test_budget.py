"""One budget per run and per load (stdops.limits): Loop iterations across nesting, function inlining,
strings counted by size, RegEx matching in linear time, ONNX load linear in the node count, and the probe's
ONNX / ncnn crashes. Each hostile case runs in a forked child and asserts the error and a time / memory bound."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import stdops.ncnn as sn
import stdops.onnx as so
from stdops import limits
from stdops.errors import ModelFormatError, OpError, ResourceLimitError

from .harness import bounded
from .mutate import _model, _vi


def _save(tmp_path, m: onnx.ModelProto, name="m.onnx"):
    p = tmp_path / name
    p.write_bytes(m.SerializeToString())
    return p


def _nested_loops(depth: int, trips: int) -> onnx.ModelProto:
    """``depth`` Loops inside each other, each running ``trips`` times; the innermost adds 1 to a counter."""
    inner_nodes = [
        helper.make_node("Identity", ["c"], ["c_out"], name=f"keep{depth}"),
        helper.make_node("Add", ["v", "one"], ["v_out"], name="inc"),
    ]
    body = helper.make_graph(
        inner_nodes,
        f"body{depth}",
        [_vi("i", TensorProto.INT64, []), _vi("c", TensorProto.BOOL, []), _vi("v", shape=[])],
        [_vi("c_out", TensorProto.BOOL, []), _vi("v_out", shape=[])],
    )
    for level in range(depth - 1, 0, -1):
        body = helper.make_graph(
            [
                helper.make_node("Identity", ["c"], ["c_out"], name=f"keep{level}"),
                helper.make_node("Loop", ["M", "", "v"], ["v_out"], name=f"loop{level}", body=body),
            ],
            f"body{level}",
            [_vi("i", TensorProto.INT64, []), _vi("c", TensorProto.BOOL, []), _vi("v", shape=[])],
            [_vi("c_out", TensorProto.BOOL, []), _vi("v_out", shape=[])],
        )
    inits = [
        numpy_helper.from_array(np.int64(trips), "M"),
        numpy_helper.from_array(np.float32(1), "one"),
        numpy_helper.from_array(np.float32(0), "zero"),
    ]
    top = helper.make_node("Loop", ["M", "", "zero"], ["y"], name="loop0", body=body)
    return _model([top], [], [_vi("y", shape=[])], inits)


def test_nested_loop_iterations_add_up_to_one_budget(tmp_path):
    """3 nested Loops of 100 trips each: 1,010,100 body runs, each loop alone far under the cap; the run's
    budget counts them together and stops the run early."""
    ok = so.load(_nested_loops(3, 5))
    assert float(ok.run({})["y"]) == 125.0  # the model is right: 5**3 increments
    path = _save(tmp_path, _nested_loops(3, 100))

    def go():
        with limits.override(max_loop_iterations=20_000):
            return so.load(path).run({})

    out = bounded(go, seconds=60)
    assert out.raised(ResourceLimitError, r"more than 20000 loop iterations in one run \(counted across nested"), (
        out.error,
        out.message,
    )
    assert str(path) in out.message and "loop" in out.message
    assert out.seconds < 10 and out.peak_mb < 200


def test_the_probes_nested_loops_are_refused_under_the_defaults(tmp_path):
    """The probe's 3 x 1000 trips (10**9 body runs) under the default budget: stopped after 1,000,000."""
    path = _save(tmp_path, _nested_loops(3, 1000))
    out = bounded(lambda: so.load(path).run({}), seconds=300)
    assert out.raised(ResourceLimitError, "more than 1000000 loop iterations"), (out.error, out.message)
    assert out.peak_mb < 300


def _function_bomb(depth: int, calls: int = 2) -> onnx.ModelProto:
    """f0 = Relu; f_k calls f_(k-1) ``calls`` times in a chain: inlining f_depth makes calls**depth nodes."""
    fns = [
        helper.make_function(
            "bomb", "f0", ["x"], ["y"], [helper.make_node("Relu", ["x"], ["y"])], [helper.make_opsetid("", 17)]
        )
    ]
    for k in range(1, depth + 1):
        nodes, prev = [], "x"
        for j in range(calls):
            out = "y" if j == calls - 1 else f"t{j}"
            nodes.append(helper.make_node(f"f{k - 1}", [prev], [out], domain="bomb"))
            prev = out
        fns.append(
            helper.make_function(
                "bomb", f"f{k}", ["x"], ["y"], nodes, [helper.make_opsetid("", 17), helper.make_opsetid("bomb", 1)]
            )
        )
    m = _model(
        [helper.make_node(f"f{depth}", ["x"], ["y"], name="call", domain="bomb")], [_vi("x", shape=[2])], [_vi("y")]
    )
    m.opset_import.append(helper.make_opsetid("bomb", 1))
    m.functions.extend(fns)
    return m


def test_exponential_function_inlining_is_refused_before_it_starts(tmp_path):
    """The probe's 26-deep functions with 2 calls each (2**26 nodes from ~2 KB), under the defaults."""
    small = so.load(_function_bomb(4))
    np.testing.assert_array_equal(small.run({"x": np.array([-1, 2], np.float32)})["y"], [0, 2])
    m = _function_bomb(26)
    path = _save(tmp_path, m)
    assert path.stat().st_size < 4000
    out = bounded(lambda: so.load(path), seconds=60)
    assert out.raised(ResourceLimitError, r"function 'f26' expands to 67108864 nodes"), (out.error, out.message)
    assert str(path) in out.message
    assert out.seconds < 5 and out.peak_mb < 100


def test_function_depth_is_bounded(tmp_path):
    path = _save(tmp_path, _function_bomb(40, calls=1))
    out = bounded(lambda: so.load(path), seconds=60)
    assert out.raised(ModelFormatError, "functions nested deeper than 32"), out.message
    assert str(path) in out.message and out.seconds < 5


def _strings_model(op: str, **attrs) -> onnx.ModelProto:
    ins = ["a", "b"] if op == "StringConcat" else ["a"]
    outs = ["y"] if op != "StringSplit" else ["y", "n"]
    return _model(
        [helper.make_node(op, ins, outs, name="s", **attrs)],
        [_vi(n, TensorProto.STRING, None) for n in ins],
        [_vi(n, TensorProto.STRING if n == "y" else TensorProto.INT64, None) for n in outs],
        opset=20,
    )


def test_string_concat_counts_strings_by_size(tmp_path):
    """[3000, 1] x [1, 1000] strings of 1000 characters: 3 million elements (under the element limit) but
    3 GB of characters: refused before one is built."""
    path = _save(tmp_path, _strings_model("StringConcat"))
    a = np.full((3000, 1), "x" * 1000, object)
    b = np.full((1, 1000), "y", object)
    out = bounded(lambda: so.load(path).run({"a": a, "b": b}), seconds=60)
    assert out.raised(ResourceLimitError, r"StringConcat output: \d+ bytes, above the limit"), out.message
    assert str(path) in out.message and out.seconds < 10 and out.peak_mb < 300
    small = so.load(path).run({"a": np.array([["a"], ["b"]], object), "b": np.array([["c", "d"]], object)})["y"]
    assert small.tolist() == [["ac", "ad"], ["bc", "bd"]]


def test_regex_full_match_is_linear_time(tmp_path):
    """Catastrophic backtracking patterns on 100,000-character inputs: RE2 answers at once (Python's re
    would take longer than the universe's age)."""
    cases = {r"(a+)+$": False, r"(a|aa)+$": False, r"(a*)*b": False, r"(x+x+)+y": False, r"a{1,100}": False}
    for pattern, want in cases.items():
        path = _save(tmp_path, _strings_model("RegexFullMatch", pattern=pattern), f"re{len(pattern)}.onnx")
        x = np.array(["a" * 100_000 + "!", "x" * 100_000], object)
        out = bounded(lambda path=path, x=x: so.load(path).run({"a": x})["y"].tolist(), seconds=60)
        assert out.error is None, out.message
        assert out.result == repr([want, want]) and out.seconds < 5, (pattern, out.result, out.seconds)
    bad = so.load(_strings_model("RegexFullMatch", pattern=r"(a)\1"))  # a backreference: not RE2
    with pytest.raises(OpError, match="invalid RE2 pattern"):
        bad.run({"a": np.array(["aa"], object)})


def test_onnx_constant_without_outputs_is_a_format_error(tmp_path):
    m = _model(
        [
            helper.make_node("Constant", [], [], name="c", value_float=1.0),
            helper.make_node("Relu", ["x"], ["y"], name="r"),
        ],
        [_vi("x", shape=[2])],
        [_vi("y")],
    )
    path = _save(tmp_path, m)
    out = bounded(lambda: so.load(path), seconds=30)
    assert out.raised(ModelFormatError, r"'c' \(Constant\).*a Constant has one output, this one has 0"), out.message
    assert str(path) in out.message


def test_deeply_nested_ncnn_shape_expression_is_a_format_error(tmp_path):
    expr = "neg(" * 5000 + "0w" + ")" * 5000
    param = f'7767517\n2 2\nInput in 0 1 data\nReshape r 1 1 data y 6="{expr}"\n'
    (tmp_path / "m.param").write_text(param)
    out = bounded(lambda: sn.Net.load(tmp_path / "m.param"), seconds=30)
    assert out.raised(ModelFormatError, "operators nested deeper than 100"), (out.error, out.message[:300])
    assert str(tmp_path / "m.param") in out.message and "line 4" in out.message
    assert out.seconds < 5


def _chain(n: int) -> bytes:
    nodes, prev = [], "x"
    for k in range(n):
        op = "Add" if k % 2 else "Identity"
        nodes.append(helper.make_node(op, [prev, "one"] if k % 2 else [prev], [f"v{k}"], name=f"n{k}"))
        prev = f"v{k}"
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    return _model(
        nodes, [_vi("x", shape=[4])], [_vi("y", shape=[4])], [numpy_helper.from_array(np.ones(4, np.float32), "one")]
    ).SerializeToString()


def test_onnx_load_is_linear_in_the_node_count():
    """Load time per node at 2,000 and 20,000 nodes: within a factor 3 (a quadratic load is 10x; the probe
    measured 41 s for 30k nodes), and 20k nodes load in seconds. The benchmark: benchmarks/bench_load.py."""
    import time

    small, big = _chain(2000), _chain(20000)

    def per_node(data, n):
        best = float("inf")
        for _ in range(2):
            t0 = time.perf_counter()
            so.load(data)
            best = min(best, time.perf_counter() - t0)
        return best / n, best

    (s, _), (b, t_big) = per_node(small, 2000), per_node(big, 20000)
    assert b / s < 3, (s, b)
    assert t_big < 20, t_big
    m = so.load(big)
    np.testing.assert_array_equal(m.run({"x": np.zeros(4, np.float32)})["y"], np.full(4, 10000, np.float32))
