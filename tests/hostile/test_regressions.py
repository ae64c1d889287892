"""Regressions: the minimal reproducers of the bugs the fuzzing found (each passes the forked harness, then
raises the expected error naming the file, in this process)."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import stdops.ncnn as sn
import stdops.onnx as so
from stdops import limits
from stdops.errors import ModelFormatError

from .harness import EXAMPLES, MAX_ELEMENTS, Case, report, run_cases
from .mutate import _init, _model, _vi, onnx_seeds, random_layer_case


# ====================================================================== regressions: what the fuzzing found
def _net_case(label: str, param: str, x: np.ndarray, bin_data: bytes = b"") -> Case:
    return Case(
        label, "ncnn", {"model.param": param.encode(), "model.bin": bin_data}, "model.param", "model.bin", {"data": x}
    )


def _onnx_case(label: str, m: onnx.ModelProto, feeds=None) -> Case:
    return Case(label, "onnx", {"model.onnx": m.SerializeToString()}, "model.onnx", None, feeds or {})


def _behaves_then(case: Case, tmp_path: Path, error, match: str | None = None, run: bool = True):
    """The case passes the forked harness (no crash, hang or giant allocation), then, in this process under
    the harness's element limit, raises ``error`` naming the file (and matching ``match``)."""
    failures = run_cases([case], tmp_path / "fork")
    assert not failures, report(failures, 1)
    folder = tmp_path / "direct"
    folder.mkdir()
    for name, data in case.files.items():
        (folder / name).write_bytes(data)
    old = limits.set_max_elements(MAX_ELEMENTS)
    try:
        with pytest.raises(error, match=match) as e:
            if case.kind == "onnx":
                m = so.load(folder / case.main)
                if run:
                    m.run(case.feeds)
            else:
                net = sn.Net.load(folder / case.main, folder / case.bin)
                if run:
                    net.run(case.feeds)
    finally:
        limits.set_max_elements(old)
    assert str(folder / case.main) in str(e.value) or str(folder / "model.bin") in str(e.value), str(e.value)
    return e.value


def test_onnx_initializer_with_huge_dims_and_tiny_data_is_refused(tmp_path):
    """Bug: the element-limit check raised a ResourceLimitError that named neither file nor data problem.
    Dims of 10**12 elements over 4 bytes of data are a corrupt tensor: a ModelFormatError naming both."""
    t = numpy_helper.from_array(np.ones(1, np.float32), "w")
    del t.dims[:]
    t.dims.append(10**12)
    m = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [_vi("x", shape=[1])], [_vi("y")], [t])
    err = _behaves_then(
        _onnx_case("huge dims", m),
        tmp_path,
        ModelFormatError,
        r"initializer 'w'.*1000000000000 "
        r"elements.*holds at most 16",
        run=False,
    )
    assert "corrupt" in str(err)


def test_onnx_initializer_with_negative_dims_is_a_format_error(tmp_path):
    t = numpy_helper.from_array(np.ones((1, 2), np.float32), "w")
    t.dims[0] = -1
    m = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [_vi("x", shape=[2])], [_vi("y")], [t])
    _behaves_then(_onnx_case("negative dims", m), tmp_path, ModelFormatError, r"initializer 'w'.*negative", run=False)


def test_onnx_initializer_over_the_limit_with_real_data_names_the_file(tmp_path):
    m = _model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [_vi("x", shape=[1])],
        [_vi("y")],
        [_init("w", np.ones(MAX_ELEMENTS + 1, np.float32))],
    )
    from stdops.errors import ResourceLimitError

    _behaves_then(_onnx_case("big initializer", m), tmp_path, ResourceLimitError, "initializer 'w'", run=False)


def test_onnx_unknown_elem_type_of_a_graph_input_names_file_and_input(tmp_path):
    """Bug: ModelFormatError(None, None, 'unknown tensor data type'): neither file nor input named."""
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", shape=[2])], [_vi("y")])
    m.graph.input[0].type.tensor_type.elem_type = 2**31 - 1
    _behaves_then(
        _onnx_case("elem_type", m),
        tmp_path,
        ModelFormatError,
        r"graph input 'x'.*unknown tensor data "
        r"type",
        run=False,
    )


def test_onnx_unknown_elem_type_in_a_loop_body_names_file_and_node(tmp_path):
    """Bug: the Loop adapter's scan-output dtype error named no file (found as 'loop value scan elem_type')."""
    _, loop, feeds = onnx_seeds()[3]
    m = onnx.ModelProto()
    m.CopyFrom(loop)
    m.graph.node[0].attribute[0].g.output[2].type.tensor_type.elem_type = 2**31 - 1
    _behaves_then(
        _onnx_case("loop elem_type", m, feeds),
        tmp_path,
        ModelFormatError,
        r"node 'loop' \(Loop-1\): unknown tensor data type",
        run=False,
    )


def test_onnx_loop_iteration_cap_names_file_and_node(tmp_path):
    """Bug: the Loop iteration cap's ResourceLimitError passed through the plan without file or node."""
    from stdops.errors import ResourceLimitError

    _, loop, feeds = onnx_seeds()[3]
    m = onnx.ModelProto()
    m.CopyFrom(loop)
    m.graph.initializer[0].CopyFrom(_init("M", np.int64(2**62)))
    old = limits.set_max_loop_iterations(50)
    try:
        _behaves_then(
            _onnx_case("loop cap", m, feeds),
            tmp_path,
            ResourceLimitError,
            r"node 'loop' \(Loop\): Loop ran 50 iterations",
        )
    finally:
        limits.set_max_loop_iterations(old)


def test_onnx_conv_with_huge_pads_is_refused_before_allocating(tmp_path):
    """Bug: the shared pad_input of Conv / pooling allocated whatever the pads asked (4 TiB here)."""
    from stdops.errors import ResourceLimitError

    m = _model(
        [helper.make_node("Conv", ["x", "W"], ["y"], name="conv", pads=[0, 2**31 - 1, 0, 0])],
        [_vi("x", shape=[1, 1, 3, 3])],
        [_vi("y")],
        [_init("W", np.ones((1, 1, 1, 1), np.float32))],
    )
    _behaves_then(
        _onnx_case("conv pads", m, {"x": np.ones((1, 1, 3, 3), np.float32)}),
        tmp_path,
        ResourceLimitError,
        r"node 'conv' \(Conv\).*padded input",
    )


XOR_PARAM = (EXAMPLES / "xor_mlp.param").read_text()
XOR_BIN = (EXAMPLES / "xor_mlp.bin").read_bytes()


@pytest.mark.parametrize(
    "old,new,match",
    [
        (
            "Softmax                  softmax                  1 1 logits probabilities 0=1 1=1",
            "Clip clip 1 1 logits probabilities 0=1" + "0" * 400,
            r"layer 'clip' \(Clip\): param 0 \(min\)",
        ),
        (
            "2=4 9=1",
            "2=4 9=1 -23310=2,1," + "1" + "0" * 400,
            r"layer 'layer1' \(InnerProduct\): param 10 \(activation_params\)",
        ),
    ],
    ids=["scalar", "array"],
)
def test_ncnn_float_param_beyond_any_float_is_a_format_error(old, new, match, tmp_path):
    """Bug: OverflowError (int too large to convert to float) from spec._convert."""
    text = XOR_PARAM.replace(old, new, 1)
    case = Case(
        "float",
        "ncnn",
        {"model.param": text.encode(), "model.bin": XOR_BIN},
        "model.param",
        "model.bin",
        {"x": np.ones((4, 2), np.float32)},
    )
    _behaves_then(
        case, tmp_path, ModelFormatError, match + ": a 401-digit number is outside the float range", run=False
    )


def test_ncnn_int_param_outside_int32_is_a_format_error(tmp_path):
    text = XOR_PARAM.replace("0=1 1=1\n", "0=99999999999 1=1\n")
    case = Case(
        "softmax",
        "ncnn",
        {"model.param": text.encode(), "model.bin": XOR_BIN},
        "model.param",
        "model.bin",
        {"x": np.ones((4, 2), np.float32)},
    )
    _behaves_then(
        case, tmp_path, ModelFormatError, r"param 0 \(axis\): 99999999999 is outside the int32 range", run=False
    )


def _one_layer(layer: str, nbottom: int = 1) -> str:
    if nbottom == 1:
        return f"7767517\n2 2\nInput in 0 1 data\n{layer}\n"
    return f"7767517\n3 4\nInput in 0 1 data\nSplit sp 1 2 data d0 d1\n{layer}\n"


def test_ncnn_convolution_with_huge_pad_is_refused_before_allocating(tmp_path):
    from stdops.errors import ResourceLimitError

    w = struct.pack("<I", 0) + np.ones(1, np.float32).tobytes()
    case = _net_case(
        "conv pad", _one_layer("Convolution L 1 1 data y 0=1 1=1 6=1 14=2147483647"), np.ones((1, 3, 3), np.float32), w
    )
    _behaves_then(case, tmp_path, ResourceLimitError, r"node 'L' \(Convolution\).*padded input")


@pytest.mark.parametrize(
    "params",
    ["0=0 1=3 2=2 13=2147483647", "0=0 1=3 2=2 3=1 5=1 14=2147483647", "0=1 1=3 2=2 3=100000000 5=1"],
    ids=["max pad_top", "max pad_right, full padding mode", "average pad"],
)
def test_ncnn_pooling_with_huge_pads_is_refused_before_allocating(params, tmp_path):
    """Found by `make fuzz` (seed 20261202, resnet_small's max pool with pad_top 2^31 - 1): Pooling padded its map
    to terabytes before any check (a MemoryError, not the limit)."""
    from stdops.errors import ResourceLimitError

    case = _net_case("pool pad", _one_layer(f"Pooling L 1 1 data y {params}"), np.ones((2, 6, 6), np.float32))
    _behaves_then(case, tmp_path, ResourceLimitError, r"node 'L' \(Pooling\).*padded input")


def test_ncnn_diag_with_int_min_offset_does_not_crash(tmp_path):
    """Bug: numpy's diagonal segfaults on offset -2**31; Diag now clamps the offset (empty diagonal)."""
    case = _net_case("diag", _one_layer("Diag L 1 1 data y 0=-2147483648"), np.ones((2, 4), np.float32))
    assert not run_cases([case], tmp_path), "Diag crashed"
    net = sn.Net.from_bytes(_one_layer("Diag L 1 1 data y 0=-2147483648"))
    assert net.run({"data": np.ones((2, 4), np.float32)})["y"].shape == (0,)
    net = sn.Net.from_bytes(_one_layer("Diag L 1 1 data y 0=2147483647"))
    assert net.run({"data": np.ones((2, 4), np.float32)})["y"].shape == (0,)
    net = sn.Net.from_bytes(_one_layer("Diag L 1 1 data y 0=-1"))
    np.testing.assert_array_equal(net.run({"data": np.arange(8, dtype=np.float32).reshape(2, 4)})["y"], [4])


@pytest.mark.parametrize(
    "layer,x",
    [
        ("Diag L 1 1 data y 0=1000000000", (3,)),
        ("Packing L 1 1 data y 0=2147483647 1=1", (2, 2, 5, 6)),
        ("ROIPooling L 2 1 d0 d1 y 0=12 1=2147483647", (3, 4, 3)),
        ("ROIAlign L 2 1 d0 d1 y 0=2147483647 1=1 5=1", (1, 6, 3)),
        ("ROIAlign L 2 1 d0 d1 y 0=2 1=2147483647", (1, 6, 4)),
        ("ROIAlign L 2 1 d0 d1 y 0=2 1=2 3=65536", (1, 6, 4)),
        ("Pooling L 1 1 data y 0=0 7=1 8=1000000000", (4, 2)),
        ("Pooling3D L 1 1 data y 0=0 7=1 8=1000000000", (2, 2, 4, 1)),
        ("Padding L 1 1 data y 0=1 3=2147483647 6=11", (1, 3, 3)),
    ],
)
def test_ncnn_layers_refuse_giant_outputs(layer, x, tmp_path):
    """Bugs: these layers allocated what their params asked (MemoryError under RLIMIT_AS)."""
    from stdops.errors import ResourceLimitError

    nb = int(layer.split()[2])
    bin_data = np.arange(11, dtype=np.float32).tobytes() if "6=11" in layer else b""
    case = _net_case(layer, _one_layer(layer, nb), np.ones(x, np.float32), bin_data)
    _behaves_then(case, tmp_path, ResourceLimitError, r"node 'L' \(\w+\): \w+ \w+( \w+)?: shape")


def test_ncnn_roialign_pooled_size_zero_is_refused(tmp_path):
    """Bug: pooled_width 0 with pooled_height 10**9 looped a billion times over empty rows (a hang)."""
    case = _net_case(
        "roialign", _one_layer("ROIAlign L 2 1 d0 d1 y 0=0 1=1000000000 3=65536", 2), np.ones((5, 5, 2), np.float32)
    )
    _behaves_then(case, tmp_path, ModelFormatError, "pooled size must be positive", run=False)


@pytest.mark.parametrize(
    "layer", ["Spectrogram L 1 1 data y 0=2147483647", "InverseSpectrogram L 1 1 data y 0=1000000000 3=12"]
)
def test_ncnn_spectrogram_window_is_refused_at_load_naming_file_and_layer(layer, tmp_path):
    """Bugs: a 2**31-sample window allocated at load, and the limit error named neither file nor layer."""
    from stdops.errors import ResourceLimitError

    case = _net_case(layer, _one_layer(layer), np.ones(8, np.float32))
    _behaves_then(case, tmp_path, ResourceLimitError, r"line 4 layer 'L' \(\w+\): Spectrogram window", run=False)


def test_ncnn_expression_lshift_by_a_huge_count_is_cheap():
    """Bug: lshift(1, 2147483647) built a 2**31-bit Python int (256 MiB, seconds) before the int32 wrap."""
    import time

    from stdops.ncnn.expr import parse

    t = time.perf_counter()
    assert parse("lshift(1,2147483647),lshift(3,31),lshift(1,4),lshift(1,-1)").eval([np.ones((2, 3), np.float32)]) == [
        0,
        -(2**31),
        16,
        0,
    ]
    assert time.perf_counter() - t < 0.5
    with pytest.raises(ValueError, match="not a finite number"):  # was an OverflowError
        parse("ceil(exp(1e30))").eval([np.ones(2, np.float32)])


def test_fuzz_ncnn_shape_expressions(tmp_path):
    """Random shape expressions in the layers that take them (Reshape, Crop, Interp)."""
    rng = random.Random(5000)
    cases = [random_layer_case(rng, k, ["Reshape", "Crop", "Interp"]) for k in range(300)]
    tally: dict[str, int] = {}
    failures = run_cases(cases, tmp_path, tally)
    print("ncnn expressions: 300 cases", dict(sorted(tally.items(), key=lambda kv: -kv[1])))
    assert not failures, report(failures, len(cases))


@pytest.mark.parametrize(
    "layer,x,n_weights",
    [
        ("Convolution L 1 1 data y 0=4 1=3 14=2147483647 6=36", (1, 6, 6), 36),
        ("Convolution L 1 1 data y 0=4 1=3 4=65535 6=36", (1, 32, 32), 36),
        ("ConvolutionDepthWise L 1 1 data y 0=2 1=3 7=2 14=2147483647 6=18", (2, 6, 6), 18),
        ("ConvolutionDepthWise L 1 1 data y 0=2 1=3 7=2 15=100000000 6=18", (2, 6, 6), 18),
    ],
    ids=["3x3 pad_top", "3x3 pad_left", "depthwise pad_top", "depthwise pad_right"],
)
def test_ncnn_convolution_paths_refuse_huge_pads_before_allocating(layer, x, n_weights, tmp_path):
    """Found by `make fuzz` (seed 0): the depthwise and 3x3 (Winograd) paths allocated their output and padded
    input (up to 6 TiB) before any check; now every Conv path is bounded first."""
    from stdops.errors import ResourceLimitError

    w = struct.pack("<I", 0) + np.ones(n_weights, np.float32).tobytes()
    case = _net_case(layer, _one_layer(layer), np.ones(x, np.float32), w)
    _behaves_then(
        case, tmp_path, ResourceLimitError, r"node 'L' \(Convolution(DepthWise)?\).*(Conv output|padded input)"
    )


def test_onnx_graph_name_that_is_not_utf8_loads_and_runs(tmp_path):
    """Bug: the optimizer's static-shape inference rebuilt the graph through onnx.helper, whose string fields
    decode as UTF-8: a graph name of other bytes (which no loader reads) ended the load in UnicodeDecodeError."""
    data = (EXAMPLES / "xor_mlp.onnx").read_bytes()
    field = b"\x12\x07xor_mlp"  # GraphProto.name (field 2, 7 bytes)
    assert data.count(field) == 1
    bad = data.replace(field, b"\x12\x07\xff\xfe\x81xor_")
    case = Case("graph name not utf-8", "onnx", {"model.onnx": bad}, "model.onnx", None, {})
    failures = run_cases([case], tmp_path / "fork")
    assert not failures, report(failures, 1)
    x = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)
    want = so.load(EXAMPLES / "xor_mlp.onnx").run({"x": x})
    (tmp_path / "model.onnx").write_bytes(bad)
    got = so.load(tmp_path / "model.onnx").run({"x": x})
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("shape", [(0,), (3,)])
def test_onnx_split_num_outputs_beyond_the_node_outputs_is_refused_before_slicing(shape, tmp_path):
    """Bug (make fuzz, seed 20261202): Split-18 with num_outputs 2**31 - 1 on an empty axis built 2**31 empty
    slices (MemoryError); num_outputs must be the node's output count."""
    from stdops.errors import OpError

    m = _model(
        [helper.make_node("Split", ["x"], ["a", "b"], name="n", num_outputs=2**31 - 1)],
        [_vi("x", TensorProto.INT8, shape=list(shape))],
        [_vi("a"), _vi("b")],
        opset=18,
    )
    _behaves_then(
        _onnx_case("split num_outputs", m, {"x": np.zeros(shape, np.int8)}),
        tmp_path,
        OpError,
        r"node 'n' \(Split\).*num_outputs 2147483647 differs from the node's 2 outputs",
    )
