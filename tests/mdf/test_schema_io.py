"""Schema, JSON/YAML I/O (lossless round trip, older spellings) and bad input."""

from __future__ import annotations

import json
import warnings

import pytest

import stdops.mdf as mdf
from stdops.errors import ModelFormatError, StdopsError, ValidationError

from ._conformance import CONF

MODEL = {
    "M": {
        "format": "ModECI MDF v0.4",
        "generating_application": "test",
        "metadata": {"k": 1},
        "graphs": {
            "g1": {
                "nodes": {
                    "A": {
                        "metadata": {"color": "red"},
                        "input_ports": {"in": {"shape": [2], "type": "float", "reduce": "add"}},
                        "functions": {
                            "f": {"function": "linear", "args": {"variable0": "in", "slope": 2, "intercept": 0}}
                        },
                        "parameters": {
                            "rate": {"value": 0.5},
                            "v": {
                                "default_initial_value": 0,
                                "time_derivative": "rate * f[0]",
                                "conditions": [{"id": "reset", "test": "v > 1", "value": 0}],
                            },
                        },
                        "output_ports": {"out": {"value": "v"}},
                    },
                    "B": {"input_ports": {"in": {}}, "output_ports": {"out": {"value": "in"}}},
                },
                "edges": {
                    "e": {
                        "sender": "A",
                        "receiver": "B",
                        "sender_port": "out",
                        "receiver_port": "in",
                        "parameters": {"weight": 2},
                    }
                },
                "conditions": {
                    "node_specific": {"B": {"type": "EveryNCalls", "kwargs": {"dependency": "A", "n": 2}}},
                    "termination": {
                        "environment_state_update": {"type": "AfterNCalls", "kwargs": {"dependency": "B", "n": 1}}
                    },
                },
            }
        },
    }
}


def test_round_trip_json_and_yaml(tmp_path):
    m = mdf.model_from_data(json.loads(json.dumps(MODEL)))
    for ext in ("json", "yaml"):
        p = tmp_path / f"m.{ext}"
        mdf.save(m, p)
        m2 = mdf.load(p)
        assert mdf.to_data(m2) == mdf.to_data(m)
        mdf.save(m2, tmp_path / f"again.{ext}")
        assert (tmp_path / f"again.{ext}").read_text() == p.read_text()
    d = mdf.to_data(m)["M"]
    assert d["graphs"]["g1"]["nodes"]["A"]["input_ports"]["in"] == {"shape": [2], "type": "float", "reduce": "add"}
    assert d["graphs"]["g1"]["conditions"]["node_specific"]["B"] == {
        "type": "EveryNCalls",
        "kwargs": {"dependency": "A", "n": 2},
    }


def test_api_shape():
    m = mdf.model_from_data(MODEL)
    g = m.graph()
    assert g.id == "g1" and list(g.nodes) == ["A", "B"]
    assert g.nodes["A"].parameters["v"].is_stateful()
    assert not g.nodes["A"].parameters["rate"].is_stateful()
    assert g.nodes["A"].input_ports["in"].shape == (2,)


@pytest.mark.skipif(not (CONF / "models").is_dir(), reason="../shared/conformance/mdf is not available")
def test_every_shared_model_round_trips(tmp_path):
    for p in sorted((CONF / "models").rglob("*")):
        if p.suffix not in (".json", ".yaml"):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = mdf.load(p)
            q = tmp_path / ("x" + p.suffix)
            mdf.save(m, q)
            m2 = mdf.load(q)
        assert mdf.to_data(m2) == mdf.to_data(m), p


def test_older_spellings():
    m = mdf.model_from_data(
        {
            "m": {
                "graphs": {
                    "g": {
                        "nodes": {
                            "A": {
                                "input_ports": {"i": {"shape": "(1,)"}},
                                "functions": {
                                    "f": {"function": {"linear": {"variable0": "i", "slope": 1, "intercept": 2}}}
                                },
                                "parameters": {"p": {"value": 1, "conditions": {"c1": {"test": "p > 0", "value": 3}}}},
                                "output_ports": {"o": {"value": "f", "shape": "(1,)"}},
                            }
                        },
                        "conditions": {
                            "node_specific": {"A": {"type": "BeforeNCalls", "args": {"dependencies": "A", "n": 1}}}
                        },
                    }
                }
            }
        }
    )
    a = m.graph().nodes["A"]
    assert a.input_ports["i"].shape == (1,)
    assert a.functions["f"].function == "linear" and a.functions["f"].args["intercept"] == 2
    assert a.parameters["p"].conditions[0].id == "c1"
    assert m.graph().conditions.node_specific["A"].kwargs == {"dependencies": "A", "n": 1}
    sim = mdf.Simulation(m)
    sim.evaluate()
    assert sim.outputs["A"]["o"].tolist() == [2.0]


def test_validation_errors_name_the_json_path():
    bad = json.loads(json.dumps(MODEL))
    bad["M"]["graphs"]["g1"]["nodes"]["A"]["input_ports"]["in"]["reduce"] = "average"
    with pytest.raises(ValidationError, match=r"graphs\.g1\.nodes\.A\.input_ports\.in\.reduce"):
        mdf.model_from_data(bad, "x.json")
    bad = json.loads(json.dumps(MODEL))
    bad["M"]["graphs"]["g1"]["nodes"]["A"]["input_ports"]["in"]["shape"] = "(1, x)"
    with pytest.raises(ValidationError, match=r"input_ports\.in\.shape"):
        mdf.model_from_data(bad)
    bad = json.loads(json.dumps(MODEL))
    del bad["M"]["graphs"]["g1"]["edges"]["e"]["sender"]
    with pytest.raises(ValidationError, match=r"graphs\.g1\.edges\.e\.sender"):
        mdf.model_from_data(bad)


def test_real_fields_never_warn():
    """notes on graphs and nodes, name on edges (NeuroML exports) are MDF 0.4 fields."""
    d = json.loads(json.dumps(MODEL))
    d["M"]["graphs"]["g1"]["notes"] = "a graph"
    d["M"]["graphs"]["g1"]["nodes"]["A"]["notes"] = "hello"
    d["M"]["graphs"]["g1"]["edges"]["e"]["name"] = "edge e"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = mdf.model_from_data(d)
    assert mdf.to_data(m)["M"]["graphs"]["g1"]["nodes"]["A"]["notes"] == "hello"


@pytest.mark.parametrize(
    "edit,field,suggestion",
    [
        (lambda d: d["nodes"]["B"].update(output_port={}), "nodes.B.output_port", "output_ports"),
        (
            lambda d: d["nodes"]["A"]["parameters"]["rate"].update(time_derivativ="1"),
            "time_derivativ",
            "time_derivative",
        ),
        (lambda d: d["edges"]["e"].update(recevier_port="in"), "edges.e.recevier_port", "receiver_port"),
    ],
)
def test_misspelt_field_is_an_error_naming_the_closest(edit, field, suggestion):
    d = json.loads(json.dumps(MODEL))
    edit(d["M"]["graphs"]["g1"])
    with pytest.raises(ValidationError, match=rf"{field}.*did you mean {suggestion}\?") as e:
        mdf.model_from_data(d, "x.json")
    assert "x.json" in str(e.value)


def test_lenient_load_warns_and_keeps(tmp_path):
    d = json.loads(json.dumps(MODEL))
    d["M"]["graphs"]["g1"]["nodes"]["A"]["parameter"] = {"x": {"value": 1}}
    p = tmp_path / "m.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ValidationError, match="unknown field 'parameter': did you mean parameters"):
        mdf.load(p)
    with pytest.warns(mdf.MdfWarning, match=r"graphs\.g1\.nodes\.A: unknown field\(s\) parameter"):
        m = mdf.load(p, strict=False)
    assert mdf.to_data(m)["M"]["graphs"]["g1"]["nodes"]["A"]["parameter"] == {"x": {"value": 1}}


def test_a_field_unlike_any_real_one_warns_and_is_kept():
    """A producer's own key (or YAML anchors kept under a key of their own) is not a misspelling."""
    d = json.loads(json.dumps(MODEL))
    d["M"]["anchors"] = {"shared": [1, 2]}
    d["M"]["graphs"]["g1"]["nodes"]["A"]["colour"] = "red"
    with pytest.warns(mdf.MdfWarning, match="unknown field"):
        m = mdf.model_from_data(d)
    assert mdf.to_data(m)["M"]["graphs"]["g1"]["nodes"]["A"]["colour"] == "red"


@pytest.mark.parametrize(
    "text,ext,match",
    [
        ('{"m": {"graphs": ', "json", "malformed JSON"),
        ("m: [unclosed", "yaml", "malformed YAML"),
        ("[1, 2]", "json", "not an MDF model"),
        ('{"a": {}, "b": {}}', "json", "one top-level entry"),
    ],
)
def test_malformed_files(tmp_path, text, ext, match):
    p = tmp_path / f"m.{ext}"
    p.write_text(text)
    with pytest.raises(ModelFormatError, match=match) as e:
        mdf.load(p)
    assert str(p) in str(e.value)


def test_missing_file_and_binary_file(tmp_path):
    with pytest.raises(ModelFormatError, match="no such file"):
        mdf.load(tmp_path / "nope.json")
    p = tmp_path / "b.json"
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ModelFormatError):
        mdf.load(p)


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda d: d["edges"]["e"].update(sender="Z"), r"edges\.e\.sender: no node 'Z'"),
        (lambda d: d["edges"]["e"].update(receiver_port="nope"), r"edges\.e\.receiver_port: node 'B' has no input"),
        (lambda d: d["edges"]["e"].update(sender_port="nope"), r"edges\.e\.sender_port"),
        (
            lambda d: d["nodes"]["A"]["output_ports"]["out"].update(value="missing_id * 2"),
            r"nodes\.A\.output_ports\.out\.value: unknown name 'missing_id'",
        ),
        (lambda d: d["nodes"]["A"]["functions"]["f"].update(function="no_such_fn"), r"unknown function 'no_such_fn'"),
        (lambda d: d["conditions"]["node_specific"].update(Q={"type": "Always"}), r"node_specific\.Q: no node"),
        (lambda d: d["conditions"]["node_specific"]["B"].update(type="Sometimes"), r"unknown condition type"),
        (lambda d: d["conditions"]["termination"].update(fortnight={"type": "Always"}), r"termination\.fortnight"),
    ],
)
def test_bad_references(tmp_path, mutate, match):
    d = json.loads(json.dumps(MODEL))
    mutate(d["M"]["graphs"]["g1"])
    p = tmp_path / "m.json"
    p.write_text(json.dumps(d))
    with pytest.raises(StdopsError, match=match) as e:
        mdf.load(p)
    assert str(p) in str(e.value)


def test_cycle_without_initial_values_is_an_error_and_default_value_breaks_it():
    d = {
        "m": {
            "graphs": {
                "g": {
                    "nodes": {
                        "A": {"input_ports": {"i": {}}, "output_ports": {"o": {"value": "i + 1"}}},
                        "B": {"input_ports": {"i": {}}, "output_ports": {"o": {"value": "i * 2"}}},
                    },
                    "edges": {
                        "ab": {"sender": "A", "receiver": "B", "sender_port": "o", "receiver_port": "i"},
                        "ba": {"sender": "B", "receiver": "A", "sender_port": "o", "receiver_port": "i"},
                    },
                }
            }
        }
    }
    with pytest.raises(ValidationError, match="cycle"):
        mdf.check_model(mdf.model_from_data(d))
    d["m"]["graphs"]["g"]["nodes"]["A"]["input_ports"]["i"]["default_value"] = 1
    sim = mdf.Simulation(mdf.model_from_data(d))
    outs = [dict(sim.evaluate()["B"]) for _ in range(3)]
    # A starts from its default 1: A=2, B=4; then A reads B's 4: A=5, B=10; ...
    assert [o["o"] for o in outs] == [4, 10, 22]


def test_yaml_alias_bomb_and_deep_nesting_are_refused(tmp_path):
    lines = ["m:", "  metadata:", "    a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        lines.append(f"    a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    p = tmp_path / "bomb.yaml"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(ModelFormatError, match="aliases"):
        mdf.load(p)
    q = tmp_path / "deep.json"
    q.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ModelFormatError):
        mdf.load(q)
