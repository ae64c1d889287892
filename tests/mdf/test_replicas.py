"""The replica axis (stdops/mdf/replicas.py): ``Simulation(model, seeds=[...])`` gives, replica by replica,
exactly what ``Simulation(model, seed=s)`` gives alone -- same types, dtypes and bits -- whether the run keeps
the replica axis (random functions, element-wise arithmetic, reductions, state, time steps, indexing,
functions called per replica) or gives it up where replicas would part ways (a truth test, ``math.*`` or a
condition on values that differ), in which case it says so and runs the replicas one by one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stdops.mdf as mdf
from stdops.errors import StdopsError
from stdops.mdf.replicas import NotReplicable, Replicas

ROOT = Path(__file__).resolve().parents[2]
EX = ROOT / "examples" / "mdf"
ACTR = ROOT.parent / "shared" / "conformance" / "mdf" / "models" / "ACT-R" / "count.json"


def _seeds(n: int, root: int = 5) -> list:
    return [np.random.SeedSequence(root, spawn_key=(j,)) for j in range(n)]


def assert_same_value(a, b, where: str) -> None:
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b), where
        if a.dtype == object:
            assert np.asarray(a).tolist() == np.asarray(b).tolist(), where
        else:
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), where
    elif isinstance(a, float):
        assert np.float64(a).tobytes() == np.float64(b).tobytes(), where
    else:
        assert a == b, where


def assert_same_outputs(rep: dict, alone: dict, where: str = "") -> None:
    assert rep.keys() == alone.keys()
    for node in alone:
        assert rep[node].keys() == alone[node].keys()
        for port in alone[node]:
            assert_same_value(rep[node][port], alone[node][port], f"{where}{node}.{port}")


def _check_evaluate(model, n=6, evaluations=1):
    seeds = _seeds(n)
    sim = mdf.Simulation(model, seeds=seeds)
    alone = [mdf.Simulation(model, seed=s) for s in seeds]
    for e in range(evaluations):
        outs = sim.evaluate()
        assert isinstance(outs, list) and len(outs) == n
        for k, a in enumerate(alone):
            assert_same_outputs(outs[k], a.evaluate(), f"evaluation {e}, replica {k}: ")
    return sim


def test_the_ddm_example_as_replicas_is_each_seed_alone():
    sim = _check_evaluate(mdf.load(EX / "ddm_decision.yaml"), n=8, evaluations=2)
    assert sim.vectorized and sim.fallback_reason is None and sim.replicas == 8
    # the replicas differ (each its own generator)
    accs = [o["ddm"]["accuracy"] for o in sim.outputs]
    assert len(set(accs)) > 1


def _ddm_state_model(single_trial: bool = False, extra_outputs: dict | None = None) -> mdf.Model:
    start = "0.0" if single_trial else "numpy.zeros(trials)"
    outputs = {
        "rt": {"value": "rt"},
        "total": {"value": "total"},
        "count": {"value": "count"},
        "scaled": {"value": "rt * 2 + 1"},
        "centred": {"value": "rt - numpy.mean(rt)"},
        "biggest": {"value": "numpy.max(numpy.abs(rt))"},
    }
    if not single_trial:
        outputs["first"] = {"value": "rt[0]"}
        outputs["signs"] = {"value": "numpy.where(rt > 0, 1, -1)"}
        outputs["smooth"] = {"value": "numpy.exp(-numpy.abs(rt))"}  # not lifted (exp): per replica
        outputs["sorted"] = {"value": "numpy.sort(rt)[:3]"}
    outputs.update(extra_outputs or {})
    return mdf.model_from_data(
        {
            "m": {
                "format": "ModECI MDF v0.4",
                "graphs": {
                    "g": {
                        "nodes": {
                            "ddm": {
                                "parameters": {
                                    "trials": {"value": 40},
                                    "rt": {
                                        "function": "drift_diffusion_integrator",
                                        "args": {
                                            "starting_point": start,
                                            "non_decision_time": 0.1,
                                            "drift_rate": 0.3,
                                            "threshold": 1.0,
                                            "noise": 1.0,
                                            "dt": 0.01,
                                        },
                                    },
                                    "total": {"default_initial_value": 0.0, "value": "total + numpy.mean(rt)"},
                                    "count": {"default_initial_value": 0.0, "time_derivative": "numpy.sum(rt > 0)"},
                                },
                                "output_ports": outputs,
                            },
                            "after": {
                                "input_ports": {"x": {}},
                                "parameters": {"y": {"default_initial_value": 0, "value": "y + x * 0.5"}},
                                "output_ports": {"y": {"value": "y"}},
                            },
                        },
                        "edges": {
                            "e": {
                                "sender": "ddm",
                                "receiver": "after",
                                "sender_port": "total",
                                "receiver_port": "x",
                                "parameters": {"weight": 3},
                            }
                        },
                    }
                },
            }
        },
        "replicas-test",
    )


@pytest.mark.parametrize("single_trial", [False, True])
def test_state_edges_and_time_steps_as_replicas(single_trial):
    model = _ddm_state_model(single_trial)
    _check_evaluate(model, n=5, evaluations=3)
    seeds = _seeds(4, root=9)
    sim = mdf.Simulation(model, seeds=seeds)
    trajs = sim.run(0.05, 0.01)
    assert sim.vectorized, sim.fallback_reason
    assert len(trajs) == 4
    for k, s in enumerate(seeds):
        alone = mdf.Simulation(model, seed=s).run(0.05, 0.01)
        np.testing.assert_array_equal(trajs[k].times, alone.times)
        for node, ports in alone.data.items():
            for port, v in ports.items():
                w = trajs[k].data[node][port]
                assert w.dtype == v.dtype and w.shape == v.shape
                assert w.tobytes() == v.tobytes(), f"replica {k}: {node}.{port}"
    assert sim.n_evaluations == 6 and sim.time == pytest.approx(0.05)


@pytest.mark.parametrize(
    "outputs,reason",
    [
        ({"sign": {"value": "1.0 if rt > 0 else -1.0"}}, "truth test"),
        ({"e": {"value": "math.exp(-rt)"}}, "float()"),  # math.* on a value that differs
    ],
)
def test_values_that_part_the_replicas_fall_back_to_one_by_one(outputs, reason):
    model = _ddm_state_model(single_trial=True, extra_outputs=outputs)
    seeds = _seeds(12, root=1)
    sim = mdf.Simulation(model, seeds=seeds)
    out = sim.evaluate()
    assert not sim.vectorized and reason in sim.fallback_reason
    for k, s in enumerate(seeds):
        assert_same_outputs(out[k], mdf.Simulation(model, seed=s).evaluate(), f"replica {k}: ")
    # later calls go on one by one, each replica where its lone run is
    again = sim.evaluate()
    for k, s in enumerate(seeds):
        alone = mdf.Simulation(model, seed=s)
        alone.evaluate()
        assert_same_outputs(again[k], alone.evaluate(), f"replica {k}, second evaluation: ")


def test_a_model_error_is_the_lone_runs_error():
    model = _ddm_state_model()
    model.graph("g").nodes["ddm"].parameters["rt"].args["noise"] = -1.0
    with pytest.raises(StdopsError, match="noise"):
        mdf.Simulation(model, seeds=_seeds(3)).evaluate()


def test_a_deterministic_model_computes_once_for_all_replicas():
    model = mdf.load(EX / "oscillator.yaml")
    sim = mdf.Simulation(model, seeds=_seeds(3))
    trajs = sim.run(1.0, 0.01)
    alone = mdf.Simulation(model, seed=0).run(1.0, 0.01)
    assert sim.vectorized
    for t in trajs:
        for node, ports in alone.data.items():
            for port, v in ports.items():
                assert t.data[node][port].tobytes() == v.tobytes()


@pytest.mark.skipif(not ACTR.exists(), reason="needs ../shared/conformance/mdf (the ACT-R count model)")
def test_actr_conflict_resolution_draws_per_replica():
    """The conformance protocol (each trial's goal and memory from the last one's outputs) on 4 replicas and
    4 lone runs: conflict resolution draws from each replica's generator, dicts pass through per replica."""
    model = mdf.load(ACTR)
    seeds = _seeds(4)
    sim = mdf.Simulation(model, seeds=seeds)
    alone = [mdf.Simulation(model, seed=s) for s in seeds]
    feeds = [{"goal_input": {}, "dm_input": {}} for _ in seeds]
    for e in range(12):
        outs = sim.evaluate(inputs=feeds[0])
        for k, a in enumerate(alone):
            assert_same_outputs(outs[k], a.evaluate(inputs=feeds[k]), f"evaluation {e}, replica {k}: ")
            fire = outs[k]["fire_production"]
            feeds[k] = {
                "goal_input": fire["fire_prod_output_to_goal"],
                "dm_input": fire["fire_prod_output_to_retrieval"],
            }
        assert all(f == feeds[0] for f in feeds)  # one production matches at a time: the replicas agree
        if np.all(outs[0]["check_termination"]["check_output"]):
            break
    assert e > 2 and sim.vectorized, sim.fallback_reason


def test_seed_and_seeds_are_exclusive_and_seeds_not_empty():
    model = mdf.load(EX / "ddm_decision.yaml")
    with pytest.raises(Exception, match="seed or seeds"):
        mdf.Simulation(model, seed=1, seeds=_seeds(2))
    with pytest.raises(Exception, match="empty"):
        mdf.Simulation(model, seeds=[])


# ------------------------------------------------------------------ the Replicas value itself
def _r(values):
    r = Replicas.of(values)
    assert type(r) is Replicas
    return r


def test_lifted_operations_are_checked_against_replica_zero():
    rng = np.random.default_rng(0)
    a = [rng.standard_normal(5).astype(np.float32) for _ in range(4)]
    ra = _r(a)
    for got, want in (
        (ra + 1.5, [x + 1.5 for x in a]),  # a Python float beside float32 stays float32 (NEP 50)
        (ra * np.float64(2), [x * np.float64(2) for x in a]),
        (np.sqrt(np.abs(ra)), [np.sqrt(np.abs(x)) for x in a]),
        (np.mean(ra), [np.mean(x) for x in a]),
        (ra > 0, [x > 0 for x in a]),
        (np.exp(ra), [np.exp(x) for x in a]),  # per replica
        (ra[1:3], [x[1:3] for x in a]),
    ):
        for k in range(4):
            assert_same_value(got.value(k), want[k], f"replica {k}")


def test_python_floats_keep_python_semantics():
    r = _r([1.0, 0.0, 2.0])
    with pytest.raises(ZeroDivisionError):  # as the lone run of replica 1 would
        _ = 1.0 / r
    assert (r * 2).values() == [2.0, 0.0, 4.0] and type((r * 2).value(0)) is float


def test_escapes_are_the_common_value_or_refused():
    same = Replicas(np.array([3.0, 3.0]), "float")
    assert float(same) == 3.0 and bool(same)
    differ = _r([1.0, -1.0])
    with pytest.raises(NotReplicable):
        float(differ)
    with pytest.raises(NotReplicable):
        bool(differ > 0)
    with pytest.raises(NotReplicable):
        np.asarray(differ)
    with pytest.raises(NotReplicable):
        _ = differ.shape
    with pytest.raises(NotReplicable):
        np.add(differ, 1.0, out=np.empty(2))
    # identical results collapse to one plain value
    assert np.ndim(_r([np.zeros(3), np.ones(3)])) == 1
