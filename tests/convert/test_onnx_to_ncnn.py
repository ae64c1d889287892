"""ONNX -> ncnn, checked with the official ncnn wheel (forked, exact-fp32 options): the ONNX fixtures, one-op
models of every op the converter maps (their outputs against onnxruntime's), and ncnn -> ONNX -> ncnn round
trips of the pnnx fixtures (against the wheel's recorded outputs). Relative error per value
(max |a - b| / max |b|) within 1e-5."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from stdops.convert import convert
from stdops.convert.common import ConversionError
from stdops.convert.onnx_to_ncnn import onnx_to_ncnn
from stdops.ncnn.param import parse_text, write_binary

from ..ncnn import wheel
from .test_ncnn_to_onnx import MAKE, NETWORKS, _network_entries, _sha256, rel_error, run_onnx

needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")
HERE = os.path.dirname(__file__)
ONNX_FIXTURES = sorted(glob.glob(os.path.join(HERE, "..", "onnx", "fixtures", "*.onnx")))
NCNN_FIXTURES = os.path.join(HERE, "..", "ncnn", "fixtures")
RTOL = 1e-5


def run_in_wheel(
    param_text: str, bin_bytes: bytes, feeds: dict[str, np.ndarray], outputs: list[str], options: dict | None = None
) -> list:
    """The wheel's outputs of a text .param + .bin: blobs by index in order of first appearance, as
    write_binary numbers them."""
    pf = parse_text(param_text)
    index: dict[str, int] = {}
    for L in pf.layers:
        for b in (*L.bottoms, *L.tops):
            index.setdefault(b, len(index))
    res = wheel.wheel_net(
        write_binary(pf),
        bin_bytes,
        list(feeds.values()),
        [index[n] for n in feeds],
        [index[n] for n in outputs],
        timeout=600,
        options=options,
    )
    for r in res:
        if isinstance(r, Exception):
            raise r
    return res


def _ncnn_name(onnx_name: str) -> str:
    return "".join(c if c.isalnum() or c in "_.-:/" else "_" for c in onnx_name)


def check_model(model, feeds: dict[str, np.ndarray], what: str) -> float:
    """ONNX -> ncnn; the wheel's outputs against onnxruntime's; returns the worst relative error."""
    text, data = onnx_to_ncnn(model, what)
    outs = [o.name for o in model.graph.output]
    theirs = run_onnx(model, feeds)
    ncnn_feeds = {_ncnn_name(n): (v[0] if v.ndim >= 2 and v.shape[0] == 1 else v) for n, v in feeds.items()}
    ours = run_in_wheel(text, data, ncnn_feeds, [_ncnn_name(n) for n in outs])
    worst = 0.0
    for o, a, b in zip(outs, ours, theirs):
        a = np.asarray(a)
        assert a.size == b.size, f"{what}: {o}: ncnn {a.shape} vs ONNX {b.shape}"
        worst = max(worst, rel_error(a.reshape(b.shape), b))
    return worst


@needs_wheel
@pytest.mark.parametrize("path", ONNX_FIXTURES, ids=[os.path.basename(p) for p in ONNX_FIXTURES])
def test_onnx_fixture_converts_and_runs_in_the_wheel(path, tmp_path):
    import onnx

    model = onnx.load(path)
    x = np.load(path.replace(".onnx", ".in.npy"))
    written = convert(path, tmp_path / "m.param")
    assert [os.path.basename(p) for p in written] == ["m.bin", "m.param"]
    err = check_model(model, {model.graph.input[0].name: x}, os.path.basename(path))
    print(f"{os.path.basename(path)} -> ncnn: max relative error {err:.2e} (wheel vs onnxruntime)")
    assert err <= RTOL


@needs_wheel
@pytest.mark.parametrize(
    "name", sorted(d for d in os.listdir(NCNN_FIXTURES) if os.path.exists(os.path.join(NCNN_FIXTURES, d, "blobs.json")))
)
def test_ncnn_onnx_ncnn_round_trip_matches_the_wheel(name, tmp_path):
    folder = os.path.join(NCNN_FIXTURES, name)
    with open(os.path.join(folder, "blobs.json")) as f:
        blobs = json.load(f)
    x = np.load(os.path.join(folder, "in0.npy"))
    if x.dtype.kind in "iu":
        pytest.skip("token ids: the wheel reads an Embed input's bits, an ONNX graph its values")
    convert(os.path.join(folder, "model.param"), tmp_path / "m.onnx", input_shapes={"in0": x.shape})
    convert(tmp_path / "m.onnx", tmp_path / "back.param")
    text = (tmp_path / "back.param").read_text()
    out = run_in_wheel(text, (tmp_path / "back.bin").read_bytes(), {"in0": x}, [blobs["outputs"][0]])[0]
    err = rel_error(np.asarray(out).reshape(-1), np.load(os.path.join(folder, "out0.npy")).reshape(-1))
    print(f"{name}: ncnn -> ONNX -> ncnn max relative error {err:.2e}")
    assert err <= RTOL


@needs_wheel
@pytest.mark.parametrize("name", sorted(_network_entries()))
def test_network_ncnn_onnx_ncnn_round_trip_matches_the_wheel(name, tmp_path):
    """The generated torchvision networks (skipped with the command when absent) back to ncnn, run by the
    wheel under the options their recorded outputs were made with."""
    entry = _network_entries()[name]
    folder = os.path.join(NETWORKS, name)
    for file, digest in entry["sha256"].items():
        p = os.path.join(folder, file)
        if not os.path.exists(p) or _sha256(p) != digest:
            pytest.skip(f"{name}: {file} is missing or differs from tests/ncnn/networks.json ({MAKE})")
    x = np.load(os.path.join(folder, "in0.npy"))
    convert(os.path.join(folder, "model.param"), tmp_path / "m.onnx", input_shapes={"in0": x.shape})
    convert(tmp_path / "m.onnx", tmp_path / "back.param")
    options = {"use_packing_layout": True} if entry.get("options", "").startswith("packing on") else None
    text, data = (tmp_path / "back.param").read_text(), (tmp_path / "back.bin").read_bytes()
    out = run_in_wheel(text, data, {"in0": x}, [entry["outputs"][0]], options)[0]
    err = rel_error(np.asarray(out).reshape(-1), np.load(os.path.join(folder, "out0.npy")).reshape(-1))
    print(f"{name}: ncnn -> ONNX -> ncnn max relative error {err:.2e}")
    assert err <= RTOL


# ------------------------------------------------------------------ one-op models
def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    import onnx

    return onnx.shape_inference.infer_shapes(m)


def _f(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def one_op_cases():
    rng = np.random.default_rng(5)
    x4 = (1, 3, 8, 9)
    n = helper.make_node
    cases = [
        (
            "Conv",
            [n("Conv", ["x", "w", "b"], ["y"], pads=[1, 0, 2, 1], strides=[2, 1])],
            [("w", _f(rng, 4, 3, 3, 3)), ("b", _f(rng, 4))],
        ),
        (
            "Conv_group_same",
            [n("Conv", ["x", "w"], ["y"], group=3, auto_pad="SAME_UPPER", strides=[2, 1])],
            [("w", _f(rng, 6, 1, 3, 2))],
        ),
        (
            "ConvTranspose",
            [n("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 0])],
            [("w", _f(rng, 3, 2, 3, 3)), ("b", _f(rng, 2))],
        ),
        ("MaxPool", [n("MaxPool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1])], []),
        ("AveragePool_ceil", [n("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)], []),
        (
            "AveragePool_pads",
            [n("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)],
            [],
        ),
        ("GlobalAveragePool", [n("GlobalAveragePool", ["x"], ["y"])], []),
        (
            "BatchNormalization",
            [n("BatchNormalization", ["x", "s", "bb", "m", "v"], ["y"], epsilon=1e-3)],
            [("s", _f(rng, 3)), ("bb", _f(rng, 3)), ("m", _f(rng, 3)), ("v", np.abs(_f(rng, 3)) + 0.5)],
        ),
        (
            "InstanceNormalization",
            [n("InstanceNormalization", ["x", "s", "bb"], ["y"])],
            [("s", _f(rng, 3)), ("bb", _f(rng, 3))],
        ),
        ("Relu_Sigmoid", [n("Relu", ["x"], ["t"]), n("Sigmoid", ["t"], ["y"])], []),
        ("LeakyRelu_Elu", [n("LeakyRelu", ["x"], ["t"], alpha=0.2), n("Elu", ["t"], ["y"], alpha=0.5)], []),
        (
            "HardSwish_Clip",
            [n("HardSwish", ["x"], ["t"]), n("Clip", ["t", "lo", "hi"], ["y"])],
            [("lo", np.float32(-0.2)), ("hi", np.float32(0.6))],
        ),
        ("Tanh_Exp_Abs", [n("Tanh", ["x"], ["t"]), n("Exp", ["t"], ["u"]), n("Abs", ["u"], ["y"])], []),
        ("Add_per_channel", [n("Add", ["x", "c"], ["y"])], [("c", _f(rng, 1, 3, 1, 1))]),
        ("Mul_row", [n("Mul", ["x", "c"], ["y"])], [("c", _f(rng, 9))]),
        ("Sub_scalar_first", [n("Sub", ["c", "x"], ["y"])], [("c", np.float32(0.5))]),
        ("Div_scalar", [n("Div", ["x", "c"], ["y"])], [("c", np.float32(2.5))]),
        ("Softmax", [n("Softmax", ["x"], ["y"], axis=1)], []),
        (
            "Concat_Split",
            [n("Split", ["x", "sp"], ["a", "b"], axis=2), n("Concat", ["b", "a"], ["y"], axis=2)],
            [("sp", np.array([3, 5]))],
        ),
        (
            "Slice",
            [n("Slice", ["x", "st", "en", "ax"], ["y"])],
            [("st", np.array([1, 2])), ("en", np.array([3, -1])), ("ax", np.array([1, 3]))],
        ),
        ("Transpose", [n("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])], []),
        (
            "Reshape_Flatten",
            [n("Reshape", ["x", "sh"], ["t"]), n("Flatten", ["t"], ["y"])],
            [("sh", np.array([1, 3, 72]))],
        ),
        ("Pad_reflect", [n("Pad", ["x", "p"], ["y"], mode="reflect")], [("p", np.array([0, 0, 1, 2, 0, 0, 2, 1]))]),
        (
            "Resize_nearest",
            [
                n(
                    "Resize",
                    ["x", "", "", "sz"],
                    ["y"],
                    mode="nearest",
                    coordinate_transformation_mode="asymmetric",
                    nearest_mode="floor",
                )
            ],
            [("sz", np.array([1, 3, 16, 18]))],
        ),
        ("Resize_linear", [n("Resize", ["x", "", "", "sz"], ["y"], mode="linear")], [("sz", np.array([1, 3, 12, 20]))]),
        ("ReduceMean", [n("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=1)], []),
        (
            "Gemm",
            [n("Flatten", ["x"], ["t"]), n("Gemm", ["t", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)],
            [("w", _f(rng, 5, 216)), ("c", _f(rng, 5))],
        ),
    ]
    out = [(name, _model(nodes, [("x", x4)], ["y"], inits), {"x": _f(rng, *x4)}) for name, nodes, inits in cases]
    seq = (1, 6, 8)
    out.append(
        (
            "MatMul_LayerNorm",
            _model(
                [n("MatMul", ["x", "w"], ["t"]), n("LayerNormalization", ["t", "g", "bb"], ["y"], axis=-1)],
                [("x", seq)],
                ["y"],
                [("w", _f(rng, 8, 5)), ("g", _f(rng, 5)), ("bb", _f(rng, 5))],
            ),
            {"x": _f(rng, *seq)},
        )
    )
    out.append(
        (
            "MatMul_two_blobs",
            _model([n("Transpose", ["x"], ["t"], perm=[0, 2, 1]), n("MatMul", ["x", "t"], ["y"])], [("x", seq)], ["y"]),
            {"x": _f(rng, *seq)},
        )
    )
    T, I, H = 5, 4, 3
    for op, gates, attrs in (("LSTM", 4, {}), ("GRU", 3, {"linear_before_reset": 1}), ("RNN", 1, {})):
        for direction, D in (("forward", 1), ("bidirectional", 2)):
            inits = [("W", _f(rng, D, gates * H, I)), ("R", _f(rng, D, gates * H, H)), ("B", _f(rng, D, 2 * gates * H))]
            node = n(op, ["x", "W", "R", "B"], ["y"], hidden_size=H, direction=direction, **attrs)
            out.append((f"{op}_{direction}", _model([node], [("x", (T, 1, I))], ["y"], inits), {"x": _f(rng, T, 1, I)}))
    return out


ONE_OP = one_op_cases()


@needs_wheel
@pytest.mark.parametrize("name,model,feeds", ONE_OP, ids=[c[0] for c in ONE_OP])
def test_one_op_model_matches_onnxruntime_in_the_wheel(name, model, feeds):
    err = check_model(model, feeds, name)
    assert err <= RTOL, f"{name}: relative error {err:.3g}"


def test_an_op_without_an_ncnn_form_is_refused_naming_the_node():
    m = _model(
        [
            helper.make_node("Relu", ["x"], ["t"], name="r"),
            helper.make_node("TopK", ["t", "k"], ["y", "i"], name="top"),
        ],
        [("x", (1, 6))],
        ["y"],
        [("k", np.array([2]))],
    )
    with pytest.raises(
        ConversionError, match=r"node 'top' \(TopK\): cannot convert to ncnn: ONNX TopK has no ncnn counterpart"
    ):
        onnx_to_ncnn(m, "m.onnx")


def test_a_batch_of_two_is_refused():
    m = _model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="c")],
        [("x", (2, 3, 4, 4))],
        ["y"],
        [("w", np.ones((2, 3, 1, 1), np.float32))],
    )
    with pytest.raises(ConversionError, match="a batch of 2: ncnn blobs hold one sample"):
        onnx_to_ncnn(m, "m.onnx")


def test_dynamic_sizes_need_an_input_shape():
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="r")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(
        ConversionError, match=r"input 'x': cannot convert to ncnn: has no static shape.*--input-shape x="
    ):
        onnx_to_ncnn(m, "m.onnx")
    for shape in ((1, 3, 4, 5), (3, 4, 5)):  # with the batch axis, or in ncnn's layout without it
        text, _ = onnx_to_ncnn(m, "m.onnx", {"x": shape})
        assert "Input" in text and "0=5 1=4 2=3" in text
