"""ONNX external data is read from the model's own folder only (or the folder the caller names), for
initializers and for Constant / attribute tensors at every depth, with sizes checked against the file first.

Each hostile case runs in a forked child (harness.bounded) with the working directory set to a folder that
holds a "secret" file: a model must never read it, whatever its external-data location says."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import stdops.onnx as so
from stdops.errors import ModelFormatError

from .harness import bounded
from .mutate import _model, _vi

SECRET = np.arange(4, dtype=np.float32) + 1000  # what a model must never get to see


def _external(name: str, location: str, n: int = 4, offset: int | None = None, length: int | None = None):
    t = onnx.TensorProto()
    t.name, t.data_type = name, TensorProto.FLOAT
    t.dims.append(n)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = t.external_data.add()
            entry.key, entry.value = key, str(value)
    return t


def _const_model(t: onnx.TensorProto, where: str = "graph") -> onnx.ModelProto:
    """y = x + c, with c a Constant node holding ``t``: in the main graph, an If branch, a Loop body or a
    model-local function."""
    const = helper.make_node("Constant", [], ["c"], name="const", value=t)
    add = helper.make_node("Add", ["x", "c"], ["y"], name="add")
    if where == "graph":
        return _model([const, add], [_vi("x", shape=[4])], [_vi("y", shape=[4])])
    if where == "if":
        branch = helper.make_graph([const, add], "b", [], [_vi("y")])
        cond = numpy_helper.from_array(np.array(True), "cond")
        node = helper.make_node("If", ["cond"], ["out"], name="if", then_branch=branch, else_branch=branch)
        return _model([node], [_vi("x", shape=[4])], [_vi("out")], [cond])
    if where == "loop":
        body = helper.make_graph(
            [helper.make_node("Identity", ["c_in"], ["c_out"], name="keep"), const, add],
            "body",
            [_vi("i", TensorProto.INT64, []), _vi("c_in", TensorProto.BOOL, [])],
            [_vi("c_out", TensorProto.BOOL, []), _vi("y")],
        )
        inits = [numpy_helper.from_array(np.int64(1), "M"), numpy_helper.from_array(np.array(True), "cnd")]
        node = helper.make_node("Loop", ["M", "cnd"], ["ys"], name="loop", body=body)
        return _model([node], [_vi("x", shape=[4])], [_vi("ys")], inits)
    fn = helper.make_function("local", "AddConst", ["x"], ["y"], [const, add], [helper.make_opsetid("", 17)])
    m = _model(
        [helper.make_node("AddConst", ["x"], ["y"], name="call", domain="local")], [_vi("x", shape=[4])], [_vi("y")]
    )
    m.opset_import.append(helper.make_opsetid("local", 1))
    m.functions.append(fn)
    return m


@pytest.fixture
def folders(tmp_path):
    """model/ (the model's folder, with a legit data file and a link that leads out) and cwd/ (the working
    directory, with the secret); the child process runs in cwd/."""
    model_dir, cwd = tmp_path / "model", tmp_path / "cwd"
    model_dir.mkdir()
    cwd.mkdir()
    (cwd / "secret.bin").write_bytes(SECRET.tobytes())
    (model_dir / "data.bin").write_bytes((np.arange(4, dtype=np.float32) + 1).tobytes())
    os.symlink(cwd / "secret.bin", model_dir / "link.bin")
    return model_dir, cwd


def _load_in(cwd, path, feeds=True, **kw):
    def go():
        os.chdir(cwd)
        m = so.load(path, **kw)
        out = m.run({"x": np.zeros(4, np.float32)}) if feeds else {}
        return {k: np.asarray(v).tolist() for k, v in out.items()}

    return go


HOSTILE_LOCATIONS = {
    "a file of the working directory": ("secret.bin", r"does not exist in .*model"),
    "a path up and out": ("../cwd/secret.bin", "leaves the model's folder"),
    "an absolute path": (None, "is absolute"),
    "a link that leads out": ("link.bin", "leads outside the model's folder"),
}


@pytest.mark.parametrize("where", ["graph", "if", "loop", "function"])
@pytest.mark.parametrize("case", sorted(HOSTILE_LOCATIONS))
def test_constant_external_data_outside_the_model_folder_is_refused(folders, where, case):
    model_dir, cwd = folders
    location, match = HOSTILE_LOCATIONS[case]
    location = location or str(cwd / "secret.bin")
    path = model_dir / "m.onnx"
    path.write_bytes(_const_model(_external("c", location), where).SerializeToString())
    out = bounded(_load_in(cwd, path), seconds=30)
    assert out.raised(ModelFormatError, match), (out.error, out.message, out.result)
    assert str(path) in out.message and "const" in out.message and "1000.0" not in out.message
    assert out.seconds < 10 and out.peak_mb < 200


@pytest.mark.parametrize("where", ["graph", "if", "loop", "function"])
def test_constant_external_data_in_the_model_folder_is_read(folders, where):
    model_dir, cwd = folders
    path = model_dir / "m.onnx"
    path.write_bytes(_const_model(_external("c", "data.bin"), where).SerializeToString())
    out = bounded(_load_in(cwd, path), seconds=30)
    assert out.error is None, out.message
    assert "[1.0, 2.0, 3.0, 4.0]" in out.result


def _init_model(location: str, **kw) -> onnx.ModelProto:
    return _model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [_vi("x", shape=[4])],
        [_vi("y", shape=[4])],
        [_external("w", location, **kw)],
    )


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(offset=8), r"needs bytes 8\.\.24 of 'data.bin', which holds 16 bytes"),
        (dict(length=8), "length 8 does not match dims"),
        (dict(n=2**28), r"needs bytes 0\.\.1073741824 of 'data.bin', which holds 16 bytes"),
    ],
    ids=["offset past the end", "length not the dims'", "dims far beyond the file"],
)
def test_external_sizes_are_checked_against_the_file_before_reading(folders, kw, match):
    model_dir, cwd = folders
    path = model_dir / "m.onnx"
    path.write_bytes(_init_model("data.bin", **kw).SerializeToString())
    out = bounded(_load_in(cwd, path, feeds=False), seconds=30)
    assert out.raised(ModelFormatError, match), (out.error, out.message)
    assert "initializer 'w'" in out.message and str(path) in out.message
    assert out.seconds < 10 and out.peak_mb < 100  # a 1 GiB tensor was never allocated


def test_bytes_or_proto_with_external_data_need_a_base_dir(folders):
    model_dir, cwd = folders
    proto = _init_model("data.bin")
    data = proto.SerializeToString()
    for source in (data, proto):
        out = bounded(_load_in(cwd, source), seconds=30)
        assert out.raised(ModelFormatError, "pass base_dir="), out.message
        out = bounded(_load_in(cwd, source, base_dir=model_dir), seconds=30)
        assert out.error is None and "[1.0, 2.0, 3.0, 4.0]" in out.result, out.message
    # a proto whose external file is the working directory's is refused too, from any base_dir
    bad = _init_model("secret.bin")
    out = bounded(_load_in(cwd, bad, base_dir=model_dir), seconds=30)
    assert out.raised(ModelFormatError, "does not exist"), out.message
    # the caller's proto is left as it was
    assert proto.graph.initializer[0].data_location == TensorProto.EXTERNAL
    assert not proto.graph.initializer[0].raw_data


def test_external_initializer_from_the_model_folder(folders):
    model_dir, _ = folders
    path = model_dir / "m.onnx"
    path.write_bytes(_init_model("data.bin").SerializeToString())
    m = so.load(path)
    np.testing.assert_array_equal(m.run({"x": np.zeros(4, np.float32)})["y"], [1, 2, 3, 4])
