"""One test per condition type: our scheduler against graph-scheduler (the test oracle, when it is
installed) on a chain A -> B -> C -> D, over several trials. (Every consideration set holds one node:
within a set graph-scheduler's order depends on hashing, ours is the declaration order.)"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from stdops.errors import StdopsError, ValidationError
from stdops.mdf import conditions as C
from stdops.mdf import scheduler as S
from stdops.mdf.condition_files import build_condition

try:
    import graph_scheduler as gs
except Exception:  # noqa: BLE001 - the oracle is optional
    gs = None

NODES = ["A", "B", "C", "D"]
DEPS = {"A": set(), "B": {"A"}, "C": {"B"}, "D": {"C"}}


def _ours(node_conds: dict, term: dict, trials: int) -> list[list[set]]:
    ids = set(NODES)
    conds = {n: build_condition(c, ids, f"conditions.node_specific.{n}", None) for n, c in node_conds.items()}
    terms = {
        C.parse_time_scale(k): build_condition(c, ids, f"conditions.termination.{k}", None) for k, c in term.items()
    }
    s = S.Scheduler(NODES, DEPS, conds, terms)
    out = []
    for _ in range(trials):
        out.append([set(x) for x in s.run()])
    return out


def _oracle(node_conds: dict, term: dict, trials: int) -> list[list[set]]:
    graph = {n: set(d) for n, d in DEPS.items()}
    s = gs.Scheduler(
        graph=graph,
        conditions={n: c(gs) for n, c in node_conds.items()},
        termination_conds={getattr(gs.TimeScale, k): c(gs) for k, c in term.items()},
    )
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(trials):
            out.append([set(x) for x in s.run()])
    return out


ESU = "ENVIRONMENT_STATE_UPDATE"
T = {"type": "AfterNCalls", "kwargs": {"dependency": "A", "n": 6}}
T_GS = {ESU: lambda g: g.AfterNCalls("A", 6)}


def _c(type_, **kw):
    return {"type": type_, "kwargs": kw}


# name -> (our node conditions, our termination, oracle node conditions, oracle termination, trials)
CASES = {
    "Always": ({"B": _c("Always")}, {}, {"B": lambda g: g.Always()}, {}, 2),
    "Never": ({"C": _c("Never")}, {ESU.lower(): T}, {"C": lambda g: g.Never()}, T_GS, 2),
    "EveryNCalls": (
        {"B": _c("EveryNCalls", dependencies="A", n=2)},
        {ESU.lower(): T},
        {"B": lambda g: g.EveryNCalls("A", 2)},
        T_GS,
        2,
    ),
    "AfterNCalls": (
        {"B": _c("AfterNCalls", dependency="A", n=3)},
        {ESU.lower(): T},
        {"B": lambda g: g.AfterNCalls("A", 3)},
        T_GS,
        2,
    ),
    "AfterCall": (
        {"B": _c("AfterCall", dependency="A", n=2)},
        {ESU.lower(): T},
        {"B": lambda g: g.AfterCall("A", 2)},
        T_GS,
        2,
    ),
    "AtNCalls": (
        {"B": _c("AtNCalls", dependency="A", n=2)},
        {ESU.lower(): T},
        {"B": lambda g: g.AtNCalls("A", 2)},
        T_GS,
        2,
    ),
    "BeforeNCalls": (
        {"B": _c("BeforeNCalls", dependency="A", n=3)},
        {ESU.lower(): T},
        {"B": lambda g: g.BeforeNCalls("A", 3)},
        T_GS,
        2,
    ),
    "AfterNCallsCombined": (
        {"D": _c("AfterNCallsCombined", dependencies=["A", "B"], n=4)},
        {ESU.lower(): T},
        {"D": lambda g: g.AfterNCallsCombined("A", "B", n=4)},
        T_GS,
        2,
    ),
    "BeforePass": ({"D": _c("BeforePass", n=2)}, {ESU.lower(): T}, {"D": lambda g: g.BeforePass(2)}, T_GS, 2),
    "AtPass": ({"D": _c("AtPass", n=2)}, {ESU.lower(): T}, {"D": lambda g: g.AtPass(2)}, T_GS, 2),
    "AfterPass": ({"D": _c("AfterPass", n=1)}, {ESU.lower(): T}, {"D": lambda g: g.AfterPass(1)}, T_GS, 2),
    "AfterNPasses": ({"D": _c("AfterNPasses", n=2)}, {ESU.lower(): T}, {"D": lambda g: g.AfterNPasses(2)}, T_GS, 2),
    "EveryNPasses": ({"D": _c("EveryNPasses", n=2)}, {ESU.lower(): T}, {"D": lambda g: g.EveryNPasses(2)}, T_GS, 2),
    "BeforeConsiderationSetExecution": (
        {"D": _c("BeforeConsiderationSetExecution", n=3)},
        {ESU.lower(): T},
        {"D": lambda g: g.BeforeConsiderationSetExecution(3)},
        T_GS,
        2,
    ),
    "AtConsiderationSetExecution": (
        {"D": _c("AtConsiderationSetExecution", n=3)},
        {ESU.lower(): T},
        {"D": lambda g: g.AtConsiderationSetExecution(3)},
        T_GS,
        2,
    ),
    "AfterConsiderationSetExecution": (
        {"D": _c("AfterConsiderationSetExecution", n=3)},
        {ESU.lower(): T},
        {"D": lambda g: g.AfterConsiderationSetExecution(3)},
        T_GS,
        2,
    ),
    "AfterNConsiderationSetExecutions": (
        {"D": _c("AfterNConsiderationSetExecutions", n=3)},
        {ESU.lower(): T},
        {"D": lambda g: g.AfterNConsiderationSetExecutions(3)},
        T_GS,
        2,
    ),
    "AllHaveRun": (
        {"C": _c("EveryNCalls", dependency="B", n=2)},
        {ESU.lower(): _c("AllHaveRun")},
        {"C": lambda g: g.EveryNCalls("B", 2)},
        {ESU: lambda g: g.AllHaveRun()},
        3,
    ),
    "JustRan": ({"D": _c("JustRan", dependencies="B")}, {ESU.lower(): T}, {"D": lambda g: g.JustRan("B")}, T_GS, 2),
    "All": (
        {"D": _c("All", dependencies=[_c("AfterPass", n=1), _c("EveryNCalls", dependency="A", n=2)])},
        {ESU.lower(): T},
        {"D": lambda g: g.All(g.AfterPass(1), g.EveryNCalls("A", 2))},
        T_GS,
        2,
    ),
    "And": (
        {"D": _c("And", dependencies=[_c("AtPass", n=1), _c("Always")])},
        {ESU.lower(): T},
        {"D": lambda g: g.And(g.AtPass(1), g.Always())},
        T_GS,
        2,
    ),
    "Any": (
        {"D": _c("Any", dependencies=[_c("AtPass", n=1), _c("AtPass", n=3)])},
        {ESU.lower(): T},
        {"D": lambda g: g.Any(g.AtPass(1), g.AtPass(3))},
        T_GS,
        2,
    ),
    "Or": (
        {"D": _c("Or", dependencies=[_c("AtPass", n=0), _c("AtPass", n=4)])},
        {ESU.lower(): T},
        {"D": lambda g: g.Or(g.AtPass(0), g.AtPass(4))},
        T_GS,
        2,
    ),
    "Not": (
        {"D": _c("Not", condition=_c("AtPass", n=1))},
        {ESU.lower(): T},
        {"D": lambda g: g.Not(g.AtPass(1))},
        T_GS,
        2,
    ),
    "NWhen": (
        {"D": _c("NWhen", condition=_c("AfterPass", n=0), n=2)},
        {ESU.lower(): T},
        {"D": lambda g: g.NWhen(g.AfterPass(0), 2)},
        T_GS,
        2,
    ),
    "AtEnvironmentStateUpdate": (
        {"D": _c("AtEnvironmentStateUpdate", n=1)},
        {ESU.lower(): T},
        {"D": lambda g: g.AtEnvironmentStateUpdate(1)},
        T_GS,
        3,
    ),
    "BeforeEnvironmentStateUpdate": (
        {"D": _c("BeforeEnvironmentStateUpdate", n=1)},
        {ESU.lower(): T},
        {"D": lambda g: g.BeforeEnvironmentStateUpdate(1)},
        T_GS,
        3,
    ),
    "AfterEnvironmentStateUpdate": (
        {"D": _c("AfterEnvironmentStateUpdate", n=1)},
        {ESU.lower(): T},
        {"D": lambda g: g.AfterEnvironmentStateUpdate(1)},
        T_GS,
        3,
    ),
    "AfterNEnvironmentStateUpdates": (
        {"D": _c("AfterNEnvironmentStateUpdates", n=1)},
        {ESU.lower(): T},
        {"D": lambda g: g.AfterNEnvironmentStateUpdates(1)},
        T_GS,
        3,
    ),
    "AtEnvironmentSequence": (
        {"D": _c("AtEnvironmentSequence", n=0)},
        {ESU.lower(): T},
        {"D": lambda g: g.AtEnvironmentSequence(0)},
        T_GS,
        2,
    ),
    "AfterEnvironmentSequence": (
        {"D": _c("AfterEnvironmentSequence", n=0)},
        {ESU.lower(): T},
        {"D": lambda g: g.AfterEnvironmentSequence(0)},
        T_GS,
        2,
    ),
    "AfterNEnvironmentSequences": (
        {"D": _c("AfterNEnvironmentSequences", n=0)},
        {ESU.lower(): T},
        {"D": lambda g: g.AfterNEnvironmentSequences(0)},
        T_GS,
        2,
    ),
    "AtEnvironmentStateUpdateStart": (
        {"D": _c("AtEnvironmentStateUpdateStart")},
        {ESU.lower(): T},
        {"D": lambda g: g.AtEnvironmentStateUpdateStart()},
        T_GS,
        2,
    ),
    "AtEnvironmentStateUpdateNStart": (
        {"D": _c("AtEnvironmentStateUpdateNStart", n=1)},
        {ESU.lower(): T},
        {"D": lambda g: g.AtEnvironmentStateUpdateNStart(1)},
        T_GS,
        3,
    ),
    "AtEnvironmentSequenceStart": (
        {"D": _c("AtEnvironmentSequenceStart")},
        {ESU.lower(): T},
        {"D": lambda g: g.AtEnvironmentSequenceStart()},
        T_GS,
        2,
    ),
    "AtEnvironmentSequenceNStart": (
        {"D": _c("AtEnvironmentSequenceNStart", n=0)},
        {ESU.lower(): T},
        {"D": lambda g: g.AtEnvironmentSequenceNStart(0)},
        T_GS,
        2,
    ),
    "TimeInterval": (
        {"D": _c("TimeInterval", repeat=2, start=1)},
        {ESU.lower(): T},
        {"D": lambda g: g.TimeInterval(repeat=2, start=1)},
        T_GS,
        2,
    ),
    "TimeTermination": (
        {},
        {ESU.lower(): _c("TimeTermination", t=7, inclusive=False)},
        {},
        {ESU: lambda g: g.TimeTermination(7, inclusive=False)},
        1,
    ),
    "termination_Never_on_sequence": (
        {},
        {"environment_sequence": _c("Never")},
        {},
        {"ENVIRONMENT_SEQUENCE": lambda g: g.Never()},
        2,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_condition_matches_graph_scheduler(name):
    ours_nc, ours_t, gs_nc, gs_t, trials = CASES[name]
    mine = _ours(ours_nc, ours_t, trials)
    assert any(any(step) for trial in mine for step in trial)
    if gs is None:
        pytest.skip("graph-scheduler (the oracle) is not installed")
    theirs = _oracle(gs_nc, gs_t, trials)
    assert mine == theirs


def test_default_conditions_and_allhaverun():
    s = S.Scheduler(NODES, {"A": set(), "B": {"A"}, "C": {"B"}, "D": set()}, {}, {})
    steps = [set(x) for x in s.run()]
    assert steps == [{"A", "D"}, {"B"}, {"C"}]


def test_whenfinished_means_ran_in_this_trial():
    for t in ("WhenFinished", "WhenFinishedAny", "WhenFinishedAll"):
        kw = {"dependency": "B"} if t == "WhenFinished" else {"dependencies": ["B"]}
        s = S.Scheduler(
            NODES,
            {"A": set(), "B": {"A"}, "C": {"B"}, "D": set()},
            {"D": build_condition(_c(t, **kw), set(NODES), "x", None)},
            {C.ESU: C.AllHaveRun()},
        )
        steps = [set(x) for x in s.run()]
        # D waits for B, so it runs in the pass after B ran
        assert steps == [{"A"}, {"B"}, {"C"}, {"A", "D"}], t


def test_threshold_on_a_parameter():
    import stdops.mdf as mdf

    m = mdf.model_from_data(
        {
            "m": {
                "graphs": {
                    "g": {
                        "nodes": {
                            "A": {
                                "parameters": {"count": {"value": "count + 1", "default_initial_value": 0}},
                                "output_ports": {"out": {"value": "count"}},
                            }
                        },
                        "conditions": {
                            "termination": {
                                "environment_state_update": _c(
                                    "Threshold", dependency="A", parameter="count", threshold=5, comparator=">="
                                )
                            }
                        },
                    }
                }
            }
        }
    )
    sim = mdf.Simulation(m)
    sim.evaluate()
    assert sim.outputs["A"]["out"] == 5
    assert len(sim.execution_order) == 5


@pytest.mark.parametrize("comparator,expected", [("<", 1), ("==", 3), ("!=", 1), (">", 4), ("<=", 1)])
def test_threshold_comparators(comparator, expected):
    import stdops.mdf as mdf

    m = mdf.model_from_data(
        {
            "m": {
                "graphs": {
                    "g": {
                        "nodes": {
                            "A": {
                                "parameters": {"count": {"value": "count + 1"}},
                                "output_ports": {"out": {"value": "count"}},
                            }
                        },
                        "conditions": {
                            "termination": {
                                "environment_state_update": _c(
                                    "Threshold", dependency="A", parameter="count", threshold=3, comparator=comparator
                                )
                            }
                        },
                    }
                }
            }
        }
    )
    sim = mdf.Simulation(m)
    sim.evaluate()
    # the first check happens before A ever ran (count reads 0)
    assert len(sim.execution_order) == (0 if comparator in ("<", "!=", "<=") else expected)


def test_threshold_bad_comparator_and_unknown_type():
    with pytest.raises(ValidationError, match="comparator"):
        build_condition(
            _c("Threshold", dependency="A", parameter="p", threshold=1, comparator="~"), set(NODES), "c", None
        )
    with pytest.raises(ValidationError, match="unknown condition type"):
        build_condition(_c("Sometimes"), set(NODES), "c", None)
    with pytest.raises(ValidationError, match="no node"):
        build_condition(_c("EveryNCalls", dependency="Z", n=1), set(NODES), "c", None)
    with pytest.raises(ValidationError, match="takes no argument"):
        build_condition(_c("Always", n=1), set(NODES), "c", None)


def test_time_scale_spellings():
    assert C.parse_time_scale("TimeScale.TRIAL") is C.ESU
    assert C.parse_time_scale("environment_state_update") is C.ESU
    assert C.parse_time_scale("ENVIRONMENT_SEQUENCE") is C.ES
    with pytest.raises(ValueError):
        C.parse_time_scale("FORTNIGHT")


def test_cycle_without_default_value_is_an_error():
    with pytest.raises(StdopsError, match="cycle"):
        S.Scheduler(["A", "B"], {"A": {"B"}, "B": {"A"}}, {}, {})


def test_nontermination_is_reported():
    old = S.set_max_passes(50)
    try:
        s = S.Scheduler(["A"], {"A": set()}, {"A": C.Never()}, {})
        with pytest.raises(StdopsError, match="did not terminate"):
            list(s.run())
    finally:
        S.set_max_passes(old)


def test_counts_carry_over_between_trials():
    ids = set(NODES)
    s = S.Scheduler(
        NODES,
        DEPS,
        {"D": build_condition(_c("AtEnvironmentStateUpdate", n=2), ids, "c", None)},
        {C.ESU: C.AfterNCalls("A", 2)},
    )
    runs = [[set(x) for x in s.run()] for _ in range(3)]
    assert all("D" not in st for st in runs[0] + runs[1] if st)
    assert {"D"} <= set().union(*runs[2])
    assert np.all([len(r) >= 3 for r in runs[:2]])


def test_threshold_on_an_input_port_terminates():
    """The reference hangs here (its ports reset to None after a node runs); we read the port's
    last value."""
    import stdops.mdf as mdf

    m = mdf.model_from_data(
        {
            "m": {
                "graphs": {
                    "g": {
                        "nodes": {
                            "B": {"parameters": {"c": {"value": "c + 1"}}, "output_ports": {"o": {"value": "c"}}},
                            "A": {"input_ports": {"x": {}}, "output_ports": {"y": {"value": "x"}}},
                        },
                        "edges": {"e": {"sender": "B", "sender_port": "o", "receiver": "A", "receiver_port": "x"}},
                        "conditions": {
                            "termination": {
                                "environment_state_update": _c(
                                    "Threshold", dependency="A", parameter="x", threshold=3, comparator=">="
                                )
                            }
                        },
                    }
                }
            }
        }
    )
    sim = mdf.Simulation(m)
    sim.evaluate()
    assert sim.outputs["A"]["y"] == 3
