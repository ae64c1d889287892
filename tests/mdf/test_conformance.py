"""The shared MDF conformance models: every model the reference ran (status ok) must give the
reference's outputs, final parameter values, trajectories (step by step) and execution lists, within rtol 1e-6 /
atol 1e-9 (rtol 1e-5 / atol 1e-6 where onnx:: functions are involved). Skips where ../shared is absent."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ._conformance import CONF, EXCLUDED, check_expected, expected_files

FILES = expected_files()
pytestmark = pytest.mark.conformance


def _id(p):
    return p.relative_to(CONF / "expected").as_posix()


@pytest.mark.skipif(not FILES, reason="../shared/conformance/mdf is not available")
@pytest.mark.parametrize("path", FILES, ids=[_id(p) for p in FILES])
def test_model_matches_reference(path):
    import stdops.mdf as mdf

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", mdf.NonFiniteWarning)  # HH overflows, in the reference too
        status, errs = check_expected(path)
    if status == "skip":
        pytest.skip(errs[0] if errs else "not compared")
    assert not errs, "\n".join(errs[:10])


@pytest.mark.skipif(not FILES, reason="../shared/conformance/mdf is not available")
def test_models_the_reference_fails_on_run():
    """The reference cannot run ONNX/abc (a Loop whose body is an MDF graph) nor
    Translated_abc_conditions (BeforeNCalls written with args): we do, sensibly."""
    import stdops.mdf as mdf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in ("ONNX/abc.json", "ONNX/abc.yaml"):
            sim = mdf.Simulation(mdf.load(CONF / "models" / name))
            sim.evaluate(inputs={"B_loop_count": np.array([3.0])})
            x = np.zeros((2, 3)) + 1.0  # Add(0, 1)
            np.testing.assert_allclose(sim.outputs["/C/Mul"]["_13"], x / 1000 * 100)
            sim2 = mdf.Simulation(mdf.load(CONF / "models" / name))
            sim2.evaluate()  # trip count 0: the loop passes its initial value through
            np.testing.assert_allclose(sim2.outputs["/C/Mul"]["_13"], x * 100)
        sim = mdf.Simulation(mdf.load(CONF / "models" / "MDF/translation/Translated_abc_conditions.json"))
        sim.evaluate()
        # input0 runs once (BeforeNCalls(input0, 1)); then A/B/C as in abc_conditions
        order = sim.execution_order
        assert order[0] == ["input0"]
        assert sum(s.count("A") for s in order) == 7
        assert sum(s.count("C") for s in order) == 2


def test_excluded_is_documented():
    assert "NeuroML/ABCD.mdf.json" in EXCLUDED
