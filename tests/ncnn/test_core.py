"""The ncnn front end's files, Net/Extractor and run_layer, with bad input; a first wheel comparison."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import stdops
import stdops.ncnn as sn
from stdops.errors import InputError, ModelFormatError, UnsupportedOp
from stdops.ncnn import param as P
from stdops.ncnn.modelbin import FLAG_FP16, ModelBinReader, ModelBinWriter

from . import wheel

TEXT = """7767517
5 7
Input            data   0 1 data 0=4 1=3 2=2
Split            sp     1 2 data a b
ReLU             r1     1 1 a ra 0=0.1
Sigmoid          s1     1 1 b sb
Noop             nn     2 2 ra sb c d
"""


def _x():
    return np.linspace(-2, 2, 24, dtype=np.float32).reshape(2, 3, 4)


def test_text_param_net_and_extractor():
    net = sn.Net.from_bytes(TEXT)
    assert net.input_names == ["data"] and net.output_names == ["c", "d"]
    x = _x()
    out = net.run({"data": x})
    np.testing.assert_allclose(out["c"], np.where(x > 0, x, 0.1 * x), rtol=1e-6)
    np.testing.assert_allclose(out["d"], 1 / (1 + np.exp(-x)), rtol=1e-6)
    seen = []
    ex = net.create_extractor()
    ex.input("data", x)
    ra = ex.extract("ra")
    np.testing.assert_allclose(ra, np.where(x > 0, x, 0.1 * x), rtol=1e-6)
    net.plan.run({"data": x}, ["ra"], hook=lambda n, b, v: seen.append(n))
    assert "s1" not in seen  # only what "ra" needs


def test_param_values_and_arrays():
    assert P.parse_value("1") == 1 and P.parse_value("1.5") == 1.5 and P.parse_value("1e-3") == 1e-3
    assert P.parse_value("abc") == "abc" and P.parse_value('"x y"') == "x y"
    pf = P.parse_text("7767517\n1 1\nInput in 0 1 x -23303=3,1,2,3 4=0.5,1.5\n")
    assert pf.layers[0].params == {3: [1, 2, 3], 4: [0.5, 1.5]}


def test_text_and_binary_round_trip(tmp_path):
    net = sn.Net.from_bytes(TEXT)
    for binary in (False, True):
        pp = tmp_path / ("m.param.bin" if binary else "m.param")
        net.save(pp, tmp_path / "m.bin", binary=binary)
        again = sn.Net.load(pp, tmp_path / "m.bin")
        assert [L.type for L in again.layers] == [L.type for L in net.layers]
        assert [L.params.as_dict() for L in again.layers] == [L.params.as_dict() for L in net.layers]
        x = _x()
        a = again.run({again.input_names[0]: x})
        b = net.run({"data": x})
        for va, vb in zip(a.values(), b.values()):
            np.testing.assert_array_equal(va, vb)


def test_modelbin_tags_and_byte_identical_weights():
    w = ModelBinWriter()
    w.write(np.arange(3, dtype=np.float32), tagged=True)
    w.write(np.array([1.5, -2.25, 3], np.float32), tagged=True, storage="fp16")
    w.write(np.array([1, -2, 3], np.int8), tagged=True, storage="int8")
    w.write(np.arange(2, dtype=np.float32), tagged=False)
    table = np.linspace(-1, 1, 256, dtype=np.float32)
    w.write_raw_bytes(struct.pack("<I", 0x01020304) + table.tobytes() + bytes([0, 255, 7]) + b"\0")
    data = w.getvalue()
    r = ModelBinReader(data, "w.bin")
    np.testing.assert_array_equal(r.load(3, True, "L", "a"), [0, 1, 2])
    np.testing.assert_array_equal(r.load(3, True, "L", "b"), [1.5, -2.25, 3])
    assert struct.unpack("<I", data[16:20])[0] == FLAG_FP16
    b = r.load(3, True, "L", "c")
    assert b.dtype == np.int8 and list(b) == [1, -2, 3]
    np.testing.assert_array_equal(r.load(2, False, "L", "d"), [0, 1])
    np.testing.assert_array_equal(r.load(3, True, "L", "e"), table[[0, 255, 7]])
    r.finish()
    assert b"".join(data[s:e] for *_x, s, e in r.records) == data


@pytest.mark.parametrize(
    "text,match",
    [
        ("7767518\n0 0\n", "unsupported param magic"),
        ("7767517\n2 2\nInput in 0 1 x\n", "declares 2 layers"),
        ("7767517\n1 2\nInput in 0 1 x\nReLU r 1 1 x y\n", "more layer lines"),
        ("7767517\n2 2\nInput in 0 1 x\nFooBar r 1 1 x y\n", "unsupported operator ncnn:FooBar"),
        ("7767517\n2 2\nInput in 0 1 x\nReLU r 1 1 nowhere y\n", "'nowhere' is not produced"),
        ("7767517\n2 2\nInput in 0 1 x\nReLU r 1 1 x y 0=abc\n", r"param 0 \(slope\): expected a float"),
        ("7767517\n2 2\nInput in 0 1 x 0=2.5\nReLU r 1 1 x y\n", r"line 3 .*param 0 \(w\): a float literal"),
        ("7767517\n2 2\nInput in 0 1 x\nReLU r 1 1 x y 40=1\n", "param id 40"),
        ("7767517\n2 1\nInput in 0 1 x\nReLU r 1 1 x x\n", "produced twice"),
        ("7767517\n2 3\nInput in 0 1 x\nReLU r 1 1 x y\n", "declares 3 blobs"),
    ],
)
def test_bad_param_files(text, match):
    with pytest.raises((ModelFormatError, UnsupportedOp), match=match):
        sn.Net.from_bytes(text)


def test_bad_binary_param_and_bin(tmp_path):
    good = P.write_binary(P.parse_text(TEXT))
    with pytest.raises(ModelFormatError, match="ends early"):
        P.parse_binary(good[:-6], "m.param.bin")
    with pytest.raises(ModelFormatError, match="left over"):
        P.parse_binary(good + b"\0\0\0\0", "m.param.bin")
    r = ModelBinReader(b"\0\0\0\0" + b"\0" * 8, "w.bin")
    with pytest.raises(ModelFormatError, match="ends early"):
        r.load(3, True, "layer 'c'", "weight")
    r = ModelBinReader(b"\0" * 8, "w.bin")
    r.load(1, False, "x", "y")
    with pytest.raises(ModelFormatError, match="left over"):
        r.finish()
    with pytest.raises(ModelFormatError, match="more than the weight file"):
        ModelBinReader(b"\0" * 8, "w.bin").load(10**12, False, "x", "y")


def test_bad_feeds():
    net = sn.Net.from_bytes(TEXT)
    with pytest.raises(InputError, match="no input blob named"):
        net.run({"nope": _x()})
    with pytest.raises(InputError, match="1 to 4 dims"):
        net.run({"data": np.zeros((1, 1, 1, 1, 1), np.float32)})
    with pytest.raises(InputError, match="missing input"):
        net.run({})


def test_stdops_load_recognizes_param(tmp_path):
    p = tmp_path / "m.param"
    p.write_text(TEXT)
    assert isinstance(stdops.load(p), sn.Net)


def test_run_layer_checks_weights():
    with pytest.raises(ModelFormatError, match="loads 0 weights"):
        sn.run_layer("ReLU", {}, [np.zeros(3, np.float32)], [_x()])
    np.testing.assert_array_equal(sn.run_layer("AbsVal", {}, [], [_x()])[0], np.abs(_x()))


@pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")
@pytest.mark.parametrize(
    "type_name,params", [("ReLU", {}), ("ReLU", {0: 0.2}), ("Sigmoid", {}), ("TanH", {}), ("AbsVal", {})]
)
def test_activation_layers_match_the_wheel(type_name, params):
    x = np.random.default_rng(0).standard_normal((3, 5, 7)).astype(np.float32)
    ours = sn.run_layer(type_name, params, [], [x])
    theirs = wheel.wheel_run(type_name, params, [], [x])
    wheel.assert_close(ours, theirs, what=type_name)


@pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")
def test_split_and_noop_match_the_wheel():
    rng = np.random.default_rng(7)
    cases = []
    for _ in range(24):
        shape = tuple(int(v) for v in rng.integers(1, 6, size=int(rng.integers(1, 5))))
        x = rng.standard_normal(shape).astype(np.float32)
        cases.append(("Split", {}, [], [x], int(rng.integers(1, 4))))
        cases.append(("Noop", {}, [], [x], 1))
    theirs = wheel.wheel_batch(cases)
    for case, th in zip(cases, theirs):
        ours = sn.run_layer(case[0], case[1], case[2], case[3], case[4])
        wheel.assert_close(ours, th, what=f"{case[0]} {case[3][0].shape}")
