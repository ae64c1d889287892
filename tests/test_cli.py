"""The command line's contract, checked on the installed console script (and ``python -m stdops``):
usage mistakes are one line and exit 2, paths and values are checked before work starts, options that do
not apply are refused, ``compare`` exits 1 on a disagreement."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stdops.examples import demo_inputs, demo_mdf_path, demo_model_path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
XOR = str(demo_model_path())


def _script() -> str:
    beside = Path(sys.executable).with_name("stdops")
    found = str(beside) if beside.exists() else shutil.which("stdops")
    if found is None:
        pytest.skip("the stdops console script is not installed (pip install -e . provides it)")
    return found


def stdops(*args: str, cwd: str | Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    full_env.pop("STDOPS_DEBUG", None)
    return subprocess.run([_script(), *args], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=120)


def one_line_exit_2(r: subprocess.CompletedProcess, *needles: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def x_npy(tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("in") / "x.npy"
    np.save(p, demo_inputs()["x"])
    return str(p)


# ------------------------------------------------------------------ usage mistakes: one line, exit 2
@pytest.mark.parametrize(
    "args, needles",
    [
        ((), ("no command given", "run")),
        (("frobnicate",), ("unknown command 'frobnicate'",)),
        (("runn", XOR), ("unknown command 'runn'", "did you mean run?")),
        (("run",), ("stdops run", "required: model")),
        (("run", XOR, "--inptu", "x=x.npy"), ("unknown option --inptu", "did you mean --input?")),
        (("run", XOR, "--dt", "abc"), ("--dt", "expected a number")),
        (("run", XOR, "--dt"), ("--dt", "expected one argument")),
        (("run", "no/such/model.onnx"), ("no such file",)),
        (("run", XOR, "extra.bin"), ("no such file",)),
        (("compare", XOR, "--atol", "-1"), ("--atol", ">= 0")),
        (("ops", "--front-end", "tflite"), ("invalid choice",)),
        (("ops", "--layer", "Convolutio"), ("no ncnn layer", "did you mean Convolution?")),
        (("info",), ("required: model",)),
    ],
)
def test_usage_errors_are_one_line_exit_2(args, needles):
    one_line_exit_2(stdops(*args), *needles)


def test_debug_is_accepted_after_the_subcommand_and_shows_the_traceback(tmp_path):
    bad = tmp_path / "junk.onnx"
    bad.write_bytes(b"garbage")
    one_line_exit_2(stdops("run", str(bad)), "junk.onnx")
    for args in (("--debug", "run", str(bad)), ("run", str(bad), "--debug")):
        r = stdops(*args)
        assert r.returncode != 0 and "Traceback" in r.stderr and "junk.onnx" in r.stderr


def test_version_and_python_m():
    from stdops import __version__

    r = stdops("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"stdops {__version__}"
    r = subprocess.run([sys.executable, "-m", "stdops", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "run" in r.stdout and "compare" in r.stdout
    r = subprocess.run([sys.executable, "-m", "stdops", "frobnicate"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_boolean_flags_are_flags_in_help():
    r = stdops("compare", "--help")
    assert r.returncode == 0
    line = next(ln for ln in r.stdout.splitlines() if "--wheel-defaults" in ln)
    assert "WHEEL_DEFAULTS" not in line and "--no-" not in r.stdout  # a flag takes no value
    r = stdops("plot", "--help")
    assert "--graph " in r.stdout or "--graph\n" in r.stdout


# ------------------------------------------------------------------ checked before the work starts
def test_output_paths_are_checked_before_running(tmp_path, x_npy):
    missing = tmp_path / "no" / "such" / "out"
    one_line_exit_2(stdops("run", XOR, "-i", f"x={x_npy}", "-o", str(missing)), "does not exist")
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    one_line_exit_2(stdops("run", XOR, "-i", f"x={x_npy}", "-o", str(a_file)), "existing file")
    one_line_exit_2(stdops("run", XOR, "-i", f"x={x_npy}", "--dump", str(a_file)), "existing file")
    one_line_exit_2(stdops("run", XOR, "-i", f"x={x_npy}", "-o", str(tmp_path / "o.csv")), ".csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # nothing written


def test_mdf_values_and_paths_checked_first(tmp_path):
    mdf = str(demo_mdf_path())
    one_line_exit_2(stdops("run", mdf, "--duration", "1", "--dt", "0"), "--dt", "positive")
    one_line_exit_2(stdops("run", mdf, "--duration", "-1", "--dt", "0.1"), "--duration")
    one_line_exit_2(
        stdops("run", mdf, "--duration", "1", "--dt", "0.1", "-o", str(tmp_path / "x" / "t.csv")), "does not exist"
    )
    one_line_exit_2(stdops("run", mdf, "--duration", "1", "--dt", "0.1", "-o", str(tmp_path / "t.png")), ".csv or .npz")
    one_line_exit_2(stdops("plot", mdf, "-o", str(tmp_path / "nope" / "p.png")), "does not exist")


def test_missing_extra_is_one_line(tmp_path):
    # a matplotlib that fails to import shadows the real one, as on a machine without the [plots] extra
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "matplotlib.py").write_text("raise ImportError('not installed (hidden by the test)')\n")
    out = tmp_path / "g.png"
    r = stdops("plot", str(demo_mdf_path()), "--graph", "-o", str(out), env={"PYTHONPATH": str(hide)})
    one_line_exit_2(r, "matplotlib", "stdops[plots]")
    assert not out.exists()


def test_options_that_do_not_apply_are_refused(tmp_path, x_npy):
    mdf = str(demo_mdf_path())
    one_line_exit_2(stdops("run", XOR, "-i", f"x={x_npy}", "--duration", "3"), "--duration", "MDF")
    one_line_exit_2(stdops("run", XOR, "-i", f"x={x_npy}", "--seed", "3"), "--seed", "MDF")
    one_line_exit_2(stdops("run", mdf, "--dump", str(tmp_path / "d")), "--dump", "ONNX")
    one_line_exit_2(stdops("compare", XOR, "--wheel-defaults"), "--wheel-defaults", "ncnn")
    one_line_exit_2(stdops("plot", mdf, "--graph", "--duration", "2"), "--graph")
    one_line_exit_2(stdops("plot", XOR), "MDF")


# ------------------------------------------------------------------ results
def test_output_means_where_the_result_goes(tmp_path, x_npy):
    folder = tmp_path / "outs"
    r = stdops("run", XOR, "-i", f"x={x_npy}", "-o", str(folder))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["label.npy", "probabilities.npy"]
    npz = tmp_path / "outs.npz"
    r = stdops("run", XOR, "-i", f"x={x_npy}", "--output", str(npz))
    assert r.returncode == 0, r.stderr
    with np.load(npz) as z:
        np.testing.assert_array_equal(z["probabilities"], np.load(folder / "probabilities.npy"))
    traj = tmp_path / "t.csv"
    r = stdops("run", str(demo_mdf_path()), "--duration", "0.5", "--dt", "0.1", "-o", str(traj))
    assert r.returncode == 0, r.stderr
    assert len(traj.read_text().splitlines()) == 1 + 6  # header + t = 0, 0.1, ..., 0.5


def test_npz_output_keeps_any_output_name_at_the_path_given(tmp_path):
    # np.savez(path, **outputs) crashed on an output named "file" (its own first parameter), took one named
    # "allow_pickle" for its flag, and wrote out.NPZ to out.NPZ.npz
    ort = pytest.importorskip("onnxruntime")
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    names = ("file", "allow_pickle", "args")
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], [n]) for op, n in zip(("Relu", "Neg", "Abs"), names)],
        "g",
        [x],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in names],
    )
    model = tmp_path / "clash.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    xv = np.array([1.5, -2.0, 0.0], np.float32)
    np.save(tmp_path / "x.npy", xv)
    out = tmp_path / "out.NPZ"
    r = stdops("run", str(model), "-i", f"x={tmp_path / 'x.npy'}", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clash.onnx", "out.NPZ", "x.npy"]
    expected = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": xv})
    with np.load(out) as z:
        assert sorted(z.files) == sorted(names)
        for n, want in zip(names, expected):
            np.testing.assert_array_equal(z[n], want)
    traj = tmp_path / "t.NPZ"  # the MDF trajectory too
    r = stdops("run", str(demo_mdf_path()), "--duration", "0.5", "--dt", "0.1", "-o", str(traj))
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "t.NPZ.npz").exists()
    with np.load(traj) as z:
        np.testing.assert_allclose(z["time"], np.linspace(0.0, 0.5, 6))


def test_the_model_s_preferred_step_is_used_and_checked(tmp_path):
    # a preferred_dt or preferred_duration that is not a usable number crashed `run` (float("abc"), a
    # ZeroDivisionError for 0) with a traceback; it is the file's word, checked as --dt / --duration are
    text = Path(demo_mdf_path()).read_text()
    assert "preferred_dt: 0.001" in text and "preferred_duration: 10" in text
    model = tmp_path / "osc.yaml"
    model.write_text(text.replace("preferred_dt: 0.001", "preferred_dt: 0.25"))
    traj = tmp_path / "t.csv"
    r = stdops("run", str(model), "--duration", "1", "-o", str(traj))
    assert r.returncode == 0, r.stderr
    times = [float(line.split(",")[0]) for line in traj.read_text().splitlines()[1:]]
    assert times == [0.0, 0.25, 0.5, 0.75, 1.0]  # t = k * dt up to the duration (Simulation.run's rule)
    for key, bad, given in (
        ("preferred_dt", '"abc"', "--duration"),
        ("preferred_dt", "0", "--duration"),
        ("preferred_dt", "[1]", "--duration"),
        ("preferred_duration", '"abc"', "--dt"),
        ("preferred_duration", "-1", "--dt"),
    ):
        old = "preferred_dt: 0.001" if key == "preferred_dt" else "preferred_duration: 10"
        model.write_text(text.replace(old, f"{key}: {bad}"))
        one_line_exit_2(stdops("run", str(model), given, "1"), "osc.yaml", f"metadata.{key}", "expected a number")


def test_compare_exit_status_and_full_names(tmp_path, x_npy):
    pytest.importorskip("onnxruntime")
    import onnx
    from onnx import TensorProto, helper

    r = stdops("compare", XOR, "-i", f"x={x_npy}")
    assert r.returncode == 0, r.stderr
    assert "all" in r.stdout and "agree" in r.stdout and "atol + rtol * max|theirs|" in r.stdout
    # a node name far wider than the terminal is printed whole
    m = onnx.load(XOR)
    long_name = "a_node_name_much_longer_than_the_terminal_is_wide_" * 4
    m.graph.node[2].name = long_name
    p = tmp_path / "long.onnx"
    onnx.save(m, p)
    r = stdops("compare", str(p), "-i", f"x={x_npy}", env={"COLUMNS": "40"})
    assert r.returncode == 0 and long_name in r.stdout
    # two runtimes' random generators differ: RandomUniformLike makes a value that disagrees -> exit 1
    nodes = [
        helper.make_node("RandomUniformLike", ["x"], ["noise"], name="noise_source", seed=3.0),
        helper.make_node("Add", ["x", "noise"], ["y"], name="add"),
    ]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 2]) for n in ("x", "y")]
    g = helper.make_graph(nodes, "g", vi[:1], vi[1:])
    q = tmp_path / "random.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), q)
    r = stdops("compare", str(q), "-i", f"x={x_npy}")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "first disagreement: node 'noise_source'" in r.stdout


def test_limit_flags(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    shape = numpy_helper.from_array(np.array([1000], np.int64), "shape")
    g = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["shape"], ["y"], name="fill"), helper.make_node("Abs", ["x"], ["z"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "z")],
        [shape],
    )
    p = tmp_path / "fill.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    x = tmp_path / "x.npy"
    np.save(x, np.ones(2, np.float32))
    assert stdops("run", str(p), "-i", f"x={x}").returncode == 0
    line = one_line_exit_2(stdops("run", str(p), "-i", f"x={x}", "--max-elements", "100"), "fill")
    assert "1000" in line and "100" in line
    assert stdops("run", str(p), "-i", f"x={x}", "--max-elements", "1K").returncode == 0  # 1024 >= 1000
    one_line_exit_2(stdops("run", str(p), "--max-elements", "lots"), "--max-elements", "expected a count")
    one_line_exit_2(stdops("ops", "--max-elements", "5"), "unknown option --max-elements")


def test_lenient_mdf_loading(tmp_path):
    import json

    model = json.loads(Path(demo_mdf_path()).read_text()) if str(demo_mdf_path()).endswith(".json") else None
    if model is None:
        import yaml

        model = yaml.safe_load(Path(demo_mdf_path()).read_text())
    graph = next(iter(model.values()))["graphs"]
    node = next(iter(next(iter(graph.values()))["nodes"].values()))
    node["output_port"] = node.pop("output_ports")  # a misspelt field
    node["output_ports"] = node["output_port"]
    p = tmp_path / "misspelt.json"
    p.write_text(json.dumps(model))
    one_line_exit_2(stdops("run", str(p)), "output_port", "did you mean output_ports?")
    one_line_exit_2(stdops("info", str(p)), "did you mean output_ports?")
    r = stdops("run", str(p), "--lenient")
    assert r.returncode == 0, r.stderr
    assert stdops("info", str(p), "--lenient").returncode == 0
    one_line_exit_2(stdops("info", XOR, "--lenient"), "--lenient", "MDF")
