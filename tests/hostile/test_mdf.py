"""Hostile MDF files: each case of the issue-9 probe is a file of a few hundred bytes that, loaded (and run)
in a forked child under the default limits, must end in a StdopsError naming the file and the field, within
a time and a memory bound. Plus: the caller's arrays are never written, a parameter is evaluated once per
trial."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import stdops.mdf as mdf
from stdops.errors import ModelFormatError, ResourceLimitError, StdopsError, ValidationError
from stdops.mdf import expr

from .harness import bounded

FIELD = "graphs.g.nodes.A.parameters.p.value"


def _doc(value, port=None, extra_params=None) -> dict:
    params = {"p": {"value": value}, **(extra_params or {})}
    node = {
        "input_ports": {"x": port or {"shape": [3]}},
        "parameters": params,
        "output_ports": {"o": {"value": "p"}},
    }
    return {"m": {"format": "ModECI MDF v0.4", "graphs": {"g": {"nodes": {"A": node}}}}}


def _write(tmp_path, doc_or_text, name="m.json"):
    p = tmp_path / name
    if isinstance(doc_or_text, str):
        p.write_text(doc_or_text)
    elif name.endswith(".yaml"):
        import yaml

        p.write_text(yaml.safe_dump(doc_or_text, sort_keys=False))
    else:
        p.write_text(json.dumps(doc_or_text))
    return p


def _load_and_run(path, inputs=None):
    def go():
        m = mdf.load(path)
        sim = mdf.Simulation(m)
        return sim.evaluate(inputs=inputs)

    return go


#: the probe's expressions that hung or allocated gigabytes at load (constant folding), as parameter values
COSTLY = {
    "round(1, -10**9)": None,  # now cheap and exact: 0
    "pow(3, 10**16000, 10**16000+7)": "integer of about 64000 bits",
    "numpy.array(10**20) ** 10**9": "integers beyond 64 bits",
    "numpy.array(10**20) << 10**10": "integers beyond 64 bits",
    "sum(((0,),)*200000, ())": None,  # now linear: 200000 zeros in milliseconds
    "math.prod((10**16000,)*5000)": "integer of about 64000 bits",
    "math.prod((2**4000,)*5000)": "integer of about 8000 bits",
    "'%999999999d' % 1": "string formatting: 1000000034 items",
    "numpy.full(10**6, 'a'*1000)": "needs 4000000000 bytes",
    "numpy.concatenate([numpy.ones(100000)]*100000)": "has 10000000000 elements",
    "numpy.stack([numpy.ones(100000)]*100000)": "has 10000000000 elements",
    "numpy.vstack([numpy.ones(100000)]*100000)": "has 10000000000 elements",
    "numpy.ones((10**5, 1)) + numpy.ones((1, 10**5))": r"shape \(100000, 100000\)",
    "'a' * 10**9": "sequence repetition",
    "2**2**2**2**2": "integer of about",
    "sum([numpy.ones(10**6)] * 10**6)": "touched more than",
}


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("text", sorted(COSTLY))
def test_costly_expressions_are_bounded_at_load(tmp_path, text, fmt):
    path = _write(tmp_path, _doc(text), f"m.{fmt}")
    out = bounded(_load_and_run(path), seconds=60)
    assert out.seconds < 10 and out.peak_mb < 300, (out.seconds, out.peak_mb)
    want = COSTLY[text]
    if want is None:
        assert out.error is None, out.message
        return
    assert out.stdops_error, (out.error, out.message)
    assert out.error in ("ValidationError", "ResourceLimitError"), out.message
    assert str(path) in out.message and FIELD in out.message and re.search(want, out.message), out.message


@pytest.mark.parametrize(
    "text",
    [
        "numpy.multiply(x, 0, out=x)",
        "numpy.add(x, 1, out=x)",
        "numpy.clip(x, 0, 0, out=x)",
        "numpy.cumsum(x, out=x)",
        "numpy.multiply(x, 0, x)",
        "numpy.clip(x, 0, 0, x)",
        "numpy.cumsum(x, 0, None, x)",
        "numpy.median(x, None, None, True)",
        "numpy.median(x, overwrite_input=True)",
    ],
)
def test_in_place_forms_are_refused_and_the_callers_array_is_untouched(tmp_path, text):
    path = _write(tmp_path, _doc(text))
    with pytest.raises(ValidationError, match=rf"{path}: {FIELD}: .*(writes into|an output it writes)"):
        mdf.load(path)
    # the same model given as data, evaluated on the caller's array: refused before it runs
    x = np.array([3.0, 1.0, 2.0])
    with pytest.raises(ValidationError):
        mdf.Simulation(mdf.model_from_data(_doc(text))).evaluate(inputs={"x": x})
    assert x.tolist() == [3.0, 1.0, 2.0]


def test_the_callers_inputs_are_copied_before_any_expression_sees_them():
    """Even a model that keeps its input as a value (and computes from it) never holds the caller's array."""
    x = np.array([1.0, 2.0, 3.0])
    sim = mdf.Simulation(mdf.model_from_data(_doc("x * 2")))
    out = sim.evaluate(inputs={"x": x})["A"]["o"]
    np.testing.assert_array_equal(out, [2.0, 4.0, 6.0])
    assert not np.shares_memory(sim._engine.nodes["A"].in_ports[0].last, x)
    x[:] = 0
    np.testing.assert_array_equal(sim.outputs["A"]["o"], [2.0, 4.0, 6.0])


def test_each_parameter_is_evaluated_once_per_trial(monkeypatch):
    """A counting function stands for any costly or random one: its parameter's value is computed once per
    trial (it was twice in the first trial), also when a function reads it before its update."""
    calls = []

    def counted(v):
        calls.append(1)
        return v + 1

    monkeypatch.setitem(expr.EXTRA_FUNCTIONS, "counted", counted)
    for extra in ({}, {"q": {"value": "p * 2"}}):
        doc = _doc("counted(x)", extra_params=extra)
        doc["m"]["graphs"]["g"]["nodes"]["A"]["functions"] = {"f": {"value": "p + 0"}}
        sim = mdf.Simulation(mdf.model_from_data(doc))
        calls.clear()
        for trial in range(3):
            sim.evaluate(inputs={"x": np.zeros(3)})
            assert len(calls) == trial + 1, (extra, calls)
        np.testing.assert_array_equal(sim.outputs["A"]["o"], [1, 1, 1])


def test_a_parameter_reading_a_function_runs_in_the_first_trial():
    doc = _doc("f + 1")
    doc["m"]["graphs"]["g"]["nodes"]["A"]["functions"] = {"f": {"value": "x * 2"}}
    sim = mdf.Simulation(mdf.model_from_data(doc))
    np.testing.assert_array_equal(sim.evaluate(inputs={"x": np.ones(3)})["A"]["o"], [3, 3, 3])


def test_a_limit_hit_at_run_time_names_the_file_and_the_field(tmp_path):
    path = _write(tmp_path, _doc("numpy.zeros(x)", port={"shape": [1]}))
    out = bounded(_load_and_run(path, inputs={"x": np.array([1e12])}), seconds=30)
    assert out.raised(ResourceLimitError, rf"{path}: {FIELD}: numpy.zeros: shape"), out.message
    assert out.seconds < 5 and out.peak_mb < 100


LONG = "1" + "0" * 4300  # 4301 digits: beyond what Python reads as an int
FILES = {
    "4301-digit int (JSON)": (
        "m.json",
        json.dumps(_doc(1)).replace(": 1}", f": {LONG}}}"),
        ModelFormatError,
        "line 1 column .*: a number that cannot be read",
    ),
    "4301-digit int (YAML)": (
        "m.yaml",
        f"m:\n  graphs:\n    g:\n      nodes:\n        A:\n          parameters:\n"
        f"            p:\n              value: {LONG}\n",
        ModelFormatError,
        "line 8 column 22: a YAML value cannot be read",
    ),
    "!!int on text": (
        "m.yaml",
        "m:\n  graphs:\n    g:\n      nodes:\n        A:\n          parameters:\n"
        "            p:\n              value: !!int abc\n",
        ModelFormatError,
        "cannot be read",
    ),
    "!!float on text": ("m.yaml", "m:\n  graphs: !!float x\n", ModelFormatError, "cannot be read"),
    "a self-referencing alias": (
        "m.yaml",
        "m: &a\n  graphs:\n    g:\n      nodes: *a\n",
        ModelFormatError,
        "refers to a value that contains it",
    ),
    "an alias bomb": (
        "m.yaml",
        "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b ["
        + ",".join(["*a"] * 10)
        + "]\nc: &c ["
        + ",".join(["*b"] * 10)
        + "]\nd: &d ["
        + ",".join(["*c"] * 10)
        + "]\ne: &e ["
        + ",".join(["*d"] * 10)
        + "]\nf: &f ["
        + ",".join(["*e"] * 10)
        + "]\ng: ["
        + ",".join(["*f"] * 10)
        + "]\n",
        ModelFormatError,
        "expand to more than 1000000 values",
    ),
    "a shape of 10,000 '-'": (
        "m.json",
        json.dumps(_doc(1, port={"shape": "-" * 10000 + "1"})),
        ValidationError,
        r"graphs.g.nodes.A.input_ports.x.shape: .*not a tuple of integers",
    ),
    "an input-port shape of 30000 x 30000": (
        "m.json",
        json.dumps(_doc(1, port={"shape": [30000, 30000]})),
        ValidationError,
        r"input_ports.x.shape: .*7200000000 bytes",
    ),
    "a NaN shape": (
        "m.json",
        json.dumps(_doc("numpy.zeros(float('nan'))")),
        ValidationError,
        f"{FIELD}: numpy.zeros: dimension nan is not a whole number",
    ),
    "an expression too deep to parse": (
        "m.json",
        json.dumps(_doc("-" * 50000 + "1")),
        ValidationError,
        f"{FIELD}: expression nested too deeply to parse",
    ),
}


@pytest.mark.parametrize("case", sorted(FILES))
def test_malformed_files_are_stdops_errors_naming_file_and_place(tmp_path, case):
    name, text, error, match = FILES[case]
    path = _write(tmp_path, text, name)
    out = bounded(_load_and_run(path), seconds=60)
    assert out.raised(error, match), (out.error, out.message[:500])
    assert str(path) in out.message
    assert out.seconds < 10 and out.peak_mb < 300, (out.seconds, out.peak_mb)


def test_a_yaml_alias_bomb_just_under_the_cap_loads_quickly(tmp_path):
    """Aliases expanding to ~600k values (the cap is 1M): bounded in time, not 30 s."""
    lv = ["  a0: &l0 [1,1,1,1,1,1,1,1,1]"] + [
        f"  a{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 6)
    ]
    text = (
        "m:\n  anchors:\n" + "\n".join("  " + x for x in lv) + "\n  graphs:\n    g:\n      nodes:\n        A:\n"
        "          output_ports:\n            o:\n              value: '1'\n"
    )
    path = _write(tmp_path, text, "m.yaml")
    out = bounded(_load_and_run(path), seconds=60)
    assert out.error is None, out.message
    assert out.seconds < 5, out.seconds


def test_expression_errors_are_stdops_errors():
    assert issubclass(expr.ExprError, StdopsError)
