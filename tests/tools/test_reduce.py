"""`stdops reduce`: bisecting a failing model to a small cut in its own format, inputs frozen (issue 14, item 2).

The failures are real: a weight perturbed in a copy of the ResNet fixture (judged by a user's --check that
runs the cut with the original weights in onnxruntime, or the original net in the ncnn wheel), and an op
whose values two runtimes compute differently (RandomUniformLike: each runtime has its own generator)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ..test_cli import one_line_exit_2
from ..test_cli import stdops as cli

ROOT = Path(__file__).resolve().parent.parent
RESNET = ROOT / "onnx" / "fixtures" / "resnet_small_opset11.onnx"
NCNN_DIR = ROOT / "ncnn" / "fixtures" / "resnet_small"
CHECKS = Path(__file__).resolve().parent / "checks"
PERTURBED = "onnx::Conv_130"  # the weight of /layers/layers.1/c2/Conv


def _inputs_of(stdout: str) -> dict[str, str]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith("  input '"):
            name, path = line[len("  input '") :].split("': ", 1)
            out[name] = path
    return out


@pytest.fixture(scope="module")
def perturbed(tmp_path_factory) -> Path:
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper

    m = onnx.load(RESNET)
    t = next(t for t in m.graph.initializer if t.name == PERTURBED)
    w = numpy_helper.to_array(t).copy()
    w.flat[5] += 0.5
    t.CopyFrom(numpy_helper.from_array(w, PERTURBED))
    p = tmp_path_factory.mktemp("perturbed") / "resnet_perturbed.onnx"
    onnx.save(m, p)
    return p


def test_perturbed_resnet_reduces_to_the_perturbed_conv(perturbed, tmp_path):
    pytest.importorskip("onnxruntime")
    import onnx

    check = f"{sys.executable} {CHECKS / 'onnx_original_weights.py'} {{model}} {RESNET} {{inputs}}"
    out = tmp_path / "reduced.onnx"
    t0 = time.perf_counter()
    r = cli("reduce", str(perturbed), "--check", check, "-o", str(out))
    seconds = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    assert seconds < 60, seconds
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    assert 1 <= len(m.graph.node) <= 3
    assert PERTURBED in {t.name for t in m.graph.initializer}
    assert any(PERTURBED in n.input for n in m.graph.node)
    print(f"reduced to {len(m.graph.node)} node(s) in {seconds:.1f} s:", r.stdout.splitlines()[-4])
    # the frozen inputs are the cut's graph inputs, saved beside it; the cut still fails the check
    inputs = _inputs_of(r.stdout)
    assert set(inputs) == {vi.name for vi in m.graph.input}
    assert all(Path(p).parent == tmp_path for p in inputs.values())
    feeds = {n: np.load(p) for n, p in inputs.items()}
    import onnxruntime as ort

    sess = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert sess.run(None, feeds)[0].shape == tuple(d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim)
    import subprocess

    argv = [sys.executable, str(CHECKS / "onnx_original_weights.py"), str(out), str(RESNET)]
    for n, p in inputs.items():
        argv += ["-i", f"{n}={p}"]
    assert subprocess.run(argv, capture_output=True, timeout=120).returncode == 1


def test_a_disagreement_with_onnxruntime_is_cut_to_the_node(tmp_path):
    pytest.importorskip("onnxruntime")
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("Sigmoid", ["a"], ["b"], name="sigmoid"),
        helper.make_node("RandomUniformLike", ["b"], ["noise"], name="noise_source", seed=3.0),
        helper.make_node("Add", ["b", "noise"], ["c"], name="add"),
        helper.make_node("Tanh", ["c"], ["d"], name="tanh"),
        helper.make_node("Mul", ["d", "a"], ["y"], name="mul"),
    ]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 2]) for n in ("x", "y")]
    model = tmp_path / "random.onnx"
    onnx.save(
        helper.make_model(helper.make_graph(nodes, "g", vi[:1], vi[1:]), opset_imports=[helper.make_opsetid("", 17)]),
        model,
    )
    out = tmp_path / "cut.onnx"
    r = cli("reduce", str(model), "--against", "onnxruntime", "-o", str(out), "--seed", "7")
    assert r.returncode == 0, r.stderr
    m = onnx.load(out)
    assert [n.name for n in m.graph.node] == ["noise_source"]
    assert [vi.name for vi in m.graph.input] == ["b"]
    b = np.load(_inputs_of(r.stdout)["b"])
    x = np.random.default_rng(7).standard_normal((4, 2), dtype=np.float32)  # what --seed 7 made up
    np.testing.assert_allclose(b, 1 / (1 + np.exp(-np.maximum(x, 0))), rtol=1e-6)  # frozen from the real run
    assert "disagree" in r.stdout and "rerun: stdops compare" in r.stdout


def test_perturbed_ncnn_net_reduces_to_the_perturbed_layer(tmp_path):
    pytest.importorskip("ncnn")
    from stdops.tools.cut import NcnnSource

    src = NcnnSource(str(NCNN_DIR / "model.param"))
    src.freeze({"in0": np.load(NCNN_DIR / "in0.npy")})
    k = [n.name for n in src.nodes].index("conv_14")
    src.layers[k].weights["weight_data"][7] += 0.5
    files = src.write(range(len(src.nodes)), src.graph_outputs, str(tmp_path), "perturbed")  # our writers
    check = (
        f"{sys.executable} {CHECKS / 'ncnn_original_net.py'} {{model}} "
        f"{NCNN_DIR / 'model.param'} {NCNN_DIR / 'model.bin'} {{inputs}}"
    )
    out = tmp_path / "cut.param"
    r = cli("reduce", files["model"], "--check", check, "-o", str(out))
    assert r.returncode == 0, r.stderr
    layers = [ln.split()[:2] for ln in out.read_text().splitlines()[2:]]
    assert [t for t, _ in layers if t != "Input"] == ["Convolution"] and ["Convolution", "conv_14"] in layers
    assert (tmp_path / "cut.bin").stat().st_size == (9216 + 32) * 4 + 4  # tagged fp32 weights, raw bias


def test_models_that_do_not_fail_are_refused_and_nothing_is_written(perturbed, tmp_path):
    pytest.importorskip("onnxruntime")
    out = tmp_path / "cut.onnx"
    one_line_exit_2(cli("reduce", str(perturbed), "--against", "onnxruntime", "-o", str(out)), "does not fail")
    one_line_exit_2(cli("reduce", str(perturbed), "--against", "stdops-unfused", "-o", str(out)), "does not fail")
    never = f"{sys.executable} -c pass"
    one_line_exit_2(cli("reduce", str(perturbed), "--check", never, "-o", str(out)), "check passes", "nothing")
    assert list(tmp_path.iterdir()) == []


def test_ncnn_fixture_agrees_with_the_wheel(tmp_path):
    pytest.importorskip("ncnn")
    r = cli(
        "reduce",
        str(NCNN_DIR / "model.param"),
        "--shape",
        "in0=3,64,64",
        "--against",
        "ncnn",
        "-o",
        str(tmp_path / "c.param"),
    )
    one_line_exit_2(r, "does not fail", "ncnn")
    assert list(tmp_path.iterdir()) == []


def test_usage_errors(perturbed, tmp_path):
    from stdops.examples import demo_mdf_path

    one_line_exit_2(cli("reduce", str(perturbed)), "--against", "--check")
    one_line_exit_2(cli("reduce", str(perturbed), "--against", "onnxruntime", "--check", "true"), "one of them")
    one_line_exit_2(cli("reduce", str(perturbed), "--against", "ncnn"), "does not run ONNX")
    one_line_exit_2(cli("reduce", str(perturbed), "--against", "onnxruntime", "-o", str(tmp_path / "x.param")), ".onnx")
    one_line_exit_2(cli("reduce", str(demo_mdf_path()), "--against", "onnxruntime"), "MDF")
    one_line_exit_2(
        cli("reduce", str(perturbed), "--check", "no-such-command-here {model}", "-o", str(tmp_path / "c.onnx")),
        "no such command",
    )
    assert list(tmp_path.iterdir()) == []
