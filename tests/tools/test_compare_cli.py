"""`stdops compare` for a person (issue 14, item 4): made-up inputs, one relative error per value, stopping at
the first divergence, any two runs (stdops, onnxruntime, the ncnn wheel, another model, a conversion), JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ..test_cli import one_line_exit_2
from ..test_cli import stdops as cli

ROOT = Path(__file__).resolve().parent.parent
RESNET = ROOT / "onnx" / "fixtures" / "resnet_small_opset11.onnx"
RESNET_NCNN = ROOT / "ncnn" / "fixtures" / "resnet_small" / "model.param"


def random_model(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Sigmoid", ["a"], ["b"], name="sigmoid"),
        helper.make_node("RandomUniformLike", ["b"], ["noise"], name="noise_source", seed=3.0),
        helper.make_node("Add", ["b", "noise"], ["c"], name="add"),
        helper.make_node("Tanh", ["c"], ["y"], name="tanh"),
    ]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 2]) for n in ("x", "y")]
    g = helper.make_graph(nodes, "g", vi[:1], vi[1:])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def report(r) -> dict:
    return json.loads(r.stdout)


def test_made_up_inputs_and_one_relative_error_per_value(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    import stdops

    r = cli("compare", str(RESNET), "--seed", "3", "--json")
    assert r.returncode == 0, r.stderr
    doc = report(r)
    assert doc["inputs"] == {"input.1": {"shape": [1, 3, 64, 64], "dtype": "float32", "made_up": True}}
    assert doc["agree"] and len(doc["values"]) == 30
    x = np.random.default_rng(3).standard_normal((1, 3, 64, 64), dtype=np.float32)  # what --seed 3 made up
    ours = stdops.load(RESNET).run({"input.1": x})["116"]
    theirs = ort.InferenceSession(str(RESNET), providers=["CPUExecutionProvider"]).run(None, {"input.1": x})[0]
    out = next(v for v in doc["values"] if v["value"] == "116")
    rel = float(np.abs(ours.astype(np.float64) - theirs).max() / np.abs(theirs).max())
    assert out["rel_err"] == pytest.approx(rel, rel=1e-6, abs=1e-12)
    assert all(v["ok"] and v["rel_err"] < 1e-4 for v in doc["values"])


def test_first_divergence_stops_there(tmp_path):
    pytest.importorskip("onnxruntime")
    model = random_model(tmp_path / "random.onnx")
    whole = cli("compare", str(model), "--json")
    assert whole.returncode == 1 and len(report(whole)["values"]) == 5
    r = cli("compare", str(model), "--json", "--first-divergence")
    assert r.returncode == 1
    doc = report(r)
    assert [v["value"] for v in doc["values"]] == ["a", "b", "noise"] and doc["stopped_at_first_divergence"]
    assert doc["first_divergence"] == {"node": "noise_source", "op": "RandomUniformLike", "value": "noise"}
    table = cli("compare", str(model), "--first-divergence", "-o", str(tmp_path / "report.json"))
    assert table.returncode == 1 and "stopped at the first value outside tolerance" in table.stdout
    assert json.loads((tmp_path / "report.json").read_text())["values"][-1]["value"] == "noise"


def test_against_another_model_finds_the_edited_weight(tmp_path):
    import onnx
    from onnx import numpy_helper

    m = onnx.load(RESNET)
    t = next(t for t in m.graph.initializer if t.name == "onnx::Conv_130")
    w = numpy_helper.to_array(t).copy()
    w.flat[5] += 0.5
    t.CopyFrom(numpy_helper.from_array(w, t.name))
    edited = tmp_path / "edited.onnx"
    onnx.save(m, edited)
    r = cli("compare", str(edited), "--against", str(RESNET), "--first-divergence", "--json")
    assert r.returncode == 1
    assert report(r)["first_divergence"]["node"] == "/layers/layers.1/c2/Conv"
    assert cli("compare", str(RESNET), "--against", "stdops-unfused").returncode == 0


def test_an_onnx_model_against_the_ncnn_wheel_on_its_conversion(tmp_path):
    pytest.importorskip("ncnn")
    pytest.importorskip("onnxruntime")
    # the pnnx conversion of the same network (tests/ncnn/fixtures): its blobs are renamed, so the inputs and
    # outputs pair by position, and the batch axis ncnn does not have is dropped
    for by in ("stdops", "onnxruntime"):
        r = cli("compare", str(RESNET), "--by", by, "--against", f"ncnn:{RESNET_NCNN}", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        doc = report(r)
        assert doc["agree"] and len(doc["values"]) == 1 and doc["values"][0]["shape"] in ([1, 10], [10])
        assert any("matched by position" in n for n in doc["notes"])


def test_conversion_by_the_converters_or_a_clear_refusal(tmp_path):
    pytest.importorskip("onnxruntime")
    try:
        import stdops.convert  # noqa: F401
    except ImportError:
        one_line_exit_2(cli("compare", str(RESNET), "--against", "ncnn"), "no converter", "ncnn:FILE")
        return
    pytest.importorskip("ncnn")
    r = cli("compare", str(RESNET), "--against", "ncnn", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = report(r)
    assert doc["agree"] and len(doc["values"]) > 1 and "conversion" in " ".join(doc["notes"])
    r = cli("compare", str(RESNET_NCNN), "--shape", "in0=3,64,64", "--against", "onnxruntime", "--json")
    assert r.returncode == 0, r.stdout + r.stderr


def test_usage_errors(tmp_path):
    one_line_exit_2(cli("compare", str(RESNET), "--against", "nothing-like-this"), "--against", "runtime")
    one_line_exit_2(cli("compare", str(RESNET), "--against", "stdops"), "same run")
    one_line_exit_2(cli("compare", str(RESNET), "-o", str(tmp_path / "r.txt")), ".json")
    one_line_exit_2(cli("compare", str(RESNET), "--wheel-defaults"), "--wheel-defaults")
    assert list(tmp_path.iterdir()) == []
