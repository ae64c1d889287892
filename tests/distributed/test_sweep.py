"""Sweeps run in this process: the dataset's layout, each point against an independent calculation
(drift-diffusion theory, the analytic damped oscillator, onnxruntime), the result files, --resume."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray", reason="xarray (the 'distributed' extra) is not installed")
pytest.importorskip("h5netcdf", reason="h5netcdf (the 'distributed' extra) is not installed")

import stdops  # noqa: E402
import stdops.mdf as mdf  # noqa: E402
from stdops.distributed import SweepError, sweep  # noqa: E402
from stdops.examples import demo_model_path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DDM = ROOT / "examples" / "mdf" / "ddm_decision.yaml"
OSC = ROOT / "examples" / "mdf" / "oscillator.yaml"
XOR_PARAM = ROOT / "examples" / "xor_mlp.param"
SMALL = {"stimulus.trials": [300]}  # 300 trials per run keeps these tests fast
XOR_X = np.array([[[0, 0]], [[0, 1]], [[1, 0]], [[1, 1]]], np.float32)


def test_ddm_grid_over_seeds_matches_theory_and_the_public_api():
    coh = [0.1, 0.5]
    ds = stdops.sweep(DDM, {"stimulus.coherence": coh, "stimulus.trials": [2000]}, seeds=3, seed=11, serial=True)
    assert ds["ddm.accuracy"].dims == ("stimulus.coherence", "stimulus.trials", "seed")
    assert ds["ddm.signed_rt"].shape == (2, 1, 3, 2000)
    assert bool(ds["job_done"].all()) and ds.attrs["complete"] == 1
    # the output port that shows a swept parameter is renamed, not confused with the coordinate
    np.testing.assert_array_equal(ds["stimulus.coherence_output"].values[:, 0, 0], coh)
    for i, c in enumerate(coh):
        v, a = 2.0 * c, 1.0  # drift = gain * coherence; bounds +-threshold from 0; unit noise
        p_upper = 1 / (1 + math.exp(-2 * a * v))
        assert abs(float(ds["ddm.accuracy"][i].mean()) - p_upper) < 0.03
    # job j = (point, seed) in C order runs with SeedSequence(11).spawn(6)[j], as the public API would
    children = np.random.SeedSequence(11).spawn(6)
    model = mdf.load(DDM)
    model.graph(None).nodes["stimulus"].parameters["coherence"].value = 0.5
    model.graph(None).nodes["stimulus"].parameters["trials"].value = 2000
    sim = mdf.Simulation(model, seed=children[1 * 3 + 2])
    sim.evaluate()
    np.testing.assert_array_equal(ds["ddm.signed_rt"].values[1, 0, 2], sim.outputs["ddm"]["signed_rt"])


def test_seeds_as_replicas_are_the_seeds_one_by_one():
    """A point's seeds run as replicas of one simulation give the bits of one run per seed: one evaluation,
    and time-stepped."""
    from stdops.distributed import payload

    grid = {"stimulus.coherence": [0.1, 0.4], "stimulus.trials": [200]}
    for kw in ({}, {"duration": 0.03, "dt": 0.01}):
        before = sum(payload.REPLICA_JOBS.values())
        vec = sweep(DDM, grid, seeds=5, seed=3, serial=True, **kw)
        assert sum(payload.REPLICA_JOBS.values()) - before == 10  # every job, 5 seeds to a simulation
        alone = sweep(DDM, grid, seeds=5, seed=3, serial=True, vectorize=False, **kw)
        xr.testing.assert_identical(vec, alone)
        for name in alone.variables:
            assert vec[name].values.tobytes() == alone[name].values.tobytes(), name


def test_time_stepped_sweep_of_an_initial_value_matches_the_analytic_oscillator():
    ds = sweep(OSC, {"mass_spring.k": [1.0, 4.0], "mass_spring.x": [1.0, 2.0]}, duration=2.0, dt=0.001, serial=True)
    assert ds["mass_spring.position"].dims == ("mass_spring.k", "mass_spring.x", "seed", "time")
    t = ds["time"].values
    assert t[0] == 0 and abs(t[-1] - 2.0) < 1e-9
    m, c = 1.0, 0.2
    for i, k in enumerate((1.0, 4.0)):
        for j, x0 in enumerate((1.0, 2.0)):
            w0, zeta = math.sqrt(k / m), c / (2 * math.sqrt(k * m))
            wd = w0 * math.sqrt(1 - zeta**2)
            exact = x0 * np.exp(-zeta * w0 * t) * (np.cos(wd * t) + zeta * w0 / wd * np.sin(wd * t))
            np.testing.assert_allclose(ds["mass_spring.position"].values[i, j, 0], exact, atol=5e-3 * x0)


def test_onnx_batch_is_stacked_along_sample_and_matches_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the test oracle) is not installed")
    np.savez(tmp_path / "batch.npz", x=XOR_X)
    ds = sweep(demo_model_path(), inputs=tmp_path / "batch.npz", serial=True)
    assert ds["probabilities"].dims == ("sample", "probabilities_dim0", "probabilities_dim1")
    sess = ort.InferenceSession(str(demo_model_path()), providers=["CPUExecutionProvider"])
    for i, x in enumerate(XOR_X):
        probs, label = sess.run(["probabilities", "label"], {"x": x})
        np.testing.assert_allclose(ds["probabilities"].values[i], probs, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(ds["label"].values[i], label)


def test_ncnn_batch_from_a_folder_of_npy_matches_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the test oracle) is not installed")
    folder = tmp_path / "xs"
    folder.mkdir()
    for i, x in enumerate(XOR_X):
        np.save(folder / f"case{i}.npy", x[0])  # ncnn blobs have no batch axis
    ds = sweep(XOR_PARAM, inputs=folder, serial=True)
    assert list(ds["sample"].values) == ["case0", "case1", "case2", "case3"]
    sess = ort.InferenceSession(str(demo_model_path()), providers=["CPUExecutionProvider"])
    (name,) = [v for v in ds.data_vars if v != "job_done"]
    for i, x in enumerate(XOR_X):
        (probs,) = sess.run(["probabilities"], {"x": x})
        np.testing.assert_allclose(ds[name].values[i].reshape(-1), probs.reshape(-1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_the_file_holds_the_dataset_and_its_provenance(tmp_path, suffix):
    out = tmp_path / f"r{suffix}"
    ds = sweep(DDM, {"ddm.threshold": [0.5, 1.0], **SMALL}, seeds=2, serial=True, output=out, command="a command")
    back = xr.open_zarr(out) if suffix == ".zarr" else xr.open_dataset(out, engine="h5netcdf")
    with back:
        xr.testing.assert_identical(back.load(), ds)
    assert ds.attrs["command"] == "a command" and ds.attrs["model"] == "ddm_decision.yaml"
    import hashlib

    assert ds.attrs["model_sha256"] == hashlib.sha256(DDM.read_bytes()).hexdigest()
    assert ds.attrs["stdops_version"] == stdops.__version__


def _interrupt_after(n: int):
    def report(done: int, total: int) -> None:
        if done >= n:
            raise KeyboardInterrupt

    return report


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_resume_after_an_interrupted_sweep_gives_the_same_file(tmp_path, suffix):
    grid = {"stimulus.coherence": [0.1, 0.3, 0.5], **SMALL}
    whole = tmp_path / f"whole{suffix}"
    sweep(DDM, grid, seeds=2, serial=True, output=whole, command="c")
    part = tmp_path / f"part{suffix}"
    with pytest.raises(KeyboardInterrupt):
        sweep(DDM, grid, seeds=2, serial=True, output=part, command="c", progress=_interrupt_after(4))
    partial = xr.open_zarr(part) if suffix == ".zarr" else xr.open_dataset(part, engine="h5netcdf")
    with partial:
        assert int(partial["job_done"].sum()) == 4 and int(partial.attrs["complete"]) == 0
        assert np.isnan(partial["ddm.accuracy"].values[2]).all()  # the jobs not run yet
    ran = []
    sweep(DDM, grid, seeds=2, serial=True, output=part, command="c", resume=True, progress=lambda d, t: ran.append(d))
    assert ran == [6]  # only the two missing jobs ran (one point's two seeds: one batch, as replicas)
    if suffix == ".nc":
        assert part.read_bytes() == whole.read_bytes()
    else:
        with xr.open_zarr(part) as a, xr.open_zarr(whole) as b:
            xr.testing.assert_identical(a.load(), b.load())


def test_resume_refuses_another_models_file_and_another_sweep_and_leaves_them(tmp_path):
    out = tmp_path / "r.nc"
    sweep(DDM, {"ddm.threshold": [0.5], **SMALL}, serial=True, output=out)
    before = out.read_bytes()
    with pytest.raises(SweepError, match="holds results of another model .*ddm_decision.yaml.*not of oscillator"):
        sweep(OSC, {"mass_spring.k": [1.0]}, serial=True, output=out, resume=True)
    with pytest.raises(SweepError, match="another sweep of this model .*differs in grid"):
        sweep(DDM, {"ddm.threshold": [0.7], **SMALL}, serial=True, output=out, resume=True)
    with pytest.raises(SweepError, match="differs in root_seed"):
        sweep(DDM, {"ddm.threshold": [0.5], **SMALL}, seed=3, serial=True, output=out, resume=True)
    assert out.read_bytes() == before
    other = tmp_path / "other.nc"
    xr.Dataset({"a": ("x", np.arange(3.0))}).to_netcdf(other, engine="h5netcdf")
    with pytest.raises(SweepError, match="not a stdops sweep result"):
        sweep(DDM, SMALL, serial=True, output=other, resume=True)


def test_a_failing_sweep_leaves_an_earlier_file_as_it_was(tmp_path):
    out = tmp_path / "r.nc"
    sweep(DDM, {"ddm.threshold": [0.5], **SMALL}, serial=True, output=out)
    before = out.read_bytes()
    with pytest.raises(SweepError, match="no parameter 'ddm.thresold'"):
        sweep(DDM, {"ddm.thresold": [0.5]}, serial=True, output=out)
    # a value the model cannot take is found by compiling before anything runs
    with pytest.raises(stdops.StdopsError):
        sweep(DDM, {"stimulus.trials": ["nope("]}, serial=True, output=out)
    assert out.read_bytes() == before


def test_outputs_of_different_shapes_at_different_points_are_refused():
    with pytest.raises(SweepError, match=r"'ddm.signed_rt' has shape \(200,\) .* a sweep stacks values of one shape"):
        sweep(DDM, {"stimulus.trials": [100, 200]}, serial=True)


def test_an_output_that_is_an_int_at_one_point_and_a_float_at_another_is_stored_as_float():
    ds = sweep(DDM, {"stimulus.coherence": [0, 0.5], **SMALL}, serial=True)
    assert ds["stimulus.coherence_output"].dtype == np.float64
    np.testing.assert_array_equal(ds["stimulus.coherence_output"].values.ravel(), [0.0, 0.5])


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"inputs": "x.npz"}, "inputs .* apply to ONNX and ncnn"),
        ({"duration": 1.0}, "needs both duration and dt"),
        ({"resume": True}, "resume needs the output"),
        ({"output": "r.csv"}, "expected a .nc"),
        ({"serial": True, "workers": 2}, "workers sizes the local cluster"),
    ],
)
def test_bad_arguments(kwargs, needle):
    with pytest.raises(SweepError, match=needle):
        sweep(DDM, SMALL, **kwargs)


def test_onnx_options_that_do_not_apply_are_refused(tmp_path):
    with pytest.raises(SweepError, match="a grid applies to MDF models"):
        sweep(demo_model_path(), {"x": [1]}, inputs={"x": XOR_X}, serial=True)
    with pytest.raises(SweepError, match="seeds apply to MDF models"):
        sweep(demo_model_path(), seeds=3, inputs={"x": XOR_X}, serial=True)
    with pytest.raises(SweepError, match="give inputs"):
        sweep(demo_model_path(), serial=True)


def test_a_points_trials_run_as_arrays_in_one_job_not_one_task_per_trial():
    """The DDM draws all of a point's trials in one array call: the sweep keeps them one job (one task)."""
    reports = []
    ds = sweep(DDM, {"stimulus.trials": [5000]}, serial=True, progress=lambda d, t: reports.append((d, t)))
    assert reports == [(1, 1)]
    assert ds["ddm.signed_rt"].shape == (1, 1, 5000)
    rts = np.abs(ds["ddm.signed_rt"].values.ravel())
    assert np.unique(rts).size > 100 and (rts >= 0.2).all()  # 5000 separate trials, each after t0
