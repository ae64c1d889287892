"""ONNX <-> MDF: the ONNX fixtures round trip ONNX -> MDF (a JSON file) -> ONNX to the same graph and identical
outputs in onnxruntime; the MDF conformance models with an ONNX form (modeci-mdf's own ONNX exports, Keras,
the stateless MDF examples) convert to ONNX and reproduce the reference engine's recorded outputs
(../shared/conformance/mdf/expected, skipped where ../shared is absent); stateful and time-stepped models are
refused with the reason."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from stdops.convert import convert
from stdops.convert.common import ConversionError
from stdops.convert.mdf_to_onnx import mdf_file_to_onnx
from stdops.convert.onnx_to_mdf import onnx_to_mdf

from .test_ncnn_to_onnx import run_onnx

HERE = os.path.dirname(__file__)
ONNX_FIXTURES = sorted(glob.glob(os.path.join(HERE, "..", "onnx", "fixtures", "*.onnx")))
CONFORMANCE = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "conformance", "mdf"))
needs_shared = pytest.mark.skipif(not os.path.isdir(CONFORMANCE), reason="../shared/conformance/mdf is absent")


#: every fixture through JSON; YAML (slow for megabytes of weights) through the smallest
ROUND_TRIPS = [(p, "json") for p in ONNX_FIXTURES] + [(p, "yaml") for p in ONNX_FIXTURES if "recurrent" in p]


@pytest.mark.parametrize("path,fmt", ROUND_TRIPS, ids=[f"{os.path.basename(p)}-{f}" for p, f in ROUND_TRIPS])
def test_onnx_mdf_onnx_round_trip_is_identical(path, fmt, tmp_path):
    convert(path, tmp_path / f"m.{fmt}")
    convert(tmp_path / f"m.{fmt}", tmp_path / "back.onnx")
    a, b = onnx.load(path), onnx.load(tmp_path / "back.onnx")
    assert [n.op_type for n in a.graph.node] == [n.op_type for n in b.graph.node]
    assert [n.name for n in a.graph.node] == [n.name for n in b.graph.node]
    for na, nb in zip(a.graph.node, b.graph.node):
        assert list(na.input) == list(nb.input) and list(na.output) == list(nb.output), na.name
        assert {
            x.name: onnx.helper.get_attribute_value(x) for x in na.attribute if x.type != onnx.AttributeProto.TENSOR
        } == {
            x.name: onnx.helper.get_attribute_value(x) for x in nb.attribute if x.type != onnx.AttributeProto.TENSOR
        }, na.name
    inits_a = {t.name: numpy_helper.to_array(t) for t in a.graph.initializer}
    inits_b = {t.name: numpy_helper.to_array(t) for t in b.graph.initializer}
    for name, v in inits_a.items():
        if name in {i for n in a.graph.node for i in n.input}:
            match = [w for w in inits_b.values() if w.dtype == v.dtype and w.shape == v.shape and np.array_equal(w, v)]
            assert match, f"initializer {name} ({v.dtype}, {v.shape}) is not in the round trip"
    x = np.load(path.replace(".onnx", ".in.npy"))
    feeds = {a.graph.input[0].name: x}
    for ya, yb in zip(run_onnx(a, feeds), run_onnx(b, feeds)):
        np.testing.assert_array_equal(ya, yb)


def test_the_mdf_form_is_modeci_mdfs():
    """A node per ONNX node, the function parameter named as the node with onnx::Op and schema-named args,
    constant inputs as parameters, edges port to port."""
    path = ONNX_FIXTURES[1]  # resnet_small
    doc = onnx_to_mdf(onnx.load(path), path)
    g = next(iter(doc.graphs.values()))
    conv = next(n for n in g.nodes.values() if (n.metadata or {}).get("onnx_op_type") == "Conv")
    fn = conv.parameters[conv.id]
    assert fn.function == "onnx::Conv" and set(fn.args) == {"X", "W", "B"}
    assert isinstance(conv.parameters["W"].value, list) and conv.parameters["W"].metadata["dtype"] == "float32"
    assert "kernel_shape" in conv.parameters and fn.args["X"] in conv.input_ports
    assert all(e.sender_port in g.nodes[e.sender].output_ports for e in g.edges.values())
    assert all(e.receiver_port in g.nodes[e.receiver].input_ports for e in g.edges.values())


# ------------------------------------------------------------------ the reference's MDF models
def _decode(v):
    if isinstance(v, dict) and "__ndarray__" in v:
        return np.asarray(v["__ndarray__"], dtype=v.get("dtype"))
    if isinstance(v, dict) and "__npscalar__" in v:
        return np.asarray(v["__npscalar__"])
    return np.asarray(v)


CONVERTIBLE = [
    "ONNX/ab.json",
    "ONNX/abcd.json",
    "ONNX/abc_basic-mdf.json",
    "ONNX/abc_basic-mdf.yaml",
    "MDF/Simple.json",
    "MDF/Simple.yaml",
    "MDF/Arrays.json",
    "MDF/ABCD.json",
    "MDF/translation/Translated_Simple.json",
    "MDF/translation/Translated_ABCD.json",
    "TensorFlow/Keras/IRIS/keras_to_MDF.json",
]


@needs_shared
@pytest.mark.parametrize("rel", CONVERTIBLE)
def test_reference_model_converts_and_reproduces_the_reference(rel):
    path = os.path.join(CONFORMANCE, "models", rel)
    with open(os.path.join(CONFORMANCE, "expected", rel + ".json")) as f:
        expected = json.load(f)
    assert expected["status"] == "ok" and expected["protocol"]["kind"] == "single"
    model = mdf_file_to_onnx(path)
    import stdops.mdf as mdf

    doc = mdf.load(path, check=False)
    graph = next(iter(doc.graphs.values()))
    feeds = {}
    for i in model.graph.input:  # the reference ran these without inputs: ports read their zeros
        port = next(p for n in graph.nodes.values() for p in n.input_ports.values() if p.id == i.name)
        feeds[i.name] = np.zeros(port.shape, np.float32)
    ys = dict(zip([o.name for o in model.graph.output], run_onnx(model, feeds)))
    outs = expected["graphs"][graph.id]["outputs"]
    for name, y in ys.items():
        want = next(
            _decode(ports[pid])
            for node, ports in outs.items()
            for pid in ports
            if pid == name or f"{node}_{pid}" == name
        )
        np.testing.assert_allclose(y, want.astype(np.float64).reshape(np.shape(y)), rtol=1e-5, atol=1e-6, err_msg=name)


@needs_shared
@pytest.mark.parametrize(
    "rel, needle",
    [
        ("MDF/States.json", "stateful parameter"),
        ("MDF/NewtonCoolingModel.json", "a time derivative"),
        ("MDF/ParametersFunctions.json", "stateful parameter"),
        ("MDF/abc_conditions.json", "EveryNCalls with n != 1 needs call counts"),
        ("MDF/conditions/timeinterval_condition.json", "condition needs time or call counts"),
        ("MDF/conditions/threshold_condition.json", "termination condition needs repeated evaluation"),
        ("MDF/SwitchedRLC_Circuit.json", "parameter conditions change state"),
        ("ONNX/abc.json", "subgraph"),
    ],
)
def test_stateful_or_time_stepped_mdf_is_refused_with_the_reason(rel, needle):
    with pytest.raises(ConversionError) as e:
        mdf_file_to_onnx(os.path.join(CONFORMANCE, "models", rel))
    msg = str(e.value)
    assert needle in msg and "cannot convert to ONNX" in msg and rel.split("/")[-1] in msg, msg


def test_a_function_without_an_onnx_form_is_refused(tmp_path):
    doc = {
        "m": {
            "graphs": {
                "g": {
                    "nodes": {
                        "n": {
                            "parameters": {
                                "x": {"value": 1.0},
                                "ddm": {
                                    "function": "drift_diffusion_integrator",
                                    "args": {
                                        "starting_point": 0,
                                        "non_decision_time": 0,
                                        "drift_rate": 1,
                                        "threshold": 1,
                                    },
                                },
                            },
                            "output_ports": {"out": {"value": "ddm"}},
                        }
                    }
                }
            }
        }
    }
    p = tmp_path / "m.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(
        ConversionError,
        match=r"parameters.ddm: cannot convert to ONNX: the function 'drift_diffusion_integrator' has no ONNX form",
    ):
        mdf_file_to_onnx(str(p))


def _set_everywhere(kind: str, key: str, value):
    def mutate(g: dict) -> None:
        for n in g["nodes"].values():
            for item in [n] if kind == "node" else (n.get(kind) or {}).values():
                item.setdefault("metadata", {})[key] = value

    return mutate


def _set_record(key: str, field: str, value):
    return lambda g: g["metadata"][key][0].__setitem__(field, value)


#: metadata hints of the wrong form (a hand-edited or hostile file); each crashed MDF -> ONNX with a TypeError
#: or ValueError (an unhashable name, int() of a word, np.dtype() of a number, iterating a number)
MALFORMED_HINTS = {
    "output record name is a list": _set_record("onnx_outputs", "name", ["y"]),
    "output record dtype is no dtype": _set_record("onnx_outputs", "dtype", "nonsense"),
    "output record shape is a word": _set_record("onnx_outputs", "shape", "abc"),
    "output records are a number": lambda g: g["metadata"].__setitem__("onnx_outputs", 5),
    "input record port is a list": _set_record("onnx_inputs", "port", ["x"]),
    "input records are a number": lambda g: g["metadata"].__setitem__("onnx_inputs", 7),
    "output counts are words": _set_everywhere("node", "onnx_n_outputs", "two"),
    "output counts are lists": _set_everywhere("node", "onnx_n_outputs", [1]),
    "input port names are numbers": _set_everywhere("input_ports", "onnx_name", 5),
    "output port names are lists": _set_everywhere("output_ports", "onnx_name", [1]),
    "parameter dtypes are numbers": _set_everywhere("parameters", "dtype", 5),
    "parameter names are lists": _set_everywhere("parameters", "onnx_name", [1]),
}


@pytest.fixture(scope="module")
def recurrent_as_mdf(tmp_path_factory) -> dict:
    path = next(p for p in ONNX_FIXTURES if "recurrent" in os.path.basename(p))
    out = tmp_path_factory.mktemp("mdf") / "m.json"
    convert(path, out)
    return json.loads(out.read_text())


@pytest.mark.parametrize("mutate", MALFORMED_HINTS.values(), ids=MALFORMED_HINTS.keys())
def test_malformed_metadata_hints_are_no_hints(mutate, recurrent_as_mdf, tmp_path):
    """The ONNX names, types and output counts ONNX -> MDF records are hints: one of the wrong form is ignored
    (the model converts as if it were absent), and the graph still computes what onnxruntime does on the
    original (without the output records, the LSTM's unread outputs are graph outputs too)."""
    doc = json.loads(json.dumps(recurrent_as_mdf))
    (model,) = doc.values()
    (graph,) = model["graphs"].values()
    mutate(graph)
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    convert(tmp_path / "bad.json", tmp_path / "back.onnx")
    path = next(p for p in ONNX_FIXTURES if "recurrent" in os.path.basename(p))
    original, back = onnx.load(path), onnx.load(tmp_path / "back.onnx")
    x = np.load(path.replace(".onnx", ".in.npy"))
    (want,) = run_onnx(original, {original.graph.input[0].name: x})
    got = run_onnx(back, {back.graph.input[0].name: x})
    assert any(y.shape == want.shape and np.array_equal(y, want) for y in got), [y.shape for y in got]
