"""Files as their producers write them: MDF v0.1-v0.3 spellings, PsyNeuLink's condition and nesting forms, what
stdops cannot run yet (a clear error), time steps that do not drift, outputs that become inf or NaN."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

import stdops.mdf as mdf
from stdops.errors import StdopsError, ValidationError

OLD = {
    "old": {
        "format": "ModECI MDF v0.1",
        "graphs": {
            "g": {
                "nodes": {
                    "A": {
                        "input_ports": {"in": {"shape": "(1,)"}},
                        "parameters": {"slope": 2.0, "intercept": "slope / 4", "chunk": {"name": "a", "n": 3}},
                        "functions": {
                            "f": {
                                "function": {"linear": {"variable0": "in", "slope": "slope", "intercept": "intercept"}}
                            }
                        },
                        "output_ports": {"out": {"value": "f"}, "chunk_n": {"value": "chunk['n']"}},
                    },
                    "B": {
                        "input_ports": {"x_in": {"shape": "(1,)"}},
                        "parameters": {"count": {"default_initial_value": 0, "value": "count + x_in"}},
                        "output_ports": {"out": {"value": "count"}},
                    },
                },
                "edges": {"e": {"sender": "A", "receiver": "B", "sender_port": "out", "receiver_port": "x_in"}},
                "conditions": {
                    "node_specific": {"B": {"type": "EveryNCalls", "args": {"dependency": "A", "n": 2}}},
                    "termination": {"environment_state_update": {"type": "AfterNCalls", "args": ["B", 1]}},
                },
            }
        },
    }
}


def test_mdf_v01_file_loads_strictly_and_runs():
    """Plain-value parameters (a dict-valued one in an old file is a value), string shapes, functions written
    as {name: {args}}, conditions with keyword and positional args."""
    m = mdf.model_from_data(json.loads(json.dumps(OLD)))
    assert m.graph().nodes["A"].input_ports["in"].shape == (1,)
    sim = mdf.Simulation(m)
    sim.evaluate(inputs={"A.in": np.array([3.0])})
    # A runs twice (B needs two calls of A), then B once: count = 0 + (3 * 2 + 0.5)
    assert sim.execution_order == [["A"], ["A"], ["B"]]
    np.testing.assert_allclose(sim.outputs["A"]["out"], [3.0 * 2.0 + 2.0 / 4])
    np.testing.assert_allclose(sim.outputs["B"]["out"], [6.5])
    assert sim.outputs["A"]["chunk_n"] == 3


def test_a_dict_parameter_in_a_current_file_is_a_parameter():
    """Only files of the v0.1-v0.3 era get the plain-value reading of a mapping; in a current one its keys
    are Parameter fields (unknown ones reported)."""
    d = json.loads(json.dumps(OLD))
    d["old"]["format"] = "ModECI MDF v0.4"
    with pytest.warns(mdf.MdfWarning, match=r"parameters\.chunk: unknown field\(s\) n, name"):
        m = mdf.model_from_data(d)
    assert m.graph().nodes["A"].parameters["chunk"].value is None


def _abc(condition_b: dict) -> dict:
    node = {"input_ports": {"in": {}}, "output_ports": {"out": {"value": "in"}}}
    return {
        "m": {
            "graphs": {
                "g": {
                    "nodes": {"A": {"output_ports": {"out": {"value": "1"}}}, "B": node},
                    "edges": {"e": {"sender": "A", "receiver": "B", "sender_port": "out", "receiver_port": "in"}},
                    "conditions": {
                        "node_specific": {"B": condition_b},
                        "termination": {
                            "environment_state_update": {"type": "AfterNCalls", "kwargs": {"args": ["B", 2]}}
                        },
                    },
                }
            }
        }
    }


@pytest.mark.parametrize(
    "positional,keywords",
    [
        (
            {"type": "EveryNCalls", "kwargs": {"args": ["A", 3]}},
            {"type": "EveryNCalls", "kwargs": {"dependency": "A", "n": 3}},
        ),
        (
            {
                "type": "All",
                "kwargs": {
                    "args": [
                        {"type": "EveryNCalls", "kwargs": {"args": ["A", 2]}},
                        {"type": "AfterPass", "kwargs": {"args": [2]}},
                    ]
                },
            },
            {
                "type": "All",
                "kwargs": {
                    "dependencies": [
                        {"type": "EveryNCalls", "kwargs": {"dependency": "A", "n": 2}},
                        {"type": "AfterPass", "kwargs": {"n": 2}},
                    ]
                },
            },
        ),
    ],
)
def test_conditions_with_positional_args_as_psyneulink_writes_them(positional, keywords):
    orders = []
    for cond in (positional, keywords):
        sim = mdf.Simulation(mdf.model_from_data(_abc(cond)))
        sim.evaluate()
        orders.append(sim.execution_order)
    assert orders[0] == orders[1]
    assert sum(s.count("B") for s in orders[0]) == 2


def test_too_many_positional_condition_args():
    with pytest.raises(ValidationError, match=r"kwargs\.args: EveryNCalls takes 2 arguments, 3 given"):
        mdf.Simulation(mdf.model_from_data(_abc({"type": "EveryNCalls", "kwargs": {"args": ["A", 1, 2]}})))


def test_nested_graph_in_the_form_psyneulink_writes_it():
    """A node holding nodes/edges/conditions runs its graph when it runs; inputs reach its nodes as node.port;
    node_outputs shows the inner nodes."""
    data = {
        "outer": {
            "graphs": {
                "outer": {
                    "nodes": {
                        "inner": {
                            "metadata": {"type": "Composition"},
                            "nodes": {
                                "x": {"input_ports": {"x_in": {}}, "output_ports": {"x_out": {"value": "x_in * 3"}}},
                                "y": {
                                    "input_ports": {"y_in": {}},
                                    "parameters": {"acc": {"default_initial_value": 0, "value": "acc + y_in"}},
                                    "output_ports": {"y_out": {"value": "acc"}},
                                },
                            },
                            "edges": {
                                "xy": {"sender": "x", "receiver": "y", "sender_port": "x_out", "receiver_port": "y_in"}
                            },
                            "parameters": {"learning_rate": 0.05},
                            "conditions": {"node_specific": {}, "termination": {}},
                        }
                    }
                }
            }
        }
    }
    sim = mdf.Simulation(mdf.model_from_data(data))
    for v, want in ((1.0, 3.0), (2.0, 9.0)):
        sim.evaluate(inputs={"x.x_in": v})
        assert sim.node_outputs()["y"]["y_out"] == want
    assert "inner" in sim.model.graph().nodes["inner"].graphs


def test_psyneulink_function_not_implemented_names_file_path_and_function(tmp_path):
    data = {
        "comp": {
            "format": "ModECI MDF v0.4.13",
            "generating_application": "PsyNeuLink v0.21.0.0",
            "graphs": {
                "comp": {
                    "nodes": {
                        "m": {
                            "input_ports": {"m_in": {}},
                            "functions": {"m_f": {"function": "dualadaptiveintegrator", "args": {"variable0": "m_in"}}},
                            "output_ports": {"m_out": {"value": "m_f"}},
                        }
                    }
                }
            },
        }
    }
    p = tmp_path / "pnl.json"
    p.write_text(json.dumps(data))
    with pytest.raises(StdopsError) as e:
        mdf.load(p)
    msg = str(e.value)
    assert str(p) in msg and "graphs.comp.nodes.m.functions.m_f.function" in msg
    assert "function 'dualadaptiveintegrator' of PsyNeuLink is not implemented" in msg


def test_psyneulink_relu_matches_its_definition():
    from stdops.mdf.functions import STANDARD

    x = np.array([-2.0, -0.1, 0.0, 0.3, 4.0])
    got = STANDARD["relu"].fn(x, 2.0, 0.1, 0.05, 1.5, -0.25)
    y = 2.0 * (x - 0.1)
    np.testing.assert_allclose(got, 1.5 * np.where(y > 0, y, 0.05 * y) - 0.25)


# -- time steps --------------------------------------------------------------------------------------------

CLOCK = {
    "c": {
        "graphs": {
            "g": {
                "nodes": {
                    "n": {
                        "parameters": {"t": {"default_initial_value": 0, "time_derivative": "1"}},
                        "output_ports": {"t": {"value": "t"}},
                    }
                }
            }
        }
    }
}


def test_run_counts_integer_steps():
    traj = mdf.Simulation(mdf.model_from_data(CLOCK)).run(duration=20, dt=0.05)
    assert len(traj.times) == 401
    assert traj.times[-1] == 20.0
    np.testing.assert_allclose(traj.times, np.arange(401) * 0.05, rtol=0, atol=1e-12)
    # the integrated time matches the clock (Euler on dt/dt = 1)
    np.testing.assert_allclose(traj["n.t"][-1], 20.0, rtol=1e-12)
    assert [mdf.n_steps(d, dt) for d, dt in ((1.0, 0.1), (1.0, 0.3), (0.0, 0.1), (10, 0.01))] == [11, 4, 1, 1001]


def test_run_can_reproduce_the_reference_clock():
    t, n = 0.0, 0
    while t <= 0.3:  # the reference's example scripts: 0.1 + 0.1 + 0.1 > 0.3
        n += 1
        t += 0.1
    traj = mdf.Simulation(mdf.model_from_data(CLOCK)).run(duration=0.3, dt=0.1, clock="accumulate")
    assert len(traj.times) == n == 3
    assert len(mdf.Simulation(mdf.model_from_data(CLOCK)).run(duration=0.3, dt=0.1).times) == 4


def test_an_output_that_overflows_is_reported_once_with_node_port_and_step():
    data = {
        "blow": {
            "graphs": {
                "g": {
                    "nodes": {
                        "grow": {
                            "parameters": {"x": {"default_initial_value": 10.0, "value": "x * x"}},
                            "output_ports": {"x": {"value": "x"}, "ok": {"value": "1.0"}},
                        }
                    }
                }
            }
        }
    }
    sim = mdf.Simulation(mdf.model_from_data(data))
    with warnings.catch_warnings(record=True) as caught, np.errstate(over="ignore"):
        warnings.simplefilter("always")
        for _ in range(12):
            sim.evaluate()
    msgs = [str(w.message) for w in caught if issubclass(w.category, mdf.NonFiniteWarning)]
    # 10 ** (2 ** k) overflows float64 at k = 9 (1e512): the 9th evaluation
    assert msgs == ["node 'grow' output port 'x' is inf from evaluation 9"]
    assert sim.nonfinite == {("grow", "x"): (9, None)}
    assert math.isinf(sim.outputs["grow"]["x"])


def test_cli_helpers_strict_or_lenient(tmp_path, capsys):
    """What the CLI's --lenient gives: stdops.mdf.cli.run_model / info / plot take lenient=True."""
    from stdops.mdf import cli as mdf_cli

    d = json.loads(json.dumps(CLOCK))
    d["c"]["graphs"]["g"]["nodes"]["n"]["output_port"] = {}
    p = tmp_path / "m.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ValidationError, match="did you mean output_ports"):
        mdf_cli.run_model(p)
    mdf_cli.run_model(p, lenient=True)
    assert "unknown field(s) output_port" in capsys.readouterr().out.replace("\n", " ")


@pytest.mark.parametrize(
    ("duration", "dt"),
    [(1.0, 1e-30), (1e300, 1e-300), (float("inf"), 0.1), (float("nan"), 0.1), (1.0, float("nan")), (1.0, float("inf"))],
)
def test_run_refuses_a_step_count_it_cannot_hold_before_building_the_times(duration, dt):
    # a file's metadata (preferred_dt) reaches run() as well as the caller: 1e30 steps used to hang while the
    # list of times was built
    sim = mdf.Simulation(mdf.model_from_data(CLOCK))
    with pytest.raises(StdopsError, match=r"time steps|finite"):
        sim.run(duration=duration, dt=dt)
    assert sim.n_evaluations == 0
