"""The engine's semantics and the Simulation / Trajectory API."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.mdf as mdf
from stdops.errors import InputError, StdopsError


def model(nodes, edges=None, conditions=None):
    g = {"nodes": nodes}
    if edges:
        g["edges"] = edges
    if conditions:
        g["conditions"] = conditions
    return mdf.model_from_data({"m": {"graphs": {"g": g}}})


def edge(s, sp, r, rp, w=None):
    e = {"sender": s, "sender_port": sp, "receiver": r, "receiver_port": rp}
    if w is not None:
        e["parameters"] = {"weight": w}
    return e


def test_inputs_by_port_id_and_node_port():
    m = model(
        {
            "A": {"input_ports": {"x": {}}, "output_ports": {"y": {"value": "x * 2"}}},
            "B": {"input_ports": {"x": {}}, "output_ports": {"y": {"value": "x + 1"}}},
        }
    )
    sim = mdf.Simulation(m)
    sim.evaluate(inputs={"A.x": 3.0, "B.x": 5.0})
    assert sim.outputs == {"A": {"y": 6.0}, "B": {"y": 6.0}}
    sim.evaluate(inputs={"x": 1.0})  # a bare id feeds every port of that name
    assert sim.outputs == {"A": {"y": 2.0}, "B": {"y": 2.0}}
    with pytest.raises(InputError, match="no input port 'zz'"):
        sim.evaluate(inputs={"zz": 1})
    # ports fall back to zeros once an input is consumed
    sim.evaluate()
    assert sim.outputs["A"]["y"] == 0.0


@pytest.mark.parametrize("reduce,expected", [("overwrite", 30.0), ("add", 40.0), ("multiply", 300.0)])
def test_reduce(reduce, expected):
    m = model(
        {
            "A": {"parameters": {"v": {"value": 10.0}}, "output_ports": {"o": {"value": "v"}}},
            "B": {"parameters": {"v": {"value": 1.0}}, "output_ports": {"o": {"value": "v"}}},
            "C": {"input_ports": {"i": {"reduce": reduce}}, "output_ports": {"o": {"value": "i"}}},
        },
        {"ac": edge("A", "o", "C", "i"), "bc": edge("B", "o", "C", "i", 30)},
    )
    sim = mdf.Simulation(m)
    sim.evaluate()
    assert sim.outputs["C"]["o"] == expected  # overwrite: the last edge in declaration order wins


def test_edge_weights_are_elementwise():
    m = model(
        {
            "A": {"parameters": {"v": {"value": [[1, 2], [3, 4]]}}, "output_ports": {"o": {"value": "v"}}},
            "B": {"input_ports": {"i": {"shape": [2, 2]}}, "output_ports": {"o": {"value": "i"}}},
        },
        {"e": edge("A", "o", "B", "i", [[1, 0], [0, 1]])},
    )
    sim = mdf.Simulation(m)
    sim.evaluate()
    np.testing.assert_array_equal(sim.outputs["B"]["o"], [[1, 0], [0, 4]])


def test_stateful_parameters_and_time_derivatives():
    m = model(
        {
            "N": {
                "parameters": {
                    "count": {"value": "count + 1"},
                    "x": {"default_initial_value": 2.0, "time_derivative": "-x"},
                    "plain": {"value": "count * 10"},
                    "clipped": {
                        "default_initial_value": 0,
                        "time_derivative": "1",
                        "conditions": [{"id": "cap", "test": "clipped >= 0.25", "value": 0}],
                    },
                },
                "output_ports": {
                    "count": {"value": "count"},
                    "x": {"value": "x"},
                    "plain": {"value": "plain"},
                    "clipped": {"value": "clipped"},
                },
            }
        }
    )
    sim = mdf.Simulation(m)
    o = sim.evaluate()["N"]
    assert (o["count"], o["x"], o["plain"], o["clipped"]) == (1, 2.0, 10, 0)
    o = sim.evaluate(0.1)["N"]
    assert o["count"] == 2 and o["x"] == pytest.approx(2.0 - 2.0 * 0.1) and o["plain"] == 20
    sim.evaluate(0.1)
    o = sim.evaluate(0.1)["N"]
    assert o["clipped"] == pytest.approx(0.3)  # the test sees the old value (0.2)
    o = sim.evaluate(0.1)["N"]
    assert o["clipped"] == 0
    o = sim.evaluate()["N"]  # an evaluation without dt resets a time derivative to its initial value
    assert o["x"] == 2.0


def test_functions_see_previous_parameter_values():
    m = model(
        {
            "N": {
                "parameters": {"p": {"value": "p + 1"}},
                "functions": {"f": {"value": "p * 100"}, "g": {"value": "f + 1"}},
                "output_ports": {"f": {"value": "f"}, "g": {"value": "g"}, "p": {"value": "p"}},
            }
        }
    )
    sim = mdf.Simulation(m)
    o = sim.evaluate()["N"]
    assert (o["f"], o["g"], o["p"]) == (0.0, 1.0, 1)
    o = sim.evaluate()["N"]
    assert (o["f"], o["g"], o["p"]) == (100, 101, 2)


def test_function_ordering_and_cycles():
    m = model(
        {"N": {"functions": {"b": {"value": "a + 1"}, "a": {"value": "2"}}, "output_ports": {"o": {"value": "b"}}}}
    )
    sim = mdf.Simulation(m)
    assert sim.evaluate()["N"]["o"] == 3
    with pytest.raises(StdopsError, match="cycle between functions"):
        mdf.check_model(
            model(
                {
                    "N": {
                        "functions": {"b": {"value": "a + 1"}, "a": {"value": "b"}},
                        "output_ports": {"o": {"value": "b"}},
                    }
                }
            )
        )


def test_parameters_execution_order_and_run():
    m = model(
        {
            "A": {
                "parameters": {"t": {"default_initial_value": 0, "time_derivative": "1"}},
                "output_ports": {"t": {"value": "t"}, "v": {"value": "[t, 2 * t]"}},
            },
            "B": {"input_ports": {"i": {}}, "output_ports": {"o": {"value": "i * 3"}}},
        },
        {"e": edge("A", "t", "B", "i")},
    )
    sim = mdf.Simulation(m)
    traj = sim.run(0.5, 0.1)
    assert len(traj.times) == 6 and traj.times[-1] == pytest.approx(0.5)
    np.testing.assert_allclose(traj["A.t"], traj.times)
    np.testing.assert_allclose(traj["B.o"], 3 * traj.times)
    assert traj["A.v"].shape == (6, 2)
    assert sim.execution_order[:2] == [["A"], ["B"]] and len(sim.execution_order) == 12
    assert sim.parameters["A"]["t"] == pytest.approx(0.5)
    assert sim.output("B.o") == pytest.approx(1.5)
    csv = traj.to_csv()
    assert csv.splitlines()[0] == "time,A.t,A.v[0],A.v[1],B.o"


def test_trajectory_files(tmp_path):
    m = model(
        {
            "A": {
                "parameters": {"t": {"default_initial_value": 0, "time_derivative": "1"}},
                "output_ports": {"t": {"value": "t"}},
            }
        }
    )
    traj = mdf.Simulation(m).run(1.0, 0.25)
    traj.to_npz(tmp_path / "t.npz")
    z = np.load(tmp_path / "t.npz")
    np.testing.assert_allclose(z["A.t"], [0, 0.25, 0.5, 0.75, 1.0])
    traj.to_csv(tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text().count("\n") == 6
    fig = traj.plot(tmp_path / "t.png")
    assert fig is not None and (tmp_path / "t.png").exists()


def test_runtime_errors_name_the_node():
    m = model({"A": {"input_ports": {"x": {"shape": [2]}}, "output_ports": {"o": {"value": "x[5]"}}}})
    with pytest.raises(StdopsError, match=r"graphs\.g\.nodes\.A: evaluation failed: IndexError"):
        mdf.Simulation(m).evaluate()


def test_simulation_picks_graphs():
    m = mdf.model_from_data(
        {
            "m": {
                "graphs": {
                    "g1": {"nodes": {"A": {"output_ports": {"o": {"value": "1"}}}}},
                    "g2": {"nodes": {"B": {"output_ports": {"o": {"value": "2"}}}}},
                }
            }
        }
    )
    assert mdf.Simulation(m).evaluate() == {"A": {"o": 1}}
    assert mdf.Simulation(m, graph="g2").evaluate() == {"B": {"o": 2}}
    with pytest.raises(StdopsError, match="no graph 'g3'"):
        mdf.Simulation(m, graph="g3")


def test_onnx_loop_with_an_mdf_body():
    body = {
        "graph_body": {
            "id": "body",
            "nodes": {
                "Div": {
                    "input_ports": {"x_in": {}},
                    "parameters": {
                        "B": {"value": 2.0},
                        "Div": {"function": "onnx::Div", "args": {"A": "x_in", "B": "B"}},
                    },
                    "output_ports": {"x": {"value": "Div"}},
                },
                "Cond": {
                    "parameters": {
                        "input": {"value": True},
                        "Id": {"function": "onnx::Identity", "args": {"input": "input"}},
                    },
                    "output_ports": {"c": {"value": "Id"}},
                },
            },
        }
    }
    m = model(
        {
            "L": {
                "input_ports": {"n": {"shape": [1]}, "v": {"shape": [2]}},
                "parameters": {
                    "body": {"value": body},
                    "cond": {"value": True},
                    "Loop": {"function": "onnx::Loop", "args": {"M": "n", "cond": "cond", "v_initial": "v"}},
                },
                "output_ports": {"o": {"value": "Loop"}},
            }
        }
    )
    sim = mdf.Simulation(m)
    sim.evaluate(inputs={"n": np.array([3]), "v": np.array([8.0, 16.0])})
    np.testing.assert_allclose(sim.outputs["L"]["o"], [1.0, 2.0])


def test_nested_graph_inside_a_node(tmp_path):
    inner = {
        "nodes": {
            "double": {"input_ports": {"x": {}}, "output_ports": {"y": {"value": "x * 2"}}},
            "acc": {
                "input_ports": {"y": {}},
                "parameters": {"total": {"value": "total + y"}},
                "output_ports": {"total": {"value": "total"}},
            },
        },
        "edges": {"e": {"sender": "double", "sender_port": "y", "receiver": "acc", "receiver_port": "y"}},
    }
    m = model(
        {
            "outer": {
                "input_ports": {"x": {}},
                "graphs": {"inner": inner},
                "output_ports": {"sum": {"value": "acc.total + 0.5"}, "y": {"value": "double.y"}},
            },
            "src": {"parameters": {"v": {"value": 3.0}}, "output_ports": {"o": {"value": "v"}}},
        },
        {"e": edge("src", "o", "outer", "x")},
    )
    sim = mdf.Simulation(m)
    sim.evaluate()
    sim.evaluate()
    assert sim.outputs["outer"] == {"sum": 12.5, "y": 6.0}  # the inner state carries over
    mdf.save(m, tmp_path / "n.json")
    assert mdf.to_data(mdf.load(tmp_path / "n.json")) == mdf.to_data(m)


def test_simulation_from_a_path(tmp_path):
    m = model({"A": {"output_ports": {"o": {"value": "numpy.pi"}}}})
    mdf.save(m, tmp_path / "m.yaml")
    assert mdf.Simulation(str(tmp_path / "m.yaml")).evaluate()["A"]["o"] == pytest.approx(np.pi)
