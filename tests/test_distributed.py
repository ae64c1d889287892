"""Sweeps: many runs of one model, in process or on a dask cluster."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stdops.distributed import sweep
from stdops.errors import StdopsError
from stdops.examples import demo_model_path

DDM = Path(__file__).resolve().parent.parent / "examples" / "mdf" / "ddm_decision.yaml"


def test_onnx_batch_sweep_in_process():
    xs = [np.array([[a, b]], np.float32) for a in (0, 1) for b in (0, 1)]
    results = sweep(demo_model_path(), [{"x": x} for x in xs])
    assert [int(r["label"][0]) for r in results] == [0, 1, 1, 0]


def test_mdf_parameter_sweep_changes_accuracy_and_is_seeded():
    jobs = [{"seed": 1, "parameters": {"stimulus.coherence": c}} for c in (0.05, 0.8)]
    low, high = sweep(DDM, jobs)
    assert high["ddm"]["accuracy"] > low["ddm"]["accuracy"]
    again = sweep(DDM, jobs[:1])[0]
    np.testing.assert_array_equal(again["ddm"]["signed_rt"], low["ddm"]["signed_rt"])
    with pytest.raises(StdopsError, match="no node 'nowhere'"):
        sweep(DDM, [{"parameters": {"nowhere.x": 1}}])


def test_dask_cluster():
    distributed = pytest.importorskip(
        "dask.distributed", reason="dask.distributed (the 'distributed' extra) is not installed"
    )
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2) as client:
        results = sweep(demo_model_path(), [{"x": np.array([[1, 0]], np.float32)}] * 3, client=client)
    assert [int(r["label"][0]) for r in results] == [1, 1, 1]
