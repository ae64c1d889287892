"""MDF standard functions: golden values (the reference's own), DDM, ACT-R, onnx:: functions."""

from __future__ import annotations

import math

import numpy as np
import pytest

import stdops.mdf as mdf
from stdops.errors import StdopsError, UnsupportedOp, ValidationError
from stdops.mdf.functions import STANDARD, drift_diffusion_integrator
from stdops.ops.cognitive import actr


def f(name):
    return STANDARD[name].fn


def test_golden_values():
    assert f("logistic")(1, 2, 3, 4) == pytest.approx(0.98201379, abs=1e-8)
    assert f("linear")(2.0, 3.0, 1.0) == 7.0
    assert f("exponential")(1.0, 2.0, 0.5, 0.1, 1.0) == pytest.approx(2 * math.exp(0.6) + 1)
    for name, fn in (
        ("sin", math.sin),
        ("cos", math.cos),
        ("tan", math.tan),
        ("sinh", math.sinh),
        ("cosh", math.cosh),
        ("tanh", math.tanh),
        ("arcsin", math.asin),
        ("arccos", math.acos),
        ("arctan", math.atan),
    ):
        assert f(name)(0.3, 2.0) == pytest.approx(2 * fn(0.3)), name
    a = np.array([[1.0, -2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(f("MatMul")(a, a), a @ a)
    np.testing.assert_array_equal(f("Relu")(a), np.maximum(a, 0))


def test_every_spec_function_is_registered():
    names = {
        "linear",
        "logistic",
        "exponential",
        "sin",
        "cos",
        "tan",
        "sinh",
        "cosh",
        "tanh",
        "MatMul",
        "Relu",
        "drift_diffusion_integrator",
        "chunk_to_string",
        "pattern_to_string",
        "change_goal",
        "retrieve_chunk",
        "match_production",
        "pattern_matching_function",
        "update_buffer",
        "update_goal",
        "update_retrieval",
        "conflict_resolution_function",
        "check_termination",
    }
    assert names <= set(STANDARD)


def test_simple_golden_output(tmp_path):
    m = mdf.model_from_data(
        {
            "Simple": {
                "graphs": {
                    "g": {
                        "nodes": {
                            "input_node": {
                                "parameters": {"input_level": {"value": 0.5}},
                                "output_ports": {"out_port": {"value": "input_level"}},
                            },
                            "processing_node": {
                                "input_ports": {"input_port1": {}},
                                "parameters": {
                                    "lin_slope": {"value": 0.5},
                                    "lin_intercept": {"value": 0},
                                    "log_gain": {"value": 3},
                                    "linear_1": {
                                        "function": "linear",
                                        "args": {
                                            "variable0": "input_port1",
                                            "slope": "lin_slope",
                                            "intercept": "lin_intercept",
                                        },
                                    },
                                    "logistic_1": {
                                        "function": "logistic",
                                        "args": {"variable0": "linear_1", "gain": "log_gain", "bias": 0, "offset": 0},
                                    },
                                },
                                "output_ports": {"output_1": {"value": "logistic_1"}},
                            },
                        },
                        "edges": {
                            "e": {
                                "sender": "input_node",
                                "receiver": "processing_node",
                                "sender_port": "out_port",
                                "receiver_port": "input_port1",
                                "parameters": {"weight": 0.55},
                            }
                        },
                    }
                }
            }
        }
    )
    sim = mdf.Simulation(m)
    sim.evaluate()
    assert sim.outputs["processing_node"]["output_1"] == 0.6016871801828567


def test_ddm_zero_noise_is_deterministic():
    x, n = 0.0, 0
    while abs(x) < 1.0:
        x += 0.3 * 0.01
        n += 1
    got = drift_diffusion_integrator(0.0, 0.2, 0.3, 1.0, noise=0.0, dt=0.01)
    assert got == pytest.approx(0.2 + n * 0.01)
    assert drift_diffusion_integrator(0.0, 0.2, -0.3, 1.0, noise=0.0, dt=0.01) == pytest.approx(-(0.2 + n * 0.01))


def test_ddm_seeded_and_vectorized():
    a = drift_diffusion_integrator(0.0, 0.1, 0.5, 1.0, 1.0, 0.01, rng=np.random.default_rng(7), n_trials=500)
    b = drift_diffusion_integrator(0.0, 0.1, 0.5, 1.0, 1.0, 0.01, rng=np.random.default_rng(7), n_trials=500)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (500,)
    assert np.all(np.abs(a) >= 0.1)
    # positive drift: most trials end at the upper boundary; mean decision time near threshold/drift
    assert (a > 0).mean() > 0.6
    # arrays of parameters broadcast: one trial per starting point
    c = drift_diffusion_integrator(np.array([0.9, -0.9]), 0.0, 0.0, 1.0, 0.1, 0.01, rng=np.random.default_rng(0))
    assert c.shape == (2,)


def test_ddm_runs_in_a_model():
    m = mdf.model_from_data(
        {
            "m": {
                "graphs": {
                    "g": {
                        "nodes": {
                            "ddm": {
                                "parameters": {
                                    "rt": {
                                        "function": "drift_diffusion_integrator",
                                        "args": {
                                            "starting_point": 0,
                                            "non_decision_time": 0.2,
                                            "drift_rate": 0.5,
                                            "threshold": 1,
                                            "noise": 1,
                                            "dt": 0.01,
                                        },
                                    }
                                },
                                "output_ports": {"rt": {"value": "rt"}},
                            }
                        }
                    }
                }
            }
        }
    )
    r1 = mdf.Simulation(m, seed=3)
    r1.evaluate()
    r2 = mdf.Simulation(m, seed=3)
    r2.evaluate()
    assert r1.outputs["ddm"]["rt"] == r2.outputs["ddm"]["rt"]
    assert abs(r1.outputs["ddm"]["rt"]) > 0.2


def test_actr_strings_and_goal():
    assert actr.chunk_to_string({"name": "one", "ISA": "number", "number": "one", "next": "two"}) == "number one two"
    assert actr.pattern_to_string({"buffer": "goal", "ISA": "count", "a": "=x", "b": "-=y"}) == "count ?x !?y"
    g = {"name": "g", "ISA": "count", "count": "nil"}
    new = actr.change_goal({"buffer": "goal", "count": "two"}, g)
    assert new == {"name": "g", "ISA": "count", "count": "two"} and g["count"] == "nil"
    assert actr.change_goal({"a": 1}, 0) == {}


def test_actr_matching():
    prod = {
        "name": "p",
        "lhs": [
            {"buffer": "goal", "ISA": "add", "arg1": "=x", "arg2": "-=x", "sum": "nil"},
            {"buffer": "retrieval", "ISA": "number", "number": "=x", "next": "!five"},
        ],
        "rhs": [{"buffer": "goal", "ISA": "add", "sum": "=x"}],
    }
    ctx = {"goal": "add two three nil", "retrieval": "number two three"}
    assert actr.match_production(prod, ctx) is True
    assert prod["bindings"] == {"x": "two"}
    assert actr.update_goal(prod) == {"buffer": "goal", "ISA": "add", "sum": "two"}
    assert actr.update_retrieval(prod) == {}
    assert actr.match_production(dict(prod), {"goal": "add two two nil", "retrieval": "number two three"}) is False
    assert actr.match_production(dict(prod), {"goal": "add two three nil", "retrieval": "number two five"}) is False
    assert actr.match_production(dict(prod), {"goal": "add two three nil", "retrieval": None}) is False
    wild = {"lhs": [{"buffer": "goal", "ISA": "add", "a": "?"}], "rhs": []}
    assert actr.match_production(wild, {"goal": "add anything"})


def test_actr_retrieval_and_resolution():
    dm = [
        {"name": "one", "ISA": "number", "number": "one", "next": "two"},
        {"name": "two", "ISA": "number", "number": "two", "next": "three"},
    ]
    types = {"number": ["number", "next"]}
    assert actr.retrieve_chunk({"buffer": "retrieval", "ISA": "number", "number": "two"}, dm, types) == {
        "ISA": "number",
        "number": "two",
        "next": "three",
    }
    assert actr.retrieve_chunk({"buffer": "retrieval", "ISA": "number", "number": "nine"}, dm, types) == {}
    assert actr.retrieve_chunk({}, dm, types) == {}
    ps = [{"name": "a"}, {"name": "b"}, {"name": "c"}]
    picks = [actr.conflict_resolution_function(ps, rng=np.random.default_rng(s))["name"] for s in range(20)]
    assert picks == [actr.conflict_resolution_function(ps, rng=np.random.default_rng(s))["name"] for s in range(20)]
    assert set(picks) == {"a", "b", "c"}
    assert actr.conflict_resolution_function([]) == {}
    assert actr.check_termination({}) is True and actr.check_termination({"name": "a"}) is False


def _onnx_model(params, outputs, ports=None):
    return mdf.model_from_data(
        {
            "m": {
                "graphs": {
                    "g": {
                        "nodes": {
                            "A": {
                                "input_ports": ports or {"x": {"shape": [2, 4]}},
                                "parameters": params,
                                "output_ports": {k: {"value": v} for k, v in outputs.items()},
                            }
                        }
                    }
                }
            }
        }
    )


def test_onnx_functions_call_kernels():
    x = np.array([[1.0, 5, 3, 2], [4, 0, 9, 1]])
    m = _onnx_model(
        {
            "axis": {"value": 0},
            "k": {"value": [1]},
            "top": {"function": "onnx::TopK", "args": {"X": "x", "K": "k"}},
            "sm": {"function": "onnx::Softmax", "args": {"input": "x"}},
            "c": {"function": "onnx::Cast", "args": {"input": "x", "to": 7}},
            "s": {"function": "onnx::Add", "args": {"A": "x", "B": 1.0}},
        },
        {"vals": "top[0]", "idx": "top[1]", "sm": "sm", "c": "c", "s": "s"},
    )
    sim = mdf.Simulation(m)
    sim.evaluate(inputs={"x": x})
    o = sim.outputs["A"]
    np.testing.assert_array_equal(o["vals"], [[4.0, 5, 9, 2]])  # axis=0 from the node's parameter
    np.testing.assert_array_equal(o["idx"], [[1, 0, 1, 0]])
    e = np.exp(x - x.max(0))
    np.testing.assert_allclose(o["sm"], e / e.sum(0))
    assert o["c"].dtype == np.int64
    np.testing.assert_array_equal(o["s"], x + 1)


def test_onnx_unknown_op_and_unknown_function():
    with pytest.raises(UnsupportedOp):
        mdf.check_model(_onnx_model({"y": {"function": "onnx::NoSuchOp", "args": {"X": "x"}}}, {"y": "y"}))
    with pytest.raises(ValidationError, match="unknown function 'frobnicate'"):
        mdf.check_model(_onnx_model({"y": {"function": "frobnicate", "args": {"X": "x"}}}, {"y": "y"}))
    with pytest.raises(ValidationError, match="missing argument"):
        mdf.check_model(_onnx_model({"y": {"function": "linear", "args": {"variable0": "x"}}}, {"y": "y"}))


def test_standard_function_args_fall_back_to_node_parameters():
    m = _onnx_model(
        {"slope": {"value": 2.0}, "intercept": {"value": 1.0}, "y": {"function": "linear", "args": {"variable0": "x"}}},
        {"y": "y"},
    )
    sim = mdf.Simulation(m)
    sim.evaluate(inputs={"x": np.ones((2, 4))})
    np.testing.assert_array_equal(sim.outputs["A"]["y"], np.full((2, 4), 3.0))


def test_kernel_errors_name_the_node():
    m = _onnx_model({"y": {"function": "onnx::MatMul", "args": {"A": "x", "B": "x"}}}, {"y": "y"})
    sim = mdf.Simulation(m)
    with pytest.raises(StdopsError, match="nodes.A"):
        sim.evaluate(inputs={"x": np.ones((2, 4))})


def _ddm_step_by_step(x0, ndt, drift, thr, noise, dt, n, rng):
    """The reference's loop (one Normal draw per step), for many trials at once."""
    x = np.full(n, x0, dtype=np.float64)
    k = np.zeros(n, dtype=np.int64)
    live = np.arange(n)
    while live.size:
        x[live] += rng.normal(drift * dt, noise * np.sqrt(dt), live.size)
        k[live] += 1
        live = live[np.abs(x[live]) < thr]
    t = ndt + k * dt
    return np.where(x > thr, t, -t)


@pytest.mark.parametrize(
    "params", [(0.0, 0.2, 0.1, 2.0, 1.0, 0.01), (0.3, 0.1, 1.5, 1.0, 1.0, 0.01), (-0.2, 0.0, -0.4, 1.0, 0.5, 0.005)]
)
def test_ddm_blocks_have_the_step_by_step_distribution(params):
    """Blocks of steps per round give the reference loop's distribution of (response, time)."""
    from scipy import stats

    n = 4000
    ours = drift_diffusion_integrator(*params, rng=np.random.default_rng(11), n_trials=n)
    ref = _ddm_step_by_step(*params, n, np.random.default_rng(12))
    p_ours, p_ref = np.mean(ours > 0), np.mean(ref > 0)
    se = np.sqrt(2 * max(p_ref * (1 - p_ref), 1e-3) / n)
    assert abs(p_ours - p_ref) < 4 * se
    for side in (1, -1):
        a, b = ours[side * ours > 0], ref[side * ref > 0]
        if min(a.size, b.size) > 50:
            assert stats.ks_2samp(np.abs(a), np.abs(b)).pvalue > 1e-3
