"""The sweep's plan: parsing the command line's grid forms, numbering jobs, seeding them, checking
parameter names, reading input batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stdops.mdf as mdf
from stdops.distributed.plan import SweepError, build_mdf_plan, parse_grid, parse_values, read_samples

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "mdf"
DDM = EXAMPLES / "ddm_decision.yaml"
OSC = EXAMPLES / "oscillator.yaml"


@pytest.fixture(scope="module")
def ddm():
    return mdf.load(DDM)


def test_grid_is_linspace_inclusive_and_keeps_whole_numbers_whole():
    assert parse_grid("stimulus.coherence=0:1:5") == ("stimulus.coherence", [0.0, 0.25, 0.5, 0.75, 1.0])
    name, values = parse_grid("stimulus.trials=1000:5000:5")
    assert values == [1000, 2000, 3000, 4000, 5000] and all(type(v) is int for v in values)
    assert parse_grid("x=0:1:3")[1] == [0.0, 0.5, 1.0]  # not whole: floats
    assert parse_grid("x=0.5:0.5:1")[1] == [0.5]


def test_values_parse_numbers_and_share_one_type_along_an_axis():
    assert parse_values("ddm.threshold=0.5,1,2") == ("ddm.threshold", [0.5, 1.0, 2.0])
    assert parse_values("stimulus.trials=100,200") == ("stimulus.trials", [100, 200])


@pytest.mark.parametrize(
    "item, needle",
    [
        ("x=0:1:0", "a grid of 0 points has no point"),
        ("x=0:1:-2", "a grid of -2 points"),
        ("x=0:1", "expected NAME=START:STOP:N"),
        ("x=0:1:2.5", "N must be a whole number"),
        ("x=a:1:3", "START and STOP must be numbers"),
        ("x=0:inf:3", "finite"),
        ("=0:1:3", "expected NAME"),
    ],
)
def test_bad_grids(item, needle):
    with pytest.raises(SweepError, match=needle):
        parse_grid(item)


def test_values_with_no_value_is_a_grid_with_no_point():
    with pytest.raises(SweepError, match="no point to run"):
        parse_values("ddm.threshold=")


def test_jobs_are_c_order_over_parameters_then_seed(ddm):
    plan = build_mdf_plan(
        ddm, str(DDM), {"stimulus.coherence": [0.1, 0.2, 0.3], "ddm.threshold": [0.5, 1.0]}, None, 4, 7, None, None
    )
    assert plan.job_dims == ["stimulus.coherence", "ddm.threshold", "seed"]
    assert plan.job_shape == (3, 2, 4) and plan.n_jobs == 24
    # job 13 = (1, 1, 1) in C order
    assert plan.overrides(13) == {"stimulus.coherence": 0.2, "ddm.threshold": 1.0}
    assert plan.overrides(3) == {"stimulus.coherence": 0.1, "ddm.threshold": 0.5}


def test_job_seeds_are_numpys_spawned_children(ddm):
    """SeedSequence(root).spawn(n)[j] (numpy's own spawning is the oracle) -- built without spawning all n."""
    plan = build_mdf_plan(ddm, str(DDM), {"stimulus.coherence": [0.1, 0.2]}, None, 3, 12345, None, None)
    children = np.random.SeedSequence(12345).spawn(plan.n_jobs)
    for j, child in enumerate(children):
        ours = plan.seed_sequence(j)
        np.testing.assert_array_equal(ours.generate_state(8), child.generate_state(8))
        assert np.random.default_rng(ours).random() == np.random.default_rng(child).random()


def test_a_parameter_that_does_not_exist_is_named_with_the_closest(ddm):
    with pytest.raises(SweepError, match=r"no parameter 'stimulus.coherenc' \(did you mean stimulus.coherence\?\)"):
        build_mdf_plan(ddm, str(DDM), {"stimulus.coherenc": [0.1]}, None, 1, 0, None, None)
    with pytest.raises(SweepError, match="did you mean ddm.threshold"):
        build_mdf_plan(ddm, str(DDM), None, [{"ddm.treshold": 1.0}], 1, 0, None, None)


def test_a_function_parameter_cannot_be_set(ddm):
    with pytest.raises(SweepError, match="'ddm.signed_rt' is computed by a function"):
        build_mdf_plan(ddm, str(DDM), {"ddm.signed_rt": [1.0]}, None, 1, 0, None, None)


@pytest.mark.parametrize(
    "grid, points, seeds, needle",
    [
        ({"ddm.threshold": []}, None, 1, "has no value"),
        (None, [], 1, "list of points is empty"),
        ({"ddm.threshold": [1.0, 1.0]}, None, 1, "lists a value twice"),
        ({"ddm.threshold": [1.0]}, [{"ddm.threshold": 1.0}], 1, "not both"),
        (None, [{"ddm.threshold": 1.0}, {"ddm.gain": 1.0}], 1, "every point sets the same"),
        ({"ddm.threshold": [1.0]}, None, 0, "seeds must be"),
    ],
)
def test_bad_plans(ddm, grid, points, seeds, needle):
    with pytest.raises(SweepError, match=needle):
        build_mdf_plan(ddm, str(DDM), grid, points, seeds, 0, None, None)


def test_a_list_of_points_is_one_dimension_with_each_parameter_along_it(ddm):
    pts = [{"stimulus.coherence": 0.1, "ddm.threshold": 0.5}, {"stimulus.coherence": 0.4, "ddm.threshold": 2.0}]
    plan = build_mdf_plan(ddm, str(DDM), None, pts, 2, 0, None, None)
    assert plan.job_dims == ["point", "seed"] and plan.job_shape == (2, 2)
    assert plan.overrides(3) == pts[1]
    coords = plan.coords()
    assert coords["ddm.threshold"][0] == "point"
    np.testing.assert_array_equal(coords["ddm.threshold"][1], [0.5, 2.0])


def test_a_stateful_parameter_can_be_swept():
    """x has no value, only an initial value and a time derivative: the sweep sets where it starts."""
    plan = build_mdf_plan(mdf.load(OSC), str(OSC), {"mass_spring.x": [1.0, 2.0]}, None, 1, 0, 1.0, 0.1)
    assert plan.n_jobs == 2


def test_input_batches_from_a_npz_and_from_folders(tmp_path):
    x = np.arange(12, dtype=np.float32).reshape(3, 1, 4)
    np.savez(tmp_path / "b.npz", x=x)
    labels, feeds = read_samples(tmp_path / "b.npz", ["x"], "inputs")
    assert labels == [0, 1, 2]
    np.testing.assert_array_equal(feeds[2]["x"], x[2])
    flat = tmp_path / "flat"
    flat.mkdir()
    for name, i in (("b", 1), ("a", 0)):
        np.save(flat / f"{name}.npy", x[i])
    labels, feeds = read_samples(flat, ["x"], "inputs")
    assert labels == ["a", "b"]
    np.testing.assert_array_equal(feeds[1]["x"], x[1])
    nested = tmp_path / "nested"
    for s in ("s0", "s1"):
        (nested / s).mkdir(parents=True)
        np.save(nested / s / "x.npy", x[0])
        np.save(nested / s / "y.npy", x[1])
    labels, feeds = read_samples(nested, ["x", "y"], "inputs")
    assert labels == ["s0", "s1"] and sorted(feeds[0]) == ["x", "y"]
    with pytest.raises(SweepError, match="one .npy per sample fits a one-input model"):
        read_samples(flat, ["x", "y"], "inputs")
    with pytest.raises(SweepError, match="s0: no z.npy"):
        read_samples(nested, ["x", "y", "z"], "inputs")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SweepError, match="no sample to run"):
        read_samples(empty, ["x"], "inputs")
    np.savez(tmp_path / "bad.npz", x=x, w=x)
    with pytest.raises(SweepError, match="no model input 'w'"):
        read_samples(tmp_path / "bad.npz", ["x"], "inputs")


def test_batches_grow_to_the_target_duration_but_leave_a_fair_share_for_the_tail():
    from stdops.distributed.runner import Batcher

    b = Batcher(task_seconds=1.0)
    assert b.size(remaining=1000, slots=2) == 1  # nothing measured yet: one job measures the rate
    b.observe(seconds=0.01, n_jobs=1)  # 10 ms a job
    assert b.size(remaining=1000, slots=2) == 100
    assert b.size(remaining=40, slots=2) == 10  # not more than remaining / (2 slots * 2)
    b.observe(seconds=20.0, n_jobs=10)  # jobs got slower: 2 s each
    assert b.size(remaining=1000, slots=2) == 1
