"""``stdops convert`` on the installed console script: each direction picked from the file types, and bad
input (a layer or op with no counterpart, a missing shape, a refused MDF, a bad file) is one line on stderr,
exit 2, and nothing written: no destination file, no temporary file left, an existing destination kept."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest

from ..test_cli import one_line_exit_2, stdops

HERE = Path(__file__).resolve().parent
NCNN = HERE.parent / "ncnn" / "fixtures" / "resnet_small"
ONNX = HERE.parent / "onnx" / "fixtures" / "transformer_block_opset17.onnx"
CONFORMANCE = HERE.parent.parent.parent / "shared" / "conformance" / "mdf" / "models"


def _only(folder: Path, *names: str) -> None:
    """Nothing else was written in ``folder`` (no temporary file left behind)."""
    assert sorted(os.listdir(folder)) == sorted(names), os.listdir(folder)


def test_ncnn_to_onnx(tmp_path):
    r = stdops("convert", str(NCNN / "model.param"), str(tmp_path / "m.onnx"), "--input-shape", "in0=3,64,64")
    assert r.returncode == 0, r.stderr
    assert "m.onnx" in r.stdout
    m = onnx.load(tmp_path / "m.onnx")
    assert [i.name for i in m.graph.input] == ["in0"] and [o.name for o in m.graph.output] == ["out0"]
    assert [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim] == [1, 3, 64, 64]
    _only(tmp_path, "m.onnx")


def test_onnx_mdf_ncnn_directions(tmp_path):
    for args in (
        (str(ONNX), str(tmp_path / "m.json")),
        (str(tmp_path / "m.json"), "-o", str(tmp_path / "back.onnx")),
        (str(ONNX), str(tmp_path / "m.param")),
    ):
        r = stdops("convert", *args)
        assert r.returncode == 0, r.stderr
    _only(tmp_path, "m.json", "back.onnx", "m.param", "m.bin")


def test_a_missing_input_shape_is_one_line_and_writes_nothing(tmp_path):
    r = stdops("convert", str(NCNN / "model.param"), str(tmp_path / "m.onnx"))
    one_line_exit_2(r, "line 3 layer 'in0' (Input)", "--input-shape in0=C,H,W")
    _only(tmp_path)


def test_a_layer_with_no_onnx_form_is_named_with_its_line(tmp_path):
    param = tmp_path / "det.param"
    param.write_text(
        "7767517\n4 4\nInput in0 0 1 loc\nInput in1 0 1 conf\nInput in2 0 1 prior\n"
        "DetectionOutput detout 3 1 loc conf prior out 0=3\n"
    )
    (tmp_path / "m.onnx").write_bytes(b"old")
    r = stdops("convert", str(param), str(tmp_path / "m.onnx"), "--input-shape", "loc=8", "--input-shape", "conf=6")
    one_line_exit_2(r, "line 6 layer 'detout' (DetectionOutput)", "cannot convert to ONNX", "data-dependent number")
    assert (tmp_path / "m.onnx").read_bytes() == b"old"
    _only(tmp_path, "det.param", "m.onnx")


def test_an_op_with_no_ncnn_form_writes_nothing(tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["t"], name="r"),
            helper.make_node("TopK", ["t", "k"], ["y", "i"], name="top"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([2]), "k")],
    )
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "t.onnx")
    r = stdops("convert", str(tmp_path / "t.onnx"), str(tmp_path / "t.param"))
    one_line_exit_2(r, "node 'top' (TopK)", "cannot convert to ncnn")
    _only(tmp_path, "t.onnx")


@pytest.mark.skipif(not CONFORMANCE.is_dir(), reason="../shared/conformance is absent")
def test_stateful_mdf_is_refused_with_the_reason(tmp_path):
    r = stdops("convert", str(CONFORMANCE / "MDF" / "States.json"), str(tmp_path / "s.onnx"))
    one_line_exit_2(r, "States.json", "stateful parameter", "cannot convert to ONNX")
    _only(tmp_path)


@pytest.mark.parametrize(
    "args, needles",
    [
        (("convert", "ONNX", "DIR/x.json", "--weights", "NCNN"), ("--weights applies to NCNN models, not ONNX",)),
        (("convert", "ONNX", "DIR/x.json", "--input-shape", "a=1"), ("--input-shape applies to ONNX sources written",)),
        (("convert", "NCNN", "DIR/x.onnx", "--input-shape", "in0=3,64,64", "--opset", "17"), ("opset 17",)),
        (("convert", "ONNX", "DIR/x.onnx"), ("both ONNX: nothing to convert",)),
        (("convert", "ONNX", "DIR/x.txt"), ("expected a .onnx or .json",)),
        (("convert", "ONNX", "DIR/missing/x.json"), ("does not exist",)),
        (("convert", "ONNX"), ("the destination is missing",)),
        (("convert", "ONNX", "DIR/a.json", "-o", "DIR/b.json"), ("give the destination once",)),
        (("convert", "NCNN", "DIR/a.onnx", "--input-shape", "in0=3,x"), ("expected NAME=D1,D2",)),
        (("convert", "ONNX", "DIR/x.json", "--opset", "18"), ("--opset applies when ONNX is written",)),
        (("convert", "DIR/nothere.onnx", "DIR/x.json"), ("no such file",)),
    ],
)
def test_usage_mistakes_are_one_line(tmp_path, args, needles):
    subst = {"NCNN": str(NCNN / "model.param"), "ONNX": str(ONNX)}
    real = [subst.get(a, a.replace("DIR", str(tmp_path))) for a in args]
    one_line_exit_2(stdops(*real), *needles)
    _only(tmp_path)


def test_a_giant_input_shape_is_refused_not_allocated(tmp_path):
    r = stdops("convert", str(NCNN / "model.param"), str(tmp_path / "m.onnx"), "--input-shape", "in0=3,100000,100000")
    one_line_exit_2(r, "input 'in0'", "above the limit")
    _only(tmp_path)


def test_a_truncated_model_is_one_line(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(ONNX.read_bytes()[:500])
    one_line_exit_2(stdops("convert", str(tmp_path / "bad.onnx"), str(tmp_path / "x.json")), "bad.onnx")
    _only(tmp_path, "bad.onnx")
