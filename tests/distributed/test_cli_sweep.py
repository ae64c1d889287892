"""`stdops sweep` on the installed console script: what it writes, its bad inputs (one line, exit 2, nothing
overwritten), and an interrupted sweep (Ctrl-C) finished by --resume into the same file."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from stdops.distributed import sweep

from ..test_cli import _script, one_line_exit_2, stdops

xr = pytest.importorskip("xarray", reason="xarray (the 'distributed' extra) is not installed")
pytest.importorskip("h5netcdf", reason="h5netcdf (the 'distributed' extra) is not installed")

ROOT = Path(__file__).resolve().parents[2]
DDM = str(ROOT / "examples" / "mdf" / "ddm_decision.yaml")
OSC = str(ROOT / "examples" / "mdf" / "oscillator.yaml")
XOR = str(ROOT / "examples" / "xor_mlp.onnx")


def test_an_mdf_grid_in_order_with_seeds_on_its_own_local_cluster(tmp_path):
    out = tmp_path / "r.nc"
    r = stdops(
        "sweep", DDM, "--values", "stimulus.trials=200", "--grid", "ddm.threshold=0.5:1:3", "--seeds", "2",
        "--workers", "2", "-o", str(out),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout and "ddm.accuracy" in r.stdout
    assert "dask dashboard: http://" in r.stderr
    here = sweep(DDM, [("stimulus.trials", [200]), ("ddm.threshold", [0.5, 0.75, 1.0])], seeds=2, serial=True)
    with xr.open_dataset(out, engine="h5netcdf") as ds:
        for name in here.data_vars:  # the cluster's runs, bit for bit
            assert ds[name].values.tobytes() == here[name].values.tobytes(), name
        assert ds["ddm.accuracy"].dims == ("stimulus.trials", "ddm.threshold", "seed")
        np.testing.assert_array_equal(ds["ddm.threshold"].values, [0.5, 0.75, 1.0])
        assert ds.attrs["command"].startswith("stdops sweep ") and "--serial" not in ds.attrs["command"]
        # a higher threshold: slower, more accurate decisions
        rt = ds["ddm.mean_rt"].mean("seed").values[0]
        assert rt[0] < rt[1] < rt[2]


def test_an_onnx_batch_from_a_folder(tmp_path):
    folder = tmp_path / "xs"
    folder.mkdir()
    for name, x in (("a", [0, 1]), ("b", [1, 1])):
        np.save(folder / f"{name}.npy", np.array([x], np.float32))
    out = tmp_path / "r.zarr"
    r = stdops("sweep", XOR, "--inputs", str(folder), "--serial", "-o", str(out))
    assert r.returncode == 0, r.stderr
    with xr.open_zarr(out) as ds:
        assert list(ds["sample"].values) == ["a", "b"]
        np.testing.assert_array_equal(ds["label"].values.ravel(), [1, 0])  # XOR


@pytest.mark.parametrize(
    "args, needles",
    [
        (
            ("--grid", "stimulus.coherenc=0:1:3"),
            ("no parameter 'stimulus.coherenc'", "did you mean stimulus.coherence"),
        ),
        (("--grid", "stimulus.coherence=0:1:0"), ("a grid of 0 points",)),
        (("--values", "ddm.threshold="), ("no point to run",)),
        (("--duration", "1"), ("--duration and --dt go together",)),
        (("--inputs", "x.npz"), ("--inputs applies to ONNX and NCNN models",)),
        (("--workers", "2", "--serial"), ("not allowed with argument",)),
    ],
)
def test_bad_mdf_sweeps_are_one_line_exit_2_and_write_nothing(tmp_path, args, needles):
    out = tmp_path / "r.nc"
    one_line_exit_2(stdops("sweep", DDM, *args, "-o", str(out)), *needles)
    assert not out.exists()


@pytest.mark.parametrize(
    "args, needles",
    [
        (("--grid", "x=0:1:2"), ("--grid applies to MDF models",)),
        (("--seeds", "3"), ("--seeds applies to MDF models",)),
        ((), ("give --inputs",)),
    ],
)
def test_options_that_do_not_apply_to_onnx_are_refused(tmp_path, args, needles):
    one_line_exit_2(stdops("sweep", XOR, *args, "-o", str(tmp_path / "r.nc")), *needles)


def test_an_output_that_is_not_nc_or_zarr_is_refused(tmp_path):
    one_line_exit_2(stdops("sweep", DDM, "-o", str(tmp_path / "r.csv")), "expected a .nc (netCDF) or .zarr")
    one_line_exit_2(stdops("sweep", DDM, "-o", str(tmp_path / "no" / "r.nc")), "does not exist")


def test_an_unreachable_scheduler_is_a_timeout_and_one_line(tmp_path):
    t0 = time.monotonic()
    r = stdops("sweep", OSC, "--scheduler", "tcp://127.0.0.1:9", "--timeout", "1", "-o", str(tmp_path / "r.nc"))
    one_line_exit_2(r, "cannot reach the scheduler within 1 s")
    assert time.monotonic() - t0 < 30
    assert not (tmp_path / "r.nc").exists()


def test_resume_with_another_models_file_is_refused_and_leaves_it(tmp_path):
    out = tmp_path / "r.nc"
    sweep(DDM, {"stimulus.trials": [100]}, serial=True, output=out)
    before = out.read_bytes()
    r = stdops("sweep", OSC, "--serial", "--resume", "-o", str(out))
    one_line_exit_2(r, "holds results of another model", "nothing was changed")
    assert out.read_bytes() == before


def test_ctrl_c_then_resume_gives_the_same_file_as_an_uninterrupted_sweep(tmp_path):
    """Both runs write r.nc in their own folder with the same command, so the files can be compared byte for
    byte; the interrupted one is stopped with SIGINT once its first checkpoint exists."""
    args = ["sweep", DDM, "--grid", "stimulus.coherence=0.1:0.5:5", "--values", "stimulus.trials=5000", "--seeds", "3"]
    args += ["--serial", "-o", "r.nc"]
    whole, part = tmp_path / "whole", tmp_path / "part"
    whole.mkdir()
    part.mkdir()
    assert stdops(*args, cwd=whole).returncode == 0
    proc = subprocess.Popen(
        [_script(), *args, "--checkpoint-seconds", "0.01"], cwd=part, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while not (part / "r.nc").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 130 and "runs saved in r.nc" in err:
        with xr.open_dataset(part / "r.nc", engine="h5netcdf") as ds:
            assert 0 < int(ds.attrs["jobs_done"]) < 15 and int(ds.attrs["complete"]) == 0
    else:  # the machine was quick enough to finish the sweep first (the signal, if any, came after it)
        assert proc.returncode in (0, 130), err
        assert "runs saved" not in err, err
    r = stdops(*args, "--resume", cwd=part)
    assert r.returncode == 0, r.stderr
    assert (part / "r.nc").read_bytes() == (whole / "r.nc").read_bytes()
